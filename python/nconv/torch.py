"""nconv in PyTorch: autograd Functions, drop-in nn.Modules and patch(model).

Conv1d/2d/3d and ConvTranspose1d/2d/3d here are subclasses of torch.nn's, with the same constructor
arguments, parameters, state_dict keys and extra_repr; only their convolution runs on nconv, on as
many threads as torch.get_num_threads(). Complex tensors run on nconv too (PyTorch's conjugate
convention for their gradients). Inputs nconv does not take (other devices, integer dtypes) go to
torch's own convolution, so a patched model still runs everywhere torch's did.
Gradients of any order: the backward is itself a Function, whose backward is nconv's double
backward, composed of the Functions again where a further order is asked for (create_graph).
"""
import torch
from torch import nn

from . import functional as _F

__all__ = ['ConvolutionFunction', 'ConvolutionBackwardFunction', 'convolution', 'conv1d', 'conv2d', 'conv3d',
           'conv_transpose1d', 'conv_transpose2d', 'conv_transpose3d', 'Conv1d', 'Conv2d', 'Conv3d',
           'ConvTranspose1d', 'ConvTranspose2d', 'ConvTranspose3d', 'LazyConv1d', 'LazyConv2d', 'LazyConv3d',
           'LazyConvTranspose1d', 'LazyConvTranspose2d', 'LazyConvTranspose3d', 'patch', 'unpatch', 'supports']

_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.complex64, torch.complex128)


def supports(*tensors):
    """Whether nconv takes these tensors (CPU, strided, a float dtype it has); None entries are ignored."""
    return all(t is None or (t.device.type == 'cpu' and t.layout == torch.strided and t.dtype in _DTYPES)
               for t in tensors)


class _Geometry:
    """The arguments of aten::convolution besides the tensors (padding in nconv's forms)."""

    __slots__ = ('stride', 'padding', 'dilation', 'transposed', 'output_padding', 'groups', 'padding_mode')

    def __init__(self, stride, padding, dilation, transposed, output_padding, groups, padding_mode='zeros'):
        self.stride, self.padding, self.dilation = stride, padding, dilation
        self.transposed, self.output_padding, self.groups = transposed, output_padding, groups
        self.padding_mode = padding_mode

    def kwargs(self):
        return dict(stride=self.stride, padding=self.padding, dilation=self.dilation, transposed=self.transposed,
                    output_padding=self.output_padding, groups=self.groups, padding_mode=self.padding_mode,
                    threads=torch.get_num_threads())


class ConvolutionFunction(torch.autograd.Function):
    """convolution(input, weight, bias) with its backward (ConvolutionBackwardFunction, itself differentiable)."""

    @staticmethod
    def forward(ctx, input, weight, bias, geometry):
        ctx.geometry = geometry
        ctx.save_for_backward(input, weight)
        ctx.save_for_forward(input, weight)
        out = _F.convolution(input, weight, bias, **geometry.kwargs())
        ctx.out_shape = out.shape
        return out

    @staticmethod
    def jvp(ctx, input_t, weight_t, bias_t, _):
        """Forward mode (torch.autograd.forward_ad, functorch's jvp): the output's tangent
        conv(input_t, weight) + conv(input, weight_t) + bias_t, through the Function itself so that it
        is differentiable again."""
        input, weight = ctx.saved_tensors
        out = None
        for x, w in ((input_t, weight), (input, weight_t)):
            if x is not None and w is not None:
                term = ConvolutionFunction.apply(x, w, None, ctx.geometry)
                out = term if out is None else out + term
        if bias_t is not None:
            b = bias_t.reshape((-1,) + (1,) * (weight.dim() - 2))
            out = b.expand(ctx.out_shape) if out is None else out + b
        return out

    @staticmethod
    def backward(ctx, grad_output):
        input, weight = ctx.saved_tensors
        mask = ctx.needs_input_grad[:3]
        gi, gw, gb = ConvolutionBackwardFunction.apply(grad_output, input, weight, ctx.geometry, mask)
        return gi, gw, gb, None


