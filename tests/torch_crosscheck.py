#!/usr/bin/python3
"""Cross-check of `nconv compute` against PyTorch (Debian's python3-torch).

Usage: torch_crosscheck.py NCONV_BINARY [--quick]

Each case writes .npy inputs, runs `nconv compute`, and compares every output
file with PyTorch autograd on the same inputs (rounded to the compute dtype
first), evaluated in float64: err = max|nconv - torch| / max|torch|.
Tolerances: f64 and c128 1e-10, f32 and c64 1e-4, f16 5e-3, bf16 3e-2. Complex
gradients follow PyTorch's convention (dL/d(re) + i dL/d(im) of the real loss
Re<y, dy>).
Prints one line per case and a final "N passed, N failed" line.
"""
import itertools
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F
import torch.autograd.forward_ad as fwAD

from report import Report

TOL = {"f64": 1e-10, "f32": 1e-4, "f16": 5e-3, "bf16": 3e-2, "c128": 1e-10, "c64": 1e-4}
NP_DTYPE = {"f64": np.float64, "f32": np.float32, "f16": np.float16, "bf16": np.float32, "c128": np.complex128,
            "c64": np.complex64}
COMPLEX = ("c64", "c128")


def round_to(a, dtype):
    """Values as nconv stores them in the compute dtype, as float64 (complex: complex128)."""
    if dtype in COMPLEX:
        t = torch.from_numpy(np.asarray(a, dtype=np.complex128))
        return t.to(torch.complex64).to(torch.complex128) if dtype == "c64" else t
    t = torch.from_numpy(np.asarray(a, dtype=np.float64))
    if dtype == "f16":
        t = t.half()
    elif dtype == "bf16":
        t = t.bfloat16()
    elif dtype == "f32":
        t = t.float()
    return t.double()


def complex_of(conv):
    """conv on complex operands as four real convolutions (with autograd)."""
    def f(x, w, b, **kw):
        re = conv(x.real, w.real, None, **kw) - conv(x.imag, w.imag, None, **kw)
        im = conv(x.real, w.imag, None, **kw) + conv(x.imag, w.real, None, **kw)
        return torch.complex(re, im)
    return f


def fused(case, x, w, b, z):
    """act(conv(x, w) + b + alpha * z) with the case's geometry, in torch's own ops."""
    nd = w.dim() - 2
    unbatched = x.dim() == nd + 1
    xb = x.unsqueeze(0) if unbatched else x
    s, d, g = case["stride"], case["dilation"], case["groups"]
    pb, pe = case["pad_begin"], case["pad_end"]
    if not case["transposed"]:
        conv = getattr(F, "conv%dd" % nd)
        pads = []
        for i in reversed(range(nd)):
            pads += [pb[i], pe[i]]
        mode = case["mode"]
        if mode == "zeros":
            xp = F.pad(xb, pads)
        else:
            xp = F.pad(xb, pads, mode=mode)
        y = conv(xp, w, None, stride=s, dilation=d, groups=g)
    else:
        convt = getattr(F, "conv_transpose%dd" % nd)
        if x.is_complex():  # torch 1.13's CPU transposed convolution has no complex kernel: four real ones
            convt = complex_of(convt)
        y = convt(xb, w, None, stride=s, padding=0, output_padding=0, groups=g, dilation=d)
        crop = []
        for i in reversed(range(nd)):
            crop += [-pb[i], -(pe[i] - case["output_padding"][i])]
        y = F.pad(y, crop)
    if unbatched:
        y = y.squeeze(0)
    shape = [1] * y.dim()
    shape[-nd - 1] = -1
    if b is not None:
        y = y + b.view(shape)
    if z is not None:
        y = y + case["alpha"] * z
    if case["relu"]:
        y = torch.relu(y)
    return y


