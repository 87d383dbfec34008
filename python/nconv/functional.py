"""Convolution and its derivatives on NumPy arrays and torch CPU tensors, with PyTorch's argument names.

Every function takes arrays of any strides in float32, float64, float16, complex64 and complex128 (and
bfloat16 as torch tensors),
allocates its outputs in the layout of its input (channels-last stays channels-last) unless `out` is given,
and raises the library's message on invalid input. Keyword-only arguments extend PyTorch's signatures:
padding_mode, the fused epilogue (z, alpha, relu), context and threads.
"""
import ctypes
import operator
import threading

from . import _lib
from ._lib import InvalidArgumentError, check, lib
from ._operand import DTYPE_NAMES, Operand, empty, given, pointer, shape_only

__all__ = ['Context', 'default_context', 'set_num_threads', 'get_num_threads', 'conv1d', 'conv2d', 'conv3d',
           'conv_transpose1d', 'conv_transpose2d', 'conv_transpose3d', 'convolution', 'convolution_backward',
           'convolution_double_backward', 'conv_batched', 'convolution_backward_batched', 'per_sample_grads',
           'problem_repro']


class Context(_lib.Handle):
    """Threads, determinism, algorithm policy, memory limit and the plan cache of the calls made with it.

    A context may be shared between threads; its settings must not change while calls on it run.
    """

    _destroy = staticmethod(lib.nconv_context_destroy)

    def __init__(self, threads=1, deterministic=True, policy='heuristic', algorithm=None, memory_limit=0):
        handle = ctypes.c_void_p()
        check(lib.nconv_context_create(ctypes.byref(handle)))
        self._handle = handle
        self._threads = None
        self.threads = threads
        check(lib.nconv_context_set_deterministic(handle, int(bool(deterministic))))
        if policy not in _lib.POLICIES:
            raise InvalidArgumentError("policy = %r: must be 'heuristic' or 'benchmark'" % (policy,))
        check(lib.nconv_context_set_policy(handle, _lib.POLICIES[policy]))
        if algorithm is not None:
            check(lib.nconv_context_set_algorithm(handle, algorithm.encode()))
        check(lib.nconv_context_set_memory_limit(handle, int(memory_limit)))

    @property
    def threads(self):
        return self._threads

    @threads.setter
    def threads(self, n):
        n = int(n)
        if n != self._threads:
            check(lib.nconv_context_set_threads(self.handle, n))
            self._threads = n


_local = threading.local()


def _thread_contexts():
    if not hasattr(_local, 'contexts'):
        _local.contexts, _local.threads = {}, 1
    return _local.contexts


def _own_context(threads):
    contexts = _thread_contexts()
    ctx = contexts.get(threads)
    if ctx is None:
        ctx = contexts[threads] = Context(threads=threads)
    return ctx


def default_context():
    """The calling thread's context for calls given neither context nor threads (set_num_threads: its threads)."""
    _thread_contexts()
    return _own_context(_local.threads)


def set_num_threads(n):
    """The thread count of the calling thread's calls that name neither context nor threads (default 1)."""
    _thread_contexts()
    _own_context(int(n))  # validates n
    _local.threads = int(n)


def get_num_threads():
    _thread_contexts()
    return _local.threads


def _context(context, threads):
    """A call's context: the one given, else the calling thread's own for `threads` (one per thread count,
    so that a call's thread count never changes another call's)."""
    if context is None:
        return default_context() if threads is None else _own_context(int(threads))
    if threads is not None and int(threads) != context.threads:
        raise InvalidArgumentError('threads = %s: the context given runs %d threads (set context.threads)'
                                   % (threads, context.threads))
    return context


def _index(v):
    """v as an int, where it is one (an int, a NumPy or torch integer); else None."""
    try:
        return operator.index(v)
    except TypeError:
        return None


def _tuple(value, nd, name):
    if _index(value) is not None:
        return (_index(value),) * nd
    try:
        value = tuple(value)
    except TypeError:
        raise InvalidArgumentError('%s = %r: expected an int or %d ints' % (name, value, nd)) from None
    if len(value) == 1 and nd > 1:
        value = value * nd
    ints = tuple(_index(v) for v in value)
    if len(ints) != nd or None in ints:
        raise InvalidArgumentError('%s = %r: expected an int or %d ints' % (name, value, nd))
    return ints