class ConvolutionBackwardFunction(torch.autograd.Function):
    """aten::convolution_backward as a Function: its backward is the double backward."""

    @staticmethod
    def forward(ctx, grad_output, input, weight, geometry, output_mask):
        ctx.geometry = geometry
        ctx.save_for_backward(grad_output, input, weight)
        return _F.convolution_backward(grad_output, input, weight, None, output_mask=output_mask,
                                       **geometry.kwargs())

    @staticmethod
    def backward(ctx, ggI, ggW, ggb):
        grad_output, input, weight = ctx.saved_tensors
        mask = ctx.needs_input_grad[:3]
        if not any(mask):
            return None, None, None, None, None
        if torch.is_grad_enabled():
            return _double_backward_composed(ctx.geometry, mask, ggI, ggW, ggb, grad_output, input, weight) + (
                None, None)
        ggO, gI, gW = _F.convolution_double_backward(ggI, ggW, ggb, grad_output, weight, input, output_mask=mask,
                                                     **ctx.geometry.kwargs())
        return ggO, gI, gW, None, None


def _double_backward_composed(g, mask, ggI, ggW, ggb, grad_output, input, weight):
    """The double backward from the Functions themselves, so that it is differentiable again (create_graph):
    ggO = conv(ggI, w) + conv(x, ggW) + ggb, gI = backward-data of (gO, ggW), gW = backward-weights of
    (ggI, gO). nconv's fused double backward computes the same when no further order is asked for."""
    ggO = gI = gW = None
    if mask[0]:
        for term in (None if ggI is None else ConvolutionFunction.apply(ggI, weight, None, g),
                     None if ggW is None else ConvolutionFunction.apply(input, ggW, None, g)):
            if term is not None:
                ggO = term if ggO is None else ggO + term
        if ggb is not None:
            b = ggb.reshape((-1,) + (1,) * (weight.dim() - 2))
            ggO = b.expand_as(grad_output) if ggO is None else ggO + b
    if mask[1] and ggW is not None:
        gI = ConvolutionBackwardFunction.apply(grad_output, input, ggW, g, (True, False, False))[0]
    if mask[2] and ggI is not None:
        gW = ConvolutionBackwardFunction.apply(grad_output, ggI, weight, g, (False, True, False))[1]
    return ggO, gI, gW


def convolution(input, weight, bias=None, stride=1, padding=0, dilation=1, transposed=False, output_padding=0,
                groups=1, padding_mode='zeros'):
    """aten::convolution on nconv, differentiable twice. padding takes nconv's forms ('same', 'valid',
    ints, (begin, end) pairs); padding_mode as in torch.nn.Conv*d."""
    return ConvolutionFunction.apply(input, weight, bias, _Geometry(stride, padding, dilation, transposed,
                                                                    output_padding, groups, padding_mode))


