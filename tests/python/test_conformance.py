"""Every convolution sample of PyTorch's own test corpus (torch.testing._internal, as Debian ships it)
through nconv.torch: common_nn's module tests, common_modules' ModuleInfo samples and the OpInfo samples
and error inputs of common_methods_invocations. Each sample: forward and backward against torch, and in
f64 and complex128 gradcheck and gradgradcheck (complex gradients in PyTorch's conjugate convention).
The complex OpInfo samples also run through `nconv compute` (NCONV_CLI: the binary). Skipped: integer
dtypes, which nconv does not have."""
import copy

import pytest
import torch
from torch import nn
from torch.autograd import gradcheck, gradgradcheck
from torch.testing._internal import common_methods_invocations as cmi
from torch.testing._internal import common_modules as cm
from torch.testing._internal import common_nn as cnn

import nconv.torch as nt

# Tolerances against torch at the same dtype (both accumulate in their own order).
TOL = {torch.float64: dict(rtol=1e-10, atol=1e-10), torch.float32: dict(rtol=1e-4, atol=1e-4)}
TOL[torch.complex128], TOL[torch.complex64] = TOL[torch.float64], TOL[torch.float32]
DOUBLE = (torch.float64, torch.complex128)  # the dtypes gradcheck runs in


def skip_reason(dtype):
    if not dtype.is_floating_point and not dtype.is_complex:
        return 'integer: nconv has no integer convolution'
    return None


def check_grads(ours, ref, inputs, dtype):
    """Outputs agree; gradients of <output, g> for a random g agree for every input that requires grad."""
    torch.testing.assert_close(ours, ref, **TOL[dtype])
    leaves = [t for t in inputs if t.requires_grad]
    if not leaves:
        return
    g = torch.randn_like(ref)
    got = torch.autograd.grad(ours, leaves, g, allow_unused=True)
    want = torch.autograd.grad(ref, leaves, g, allow_unused=True)
    for a, b in zip(got, want):
        if b is None:
            assert a is None or not a.any()
        else:
            torch.testing.assert_close(a, b, **TOL[dtype])


def derivative_checks(f, inputs, gradgrad):
    """gradcheck and gradgradcheck of f at inputs: the full Jacobians where the inputs and the output have
    at most FULL elements together, else their fast mode (a random projection of the Jacobian), since
    the largest samples' full second-order Jacobians take hours of f64 convolutions."""
    size = sum(t.numel() for t in inputs) + f(*inputs).numel()
    fast = size > FULL
    assert gradcheck(f, inputs, fast_mode=fast)
    if gradgrad:
        assert gradgradcheck(f, inputs, fast_mode=fast)


FULL = 1500


# --------------------------------------------------------------------- common_nn's module tests

def _nn_tests():
    for t in cnn.module_tests + cnn.new_module_tests:
        name = t.get('fullname') or t.get('module_name', '') + ('_' + t['desc'] if 'desc' in t else '')
        if 'Conv' in name:
            yield pytest.param(t, id=name)


def _nn_module(t):
    if 'constructor' in t:
        return t['constructor'](*t.get('constructor_args', ()))
    return getattr(nn, t['module_name'])(*t.get('constructor_args', ()))


def _nn_input(t):
    return t['input_fn']() if 'input_fn' in t else torch.randn(t['input_size'])


@pytest.mark.parametrize('t', list(_nn_tests()))
@pytest.mark.parametrize('dtype', [torch.float64, torch.float32])
def test_common_nn(t, dtype, nconv_calls):
    torch.manual_seed(0)
    ref = _nn_module(t).to(dtype)
    ours = nt.patch(copy.deepcopy(ref))
    x = _nn_input(t).to(dtype).requires_grad_()
    params = list(ours.parameters())
    check_grads(ours(x), ref(x), [x], dtype)
    for a, b in zip(params, ref.parameters()):
        assert a is not b
    y_ours, y_ref = ours(x), ref(x)
    g = torch.randn_like(y_ref)
    for a, b in zip(torch.autograd.grad(y_ours, params, g), torch.autograd.grad(y_ref, list(ref.parameters()), g)):
        torch.testing.assert_close(a, b, **TOL[dtype])
    assert nconv_calls['convolution'] > 0 and nconv_calls['convolution_backward'] > 0
    if dtype == torch.float64:
        names = [n for n, _ in ours.named_parameters()]

        def f(x, *p):
            return torch.nn.utils.stateless.functional_call(ours, dict(zip(names, p)), (x,))
        derivative_checks(f, (x, *params), True)
        assert nconv_calls['convolution_double_backward'] > 0


