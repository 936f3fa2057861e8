"""DualArray: values of shape S plus partials of shape (N, *S), on host or device.

The partials are lane-major (structure of arrays): lane k of every cell is one
contiguous array ``partials[k]``, so neighbouring GPU threads read neighbouring
addresses. Inside compiled kernels a DualArray is indexed like an ordinary
array (see :mod:`dualgpu.compiled.arrays`); in plain Python (the CUDA simulator and
host code) this class does the same with :class:`dualgpu.Dual` elements.
"""
from __future__ import annotations

import linecache
import re
import sys

import numpy as np
import numpy.typing as npt

from dualgpu.core import hooks
from dualgpu.core._context import active_levels
from dualgpu.core.elements import element
from dualgpu.core._memory import copy_member, device_copy, host, is_device, same_side, zero_fill
from dualgpu.core.complex_dual import COMPLEX_DTYPES
from dualgpu.core.dual import DECISIONS, DTYPES, Dual, DualArrayBase, check_dtype, check_tag
from dualgpu.core.object_arrays import from_object_array, is_object_array
from dualgpu.errors import DualgpuError

__all__ = ["DualArray", "dual_array", "zeros_like_lanes", "copy_into"]

#: dimensions of a dual array's values; under a nested driver (second derivatives) the
#: members of its dual arrays have a lane axis per enclosing level more (a 3-D state's outer
#: partials are the 4-D values of a dual array)
MAX_NDIM = 3
#: Partials of this dtype make a structural tracer (dependency bitsets, cpu backend).
TRACER_DTYPE = np.dtype(np.uint64)
#: Partials of this dtype make a *global* structural tracer (``detect_sparsity(mode="global")``):
#: the same dependency bitsets, but a kernel that branches on a traced value is refused.
GLOBAL_TRACER_DTYPE = np.dtype(np.int64)
TRACER_DTYPES = (TRACER_DTYPE, GLOBAL_TRACER_DTYPE)


def _as_index(index):
    return index if isinstance(index, tuple) else (index,)


def _basic_ndim(index, ndim):
    """The number of axes ``values[index]`` has for a basic index (ints, slices, Ellipsis,
    None: a view), or -1 when the index holds arrays, lists or bools (advanced indexing)."""
    for item in index:
        if item is None:
            ndim += 1
        elif isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_)):
            ndim -= 1
        elif not (isinstance(item, slice) or item is Ellipsis):
            return -1
    return ndim


