"""nconv's CUDA path against PyTorch's CUDA convolution (cuDNN with TF32 off and
deterministic algorithms): random problems in every dtype, 1-3 spatial dims,
groups, stride, dilation, padding, transposed with output padding, NCHW and
channels-last, bias, z with alpha, relu; forward and every backward output
(autograd through torch.nn.functional).

    PYTHONPATH=python NCONV_LIBRARY=build/libnconv.so python3 tests/gpu/torch_check.py [PROBLEMS] [SEED] [--cpu]

Prints a line per failure and "N passed, N failed"; exits 77 without a CUDA device.
--cpu runs the same comparison on the CPU (nconv's CPU context against PyTorch's CPU
convolution, f32 and f64): the script's own check where no device is present.
"""
import ctypes
import random
import sys

import torch
import torch.nn.functional as F

from nconv import _lib as L

TOL = {torch.float32: 1e-4, torch.float64: 1e-10, torch.float16: 1e-2, torch.bfloat16: 4e-2}
DT = {torch.float32: L.F32, torch.float64: L.F64, torch.float16: L.F16, torch.bfloat16: L.BF16}


def tensor(t):
    s = L.Tensor()
    s.data = t.data_ptr() if t.numel() else None
    for i, st in enumerate(t.stride()):
        s.stride[i] = st
    return s


def error(got, ref):
    ref, got = ref.double(), got.double()
    return ((got - ref).abs().max() / max(1.0, ref.abs().max().item())).item() if ref.numel() else 0.0


