"""Host-side memory of :mod:`dualgpu.cuda`: copies, allocation and streams on every backend.

``to_device``, ``device_array``, ``device_array_like``, ``stream``, ``default_stream``,
``synchronize`` and ``is_available`` work as numba.cuda's do, on the active backend, for
plain and dual arrays alike (:mod:`dualgpu.cuda` states the rules: a DualArray under the
driver, zeroed values and partials, plain arrays as numba makes them). On the ``cpu``
backend a "device" array is a :class:`HostArray`, a numpy array with numba's device-array
methods; off the GPU a stream is a :class:`HostStream`.
"""
import contextlib
import itertools
import math

import numpy as np
from numba import cuda as _cuda
from numba.cuda.cudadrv.devicearray import check_array_compatibility

from dualgpu.core._context import active_lanes, active_levels, lane_dtype
from dualgpu.core._transfer import copy_into
from dualgpu.core.dual import Dual
from dualgpu.core.dualarray import DualArray
from dualgpu.core.nested import lift_array
from dualgpu.core.nested import zeros as nested_zeros
from dualgpu.core.object_arrays import from_object_array
from dualgpu.core.selection import backend
from dualgpu.errors import DualgpuError
from dualgpu.host import buffers as host_buffers
from dualgpu.porting import capture, graphs

__all__ = [
    "HostArray", "HostStream", "to_device", "device_array", "device_array_like", "stream",
    "default_stream", "synchronize", "is_available",
]


class HostArray(np.ndarray):
    """A numpy array standing in for a device array on the ``cpu`` backend.

    It is what :func:`to_device` and :func:`device_array` return for plain arrays off the
    GPU: a numpy array with numba's device-array methods (``copy_to_host``,
    ``copy_to_device``). Construct it as a numpy array (``np.ndarray``'s signature).

    Parameters
    ----------
    shape : int or tuple of int
        The array's shape.
    dtype : data-type, optional
        Its element type.
    buffer, offset, strides, order : optional
        As for :class:`numpy.ndarray`.

    Examples
    --------
    >>> import numpy as np
    >>> import dualgpu
    >>> with dualgpu.using_backend("cpu"):
    ...     d = dualgpu.cuda.to_device(np.arange(3.0))
    >>> type(d).__name__, d.copy_to_host().tolist()
    ('HostArray', [0.0, 1.0, 2.0])
    """

    def copy_to_host(self, ary=None, stream=0):
        """Return a plain numpy copy (or copy into ``ary``); under the driver, the host
        DualArray of an array kept with its partials (see :meth:`copy_to_device`)."""
        kept = host_buffers.kept_source(self)
        if isinstance(kept, DualArray):
            return kept.copy_to_host(ary, stream)
        if ary is None:
            return np.array(self, copy=True).view(np.ndarray)
        _compatible(self, ary)
        ary[...] = self
        return ary

    def copy_to_device(self, ary, stream=0):
        """Copy ``ary`` into this array. A DualArray under the driver: its values here, its
        partials kept beside this array (one allocated before the driver ran, by a solver's
        ``__init__``), as kept host buffers are; outside the driver it is refused."""
        graphs.refuse_copy("copy_to_device()")
        source = host_buffers.kept_source(ary)
        if isinstance(source, DualArray) and host_buffers.keep_copy(self, source):
            return  # (kept beside it; refused with the fixes under the driver)
        if type(source) is np.ndarray:  # (numba makes the source contiguous first)
            _compatible(self, np.asarray(source, order="F" if self.flags.f_contiguous
                                         and not self.flags.c_contiguous else "C"))
        copy_into(self, source, stream)


def _compatible(device, host):
    """numba.cuda's check of a copy between a device array and a host array (its TypeError
    or ValueError): the same dtype, and the same shape and strides once squeezed."""
    if isinstance(host, np.ndarray) and not isinstance(host, DualArray) and device.size:
        check_array_compatibility(device.view(np.ndarray), host)


