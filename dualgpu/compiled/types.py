"""numba types and data models of duals and dual arrays (CPU and CUDA alike).

Every numba type dualgpu defines is here, with its data model, so that the modules that
type Python values (:mod:`dualgpu.compiled.typeof`) and lower operations on them
(``rules``, ``arrays``, ``array_iter``, ``nested``) all build on this one:

* ``DualType(dtype, n)``, the first-order dual: a struct of the value and a
  ``UniTuple(dtype, n)`` of partials, so the lanes live in registers;
* ``DualArrayType``, a DualArray: its ``values`` (shape S) and ``partials`` (shape (N, *S));
* ``DualArrayIterType``, the iterator of ``for v in a``;
* ``TaggedDualType`` and ``TaggedDualArrayType``, duals and dual arrays of tag 1 or more
  (second order, duals of duals; see :mod:`dualgpu.compiled.nested`).

The dual's own lane arithmetic is here too: a few intrinsics that emit straight-line LLVM
(``make_dual``, ``lanes_*``), and its number casts. Everything is registered with numba
core's generic registries from a module outside the ``numba.`` namespace, which both
``@njit`` and numba-cuda load (see the documentation's "numba notes" page,
``docs/dev/numba-notes.md``).
"""
import hashlib
import math

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.core.extending import (
    lower_cast,
    make_attribute_wrapper,
    models,
    register_jitable,
    register_model,
)
from numba.core.typeconv import Conversion
from numba.core.typing.templates import AbstractTemplate

from dualgpu import nansafe, rules
from dualgpu.core import lanes as core_lanes
from dualgpu.compiled.intrinsics import intrinsic
from dualgpu.core.nested import MAX_TAG
from dualgpu.errors import DualgpuError

__all__ = [
    "DualType",
    "dual_type",
    "ComplexDualType",
    "complex_dual_type",
    "DualArrayType",
    "dual_array_type",
    "DualArrayIterType",
    "TaggedDualType",
    "tagged_type",
    "TaggedDualArrayType",
    "tagged_array_type",
    "promote",
    "combine",
    "level",
    "innermost",
    "as_float_type",
    "make_dual",
    "lanes_cast",
    "same_bits",
    "float_floor",
    "float_trunc",
    "float_rint",
    "MAX_LANES",
    "build_dual",
    "lane_values",
    "pack_lanes",
    "cast_lane_values",
    "plain_product",
    "nansafe_product",
    "lane_flags",
    "TRACER_LANE",
    "GLOBAL_TRACER_LANE",
    "tracer_of_lane",
    "type_mode",
]

#: Largest lane count a compiled dual accepts (a soft limit for register use); the one value is
#: :data:`dualgpu.core.lanes.MAX_LANES`.
MAX_LANES = core_lanes.MAX_LANES

_FLOATS = (types.float32, types.float64)
_COMPLEXES = (types.complex64, types.complex128)

_MODES = {}


def _forget_typed_templates(new=None, old=None):
    """A rule defined or removed changes :func:`type_mode`, so new dual types differ from the
    old ones. numba's typing templates keep the type they returned per argument types (an
    intrinsic that builds a DualArray from two arrays returns the same type for the same
    arrays): those caches are emptied, so nothing typed later mixes the two modes."""
    stack = [AbstractTemplate]
    while stack:
        template = stack.pop()
        stack.extend(template.__subclasses__())
        cache = template.__dict__.get("_impl_cache")
        if isinstance(cache, dict):
            cache.clear()


def type_mode():
    """The process-wide settings in the key of every dual type: the NaN-safe mode and a digest
    of the rules added with :func:`dualgpu.rules.define`.

    numba's ``cache=True`` index knows a compiled function by its argument types, so a user's
    cached function on duals compiled under other rules (a corrected formula, an override)
    or the other NaN-safe mode is another entry, never one loaded (issue 43). After
    :func:`~dualgpu.rules.define`, new duals are typed anew and compile with the rule.

    Returns
    -------
    tuple of str
        Empty by default.
    """
    text = rules.fingerprint()
    mode = _MODES.get(text)
    if mode is None:
        digest = hashlib.sha256(text.encode()).hexdigest()[:12] if text else None
        mode = _MODES[text] = nansafe.TYPE_KEY + ((f"rules={digest}",) if digest else ())
    return mode