def _set_padding(p, padding, nd, transposed):
    """padding: an int, nd ints (both sides), nd (begin, end) pairs, 'valid' or 'same'."""
    if isinstance(padding, str):
        if transposed:
            raise InvalidArgumentError("padding = '%s': a transposed convolution takes ints" % padding)
        if padding == 'valid':
            return
        if padding != 'same':
            raise InvalidArgumentError("padding = '%s': must be 'valid', 'same', an int or a tuple" % padding)
        check(lib.nconv_problem_set_padding_same(ctypes.byref(p)))
        return
    if _index(padding) is None and len(tuple(padding)) == nd and all(
            isinstance(v, (tuple, list)) for v in padding):
        for d, pair in enumerate(padding):
            if len(pair) != 2:
                raise InvalidArgumentError('padding[%d] = %r: expected (begin, end)' % (d, pair))
            p.pad_begin[d], p.pad_end[d] = _tuple(pair, 2, 'padding[%d]' % d)
        return
    for d, v in enumerate(_tuple(padding, nd, 'padding')):
        p.pad_begin[d] = p.pad_end[d] = v


def _problem(x, w, nd, stride, padding, dilation, groups, transposed, output_padding, padding_mode):
    """The validated problem of input x and weight w, and its (x, w, y) shapes."""
    if len(x.shape) != nd + 2:
        raise InvalidArgumentError('%s: expected a %d-D (batched) or %d-D (unbatched) input, got shape %s'
                                   % (x.name, nd + 2, nd + 1, list(x.shape)))
    if len(w.shape) != nd + 2:
        raise InvalidArgumentError('%s: expected a %d-D weight, got shape %s' % (w.name, nd + 2, list(w.shape)))
    _same_dtype(w, x, x.name)
    if _index(groups) is None:
        raise InvalidArgumentError('groups = %r: expected an int' % (groups,))
    groups = _index(groups)
    if padding_mode not in _lib.PAD_MODES:
        raise InvalidArgumentError("padding_mode = %r: must be 'zeros', 'reflect', 'replicate' or 'circular'"
                                   % (padding_mode,))
    p = _lib.Problem()
    check(lib.nconv_problem_init(ctypes.byref(p), nd))
    p.batch, p.in_channels, p.groups = x.shape[0], x.shape[1], groups
    p.out_channels = w.shape[1] * groups if transposed else w.shape[0]
    for d in range(nd):
        p.in_size[d] = x.shape[2 + d]
        p.kernel[d] = w.shape[2 + d]
    for d, v in enumerate(_tuple(stride, nd, 'stride')):
        p.stride[d] = v
    for d, v in enumerate(_tuple(dilation, nd, 'dilation')):
        p.dilation[d] = v
    if transposed:
        for d, v in enumerate(_tuple(output_padding, nd, 'output_padding')):
            p.output_padding[d] = v
    p.transposed = int(bool(transposed))
    p.padding_mode = _lib.PAD_MODES[padding_mode]
    p.dtype = x.dtype
    _set_padding(p, padding, nd, transposed)
    check(lib.nconv_problem_validate(ctypes.byref(p)))
    shapes = _shapes(p)
    ws = shapes[1]
    if tuple(w.shape) != ws:
        raise InvalidArgumentError('%s: shape %s, expected %s for %d input channels, %d groups%s'
                                   % (w.name, list(w.shape), list(ws), p.in_channels, groups,
                                      ' (transposed: [in_channels, out_channels/groups, k...])' if transposed else
                                      ' ([out_channels, in_channels/groups, k...])'))
    return p, shapes


def _shapes(p):
    xs, ws, ys = ((_lib.MAX_DIMS * ctypes.c_int64)() for _ in range(3))
    check(lib.nconv_problem_shapes(ctypes.byref(p), xs, ws, ys))
    r = p.ndims + 2
    return tuple(xs[:r]), tuple(ws[:r]), tuple(ys[:r])


def _same_dtype(op, x, what):
    if op is not None and op.dtype != x.dtype:
        raise InvalidArgumentError('%s: dtype %s, but %s is %s' % (op.name, DTYPE_NAMES[op.dtype], what,
                                                                    DTYPE_NAMES[x.dtype]))