def torch_reference(case, arrays):
    """Outputs of the fused expression, its gradients and its forward-mode derivative, in float64."""
    dt = case["dtype"]
    x = round_to(arrays["x"], dt).requires_grad_(True)
    w = round_to(arrays["w"], dt).requires_grad_(True)
    b = round_to(arrays["b"], dt).requires_grad_(True) if "b" in arrays else None
    z = round_to(arrays["z"], dt).requires_grad_(True) if "z" in arrays else None
    nd = w.dim() - 2
    y = fused(case, x, w, b, z)
    out = {"y": y}
    if any(k in arrays for k in ("tx", "tw", "tb", "tz")):
        with fwAD.dual_level():
            duals = []
            for name, t in (("x", x), ("w", w), ("b", b), ("z", z)):
                if t is not None and "t" + name in arrays:
                    t = fwAD.make_dual(t.detach(), round_to(arrays["t" + name], dt))
                elif t is not None:
                    t = t.detach()
                duals.append(t)
            ty = fwAD.unpack_dual(fused(case, *duals)).tangent
        out["ty"] = ty if ty is not None else torch.zeros_like(y)
    if "dy" in arrays:
        dy = round_to(arrays["dy"], dt).requires_grad_(True)
        leaves = [("dx", x), ("dw", w)] + ([("db", b)] if b is not None else []) + ([("dz", z)] if z is not None else [])
        double = any(k in arrays for k in ("ggx", "ggw", "ggb"))
        grads = torch.autograd.grad(y, [t for _, t in leaves], grad_outputs=dy, allow_unused=True,
                                    create_graph=double)
        for (name, t), gr in zip(leaves, grads):
            out[name] = gr if gr is not None else torch.zeros_like(t)
        if double:
            # L = <dx, ggx> + <dw, ggw> + <db, ggb> (complex: the real parts); its gradients w.r.t. dy, x, w.
            loss = 0
            if "ggb" in arrays and "db" not in out:  # db = sum of dy over all but channels, bias or not
                out["db"] = dy.sum(dim=[d for d in range(dy.dim()) if d != dy.dim() - nd - 1])
            for name, key in (("dx", "ggx"), ("dw", "ggw"), ("db", "ggb")):
                if key in arrays:
                    loss = loss + (out[name] * round_to(arrays[key], dt).conj()).sum().real
            gg = torch.autograd.grad(loss, [dy, x, w], allow_unused=True)
            for name, t, g in zip(("ggy", "gx", "gw"), (dy, x, w), gg):
                out[name] = g if g is not None else torch.zeros_like(t)
            if b is None:
                out.pop("db", None)
    return {k: v.detach().numpy() for k, v in out.items()}


