"""DualArray: values of shape S plus partials of shape (N, *S), on host or device.

The partials are lane-major (structure of arrays): lane k of every cell is one
contiguous array ``partials[k]``, so neighbouring GPU threads read neighbouring
addresses. Inside compiled kernels a DualArray is indexed like an ordinary
array (see :mod:`dualgpu.numba_arrays`); in plain Python (the CUDA simulator and
host code) this class does the same with :class:`dualgpu.Dual` elements.
"""
import numpy as np

from .dual import Dual, check_dtype
from .errors import DualgpuError

__all__ = ["DualArray", "dual_array", "zeros_like_lanes"]

MAX_NDIM = 3
#: Partials of this dtype make a structural tracer (dependency bitsets, cpu backend).
TRACER_DTYPE = np.dtype(np.uint64)


def _is_device(array):
    # numba.cuda device arrays and the simulator's stand-ins; HostArray (cpu backend) is numpy
    return hasattr(array, "copy_to_host") and not isinstance(array, np.ndarray)


def _as_index(index):
    return index if isinstance(index, tuple) else (index,)


class DualArray:
    """An array of dual numbers stored as ``values`` and lane-major ``partials``.

    Parameters
    ----------
    values : ndarray or device array, shape S (1 to 3 dimensions)
    partials : ndarray or device array, shape (N, *S), same dtype and kind
        as ``values``. Both are used as given (not copied): use
        :func:`dual_array` to build one from a caller's data safely.
    """

    __slots__ = ("values", "partials", "_numba_type_cache")

    def __init__(self, values, partials):
        for what, member in (("values", values), ("partials", partials)):
            if not (isinstance(member, np.ndarray) or _is_device(member)):
                raise DualgpuError(
                    f"DualArray: {what} must be a numpy or device array; got "
                    f"{type(member).__name__}. DualArray(values, partials) uses its arrays as "
                    "given; to build one from lists or scalars (copied and converted), use "
                    "dualgpu.dual_array(values, partials) or dual_array(values, lanes=N)."
                )
        if _is_device(values) != _is_device(partials):
            raise DualgpuError(
                "DualArray: values and partials must both be host (numpy) arrays or both "
                f"device arrays; got {type(values).__name__} and {type(partials).__name__}. "
                "Use dualgpu.cuda.to_device(dual_array) to move both."
            )
        if not (1 <= values.ndim <= MAX_NDIM):
            fix = ("for a single number use dualgpu.Dual(value, partials)" if values.ndim == 0
                   else "reshape to at most 3 dimensions")
            raise DualgpuError(
                f"DualArray: values must have 1 to {MAX_NDIM} dimensions; got shape "
                f"{tuple(values.shape)}. Fix: {fix}."
            )
        check_dtype(values.dtype, "DualArray values")
        if partials.dtype != values.dtype and partials.dtype != TRACER_DTYPE:
            raise DualgpuError(
                f"DualArray: partials dtype {partials.dtype} differs from values dtype "
                f"{values.dtype}; cast one of them (both must be float32 or both float64)."
            )
        if partials.ndim != values.ndim + 1 or tuple(partials.shape[1:]) != tuple(values.shape):
            raise DualgpuError(
                f"DualArray: partials must have shape (N, *{tuple(values.shape)}) for values "
                f"of shape {tuple(values.shape)}; got {tuple(partials.shape)}."
            )
        if partials.shape[0] < 1:
            raise DualgpuError("DualArray: partials need at least one lane (N >= 1).")
        self.values = values
        self.partials = partials
        self._numba_type_cache = None  # (values, partials, numba type): see numba_arrays

    # -- array-like attributes -------------------------------------------------
    @property
    def lanes(self):
        """N, the number of tangent lanes."""
        return self.partials.shape[0]

    @property
    def shape(self):
        return tuple(self.values.shape)

    @property
    def dtype(self):
        return self.values.dtype

    @property
    def ndim(self):
        return self.values.ndim

    @property
    def size(self):
        return self.values.size

    @property
    def is_tracer(self):
        """True when the lanes are dependency bitsets (sparsity detection), not tangents."""
        return self.partials.dtype == TRACER_DTYPE

    @property
    def is_device(self):
        """True when the members are numba.cuda device arrays."""
        return _is_device(self.values)

    def __len__(self):
        return self.shape[0]

    def __repr__(self):
        where = "device" if self.is_device else "host"
        return (
            f"DualArray(shape={self.shape}, dtype={self.dtype}, lanes={self.lanes}, {where})"
        )

    # -- element and slice access (plain Python: simulator and host code) -------
    def __getitem__(self, index):
        index = _as_index(index)
        value = self.values[index]
        partials = self.partials[(slice(None),) + index]
        if np.ndim(value) == 0:
            if self.is_tracer:
                raise DualgpuError(
                    "a structural tracer (sparsity detection) runs in compiled code only: "
                    "use the cpu backend."
                )
            return Dual(value, np.asarray(partials))
        return DualArray(value, partials)

    def __setitem__(self, index, item):
        index = _as_index(index)
        lanes_index = (slice(None),) + index
        if isinstance(item, (Dual, DualArray)):
            if item.lanes != self.lanes:
                raise DualgpuError(
                    f"cannot store a dual with {item.lanes} lanes into a DualArray with "
                    f"{self.lanes} lanes; seed both with the same lane count."
                )
            self.values[index] = item.value if isinstance(item, Dual) else item.values
            self.partials[lanes_index] = item.partials
        elif hasattr(item, "__cuda_array_interface__") or isinstance(item, np.ndarray) or np.isscalar(item):
            self.values[index] = item
            self.partials[lanes_index] = 0
        else:
            raise DualgpuError(
                f"cannot store {type(item).__name__} into a DualArray; expected a Dual, a "
                "DualArray, a number or an array."
            )

    # -- host/device transfer ---------------------------------------------------
    def copy_to_host(self, ary=None, stream=0):
        """Return a host DualArray (numpy members): a copy, or ``ary`` (a DualArray) filled in.

        A plain numpy ``ary`` cannot receive the partials: allocate the host buffer as a
        DualArray (``dualgpu.dual_array(np.empty(shape), lanes=N)``) or call
        ``copy_to_host()`` without one.
        """
        values = self.values.copy_to_host() if self.is_device else np.array(self.values)
        partials = self.partials.copy_to_host() if self.is_device else np.array(self.partials)
        if ary is None:
            return DualArray(np.asarray(values), np.asarray(partials))
        if not isinstance(ary, DualArray):
            raise DualgpuError(
                f"copy_to_host(ary): ary is a {type(ary).__name__}, which would drop the "
                f"{self.lanes} lanes of partials. Pass a DualArray of shape {self.shape} with "
                f"{self.lanes} lanes, or call copy_to_host() without an argument."
            )
        ary[...] = DualArray(values, partials)
        return ary

    # -- host-side reductions (a scalar objective of a simulation's result) -------
    def sum(self):
        """The sum of all elements, as a :class:`Dual`."""
        host = self.copy_to_host() if self.is_device else self
        return Dual(host.values.sum(), host.partials.reshape(self.lanes, -1).sum(axis=1),
                    dtype=self.dtype)

    def mean(self):
        """The mean of all elements, as a :class:`Dual`."""
        total = self.sum()
        return Dual(total.value / self.size, total.partials / self.size, dtype=self.dtype)

    def __array__(self, dtype=None, copy=None):
        raise TypeError(
            "a DualArray cannot become a plain numpy array without dropping its partials. "
            "Allocate arrays like it with dualgpu.cuda.device_array_like(u), read the values "
            "alone with u.values, or reduce it with u.sum() / u.mean()."
        )

    def copy(self):
        """Return a deep copy on the same side (host or device)."""
        if not self.is_device:
            return DualArray(self.values.copy(), self.partials.copy())
        from numba import cuda

        values = cuda.device_array_like(self.values)
        partials = cuda.device_array_like(self.partials)
        values.copy_to_device(self.values)
        partials.copy_to_device(self.partials)
        return DualArray(values, partials)