def _check_shape(op, shape):
    if op is not None and tuple(op.shape) != tuple(shape):
        raise InvalidArgumentError('%s: shape %s, expected %s' % (op.name, list(op.shape), list(shape)))


def _dtype_name(a):
    dt = getattr(a, 'dtype', None)
    return None if dt is None else str(dt).replace('torch.', '')


def _one_dtype(reference, **operands):
    """Every given operand has the dtype of the first (named) one: checked before any is converted, so that
    mixed dtypes are an invalid argument (as in PyTorch) even where one of them is not a dtype nconv has."""
    (ref_name, ref), = reference.items()
    want = _dtype_name(ref)
    for name, a in operands.items():
        have = _dtype_name(a)
        if a is not None and have is not None and want is not None and have != want:
            raise InvalidArgumentError('%s: dtype %s, but %s is %s' % (name, have, ref_name, want))


def _spatial_dims(weight_shape, name):
    """The number of spatial dims a weight of this shape has (its rank minus 2): 1, 2 or 3."""
    nd = len(weight_shape) - 2
    if nd < 1 or nd > _lib.MAX_SPATIAL:
        raise InvalidArgumentError('%s: expected rank 3, 4 or 5, got shape %s' % (name, list(weight_shape)))
    return nd


def _unbatched(nd, input, *others):
    """PyTorch's unbatched form: an input of rank nd + 1 and the operands shaped like it or like the output
    get a batch of one. Returns them, then whether they were unbatched."""
    if len(getattr(input, 'shape', ())) != nd + 1:
        return (input,) + others + (False,)
    return tuple(None if a is None else a[None] for a in (input,) + others) + (True,)


def _epilogue(relu, alpha):
    e = _lib.Epilogue()
    e.activation = _lib.ACT_RELU if relu else _lib.ACT_IDENTITY
    e.alpha = float(alpha)
    return e


def convolution(input, weight, bias=None, stride=1, padding=0, dilation=1, transposed=False, output_padding=0,
                groups=1, *, padding_mode='zeros', z=None, alpha=1.0, relu=False, out=None, context=None,
                threads=None):
    """aten::convolution with the fused epilogue: out = act(conv(input, weight) + bias + alpha * z).

    The number of spatial dims is the weight's rank minus 2. input may be unbatched (rank minus 1).
    """
    nd = _spatial_dims(getattr(weight, 'shape', ()), 'weight')
    _one_dtype({'input': input}, weight=weight, bias=bias, z=z)
    input, z, out, unbatched = _unbatched(nd, input, z, out)
    x, w = Operand(input, 'input'), Operand(weight, 'weight')
    p, (_, _, ys) = _problem(x, w, nd, stride, padding, dilation, groups, transposed, output_padding, padding_mode)
    b = None if bias is None else Operand(bias, 'bias')
    zo = None if z is None else Operand(z, 'z')
    for op in (b, zo):
        _same_dtype(op, x, 'input')
    _check_shape(b, (p.out_channels,))
    _check_shape(zo, ys)
    if out is not None:
        y = given(out, 'out', ys, x.dtype)
    else:
        y = empty(x, ys, x.channels_last() or w.channels_last(), 'out')
    ctx = _context(context, threads)
    e = _epilogue(relu, alpha)
    check(lib.nconv_forward(ctx.handle, ctypes.byref(p), ctypes.byref(e), pointer(x), pointer(w), pointer(b),
                            pointer(zo), pointer(y), None, 0))
    y = out if out is not None else y.array
    return y[0] if unbatched else y