#: Lane dtype of the structural tracer: each lane is a 64-bit dependency set.
TRACER_LANE = types.uint64
#: Lane dtype of the global structural tracer (``tracer="global"``): the same bitsets, int64.
GLOBAL_TRACER_LANE = types.int64


def tracer_of_lane(lane_dtype):
    """The ``tracer`` mode of lanes of ``lane_dtype``: False, True (local) or "global"."""
    if lane_dtype == TRACER_LANE:
        return True
    return "global" if lane_dtype == GLOBAL_TRACER_LANE else False


class DualType(types.Type):
    """numba type of a dual number with value dtype ``dtype`` and ``n`` lanes.

    With ``tracer=True`` the lanes are 64-bit dependency bitsets combined by OR
    (the structural tracer that detects sparsity patterns) instead of tangents.
    """

    def __init__(self, dtype, n, tracer=False, mode=None):
        if dtype not in _FLOATS:
            raise DualgpuError(f"Dual: value dtype must be float32 or float64; got {dtype}.")
        if not 1 <= n <= MAX_LANES:
            raise DualgpuError(f"Dual: lane count must be 1..{MAX_LANES}; got {n}.")
        self.dtype = dtype
        self.n = n
        self.tracer = tracer
        self.lane_dtype = (GLOBAL_TRACER_LANE if tracer == "global" else TRACER_LANE) if tracer \
            else dtype
        self.partials_type = types.UniTuple(self.lane_dtype, n)
        # restored as it was by unpickling (numba's cache index): see type_mode
        self.mode = type_mode() if mode is None else mode
        suffix = "".join(f", {m}" for m in self.mode)
        super().__init__(name=f"{'Tracer' if tracer else 'Dual'}({dtype}, {n}{suffix})")

    @property
    def key(self):
        return (self.dtype, self.n, self.tracer) + self.mode

    def unify(self, typingctx, other):
        """A branch that yields a float on one side and a dual on the other is a dual."""
        if isinstance(other, (types.Float, types.Integer, types.Boolean)):
            return dual_type(promote(self.dtype, other), self.n, self.tracer, self.mode)
        if isinstance(other, DualType) and other.n == self.n and other.tracer == self.tracer:
            return dual_type(promote(self.dtype, other.dtype), self.n, self.tracer,
                             self.mode)
        return None

    def can_convert_from(self, typingctx, other):
        if isinstance(other, (types.Float, types.Integer)):
            return Conversion.safe
        if isinstance(other, DualType) and other.n == self.n and other.tracer == self.tracer:
            return (Conversion.safe if other.dtype.bitwidth <= self.dtype.bitwidth
                    else Conversion.unsafe)
        return None


_DUAL_TYPES = {}


def dual_type(dtype, n, tracer=False, mode=None):
    """Return the (cached) :class:`DualType` for ``dtype``, ``n`` lanes (and tracer mode),
    under ``mode`` (default: :func:`type_mode` now)."""
    mode = type_mode() if mode is None else mode
    key = (dtype, n, tracer, mode)
    if key not in _DUAL_TYPES:
        _DUAL_TYPES[key] = DualType(dtype, n, tracer, mode)
    return _DUAL_TYPES[key]


def promote(*tys):
    """numba/numpy promotion of float/int scalar types to float32 or float64."""
    dtypes = []
    for t in tys:
        if isinstance(t, DualType):
            t = t.dtype
        if isinstance(t, types.Boolean):
            t = types.int64
        dtypes.append(np.dtype(str(t)) if not isinstance(t, types.Integer)
                      else np.dtype(f"{'u' if not t.signed else ''}int{t.bitwidth}"))
    result = np.result_type(*dtypes)
    return types.float32 if result == np.float32 else types.float64


def as_float_type(ty):
    """The float type of a dual or number type."""
    return ty.dtype if isinstance(ty, DualType) else ty


@register_model(DualType)
class DualModel(models.StructModel):
    def __init__(self, dmm, fe_type):
        members = [("value", fe_type.dtype), ("partials", fe_type.partials_type)]
        super().__init__(dmm, fe_type, members)


