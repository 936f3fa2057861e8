"""Complex duals in compiled code: attributes, ``complex()``, ``cmath`` helpers, comparisons.

What :mod:`dualgpu.compiled.complex_ops` does not generate from the table, each built from
the table's rules or refused:

* ``z.real``, ``z.imag`` and ``z.conjugate()``: the table's ``real``, ``imag`` and ``conj``
  rules (typed and lowered in numba's core registries, so the CPU and CUDA both see them, as
  :mod:`dualgpu.compiled.attributes` explains);
* ``complex(a)``, ``complex(a, b)`` of real duals: the value as plain code builds it, the
  partials ``da + i db``;
* ``cmath.log(x, base)``: ``log(x) / log(base)``; ``cmath.polar(z)``: ``(abs(z), phase(z))``;
  ``cmath.rect(r, phi)``: ``r * cmath.exp(1j * phi)`` (all as the host's
  :mod:`dualgpu.dcmath`); ``complex(z)`` of a complex dual is ``z``;
* ``cmath.isfinite``/``isnan``/``isinf``: of the value;
* ``==`` and ``!=`` compare the values; ``<``, ``<=``, ``>``, ``>=``, ``min`` and ``max``
  are refused (complex numbers have no order), with the fix.
"""
import cmath
import operator

from numba import types
from numba.core.errors import TypingError
from numba.core.extending import infer_getattr, lower_builtin, lower_getattr, overload
from numba.core.typing import signature
from numba.core.typing.templates import AttributeTemplate, bound_function

from dualgpu import complex_rules
from dualgpu.compiled.complex_duals import make_complex_dual
from dualgpu.compiled.complex_ops import complex_kind, complex_rule_impl
from dualgpu.compiled.types import ComplexDualType, DualType, dual_type

__all__ = ["complex_part"]


def complex_part(key):
    """A stub whose overload is the table's ``key`` rule (``"real"``, ``"imag"``, ``"conj"``)
    on a complex dual: what the attribute lowering compiles."""
    def part(a):
        raise NotImplementedError("compiled code only")

    part.__name__ = f"complex_{key}"
    overload(part)(lambda a: complex_rule_impl(key, (a,)) if complex_kind(a) == "c" else None)
    return part


_PARTS = {key: complex_part(key) for key in ("real", "imag", "conj")}


def _real_dual(z):
    return dual_type(z.real_dtype, z.n, mode=z.mode)


@infer_getattr
class _ComplexDualAttributes(AttributeTemplate):
    key = ComplexDualType

    def resolve_real(self, z):
        return _real_dual(z)

    def resolve_imag(self, z):
        return _real_dual(z)

    @bound_function("complexdual.conjugate")
    def resolve_conjugate(self, z, args, kws):
        if not args and not kws:
            return signature(z)


def _compiled_part(key):
    stub = _PARTS[key]

    def implementation(z):
        return stub(z)

    return implementation


for _attr, _key in (("real", "real"), ("imag", "imag")):
    def _lower(context, builder, typ, value, _key=_key):
        sig = signature(_real_dual(typ), typ)
        return context.compile_internal(builder, _compiled_part(_key), sig, (value,))

    lower_getattr(ComplexDualType, _attr)(_lower)


@lower_builtin("complexdual.conjugate", ComplexDualType)
def _lower_conjugate(context, builder, sig, args):
    return context.compile_internal(builder, _compiled_part("conj"), sig, args)


# --- complex(a, b), cmath.polar, cmath.rect, isfinite/isnan/isinf -------------------------

def _dual_or_number(ty):
    return complex_kind(ty) in ("r", "k")


@overload(complex)
def _complex_of_duals(real=None, imag=None):
    args = [a for a in (real, imag) if a is not None and not isinstance(a, types.Omitted)]
    if len(args) == 1 and isinstance(args[0], ComplexDualType):
        return lambda real=None, imag=None: real  # complex(z) of a complex dual: z
    if not any(isinstance(a, DualType) for a in args):
        return None
    if not all(_dual_or_number(a) for a in args):
        raise TypingError(
            f"complex({', '.join(map(str, args))}): the parts of a complex dual must be real "
            "duals or real numbers (a tracer or a tagged dual cannot be complex).")
    if len(args) == 1 or isinstance(imag, (types.NoneType, types.Omitted)) or imag is None:
        return lambda real=None, imag=None: real + 0j

    # the value as complex(a, b) builds it (no arithmetic on a and b), the partials da + i db
    def impl(real=None, imag=None):
        z = real + 1j * imag
        return make_complex_dual(complex(_value(real), _value(imag)), z.partials)

    return impl


def _value(x):
    raise NotImplementedError("compiled code only")


@overload(_value)
def _value_overload(x):
    if isinstance(x, (DualType, ComplexDualType)):
        return lambda x: x.value
    return lambda x: x


@overload(cmath.log)
def _log_to_base(x, base):
    # cmath.log(x, base): the table's log rule twice, as the host's dualgpu.dcmath.log
    if "c" in (complex_kind(x), complex_kind(base)) or "r" in (complex_kind(x),
                                                              complex_kind(base)):
        return lambda x, base: cmath.log(x + 0j) / cmath.log(base + 0j)
    return None


@overload(cmath.polar)
def _polar(z):
    if complex_kind(z) == "c":
        return lambda z: (abs(z), cmath.phase(z))
    return None


@overload(cmath.rect)
def _rect(r, phi):
    kinds = (complex_kind(r), complex_kind(phi))
    if "r" in kinds and set(kinds) <= {"r", "k"}:
        return lambda r, phi: r * cmath.exp(1j * phi)
    return None


def _on_value(fn):
    @overload(fn)
    def _overload(z):
        if complex_kind(z) in ("c", "r"):
            return lambda z: fn(complex(z.value))
        return None


for _fn in (cmath.isfinite, cmath.isnan, cmath.isinf):
    _on_value(_fn)


# --- comparisons ------------------------------------------------------------------------

def _involves_complex_dual(a, b):
    kinds = (complex_kind(a), complex_kind(b))
    return "c" in kinds and None not in kinds


def _equality(fn):
    @overload(fn)
    def _overload(a, b):
        if _involves_complex_dual(a, b) or ({complex_kind(a), complex_kind(b)} == {"r", "kc"}):
            return lambda a, b: fn(_value(a), _value(b))
        return None


for _fn in (operator.eq, operator.ne):
    _equality(_fn)

_ORDERING = {operator.lt: "<", operator.le: "<=", operator.gt: ">", operator.ge: ">="}


def _ordering(fn, symbol):
    @overload(fn)
    def _overload(a, b):
        if _involves_complex_dual(a, b):
            # a TypeError as on the host and cudasim (numba lets it through as it is, not
            # among a page of candidate signatures)
            what = f"{symbol}({a}, {b})" if symbol.isalpha() else f"{a} {symbol} {b}"
            raise TypeError(complex_rules.ordering_message(what))
        return None


for _fn, _symbol in {**_ORDERING, operator.floordiv: "//", operator.mod: "%",
                     operator.ifloordiv: "//=", operator.imod: "%=", min: "min",
                     max: "max"}.items():
    _ordering(_fn, _symbol)
