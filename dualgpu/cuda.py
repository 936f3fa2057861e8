"""A drop-in namespace for ``numba.cuda``: change ``from numba import cuda`` to ``from dualgpu import cuda``.

Kernel-side names (``grid``, ``threadIdx``, ``local.array`` ...) are numba.cuda's
own; each backend makes them mean the right thing. Host-side names allocate and
copy on the active backend, for plain and dual arrays alike:

* ``to_device(dual_array)`` and ``device_array_like(dual_array)`` give DualArrays;
* while the driver runs a function, every float array created here is a
  DualArray with the driver's lane count (zero partials), so host code written
  for plain arrays needs no change to be differentiated;
* outside the driver, allocation follows the argument (plain stays plain);
* every DualArray allocated here (``device_array``/``device_array_like``) starts
  as zeros, values and partials, on every backend (a device memset on the GPU):
  a kernel that reads a buffer before writing it sees the same zeros on
  ``cuda``, ``cpu`` and ``cudasim``, never uninitialised tangents. Plain arrays
  keep numba's behaviour (uninitialised on ``cuda`` and ``cudasim``, zeros on
  ``cpu``).

On the ``cpu`` backend "device" arrays are host arrays that also have numba's
device-array methods (``copy_to_host``, ``copy_to_device``).
"""
import sys

import numpy as np
from numba import cuda as _cuda

from ._context import active_lanes, active_levels, lane_dtype
from .backend import backend
from .dual import Dual
from .errors import DualgpuError
from .dualarray import DualArray
from .host_api import (  # noqa: F401  (numba.cuda's names, working on every backend)
    defer_cleanup, event, event_elapsed_time, managed_array, mapped, mapped_array, pinned,
    pinned_array, pinned_array_like,
)
from .kernel import jit
from .vectorize import guvectorize, vectorize  # noqa: F401
from .object_arrays import from_object_array

__dualgpu_cuda__ = True

__all__ = [
    "jit", "grid", "gridsize", "threadIdx", "blockIdx", "blockDim", "gridDim", "local",
    "shared", "const", "atomic", "syncthreads", "laneid", "warpsize", "to_device",
    "device_array", "device_array_like", "synchronize", "is_available", "HostArray",
    "HostStream", "stream", "default_stream", "event", "event_elapsed_time", "pinned",
    "pinned_array", "pinned_array_like", "mapped", "mapped_array", "managed_array",
    "defer_cleanup", "vectorize", "guvectorize",
]

# kernel-side names: numba.cuda's own objects (backends give them meaning). With
# NUMBA_ENABLE_CUDASIM=1 numba.cuda has none of them outside a launch.
_KERNEL_SIDE = (
    "grid", "gridsize", "threadIdx", "blockIdx", "blockDim", "gridDim", "local", "shared",
    "const", "atomic", "syncthreads", "laneid", "warpsize",
)
globals().update({name: getattr(_cuda, name, None) for name in _KERNEL_SIDE})


class HostArray(np.ndarray):
    """A numpy array standing in for a device array on the ``cpu`` backend."""

    def copy_to_host(self, ary=None, stream=0):
        """Return a plain numpy copy (or copy into ``ary``)."""
        if ary is None:
            return np.array(self, copy=True).view(np.ndarray)
        ary[...] = self
        return ary

    def copy_to_device(self, ary, stream=0):
        """Copy ``ary`` into this array (a DualArray is refused: its partials would be lost)."""
        from ._transfer import copy_into

        copy_into(self, ary, stream)


def _plain_to_device(array):
    name = backend()
    if name == "cuda":
        return _cuda.to_device(array)
    if name == "cudasim":
        from numba.cuda import simulator

        return simulator.to_device(np.array(array, copy=True))
    return np.array(array, copy=True).view(HostArray)


def _plain_empty(shape, dtype):
    name = backend()
    if name == "cuda":
        return _cuda.device_array(shape, dtype)
    if name == "cudasim":
        from numba.cuda import simulator

        return simulator.device_array(shape, dtype)
    return np.zeros(shape, dtype).view(HostArray)


def _plain_zeros(shape, dtype):
    """A zero-filled array on the active backend (the members of an allocated DualArray)."""
    name = backend()
    if name == "cuda":
        array = _cuda.device_array(shape, dtype)
        if array.size:
            array.gpu_data.memset(0)  # a device memset: no host buffer, no transfer
        return array
    if name == "cudasim":
        from numba.cuda import simulator

        return simulator.to_device(np.zeros(shape, dtype))
    return np.zeros(shape, dtype).view(HostArray)


def _is_float(dtype):
    return np.dtype(dtype).kind == "f"


def _host(array):
    if hasattr(array, "copy_to_host") and not isinstance(array, np.ndarray):
        return array.copy_to_host()
    return np.asarray(array)


def _dtype_of(x):
    return x.dtype if isinstance(x, (Dual, np.ndarray, np.generic)) else np.asarray(x).dtype


def _refuse_scalar(obj):
    """Raise for a 0-d float under the driver: dual arrays have 1 to 3 dimensions."""
    what = f"a Dual ({obj.value})" if isinstance(obj, Dual) else f"a scalar ({obj})"
    raise DualgpuError(
        f"cuda.to_device got {what} while a derivative runs; numba.cuda would make a 0-d "
        "device array of it, but a 0-d array cannot carry partials (dual arrays have 1 to 3 "
        "dimensions). Fix: pass the scalar to the kernel as an argument (kernels take "
        "scalars directly), or, if the kernel indexes an array there, give it an array "
        "(np.full(n, x), or np.array([x]) read as a[0])."
    )