make_attribute_wrapper(DualType, "value", "value")
make_attribute_wrapper(DualType, "partials", "partials")


# --- complex duals (their operations: dualgpu.compiled.complex_ops) ----------------

class ComplexDualType(types.Type):
    """numba type of a complex dual: a complex value (complex64 or complex128) and ``n``
    complex partials, as the host's complex :class:`~dualgpu.Dual`. Its rules are
    :mod:`dualgpu.complex_rules`' (:mod:`dualgpu.compiled.complex_ops`)."""

    tracer = False

    def __init__(self, dtype, n, mode=None):
        if dtype not in _COMPLEXES:
            raise DualgpuError(f"complex Dual: dtype must be complex64 or complex128; got {dtype}.")
        if not 1 <= n <= MAX_LANES:
            raise DualgpuError(f"Dual: lane count must be 1..{MAX_LANES}; got {n}.")
        self.dtype = self.lane_dtype = dtype
        self.real_dtype = types.float32 if dtype == types.complex64 else types.float64
        self.n = n
        self.partials_type = types.UniTuple(dtype, n)
        self.mode = type_mode() if mode is None else mode
        suffix = "".join(f", {m}" for m in self.mode)
        super().__init__(name=f"ComplexDual({dtype}, {n}{suffix})")

    @property
    def key(self):
        return (self.dtype, self.n) + self.mode

    def unify(self, typingctx, other):
        """A branch that yields a number or a real dual on one side is a complex dual."""
        if isinstance(other, (types.Number, types.Boolean)) or (
                isinstance(other, (DualType, ComplexDualType)) and other.n == self.n
                and not other.tracer):
            return complex_dual_type(_complex_promote(self, other), self.n, self.mode)
        return None

    def can_convert_from(self, typingctx, other):
        if self.unify(typingctx, other) is not None:
            wide = _complex_promote(self, other) == self.dtype
            return Conversion.safe if wide else Conversion.unsafe
        return None


def _complex_promote(*tys):
    """The complex type holding the values of ``tys`` (numbers, duals, complex duals)."""
    dtypes = []
    for t in tys:
        t = getattr(t, "dtype", t) if isinstance(t, (DualType, ComplexDualType)) else t
        dtypes.append(np.dtype("int64") if isinstance(t, types.Boolean) else np.dtype(str(t)))
    result = np.result_type(np.complex64, *dtypes)
    return types.complex64 if result == np.complex64 else types.complex128


_COMPLEX_DUAL_TYPES = {}


def complex_dual_type(dtype, n, mode=None):
    """Return the (cached) :class:`ComplexDualType` of ``dtype`` (complex64/complex128) and
    ``n`` lanes, under ``mode`` (default: :func:`type_mode` now)."""
    mode = type_mode() if mode is None else mode
    key = (dtype, n, mode)
    if key not in _COMPLEX_DUAL_TYPES:
        _COMPLEX_DUAL_TYPES[key] = ComplexDualType(dtype, n, mode)
    return _COMPLEX_DUAL_TYPES[key]


register_model(ComplexDualType)(DualModel)  # the same members: a value and its partials
make_attribute_wrapper(ComplexDualType, "value", "value")
make_attribute_wrapper(ComplexDualType, "partials", "partials")


# --- dual arrays ---------------------------------------------------------------------

