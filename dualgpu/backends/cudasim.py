"""The ``cudasim`` backend: numba's CUDA simulator, with duals as Python objects.

Each kernel runs as Python code, one Python thread per CUDA thread. A copy of
the kernel function is made whose ``math`` (and names imported from ``math``)
refer to :mod:`dualgpu.dmath`, whose ``cuda`` is numba.cuda (which the
simulator swaps for its own during a launch), and whose device functions are
simulator device functions made the same way, wherever they are defined.

A launch with dual arguments (N lanes) runs a second copy whose ``cuda`` is a
:class:`_DualCuda`: it forwards every name to the simulator's module of the
running launch, except that ``cuda.local.array`` of a float dtype gives a
DualArray with N lanes, so that scratch can hold duals. Device functions
called from that copy are made the same way.
"""
import math
import threading
import types as pytypes

import numpy as np

from .. import dbuiltins, dmath
from ..dual import Dual
from ..dualarray import DualArray
from ._rebind import global_names, rebind
from ._translate import device_py_func, is_cuda_module, unwrap

__all__ = ["compile_kernel", "SimulatorKernel"]

_DEVICE_CACHE = {}
#: numba's simulator runs one kernel at a time per process (it asserts so, and swaps
#: module globals during a launch): launches from several threads take turns.
_LAUNCH_LOCK = threading.RLock()


def _simulator():
    from numba.cuda import simulator

    return simulator


class _DualLocal:
    """``cuda.local`` of a dual launch: float scratch is a DualArray with ``lanes`` lanes."""

    def __init__(self, lanes):
        self.lanes = lanes

    def array(self, shape, dtype, alignment=None):
        from numba.core import types
        from numba.np import numpy_support

        if isinstance(dtype, types.Type):
            dtype = numpy_support.as_dtype(dtype)
        dtype = np.dtype(dtype)
        if dtype.kind != "f":
            return np.empty(shape, dtype)
        shape = (shape,) if np.ndim(shape) == 0 else tuple(shape)
        return DualArray(np.empty(shape, dtype), np.zeros((self.lanes,) + shape, dtype))


class _DualCuda:
    """``cuda`` inside a dual launch: the simulator's module, with dual local arrays."""

    def __init__(self, lanes):
        self.local = _DualLocal(lanes)

    def __getattr__(self, name):
        from numba.cuda.simulator import kernel

        context = kernel._get_kernel_context()
        if context is None:  # outside a launch: numba.cuda's own names
            import numba.cuda

            return getattr(numba.cuda, name)
        return getattr(context, name)


_DUAL_CUDA = {}


def _replacer(lanes):
    """The global replacement for a plain launch (lanes 0) or a dual one with ``lanes`` lanes."""

    def replace(value):
        import numba.cuda

        if is_cuda_module(value):
            if not lanes:
                return numba.cuda
            if lanes not in _DUAL_CUDA:
                _DUAL_CUDA[lanes] = _DualCuda(lanes)
            return _DUAL_CUDA[lanes]
        if value is math:
            return dmath
        if isinstance(value, pytypes.BuiltinFunctionType) and getattr(math, value.__name__, None) is value:
            return getattr(dmath, value.__name__)
        py_func = device_py_func(value)
        if py_func is not None:
            return _device(py_func, lanes)
        return value

    return replace


_replace = _replacer(0)

#: builtins a dual launch replaces: Python's min/max return an argument unchanged, compiled
#: code applies numba's typing (a float32 dual with a Python float gives a float64 dual)
_DUAL_BUILTINS = {"min": dbuiltins.min, "max": dbuiltins.max}


def _simulated(py_func, lanes):
    """The copy of ``py_func`` the simulator runs for ``lanes`` lanes (0: a plain launch)."""
    copy = rebind(py_func, _replacer(lanes))
    if lanes:
        names = global_names(py_func.__code__)
        for name, stand_in in _DUAL_BUILTINS.items():
            if name in names and name not in py_func.__globals__:
                copy.__globals__[name] = stand_in  # rebind's globals are the copy's own
    return copy


def _device(py_func, lanes=0):
    key = (py_func, lanes)
    if key not in _DEVICE_CACHE:
        _DEVICE_CACHE[key] = None  # recursion guard
        _DEVICE_CACHE[key] = _simulator().jit(device=True)(_simulated(py_func, lanes))
    return _DEVICE_CACHE[key]


def _lanes(args):
    for arg in args:
        if isinstance(arg, (Dual, DualArray)):
            return arg.lanes
    return 0


class SimulatorKernel:
    """A kernel prepared for the CUDA simulator (one copy per lane count, 0 for plain)."""

    def __init__(self, func, options=None):
        self.py_func = unwrap(func) or func
        self._kernels = {}

    def _kernel(self, lanes):
        if lanes not in self._kernels:
            self._kernels[lanes] = _simulator().jit(_simulated(self.py_func, lanes))
        return self._kernels[lanes]

    def launch(self, griddim, blockdim, stream, sharedmem, args):
        with _LAUNCH_LOCK:
            self._kernel(_lanes(args))[griddim, blockdim, stream, sharedmem](*args)


def compile_kernel(func, **options):
    """Return a :class:`SimulatorKernel` for ``func``."""
    return SimulatorKernel(func, options)