class DualArray(DualArrayBase):
    """An array of dual numbers stored as ``values`` and lane-major ``partials``.

    Parameters
    ----------
    values : ndarray or device array, shape S (1 to 3 dimensions)
    partials : ndarray or device array, shape ``(N, *S)``, same dtype and kind
        as ``values``. Both are used as given (not copied): use
        :func:`dual_array` to build one from a caller's data safely.
    tag : int, optional
        The perturbation of these lanes (0 for first order). With ``values``
        and ``partials`` themselves DualArrays of a lower tag, this is an array
        of nested (second-order) duals: see :func:`dualgpu.hessian`.

    Raises
    ------
    DualgpuError
        When the partials' shape or dtype does not fit the values (the message gives both
        and the fix), or ``tag`` does not fit nested members.

    Examples
    --------
    >>> import numpy as np
    >>> from dualgpu import DualArray
    >>> u = DualArray(np.zeros(3), np.ones((2, 3)))
    >>> u.lanes, u.shape, u.dtype
    (2, (3,), dtype('float64'))
    """

    __slots__ = ("values", "partials", "tag", "_numba_type_cache")

    def __init__(self, values, partials, *, tag=0):
        self.tag = check_tag(tag) if tag else 0
        if isinstance(values, DualArray) or isinstance(partials, DualArray):
            _check_nested_members(values, partials, self.tag)
            self.values = values
            self.partials = partials
            self._numba_type_cache = None
            return
        for what, member in (("values", values), ("partials", partials)):
            if not (isinstance(member, np.ndarray) or is_device(member)):
                raise DualgpuError(
                    f"DualArray: {what} must be a numpy or device array; got "
                    f"{type(member).__name__}. DualArray(values, partials) uses its arrays as "
                    "given; to build one from lists or scalars (copied and converted), use "
                    "dualgpu.dual_array(values, partials) or dual_array(values, lanes=N)."
                )
        if is_device(values) != is_device(partials):
            raise DualgpuError(
                "DualArray: values and partials must both be host (numpy) arrays or both "
                f"device arrays; got {type(values).__name__} and {type(partials).__name__}. "
                "Use dualgpu.cuda.to_device(dual_array) to move both."
            )
        extra = len(active_levels()) if values.ndim > MAX_NDIM else 0  # nested members
        if not 1 <= values.ndim <= MAX_NDIM + extra:
            fix = ("for a single number use dualgpu.Dual(value, partials)" if values.ndim == 0
                   else f"reshape to at most {MAX_NDIM} dimensions")
            raise DualgpuError(
                f"DualArray: values must have 1 to {MAX_NDIM} dimensions; got shape "
                f"{tuple(values.shape)}. Fix: {fix}."
            )
        if values.dtype not in DTYPES and values.dtype not in COMPLEX_DTYPES:
            check_dtype(values.dtype, "DualArray values")  # raises, naming the dtypes
        if partials.dtype != values.dtype and partials.dtype not in TRACER_DTYPES:
            raise DualgpuError(
                f"DualArray: partials dtype {partials.dtype} differs from values dtype "
                f"{values.dtype}; cast one of them (both float32, float64, complex64 or "
                "complex128)."
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
        return self.partials.dtype in TRACER_DTYPES

    @property
    def is_device(self):
        """True when the members are numba.cuda device arrays."""
        if isinstance(self.values, DualArray):
            return self.values.is_device
        return is_device(self.values)

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
        if _basic_ndim(index, self.values.ndim) < 0:  # masks, index arrays (dualgpu.host)
            return hooks.advanced_getitem(self, index)
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
                    "host code read the element "
                    f"[{', '.join(str(int(k)) for k in index)}] of an array that sparsity "
                    "detection "
                    "(sparsity='detect' or 'detect-global') traces; the detector follows "
                    "kernels only and cannot "
                    "trace host code on single elements (nor host numpy operations). Fix: "
                    "compute that value in a kernel, keep it an array (u[0:1] instead of u[0]), "
                    "give the sparsity pattern yourself (sparsity=pattern, "
                    "dualgpu.sparse.banded_pattern), or post-process the result outside f."
                )
            return Dual(value, np.asarray(partials))
        return DualArray(value, partials)

    def __setitem__(self, index, item):
        """Store a Dual, a DualArray, a number or an array (zero partials) at ``index``.

        Items broadcast as in numpy (a Dual or a number into a slice, a row into a
        block); basic and advanced indices (masks, index arrays) are supported on host
        arrays.
        """
        index = _as_index(index)
        if self.tag or self.is_nested or getattr(item, "tag", 0):
            _set_tagged(self, index, item)
            return
        if isinstance(item, (Dual, DualArray)):
            if item.lanes != self.lanes:
                raise DualgpuError(
                    f"cannot store a dual with {item.lanes} lanes into a DualArray with "
                    f"{self.lanes} lanes; seed both with the same lane count."
                )
            values = item.value if isinstance(item, Dual) else item.values
            partials = item.partials
        elif (hasattr(item, "__cuda_array_interface__") or isinstance(item, np.ndarray)
              or np.isscalar(item) or isinstance(item, (list, tuple))):
            values, partials = item, None
        else:
            raise DualgpuError(
                f"cannot store {type(item).__name__} into a DualArray; expected a Dual, a "
                "DualArray, a number or an array."
            )
        target_ndim = _basic_ndim(index, self.values.ndim)
        if target_ndim < 0:  # masks, index arrays: dualgpu.host.indexing
            hooks.advanced_setitem(self, index, values, partials)
            return
        self.values[index] = values
        lanes_index = (slice(None),) + index
        if partials is None:
            self.partials[lanes_index] = 0
            return
        # the item's partials (N, *S_item) broadcast into (N, *S_target): ones after N
        extra = target_ndim - (partials.ndim - 1)
        if extra > 0:
            partials = partials.reshape((partials.shape[0],) + (1,) * extra + partials.shape[1:])
        elif extra < 0:  # numpy drops the item's leading length-one axes: (1, 4) into (4,)
            partials = partials.reshape((partials.shape[0],) + partials.shape[1 - extra:])
        self.partials[lanes_index] = partials

    def item(self, *index):
        """One element as a :class:`~dualgpu.Dual` (a copy), as numpy's ``item`` gives a float."""
        return element(self, index)

    def tolist(self):
        """Return the elements as nested lists of :class:`~dualgpu.Dual` scalars.

        As numpy's ``ndarray.tolist`` gives Python floats, each element keeps its
        value and partials (a copy: later stores into the array do not change it).
        A device array is copied to the host first.

        Returns
        -------
        list or Dual
            Nested lists ``ndim`` deep (a Dual for a 0-d array).

        Examples
        --------
        >>> import numpy as np, dualgpu
        >>> u = dualgpu.DualArray(np.array([1.0, 2.0]), np.array([[1.0, 0.0], [0.0, 1.0]]))
        >>> items = u.tolist()
        >>> [(float(d.value), d.partials.tolist()) for d in items]
        [(1.0, [1.0, 0.0]), (2.0, [0.0, 1.0])]
        """
        host = self.copy_to_host() if self.is_device else self
        return _nested_list(host)

    # -- host/device transfer ---------------------------------------------------
    def copy_to_host(self, ary=None, stream=0):
        """Return a host DualArray (numpy members): a copy, or ``ary`` (a DualArray) filled in.

        A plain numpy ``ary`` cannot receive the partials: allocate the host buffer as a
        DualArray (``dualgpu.dual_array(np.empty(shape), lanes=N)``) or call
        ``copy_to_host()`` without one.
        """
        nested = self.is_nested
        if nested:
            host = DualArray(self.values.copy_to_host(), self.partials.copy_to_host(), tag=self.tag)
        else:
            values = self.values.copy_to_host() if self.is_device else np.array(self.values)
            partials = self.partials.copy_to_host() if self.is_device else np.array(self.partials)
            host = DualArray(np.asarray(values), np.asarray(partials), tag=self.tag)
        if ary is None:
            return host
        if not isinstance(ary, DualArray):  # kept by the driver's registry, or refused (naming
            return hooks.copy_to_plain(host, ary)  # the buffer and line; dualgpu.host.buffers)
        ary[...] = host if nested else DualArray(host.values, host.partials)
        return ary

    def copy_to_device(self, ary, stream=0):
        """Copy ``ary`` into this DualArray in place (numba's device-array method).

        ``ary`` is a DualArray with the same shape and lanes (values and partials are
        copied) or a plain array of the same shape (values copied, partials set to zero),
        in host or device memory.
        """
        hooks.device_copy("DualArray.copy_to_device()")
        copy_into(self, hooks.kept_source(ary), stream)

    # -- numpy on the host: objectives and post-processing keep the partials ------
    # (dualgpu.host.protocol holds the machinery, installed into dualgpu.core.hooks; the
    # methods below mirror ndarray's)
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return hooks.array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return hooks.array_function(func, types, args, kwargs)

    def __array__(self, dtype=None, copy=None):
        if hooks.values_followed():  # a store into a kept host buffer, its partials kept
            values = self.copy_to_host().values if self.is_device else self.values
            return np.asarray(values, dtype)
        # a store into a plain host buffer (buf[:] = u) gets a message naming the buffer, the
        # line and the fix (dualgpu.host.buffers); numpy's array constructors theirs; anything
        # else the general one
        frame = sys._getframe(1)
        raise TypeError(hooks.array_message(frame) or _constructor_message(frame) or (
            "a DualArray cannot become a plain numpy array without dropping its partials. "
            "numpy functions and operators work on it directly (np.sum(u), u * x, u @ x, "
            "np.linalg.norm(u - data)) and keep the partials; allocate arrays like it with "
            "np.zeros_like(u) or dualgpu.cuda.device_array_like(u); u.values reads the "
            "values alone and drops the derivative. Storing it into a plain numpy array (a "
            "trajectory buffer traj[t] = u) lands here too: collect the steps in a list and "
            "np.stack(frames) them, or allocate the buffer with np.zeros_like(u, "
            "shape=(steps,) + u.shape)."
        ))

    def sum(self, axis=None, dtype=None, out=None, keepdims=False):
        """The sum over ``axis`` (all elements by default): a Dual, or a DualArray."""
        if (self.is_nested or self.tag) and axis is None and not keepdims and out is None:
            return _sum_tagged(self)  # duals of a nested derivative: the total only
        return np.sum(self, axis=axis, dtype=dtype, out=out, keepdims=keepdims)

    def mean(self, axis=None, dtype=None, out=None, keepdims=False):
        """The mean over ``axis`` (all elements by default): a Dual, or a DualArray."""
        if (self.is_nested or self.tag) and axis is None and not keepdims and out is None:
            return _sum_tagged(self) / self.size
        return np.mean(self, axis=axis, dtype=dtype, out=out, keepdims=keepdims)

    def prod(self, axis=None, dtype=None, out=None, keepdims=False):
        """The product over ``axis`` (exact partials with zeros)."""
        return np.prod(self, axis=axis, dtype=dtype, out=out, keepdims=keepdims)

    def max(self, axis=None, out=None, keepdims=False):
        """The maximum over ``axis``, with the partials of the element it came from."""
        return np.max(self, axis=axis, out=out, keepdims=keepdims)

    def min(self, axis=None, out=None, keepdims=False):
        """The minimum over ``axis``, with the partials of the element it came from."""
        return np.min(self, axis=axis, out=out, keepdims=keepdims)

    def argmax(self, axis=None, out=None, keepdims=False):
        """The index of the maximum of the values (a plain integer or array)."""
        return np.argmax(self, axis=axis, out=out, keepdims=keepdims)

    def argmin(self, axis=None, out=None, keepdims=False):
        """The index of the minimum of the values (a plain integer or array)."""
        return np.argmin(self, axis=axis, out=out, keepdims=keepdims)

    def cumsum(self, axis=None, dtype=None, out=None):
        """The running sum along ``axis`` (of the flattened array by default)."""
        return np.cumsum(self, axis=axis, dtype=dtype, out=out)

    def var(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
        """The variance over ``axis``."""
        return np.var(self, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims)

    def std(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
        """The standard deviation over ``axis``."""
        return np.std(self, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims)

    def dot(self, other):
        """``np.dot(self, other)``."""
        return np.dot(self, other)

    def clip(self, min=None, max=None):
        """``np.clip(self, min, max)``: the partials of whichever bound or element won."""
        return np.clip(self, min, max)

    def round(self, decimals=0):
        """The values rounded (zero partials)."""
        return np.round(self, decimals)

    def reshape(self, *shape, order="C"):
        """A DualArray of the same data with a new shape (``u.reshape(2, 3)`` or ``((2, 3))``)."""
        if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
            shape = tuple(shape[0])
        return np.reshape(self, shape, order=order)

    def ravel(self, order="C"):
        """The flattened DualArray."""
        return np.ravel(self, order=order)

    def flatten(self, order="C"):
        """A flattened copy."""
        return np.ravel(self, order=order).copy()

    def transpose(self, *axes):
        """The DualArray with its axes permuted (reversed when none are given)."""
        if len(axes) == 1 and not isinstance(axes[0], (int, np.integer)):
            axes = axes[0]
        return np.transpose(self, axes if axes else None)  # device arrays: views, see host.shapes

    @property
    def T(self):
        """The transposed DualArray."""
        return self.transpose()

    def swapaxes(self, axis1, axis2):
        """The DualArray with two axes interchanged."""
        return np.swapaxes(self, axis1, axis2)

    def squeeze(self, axis=None):
        """The DualArray without its length-one axes."""
        return np.squeeze(self, axis=axis)

    def take(self, indices, axis=None, mode="raise"):
        """``np.take(self, indices, axis)``."""
        return np.take(self, indices, axis=axis, mode=mode)

    def repeat(self, repeats, axis=None):
        """``np.repeat(self, repeats, axis)``."""
        return np.repeat(self, repeats, axis=axis)

    def fill(self, value):
        """Set every element to ``value`` (a number: zero partials; a Dual: its partials)."""
        self[...] = value

    def astype(self, dtype, copy=True):
        """This array cast to ``dtype`` on the same side (host or device).

        A float dtype (float32, float64) keeps the partials; an integer or bool dtype
        gives the plain values (zero derivative).
        """
        dtype = np.dtype(dtype)
        if dtype == self.dtype and not copy:
            return self
        values = host(self.values)
        if self.dtype.kind == "c" and dtype.kind != "c":
            raise DualgpuError(
                f"astype({dtype}) of a complex DualArray would drop the imaginary parts. Fix: "
                "take u.real (or u.imag, np.abs(u)) first.")
        if dtype.kind not in "fc":
            DECISIONS[0] += 1  # plain numbers taken from the values (see dualgpu.core.dual)
            return values.astype(dtype)
        partials = host(self.partials)
        lanes_dtype = partials.dtype if self.is_tracer else dtype  # dependency sets stay bitsets
        cast = DualArray(values.astype(dtype), partials.astype(lanes_dtype))
        if self.is_device:
            cast = DualArray(same_side(self.values, cast.values),
                             same_side(self.values, cast.partials))
        return cast

    @property
    def real(self):
        """The real part (a real DualArray on the host; the values' real part for a real one)."""
        return np.real(self)

    @property
    def imag(self):
        """The imaginary part (a real DualArray on the host)."""
        return np.imag(self)

    def conj(self):
        """The complex conjugate (on the host)."""
        return np.conjugate(self)

    conjugate = conj

    def copy(self):
        """Return a deep copy on the same side (host or device)."""
        if self.is_nested or not self.is_device:  # nested members copy themselves
            return DualArray(self.values.copy(), self.partials.copy(), tag=self.tag)
        return DualArray(device_copy(self.values), device_copy(self.partials), tag=self.tag)


# -- operators: numpy's ufuncs (dualgpu.host.ufuncs applies the rule table) -----------
_BINARY_OPERATORS = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
    "floordiv": np.floor_divide, "mod": np.remainder, "pow": np.power, "matmul": np.matmul,
}
_COMPARISON_OPERATORS = {
    "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
    "eq": np.equal, "ne": np.not_equal,
}
_UNARY_OPERATORS = {"neg": np.negative, "pos": np.positive, "abs": np.absolute}


def _defers(other):
    return getattr(type(other), "__array_ufunc__", False) is None


def _operator(ufunc, name, reflected=False, inplace=False):
    if inplace:
        def method(self, other):
            return ufunc(self, other, out=(self,))
    elif reflected:
        def method(self, other):
            return NotImplemented if _defers(other) else ufunc(other, self)
    else:
        def method(self, other):
            return NotImplemented if _defers(other) else ufunc(self, other)
    method.__name__ = name
    method.__doc__ = f"numpy.{ufunc.__name__} with partials (see dualgpu.host.ufuncs)."
    return method


for _name, _ufunc in _BINARY_OPERATORS.items():
    setattr(DualArray, f"__{_name}__", _operator(_ufunc, f"__{_name}__"))
    setattr(DualArray, f"__r{_name}__", _operator(_ufunc, f"__r{_name}__", reflected=True))
    setattr(DualArray, f"__i{_name}__", _operator(_ufunc, f"__i{_name}__", inplace=True))
for _name, _ufunc in _COMPARISON_OPERATORS.items():
    setattr(DualArray, f"__{_name}__", _operator(_ufunc, f"__{_name}__"))
for _name, _ufunc in _UNARY_OPERATORS.items():
    setattr(DualArray, f"__{_name}__", lambda self, _u=_ufunc: _u(self))
DualArray.__hash__ = None  # like ndarray: == compares elements

#: numpy's array constructors: they convert their argument with ``__array__`` and do not
#: dispatch on it (``like=`` only), so a DualArray cannot answer them
_CONSTRUCTORS = re.compile(r"\b(ascontiguousarray|asfortranarray|asarray|asanyarray|array)"
                           r"\s*\(")


def _constructor_message(frame):
    """The message for a numpy array constructor called on a DualArray at ``frame``'s line,
    or None."""
    filename = frame.f_code.co_filename
    if "site-packages" in filename or "dist-packages" in filename:
        return None  # a library's own conversion (scipy's asarray of its argument): not the
        # user's line
    try:
        line = linecache.getline(filename, frame.f_lineno)
    except Exception:  # noqa: BLE001 - a message must never fail
        return None
    found = _CONSTRUCTORS.search(line)
    if found is None:
        return None
    name = found.group(1)
    return (f"a DualArray cannot become a plain numpy array without dropping its partials: "
            f"np.{name}(...) makes one (numpy's array constructors, np.asarray, np.array, "
            "np.ascontiguousarray and np.asfortranarray, do not hand the call to a DualArray "
            "as its other functions do). Fix: leave the call out (a kernel takes a DualArray "
            "in any layout, and those dualgpu makes are C-contiguous), or copy it with "
            "u.copy() (C order, partials too); u.values reads the values alone and drops the "
            "derivative.")


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


def _nested_list(array):
    """Nested lists of the elements of a host DualArray (a Dual for 0-d)."""
    if array.ndim == 0:
        return array[()]
    if array.ndim == 1:
        return [array[i] for i in range(array.shape[0])]
    return [_nested_list(array[i]) for i in range(array.shape[0])]


def dual_array(values: npt.ArrayLike, partials: npt.ArrayLike | None = None, *,
               lanes: int | None = None, dtype: npt.DTypeLike | None = None) -> DualArray:
    """Return a new host :class:`DualArray` built from copies of the inputs.

    Parameters
    ----------
    values : array_like, 1 to 3 dimensions
    partials : array_like of shape ``(N, *values.shape)``, optional
        The tangent lanes. When omitted, ``lanes`` zero lanes are made.
    lanes : int, optional
        Number of zero lanes when ``partials`` is omitted.
    dtype : float32, float64, complex64 or complex128, optional
        Defaults to the dtype of ``values`` (float64 for integer input). Complex values give
        a complex dual array (host numpy on it: the rules of ``dualgpu.complex_rules``).

    Returns
    -------
    DualArray
        On the host, owning copies of ``values`` and ``partials``.

    Raises
    ------
    DualgpuError
        When neither ``partials`` nor ``lanes`` is given, they disagree, an input is
        already a DualArray, or complex input would become real (its imaginary part dropped).

    Examples
    --------
    >>> import numpy as np, dualgpu
    >>> u = dualgpu.dual_array(np.linspace(0.0, 1.0, 4), lanes=2)
    >>> u.shape, u.lanes, u.partials.shape
    ((4,), 2, (2, 4))
    """
    values = _real_array(values, "values")
    if dtype is None:
        dtype = values.dtype if values.dtype.kind in "fc" else np.float64
    dtype = np.dtype(dtype)
    if dtype not in COMPLEX_DTYPES:
        dtype = check_dtype(dtype, "dual_array dtype")
    if values.dtype.kind == "c" and dtype.kind != "c":
        raise DualgpuError(
            f"dual_array: values are complex (dtype {values.dtype}) and dtype={dtype}; the "
            "imaginary parts would be dropped. Fix: leave dtype out, or pass complex64/128.")
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
        partials = _real_array(partials, "partials")
        if partials.dtype.kind == "c" and dtype.kind != "c":
            raise DualgpuError(
                f"dual_array: the partials are complex and the values real ({dtype}); the "
                "imaginary parts would be dropped. Fix: pass dtype=np.complex128 (or complex64) "
                "for a complex dual array.")
        partials = np.array(partials, dtype=dtype, copy=True, order="C")
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
    if is_device(data):
        data = data.copy_to_host()
    array = np.asarray(data)
    if array.dtype.kind not in "biufc":
        raise DualgpuError(
            f"dual_array: expected {what} as real numbers; got dtype {array.dtype}. Fix: convert "
            "first, e.g. np.asarray(values, dtype=np.float64)."
        )
    return array


def zeros_like_lanes(like, lanes):
    """Return a host DualArray of zeros shaped and typed like ``like`` with ``lanes`` lanes."""
    dtype = like.dtype if like.dtype in COMPLEX_DTYPES else check_dtype(like.dtype,
                                                                        "zeros_like_lanes")
    shape = tuple(like.shape)
    return DualArray(np.zeros(shape, dtype), np.zeros((lanes,) + shape, dtype))


def copy_into(dest, src, stream=0):
    """Copy ``src`` into ``dest`` in place; return ``dest``.

    What ``cuda.to_device(x, to=buffer)`` and ``buffer.copy_to_device(x)`` do. Either side
    may be a DualArray or a plain array, in host or device memory, on any backend:

    * into a DualArray from a DualArray: values and partials are copied (same shape and
      lane count);
    * into a DualArray from a plain array: the values are copied and the partials set to
      zero (a plain array carries no tangent);
    * into a plain array from a DualArray: refused, since the partials would be lost;
    * plain into plain: the array's own ``copy_to_device`` (or an assignment for numpy).

    Examples
    --------
    >>> import numpy as np, dualgpu
    >>> buffer = dualgpu.dual_array(np.zeros(2), lanes=1)
    >>> copy_into(buffer, np.array([1.0, 2.0])).values.tolist()
    [1.0, 2.0]
    """
    if is_object_array(src):  # np.array([dual, 0.0]) in host code
        src = from_object_array(src, "the array copied into a buffer")
    if isinstance(dest, DualArray):
        if isinstance(src, DualArray):
            if src.lanes != dest.lanes:
                raise DualgpuError(
                    f"copy into a DualArray with {dest.lanes} lane(s) from one with "
                    f"{src.lanes}: allocate the buffer like the source "
                    "(cuda.device_array_like(x)) so that the lane counts agree."
                )
            copy_member(dest.values, src.values, "values")
            copy_member(dest.partials, src.partials, "partials")
        else:
            copy_member(dest.values, src, "values")
            zero_fill(dest.partials)
        return dest
    if isinstance(src, DualArray):
        raise DualgpuError(
            f"copy of a DualArray ({src.lanes} lane(s)) into a plain {type(dest).__name__} "
            "would drop its partials. Allocate the buffer through dualgpu.cuda "
            "(device_array_like(x), or device_array under the driver), which makes it a "
            "DualArray, or copy x.values if no derivative is wanted."
        )
    if is_device(dest):
        dest.copy_to_device(src, stream=stream)
    else:
        copy_member(dest, src, "values")
    return dest
