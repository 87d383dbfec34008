"""nconv.torch: the Functions' derivatives, the drop-in modules and patch(model) against torch."""
import copy

import pytest
import torch
import torch.nn.functional as F
import torch.autograd.forward_ad as fwAD
import torchvision
from torch import nn
from torch.autograd import gradcheck, gradgradcheck

import nconv.torch as nt

MODULES = [
    (nn.Conv1d, dict(in_channels=4, out_channels=6, kernel_size=3, stride=2, padding=1, groups=2), (2, 4, 9)),
    (nn.Conv2d, dict(in_channels=4, out_channels=6, kernel_size=(3, 2), padding='same', dilation=2), (2, 4, 7, 6)),
    (nn.Conv2d, dict(in_channels=3, out_channels=4, kernel_size=3, padding=2, padding_mode='reflect'), (2, 3, 5, 6)),
    (nn.Conv2d, dict(in_channels=3, out_channels=4, kernel_size=4, padding='same', padding_mode='circular',
                     bias=False), (2, 3, 5, 6)),
    (nn.Conv3d, dict(in_channels=2, out_channels=3, kernel_size=2, stride=(1, 2, 1), padding=1,
                     padding_mode='replicate'), (1, 2, 4, 5, 3)),
    (nn.ConvTranspose1d, dict(in_channels=4, out_channels=2, kernel_size=3, stride=2, output_padding=1), (2, 4, 5)),
    (nn.ConvTranspose2d, dict(in_channels=4, out_channels=6, kernel_size=3, stride=2, padding=1, groups=2,
                              dilation=2), (2, 4, 4, 5)),
    (nn.ConvTranspose3d, dict(in_channels=2, out_channels=2, kernel_size=(2, 3, 2), stride=2), (1, 2, 3, 2, 3)),
]


def pair(cls, kwargs, dtype=torch.float64):
    torch.manual_seed(0)
    ref = cls(**kwargs).to(dtype)
    return ref, nt.patch(copy.deepcopy(ref))


@pytest.mark.parametrize('cls,kwargs,shape', MODULES)
def test_drop_in_module(cls, kwargs, shape, nconv_calls):
    ref, mod = pair(cls, kwargs)
    assert type(mod).__name__ == cls.__name__ and isinstance(mod, cls) and type(mod).__module__ == 'nconv.torch'
    assert repr(mod) == repr(ref) and mod.extra_repr() == ref.extra_repr()
    assert list(mod.state_dict()) == list(ref.state_dict())
    # Same constructor arguments, directly.
    own = getattr(nt, cls.__name__)(**kwargs)
    assert list(own.state_dict()) == list(ref.state_dict()) and own.extra_repr() == ref.extra_repr()
    x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
    y_ref, y = ref(x), mod(x)
    assert nconv_calls['convolution'] == 1
    torch.testing.assert_close(y, y_ref, rtol=1e-12, atol=1e-12)
    gy = torch.randn_like(y)
    g_ref = torch.autograd.grad(y_ref, (x,) + tuple(ref.parameters()), gy)
    g = torch.autograd.grad(y, (x,) + tuple(mod.parameters()), gy)
    assert nconv_calls['convolution_backward'] == 1
    for a, b in zip(g, g_ref):
        torch.testing.assert_close(a, b, rtol=1e-11, atol=1e-11)
    # Unbatched input, as torch takes it (torch's own pad step takes only batched input).
    torch.testing.assert_close(mod(x[0]), ref(x[:1])[0], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize('cls,kwargs,shape', MODULES)
def test_gradcheck_and_gradgradcheck(cls, kwargs, shape, nconv_calls):
    _, mod = pair(cls, kwargs)
    x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
    params = tuple(mod.parameters())

    def f(x, *p):
        return torch.nn.utils.stateless.functional_call(mod, dict(zip([n for n, _ in mod.named_parameters()], p)),
                                                        (x,))
    assert gradcheck(f, (x,) + params, check_forward_ad=True)
    assert gradgradcheck(f, (x,) + params)
    assert nconv_calls['convolution_double_backward'] > 0


@pytest.mark.parametrize('cls,kwargs,shape', MODULES)
def test_forward_mode(cls, kwargs, shape, nconv_calls):
    """torch.autograd.forward_ad through a drop-in module, the input and every parameter carrying a tangent, or
    one of them alone, against torch's own tangent (f64)."""
    ref, mod = pair(cls, kwargs)
    x = torch.randn(shape, dtype=torch.float64)
    names = [n for n, _ in ref.named_parameters()]
    primals = [x] + [p.detach() for p in ref.parameters()]
    tangents = [torch.randn_like(p) for p in primals]
    for which in [None] + list(range(len(primals))):
        tangent_out = []
        for m in (ref, mod):
            with fwAD.dual_level():
                duals = [fwAD.make_dual(p, t) if which is None or i == which else p
                         for i, (p, t) in enumerate(zip(primals, tangents))]
                y = torch.nn.utils.stateless.functional_call(m, dict(zip(names, duals[1:])), (duals[0],))
                tangent_out.append(fwAD.unpack_dual(y).tangent)
        torch.testing.assert_close(tangent_out[1], tangent_out[0], rtol=1e-11, atol=1e-11)
    assert nconv_calls['convolution'] > 0


@pytest.mark.parametrize('transposed', [False, True])
def test_third_and_fourth_order_match_torch(transposed):
    torch.manual_seed(3)
    x = torch.randn(1, 2 if transposed else 3, 5, 5, dtype=torch.float64, requires_grad=True)
    w = torch.randn(2, 3, 3, 3, dtype=torch.float64, requires_grad=True)
    b = torch.randn(3 if transposed else 2, dtype=torch.float64, requires_grad=True)
    results = []
    for conv in ((F.conv_transpose2d, nt.conv_transpose2d) if transposed else (F.conv2d, nt.conv2d)):
        y = conv(x, w, b, 2, 1).square().sum()
        (gx,) = torch.autograd.grad(y, x, create_graph=True)
        gw, gb = torch.autograd.grad(gx.square().sum(), (w, b), create_graph=True)
        (gx3,) = torch.autograd.grad(gw.square().sum() + gb.square().sum(), x, create_graph=True)
        (gw4,) = torch.autograd.grad(gx3.sum(), w)
        results.append((gx, gw, gb, gx3, gw4))
    for ours, ref in zip(results[1], results[0]):
        torch.testing.assert_close(ours, ref, rtol=1e-10, atol=1e-10)


def test_conv_transpose_output_size():
    ref, mod = pair(nn.ConvTranspose2d, dict(in_channels=2, out_channels=3, kernel_size=3, stride=2))
    x = torch.randn(1, 2, 4, 4, dtype=torch.float64)
    torch.testing.assert_close(mod(x, output_size=[10, 10]), ref(x, output_size=[10, 10]))
    with pytest.raises(ValueError, match='output size'):
        mod(x, output_size=[12, 12])
    mod.padding_mode = 'reflect'
    with pytest.raises(ValueError, match='zeros'):
        mod(x)


def test_channels_last_kept_and_fallbacks(nconv_calls):
    ref, mod = pair(nn.Conv2d, dict(in_channels=4, out_channels=8, kernel_size=3, padding=1), torch.float32)
    x = torch.randn(2, 4, 6, 6).contiguous(memory_format=torch.channels_last).requires_grad_()
    y = mod(x)
    assert y.is_contiguous(memory_format=torch.channels_last)
    (gx,) = torch.autograd.grad(y.sum(), x)
    assert gx.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(y, ref(x), rtol=1e-5, atol=1e-5)
    calls = nconv_calls['convolution']
    # Complex runs on nconv; what nconv does not take (another device) runs on torch's own convolution.
    xc = torch.randn(2, 4, 6, 6, dtype=torch.complex64)
    mc = copy.deepcopy(mod).to(torch.complex64)
    torch.testing.assert_close(mc(xc), nt.unpatch(copy.deepcopy(mc))(xc))
    assert nconv_calls['convolution'] == calls + 1
    mm = copy.deepcopy(mod).to('meta')
    assert mm(x.detach().to('meta')).shape == y.shape
    assert nconv_calls['convolution'] == calls + 1


def test_patch_in_place_and_lazy_modules():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Sequential(nn.ConvTranspose2d(4, 2, 2)),
                          nn.LazyConv2d(5, 1))
    first = model[0]
    w = first.weight
    assert nt.patch(model) is model
    assert model[0] is first and model[0].weight is w and type(model[0]) is nt.Conv2d
    assert type(model[2][0]) is nt.ConvTranspose2d
    model(torch.randn(1, 3, 8, 8))
    assert type(model[3]) is nt.Conv2d, 'a lazy module materialises as the drop-in'
    nt.unpatch(model)
    assert type(model[0]) is nn.Conv2d and type(model[3]) is nn.Conv2d