def _single_buffer(array):
    """``array`` if it is C- or Fortran-contiguous, else a C-contiguous copy.

    numba.cuda copies only single-buffer arrays to a device. A DualArray whose values
    are one (``a.T`` of a C array is Fortran-contiguous) has lane-major partials that
    are not (lanes first, then Fortran order): copying them is ours to do, not the user's.
    """
    if array.flags.c_contiguous or array.flags.f_contiguous:
        return array
    return np.ascontiguousarray(array)


def to_device(obj, stream=0, copy=True, to=None):
    """Copy a host array (or DualArray) to the active backend's memory.

    Returns a DualArray for a DualArray, or for a float array while the driver runs.
    With ``to=buffer`` the data is copied into ``buffer`` and ``buffer`` is returned: a
    DualArray buffer receives values and partials (zero partials from a plain array); a
    plain buffer refuses a DualArray.
    """
    if to is not None:
        from ._transfer import copy_into

        return copy_into(to, obj, stream)
    if isinstance(obj, DualArray):
        if obj.is_nested:
            return DualArray(to_device(obj.values), to_device(obj.partials), tag=obj.tag)
        return DualArray(_plain_to_device(_single_buffer(_host(obj.values))),
                         _plain_to_device(_single_buffer(_host(obj.partials))), tag=obj.tag)
    if isinstance(obj, np.ndarray) and obj.dtype.kind == "f":
        from .host_buffers import active

        registry = active()
        found = None if registry is None else registry.lookup(obj)
        if found is not None:  # a host buffer a kernel wrote duals into: its partials too
            return to_device(found)
    array = np.asarray(obj)
    if array.dtype == object:  # np.array([dual, 0.0]) in host code: duals in an object array
        array = from_object_array(array, "the array given to cuda.to_device")
        if isinstance(array, DualArray):
            return to_device(array)
    if np.ndim(array) == 0 and (isinstance(array, Dual) or active_lanes()
                                or len(active_levels()) > 1) and _is_float(_dtype_of(array)):
        _refuse_scalar(obj)
    if len(active_levels()) > 1 and _is_float(array.dtype):  # a nested derivative runs
        from .nested import lift_array

        return lift_array(_plain_to_device(array), active_levels(), _plain_zeros)
    lanes = active_lanes()
    if lanes and _is_float(array.dtype):
        zeros = np.zeros((lanes,) + array.shape, lane_dtype(array.dtype))
        return DualArray(_plain_to_device(array), _plain_to_device(zeros))
    return _plain_to_device(array)


def device_array(shape, dtype=np.float64, strides=None, order="C", stream=0):
    """An array on the active backend: uninitialised as numba's, or a zeroed DualArray.

    Under the driver, float dtypes give a DualArray with the driver's lanes,
    values and partials zero on every backend.
    """
    shape = (shape,) if np.ndim(shape) == 0 else tuple(shape)
    if len(active_levels()) > 1 and _is_float(dtype):  # a nested derivative runs
        from .nested import zeros

        return zeros(shape, active_levels(), np.dtype(dtype), _plain_zeros)
    lanes = active_lanes()
    if lanes and _is_float(dtype):
        return DualArray(_plain_zeros(shape, dtype), _plain_zeros((lanes,) + shape, lane_dtype(dtype)))
    return _plain_empty(shape, dtype)


def device_array_like(ary, stream=0):
    """An array shaped and typed like ``ary``: a zeroed DualArray with its lanes when ``ary`` is one."""
    if isinstance(ary, DualArray) and ary.is_nested:
        return DualArray(device_array_like(ary.values), device_array_like(ary.partials),
                         tag=ary.tag)
    if isinstance(ary, DualArray):
        return DualArray(
            _plain_zeros(ary.shape, ary.dtype),
            _plain_zeros((ary.lanes,) + ary.shape, ary.partials.dtype),
            tag=ary.tag,
        )
    return device_array(tuple(ary.shape), ary.dtype)


class HostStream:
    """A stream on the cpu and cudasim backends, where work is already synchronous."""

    def synchronize(self):
        """Nothing to wait for."""

    def auto_synchronize(self):
        """Context manager that synchronises on exit (a no-op here)."""
        import contextlib

        return contextlib.nullcontext(self)

    def __repr__(self):
        return "<dualgpu host stream>"


def stream():
    """A CUDA stream on the GPU backend, a :class:`HostStream` on the cpu and cudasim backends."""
    return _cuda.stream() if backend() == "cuda" else HostStream()


def default_stream():
    """The default stream of the active backend."""
    return _cuda.default_stream() if backend() == "cuda" else HostStream()


def synchronize():
    """Wait for the device (a no-op on the cpu and cudasim backends)."""
    if backend() == "cuda":
        _cuda.synchronize()


def is_available():
    """True: dualgpu can always launch kernels (on the GPU, the simulator or the CPU)."""
    return True


# numba.cuda.random with host-side states off the GPU: cuda.random and dualgpu.cuda.random
from . import cuda_random as random  # noqa: E402

sys.modules.setdefault(__name__ + ".random", random)


def __getattr__(name):
    # anything else numba.cuda offers (streams, events, pinned memory...)
    return getattr(_cuda, name)