# ----------------------------------------------------------------- common_modules' ModuleInfo samples

def _module_samples():
    for mi in cm.module_db:
        if 'Conv' not in mi.module_cls.__name__:
            continue
        for dtype in (torch.float64, torch.float32):
            inputs = mi.module_inputs_func(mi, device='cpu', dtype=dtype, requires_grad=True, training=True)
            for i, sample in enumerate(inputs):
                yield pytest.param(mi, dtype, i, id='%s-%s-%d' % (mi.name, str(dtype)[6:], i))


def _build(mi, sample, seed):
    torch.manual_seed(seed)
    m = mi.module_cls(*sample.constructor_input.args, **sample.constructor_input.kwargs)
    return m


@pytest.mark.parametrize('mi,dtype,index', list(_module_samples()))
def test_module_info(mi, dtype, index, nconv_calls):
    sample = mi.module_inputs_func(mi, device='cpu', dtype=dtype, requires_grad=True, training=True)[index]
    ref, ours = _build(mi, sample, 0).to(dtype), nt.patch(_build(mi, sample, 0)).to(dtype)
    args, kwargs = sample.forward_input.args, sample.forward_input.kwargs
    torch.manual_seed(1)  # lazy modules draw their parameters at the first forward
    y_ref = ref(*args, **kwargs)
    torch.manual_seed(1)
    y_ours = ours(*args, **kwargs)
    assert type(ours).__module__ == 'nconv.torch', 'the module (a lazy one once materialised) is the drop-in'
    assert nconv_calls['convolution'] > 0
    params = list(ours.parameters())
    leaves = [a for a in args if torch.is_tensor(a) and a.requires_grad]
    torch.testing.assert_close(y_ours, y_ref, **TOL[dtype])
    g = torch.randn_like(y_ref)
    got = torch.autograd.grad(y_ours, leaves + params, g)
    want = torch.autograd.grad(y_ref, leaves + list(ref.parameters()), g)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, **TOL[dtype])
    if dtype in DOUBLE:
        names = [n for n, _ in ours.named_parameters()]

        def f(*t):
            inputs, p = t[:len(args)], t[len(args):]
            return torch.nn.utils.stateless.functional_call(ours, dict(zip(names, p)), inputs, kwargs)
        derivative_checks(f, (*args, *params), mi.supports_gradgrad)


# ------------------------------------------------------------------------- OpInfo samples and errors

OPS = {op.name: op for op in cmi.op_db if op.name.startswith('nn.functional.conv')}
OURS = {name: getattr(nt, name.split('.')[-1]) for name in OPS}


def _op_samples():
    for name, op in sorted(OPS.items()):
        for dtype in sorted(op.dtypes, key=str):
            reason = skip_reason(dtype)
            count = len(list(op.sample_inputs('cpu', dtype if reason is None else torch.float32, requires_grad=True)))
            for i in range(count):
                marks = [pytest.mark.skip(reason=reason)] if reason else []
                yield pytest.param(name, dtype, i, marks=marks, id='%s-%s-%d' % (name[14:], str(dtype)[6:], i))