def _conv(nd):
    def conv(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        _F._expect_rank(weight, nd, 'weight')
        return convolution(input, weight, bias, stride, padding, dilation, False, 0, groups)
    conv.__name__ = conv.__qualname__ = 'conv%dd' % nd
    conv.__doc__ = 'torch.nn.functional.conv%dd on nconv, differentiable twice.' % nd
    return conv


def _conv_transpose(nd):
    def conv_transpose(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        _F._expect_rank(weight, nd, 'weight')
        return convolution(input, weight, bias, stride, padding, dilation, True, output_padding, groups)
    conv_transpose.__name__ = conv_transpose.__qualname__ = 'conv_transpose%dd' % nd
    conv_transpose.__doc__ = 'torch.nn.functional.conv_transpose%dd on nconv, differentiable twice.' % nd
    return conv_transpose


conv1d, conv2d, conv3d = (_conv(nd) for nd in (1, 2, 3))
conv_transpose1d, conv_transpose2d, conv_transpose3d = (_conv_transpose(nd) for nd in (1, 2, 3))


class _ConvMixin:
    def _conv_forward(self, input, weight, bias):
        if not supports(input, weight, bias):
            return super()._conv_forward(input, weight, bias)
        nd = len(self.kernel_size)
        padding = self.padding
        if self.padding_mode != 'zeros':
            # torch pads per side by _reversed_padding_repeated_twice (last dim first); nconv pads in the call.
            r = self._reversed_padding_repeated_twice
            padding = tuple((r[2 * (nd - 1 - d)], r[2 * (nd - 1 - d) + 1]) for d in range(nd))
        return convolution(input, weight, bias, self.stride, padding, self.dilation, False, 0, self.groups,
                           self.padding_mode)


class _ConvTransposeMixin:
    def forward(self, input, output_size=None):
        if self.padding_mode != 'zeros':
            raise ValueError('Only `zeros` padding mode is supported for %s' % type(self).__name__)
        if not supports(input, self.weight, self.bias):
            return super().forward(input, output_size)
        nd = len(self.kernel_size)
        output_padding = self._output_padding(input, output_size, self.stride, self.padding, self.kernel_size,
                                              nd, self.dilation)
        return convolution(input, self.weight, self.bias, self.stride, self.padding, self.dilation, True,
                           tuple(output_padding), self.groups)


class Conv1d(_ConvMixin, nn.Conv1d):
    __doc__ = nn.Conv1d.__doc__


class Conv2d(_ConvMixin, nn.Conv2d):
    __doc__ = nn.Conv2d.__doc__


class Conv3d(_ConvMixin, nn.Conv3d):
    __doc__ = nn.Conv3d.__doc__


class ConvTranspose1d(_ConvTransposeMixin, nn.ConvTranspose1d):
    __doc__ = nn.ConvTranspose1d.__doc__


class ConvTranspose2d(_ConvTransposeMixin, nn.ConvTranspose2d):
    __doc__ = nn.ConvTranspose2d.__doc__


class ConvTranspose3d(_ConvTransposeMixin, nn.ConvTranspose3d):
    __doc__ = nn.ConvTranspose3d.__doc__


# Lazy modules become their cls_to_become at their first forward, which already runs on nconv.
class LazyConv1d(_ConvMixin, nn.LazyConv1d):
    cls_to_become = Conv1d


class LazyConv2d(_ConvMixin, nn.LazyConv2d):
    cls_to_become = Conv2d


class LazyConv3d(_ConvMixin, nn.LazyConv3d):
    cls_to_become = Conv3d


class LazyConvTranspose1d(_ConvTransposeMixin, nn.LazyConvTranspose1d):
    cls_to_become = ConvTranspose1d


class LazyConvTranspose2d(_ConvTransposeMixin, nn.LazyConvTranspose2d):
    cls_to_become = ConvTranspose2d


class LazyConvTranspose3d(_ConvTransposeMixin, nn.LazyConvTranspose3d):
    cls_to_become = ConvTranspose3d


_DROP_IN = {getattr(nn, c.__name__): c for c in (
    Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d, LazyConv1d, LazyConv2d, LazyConv3d,
    LazyConvTranspose1d, LazyConvTranspose2d, LazyConvTranspose3d)}
_TORCH_OF = {v: k for k, v in _DROP_IN.items()}


def _swap(model, classes):
    for m in model.modules():
        cls = classes.get(type(m))
        if cls is not None:
            m.__class__ = cls
    return model


def patch(model):
    """Makes every torch.nn.Conv*d and ConvTranspose*d of model (model itself included, and the lazy ones
    once they materialise) run on nconv, in place: the modules stay the same objects with the same
    parameters, buffers and hooks. Subclasses of those modules are left alone, as their forward may
    differ. Returns model."""
    return _swap(model, _DROP_IN)


def unpatch(model):
    """Undoes patch: the modules run torch's convolution again. Returns model."""
    return _swap(model, _TORCH_OF)
