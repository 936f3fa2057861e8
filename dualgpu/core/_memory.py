"""Where an array lives (host or device memory) and moving plain arrays between the two.

A *device* array is one of numba.cuda's device arrays or the CUDA simulator's stand-in:
anything with ``copy_to_host`` that is not a numpy array (the cpu backend's ``HostArray`` is
a numpy subclass, so it counts as host). :class:`~dualgpu.DualArray` keeps its members on
one side; these helpers read, copy and allocate its members on the right side.

Examples
--------
>>> import numpy as np
>>> from dualgpu.core._memory import host, is_device, same_side
>>> a = np.arange(3.0)
>>> is_device(a), host(a) is a, same_side(a, a + 1).tolist()
(False, True, [1.0, 2.0, 3.0])
"""
import numpy as np

from dualgpu.errors import DualgpuError

__all__ = ["is_device", "is_simulated", "host", "same_side", "device_copy", "copy_member",
           "zero_fill"]


def is_device(array):
    """True for a device array (numba.cuda's, or the simulator's); numpy arrays are host."""
    return hasattr(array, "copy_to_host") and not isinstance(array, np.ndarray)


def is_simulated(array):
    """True for a device array of numba's simulator (its own class, or dualgpu's SimArray)."""
    return any(c.__module__.startswith("numba.cuda.simulator") for c in type(array).__mro__)


def host(array):
    """Return ``array`` as a plain host ndarray: device arrays are copied, subclasses viewed."""
    if is_device(array):
        return np.asarray(array.copy_to_host())
    if type(array) is not np.ndarray and isinstance(array, np.ndarray):
        return array.view(np.ndarray)  # the cpu backend's HostArray
    return array


def same_side(template, array):
    """Return host ``array`` moved to where ``template`` lives (host, device, simulator)."""
    if not is_device(template):
        return array
    # numba.cuda is loaded only for device arrays (the simulator's, or a GPU's)
    if is_simulated(template):
        from numba.cuda import simulator

        return simulator.to_device(array)
    from numba import cuda

    return cuda.to_device(array)


def device_copy(array):
    """A copy of a device array in device memory (numba.cuda's, or the simulator's)."""
    # numba.cuda is loaded only for device arrays (the simulator's, or a GPU's)
    if is_simulated(array):
        from numba.cuda import simulator

        return simulator.to_device(array.copy_to_host())
    from numba import cuda

    copy = cuda.device_array_like(array)
    copy.copy_to_device(array)
    return copy


def _host_copy(array, dtype):
    if is_device(array):
        array = array.copy_to_host()
    return np.ascontiguousarray(array, dtype=dtype)


def copy_member(dest, src, what):
    """Copy ``src`` (host or device array) into ``dest`` (host or device array) in place."""
    if tuple(np.shape(src)) != tuple(dest.shape):
        raise DualgpuError(
            f"copy into an array of shape {tuple(dest.shape)}: the {what} have shape "
            f"{tuple(np.shape(src))}. Copy arrays of the same shape (allocate the buffer with "
            "cuda.device_array_like(x))."
        )
    if is_device(dest):
        if is_device(src) and src.dtype == dest.dtype:
            dest.copy_to_device(src)
        else:
            dest.copy_to_device(_host_copy(src, dest.dtype))
    else:
        np.copyto(np.asarray(dest), _host_copy(src, dest.dtype))


def zero_fill(dest):
    """Set every element of ``dest`` (host or device array) to zero."""
    if is_device(dest):
        dest.copy_to_device(np.zeros(dest.shape, dest.dtype))
    else:
        np.asarray(dest)[...] = 0