def convolution_jvp(input, weight, bias=None, stride=1, padding=0, dilation=1, transposed=False, output_padding=0,
                    groups=1, *, input_t=None, weight_t=None, bias_t=None, padding_mode='zeros', z=None, z_t=None,
                    alpha=1.0, relu=False, context=None, threads=None):
    """The forward-mode derivative of convolution (torch.autograd.forward_ad, functorch's jvp): returns
    (out, out_t), out as convolution computes it and its tangent along input_t, weight_t, bias_t and z_t
    (each optional, None counting as zeros; bias_t needs bias, z_t needs z):
    out_t = act'(pre) * (conv(input_t, weight) + conv(input, weight_t) + bias_t + alpha * z_t)."""
    nd = _spatial_dims(getattr(weight, 'shape', ()), 'weight')
    _one_dtype({'input': input}, weight=weight, bias=bias, z=z, input_t=input_t, weight_t=weight_t, bias_t=bias_t,
               z_t=z_t)
    input, z, input_t, z_t, unbatched = _unbatched(nd, input, z, input_t, z_t)
    x, w = Operand(input, 'input'), Operand(weight, 'weight')
    p, (xs, ws, ys) = _problem(x, w, nd, stride, padding, dilation, groups, transposed, output_padding, padding_mode)
    ops = {name: None if a is None else Operand(a, name)
           for name, a in (('bias', bias), ('z', z), ('input_t', input_t), ('weight_t', weight_t),
                           ('bias_t', bias_t), ('z_t', z_t))}
    for name, shape in (('bias', (p.out_channels,)), ('z', ys), ('input_t', xs), ('weight_t', ws),
                        ('bias_t', (p.out_channels,)), ('z_t', ys)):
        _same_dtype(ops[name], x, 'input')
        _check_shape(ops[name], shape)
    for t, a in (('bias_t', 'bias'), ('z_t', 'z')):
        if ops[t] is not None and ops[a] is None:
            raise InvalidArgumentError('%s: given without %s (an absent operand has no tangent)' % (t, a))
    cl = x.channels_last() or w.channels_last()
    y, ty = empty(x, ys, cl, 'out'), empty(x, ys, cl, 'out_t')
    ctx = _context(context, threads)
    e = _epilogue(relu, alpha)
    check(lib.nconv_forward_jvp(ctx.handle, ctypes.byref(p), ctypes.byref(e), pointer(x), pointer(w),
                                pointer(ops['bias']), pointer(ops['z']), pointer(ops['input_t']),
                                pointer(ops['weight_t']), pointer(ops['bias_t']), pointer(ops['z_t']), pointer(y),
                                pointer(ty)))
    y, ty = y.array, ty.array
    return (y[0], ty[0]) if unbatched else (y, ty)


def _conv(nd):
    def conv(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, *, padding_mode='zeros', z=None,
             alpha=1.0, relu=False, out=None, context=None, threads=None):
        _expect_rank(weight, nd, 'weight')
        return convolution(input, weight, bias, stride, padding, dilation, False, 0, groups,
                           padding_mode=padding_mode, z=z, alpha=alpha, relu=relu, out=out, context=context,
                           threads=threads)
    conv.__name__ = conv.__qualname__ = 'conv%dd' % nd
    conv.__doc__ = ('torch.nn.functional.conv%dd: out = act(conv(input, weight) + bias + alpha * z), where act is '
                    'relu when relu=True. padding: an int, %d ints, %d (begin, end) pairs, \'valid\' or \'same\'; '
                    'padding_mode: \'zeros\', \'reflect\', \'replicate\' or \'circular\'.' % (nd, nd, nd))
    return conv


def _conv_transpose(nd):
    def conv_transpose(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1, *,
                       z=None, alpha=1.0, relu=False, out=None, context=None, threads=None):
        _expect_rank(weight, nd, 'weight')
        return convolution(input, weight, bias, stride, padding, dilation, True, output_padding, groups, z=z,
                           alpha=alpha, relu=relu, out=out, context=context, threads=threads)
    conv_transpose.__name__ = conv_transpose.__qualname__ = 'conv_transpose%dd' % nd
    conv_transpose.__doc__ = ('torch.nn.functional.conv_transpose%dd, with the fused epilogue '
                              '(bias, alpha * z, relu) of conv%dd.' % (nd, nd))
    return conv_transpose


def _expect_rank(weight, nd, name):
    shape = getattr(weight, 'shape', None)
    if shape is None or len(shape) != nd + 2:
        raise InvalidArgumentError('%s: expected a %d-D weight for a %dd convolution, got shape %s'
                                   % (name, nd + 2, nd, None if shape is None else list(shape)))


conv1d, conv2d, conv3d = (_conv(nd) for nd in (1, 2, 3))
conv_transpose1d, conv_transpose2d, conv_transpose3d = (_conv_transpose(nd) for nd in (1, 2, 3))