@pytest.mark.parametrize('name,dtype,index', list(_op_samples()))
def test_opinfo_sample(name, dtype, index, nconv_calls):
    op = OPS[name]
    torch.manual_seed(0)
    sample = list(op.sample_inputs('cpu', dtype, requires_grad=dtype != torch.bfloat16))[index]
    args = (sample.input,) + tuple(sample.args)
    ours = OURS[name](*args, **sample.kwargs)
    ref = op.op(*args, **sample.kwargs)
    assert nconv_calls['convolution'] == 1
    if dtype == torch.bfloat16:
        # Forward only. Both round their sums to bf16 (torch in its own order): within the output's own
        # rounding (2^-8 of the largest magnitude) of the f64 result, or no further than twice torch's error.
        exact = op.op(*[a.double() if torch.is_tensor(a) else a for a in args], **sample.kwargs)
        ours_err, torch_err = ((t.double() - exact).abs().max().item() for t in (ours, ref))
        assert ours_err <= max(2 * torch_err, 2 ** -8 * exact.abs().max().item())
        return
    check_grads(ours, ref, [a for a in args if torch.is_tensor(a)], dtype)
    if dtype in DOUBLE:
        tensors = [i for i, a in enumerate(args) if torch.is_tensor(a) and a.requires_grad]

        def f(*t):
            full = list(args)
            for i, v in zip(tensors, t):
                full[i] = v
            return OURS[name](*full, **sample.kwargs)
        leaves = tuple(args[i] for i in tensors)
        derivative_checks(f, leaves, op.supports_gradgrad)


def _error_inputs():
    for name, op in sorted(OPS.items()):
        if op.error_inputs_func is None:
            continue
        for i, _ in enumerate(op.error_inputs('cpu')):
            yield pytest.param(name, i, id='%s-%d' % (name[14:], i))


@pytest.mark.parametrize('name,index', list(_error_inputs()))
def test_opinfo_error_input(name, index):
    error = list(OPS[name].error_inputs('cpu'))[index]
    s = error.sample_input
    with pytest.raises(error.error_type):
        OURS[name](s.input, *s.args, **s.kwargs)


# ------------------------------------------------------- complex OpInfo samples through `nconv compute`

_POSITIONAL = {'conv': ('bias', 'stride', 'padding', 'dilation', 'groups'),
               'conv_transpose': ('bias', 'stride', 'padding', 'output_padding', 'groups', 'dilation')}


def _cli_samples():
    for p in _op_samples():
        name, dtype, index = p.values
        if dtype.is_complex:
            yield pytest.param(name, dtype, index, id=p.id)


@pytest.mark.parametrize('name,dtype,index', list(_cli_samples()))
def test_opinfo_sample_cli(name, dtype, index, tmp_path):
    """The sample's output and gradients (x, w, bias for a random grad_output) from `nconv compute`."""
    import os
    import subprocess
    import numpy as np
    cli = os.environ.get('NCONV_CLI')
    if not cli:
        pytest.skip('NCONV_CLI (the nconv binary) is not set')
    op = OPS[name]
    torch.manual_seed(0)
    sample = list(op.sample_inputs('cpu', dtype, requires_grad=True))[index]
    transposed = 'transpose' in name
    kw = dict(zip(_POSITIONAL['conv_transpose' if transposed else 'conv'], sample.args[1:]))
    kw.update(sample.kwargs)
    x, w, b = sample.input, sample.args[0], kw.get('bias')
    nd = w.dim() - 2
    y = op.op(x, w, *sample.args[1:], **sample.kwargs)
    dy = torch.randn_like(y)
    leaves = [t for t in (x, w, b) if t is not None]
    want = dict(zip(('dx', 'dw', 'db'), torch.autograd.grad(y, leaves, dy)))
    want['y'] = y
    files = {'x': x, 'w': w, 'dy': dy, 'b': b}
    args = [cli, 'compute', '--out', str(tmp_path / 'out')]
    for key, t in files.items():
        if t is not None:
            np.save(tmp_path / (key + '.npy'), t.detach().numpy())
            args += ['--' + key, str(tmp_path / (key + '.npy'))]

    def flag(v):
        return ','.join(str(int(i)) for i in (v if isinstance(v, (tuple, list)) else [v] * nd))
    for key, opt in (('stride', '--stride'), ('dilation', '--dilation'), ('groups', '--groups'),
                     ('output_padding', '--output-padding')):
        if key in kw:
            args += [opt, str(kw[key]) if key == 'groups' else flag(kw[key])]
    if 'padding' in kw:
        args += ['--padding', kw['padding'] if isinstance(kw['padding'], str) else flag(kw['padding'])]
    if transposed:
        args += ['--transposed']
    r = subprocess.run(args, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for key, t in want.items():
        got = torch.from_numpy(np.load(tmp_path / 'out' / (key + '.npy')))
        torch.testing.assert_close(got, t.detach(), **TOL[dtype])
