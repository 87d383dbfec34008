"""Plans: a forward convolution made once, with prepacked weights, executed many times."""
import ctypes

from . import _lib
from ._lib import InvalidArgumentError, check, lib
from ._operand import Operand, empty, given, pointer, shape_only
from .functional import _check_shape, _context, _epilogue, _problem, _same_dtype, _shapes

__all__ = ['Plan']

_LAYOUTS = {'any': _lib.LAYOUT_ANY, 'ncx': _lib.LAYOUT_NCX, 'nxc': _lib.LAYOUT_NXC}


class Plan(_lib.Handle):
    """A forward convolution plan with the weights (and bias) packed once.

    `Plan(weight, input_shape, ...)` takes `convolution`'s arguments; calling the plan on an input of
    input_shape (any batch size: the plan reshapes, keeping its packed weights) returns the output.
    layout: 'any' (any strides), 'ncx' or 'nxc' (channels-last), the layout of the inputs it will see.
    Calls on one plan may run from several threads at once; set_weights and reshape may not overlap them.
    """

    _destroy = staticmethod(lib.nconv_plan_destroy)

    def __init__(self, weight, input_shape, bias=None, stride=1, padding=0, dilation=1, transposed=False,
                 output_padding=0, groups=1, *, padding_mode='zeros', relu=False, alpha=1.0, with_z=False,
                 layout='any', context=None, threads=None):
        self._context = _context(context, threads)  # the plan uses it: it lives as long as the plan
        w = Operand(weight, 'weight')
        self.ndims = len(w.shape) - 2
        if len(input_shape) != self.ndims + 2:
            raise InvalidArgumentError('input_shape = %r: expected %d dims' % (tuple(input_shape), self.ndims + 2))
        if layout not in _LAYOUTS:
            raise InvalidArgumentError("layout = %r: must be 'any', 'ncx' or 'nxc'" % (layout,))
        self._like = shape_only(input_shape, w.dtype, 'input_shape')  # the plan's dtype, no caller memory
        self._problem, self._shapes = _problem(self._like, w, self.ndims, stride, padding, dilation, groups,
                                               transposed, output_padding, padding_mode)
        desc = _lib.PlanDesc()
        check(lib.nconv_plan_desc_init(ctypes.byref(desc), _lib.OP_FORWARD))
        desc.epi = _epilogue(relu, alpha)
        desc.with_z = int(bool(with_z))
        desc.layout = _LAYOUTS[layout]
        self._with_z = bool(with_z)
        handle = ctypes.c_void_p()
        check(lib.nconv_plan_create(self._context.handle, ctypes.byref(self._problem), ctypes.byref(desc),
                                    ctypes.byref(handle)))
        self._handle = handle
        self.set_weights(weight, bias)

    def set_weights(self, weight, bias=None):
        """New weights (and bias), packed once and used by every later call."""
        w = Operand(weight, 'weight')
        ws = self._shapes[1]
        _same_dtype(w, self._like, 'the plan')
        _check_shape(w, ws)
        b = None if bias is None else Operand(bias, 'bias')
        _same_dtype(b, w, 'weight')
        _check_shape(b, (self._problem.out_channels,))
        check(lib.nconv_plan_set_weights(self.handle, pointer(w), pointer(b)))

    def reshape(self, batch):
        """A new batch size; the algorithm and the packed weights stay."""
        check(lib.nconv_plan_reshape(self.handle, int(batch)))
        self._problem.batch = int(batch)
        self._shapes = _shapes(self._problem)

    @property
    def batch(self):
        return self._problem.batch

    def algorithm(self):
        name = ctypes.c_char_p()
        check(lib.nconv_plan_algorithm(self.handle, _lib.DIR_FWD, ctypes.byref(name)))
        return name.value.decode() if name.value else None

    def workspace_size(self):
        n = ctypes.c_size_t()
        check(lib.nconv_plan_workspace_size(self.handle, ctypes.byref(n)))
        return n.value

    def __call__(self, input, z=None, out=None):
        x = Operand(input, 'input')
        if len(x.shape) != self.ndims + 2:
            raise InvalidArgumentError('input: shape %s, expected %d dims' % (list(x.shape), self.ndims + 2))
        if x.shape[0] != self._problem.batch:
            self.reshape(x.shape[0])
        xs, _, ys = self._shapes
        _same_dtype(x, self._like, 'the plan')
        _check_shape(x, xs)
        if (z is not None) != self._with_z:
            raise InvalidArgumentError('z: %s' % ('the plan was made with_z=True' if self._with_z else
                                                  'given, but the plan was made without with_z'))
        zo = None if z is None else Operand(z, 'z')
        _same_dtype(zo, x, 'input')
        _check_shape(zo, ys)
        y = given(out, 'out', ys, x.dtype) if out is not None else empty(x, ys, x.channels_last(), 'out')
        vp = _lib.VariantPack()
        tensors = {'x': x.tensor(), 'y': y.tensor()}
        if zo is not None:
            tensors['z'] = zo.tensor()
        for name, t in tensors.items():
            setattr(vp, name, ctypes.pointer(t))
        check(lib.nconv_plan_execute(self.handle, ctypes.byref(vp)))
        return out if out is not None else y.array