def _sim_array(ary):
    """A simulated device array over the numpy array ``ary``
    (:class:`~dualgpu.backends.cudasim.arrays.SimArray`: numba's, with dualgpu's copies)."""
    from dualgpu.backends.cudasim.arrays import SimArray  # numba's simulator: when it runs

    return SimArray(ary)


#: cpu backend: arrays of at least this many bytes start at one of seven offsets after a page
#: boundary, in turn (see :func:`_host_zeros`)
STAGGER_BYTES = 1 << 16

_COLOURS = itertools.count()


def _host_zeros(shape, dtype, fill=np.zeros):
    """A zeroed cpu-backend device array (a :class:`HostArray`; ``fill=np.empty``: one
    about to be overwritten).

    Large ones start 0, 576, ..., 3456 bytes after a page boundary, in turn (multiples of 64:
    cache-line aligned). Two buffers of one size (a stencil's ``u`` and ``u_new``, values or
    partials) would otherwise start at the same address modulo 4 KiB, and a core's loads
    from one then falsely wait on its stores to the other (4K aliasing): the heat 10^3
    Jacobian's captured tables ran 20-25% slower.
    """
    dtype = np.dtype(dtype)
    shape = tuple(shape)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < STAGGER_BYTES:
        return fill(shape, dtype).view(HostArray)
    raw = fill(nbytes + 8192, np.uint8)  # (calloc: pages zeroed as they are touched)
    offset = (-raw.__array_interface__["data"][0]) % 4096 + (next(_COLOURS) % 7) * 576
    return HostArray(shape, dtype, raw, offset)


def _plain_to_device(array):
    name = backend()
    if name == "cuda":
        return _cuda.to_device(array)
    if name == "cudasim":
        from numba.cuda import simulator  # numba's simulator: loaded when it runs

        return _sim_array(simulator.to_device(np.array(array, copy=True))._ary)
    if np.ndim(array) and np.asarray(array).flags.c_contiguous:
        copy = _host_zeros(np.shape(array), np.asarray(array).dtype, np.empty)
        copy[...] = array
        return copy
    return np.array(array, copy=True).view(HostArray)


def _plain_empty(shape, dtype):
    name = backend()
    if name == "cuda":
        return _cuda.device_array(shape, dtype)
    if name == "cudasim":
        from numba.cuda import simulator  # numba's simulator: loaded when it runs

        return _sim_array(simulator.device_array(shape, dtype)._ary)
    return _host_zeros(shape, dtype)


def _plain_zeros(shape, dtype):
    """A zero-filled array on the active backend (the members of an allocated DualArray)."""
    name = backend()
    if name == "cuda":
        array = _cuda.device_array(shape, dtype)
        if array.size:
            array.gpu_data.memset(0)  # a device memset: no host buffer, no transfer
        return array
    if name == "cudasim":

        return _sim_array(np.zeros(shape, dtype))
    return _host_zeros(shape, dtype)


def _is_float(dtype):
    return np.dtype(dtype).kind == "f"


def _takes_lanes(dtype):
    """True when arrays of ``dtype`` carry the driver's lanes: floats; complex numbers where
    complex duals run (the cpu and simulator backends; see dualgpu.complex_rules), not while
    tracing."""
    kind = np.dtype(dtype).kind
    return kind == "f" or (kind == "c" and backend() in ("cpu", "cudasim")
                           and lane_dtype(dtype) == dtype)


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
    # the docstring: _to_device's (a recorded run of f captures the new array)
    if graphs.ACTIVE is not None:
        graphs.refuse("cuda.to_device()", "copy to the device before the capture_graph() "
                      "block (a graph cannot hold memory allocated in it), and copy new data "
                      "into that array between replays.")
    if to is not None or capture.current() is None:
        return _to_device(obj, stream, copy, to)
    return capture.adopt(_to_device(obj, stream, copy, to), ("to_device", obj))


