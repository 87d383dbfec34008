#!/usr/bin/python3
"""PyTorch columns for `nconv bench`: times each problem of an `nconv bench --csv`
table through PyTorch (Debian's python3-torch) and prints the table joined with
them.

    nconv bench --csv --threads 1 --batch ../shared/suites/public.txt > nconv.csv
    /usr/bin/python3 bench/torch_bench.py nconv.csv [--markdown] [--dtype f32|f64|f16|bf16|c64|c128]
                                          [--device cuda]

PyTorch runs F.conv{1,2,3}d / conv_transpose{1,2,3}d (fwd, with bias) and
aten::convolution_backward (bwd_d: grad_input; bwd_w: grad_weight and
grad_bias), in the row's layout (nchw: contiguous, nhwc: channels_last), with
the row's thread count; one warm-up, then the median of runs lasting at least
0.4 s (5 runs at least), as nconv bench times itself. --dtype names the dtype the
table was measured in (nconv bench --dtype; f32 when not given).

--device cuda times a table of `nconv bench --device cuda` on CUDA device 0:
cuDNN with TF32 off and deterministic algorithms (nconv's CUDA defaults), no
cudnn.benchmark, each time the median of five batches of back-to-back calls
lasting about 20 ms between CUDA events, after two warm-up calls, as nconv
bench times its CUDA rows.
"""
import csv
import math
import re
import statistics
import sys
import time

import torch
import torch.nn.functional as F


def parse_desc(desc):
    """nconv's canonical descriptor (as printed by nconv bench) -> dict."""
    transposed = desc.startswith("--transposed ")
    d = desc.replace("--transposed ", "")
    vals = dict((k, int(v)) for k, v in re.findall(r"([a-z]+?)(\d+)", d.replace("_", "")))
    dims = [a for a in "dhw" if ("i" + a) in vals]
    get = lambda p: [vals[p + a] for a in dims]
    return dict(transposed=transposed, g=vals["g"], mb=vals["mb"], ic=vals["ic"], oc=vals["oc"],
                i=get("i"), o=get("o"), k=get("k"), s=get("s"), p=get("p"), d=[x + 1 for x in get("d")])


def timed_cuda(fn):
    fn()
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def batch(reps):
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)
    one = batch(1)
    reps = max(1, min(2000, int(20.0 / one) if one > 0 else 2000))
    return statistics.median(batch(reps) for _ in range(5)) / reps


def timed(fn, device="cpu"):
    if device == "cuda":
        return timed_cuda(fn)
    fn()
    times = []
    while len(times) < 5 or sum(times) < 0.4:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if len(times) >= 100:
            break
    return 1e3 * statistics.median(times)


DTYPES = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
          "c64": torch.complex64, "c128": torch.complex128}


def torch_ms(pr, direction, layout, threads, dtype=torch.float32, device="cpu"):
    torch.set_num_threads(threads)
    nd = len(pr["i"])
    fmt = {1: torch.contiguous_format, 2: torch.channels_last, 3: torch.channels_last_3d}[nd]
    fmt = torch.contiguous_format if layout == "nchw" or nd == 1 else fmt
    g = pr["g"]
    x = torch.randn(pr["mb"], pr["ic"], *pr["i"], dtype=dtype, device=device).contiguous(memory_format=fmt)
    if pr["transposed"]:
        w = torch.randn(pr["ic"], pr["oc"] // g, *pr["k"], dtype=dtype, device=device).contiguous(memory_format=fmt)
        ext = [pr["d"][a] * (pr["k"][a] - 1) + 1 for a in range(nd)]
        natural = [(pr["i"][a] - 1) * pr["s"][a] - 2 * pr["p"][a] + ext[a] for a in range(nd)]
        op = [pr["o"][a] - natural[a] for a in range(nd)]
        if any(v < 0 or v >= max(pr["s"][a], pr["d"][a]) for a, v in enumerate(op)):
            return None  # not expressible with symmetric padding
        fwd = lambda: getattr(F, "conv_transpose%dd" % nd)(x, w, b, pr["s"], pr["p"], op, g, pr["d"])
    else:
        w = torch.randn(pr["oc"], pr["ic"] // g, *pr["k"], dtype=dtype, device=device).contiguous(memory_format=fmt)
        op = [0] * nd
        ext = [pr["d"][a] * (pr["k"][a] - 1) + 1 for a in range(nd)]
        if any((pr["i"][a] + 2 * pr["p"][a] - ext[a]) // pr["s"][a] + 1 != pr["o"][a] for a in range(nd)):
            return None
        fwd = lambda: getattr(F, "conv%dd" % nd)(x, w, b, pr["s"], pr["p"], pr["d"], g)
    b = torch.randn(pr["oc"], dtype=dtype, device=device)
    with torch.no_grad():
        y = fwd()
        if direction == "fwd":
            return timed(fwd, device)
        dy = torch.randn_like(y).contiguous(memory_format=fmt)
        if dtype.is_complex:
            # aten's convolution_backward has no complex kernel: autograd composes real convolutions.
            # Timed as forward + grad, less the forward alone.
            leaf = x if direction == "bwd_d" else w
            leaf.requires_grad_(True)

            def step():
                with torch.enable_grad():
                    return torch.autograd.grad(fwd(), [leaf], dy)
            return timed(step) - timed(fwd)
        mask = [True, False, False] if direction == "bwd_d" else [False, True, True]
        bwd = lambda: torch.ops.aten.convolution_backward(dy, x, w, [pr["oc"]], pr["s"], pr["p"], pr["d"],
                                                          pr["transposed"], op, g, mask)
        return timed(bwd, device)


def main():
    rows = list(csv.DictReader(open(sys.argv[1])))
    markdown = "--markdown" in sys.argv
    dtype = DTYPES[sys.argv[sys.argv.index("--dtype") + 1]] if "--dtype" in sys.argv else torch.float32
    device = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else "cpu"
    if device == "cuda":
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
    cols = ["name", "dir", "layout", "threads", "algo", "ms", "gflops", "peak_pct", "onednn_ms", "onednn_impl",
            "ratio", "torch_ms", "ratio_torch"]
    if markdown:
        print("| " + " | ".join(cols) + " |")
        print("|" + "---|" * len(cols))
    else:
        print(",".join(cols))
    for r in rows:
        try:
            t = torch_ms(parse_desc(r["desc"]), r["dir"], r["layout"], int(r["threads"]), dtype, device)
        except RuntimeError:  # a dtype PyTorch's CPU convolution lacks
            t = None
        r["torch_ms"] = "%.3f" % t if t else ""
        r["ratio_torch"] = "%.2f" % (t / float(r["ms"])) if t else ""
        line = [r[c] for c in cols]
        print(("| " + " | ".join(line) + " |") if markdown else ",".join(line))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