def _mask(output_mask, n, name='output_mask'):
    mask = tuple(bool(m) for m in output_mask)
    if len(mask) not in n:
        raise InvalidArgumentError('%s = %r: expected %s entries' % (name, tuple(output_mask),
                                                                    ' or '.join(str(k) for k in n)))
    return mask


def convolution_backward(grad_output, input, weight, bias_sizes=None, stride=1, padding=0, dilation=1,
                         transposed=False, output_padding=0, groups=1, output_mask=(True, True, True), *,
                         padding_mode='zeros', relu=False, output=None, alpha=1.0, context=None, threads=None):
    """aten::convolution_backward: (grad_input, grad_weight, grad_bias), None where output_mask is False.

    The backward of `convolution` with its epilogue: with relu=True, `output` is the forward's output; a
    fourth output_mask entry asks for grad_z = alpha * dL/d(pre-activation) as a fourth result. bias_sizes
    is accepted for aten's signature; grad_bias is computed when output_mask[2] is set.
    """
    mask = _mask(output_mask, (3, 4))
    nd = _spatial_dims(getattr(weight, 'shape', ()), 'weight')
    _one_dtype({'input': input}, weight=weight, grad_output=grad_output, output=output)
    input, grad_output, output, unbatched = _unbatched(nd, input, grad_output, output)
    x, w, dy = Operand(input, 'input'), Operand(weight, 'weight'), Operand(grad_output, 'grad_output')
    p, (xs, ws, ys) = _problem(x, w, nd, stride, padding, dilation, groups, transposed, output_padding,
                               padding_mode)
    _same_dtype(dy, x, 'input')
    _check_shape(dy, ys)
    y = None
    if relu:
        if output is None:
            raise InvalidArgumentError('output: required with relu=True (the forward output)')
        y = Operand(output, 'output')
        _same_dtype(y, x, 'input')
        _check_shape(y, ys)
    cl = x.channels_last()
    dx = empty(x, xs, cl, 'grad_input') if mask[0] else None
    dw = empty(w, ws, w.channels_last(), 'grad_weight') if mask[1] else None
    db = empty(x, (p.out_channels,), False, 'grad_bias') if mask[2] else None
    dz = empty(dy, ys, dy.channels_last(), 'grad_z') if len(mask) > 3 and mask[3] else None
    ctx = _context(context, threads)
    e = _epilogue(relu, alpha)
    check(lib.nconv_backward(ctx.handle, ctypes.byref(p), ctypes.byref(e), pointer(x), pointer(w), pointer(y),
                             pointer(dy), pointer(dx), pointer(dw), pointer(db), pointer(dz), None, 0))
    res = [None if o is None else o.array for o in (dx, dw, db, dz)][:len(mask)]
    if unbatched:
        res[0] = None if res[0] is None else res[0][0]
        if len(res) > 3 and res[3] is not None:
            res[3] = res[3][0]
    return tuple(res)


def convolution_double_backward(ggI, ggW, ggb, gO, weight, input, stride=1, padding=0, dilation=1,
                                transposed=False, output_padding=0, groups=1, output_mask=(True, True, True), *,
                                padding_mode='zeros', context=None, threads=None):
    """aten::_convolution_double_backward: (grad_grad_output, grad_input, grad_weight).

    Given ggI, ggW, ggb (each may be None: zeros), the gradients of <dx, ggI> + <dw, ggW> + <db, ggb>, where
    (dx, dw, db) = convolution_backward(gO, input, weight), with respect to gO, input and weight.
    """
    mask = _mask(output_mask, (3,))
    nd = _spatial_dims(getattr(weight, 'shape', ()), 'weight')
    _one_dtype({'input': input}, weight=weight, gO=gO, ggI=ggI, ggW=ggW, ggb=ggb)
    input, gO, ggI, unbatched = _unbatched(nd, input, gO, ggI)
    x, w, dy = Operand(input, 'input'), Operand(weight, 'weight'), Operand(gO, 'gO')
    p, (xs, ws, ys) = _problem(x, w, nd, stride, padding, dilation, groups, transposed, output_padding,
                               padding_mode)
    ops = {}
    for name, a, shape in (('ggI', ggI, xs), ('ggW', ggW, ws), ('ggb', ggb, (p.out_channels,))):
        ops[name] = None if a is None else Operand(a, name)
        _same_dtype(ops[name], x, 'input')
        _check_shape(ops[name], shape)
    _same_dtype(dy, x, 'input')
    _check_shape(dy, ys)
    ggy = empty(dy, ys, dy.channels_last(), 'grad_grad_output') if mask[0] else None
    gx = empty(x, xs, x.channels_last(), 'grad_input') if mask[1] else None
    gw = empty(w, ws, w.channels_last(), 'grad_weight') if mask[2] else None
    ctx = _context(context, threads)
    check(lib.nconv_double_backward(ctx.handle, ctypes.byref(p), pointer(x), pointer(w), pointer(dy),
                                    pointer(ops['ggI']), pointer(ops['ggW']), pointer(ops['ggb']), pointer(ggy),
                                    pointer(gx), pointer(gw)))
    res = [None if o is None else o.array for o in (ggy, gx, gw)]
    if unbatched:
        res = [r if r is None or i == 2 else r[0] for i, r in enumerate(res)]
    return tuple(res)


