"""nconv: N-dimensional convolution on CPUs, from Python.

Functions mirror torch.nn.functional and aten (conv1d/2d/3d, conv_transpose1d/2d/3d, convolution,
convolution_backward, convolution_double_backward, and the forward-mode convolution_jvp) on NumPy arrays
and torch CPU tensors; conv_batched,
convolution_backward_batched and per_sample_grads are functorch's vmap of them; Plan keeps packed
weights. nconv.torch has autograd Functions, drop-in nn.Modules and patch(model).
"""
from ._lib import (InternalError, InvalidArgumentError, NconvError, OutOfMemoryError,  # noqa: F401
                   UnsupportedError, lib)
from .functional import (Context, conv1d, conv2d, conv3d, conv_batched, conv_transpose1d,  # noqa: F401
                         conv_transpose2d, conv_transpose3d, convolution, convolution_backward,
                         convolution_backward_batched, convolution_double_backward, convolution_jvp,
                         default_context,
                         get_num_threads, per_sample_grads, problem_repro, set_num_threads)
from .plan import Plan  # noqa: F401

__version__ = '0.1.0'


def algorithms():
    """The library's algorithm names, in preference order (the reference last)."""
    return [lib.nconv_algorithm_name(i).decode() for i in range(lib.nconv_algorithm_count())]
