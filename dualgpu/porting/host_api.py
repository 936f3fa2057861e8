"""numba.cuda's host-side helpers on every backend: events, pinned/mapped memory, cleanup.

On the ``cuda`` backend these are numba.cuda's own. On ``cpu`` and ``cudasim`` (no GPU,
work already synchronous) numba.cuda's versions ask for a CUDA driver and fail, so:

* ``event()`` records ``time.perf_counter()`` (every launch has finished when
  ``record`` runs): ``event_elapsed_time(start, stop)`` is the real time between them, in
  milliseconds, as on a GPU;
* ``pinned_array``, ``pinned_array_like``, ``mapped_array``, ``managed_array`` are host
  arrays (mapped and managed ones double as device arrays, as on a GPU). While the driver
  runs, float ones are zeroed DualArrays with the driver's lanes, as ``device_array``
  makes them, so ``staging[:] = u`` and ``d.copy_to_host(staging)`` keep the partials;
* ``pinned(*arrays)``, ``mapped(*arrays)`` and ``defer_cleanup()`` are context managers
  that need do nothing (``mapped`` yields the arrays as the device views).
"""
import contextlib
import time

import numpy as np
from numba import cuda as _cuda

from dualgpu.core._context import active_lanes, active_levels, lane_dtype
from dualgpu.core.selection import backend
from dualgpu.core.dualarray import DualArray
from dualgpu.core.nested import zeros as nested_zeros
from dualgpu.errors import DualgpuError
from dualgpu.porting.memory import HostArray

__all__ = [
    "HostEvent", "defer_cleanup", "event", "event_elapsed_time", "managed_array",
    "mapped", "mapped_array", "mapped_array_like", "pinned", "pinned_array", "pinned_array_like",
]


def _on_gpu():
    return backend() == "cuda"


class HostEvent:
    """A CUDA event on the cpu and cudasim backends: ``record`` takes the time."""

    def __init__(self, timing=True):
        self.timing = timing
        self.time = None

    def record(self, stream=0):
        """Take the time now (all work before it has finished: launches are synchronous)."""
        self.time = time.perf_counter()

    def synchronize(self):
        """Nothing to wait for."""

    def wait(self, stream=0):
        """Nothing to wait for."""

    def query(self):
        """True: the work before the event is done."""
        return True

    def elapsed_time(self, evtend):
        """Milliseconds from this event to ``evtend``."""
        return event_elapsed_time(self, evtend)

    def __repr__(self):
        return f"<dualgpu host event recorded at {self.time}>"


def event(timing=True):
    """A CUDA event (numba.cuda's on the GPU, a ``HostEvent`` elsewhere).

    Parameters
    ----------
    timing : bool, optional
        Whether the event records time (as in numba.cuda).

    Returns
    -------
    numba.cuda event or HostEvent
        Off the GPU, ``record`` stores the wall-clock time (launches are synchronous there).

    Examples
    --------
    >>> import dualgpu
    >>> start, end = dualgpu.cuda.event(), dualgpu.cuda.event()
    >>> start.record(); end.record()
    >>> dualgpu.cuda.event_elapsed_time(start, end) >= 0.0
    True
    """
    return _cuda.event(timing) if _on_gpu() else HostEvent(timing)


def event_elapsed_time(evtstart, evtend):
    """Milliseconds between two recorded events, as ``numba.cuda.event_elapsed_time``.

    Parameters
    ----------
    evtstart, evtend : event
        Two events made by :func:`event` on the active backend and recorded.

    Returns
    -------
    float
        The time from ``evtstart`` to ``evtend`` in milliseconds.

    Raises
    ------
    DualgpuError
        When an event is of another backend, was made with ``timing=False`` or was never
        recorded; the message says which and how to fix it.

    Examples
    --------
    >>> import dualgpu
    >>> start, end = dualgpu.cuda.event(), dualgpu.cuda.event()
    >>> start.record(); end.record()
    >>> dualgpu.cuda.event_elapsed_time(start, end) >= 0.0
    True
    """
    if not isinstance(evtstart, HostEvent) and not isinstance(evtend, HostEvent):
        return _cuda.event_elapsed_time(evtstart, evtend)
    for name, ev in (("evtstart", evtstart), ("evtend", evtend)):
        if not isinstance(ev, HostEvent):
            raise DualgpuError(
                f"event_elapsed_time: {name} is {ev!r}, an event of another backend; expected "
                "two events made by dualgpu.cuda.event() on the active backend.")
        if not ev.timing:
            raise DualgpuError(f"event_elapsed_time: {name} was made with timing=False; "
                               "make it with dualgpu.cuda.event(timing=True).")
        if ev.time is None:
            raise DualgpuError(f"event_elapsed_time: {name} was never recorded; call "
                               f"{name}.record(stream) after the work to time.")
    return (evtend.time - evtstart.time) * 1000.0


