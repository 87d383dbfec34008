#!/usr/bin/python3
"""One training step of torchvision models, with their convolutions on torch's own engine and on nconv
(nconv.torch.patch), side by side: forward, cross-entropy loss, backward, SGD step.

    NCONV_LIBRARY=build/libnconv.so PYTHONPATH=python /usr/bin/python3 bench/train_step.py \\
        [--models resnet18,mobilenet_v2,efficientnet_b0] [--batch 8] [--size 224] [--threads 1,2] [--steps 5]

For each model, layout (NCHW, channels_last) and thread count: one warm-up step each, then STEPS steps
alternating torch and nconv; prints the median step time of each and torch's / nconv's (> 1: the
patched model trains faster), as a markdown table.
"""
import argparse
import copy
import statistics
import time

import torch
import torchvision
from torch import nn

import nconv.torch


def step(model, opt, x, y):
    t0 = time.perf_counter()
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--models', default='resnet18,mobilenet_v2,efficientnet_b0')
    ap.add_argument('--batch', type=int, default=8)
    ap.add_argument('--size', type=int, default=224)
    ap.add_argument('--threads', default='1,2')
    ap.add_argument('--steps', type=int, default=5)
    a = ap.parse_args()
    print('| model | layout | threads | torch s/step | nconv s/step | torch / nconv |')
    print('|---|---|---|---|---|---|')
    for name in a.models.split(','):
        for layout in ('nchw', 'channels_last'):
            for threads in (int(t) for t in a.threads.split(',')):
                torch.set_num_threads(threads)
                torch.manual_seed(0)
                plain = getattr(torchvision.models, name)()
                patched = nconv.torch.patch(copy.deepcopy(plain))
                x = torch.randn(a.batch, 3, a.size, a.size)
                y = torch.randint(0, 1000, (a.batch,))
                if layout == 'channels_last':
                    plain, patched = (m.to(memory_format=torch.channels_last) for m in (plain, patched))
                    x = x.contiguous(memory_format=torch.channels_last)
                runs = {}
                for key, m in (('torch', plain), ('nconv', patched)):
                    runs[key] = (m, torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9), [])
                    step(m, runs[key][1], x, y)  # warm-up
                for _ in range(a.steps):
                    for key in ('torch', 'nconv'):
                        m, opt, times = runs[key]
                        times.append(step(m, opt, x, y))
                t_torch, t_nconv = (statistics.median(runs[k][2]) for k in ('torch', 'nconv'))
                print('| %s | %s | %d | %.3f | %.3f | %.2f |' % (name, layout, threads, t_torch, t_nconv,
                                                                  t_torch / t_nconv), flush=True)


if __name__ == '__main__':
    main()
