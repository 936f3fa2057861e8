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
from .nested import check_tag as _check_tag

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
    tag : int, optional
        The perturbation of these lanes (0 for first order). With ``values``
        and ``partials`` themselves DualArrays of a lower tag, this is an array
        of nested (second-order) duals: see :mod:`dualgpu.nested`.
    """

    __slots__ = ("values", "partials", "tag", "_numba_type_cache")

    def __init__(self, values, partials, *, tag=0):
        self.tag = _check_tag(tag) if tag else 0
        if isinstance(values, DualArray) or isinstance(partials, DualArray):
            _check_nested_members(values, partials, self.tag)
            self.values = values
            self.partials = partials
            self._numba_type_cache = None
            return
        if _is_device(values) != _is_device(partials):
            raise DualgpuError(
                "DualArray: values and partials must both be host (numpy) arrays or both "
                f"device arrays; got {type(values).__name__} and {type(partials).__name__}. "
                "Use dualgpu.cuda.to_device(dual_array) to move both."
            )
        if not (1 <= values.ndim <= MAX_NDIM):
            raise DualgpuError(
                f"DualArray: values must have 1 to {MAX_NDIM} dimensions; got shape "
                f"{tuple(values.shape)}."
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
    def is_nested(self):
        """True for an array of nested duals (values and partials are DualArrays)."""
        return isinstance(self.values, DualArray)

    @property
    def is_tracer(self):
        """True when the lanes are dependency bitsets (sparsity detection), not tangents."""
        return self.partials.dtype == TRACER_DTYPE

    @property
    def is_device(self):
        """True when the members are numba.cuda device arrays."""
        if isinstance(self.values, DualArray):
            return self.values.is_device
        return _is_device(self.values)

    def __len__(self):
        return self.shape[0]

    def __repr__(self):
        where = "device" if self.is_device else "host"
        tag = f", tag={self.tag}" if self.tag else ""
        inner = f", values={self.values!r}" if self.is_nested else ""
        return (
            f"DualArray(shape={self.shape}, dtype={self.dtype}, lanes={self.lanes}{tag}{inner}, "
            f"{where})"
        )

    # -- element and slice access (plain Python: simulator and host code) -------
    def __getitem__(self, index):
        index = _as_index(index)
        value = self.values[index]
        partials = self.partials[(slice(None),) + index]
        if self.tag or self.is_nested:
            scalar = not isinstance(value, DualArray) and np.ndim(value) == 0
            if isinstance(value, Dual) or scalar:
                return Dual(value, partials if self.is_nested else np.asarray(partials),
                            tag=self.tag)
            return DualArray(value, partials, tag=self.tag)
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
        if self.tag or self.is_nested or getattr(item, "tag", 0):
            _set_tagged(self, index, item)
            return
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
        if self.is_nested:
            host = DualArray(self.values.copy_to_host(), self.partials.copy_to_host(), tag=self.tag)
            if ary is None:
                return host
            ary[...] = host
            return ary
        values = self.values.copy_to_host() if self.is_device else np.array(self.values)
        partials = self.partials.copy_to_host() if self.is_device else np.array(self.partials)
        if ary is None:
            return DualArray(np.asarray(values), np.asarray(partials), tag=self.tag)
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
        if self.is_nested or self.tag:
            return _sum_tagged(self)
        host = self.copy_to_host() if self.is_device else self
        return Dual(host.values.sum(), host.partials.reshape(self.lanes, -1).sum(axis=1),
                    dtype=self.dtype)

    def mean(self):
        """The mean of all elements, as a :class:`Dual`."""
        total = self.sum()
        if self.is_nested or self.tag:
            return total / self.size
        return Dual(total.value / self.size, total.partials / self.size, dtype=self.dtype)

    def __array__(self, dtype=None, copy=None):
        raise TypeError(
            "a DualArray cannot become a plain numpy array without dropping its partials. "
            "Allocate arrays like it with dualgpu.cuda.device_array_like(u), read the values "
            "alone with u.values, or reduce it with u.sum() / u.mean()."
        )

    def copy(self):
        """Return a deep copy on the same side (host or device)."""
        if self.is_nested:
            return DualArray(self.values.copy(), self.partials.copy(), tag=self.tag)
        if not self.is_device:
            if self.tag:
                return DualArray(self.values.copy(), self.partials.copy(), tag=self.tag)
            return DualArray(self.values.copy(), self.partials.copy())
        from numba import cuda

        values = cuda.device_array_like(self.values)
        partials = cuda.device_array_like(self.partials)
        values.copy_to_device(self.values)
        partials.copy_to_device(self.partials)
        return DualArray(values, partials, tag=self.tag)


def _check_nested_members(values, partials, tag):
    """Raise unless ``values``/``partials`` make an array of nested duals of tag ``tag``."""
    if not (isinstance(values, DualArray) and isinstance(partials, DualArray)):
        raise DualgpuError(
            "DualArray(values, partials): for nested duals both members must be DualArrays (of "
            f"a lower tag); got {type(values).__name__} and {type(partials).__name__}."
        )
    if values.tag >= tag:
        raise DualgpuError(
            f"DualArray(values, partials, tag={tag}): the members have tag {values.tag}; a "
            f"nested array's tag must be higher than its members' (e.g. tag={values.tag + 1})."
        )
    if (partials.tag, partials.lanes, partials.is_nested) != (values.tag, values.lanes,
                                                             values.is_nested):
        raise DualgpuError(
            "DualArray(values, partials): the members must be duals of the same kind (tag, "
            f"lanes); got tag {values.tag} with {values.lanes} lanes and tag {partials.tag} "
            f"with {partials.lanes} lanes."
        )
    if partials.ndim != values.ndim + 1 or tuple(partials.shape[1:]) != tuple(values.shape):
        raise DualgpuError(
            f"DualArray: partials must have shape (N, *{tuple(values.shape)}) for values of "
            f"shape {tuple(values.shape)}; got {tuple(partials.shape)}."
        )
    if values.is_device != partials.is_device:
        raise DualgpuError(
            "DualArray: values and partials must both be on the host or both on the device."
        )


def _set_tagged(array, index, item):
    """``array[index] = item`` when tags are involved (nested or tagged arrays, tagged items)."""
    lanes_index = (slice(None),) + index
    item_tag = item.tag if isinstance(item, (Dual, DualArray)) else -1
    if item_tag == array.tag:
        if item.lanes != array.lanes:
            raise DualgpuError(
                f"cannot store a dual with {item.lanes} lanes into a DualArray with "
                f"{array.lanes} lanes; seed both with the same lane count."
            )
        if isinstance(item, Dual):
            array.values[index] = item.value
            for k in range(array.lanes):
                array.partials[(k,) + index] = item.partials[k]
        else:
            array.values[index] = item.values
            array.partials[lanes_index] = item.partials
    elif item_tag > array.tag:
        raise DualgpuError(
            f"cannot store a dual of tag {item_tag} into a DualArray of tag {array.tag}: the "
            "partials of the outer derivative would be dropped. Allocate the array through "
            "dualgpu.cuda while the driver runs (it allocates arrays of every active level)."
        )
    elif item_tag >= 0 and not array.is_nested:
        raise DualgpuError(
            f"cannot store a dual of tag {item_tag} into a first-order DualArray of tag "
            f"{array.tag}, whose values are plain floats: its partials would be dropped. "
            "Allocate the array through dualgpu.cuda while the driver runs (it allocates "
            "arrays of every active level)."
        )
    else:  # a number, an array or a lower-tag dual: a constant of this array's perturbation
        array.values[index] = item
        array.partials[lanes_index] = 0


def _sum_tagged(array):
    host = array.copy_to_host() if array.is_device else array
    if not host.is_nested:  # first order, tagged
        return Dual(host.values.sum(), host.partials.reshape(host.lanes, -1).sum(axis=1),
                    dtype=host.dtype, tag=host.tag)
    total = host.values.sum()
    lanes = [host.partials[k].sum() for k in range(host.lanes)]
    return Dual(total, lanes, tag=host.tag)


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
    values = np.asarray(values)
    if dtype is None:
        dtype = values.dtype if values.dtype.kind == "f" else np.float64
    dtype = check_dtype(dtype, "dual_array dtype")
    values = np.array(values, dtype=dtype, copy=True, order="C")
    if partials is None:
        if lanes is None:
            raise DualgpuError(
                "dual_array: give either partials (shape (N, *values.shape)) or lanes=N."
            )
        if int(lanes) < 1:
            raise DualgpuError(f"dual_array: lanes must be >= 1; got {lanes}.")
        partials = np.zeros((int(lanes),) + values.shape, dtype=dtype)
    else:
        partials = np.array(partials, dtype=dtype, copy=True, order="C")
        if lanes is not None and partials.shape[0] != lanes:
            raise DualgpuError(
                f"dual_array: partials have {partials.shape[0]} lanes but lanes={lanes}."
            )
    return DualArray(values, partials)


def zeros_like_lanes(like, lanes):
    """Return a host DualArray of zeros shaped and typed like ``like`` with ``lanes`` lanes."""
    dtype = check_dtype(like.dtype, "zeros_like_lanes")
    shape = tuple(like.shape)
    return DualArray(np.zeros(shape, dtype), np.zeros((lanes,) + shape, dtype))