def main():
    cpu = "--cpu" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--cpu"]
    count = int(args[0]) if args else 200
    rng = random.Random(int(args[1]) if len(args) > 1 else 5)
    ctx = ctypes.c_void_p()
    dtypes = list(TOL)
    if cpu:
        dev = torch.device("cpu")
        dtypes = [torch.float32, torch.float64]  # PyTorch 1.13's CPU convolution lacks f16
        L.check(L.lib.nconv_context_create(ctypes.byref(ctx)))
    else:
        if not torch.cuda.is_available():
            print("SKIP: torch sees no CUDA device")
            return 77
        dev = torch.device("cuda")
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.deterministic = True
        if L.lib.nconv_context_create_cuda(ctypes.byref(ctx), torch.cuda.current_device()):
            print("SKIP:", L.lib.nconv_last_error().decode())
            return 77
        stream = torch.cuda.current_stream().cuda_stream
        L.check(L.lib.nconv_context_set_stream(ctx, ctypes.c_void_p(stream)))
    passed = failed = 0
    while passed + failed < count:
        nd = rng.randint(1, 3)
        dtype = rng.choice(dtypes)
        g = rng.choice([1, 1, 2, 3])
        ic = g * (1 if rng.random() < 0.25 else rng.randint(1, 5))
        oc = g * rng.randint(1, 5)
        transposed = rng.random() < 0.3
        n = rng.randint(1, 3)
        size = [rng.randint(3, 7 if nd == 3 else 12) for _ in range(nd)]
        k = [rng.randint(1, 4) for _ in range(nd)]
        s = [rng.randint(1, 3) for _ in range(nd)]
        d = [rng.randint(1, 2) for _ in range(nd)]
        pad = [rng.randint(0, 2) for _ in range(nd)]
        op = [rng.randint(0, max(s[i], d[i]) - 1) if transposed else 0 for i in range(nd)]
        p = L.Problem()
        L.lib.nconv_problem_init(ctypes.byref(p), nd)
        p.batch, p.in_channels, p.out_channels, p.groups = n, ic, oc, g
        p.transposed, p.dtype = int(transposed), DT[dtype]
        for i in range(nd):
            p.in_size[i], p.kernel[i], p.stride[i], p.dilation[i] = size[i], k[i], s[i], d[i]
            p.pad_begin[i] = p.pad_end[i] = pad[i]
            p.output_padding[i] = op[i]
        mode = rng.choice(["zeros"] * 3 + ["reflect", "replicate", "circular"]) if not transposed else "zeros"
        p.padding_mode = L.PAD_MODES[mode]
        if L.lib.nconv_problem_validate(ctypes.byref(p)):
            continue
        last = rng.random() < 0.5 and nd > 1
        fmt = {2: torch.channels_last, 3: torch.channels_last_3d}.get(nd) if last else torch.contiguous_format
        x = torch.randn(n, ic, *size, dtype=dtype, device=dev).contiguous(memory_format=fmt).requires_grad_()
        wshape = (ic, oc // g, *k) if transposed else (oc, ic // g, *k)
        w = torch.randn(*wshape, dtype=dtype, device=dev).requires_grad_()
        b = torch.randn(oc, dtype=dtype, device=dev).requires_grad_() if rng.random() < 0.5 else None
        relu = rng.random() < 0.5
        if transposed:
            pre = getattr(F, "conv_transpose%dd" % nd)(x, w, b, s, pad, op, g, d)
        elif mode != "zeros":  # as torch.nn.ConvNd with padding_mode: pad, then convolve unpadded
            pads = [v for a in reversed(range(nd)) for v in (pad[a], pad[a])]
            pre = getattr(F, "conv%dd" % nd)(F.pad(x, pads, mode=mode), w, b, s, 0, d, g)
        else:
            pre = getattr(F, "conv%dd" % nd)(x, w, b, s, pad, d, g)
        z = torch.randn_like(pre).requires_grad_() if rng.random() < 0.5 else None
        alpha = rng.uniform(-1, 1) if z is not None else 1.0
        if z is not None:
            pre = pre + alpha * z
        y_ref = torch.relu(pre) if relu else pre
        dy = torch.randn_like(y_ref)
        grads = torch.autograd.grad(y_ref, [t for t in (x, w, b, z) if t is not None], dy)
        ref = dict(zip([nm for nm, t in (("dx", x), ("dw", w), ("db", b), ("dz", z)) if t is not None], grads))
        epi = L.Epilogue(L.ACT_RELU if relu else L.ACT_IDENTITY, alpha)
        y = torch.empty_like(y_ref)
        xt, wt, yt = tensor(x.detach()), tensor(w.detach()), tensor(y)
        bt = tensor(b.detach()) if b is not None else None
        zt = tensor(z.detach()) if z is not None else None
        P = lambda t: ctypes.byref(t) if t is not None else None
        name = "nd%d %s g%d ic%d oc%d n%d size%s k%s s%s d%s p%s op%s %s%s%s%s%s" % (
            nd, str(dtype)[6:], g, ic, oc, n, size, k, s, d, pad, op, mode, " transposed" if transposed else "",
            " channels_last" if last else "", " relu" if relu else "", " bias" if b is not None else "")
        st = L.lib.nconv_forward(ctx, ctypes.byref(p), ctypes.byref(epi), P(xt), P(wt), P(bt), P(zt), P(yt), None, 0)
        outs = {nm: torch.empty_like(t) for nm, t in ref.items()}
        o = {nm: tensor(t) for nm, t in outs.items()}
        # y for relu's mask: PyTorch's, so that both sides mask the same elements
        st2 = st or L.lib.nconv_backward(ctx, ctypes.byref(p), ctypes.byref(epi), P(xt), P(wt),
                                         P(tensor(y_ref.detach())), P(tensor(dy)), P(o.get("dx")), P(o.get("dw")),
                                         P(o.get("db")), P(o.get("dz")), None, 0)
        if not cpu:
            torch.cuda.synchronize()
        if st or st2:
            failed += 1
            print("FAIL", name, L.lib.nconv_last_error().decode())
            continue
        errs = {"y": error(y, y_ref.detach())}
        errs.update({nm: error(outs[nm], ref[nm]) for nm in ref})
        bad = {nm: e for nm, e in errs.items() if not e <= TOL[dtype]}
        if bad:
            failed += 1
            print("FAIL", name, " ".join("%s %.3g" % kv for kv in bad.items()))
        else:
            passed += 1
    L.lib.nconv_context_destroy(ctx)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