def _host_zeros(shape, dtype):
    return np.zeros(shape, dtype)


def _host_array(shape, dtype, order, numba_alloc, device_view=False):
    """A float DualArray while the driver runs, else numba's (GPU) or a numpy array."""
    shape = (shape,) if np.ndim(shape) == 0 else tuple(shape)
    is_float = np.dtype(dtype).kind == "f"
    if len(active_levels()) > 1 and is_float:  # a nested derivative runs
        return nested_zeros(shape, active_levels(), np.dtype(dtype), _host_zeros)
    lanes = active_lanes()
    if lanes and is_float:
        return DualArray(np.zeros(shape, dtype, order=order),
                         np.zeros((lanes,) + shape, lane_dtype(dtype)))
    if _on_gpu():
        return numba_alloc()
    array = np.empty(shape, dtype, order=order)
    if device_view and backend() == "cpu":
        return array.view(HostArray)  # a mapped array is a device array too
    return array


def pinned_array(shape, dtype=np.float64, strides=None, order="C"):
    """Page-locked host memory on the GPU; a host array (or DualArray under the driver) elsewhere.

    Parameters
    ----------
    shape : int or tuple of int
        The array's shape.
    dtype : data-type, optional
        Its element type (float64 by default).
    strides, order : optional
        As in ``numba.cuda.pinned_array``.

    Returns
    -------
    ndarray or DualArray
        A zeroed DualArray with the driver's lanes for float dtypes while the driver runs.

    Examples
    --------
    >>> import dualgpu
    >>> dualgpu.cuda.pinned_array((2, 2)).shape
    (2, 2)
    """
    return _host_array(shape, dtype, order,
                       lambda: _cuda.pinned_array(shape, dtype, strides, order))


def pinned_array_like(ary):
    """A pinned array shaped and typed like ``ary``; a zeroed host DualArray like a DualArray.

    Parameters
    ----------
    ary : array or DualArray
        The template.

    Returns
    -------
    ndarray or DualArray

    Examples
    --------
    >>> import numpy as np
    >>> import dualgpu
    >>> dualgpu.cuda.pinned_array_like(dualgpu.dual_array(np.ones(3), lanes=2)).partials.shape
    (2, 3)
    """
    if isinstance(ary, DualArray):
        return DualArray(np.zeros(ary.shape, ary.dtype), np.zeros((ary.lanes,) + ary.shape,
                                                                   ary.partials.dtype),
                         tag=ary.tag)
    return pinned_array(tuple(ary.shape), ary.dtype)


def mapped_array(shape, dtype=np.float64, strides=None, order="C", stream=0, portable=False,
                 wc=False):
    """Host memory a kernel can use directly (numba's on the GPU).

    Parameters
    ----------
    shape : int or tuple of int
        The array's shape.
    dtype : data-type, optional
        Its element type (float64 by default).
    strides, order, stream, portable, wc : optional
        As in ``numba.cuda.mapped_array``.

    Returns
    -------
    array or DualArray
        A zeroed DualArray with the driver's lanes for float dtypes while the driver runs.

    Examples
    --------
    >>> import dualgpu
    >>> dualgpu.cuda.mapped_array(4, dtype="float32").dtype
    dtype('float32')
    """
    return _host_array(shape, dtype, order,
                       lambda: _cuda.mapped_array(shape, dtype, strides, order, stream,
                                                  portable, wc),
                       device_view=True)