class DualArrayType(types.IterableType):
    """numba type of a DualArray: two array types and the lane count ``n``."""

    def __init__(self, values_type, partials_type, n):
        if values_type.dtype not in _FLOATS + _COMPLEXES:
            raise DualgpuError(f"DualArray: dtype must be float32, float64, complex64 or "
                               f"complex128; got {values_type.dtype}.")
        if not 1 <= n <= MAX_LANES:
            raise DualgpuError(
                f"DualArray: {n} lanes requested; compiled duals support 1..{MAX_LANES}. "
                "Use a smaller chunk_size."
            )
        self.values_type = values_type
        self.partials_type = partials_type
        self.n = n
        self.dtype = values_type.dtype
        self.ndim = values_type.ndim
        self.mode = type_mode()  # as DualType's
        self._hash = hash((values_type, partials_type, n) + self.mode)
        suffix = "".join(f", {m}" for m in self.mode)
        super().__init__(name=f"DualArray({values_type}, lanes={n}{suffix})")

    @property
    def key(self):
        return (self.values_type, self.partials_type, self.n) + self.mode

    def __hash__(self):
        # dispatch hashes argument types on every launch; the key's arrays hash slowly
        try:
            return self._hash
        except AttributeError:  # unpickled: hash again in this process
            self._hash = hash(self.key)
            return self._hash

    def __getstate__(self):
        # str hashes differ between processes: a _hash unpickled from numba's cache index
        # would match nothing, and a user's cache=True function on DualArrays never load
        state = dict(self.__dict__)
        state.pop("_hash", None)
        return state

    @property
    def tracer(self):
        """True for a structural tracer array (uint64 dependency-bitset lanes), "global" for
        a global one (int64 lanes), False for tangents."""
        return tracer_of_lane(self.partials_type.dtype)

    @property
    def dual(self):
        """The type of the array's elements (a :class:`ComplexDualType` for complex arrays)."""
        if isinstance(self.dtype, types.Complex):
            return complex_dual_type(self.dtype, self.n, self.mode)
        return dual_type(self.dtype, self.n, self.tracer, self.mode)

    @property
    def iterator_type(self):
        """``for v in a``: duals of a 1-D DualArray, row views of an N-D one."""
        return DualArrayIterType(self)


def dual_array_type(dtype, ndim, n, layout="C"):
    """Return the DualArrayType of C-contiguous arrays of ``dtype`` with ``ndim`` dims and ``n``
    lanes."""
    return DualArrayType(types.Array(dtype, ndim, layout), types.Array(dtype, ndim + 1, layout), n)


@register_model(DualArrayType)
class DualArrayModel(models.StructModel):
    def __init__(self, dmm, fe_type):
        members = [("values", fe_type.values_type), ("partials", fe_type.partials_type)]
        super().__init__(dmm, fe_type, members)


make_attribute_wrapper(DualArrayType, "values", "values")
make_attribute_wrapper(DualArrayType, "partials", "partials")


# --- iteration over a dual array (its lowering: dualgpu.compiled.array_iter) ------

class DualArrayIterType(types.SimpleIteratorType):
    """Iterator over the first axis of a DualArray (yields what ``a[i]`` yields)."""

    def __init__(self, array_type):
        self.array_type = array_type
        super().__init__(f"iter({array_type})", _element_type(array_type))

    @property
    def key(self):
        # the array type's key, not the name: DualArray names leave out the partials' layout
        return self.array_type.key


def _element_type(array_type):
    """The type of ``a[i]`` for an integer ``i``: a dual (1-D) or a DualArray row view."""
    if array_type.ndim == 1:
        return array_type.dual
    values = array_type.values_type
    partials = array_type.partials_type
    row = values.copy(ndim=values.ndim - 1, layout="C" if values.layout == "C" else "A")
    lanes_row = partials.copy(ndim=partials.ndim - 1, layout="A")
    return DualArrayType(row, lanes_row, array_type.n)


@register_model(DualArrayIterType)
class DualArrayIterModel(models.StructModel):
    def __init__(self, dmm, fe_type):
        members = [("array", fe_type.array_type), ("index", types.EphemeralPointer(types.intp))]
        super().__init__(dmm, fe_type, members)


# --- tagged and nested duals (second order; overloads: dualgpu.compiled.nested) ----

def _is_number(ty):
    return isinstance(ty, (types.Float, types.Integer, types.Boolean))


def level(ty):
    """-1 for a number type, 0 for a first-order dual, the tag for a tagged dual; None otherwise."""
    if _is_number(ty):
        return -1
    if isinstance(ty, DualType):
        return None if ty.tracer else 0
    if isinstance(ty, TaggedDualType):
        return ty.tag
    return None


def innermost(ty):
    """The float (or number) type inside any nesting of dual types."""
    while isinstance(ty, (DualType, TaggedDualType)):
        ty = ty.value_type if isinstance(ty, TaggedDualType) else ty.dtype
    return ty


