"""The ``cuda`` backend: real numba.cuda kernels, with dual arguments marshalled in.

A kernel is compiled by numba.cuda from a copy of its function whose ``cuda``
refers to numba.cuda itself and whose dualgpu device functions are numba.cuda
device functions. The dispatcher gets one extension, :class:`DualArguments`,
which turns a DualArray into the tuple of its two arrays and a Dual into the
tuple of its value and lanes; numba's launcher flattens those tuples in the
order of the data model (see ``_numba_internals``). Plain arguments pass
through untouched, so a plain launch costs what numba.cuda's does.
"""
from numba import types

from ..dual import Dual
from ..dualarray import DualArray
from ._rebind import rebind
from ._translate import device_py_func, is_cuda_module, unwrap

__all__ = ["DualArguments", "GpuKernel", "compile_kernel", "marshal"]

_DEVICE_CACHE = {}


def marshal(ty, val):
    """Return ``(type, value)`` numba.cuda's launcher understands for one kernel argument."""
    if isinstance(val, DualArray):
        return types.Tuple([ty.values_type, ty.partials_type]), (val.values, val.partials)
    if isinstance(val, Dual):
        return (
            types.Tuple([ty.dtype, ty.partials_type]),
            (float(val.value), tuple(float(p) for p in val.partials)),
        )
    return ty, val


class DualArguments:
    """numba.cuda dispatcher extension that marshals Dual and DualArray arguments."""

    def prepare_args(self, ty, val, stream=0, retr=None):
        return marshal(ty, val)


DUAL_ARGUMENTS = DualArguments()


def _replace(value):
    import numba.cuda

    if is_cuda_module(value):
        return numba.cuda
    if getattr(value, "__dualgpu_device__", False) is True:
        py_func = device_py_func(value)
        if py_func is not None:
            return _device(py_func, getattr(value, "options", {}))
    return value


def _device(py_func, options):
    import numba.cuda

    if py_func not in _DEVICE_CACHE:
        _DEVICE_CACHE[py_func] = numba.cuda.jit(device=True, **options)(rebind(py_func, _replace))
    return _DEVICE_CACHE[py_func]


def prepare_function(func):
    """The function numba.cuda compiles for ``func``: globals rebound as above."""
    return rebind(unwrap(func) or func, _replace)


class GpuKernel:
    """A numba.cuda kernel that also accepts dual arguments."""

    def __init__(self, func, options=None):
        import numba.cuda

        options = dict(options or {})
        options.pop("device", None)
        self.py_func = unwrap(func) or func
        self.dispatcher = numba.cuda.jit(extensions=[DUAL_ARGUMENTS], **options)(
            prepare_function(self.py_func)
        )

    def launch(self, griddim, blockdim, stream, sharedmem, args):
        self.dispatcher[griddim, blockdim, stream, sharedmem](*args)


def compile_kernel(func, **options):
    """Return a :class:`GpuKernel` for ``func``."""
    return GpuKernel(func, options)
