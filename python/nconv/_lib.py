"""The shared library, its structs and its errors, through ctypes.

The structs mirror include/nconv.h field for field; the library is found
through NCONV_LIBRARY, then beside the installed package, then in the build
tree of a source checkout.
"""
import ctypes
import os

MAX_SPATIAL = 3
MAX_DIMS = MAX_SPATIAL + 2

OK, INVALID_ARGUMENT, UNSUPPORTED, OUT_OF_MEMORY, INTERNAL_ERROR = range(5)
F32, F64, F16, BF16, C64, C128 = range(6)
PAD_MODES = {'zeros': 0, 'reflect': 1, 'replicate': 2, 'circular': 3}
ACT_IDENTITY, ACT_RELU = 0, 1
LAYOUT_NCX, LAYOUT_NXC, LAYOUT_ANY = range(3)
DIR_FWD, DIR_BWD_D, DIR_BWD_W = range(3)
OP_FORWARD, OP_BACKWARD, OP_DOUBLE_BACKWARD = range(3)
OUT_DX, OUT_DW, OUT_DB, OUT_DZ, OUT_GGY, OUT_GX, OUT_GW = (1 << i for i in range(7))
POLICIES = {'heuristic': 0, 'benchmark': 1}

_I64 = ctypes.c_int64
_Spatial = _I64 * MAX_SPATIAL


class Problem(ctypes.Structure):
    _fields_ = [('ndims', ctypes.c_int), ('batch', _I64), ('in_channels', _I64), ('out_channels', _I64),
                ('groups', _I64), ('in_size', _Spatial), ('kernel', _Spatial), ('stride', _Spatial),
                ('dilation', _Spatial), ('pad_begin', _Spatial), ('pad_end', _Spatial),
                ('output_padding', _Spatial), ('transposed', ctypes.c_int), ('padding_mode', ctypes.c_int),
                ('dtype', ctypes.c_int)]


class Tensor(ctypes.Structure):
    _fields_ = [('data', ctypes.c_void_p), ('stride', _I64 * MAX_DIMS)]


class Epilogue(ctypes.Structure):
    _fields_ = [('activation', ctypes.c_int), ('alpha', ctypes.c_double)]


class Batch(ctypes.Structure):
    _fields_ = [(name, _I64) for name in ('size', 'x', 'w', 'bias', 'z', 'y', 'dy', 'dx', 'dw', 'db', 'dz')]


class PlanDesc(ctypes.Structure):
    _fields_ = [('op', ctypes.c_int), ('outputs', ctypes.c_uint), ('epi', Epilogue), ('with_z', ctypes.c_int),
                ('layout', ctypes.c_int)]


_TP = ctypes.POINTER(Tensor)
VARIANT_FIELDS = ('x', 'w', 'bias', 'z', 'y', 'dy', 'dx', 'dw', 'db', 'dz', 'ggx', 'ggw', 'ggb', 'ggy', 'gx', 'gw')


class VariantPack(ctypes.Structure):
    _fields_ = [(name, _TP) for name in VARIANT_FIELDS] + [('workspace', ctypes.c_void_p),
                                                           ('workspace_size', ctypes.c_size_t)]


class NconvError(Exception):
    """A failed library call; the message is the library's."""


class InvalidArgumentError(NconvError, ValueError, RuntimeError):
    """NCONV_INVALID_ARGUMENT. A ValueError, and a RuntimeError as PyTorch raises for the same inputs."""


class UnsupportedError(NconvError, NotImplementedError):
    """NCONV_UNSUPPORTED: valid, but not provided."""


class OutOfMemoryError(NconvError, MemoryError):
    """NCONV_OUT_OF_MEMORY: an allocation failed, the memory limit or the workspace is too small."""


class InternalError(NconvError, RuntimeError):
    """NCONV_INTERNAL_ERROR: a bug in nconv."""


_ERRORS = {INVALID_ARGUMENT: InvalidArgumentError, UNSUPPORTED: UnsupportedError,
           OUT_OF_MEMORY: OutOfMemoryError, INTERNAL_ERROR: InternalError}


def _candidates():
    env = os.environ.get('NCONV_LIBRARY')
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    found = []
    # Installed: the install step writes the library's path relative to the package.
    try:
        from . import _install
        found.append(os.path.normpath(os.path.join(here, _install.LIBRARY)))
    except ImportError:
        pass
    found.append(os.path.join(here, 'libnconv.so'))
    # A source checkout: python/nconv -> build/libnconv.so.
    found.append(os.path.join(here, '..', '..', 'build', 'libnconv.so'))
    return found


def _load():
    tried = []
    for path in _candidates():
        if os.path.exists(path):
            return ctypes.CDLL(path)
        tried.append(path)
    raise ImportError('nconv: libnconv.so not found (set NCONV_LIBRARY to its path); tried: ' + ', '.join(tried))


lib = _load()