def dual_array(values, partials=None, *, lanes=None, dtype=None):
    """Return a new host :class:`DualArray` built from copies of the inputs.

    Parameters
    ----------
    values : array_like, 1 to 3 dimensions
    partials : array_like of shape (N, *values.shape), optional
        The tangent lanes. When omitted, ``lanes`` zero lanes are made.
    lanes : int, optional
        Number of zero lanes when ``partials`` is omitted.
    dtype : float32 or float64, optional
        Defaults to the dtype of ``values`` (float64 for integer input).

    Examples
    --------
    >>> import numpy as np, dualgpu
    >>> u = dualgpu.dual_array(np.linspace(0.0, 1.0, 4), lanes=2)
    >>> u.shape, u.lanes, u.partials.shape
    ((4,), 2, (2, 4))
    """
    values = _real_array(values, "values")
    if dtype is None:
        dtype = values.dtype if values.dtype.kind == "f" else np.float64
    dtype = check_dtype(dtype, "dual_array dtype")
    values = np.array(values, dtype=dtype, copy=True, order="C")
    if lanes is not None:
        if isinstance(lanes, (bool, np.bool_)) or not isinstance(lanes, (int, np.integer)) \
                or lanes < 1:
            raise DualgpuError(
                f"dual_array: lanes must be a positive int (the number of tangent lanes N); got "
                f"{lanes!r}. Fix: e.g. lanes=2."
            )
        lanes = int(lanes)
    if partials is None:
        if lanes is None:
            raise DualgpuError(
                "dual_array: give either partials (shape (N, *values.shape)) or lanes=N."
            )
        partials = np.zeros((lanes,) + values.shape, dtype=dtype)
    else:
        partials = np.array(_real_array(partials, "partials"), dtype=dtype, copy=True, order="C")
        if lanes is not None and partials.shape[0] != lanes:
            raise DualgpuError(
                f"dual_array: partials have {partials.shape[0]} lanes but lanes={lanes}."
            )
    return DualArray(values, partials)


def _real_array(data, what):
    """``data`` as a real numpy array, or a DualgpuError (complex parts are never dropped)."""
    if isinstance(data, DualArray):
        raise DualgpuError(
            f"dual_array: {what} is a DualArray; expected plain values. Fix: use "
            "u.copy() for a copy of a DualArray, or pass u.values and u.partials."
        )
    if _is_device(data):
        data = data.copy_to_host()
    array = np.asarray(data)
    if array.dtype.kind == "c":
        raise DualgpuError(
            f"dual_array: {what} are complex (dtype {array.dtype}); the imaginary parts would "
            "be dropped. Expected real numbers. Fix: pass the real part (.real), or split real "
            "and imaginary parts into two dual arrays."
        )
    if array.dtype.kind not in "biuf":
        raise DualgpuError(
            f"dual_array: expected {what} as real numbers; got dtype {array.dtype}. Fix: convert "
            "first, e.g. np.asarray(values, dtype=np.float64)."
        )
    return array


def zeros_like_lanes(like, lanes):
    """Return a host DualArray of zeros shaped and typed like ``like`` with ``lanes`` lanes."""
    dtype = check_dtype(like.dtype, "zeros_like_lanes")
    shape = tuple(like.shape)
    return DualArray(np.zeros(shape, dtype), np.zeros((lanes,) + shape, dtype))
