"""The package's functions against PyTorch: values, layouts, dtypes, epilogues, derivatives, batching,
plans, contexts and errors."""
import ctypes
import gc
import os
import subprocess
import sys
import threading
import weakref

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import nconv
import nconv.torch

TOL = {torch.float32: 2e-5, torch.float64: 1e-12, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def close(got, ref, dtype=torch.float32):
    """max |got - ref| <= tol * max |ref|, ref computed in f64 from the same (rounded) inputs."""
    got = torch.as_tensor(np.asarray(got, dtype=np.float64)) if not torch.is_tensor(got) else got.double()
    ref = ref.double()
    assert got.shape == ref.shape
    scale = max(ref.abs().max().item(), 1e-30) if ref.numel() else 1.0
    err = (got - ref).abs().max().item() / scale if ref.numel() else 0.0
    assert err <= TOL[dtype], 'relative error %g > %g' % (err, TOL[dtype])


def rand(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=torch.float64).to(dtype)


CASES = [  # (nd, x shape, w shape, kwargs)
    (1, (2, 4, 11), (6, 4, 3), dict(stride=2, padding=1)),
    (1, (3, 6, 9), (6, 2, 4), dict(padding='same', groups=3, dilation=2)),
    (2, (2, 4, 9, 8), (6, 2, 3, 3), dict(stride=(2, 1), padding=(1, 2), groups=2)),
    (2, (2, 8, 7, 7), (8, 1, 5, 5), dict(padding=2, groups=8)),
    (2, (1, 3, 12, 12), (5, 3, 7, 7), dict(stride=2, padding=3)),
    (2, (2, 5, 6, 6), (7, 5, 1, 1), dict()),
    (2, (2, 4, 8, 8), (4, 4, 3, 3), dict(padding='valid', dilation=2)),
    (3, (1, 3, 5, 6, 5), (4, 3, 3, 2, 3), dict(stride=(1, 2, 1), padding=1)),
]


@pytest.mark.parametrize('nd,xs,ws,kw', CASES)
@pytest.mark.parametrize('layout', ['contiguous', 'channels_last', 'strided'])
def test_conv_matches_torch(nd, xs, ws, kw, layout):
    x, w, b = rand(*xs), rand(*ws), rand(ws[0])
    ref = getattr(F, 'conv%dd' % nd)(x.double(), w.double(), b.double(), **kw)
    if layout == 'channels_last':
        x = x.movedim(1, -1).contiguous().movedim(-1, 1)
    elif layout == 'strided':
        big = torch.zeros(xs[:-1] + (2 * xs[-1],))
        big[..., ::2] = x
        x = big[..., ::2]
    y = getattr(nconv, 'conv%dd' % nd)(x, w, b, **kw)
    close(y, ref)
    if layout == 'channels_last' and xs[1] > 1:
        assert y.stride(1) == 1, 'a channels-last input gives a channels-last output'
    # The same through NumPy, any strides (negative ones included).
    yn = getattr(nconv, 'conv%dd' % nd)(x.numpy()[..., ::-1][..., ::-1], w.numpy(), b.numpy(), **kw)
    assert isinstance(yn, np.ndarray)
    close(yn, ref)


@pytest.mark.parametrize('dtype', [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_dtypes(dtype):
    x, w, b = rand(2, 6, 9, 9, dtype=dtype), rand(8, 3, 3, 3, dtype=dtype), rand(8, dtype=dtype)
    y = nconv.conv2d(x, w, b, padding=1, groups=2)
    assert y.dtype == dtype
    close(y, F.conv2d(x.double(), w.double(), b.double(), padding=1, groups=2), dtype)
    if dtype != torch.bfloat16:
        close(nconv.conv2d(x.numpy(), w.numpy(), b.numpy(), padding=1, groups=2),
              F.conv2d(x.double(), w.double(), b.double(), padding=1, groups=2), dtype)


@pytest.mark.parametrize('nd,xs,ws,kw', [
    (1, (2, 4, 7), (4, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    (2, (2, 4, 5, 6), (4, 3, 3, 2), dict(stride=(2, 3), padding=(1, 0), output_padding=(1, 2), groups=2)),
    (2, (1, 6, 4, 4), (6, 1, 3, 3), dict(stride=2, groups=6, dilation=2)),
    (3, (1, 2, 3, 4, 3), (2, 3, 2, 3, 2), dict(stride=2, padding=1)),
])
def test_conv_transpose_matches_torch(nd, xs, ws, kw):
    x, w, b = rand(*xs), rand(*ws), rand(ws[1] * kw.get('groups', 1))
    ref = getattr(F, 'conv_transpose%dd' % nd)(x.double(), w.double(), b.double(), **kw)
    close(getattr(nconv, 'conv_transpose%dd' % nd)(x, w, b, **kw), ref)


@pytest.mark.parametrize('mode', ['reflect', 'replicate', 'circular'])
def test_padding_modes_and_per_side_padding(mode):
    x, w = rand(2, 3, 8, 9), rand(4, 3, 3, 3)
    ref = F.conv2d(F.pad(x.double(), (2, 0, 1, 2), mode=mode), w.double())
    close(nconv.conv2d(x, w, padding=((1, 2), (2, 0)), padding_mode=mode), ref)


def test_fused_epilogue_and_out():
    x, w, b, z = rand(2, 4, 6, 6), rand(5, 4, 3, 3), rand(5), rand(2, 5, 6, 6)
    ref = F.relu(F.conv2d(x.double(), w.double(), b.double(), padding=1) + 0.5 * z.double())
    out = torch.full((2, 5, 6, 6), float('nan'))
    got = nconv.conv2d(x, w, b, padding=1, z=z, alpha=0.5, relu=True, out=out)
    assert got is out
    close(out, ref)


def test_numpy_and_torch_integers_as_arguments():
    x, w = rand(1, 4, 9, 9), rand(4, 2, 3, 3)
    ref = F.conv2d(x.double(), w.double(), stride=2, padding=1, groups=2)
    close(nconv.conv2d(x, w, stride=np.int64(2), padding=(np.int32(1), torch.tensor(1)), groups=np.int64(2)), ref)
    close(nconv.conv2d(x, w, stride=2, padding=((1, 1), (np.int64(1), 1)), groups=2), ref)
    with pytest.raises(ValueError, match='stride'):
        nconv.conv2d(x, w, stride=1.5, groups=2)


def test_unbatched_and_empty_batch():
    x, w = rand(4, 6, 6), rand(5, 4, 3, 3)
    close(nconv.conv2d(x, w), F.conv2d(x.double(), w.double()))
    y = nconv.conv2d(rand(0, 4, 6, 6), w)
    assert y.shape == (0, 5, 4, 4)


@pytest.mark.parametrize('transposed', [False, True])
@pytest.mark.parametrize('channels_last', [False, True])
def test_convolution_backward_matches_aten(transposed, channels_last):
    torch.manual_seed(1)
    x = rand(2, 4, 7, 6)
    w = rand(4, 3, 3, 3) if transposed else rand(6, 2, 3, 3)
    args = ([2, 1], [1, 1], [1, 2], transposed, [1, 0] if transposed else [0, 0], 2)
    y = torch.ops.aten.convolution(x, w, None, *args)
    gy = torch.randn_like(y)
    if channels_last:
        x, gy = x.contiguous(memory_format=torch.channels_last), gy.contiguous(memory_format=torch.channels_last)
    ref = torch.ops.aten.convolution_backward(gy.double(), x.double(), w.double(), [y.shape[1]], *args,
                                              [True, True, True])
    got = nconv.convolution_backward(gy, x, w, [y.shape[1]], *args, (True, True, True))
    for g, r in zip(got, ref):
        close(g, r)
    if channels_last:
        assert got[0].stride(1) == 1
    dx, dw, db = nconv.convolution_backward(gy, x, w, None, *args, (False, True, False))
    assert dx is None and db is None
    close(dw, ref[1])


def test_backward_through_relu_and_z():
    x, w, b, z = rand(2, 3, 6, 6), rand(4, 3, 3, 3), rand(4), rand(2, 4, 6, 6)
    xd, wd, bd, zd = (t.double().requires_grad_() for t in (x, w, b, z))
    yd = F.relu(F.conv2d(xd, wd, bd, padding=1) + 2.0 * zd)
    gy = torch.randn_like(yd)
    ref = torch.autograd.grad(yd, (xd, wd, bd, zd), gy)
    y = nconv.conv2d(x, w, b, padding=1, z=z, alpha=2.0, relu=True)
    got = nconv.convolution_backward(gy.float(), x, w, None, 1, 1, 1, False, 0, 1, (True, True, True, True),
                                     relu=True, output=y, alpha=2.0)
    for g, r in zip(got, ref):
        close(g, r)


def test_double_backward_matches_autograd():
    x, w, b = (rand(*s, dtype=torch.float64).requires_grad_() for s in ((2, 4, 6, 6), (6, 2, 3, 3), (6,)))
    y = F.conv2d(x, w, b, stride=2, padding=1, groups=2)
    gy = torch.randn_like(y).requires_grad_()
    dx, dw, db = torch.autograd.grad(y, (x, w, b), gy, create_graph=True)
    ggx, ggw, ggb = torch.randn_like(dx), torch.randn_like(dw), torch.randn_like(db)
    ref = torch.autograd.grad((dx, dw, db), (gy, x, w), (ggx, ggw, ggb), retain_graph=True)
    got = nconv.convolution_double_backward(ggx, ggw, ggb, gy, w, x, 2, 1, 1, False, 0, 2)
    for g, r in zip(got, ref):
        close(g, r, torch.float64)
    only = nconv.convolution_double_backward(None, ggw, None, gy, w, x, 2, 1, 1, False, 0, 2)
    close(only[1], torch.autograd.grad((dw,), (x,), (ggw,), retain_graph=True)[0], torch.float64)


@pytest.mark.parametrize('nd,xs,ws,kw', CASES)
def test_convolution_jvp_matches_forward_ad(nd, xs, ws, kw):
    """(out, out_t) against torch.autograd.forward_ad, f64: every tangent with z and relu, then each alone,
    then none; transposed, and NumPy unbatched input."""
    import torch.autograd.forward_ad as fwAD
    g = kw.get('groups', 1)
    x, w, b = rand(*xs, dtype=torch.float64), rand(*ws, dtype=torch.float64), rand(ws[0], dtype=torch.float64)
    conv = getattr(F, 'conv%dd' % nd)
    z = rand(*conv(x, w, b, **kw).shape, dtype=torch.float64)
    prim = dict(input=x, weight=w, bias=b, z=z)
    tan = {k: torch.randn_like(v) for k, v in prim.items()}
    for which in (tuple(prim), ('input',), ('weight',), ('bias',), ('z',), ()):
        with fwAD.dual_level():
            d = {k: fwAD.make_dual(v, tan[k]) if k in which else v for k, v in prim.items()}
            ref_y, ref_t = fwAD.unpack_dual(torch.relu(conv(d['input'], d['weight'], d['bias'], **kw) + 0.5 * d['z']))
        y, t = nconv.convolution_jvp(x, w, b, z=z, alpha=0.5, relu=True, **kw,
                                     **{k + '_t': tan[k] for k in which})
        close(y, ref_y, torch.float64)
        close(t, ref_t if ref_t is not None else torch.zeros_like(ref_y), torch.float64)
    wt = rand(xs[1], 3 * g, *ws[2:], dtype=torch.float64)
    twt = torch.randn_like(wt)
    with fwAD.dual_level():
        ref = fwAD.unpack_dual(getattr(F, 'conv_transpose%dd' % nd)(x, fwAD.make_dual(wt, twt), groups=g)).tangent
    close(nconv.convolution_jvp(x, wt, None, transposed=True, groups=g, weight_t=twt)[1], ref, torch.float64)
    y, t = nconv.convolution_jvp(x.numpy()[0], w.numpy(), None, **kw, input_t=tan['input'].numpy()[0])
    with fwAD.dual_level():
        ref = fwAD.unpack_dual(conv(fwAD.make_dual(x[:1], tan['input'][:1]), w, None, **kw)).tangent
    assert isinstance(t, np.ndarray)
    close(t, ref[0], torch.float64)
    with pytest.raises(nconv.InvalidArgumentError, match='bias_t: given without bias'):
        nconv.convolution_jvp(x, w, None, bias_t=b, **kw)


def test_batched_forward_and_backward():
    B = 3
    x, w, b = rand(B, 2, 4, 6, 6), rand(B, 5, 4, 3, 3), rand(5)
    y = nconv.conv_batched(x.movedim(0, 1), w, b, in_dims=(1, 0, None, None), padding=1)
    assert y.shape == (B, 2, 5, 6, 6)
    for i in range(B):
        close(y[i], F.conv2d(x[i].double(), w[i].double(), b.double(), padding=1))
    gy = rand(B, 2, 5, 6, 6)
    dx, dw, db = nconv.convolution_backward_batched(gy, x, w[0], in_dims=(0, 0, None), padding=1)
    for i in range(B):
        ref = torch.ops.aten.convolution_backward(gy[i].double(), x[i].double(), w[0].double(), [5], [1, 1],
                                                  [1, 1], [1, 1], False, [0, 0], 1, [True, True, True])
        for g, r in zip((dx[i], dw[i], db[i]), ref):
            close(g, r)


def test_per_sample_grads():
    x, w, gy = rand(4, 3, 7, 7), rand(6, 3, 3, 3), rand(4, 6, 4, 4)
    dw, db = nconv.per_sample_grads(gy, x, w, stride=2, padding=1)
    assert dw.shape == (4, 6, 3, 3, 3) and db.shape == (4, 6)
    for n in range(4):
        _, rw, rb = torch.ops.aten.convolution_backward(gy[n:n + 1].double(), x[n:n + 1].double(), w.double(), [6],
                                                        [2, 2], [1, 1], [1, 1], False, [0, 0], 1,
                                                        [False, True, True])
        close(dw[n], rw)
        close(db[n], rb)
    assert nconv.per_sample_grads(gy, x, w, stride=2, padding=1, bias=False)[1] is None


def test_plan_prepacked_reshape_and_threads():
    x, w, b = rand(4, 8, 10, 10), rand(16, 8, 3, 3), rand(16)
    ref = F.relu(F.conv2d(x.double(), w.double(), b.double(), padding=1))
    with nconv.Plan(w, x.shape, b, padding=1, relu=True) as plan:
        assert plan.algorithm() in nconv.algorithms()
        close(plan(x), ref)
        close(plan(x[:1]), ref[:1])  # reshaped to batch 1, weights kept
        assert plan.batch == 1
        plan.reshape(4)
        results = [None] * 4

        def run(i):
            results[i] = plan(x)
        threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for r in results:
            close(r, ref)
        plan.set_weights(-w, -b)
        close(plan(x), F.relu(F.conv2d(x.double(), -w.double(), -b.double(), padding=1)))
        with pytest.raises(ValueError, match='weight'):
            plan.set_weights(rand(16, 8, 3, 2))
        with pytest.raises(ValueError, match='input'):
            plan(rand(4, 7, 10, 10))
    # The plan copied the weights: it does not keep the caller's alive, and computes with its copy.
    w2 = rand(16, 8, 3, 3)
    values, alive = w2.clone(), weakref.ref(w2)
    with nconv.Plan(w2, x.shape, padding=1) as plan:
        del w2
        gc.collect()
        assert alive() is None
        close(plan(x), F.conv2d(x.double(), values.double(), padding=1))


def test_context_threads_policy_and_memory_limit():
    x, w = rand(2, 16, 20, 20), rand(16, 16, 3, 3)
    ref = F.conv2d(x.double(), w.double(), padding=1)
    one = nconv.conv2d(x, w, padding=1)
    with nconv.Context(threads=2) as ctx:
        two = nconv.conv2d(x, w, padding=1, context=ctx)
        assert ctx.threads == 2
    assert torch.equal(one, two), 'deterministic: any thread count gives the same bits'
    with nconv.Context(policy='benchmark') as ctx:
        close(nconv.conv2d(x, w, padding=1, context=ctx), ref)
    assert torch.equal(nconv.conv2d(x, w, padding=1, threads=2), one)
    assert nconv.get_num_threads() == 1, 'a call\'s threads are its own'
    nconv.set_num_threads(2)
    assert nconv.get_num_threads() == 2 and nconv.default_context().threads == 2
    nconv.set_num_threads(1)
    with nconv.Context(threads=2) as ctx, pytest.raises(ValueError, match='threads = 3'):
        nconv.conv2d(x, w, context=ctx, threads=3)
    with pytest.raises(ValueError, match='threads'):
        nconv.set_num_threads(0)
    with nconv.Context(memory_limit=1024) as ctx, pytest.raises(MemoryError, match='limit'):
        nconv.conv2d(rand(8, 64, 56, 56), rand(64, 64, 3, 3), padding=1, context=ctx)
    with nconv.Context(algorithm='ref') as ctx:
        close(nconv.conv2d(x, w, padding=1, context=ctx), ref)
    with pytest.raises(nconv.InvalidArgumentError, match='policy'):
        nconv.Context(policy='fastest')
    ctx = nconv.Context()
    ctx.close()
    with pytest.raises(ValueError, match='used after close'):
        nconv.conv2d(x, w, context=ctx)


@pytest.mark.parametrize('call,match', [
    (lambda: nconv.conv2d(rand(2, 4, 5, 5), rand(3, 3, 3, 3)), r'weight: shape \[3, 3, 3, 3\], expected \[3, 4, 3, 3\]'),
    (lambda: nconv.conv2d(rand(2, 4, 5, 5), rand(3, 4, 3, 3), groups=0), 'groups = 0'),
    (lambda: nconv.conv2d(rand(2, 4, 5, 5), rand(3, 4, 3, 3), stride=0), 'stride'),
    (lambda: nconv.conv2d(rand(2, 4, 5, 5), rand(3, 4, 3, 3), padding=-1), 'pad'),
    (lambda: nconv.conv2d(rand(2, 4, 5, 5), rand(3, 4, 3, 3), padding='full'), "padding = 'full'"),
    (lambda: nconv.conv2d(rand(2, 4, 5, 5), rand(3, 4, 3, 3), padding='same', stride=2), 'stride'),
    (lambda: nconv.conv2d(rand(2, 4, 5, 5), rand(3, 4, 3, 3), padding_mode='wrap'), 'padding_mode'),
    (lambda: nconv.conv2d(rand(2, 4, 2, 2), rand(3, 4, 3, 3)), 'kernel'),
    (lambda: nconv.conv2d(rand(4, 5), rand(3, 4, 3, 3)), 'input: expected a 4-D'),
    (lambda: nconv.conv2d(rand(2, 4, 5, 5), rand(3, 4, 3)), 'weight: expected a 4-D'),
    (lambda: nconv.conv2d(rand(2, 4, 5, 5), rand(3, 4, 3, 3, dtype=torch.float64)), 'weight: dtype float64'),
    (lambda: nconv.conv2d(rand(2, 4, 5, 5), rand(3, 4, 3, 3), rand(4)), r'bias: shape \[4\]'),
    (lambda: nconv.conv2d(rand(2, 4, 5, 5), rand(3, 4, 3, 3), torch.ones(3, dtype=torch.complex64)),
     'bias: dtype complex64, but input is float32'),
    (lambda: nconv.conv2d(rand(2, 4, 5, 5), rand(3, 4, 3, 3), out=torch.empty(2, 3, 3, 4)), 'out: shape'),
    (lambda: nconv.conv2d(rand(2, 4, 5, 5), rand(3, 4, 3, 3), out=torch.empty(2, 3, 3, 3).expand(2, 3, 3, 3)[:, :, :1].expand(2, 3, 3, 3)), 'alias|overlap'),
    (lambda: nconv.conv_transpose2d(rand(2, 4, 5, 5), rand(4, 3, 3, 3), stride=2, output_padding=2), 'output_padding'),
    (lambda: nconv.convolution_backward(rand(2, 3, 3, 3), rand(2, 4, 5, 5), rand(3, 4, 3, 3), None, 1, 0, 1, False, 0, 1, (True,)), 'output_mask'),
    (lambda: nconv.convolution_backward(rand(2, 3, 3, 4), rand(2, 4, 5, 5), rand(3, 4, 3, 3)), r'grad_output: shape'),
    (lambda: nconv.conv_batched(rand(2, 4, 5, 5), rand(3, 3, 4, 3, 3), in_dims=(None, 0)), 'in_dims'),
    (lambda: nconv.conv_batched(rand(2, 4, 5, 5), rand(3, 3, 4, 3, 3), in_dims=(None, 5, None, None)), 'in_dims'),
    (lambda: nconv.conv_batched(rand(2, 4, 5, 5), rand(3, 4, 3, 3), in_dims=(None, None, None, None)), 'no operand'),
    (lambda: nconv.conv_batched(rand(3, 1, 4, 5, 5), rand(2, 3, 4, 3, 3), in_dims=(0, 0, None, None)), 'batch size 2'),
])
def test_invalid_arguments_raise_with_the_parameter(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_errors_are_runtime_errors_as_torch_raises_and_types_are_checked():
    with pytest.raises(RuntimeError):
        nconv.conv2d(rand(2, 4, 5, 5), rand(3, 4, 3, 3), groups=0)
    with pytest.raises(TypeError, match='int32'):
        nconv.conv2d(torch.ones(1, 1, 3, 3, dtype=torch.int32), torch.ones(1, 1, 1, 1, dtype=torch.int32))
    with pytest.raises(TypeError, match='int16'):
        nconv.conv2d(np.ones((1, 1, 3, 3), np.int16), np.ones((1, 1, 1, 1), np.int16))
    with pytest.raises(RuntimeError, match='relu'):  # complex numbers have no order
        nconv.conv2d(np.ones((1, 1, 3, 3), np.complex64), np.ones((1, 1, 1, 1), np.complex64), relu=True)
    with pytest.raises(RuntimeError, match='complex64'):  # mixed dtypes, as torch refuses them
        nconv.conv2d(np.ones((1, 1, 3, 3), np.complex64), np.ones((1, 1, 1, 1), np.float32))


@pytest.mark.parametrize('channels_last', [False, True])
def test_complex_numpy_and_torch(channels_last):
    """complex128 NumPy arrays and complex64 tensors against torch (PyTorch's conjugate convention for the
    gradients), channels-first (copied to the real form) and channels-last (read in place)."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 4, 7, 6, dtype=torch.complex128, generator=g)
    w = torch.randn(6, 2, 3, 3, dtype=torch.complex128, generator=g)
    b = torch.randn(6, dtype=torch.complex128, generator=g)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    y = nconv.conv2d(x.numpy(), w.numpy(), b.numpy(), padding=1, groups=2)
    want = torch.nn.functional.conv2d(x, w, b, padding=1, groups=2)
    np.testing.assert_allclose(y, want.numpy(), rtol=1e-12, atol=1e-12)
    xs, ws = x.to(torch.complex64).requires_grad_(), w.to(torch.complex64).requires_grad_()
    y32 = nconv.torch.conv2d(xs, ws, None, 1, 1, 1, 2)
    dy = torch.randn(y32.shape, dtype=torch.complex64, generator=g)
    got = torch.autograd.grad(y32, [xs, ws], dy)
    ref = torch.autograd.grad(torch.nn.functional.conv2d(xs, ws, None, 1, 1, 1, 2), [xs, ws], dy)
    for a, r in zip(got, ref):
        torch.testing.assert_close(a, r, rtol=1e-4, atol=1e-4)


def test_repro_lines():
    assert nconv.problem_repro((2, 4, 9, 9), (6, 2, 3, 3), padding=1, groups=2) == \
        'nconv check --dtype f32 g2mb2_ic4ih9iw9_oc6oh9ow9_kh3kw3_sh1sw1_ph1pw1_dh0dw0'
    assert 'F.conv2d' in nconv.problem_repro((2, 4, 9, 9), (6, 2, 3, 3), padding=1, groups=2, kind='pytorch')


def test_library_is_found_or_named():
    env = dict(os.environ, NCONV_LIBRARY='/nonexistent/libnconv.so')
    r = subprocess.run([sys.executable, '-c', 'import nconv'], env=env, capture_output=True, text=True)
    assert r.returncode != 0 and '/nonexistent/libnconv.so' in r.stderr and 'NCONV_LIBRARY' in r.stderr
    assert isinstance(nconv.lib, ctypes.CDLL)