_P = ctypes.POINTER
_signatures = {
    'nconv_last_error': ([], ctypes.c_char_p),
    'nconv_status_string': ([ctypes.c_int], ctypes.c_char_p),
    'nconv_problem_init': ([_P(Problem), ctypes.c_int], ctypes.c_int),
    'nconv_problem_validate': ([_P(Problem)], ctypes.c_int),
    'nconv_problem_set_padding_same': ([_P(Problem)], ctypes.c_int),
    'nconv_problem_shapes': ([_P(Problem), _I64 * MAX_DIMS, _I64 * MAX_DIMS, _I64 * MAX_DIMS], ctypes.c_int),
    'nconv_problem_flops': ([_P(Problem), _P(ctypes.c_double)], ctypes.c_int),
    'nconv_problem_repro': ([_P(Problem), ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t], ctypes.c_int),
    'nconv_context_create': ([_P(ctypes.c_void_p)], ctypes.c_int),
    'nconv_context_destroy': ([ctypes.c_void_p], ctypes.c_int),
    'nconv_context_set_threads': ([ctypes.c_void_p, ctypes.c_int], ctypes.c_int),
    'nconv_context_set_deterministic': ([ctypes.c_void_p, ctypes.c_int], ctypes.c_int),
    'nconv_context_set_policy': ([ctypes.c_void_p, ctypes.c_int], ctypes.c_int),
    'nconv_context_set_algorithm': ([ctypes.c_void_p, ctypes.c_char_p], ctypes.c_int),
    'nconv_context_set_memory_limit': ([ctypes.c_void_p, ctypes.c_size_t], ctypes.c_int),
    'nconv_context_create_cuda': ([_P(ctypes.c_void_p), ctypes.c_int], ctypes.c_int),
    'nconv_context_set_stream': ([ctypes.c_void_p, ctypes.c_void_p], ctypes.c_int),
    'nconv_context_set_allow_tf32': ([ctypes.c_void_p, ctypes.c_int], ctypes.c_int),
    'nconv_context_device': ([ctypes.c_void_p, _P(ctypes.c_int)], ctypes.c_int),
    'nconv_algorithm_count': ([], ctypes.c_int),
    'nconv_algorithm_name': ([ctypes.c_int], ctypes.c_char_p),
    'nconv_algorithm_chosen': ([ctypes.c_void_p, _P(Problem), ctypes.c_int, _P(ctypes.c_char_p)], ctypes.c_int),
    'nconv_forward': ([ctypes.c_void_p, _P(Problem), _P(Epilogue), _TP, _TP, _TP, _TP, _TP, ctypes.c_void_p,
                       ctypes.c_size_t], ctypes.c_int),
    'nconv_backward': ([ctypes.c_void_p, _P(Problem), _P(Epilogue), _TP, _TP, _TP, _TP, _TP, _TP, _TP, _TP,
                        ctypes.c_void_p, ctypes.c_size_t], ctypes.c_int),
    'nconv_forward_batched': ([ctypes.c_void_p, _P(Problem), _P(Epilogue), _P(Batch), _TP, _TP, _TP, _TP, _TP],
                              ctypes.c_int),
    'nconv_backward_batched': ([ctypes.c_void_p, _P(Problem), _P(Epilogue), _P(Batch)] + [_TP] * 8, ctypes.c_int),
    'nconv_double_backward': ([ctypes.c_void_p, _P(Problem)] + [_TP] * 9, ctypes.c_int),
    'nconv_forward_jvp': ([ctypes.c_void_p, _P(Problem), _P(Epilogue)] + [_TP] * 10, ctypes.c_int),
    'nconv_plan_desc_init': ([_P(PlanDesc), ctypes.c_int], ctypes.c_int),
    'nconv_plan_create': ([ctypes.c_void_p, _P(Problem), _P(PlanDesc), _P(ctypes.c_void_p)], ctypes.c_int),
    'nconv_plan_workspace_size': ([ctypes.c_void_p, _P(ctypes.c_size_t)], ctypes.c_int),
    'nconv_plan_set_weights': ([ctypes.c_void_p, _TP, _TP], ctypes.c_int),
    'nconv_plan_reshape': ([ctypes.c_void_p, _I64], ctypes.c_int),
    'nconv_plan_algorithm': ([ctypes.c_void_p, ctypes.c_int, _P(ctypes.c_char_p)], ctypes.c_int),
    'nconv_plan_execute': ([ctypes.c_void_p, _P(VariantPack)], ctypes.c_int),
    'nconv_plan_destroy': ([ctypes.c_void_p], ctypes.c_int),
}
for _name, (_args, _res) in _signatures.items():
    _fn = getattr(lib, _name)
    _fn.argtypes = _args
    _fn.restype = _res


class Handle:
    """One of the library's objects: destroyed by close(), at the end of a with block or when collected."""

    _handle = None

    @staticmethod
    def _destroy(handle):
        raise NotImplementedError

    @property
    def handle(self):
        if self._handle is None:
            raise InvalidArgumentError('%s: used after close()' % type(self).__name__)
        return self._handle

    def close(self):
        if self._handle is not None:
            self._destroy(self._handle)
            self._handle = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def check(status):
    """Raises the exception of a failed call, with the calling thread's message."""
    if status != OK:
        message = lib.nconv_last_error().decode('utf-8', 'replace')
        raise _ERRORS.get(status, InternalError)(message or lib.nconv_status_string(status).decode())