class TaggedDualType(types.Type):
    """numba type of a dual of tag ``tag`` >= 1 whose value (and each lane) is ``value_type``."""

    def __init__(self, value_type, n, tag):
        if not 1 <= tag <= MAX_TAG:
            raise DualgpuError(f"Dual: tag must be 1..{MAX_TAG} for a tagged dual; got {tag}.")
        if not 1 <= n <= MAX_LANES:
            raise DualgpuError(
                f"Dual of tag {tag}: lane count must be 1..{MAX_LANES}; got {n}. Lanes are "
                "bounded per order: use a smaller chunk_size for this derivative."
            )
        inner = level(value_type)
        if inner is None or inner >= tag:
            raise DualgpuError(
                f"Dual of tag {tag}: its value must be a float or a dual of a lower tag; got "
                f"{value_type}."
            )
        self.value_type = value_type
        self.dtype = innermost(value_type)
        self.n = n
        self.tag = tag
        self.partials_type = types.UniTuple(value_type, n)
        self.mode = type_mode()  # as DualType's
        rules_suffix = "".join(f", {m}" for m in self.mode if m.startswith("rules="))
        super().__init__(name=f"Dual[tag={tag}]({value_type}, {n}{rules_suffix})")

    @property
    def key(self):
        return (self.value_type, self.n, self.tag) + self.mode

    def unify(self, typingctx, other):
        return combine(self, other)

    def can_convert_from(self, typingctx, other):
        if combine(self, other) == self:
            return Conversion.safe
        return None


_TAGGED = {}


def tagged_type(value_type, n, tag):
    """Return the (cached) :class:`TaggedDualType`."""
    key = (value_type, n, tag, type_mode())
    if key not in _TAGGED:
        _TAGGED[key] = TaggedDualType(value_type, n, tag)
    return _TAGGED[key]


def _value_of(ty):
    return ty.value_type if isinstance(ty, TaggedDualType) else ty.dtype


def _rebuild(ty, value):
    if isinstance(ty, TaggedDualType):
        return tagged_type(value, ty.n, ty.tag)
    return dual_type(value, ty.n) if isinstance(value, types.Float) else None


def combine(a, b):
    """The dual type holding both ``a`` and ``b`` (numbers, duals of any tags); None if none does.

    The higher tag is the outer dual; the lower-tag operand joins its value. Two
    duals of the same tag must have the same lane count.
    """
    la, lb = level(a), level(b)
    if la is None or lb is None:
        return None
    if la < lb:
        a, b, la, lb = b, a, lb, la
    if la == -1:
        return promote(a, b)
    if la > lb:
        value = combine(_value_of(a), b)
    elif a.n != b.n:
        return None
    else:
        value = combine(_value_of(a), _value_of(b))
    return None if value is None else _rebuild(a, value)


@register_model(TaggedDualType)
class TaggedDualModel(models.StructModel):
    def __init__(self, dmm, fe_type):
        members = [("value", fe_type.value_type), ("partials", fe_type.partials_type)]
        super().__init__(dmm, fe_type, members)


make_attribute_wrapper(TaggedDualType, "value", "value")
make_attribute_wrapper(TaggedDualType, "partials", "partials")


def _element(ty):
    if isinstance(ty, types.Array):
        return ty.dtype
    return ty.dual


class TaggedDualArrayType(types.Type):
    """numba type of a DualArray of tag ``tag`` >= 1: values and lane-major partials are float
    arrays (a first-order tagged array) or DualArrays of a lower tag (nested duals)."""

    def __init__(self, values_type, partials_type, n, tag):
        for member in (values_type, partials_type):
            if not isinstance(member, (types.Array, DualArrayType, TaggedDualArrayType)):
                raise DualgpuError(f"DualArray of tag {tag}: unsupported member type {member}.")
        self.values_type = values_type
        self.partials_type = partials_type
        self.n = n
        self.tag = tag
        self.ndim = values_type.ndim
        self.dual = tagged_type(_element(values_type), n, tag)
        self.dtype = self.dual.dtype
        self.mode = type_mode()  # as DualType's
        self._hash = hash((values_type, partials_type, n, tag) + self.mode)
        rules_suffix = "".join(f", {m}" for m in self.mode if m.startswith("rules="))
        super().__init__(name=f"DualArray[tag={tag}]({values_type}, lanes={n}{rules_suffix})")

    @property
    def key(self):
        return (self.values_type, self.partials_type, self.n, self.tag) + self.mode

    def __hash__(self):
        try:
            return self._hash
        except AttributeError:  # unpickled: hash again in this process (see DualArrayType)
            self._hash = hash(self.key)
            return self._hash

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_hash", None)
        return state

    @property
    def tracer(self):
        return False


