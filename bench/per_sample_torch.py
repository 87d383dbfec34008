#!/usr/bin/python3
"""PyTorch peers for `nconv bench --per-sample`: per-sample weight and bias
gradients of a minibatch through functorch's vmap(grad(...)) and through the
Opacus recipe (unfold + einsum; groups 1, not transposed), joined with nconv's
times.

    nconv bench --per-sample --csv --threads 1 --batch ../shared/suites/public.txt > ps.csv
    /usr/bin/python3 bench/per_sample_torch.py ps.csv [--markdown] [--nconv build/nconv [--rounds 3]]

Columns: nconv per-sample ms, functorch ms, Opacus ms, PyTorch whole-batch
backward-weights ms, and speedup = min(functorch, Opacus) / nconv (> 1: nconv
is faster). Timing as nconv bench: one warm-up, median of runs lasting at least
5 runs and 0.4 s, with the row's thread count.

Without --nconv the nconv column is the csv's. With --nconv BIN, every row is
measured in rounds (default 3): nconv (BIN bench --per-sample on the row's
descriptor), then the PyTorch peers; each column is the best of its rounds'
medians. Turns taken close together see the same drift of a shared machine,
where timings taken minutes apart differ by up to 2x.
"""
import csv
import math
import os
import subprocess
import sys

import torch
import torch.nn.functional as F
from functorch import grad, vmap

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_bench import parse_desc, timed  # noqa: E402  (the same descriptor reading and timing)


def peers(pr, threads):
    torch.set_num_threads(threads)
    nd, g, B = len(pr["i"]), pr["g"], pr["mb"]
    x = torch.randn(B, pr["ic"], *pr["i"])
    if pr["transposed"]:
        w = torch.randn(pr["ic"], pr["oc"] // g, *pr["k"])
        ext = [pr["d"][a] * (pr["k"][a] - 1) + 1 for a in range(nd)]
        op = [pr["o"][a] - ((pr["i"][a] - 1) * pr["s"][a] - 2 * pr["p"][a] + ext[a]) for a in range(nd)]
        conv = lambda xx, ww, bb: getattr(F, "conv_transpose%dd" % nd)(xx, ww, bb, pr["s"], pr["p"], op, g, pr["d"])
    else:
        w = torch.randn(pr["oc"], pr["ic"] // g, *pr["k"])
        op = [0] * nd
        conv = lambda xx, ww, bb: getattr(F, "conv%dd" % nd)(xx, ww, bb, pr["s"], pr["p"], pr["d"], g)
    b = torch.randn(pr["oc"])
    dy = torch.randn_like(conv(x, w, b))

    def loss(ww, bb, xi, dyi):
        return (conv(xi[None], ww, bb) * dyi[None]).sum()

    per_sample = vmap(grad(loss, argnums=(0, 1)), in_dims=(None, None, 0, 0))
    with torch.no_grad():
        t_functorch = timed(lambda: per_sample(w, b, x, dy))
        t_whole = timed(lambda: torch.ops.aten.convolution_backward(dy, x, w, [pr["oc"]], pr["s"], pr["p"], pr["d"],
                                                                   pr["transposed"], op, g, [False, True, True]))
        t_opacus = None
        if g == 1 and not pr["transposed"]:
            x4 = x if nd == 2 else x.unsqueeze(2)
            k2 = pr["k"] if nd == 2 else [1] + pr["k"]
            pad2 = pr["p"] if nd == 2 else [0] + pr["p"]
            s2 = pr["s"] if nd == 2 else [1] + pr["s"]
            d2 = pr["d"] if nd == 2 else [1] + pr["d"]

            def opacus():
                cols = F.unfold(x4, k2, dilation=d2, padding=pad2, stride=s2)  # (B, C*k, L)
                g_out = dy.reshape(B, pr["oc"], -1)                              # (B, O, L)
                return torch.einsum("bol,bkl->bok", g_out, cols), g_out.sum(2)
            t_opacus = timed(opacus)
    return t_functorch, t_opacus, t_whole


def nconv_ms(binary, r):
    """One `nconv bench --per-sample` run of the row's problem: its per-sample ms."""
    args = [binary, "bench", "--per-sample", "--csv", "--threads", r["threads"]] + r["desc"].split(" ", 1)
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return float(list(csv.DictReader(out.splitlines()))[0]["per_sample_ms"])


def option(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def main():
    rows = list(csv.DictReader(open(sys.argv[1])))
    md = "--markdown" in sys.argv
    binary = option("--nconv", None)
    rounds = int(option("--rounds", "3")) if binary else 1
    cols = ["name", "samples", "threads", "nconv_ms", "functorch_ms", "opacus_ms", "torch_whole_bwd_w_ms", "speedup"]
    print(("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols)) if md else ",".join(cols))
    speedups = []
    for r in rows:
        tn = float(r["per_sample_ms"])
        tf = to = tw = None
        for k in range(rounds):
            if binary:
                t = nconv_ms(binary, r)
                tn = t if k == 0 else min(tn, t)
            f, o, w = peers(parse_desc(r["desc"]), int(r["threads"]))
            tf, tw = (f, w) if k == 0 else (min(tf, f), min(tw, w))
            to = o if k == 0 or o is None else min(to, o)
        best = min(t for t in (tf, to) if t is not None)
        sp = best / tn
        speedups.append(sp)
        vals = [r["name"], r["samples"], r["threads"], "%.3f" % tn, "%.3f" % tf, "%.3f" % to if to else "",
                "%.3f" % tw, "%.2f" % sp]
        print(("| " + " | ".join(vals) + " |") if md else ",".join(vals))
        sys.stdout.flush()
    geo = math.exp(sum(math.log(s) for s in speedups) / len(speedups))
    print("\ngeometric-mean speedup %.2f, lowest %.2f" % (geo, min(speedups)))


if __name__ == "__main__":
    main()
