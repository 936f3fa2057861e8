"""The ``cudasim`` backend: numba's CUDA simulator, with duals as Python objects.

Each kernel runs as Python code, one Python thread per CUDA thread. A copy of
the kernel function is made whose ``math`` (and names imported from ``math``)
refer to :mod:`dualgpu.dmath`, whose ``cuda`` is numba.cuda (which the
simulator swaps for its own during a launch), and whose device functions are
simulator device functions made the same way, wherever they are defined.
"""
import math
import types as pytypes

from .. import dmath
from ._rebind import rebind
from ._translate import device_py_func, is_cuda_module, unwrap

__all__ = ["compile_kernel", "SimulatorKernel"]

_DEVICE_CACHE = {}


def _simulator():
    from numba.cuda import simulator

    return simulator


def _replace(value):
    import numba.cuda

    if is_cuda_module(value):
        return numba.cuda
    if value is math:
        return dmath
    if isinstance(value, pytypes.BuiltinFunctionType) and getattr(math, value.__name__, None) is value:
        return getattr(dmath, value.__name__)
    py_func = device_py_func(value)
    if py_func is not None:
        return _device(py_func)
    return value


def _device(py_func):
    key = py_func
    if key not in _DEVICE_CACHE:
        _DEVICE_CACHE[key] = None  # recursion guard
        _DEVICE_CACHE[key] = _simulator().jit(device=True)(rebind(py_func, _replace))
    return _DEVICE_CACHE[key]


class SimulatorKernel:
    """A kernel prepared for the CUDA simulator."""

    def __init__(self, func, options=None):
        self.py_func = unwrap(func) or func
        self._kernel = _simulator().jit(rebind(self.py_func, _replace))

    def launch(self, griddim, blockdim, stream, sharedmem, args):
        self._kernel[griddim, blockdim, stream, sharedmem](*args)


def compile_kernel(func, **options):
    """Return a :class:`SimulatorKernel` for ``func``."""
    return SimulatorKernel(func, options)