def tagged_array_type(values_type, partials_type, n, tag):
    """Return the :class:`TaggedDualArrayType` of the given members."""
    return TaggedDualArrayType(values_type, partials_type, n, tag)


@register_model(TaggedDualArrayType)
class TaggedDualArrayModel(models.StructModel):
    def __init__(self, dmm, fe_type):
        members = [("values", fe_type.values_type), ("partials", fe_type.partials_type)]
        super().__init__(dmm, fe_type, members)


make_attribute_wrapper(TaggedDualArrayType, "values", "values")
make_attribute_wrapper(TaggedDualArrayType, "partials", "partials")


# --- lane arithmetic: the pieces lowered rules emit, and intrinsics ----------------

def build_dual(context, builder, dual_ty, value, partials):
    """The dual of type ``dual_ty`` made of ``value`` and the packed ``partials``."""
    d = cgutils.create_struct_proxy(dual_ty)(context, builder)
    d.value = value
    d.partials = partials
    return d._getvalue()


def lane_values(builder, tup, n):
    """The ``n`` lanes of the UniTuple ``tup``, as a list of LLVM values."""
    return [builder.extract_value(tup, k) for k in range(n)]


def pack_lanes(context, builder, tuple_ty, items):
    """The UniTuple of type ``tuple_ty`` holding ``items``."""
    return context.make_tuple(builder, tuple_ty, items)


@intrinsic
def make_dual(typingctx, value, partials):
    """Build a dual from a float value and a UniTuple of partials of the same dtype.

    Partials of dtype uint64 make a structural tracer.
    """
    if not isinstance(partials, types.UniTuple) or value not in _FLOATS or partials.dtype not in (
        value, TRACER_LANE, GLOBAL_TRACER_LANE
    ):
        raise TypingError(f"make_dual(value, partials): got {value}, {partials}")
    ret = dual_type(value, partials.count, tracer=tracer_of_lane(partials.dtype))

    def codegen(context, builder, sig, args):
        return build_dual(context, builder, ret, args[0], args[1])

    return ret(value, partials), codegen


def cast_lane_values(context, builder, tup, from_ty, to_dtype):
    """The lanes of the UniTuple ``tup`` (of type ``from_ty``), each cast to ``to_dtype``."""
    return [context.cast(builder, v, from_ty.dtype, to_dtype)
            for v in lane_values(builder, tup, from_ty.count)]


#: Fast-math flags of the lane arithmetic on the CPU. ``contract`` lets LLVM fuse a lane's
#: ``a * p + b * q`` into FMA instructions (packed ``vfmadd...pd`` once the lanes are
#: vectorised), as NVVM does by default on the GPU. ``reassoc`` and ``nsz`` let it factor
#: the chain rule the way a hand-written tangent does: ``x * x`` gives ``(2 x) * dx`` instead
#: of ``x * dx + x * dx``, and ``r2 * sqrt(r2)`` one multiply per lane by a scalar coefficient
#: (the dual N-body pair loop: 112 packed operations per pair instead of 194 at 32 lanes,
#: 1.21 instead of 1.38 ns per pair and lane on a 2-core AVX2 machine). Partials may then
#: differ from the unfactored sums in the last bits; infinities and NaNs keep their meaning
#: (no ``nnan``/``ninf``), and signed zeros of partials are not told apart (``nsz``; the
#: NaN-safe mode tests ``== 0``, true for both). Values never carry any flag: a dual's value
#: stays bit-identical to the plain computation.
CPU_LANE_FLAGS = ("contract", "reassoc", "nsz")


def lane_flags(context):
    """The fast-math flags of lane arithmetic for ``context``'s target (none on CUDA)."""
    from numba.core.cpu import CPUContext

    return CPU_LANE_FLAGS if isinstance(context, CPUContext) else ()