class _Batched:
    """Operands of a batched (vmap) call: each batched along its own dim (an int) or shared (None)."""

    def __init__(self, size_name):
        self.size = None
        self.size_name = size_name
        self.batch = _lib.Batch()

    def operand(self, a, name, dim, field):
        if a is None:
            return None, None
        op = Operand(a, name)
        if dim is None:
            return op, op.shape
        if not isinstance(dim, int) or not -len(op.shape) <= dim < len(op.shape):
            raise InvalidArgumentError('in_dims for %s = %r: out of range for shape %s' % (name, dim, list(op.shape)))
        dim %= len(op.shape)
        if self.size is None:
            self.size = op.shape[dim]
        elif op.shape[dim] != self.size:
            raise InvalidArgumentError('%s: batch size %d along dim %d, but %s has %d'
                                       % (name, op.shape[dim], dim, self.size_name, self.size))
        setattr(self.batch, field, op.drop_dim(dim))
        return op, op.shape

    def problem(self, x, w, in_dims, *geometry):
        """The problem of one slice and its shapes, once the operands are in."""
        if self.size is None:
            raise InvalidArgumentError('in_dims = %r: no operand is batched' % (tuple(in_dims),))
        self.batch.size = self.size
        return _problem(x, w, _spatial_dims(w.shape, 'weight (a slice)'), *geometry)


def conv_batched(input, weight, bias=None, z=None, *, in_dims=(0, None, None, None), stride=1, padding=0,
                 dilation=1, groups=1, transposed=False, output_padding=0, padding_mode='zeros', alpha=1.0,
                 relu=False, context=None, threads=None):
    """functorch's vmap of `convolution`: B problems whose operands are batched along in_dims (None: shared).

    The result carries B as its dim 0; each slice is the unbatched call's output.
    """
    if len(in_dims) != 4:
        raise InvalidArgumentError('in_dims = %r: expected 4 entries (input, weight, bias, z)' % (in_dims,))
    bt = _Batched('the first batched operand')
    x, xs = bt.operand(input, 'input', in_dims[0], 'x')
    w, _ = bt.operand(weight, 'weight', in_dims[1], 'w')
    b, _ = bt.operand(bias, 'bias', in_dims[2], 'bias')
    zo, _ = bt.operand(z, 'z', in_dims[3], 'z')
    p, (_, _, ys) = bt.problem(x, w, in_dims, stride, padding, dilation, groups, transposed, output_padding,
                               padding_mode)
    for op in (b, zo):
        _same_dtype(op, x, 'input')
    _check_shape(b, (p.out_channels,))
    _check_shape(zo, ys)
    y = empty(x, (bt.size,) + ys, False, 'out')
    bt.batch.y = y.drop_dim(0)
    ctx = _context(context, threads)
    e = _epilogue(relu, alpha)
    check(lib.nconv_forward_batched(ctx.handle, ctypes.byref(p), ctypes.byref(e), ctypes.byref(bt.batch),
                                    pointer(x), pointer(w), pointer(b), pointer(zo), pointer(y)))
    return y.array