@pytest.mark.parametrize('name', ['resnet18', 'mobilenet_v2', 'efficientnet_b0'])
@pytest.mark.parametrize('channels_last', [False, True])
def test_torchvision_models_agree(name, channels_last, nconv_calls):
    """A patched model against the same model unpatched, in eval mode (in training mode, batch norm over
    2 x 3 x 3 values makes even torch's own f32 result differ from f64 by more than 100%).

    - f32, the forward output against the f64 model's: within 1e-4 of its largest magnitude, or no
      further from it than twice unpatched torch's f32 output is. Gradients are not compared in f32: an
      activation within rounding of zero takes either side of a ReLU, and the gradients behind it then
      differ by whole terms, whichever engine computes them.
    - f64, the output and every parameter gradient of the patched f64 model against torch's f64
      model: within 1e-10 of each tensor's largest magnitude."""
    torch.manual_seed(0)
    ref = getattr(torchvision.models, name)(num_classes=10).eval()
    x = torch.randn(2, 3, 96, 96)
    if channels_last:
        ref = ref.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    exact64 = copy.deepcopy(ref).double()
    y64 = exact64(x.double())
    y32 = ref(x)
    with torch.no_grad():
        ours32 = nt.patch(copy.deepcopy(ref))(x)
    scale = y64.abs().max().item()
    torch_err = (y32.double() - y64).abs().max().item()
    assert (ours32.double() - y64).abs().max().item() <= max(1e-4 * scale, 2 * torch_err)
    convs = sum(isinstance(m, nn.Conv2d) for m in ref.modules())
    assert nconv_calls['convolution'] == convs
    ours64 = nt.patch(copy.deepcopy(exact64))
    outs = []
    for m in (exact64, ours64):
        y = m(x.double()) if m is ours64 else y64
        y.square().mean().backward()
        outs.append([y] + [p.grad for p in m.parameters()])
    assert nconv_calls['convolution'] == 2 * convs and nconv_calls['convolution_backward'] == convs
    for exact, ours in zip(*outs):
        assert (ours - exact).abs().max().item() <= 1e-10 * exact.abs().max().item()