def _to_device(obj, stream=0, copy=True, to=None):
    """Copy a host array (or DualArray) to the active backend's memory.

    Parameters
    ----------
    obj : array_like or DualArray
        The data. An object array of duals (built by host code) becomes a DualArray.
    stream : stream, optional
        As in numba.cuda (work is synchronous off the GPU).
    copy : bool, optional
        Accepted for numba.cuda's signature; the data is always copied.
    to : device array or DualArray, optional
        Copy into this buffer instead of allocating one.

    Returns
    -------
    device array or DualArray
        A DualArray for a DualArray, or for a float array while the driver runs; else the
        backend's plain array. With ``to=buffer``, ``buffer`` itself: a DualArray buffer
        receives values and partials (zero partials from a plain array); a plain buffer
        refuses a DualArray.

    Raises
    ------
    DualgpuError
        For a scalar dual or float under the driver (pass arrays), or a DualArray copied
        into a plain buffer.

    Examples
    --------
    >>> import numpy as np
    >>> import dualgpu
    >>> d = dualgpu.cuda.to_device(dualgpu.dual_array(np.ones(2), lanes=3))
    >>> d.partials.shape
    (3, 2)
    """
    if to is not None:  # (a kept host buffer: with its partials, as below)
        if isinstance(to, capture.CapturedArray):
            capture.escape_copy(to)
        source = host_buffers.kept_source(obj)
        if isinstance(source, DualArray) and not isinstance(to, DualArray) and (
                isinstance(to, HostArray) or hasattr(type(to), "host_memory")):
            to.copy_to_device(source, stream)  # kept beside it, or refused with the fixes
            return to
        return copy_into(to, source, stream)
    if isinstance(obj, DualArray):
        if obj.is_nested:
            return DualArray(to_device(obj.values), to_device(obj.partials), tag=obj.tag)
        return DualArray(_plain_to_device(_single_buffer(_host(obj.values))),
                         _plain_to_device(_single_buffer(_host(obj.partials))), tag=obj.tag)
    found = host_buffers.kept_source(obj)
    if found is not obj:  # a host buffer a kernel wrote duals into: its partials too
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
        return lift_array(_plain_to_device(array), active_levels(), _plain_zeros)
    lanes = active_lanes()
    if lanes and _takes_lanes(array.dtype):
        return DualArray(_plain_to_device(array),
                         _plain_zeros((lanes,) + array.shape, lane_dtype(array.dtype)))
    return _plain_to_device(array)


def device_array(shape, dtype=np.float64, strides=None, order="C", stream=0):
    # the docstring: _device_array's (a recorded run of f captures the new array)
    if graphs.ACTIVE is not None:
        graphs.refuse("cuda.device_array()", "allocate before the capture_graph() block (a "
                      "graph cannot hold memory allocated in it).")
    array = _device_array(shape, dtype, strides, order, stream)
    if capture.current() is None:
        return array
    return capture.adopt(array, ("device_array", shape, dtype, strides, order))


def _device_array(shape, dtype=np.float64, strides=None, order="C", stream=0):
    """An array on the active backend: uninitialised as numba's, or a zeroed DualArray.

    Parameters
    ----------
    shape : int or tuple of int
        The array's shape.
    dtype : data-type, optional
        Its element type (float64 by default).
    strides, order, stream : optional
        As in ``numba.cuda.device_array``.

    Returns
    -------
    device array or DualArray
        Under the driver, float dtypes give a DualArray with the driver's lanes, values
        and partials zero on every backend (complex dtypes too on the cpu and cudasim
        backends, where complex duals run); otherwise the backend's plain array.

    Examples
    --------
    >>> import dualgpu
    >>> dualgpu.cuda.device_array((2, 3)).shape
    (2, 3)
    """
    shape = (shape,) if np.ndim(shape) == 0 else tuple(shape)
    if len(active_levels()) > 1 and _is_float(dtype):  # a nested derivative runs
        return nested_zeros(shape, active_levels(), np.dtype(dtype), _plain_zeros)
    lanes = active_lanes()
    if lanes and _takes_lanes(dtype):
        return DualArray(_plain_zeros(shape, dtype),
                         _plain_zeros((lanes,) + shape, lane_dtype(dtype)))
    return _plain_empty(shape, dtype)