def plain_product(context, builder, factor, lane, dtype):
    """``factor * lane``."""
    return builder.fmul(factor, lane, flags=lane_flags(context))


def nansafe_product(context, builder, factor, lane, dtype):
    """``factor * lane``, or exactly 0 where ``lane`` is 0 (an inf/nan factor cannot leak)."""
    zero = context.get_constant(dtype, 0.0)
    is_zero = builder.fcmp_ordered("==", lane, zero)
    return builder.select(is_zero, zero, builder.fmul(factor, lane, flags=lane_flags(context)))


@intrinsic
def same_bits(typingctx, a, b):
    """True when the floats ``a`` and ``b`` have the same bits (NaNs and signed zeros count)."""
    if a not in _FLOATS or b != a:
        raise TypingError(f"same_bits(a, b) takes two floats of one dtype; got {a}, {b}")

    def codegen(context, builder, sig, args):
        as_int = ir.IntType(a.bitwidth)
        left, right = (builder.bitcast(v, as_int) for v in args)
        return builder.icmp_unsigned("==", left, right)

    return types.boolean(a, b), codegen


def _float_rounding(name, llvm_name):
    def typer(typingctx, x):
        if x not in _FLOATS:
            raise TypingError(f"{name}(x) takes a float32 or float64; got {x}")

        def codegen(context, builder, sig, args):
            fn = builder.module.declare_intrinsic(llvm_name, [args[0].type])
            return builder.call(fn, args)

        return x(x), codegen

    typer.__name__ = name
    return intrinsic(typer)


#: ``floor``/``trunc`` returning a float of the argument's dtype (numba's ``math.floor``
#: returns an int64, which saturates for |x| >= 2**63). CPU and CUDA alike.
float_floor = _float_rounding("float_floor", "llvm.floor")
float_trunc = _float_rounding("float_trunc", "llvm.trunc")


@register_jitable
def float_rint(x):
    """Round half to even, as ``np.rint``, in the argument's dtype (the quotient of the
    ``%``/``fmod``/``remainder`` rules). Built on floor: NVVM takes neither ``llvm.rint``
    nor ``llvm.round``, and ``llvm.roundeven`` leaves an unresolved call in PTX."""
    r = float_floor(x)
    d = x - r  # exact; NaN for NaN and +-inf, which then come back unchanged
    if d > 0.5 or (d == 0.5 and float_floor(r * 0.5) * 2 != r):
        r += d / d  # 1 in x's dtype (a literal 1 would promote float32 to float64)
    return math.copysign(r, x)  # rint keeps x's sign: -0.5 -> -0.0


@intrinsic
def lanes_cast(typingctx, dtype_of, p):
    """``p`` converted to the dtype of ``dtype_of`` (a float value)."""
    ret = types.UniTuple(dtype_of, p.count)

    def codegen(context, builder, sig, args):
        return pack_lanes(context, builder, ret,
                          cast_lane_values(context, builder, args[1], p, dtype_of))

    return ret(dtype_of, p), codegen


# --- casts ------------------------------------------------------------------------

@lower_cast(types.Float, DualType)
@lower_cast(types.Integer, DualType)
@lower_cast(types.Boolean, DualType)
def _number_to_dual(context, builder, fromty, toty, val):
    value = context.cast(builder, val, fromty, toty.dtype)
    zero = context.get_constant(toty.lane_dtype, 0)
    partials = pack_lanes(context, builder, toty.partials_type, [zero] * toty.n)
    return build_dual(context, builder, toty, value, partials)


@lower_cast(DualType, DualType)
def _dual_to_dual(context, builder, fromty, toty, val):
    if fromty.n != toty.n or fromty.tracer != toty.tracer:
        raise TypingError(f"cannot convert {fromty} to {toty}")
    src = cgutils.create_struct_proxy(fromty)(context, builder, value=val)
    value = context.cast(builder, src.value, fromty.dtype, toty.dtype)
    lanes = cast_lane_values(context, builder, src.partials, fromty.partials_type, toty.lane_dtype)
    return build_dual(context, builder, toty, value,
                      pack_lanes(context, builder, toty.partials_type, lanes))


rules.subscribe(_forget_typed_templates)