def convolution_backward_batched(grad_output, input, weight, *, in_dims=(0, 0, None),
                                 output_mask=(True, True, True), stride=1, padding=0, dilation=1, groups=1,
                                 transposed=False, output_padding=0, padding_mode='zeros', context=None,
                                 threads=None):
    """functorch's vmap of `convolution_backward` over (grad_output, input, weight) batched along in_dims.

    Each result carries B as its dim 0. With input and grad_output batched and weight shared, grad_weight
    and grad_bias are per b: per-sample gradients when each slice holds one sample.
    """
    mask = _mask(output_mask, (3,))
    if len(in_dims) != 3:
        raise InvalidArgumentError('in_dims = %r: expected 3 entries (grad_output, input, weight)' % (in_dims,))
    bt = _Batched('the first batched operand')
    dy, _ = bt.operand(grad_output, 'grad_output', in_dims[0], 'dy')
    x, _ = bt.operand(input, 'input', in_dims[1], 'x')
    w, _ = bt.operand(weight, 'weight', in_dims[2], 'w')
    p, (xs, ws, ys) = bt.problem(x, w, in_dims, stride, padding, dilation, groups, transposed, output_padding,
                                 padding_mode)
    _same_dtype(dy, x, 'input')
    _check_shape(dy, ys)
    outs = []
    for on, name, shape, field in zip(mask, ('grad_input', 'grad_weight', 'grad_bias'),
                                      (xs, ws, (p.out_channels,)), ('dx', 'dw', 'db')):
        if not on:
            outs.append((None, None))
            continue
        o = empty(x, (bt.size,) + tuple(shape), False, name)
        setattr(bt.batch, field, o.drop_dim(0))
        outs.append((o, pointer(o)))
    ctx = _context(context, threads)
    e = _epilogue(False, 1.0)
    check(lib.nconv_backward_batched(ctx.handle, ctypes.byref(p), ctypes.byref(e), ctypes.byref(bt.batch),
                                     pointer(x), pointer(w), None, pointer(dy), outs[0][1], outs[1][1], outs[2][1],
                                     None))
    return tuple(None if o is None else o.array for o, _ in outs)


def per_sample_grads(grad_output, input, weight, *, bias=True, stride=1, padding=0, dilation=1, groups=1,
                     transposed=False, output_padding=0, padding_mode='zeros', context=None, threads=None):
    """Per-sample weight (and bias) gradients: (grad_weight [N, *weight.shape], grad_bias [N, out_channels] or
    None), each sample's gradient of the batch's loss, without materialising N copies of the weights."""
    nd = len(getattr(weight, 'shape', ())) - 2
    _expect_rank(weight, nd, 'weight')
    one = slice(None), None  # [N, C, ...] -> [N, 1, C, ...]: every sample a batch of one
    _, dw, db = convolution_backward_batched(
        grad_output[one], input[one], weight, in_dims=(0, 0, None), output_mask=(False, True, bool(bias)),
        stride=stride, padding=padding, dilation=dilation, groups=groups, transposed=transposed,
        output_padding=output_padding, padding_mode=padding_mode, context=context, threads=threads)
    return dw, db


def problem_repro(input_shape, weight_shape, stride=1, padding=0, dilation=1, groups=1, transposed=False,
                  output_padding=0, padding_mode='zeros', dtype='float32', kind='cli'):
    """The problem as an `nconv check` command line (kind='cli') or a PyTorch snippet (kind='pytorch')."""
    codes = {name: code for code, name in DTYPE_NAMES.items()}
    if dtype not in codes:
        raise InvalidArgumentError('dtype = %r: must be one of %s' % (dtype, ', '.join(sorted(codes))))
    x, w = shape_only(input_shape, codes[dtype], 'input'), shape_only(weight_shape, codes[dtype], 'weight')
    p, _ = _problem(x, w, len(weight_shape) - 2, stride, padding, dilation, groups, transposed, output_padding,
                    padding_mode)
    buf = ctypes.create_string_buffer(4096)
    check(lib.nconv_problem_repro(ctypes.byref(p), {'cli': 0, 'pytorch': 1}[kind], buf, len(buf)))
    return buf.value.decode()
