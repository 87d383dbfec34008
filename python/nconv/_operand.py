"""NumPy arrays and torch CPU tensors as library operands: pointer, shape, strides in elements, dtype."""
import ctypes

import numpy as np

from . import _lib
from ._lib import InvalidArgumentError

_NUMPY_DTYPES = {np.dtype(np.float32): _lib.F32, np.dtype(np.float64): _lib.F64, np.dtype(np.float16): _lib.F16,
                 np.dtype(np.complex64): _lib.C64, np.dtype(np.complex128): _lib.C128}
_NUMPY_OF = {v: k for k, v in _NUMPY_DTYPES.items()}
DTYPE_NAMES = {_lib.F32: 'float32', _lib.F64: 'float64', _lib.F16: 'float16', _lib.BF16: 'bfloat16',
               _lib.C64: 'complex64', _lib.C128: 'complex128'}


def _torch():
    import torch
    return torch


def _torch_dtypes():
    torch = _torch()
    return {torch.float32: _lib.F32, torch.float64: _lib.F64, torch.float16: _lib.F16, torch.bfloat16: _lib.BF16,
            torch.complex64: _lib.C64, torch.complex128: _lib.C128}


def is_torch(a):
    return type(a).__module__.split('.')[0] == 'torch'


class Operand:
    """One array as the library sees it. Holds the array for as long as the call needs its memory."""

    __slots__ = ('array', 'name', 'shape', 'strides', 'dtype', 'ptr', 'torch')

    def __init__(self, a, name):
        self.name = name
        if is_torch(a):
            torch = _torch()
            if not isinstance(a, torch.Tensor):
                raise TypeError('%s: expected a tensor or an array, got %s' % (name, type(a).__name__))
            if a.device.type != 'cpu' or a.layout != torch.strided:
                raise InvalidArgumentError('%s: only strided CPU tensors are supported (got device %s, layout %s)'
                                           % (name, a.device, a.layout))
            dt = _torch_dtypes().get(a.dtype)
            if dt is None:
                raise TypeError('%s: dtype %s is not supported (float32, float64, float16, bfloat16, complex64 or '
                                'complex128)'
                                % (name, a.dtype))
            if a.requires_grad:
                a = a.detach()
            if a.is_conj() or a.is_neg():
                a = a.resolve_conj().resolve_neg()
            self.torch = True
            self.array = a
            self.shape = tuple(a.shape)
            self.strides = tuple(a.stride())
            self.ptr = a.data_ptr() if a.numel() else None
        else:
            if not isinstance(a, np.ndarray):
                a = np.asarray(a)
                if a.dtype.kind in 'iub':
                    a = a.astype(np.float32)
            dt = _NUMPY_DTYPES.get(a.dtype)
            if dt is None:
                raise TypeError('%s: dtype %s is not supported (float32, float64, float16, complex64 or complex128; '
                                'bfloat16 through torch)'
                                % (name, a.dtype))
            item = a.itemsize
            if any(s % item for s in a.strides) or not a.dtype.isnative:
                a = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder('='))
            self.torch = False
            self.array = a
            self.shape = a.shape
            self.strides = tuple(s // item for s in a.strides)
            self.ptr = a.ctypes.data if a.size else None
        self.dtype = dt

    def tensor(self):
        t = _lib.Tensor()
        t.data = self.ptr
        for i, s in enumerate(self.strides[:_lib.MAX_DIMS]):
            t.stride[i] = s
        return t

    def drop_dim(self, dim):
        """Makes the operand one slice along dim (the batch dim of a batched call); returns dim's stride."""
        stride = self.strides[dim]
        self.shape = tuple(n for i, n in enumerate(self.shape) if i != dim)
        self.strides = tuple(s for i, s in enumerate(self.strides) if i != dim)
        return stride

    def channels_last(self):
        """Whether the channels (dim 1) are innermost, as NumPy's and torch's channels-last views have them."""
        if len(self.shape) < 3 or self.shape[1] <= 1:
            return False
        return self.strides[1] == 1 and any(n > 1 and s != 0 for n, s in zip(self.shape[2:], self.strides[2:]))


def dense_strides(shape, channels_last):
    """Strides (in elements) of a dense tensor: dims in order, or dim 1 innermost."""
    order = list(range(len(shape)))
    if channels_last and len(shape) >= 3:
        order = [0] + list(range(2, len(shape))) + [1]
    strides = [0] * len(shape)
    step = 1
    for d in reversed(order):
        strides[d] = step
        step *= max(shape[d], 1)
    return strides


def empty(like, shape, channels_last, name, dtype=None):
    """A new array of the kind of `like` (NumPy or torch), dense in the given layout, as an Operand."""
    dtype = like.dtype if dtype is None else dtype
    strides = dense_strides(shape, channels_last)
    if like.torch:
        torch = _torch()
        tdt = {v: k for k, v in _torch_dtypes().items()}[dtype]
        a = torch.empty_strided(tuple(shape), tuple(strides), dtype=tdt)
    else:
        item = _NUMPY_OF[dtype].itemsize
        size = 1
        for n in shape:
            size *= n
        a = np.lib.stride_tricks.as_strided(np.empty(size, _NUMPY_OF[dtype]), tuple(shape),
                                            tuple(s * item for s in strides))
    return Operand(a, name)


def shape_only(shape, dtype, name):
    """An operand with a shape and a dtype (an nconv dtype code) and no memory: zero strides over one
    element, for problems made from shapes alone."""
    op = Operand(np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), tuple(shape), (0,) * len(shape)), name)
    op.dtype = dtype
    return op


def given(a, name, shape, dtype):
    """A caller-given output: its shape and dtype must be the call's."""
    op = Operand(a, name)
    if tuple(op.shape) != tuple(shape):
        raise InvalidArgumentError('%s: shape %s, expected %s' % (name, list(op.shape), list(shape)))
    if op.dtype != dtype:
        raise InvalidArgumentError('%s: dtype %s, expected %s' % (name, DTYPE_NAMES[op.dtype], DTYPE_NAMES[dtype]))
    if op.torch and op.array is not a:
        raise InvalidArgumentError('%s: an output may not require grad' % name)
    return op


def pointer(op):
    """A ctypes pointer to the operand's tensor struct, or None."""
    return None if op is None else ctypes.pointer(op.tensor())