def mapped_array_like(ary, stream=0, portable=False, wc=False):
    """A mapped array shaped and typed like ``ary``; a zeroed host DualArray like a DualArray.

    Parameters
    ----------
    ary : array or DualArray
        The template.
    stream, portable, wc : optional
        As in ``numba.cuda.mapped_array_like``.

    Returns
    -------
    array or DualArray

    Examples
    --------
    >>> import numpy as np
    >>> import dualgpu
    >>> dualgpu.cuda.mapped_array_like(np.ones((2, 3), np.float32)).shape
    (2, 3)
    """
    if isinstance(ary, DualArray):
        return pinned_array_like(ary)
    order = "F" if ary.flags.f_contiguous and not ary.flags.c_contiguous else "C"
    return mapped_array(tuple(ary.shape), ary.dtype, None, order, stream, portable, wc)


def managed_array(shape, dtype=np.float64, strides=None, order="C", stream=0,
                  attach_global=True):
    """Unified memory (numba's on the GPU), a host array usable by kernels elsewhere.

    Parameters
    ----------
    shape : int or tuple of int
        The array's shape.
    dtype : data-type, optional
        Its element type (float64 by default).
    strides, order, stream, attach_global : optional
        As in ``numba.cuda.managed_array``.

    Returns
    -------
    array or DualArray
        A zeroed DualArray with the driver's lanes for float dtypes while the driver runs.

    Examples
    --------
    >>> import dualgpu
    >>> dualgpu.cuda.managed_array((3,)).shape
    (3,)
    """
    return _host_array(shape, dtype, order,
                       lambda: _cuda.managed_array(shape, dtype, strides, order, stream,
                                                   attach_global),
                       device_view=True)


def _members(arrays):
    """The plain arrays behind ``arrays`` (a DualArray's values and partials)."""
    out = []
    for a in arrays:
        if isinstance(a, DualArray):
            out.extend(_members((a.values, a.partials)))
        else:
            out.append(a)
    return out


def pinned(*arylist):
    """Context manager pinning host arrays (DualArrays: both members) on the GPU; a no-op elsewhere.

    Parameters
    ----------
    *arylist : arrays or DualArrays
        The arrays to pin.

    Returns
    -------
    context manager

    Examples
    --------
    >>> import numpy as np
    >>> import dualgpu
    >>> a = np.zeros(3)
    >>> with dualgpu.cuda.pinned(a):
    ...     a[0] = 1.0
    """
    return _cuda.pinned(*_members(arylist)) if _on_gpu() else contextlib.nullcontext()


@contextlib.contextmanager
def _host_mapped(arylist):
    yield arylist[0] if len(arylist) == 1 else list(arylist)


def mapped(*arylist, stream=0):
    """Context manager giving device views of host arrays (the arrays themselves off the GPU).

    Parameters
    ----------
    *arylist : arrays
        The host arrays to map.
    stream : stream, optional
        As in ``numba.cuda.mapped``.

    Returns
    -------
    context manager
        It yields the view (or a list of views, for several arrays).

    Raises
    ------
    DualgpuError
        For a DualArray on the cuda backend: copy it with :func:`dualgpu.cuda.to_device`.

    Examples
    --------
    >>> import numpy as np
    >>> import dualgpu
    >>> with dualgpu.cuda.mapped(np.arange(3.0)) as view:
    ...     print(view.tolist())
    [0.0, 1.0, 2.0]
    """
    if _on_gpu():
        if any(isinstance(a, DualArray) for a in arylist):
            raise DualgpuError(
                "cuda.mapped(...) of a DualArray is not supported on the cuda backend: its "
                "values and partials would need one mapping each. Copy it with "
                "dualgpu.cuda.to_device(array) instead.")
        return _cuda.mapped(*arylist, stream=stream)
    return _host_mapped(arylist)


def defer_cleanup():
    """numba.cuda's ``defer_cleanup`` on the GPU; nothing to defer elsewhere.

    Returns
    -------
    context manager

    Examples
    --------
    >>> import dualgpu
    >>> with dualgpu.cuda.defer_cleanup():
    ...     pass
    """
    return _cuda.defer_cleanup() if _on_gpu() else contextlib.nullcontext()
