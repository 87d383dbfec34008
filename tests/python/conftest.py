"""Shared helpers of the Python package's tests (run by ctest with NCONV_LIBRARY and PYTHONPATH set)."""
import contextlib
import sys
import types
import unittest

import pytest

# torch.testing._internal imports expecttest, which Debian does not package; the tests use none of it.
if 'expecttest' not in sys.modules:
    try:
        import expecttest  # noqa: F401
    except ImportError:
        stub = types.ModuleType('expecttest')
        stub.TestCase = unittest.TestCase
        stub.ACCEPT = False
        sys.modules['expecttest'] = stub

import nconv.functional  # noqa: E402


@contextlib.contextmanager
def counting(*names):
    """Counts the calls of nconv.functional's named functions while the block runs (yields the counts)."""
    counts = dict.fromkeys(names, 0)
    saved = {n: getattr(nconv.functional, n) for n in names}

    def wrap(name, fn):
        def counted(*args, **kwargs):
            counts[name] += 1
            return fn(*args, **kwargs)
        return counted

    for n in names:
        setattr(nconv.functional, n, wrap(n, saved[n]))
    try:
        yield counts
    finally:
        for n, fn in saved.items():
            setattr(nconv.functional, n, fn)


@pytest.fixture
def nconv_calls():
    """The number of nconv forward / backward / double backward calls made during a test."""
    with counting('convolution', 'convolution_backward', 'convolution_double_backward') as counts:
        yield counts
