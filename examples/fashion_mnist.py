#!/usr/bin/python3
"""A small CNN on Fashion-MNIST in PyTorch, with its convolutions on nconv (nconv.torch.patch) or on
torch's own, the same network as examples/fashion_mnist.c:

    conv 3x3, 16 + relu -> max pool 2 -> conv 3x3, 32 + relu -> max pool 2 -> linear 1568 -> 10

    fashion_mnist.py [--data DIR] [--epochs E] [--threads T] [--engine nconv|torch|both]
        trains for E epochs (default 3) and prints each epoch's loss, test accuracy and time;
        --engine both trains both from the same seed, one epoch each in turn.
    fashion_mnist.py --compare STEPS [--tolerance T]
        trains both from the same seed on the same batches for STEPS steps, with torch in f64 as the
        reference, and checks their losses step by step (see compare()); exit status 1 if not.

Reads the gzipped IDX files of Debian's dataset-fashion-mnist; exit status 77 without them.
Run with NCONV_LIBRARY=build/libnconv.so PYTHONPATH=python /usr/bin/python3.
"""
import argparse
import copy
import gzip
import os
import sys
import time

import numpy as np
import torch
from torch import nn

import nconv.torch

MEAN, STD = 0.2860, 0.3530  # of a training pixel


def load(data, prefix):
    with gzip.open(os.path.join(data, prefix + '-images-idx3-ubyte.gz')) as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
    with gzip.open(os.path.join(data, prefix + '-labels-idx1-ubyte.gz')) as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)
    x = (torch.from_numpy(images.astype(np.float32)) / 255 - MEAN) / STD
    return x, torch.from_numpy(labels.astype(np.int64))


def network():
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(32 * 7 * 7, 10))


class Trainer:
    def __init__(self, model, lr, batch):
        self.model, self.batch = model, batch
        self.opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
        self.loss = nn.CrossEntropyLoss()

    def step(self, x, y):
        self.opt.zero_grad()
        loss = self.loss(self.model(x), y)
        loss.backward()
        self.opt.step()
        return loss.item()

    def epoch(self, x, y, order):
        t0, total, steps = time.perf_counter(), 0.0, 0
        for first in range(0, len(order) - self.batch + 1, self.batch):
            idx = order[first:first + self.batch]
            total += self.step(x[idx], y[idx])
            steps += 1
        return total / steps, time.perf_counter() - t0

    @torch.no_grad()
    def accuracy(self, x, y):
        correct = sum((self.model(x[i:i + 1000]).argmax(1) == y[i:i + 1000]).sum().item()
                      for i in range(0, len(x), 1000))
        return 100.0 * correct / len(x)


def models(seed, lr, batch):
    torch.manual_seed(seed)
    plain = network()
    return {'torch': Trainer(plain, lr, batch), 'nconv': Trainer(nconv.torch.patch(copy.deepcopy(plain)), lr, batch)}


def compare(a, trainers, x, y, order):
    """Both f32 trainings, and torch's in f64 as the reference, on the same batches. Rounding differs
    between any two f32 engines and training amplifies it, so the criterion is: over the first EARLY
    steps the two f32 losses agree within the tolerance, and at no step is nconv's loss further from
    the f64 one than twice the largest distance torch's f32 loss reaches (plus the tolerance / 10)."""
    torch.manual_seed(a.seed)
    exact = Trainer(network().double(), a.lr, a.batch)
    exact.model.load_state_dict(trainers['torch'].model.state_dict())
    early = worst_torch = worst_nconv = 0.0
    for step in range(a.compare):
        idx = order[step * a.batch:(step + 1) * a.batch]
        losses = {name: t.step(x[idx], y[idx]) for name, t in trainers.items()}
        ref = exact.step(x[idx].double(), y[idx])
        diff = abs(losses['nconv'] - losses['torch']) / ref
        if step < EARLY:
            early = max(early, diff)
        worst_torch = max(worst_torch, abs(losses['torch'] - ref) / ref)
        worst_nconv = max(worst_nconv, abs(losses['nconv'] - ref) / ref)
        if step % 50 == 0 or step == a.compare - 1:
            print('step %4d: loss f64 %.6f, torch %.6f, nconv %.6f (nconv - torch: %.1e relative)'
                  % (step, ref, losses['torch'], losses['nconv'], diff))
    ok_early = early <= a.tolerance
    ok_all = worst_nconv <= 2 * worst_torch + a.tolerance / 10
    print('first %d steps: largest relative difference nconv - torch %.2e (tolerance %.0e): %s'
          % (min(EARLY, a.compare), early, a.tolerance, 'ok' if ok_early else 'FAIL'))
    print('%d steps: largest relative distance from the f64 loss: torch %.2e, nconv %.2e: %s'
          % (a.compare, worst_torch, worst_nconv, 'ok' if ok_all else 'FAIL'))
    return 0 if ok_early and ok_all else 1


EARLY = 50


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--data', default='/usr/share/datasets/fashion-mnist')
    ap.add_argument('--epochs', type=int, default=3)
    ap.add_argument('--threads', type=int, default=1)
    ap.add_argument('--batch', type=int, default=64)
    ap.add_argument('--lr', type=float, default=0.02)
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--engine', choices=['nconv', 'torch', 'both'], default='nconv')
    ap.add_argument('--compare', type=int, metavar='STEPS')
    ap.add_argument('--tolerance', type=float, default=1e-3)
    a = ap.parse_args()
    if not os.path.exists(os.path.join(a.data, 'train-images-idx3-ubyte.gz')):
        print('fashion_mnist.py: no Fashion-MNIST in %s (Debian: dataset-fashion-mnist)' % a.data, file=sys.stderr)
        return 77
    torch.set_num_threads(a.threads)
    x, y = load(a.data, 'train')
    tx, ty = load(a.data, 't10k')
    trainers = models(a.seed, a.lr, a.batch)
    gen = torch.Generator().manual_seed(a.seed)
    if a.compare:
        return compare(a, trainers, x, y, torch.randperm(len(x), generator=gen))
    engines = ['torch', 'nconv'] if a.engine == 'both' else [a.engine]
    print('Fashion-MNIST: %d training and %d test images, batch %d, SGD lr %g momentum 0.9, %d thread%s'
          % (len(x), len(tx), a.batch, a.lr, a.threads, 's' if a.threads > 1 else ''))
    for e in range(1, a.epochs + 1):
        order = torch.randperm(len(x), generator=gen)
        for name in engines:
            loss, seconds = trainers[name].epoch(x, y, order)
            print('epoch %d/%d, %s: train loss %.4f, test accuracy %.2f%%, %.1f s'
                  % (e, a.epochs, name, loss, trainers[name].accuracy(tx, ty), seconds), flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