def out_size(case, in_size, k):
    s, d = case["stride"], case["dilation"]
    pb, pe = case["pad_begin"], case["pad_end"]
    out = []
    for i in range(len(k)):
        ext = d[i] * (k[i] - 1)
        if case["transposed"]:
            out.append((in_size[i] - 1) * s[i] - pb[i] - pe[i] + ext + case["output_padding"][i] + 1)
        else:
            out.append((in_size[i] + pb[i] + pe[i] - ext - 1) // s[i] + 1)
    return out


def make_case(rng, nd, **kw):
    case = dict(nd=nd, N=2, C=4, O=6, groups=1, transposed=False, stride=[1] * nd, dilation=[1] * nd,
                pad_begin=[0] * nd, pad_end=[0] * nd, output_padding=[0] * nd, mode="zeros", bias=True,
                z=False, alpha=1.0, relu=False, dy=True, dtype="f32", layout="ncx", algo=None, unbatched=False,
                padding_flag=None, in_size=[7, 6, 5][:nd], kernel=[3, 2, 3][:nd], gg=())
    case.update(kw)
    for key in ("stride", "dilation", "pad_begin", "pad_end", "output_padding", "in_size", "kernel"):
        if isinstance(case[key], int):
            case[key] = [case[key]] * nd
    if case["padding_flag"] == "same":
        tot = [case["dilation"][i] * (case["kernel"][i] - 1) for i in range(nd)]
        case["pad_begin"] = [t // 2 for t in tot]
        case["pad_end"] = [t - t // 2 for t in tot]
    elif case["padding_flag"] == "valid":
        case["pad_begin"] = case["pad_end"] = [0] * nd
    return case


def run_case(nconv, case, rng, tmp):
    nd, G = case["nd"], case["groups"]
    C, O = case["C"], case["O"]
    k, ins = case["kernel"], case["in_size"]
    wshape = [C, O // G] + k if case["transposed"] else [O, C // G] + k
    xshape = ([] if case["unbatched"] else [case["N"]]) + [C] + ins
    yshape = ([] if case["unbatched"] else [case["N"]]) + [O] + out_size(case, ins, k)
    np_dt = NP_DTYPE[case["dtype"]]

    def normal(shape):
        a = rng.standard_normal(shape)
        return a + 1j * rng.standard_normal(shape) if case["dtype"] in COMPLEX else a

    arrays = {"x": normal(xshape), "w": normal(wshape)}
    if case["bias"]:
        arrays["b"] = normal([O])
    if case["z"]:
        arrays["z"] = normal(yshape)
    if case["dy"]:
        arrays["dy"] = normal(yshape)
    for key, shape in (("ggx", xshape), ("ggw", wshape), ("ggb", [O])):
        if key in case.get("gg", ()):
            arrays[key] = normal(shape)
    for key in case.get("tangents", ()):  # tx, tw, tb, tz: shaped like their operands
        arrays[key] = normal(np.shape(arrays[key[1:]]))
    for name, (frac, value) in case.get("special", {}).items():
        a = arrays[name]  # one element becomes NaN / Inf, at a position given as a fraction of the size
        a.flat[int(frac * (a.size - 1))] = value
    args = nconv + ["compute", "--out", os.path.join(tmp, "out")]
    for name, a in arrays.items():
        path = os.path.join(tmp, name + ".npy")
        np.save(path, np.asarray(round_to(a, case["dtype"]).numpy(), dtype=np_dt))
        args += ["--" + name, path]
    args += ["--stride", ",".join(map(str, case["stride"])), "--dilation", ",".join(map(str, case["dilation"])),
             "--groups", str(G)]
    if case["padding_flag"]:
        args += ["--padding", case["padding_flag"]]
    else:
        args += ["--padding", ",".join(map(str, case["pad_begin"])), "--pad-end", ",".join(map(str, case["pad_end"]))]
    if case["transposed"]:
        args += ["--transposed", "--output-padding", ",".join(map(str, case["output_padding"]))]
    if case["mode"] != "zeros":
        args += ["--padding-mode", case["mode"]]
    if case["z"]:
        args += ["--alpha", repr(case["alpha"])]
    if case["relu"]:
        args += ["--relu"]
    if case["dtype"] in ("bf16", "f64") or case.get("force_dtype"):
        args += ["--dtype", case["dtype"]]
    args += ["--layout", case["layout"]]
    if case["algo"]:
        args += ["--algo", case["algo"]]
    bdims = case.get("bdims", {})
    if bdims:
        # vmap: operand NAME carries B at position bdims[NAME]; files are written that way.
        B = case["B"]
        args = [a for a in args]
        batched = {}
        for name, k in bdims.items():
            # a tangent carries the vmap dim where its operand does (its file, no flag of its own)
            for key in [name] + (["t" + name] if "t" + name in arrays else []):
                batched[key] = normal(list(np.shape(arrays[key]))[:k] + [B] + list(np.shape(arrays[key]))[k:])
                path = os.path.join(tmp, key + ".npy")
                np.save(path, np.asarray(round_to(batched[key], case["dtype"]).numpy(), dtype=np_dt))
            args += ["--%s-bdim" % name, str(k)]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        return False, "exit %d: %s" % (r.returncode, r.stderr.strip())
    if bdims:
        per_b = []
        for b in range(case["B"]):
            sl = dict(arrays)
            for name, k in bdims.items():
                for key in [name] + (["t" + name] if "t" + name in arrays else []):
                    sl[key] = np.take(batched[key], b, axis=k)
            per_b.append(torch_reference(case, sl))
        ref = {name: np.stack([o[name] for o in per_b]) for name in per_b[0]}
    else:
        ref = torch_reference(case, arrays)
    worst = 0.0
    for name, want in ref.items():
        path = os.path.join(tmp, "out", name + ".npy")
        if not os.path.exists(path):
            return False, "missing " + name + ".npy"
        got = np.load(path).astype(np.complex128 if case["dtype"] in COMPLEX else np.float64)
        if got.shape != want.shape:
            return False, "%s shape %s, torch %s" % (name, got.shape, want.shape)
        if case.get("special"):  # NaN / Inf where torch has them, the rest compared as usual
            def cls(a):
                return np.where(np.isnan(a), 0, np.where(np.isposinf(a), 1, np.where(np.isneginf(a), 2, 3)))
            diff = np.flatnonzero(cls(got) != cls(want))
            if diff.size:
                i = diff[0]
                return False, "%s[%d] = %g, torch %g (%d elements differ in class)" % (
                    name, i, got.flat[i], want.flat[i], diff.size)
            fin = np.isfinite(want)
            got, want = got[fin], want[fin]
        scale = max(np.abs(want).max() if want.size else 0.0, 1e-6)
        err = float(np.abs(got - want).max() / scale) if want.size else 0.0
        if not err <= TOL[case["dtype"]]:
            return False, "%s err %.3e > %.0e" % (name, err, TOL[case["dtype"]])
        worst = max(worst, err)
    extra = set(f[:-4] for f in os.listdir(os.path.join(tmp, "out"))) - set(ref)
    if extra:
        return False, "unexpected outputs " + ",".join(sorted(extra))
    return True, "err %.2e" % worst


def cases(rng, quick):
    out = []
    for nd in (1, 2, 3):
        out.append(make_case(rng, nd))
        out.append(make_case(rng, nd, stride=2, pad_begin=1, pad_end=1))
        out.append(make_case(rng, nd, dilation=2, pad_begin=2, pad_end=1))
        out.append(make_case(rng, nd, groups=2, stride=[2, 1, 2][:nd], pad_begin=1, pad_end=0))
        out.append(make_case(rng, nd, C=4, O=8, groups=4, pad_begin=1, pad_end=1))  # depthwise x2
        out.append(make_case(rng, nd, padding_flag="same", kernel=[4, 2, 3][:nd], dilation=[1, 2, 1][:nd]))
        out.append(make_case(rng, nd, padding_flag="valid"))
        out.append(make_case(rng, nd, pad_begin=1, pad_end=-1, stride=2))  # negative end padding
        for mode in ("reflect", "replicate", "circular"):
            out.append(make_case(rng, nd, mode=mode, pad_begin=2, pad_end=1, stride=[1, 2, 1][:nd]))
        out.append(make_case(rng, nd, transposed=True))
        out.append(make_case(rng, nd, transposed=True, stride=2, pad_begin=1, pad_end=1, output_padding=1))
        out.append(make_case(rng, nd, transposed=True, groups=2, stride=[3, 2, 2][:nd], dilation=[2, 1, 3][:nd],
                             pad_begin=[1, 0, 2][:nd], pad_end=[2, 1, 0][:nd], output_padding=[1, 0, 2][:nd]))
        out.append(make_case(rng, nd, transposed=True, pad_begin=0, pad_end=-2))  # uncovered trailing outputs
        out.append(make_case(rng, nd, z=True, alpha=-0.5, relu=True))
        out.append(make_case(rng, nd, z=True, bias=False))
        out.append(make_case(rng, nd, relu=True, transposed=True, stride=2, output_padding=1))
        out.append(make_case(rng, nd, unbatched=True, pad_begin=1, pad_end=1))
        out.append(make_case(rng, nd, unbatched=True, transposed=True, stride=2))
        out.append(make_case(rng, nd, N=0, dy=True))
        out.append(make_case(rng, nd, dy=False, relu=True))
        for layout in ("nxc",):
            out.append(make_case(rng, nd, layout=layout, groups=2, stride=2, pad_begin=1, pad_end=1, z=True))
            out.append(make_case(rng, nd, layout=layout, transposed=True, stride=2, output_padding=1))
    # double backward: each of ggx, ggw, ggb alone and together, plain and transposed
    for nd in (1, 2, 3):
        for gg in (("ggx",), ("ggw",), ("ggb",), ("ggx", "ggb"), ("ggw", "ggb"), ("ggx", "ggw", "ggb")):
            out.append(make_case(rng, nd, gg=gg, groups=2, stride=2, pad_begin=1, pad_end=1, dilation=[1, 2, 1][:nd]))
            out.append(make_case(rng, nd, gg=gg, transposed=True, stride=2, pad_begin=1, pad_end=1, output_padding=1,
                                 bias=False))
        out.append(make_case(rng, nd, gg=("ggx", "ggw"), dtype="f64", force_dtype=True, unbatched=True))
    # forward mode (jvp): every tangent, each alone, with relu, z, groups, strides, padding modes,
    # transposed, unbatched, in f64 and f32, and with batched operands
    for nd in (1, 2, 3):
        every = ("tx", "tw", "tb", "tz")
        for t in (every, ("tx",), ("tw",), ("tb",), ("tz",), ("tx", "tw")):
            out.append(make_case(rng, nd, tangents=t, z=True, alpha=-0.75, relu=True, dtype="f64", pad_begin=1,
                                 pad_end=1, dy=False))
        out.append(make_case(rng, nd, tangents=every, z=True, groups=2, stride=2, pad_begin=1, pad_end=2))
        out.append(make_case(rng, nd, tangents=("tx", "tw"), mode="reflect", pad_begin=1, pad_end=2, dtype="f64"))
        out.append(make_case(rng, nd, tangents=("tx", "tw", "tb"), transposed=True, stride=2, output_padding=1,
                             pad_begin=1, pad_end=1, dtype="f64", relu=True))
        out.append(make_case(rng, nd, tangents=("tx", "tw"), unbatched=True, layout="nxc", dtype="f64"))
        out.append(make_case(rng, nd, tangents=every, z=True, relu=True, bdims={"x": 1, "w": 0}, B=3, dtype="f64",
                             pad_begin=1, pad_end=1))
        out.append(make_case(rng, nd, tangents=("tw", "tz"), z=True, bdims={"z": 0}, B=2, dtype="f64"))
    # batched double backward (vmap over it): gg* batched or shared, with batched or shared x, w, dy
    for nd in (1, 2, 3):
        for bd in ({"ggx": 0}, {"ggw": 1, "w": 0}, {"ggb": 0, "dy": 1}, {"x": 0, "dy": 0, "ggx": 1, "ggw": 0},
                   {"x": 1, "w": 0, "dy": 0, "ggx": 0, "ggw": 0, "ggb": 0}):
            out.append(make_case(rng, nd, gg=("ggx", "ggw", "ggb"), bdims=bd, B=3, groups=2, stride=2, pad_begin=1,
                                 pad_end=1, dtype="f64"))
        out.append(make_case(rng, nd, gg=("ggw",), bdims={"ggw": 0, "x": 0}, B=2, transposed=True, stride=2,
                             pad_begin=1, pad_end=1, output_padding=1, bias=False, dtype="f64"))
    # batched operands (vmap): each operand batched or not, bdim positions other than 0,
    # groups 1 and > 1, transposed or not, 1-3D; per-sample gradients are x and dy batched
    combos = [{"x": 0}, {"w": 1}, {"x": 1, "w": 0}, {"x": 0, "dy": 2}, {"b": 0}, {"z": 1, "x": 0},
              {"x": 2, "w": 2, "b": 0, "dy": 1}, {"dy": 0}]
    for nd in (1, 2, 3):
        for i, bd in enumerate(combos):
            if nd != 2 and i % 2:
                continue
            kw = dict(bdims=bd, B=3, groups=1 + (i % 2), stride=[1, 2, 1][:nd], pad_begin=1, pad_end=1,
                      z="z" in bd, relu=i == 5)
            out.append(make_case(rng, nd, **kw))
            out.append(make_case(rng, nd, transposed=True, output_padding=0, **kw))
        out.append(make_case(rng, nd, bdims={"x": 0, "dy": 0}, B=4, N=1, dy=True))  # per-sample gradients
    # NaN and Inf in one element of an input: they reach what torch's reach, relu keeps NaN,
    # zero padding multiplies (0 * Inf = NaN in y and dw) but takes no gradient (dx)
    inf, nan = float("inf"), float("nan")
    for nd in (1, 2):
        for algo in (None, "gemm", "ref"):
            pad = dict(pad_begin=1, pad_end=1)
            out.append(make_case(rng, nd, algo=algo, special={"x": (0.3, nan)}, stride=2, **pad))
            out.append(make_case(rng, nd, algo=algo, special={"w": (0.0, inf)}, **pad))
            out.append(make_case(rng, nd, algo=algo, special={"w": (0.5, -inf)}, transposed=True, stride=2, **pad))
            out.append(make_case(rng, nd, algo=algo, special={"dy": (0.6, inf)}, groups=2, **pad))
            out.append(make_case(rng, nd, algo=algo, special={"b": (0.4, nan)}, relu=True, **pad))
            out.append(make_case(rng, nd, algo=algo, special={"x": (0.9, -inf)}, relu=True, layout="nxc", **pad))
            out.append(make_case(rng, nd, algo=algo, special={"z": (0.2, nan), "w": (1.0, inf)}, z=True, **pad))
            out.append(make_case(rng, nd, algo=algo, special={"x": (0.0, inf)}, mode="reflect", **pad))
            out.append(make_case(rng, nd, algo=algo, special={"w": (0.2, nan)}, C=4, O=4, groups=4, **pad))
    # dtypes and algorithms over a few feature mixes
    for nd, dtype, algo in itertools.product((1, 2, 3), ("f64", "f16", "bf16", "f32"), (None, "ref", "gemm")):
        if quick and algo is not None and nd != 2:
            continue
        out.append(make_case(rng, nd, dtype=dtype, algo=algo, groups=2, stride=2, pad_begin=1, pad_end=2,
                             z=True, relu=True, force_dtype=True))
        out.append(make_case(rng, nd, dtype=dtype, algo=algo, transposed=True, stride=2, output_padding=1,
                             pad_begin=1, pad_end=1, force_dtype=True))
        out.append(make_case(rng, nd, dtype=dtype, algo=algo, mode="reflect", pad_begin=1, pad_end=2,
                             force_dtype=True))
    # complex (c64, c128): every direction and feature but relu, which complex numbers lack
    for nd, dtype in itertools.product((1, 2, 3), COMPLEX):
        c = dict(dtype=dtype)
        out.append(make_case(rng, nd, groups=2, stride=2, pad_begin=1, pad_end=2, z=True, alpha=-0.5, **c))
        out.append(make_case(rng, nd, transposed=True, groups=2, stride=2, output_padding=1, pad_begin=1, pad_end=1,
                             **c))
        out.append(make_case(rng, nd, mode="circular", pad_begin=1, pad_end=2, dilation=[2, 1, 1][:nd], **c))
        out.append(make_case(rng, nd, layout="nxc", C=4, O=8, groups=4, pad_begin=1, pad_end=1, **c))
        out.append(make_case(rng, nd, layout="nxc", transposed=True, stride=2, unbatched=True, **c))
        out.append(make_case(rng, nd, gg=("ggx", "ggw", "ggb"), groups=2, stride=2, pad_begin=1, pad_end=1, **c))
        out.append(make_case(rng, nd, gg=("ggw",), transposed=True, stride=2, output_padding=1, bias=False, **c))
        out.append(make_case(rng, nd, tangents=("tx", "tw", "tb", "tz"), z=True, alpha=0.5, dy=False, **c))
        out.append(make_case(rng, nd, bdims={"x": 1, "w": 0}, B=3, groups=2, pad_begin=1, pad_end=1, **c))
        out.append(make_case(rng, nd, bdims={"x": 0, "dy": 0}, B=3, N=1, transposed=True, stride=2, **c))
        out.append(make_case(rng, nd, gg=("ggx", "ggw", "ggb"), bdims={"x": 0, "ggw": 1, "w": 0}, B=2, **c))
        out.append(make_case(rng, nd, N=0, **c))
    return out


def main():
    # NCONV_TEST_WRAPPER (e.g. valgrind and its options) runs the CLI under a checker.
    nconv = os.environ.get("NCONV_TEST_WRAPPER", "").split() + [sys.argv[1]]
    quick = "--quick" in sys.argv
    rng = np.random.default_rng(1234)
    report = Report()
    with tempfile.TemporaryDirectory() as root:
        for i, case in enumerate(cases(rng, quick)):
            tmp = os.path.join(root, str(i))
            os.makedirs(tmp)
            ok, msg = run_case(nconv, case, rng, tmp)
            label = " ".join("%s=%s" % (k, v) for k, v in sorted(case.items())
                             if k not in ("nd",) and v not in (None, False, (), {}))
            report.case(ok, "%dD %s: %s" % (case["nd"], msg, label))
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