def device_array_like(ary, stream=0):
    # the docstring: _device_array_like's (a recorded run of f captures the new array)
    if graphs.ACTIVE is not None:
        graphs.refuse("cuda.device_array_like()", "allocate before the capture_graph() "
                      "block (a graph cannot hold memory allocated in it).")
    array = _device_array_like(ary, stream)
    return array if capture.current() is None else capture.adopt(array, ("like", ary))


def _device_array_like(ary, stream=0):
    """An array shaped and typed like ``ary``: a zeroed DualArray with its lanes when ``ary`` is
    one.

    Parameters
    ----------
    ary : array or DualArray
        The template.
    stream : stream, optional
        As in numba.cuda.

    Returns
    -------
    device array or DualArray
        A new array of ``ary``'s shape and dtype (and lanes and tag, for a DualArray).

    Examples
    --------
    >>> import numpy as np
    >>> import dualgpu
    >>> u = dualgpu.cuda.device_array_like(dualgpu.dual_array(np.ones(4), lanes=2))
    >>> u.partials.shape, float(u.partials.sum())
    ((2, 4), 0.0)
    """
    if isinstance(ary, DualArray) and ary.is_nested:
        return DualArray(device_array_like(ary.values), device_array_like(ary.partials),
                         tag=ary.tag)
    if isinstance(ary, DualArray):
        return DualArray(
            _plain_zeros(ary.shape, ary.dtype),
            _plain_zeros((ary.lanes,) + ary.shape, capture.members(ary)[1].dtype),
            tag=ary.tag,
        )
    return _device_array(tuple(ary.shape), ary.dtype)


to_device.__doc__ = _to_device.__doc__
device_array.__doc__ = _device_array.__doc__
device_array_like.__doc__ = _device_array_like.__doc__


class HostStream:
    """A stream on the cpu and cudasim backends, where work is already synchronous.

    :func:`stream` and :func:`default_stream` return one off the GPU, so host code written
    for numba.cuda's streams runs unchanged.

    Examples
    --------
    >>> from dualgpu.cuda import HostStream
    >>> s = HostStream()
    >>> with s.auto_synchronize():
    ...     pass
    >>> s.synchronize()
    """

    def synchronize(self):
        """Nothing to wait for."""

    def auto_synchronize(self):
        """Context manager that synchronises on exit (a no-op here)."""
        return contextlib.nullcontext(self)

    def __repr__(self):
        return "<dualgpu host stream>"


def stream():
    """A new stream: numba.cuda's on the GPU backend, a :class:`HostStream` elsewhere.

    Returns
    -------
    numba.cuda stream or HostStream

    Examples
    --------
    >>> import dualgpu
    >>> with dualgpu.using_backend("cpu"):
    ...     print(dualgpu.cuda.stream())
    <dualgpu host stream>
    """
    return _cuda.stream() if backend() == "cuda" else HostStream()


def default_stream():
    """The default stream of the active backend.

    Returns
    -------
    numba.cuda stream or HostStream
        numba.cuda's default stream on the GPU backend, a :class:`HostStream` elsewhere.

    Examples
    --------
    >>> import dualgpu
    >>> with dualgpu.using_backend("cpu"):
    ...     print(dualgpu.cuda.default_stream())
    <dualgpu host stream>
    """
    return _cuda.default_stream() if backend() == "cuda" else HostStream()


def synchronize():
    """Wait for the device (a no-op on the cpu and cudasim backends).

    Examples
    --------
    >>> import dualgpu
    >>> dualgpu.cuda.synchronize()
    """
    if backend() == "cuda":
        _cuda.synchronize()


def is_available():
    """True: dualgpu can always launch kernels (on the GPU, the simulator or the CPU).

    Host code that checks ``cuda.is_available()`` before launching keeps running off the GPU;
    :func:`dualgpu.backend` says where the kernels run.

    Returns
    -------
    bool
        Always True.

    Examples
    --------
    >>> import dualgpu
    >>> dualgpu.cuda.is_available()
    True
    """
    return True
