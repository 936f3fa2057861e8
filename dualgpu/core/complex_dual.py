"""Complex duals: the rule table's complex entries applied to values and partials.

A complex dual has a complex value and complex partials (complex64 or complex128); a real
dual that meets a complex number becomes one. The rules are those of
:mod:`dualgpu.complex_rules`: a holomorphic function scales the tangent by its complex
derivative, ``abs``, ``real``, ``imag``, ``conj`` and ``phase`` take their real-linear
tangents. This module works on numpy values and lane arrays only; :class:`~dualgpu.Dual`
(scalars, :mod:`dualgpu.core.dual`) and the host ufuncs (arrays, :mod:`dualgpu.host.ufuncs`)
build on it, so a scalar and an array apply the same tangents.
"""
import builtins
import cmath
import numbers
import operator
import sys

import numpy as np

from dualgpu import complex_rules, rules
from dualgpu.core import hooks
from dualgpu.core._expressions import expression
from dualgpu.errors import DualgpuError, MissingRuleError

__all__ = [
    "COMPLEX_DTYPES", "complex_of", "real_of", "is_complex_number", "tangent", "Factor",
    "apply", "rule_of", "init_complex", "apply_duals", "complex_class",
]

COMPLEX_DTYPES = (np.dtype(np.complex64), np.dtype(np.complex128))
_COMPLEX_OF = {np.dtype(np.float32): np.dtype(np.complex64),
               np.dtype(np.float64): np.dtype(np.complex128),
               np.dtype(np.complex64): np.dtype(np.complex64),
               np.dtype(np.complex128): np.dtype(np.complex128)}
_REAL_OF = {np.dtype(np.complex64): np.dtype(np.float32),
            np.dtype(np.complex128): np.dtype(np.float64)}


def complex_of(dtype):
    """The complex dtype of a float or complex ``dtype`` (float32 -> complex64)."""
    dtype = np.dtype(dtype)
    found = _COMPLEX_OF.get(dtype)
    if found is None:
        return np.dtype(np.complex128) if dtype.kind in "biu" else np.promote_types(
            dtype, np.complex64)
    return found


def real_of(dtype):
    """The real dtype of a complex ``dtype`` (complex64 -> float32); a float dtype is kept."""
    dtype = np.dtype(dtype)
    return _REAL_OF.get(dtype, dtype)


def is_complex_number(x):
    """True for a Python or numpy complex number (or 0-d complex array)."""
    return isinstance(x, (complex, np.complexfloating)) or (
        isinstance(x, np.ndarray) and x.ndim == 0 and x.dtype.kind == "c")


def tangent(kind, c):
    """What a rule's tangent takes of ``c = factor * dz`` (see
    :data:`~dualgpu.complex_rules.TANGENTS`)."""
    if kind == "holomorphic":
        return c
    if kind == "real":
        return np.real(c)
    if kind == "imag":
        return np.imag(c)
    return np.conjugate(c)


_NAMESPACE = {"sin": np.sin, "cos": np.cos, "sinh": np.sinh, "cosh": np.cosh, "sqrt": np.sqrt,
              "exp": np.exp, "log": np.log, "pow": np.power}


class Factor:
    """A complex rule's factor compiled for numpy scalars, evaluated in a complex dtype.

    ``factor(dtype, x, y, ans)`` returns the factor, or None where a gated factor
    (``A if test else 0``) is inactive (the term contributes nothing).
    """

    def __init__(self, text):
        self.expression = expression(text)
        gate = self.expression.gate
        self.unit = gate.unit if gate else self.expression.unit
        self.code = compile(gate.source if gate else self.expression.source, text, "eval")
        self.test = compile(gate.test, text, "eval") if gate else None
        self._namespaces = {}

    def __call__(self, dtype, x, y, ans):
        ns = self._namespaces.get(dtype)
        if ns is None:
            ns = dict(_NAMESPACE)
            ns.update({k: dtype.type(v) for k, v in self.expression.constants.items()})
            self._namespaces[dtype] = ns
        names = {"x": x, "y": y, "ans": ans}
        with np.errstate(all="ignore"):
            if self.test is not None and bool(eval(self.test, ns, names)) != \
                    self.expression.gate.when:
                return None
            if self.unit is not None:
                return self.unit
            return dtype.type(eval(self.code, ns, names))


def _resolve(dotted):
    module, _, name = dotted.rpartition(".")
    return getattr({"cmath": cmath, "operator": operator, "builtins": builtins,
                    "numpy": np}[module], name)


_RULES = {}


def rule_of(key, what):
    """``(ComplexRule, primal, factors)`` of the complex rule ``key``; an error names the fix."""
    found = _RULES.get(key)
    if found is not None:
        return found
    rule = complex_rules.complex_rule(key)
    if rule is None:
        if key in complex_rules.ORDERING:
            raise TypeError(complex_rules.ordering_message(what))
        raise MissingRuleError(
            f"{what}: {key} has no rule for complex numbers in dualgpu (the complex rules are "
            f"{', '.join(sorted(complex_rules.COMPLEX_RULES))}). Fix: write it with those, or "
            "apply it to the real and imaginary parts (z.real, z.imag) as real duals.")
    found = _RULES[key] = (rule, _resolve(rule.primal), tuple(Factor(t) for t in rule.derivatives))
    return found


def _weak(value):
    return isinstance(value, numbers.Number) and not isinstance(value, np.generic)


def apply(key, values, partials, what, primal=None):
    """Apply the complex rule ``key``; return ``(answer, partials)`` (a numpy scalar and lanes).

    Parameters
    ----------
    key : str
        The rule key (``"exp"``, ``"mul"``, ``"abs"``...).
    values : sequence
        The operands' values: numpy scalars (of a dual's dtype) or Python numbers (weak, as in
        numpy's promotion).
    partials : sequence of ndarray or None
        Each operand's lanes (1-D), None for a constant.
    what : str
        The operation, for error messages.
    primal : callable, optional
        The function the user called (a numpy ufunc); default: the rule's primal.
    """
    rule, default, factors = rule_of(key, what)
    dtypes = [v if _weak(v) else np.asarray(v).dtype for v in values]
    work = complex_of(np.result_type(*dtypes, np.float32))
    cast = [work.type(v) for v in values]
    with np.errstate(all="ignore"):  # the value as the plain code computes it (z ** 2: an
        raw = (default if primal is None else primal)(*values)  # integer power, not complex)
    real_answer = all(t in ("real", "imag") for t in rule.tangents)
    out = real_of(work) if real_answer else work
    ans = out.type(raw.real if real_answer else raw)
    x = cast[0]
    y = cast[1] if len(cast) > 1 else None
    factor_ans = work.type(ans)
    total = None
    lanes = None
    for p, factor, kind in zip(partials, factors, rule.tangents):
        if p is None:
            continue
        lanes = p.shape[0]
        f = factor(work, x, y, factor_ans)
        if f is None or factor.unit == 0:
            continue
        c = p.astype(work, copy=False)
        if factor.unit == -1:
            c = -c
        elif factor.unit != 1:
            c = f * c
        term = tangent(kind, c)
        total = term if total is None else total + term
    if lanes is None:
        raise DualgpuError(f"{what}: no dual operand.")
    if total is None:
        total = np.zeros(lanes, out)
    return ans, np.asarray(total, dtype=out)


# ---------------------------------------------------------------------------
# the scalar complex dual (dualgpu.core.dual builds ComplexDual from complex_class)
# ---------------------------------------------------------------------------
def init_complex(self, value, partials, dtype):
    """Fill a complex dual's value and partials (``Dual.__init__`` for complex input)."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if not isinstance(value, (numbers.Number, np.number)) or isinstance(value, (bool, np.bool_)):
        raise DualgpuError(f"Dual(value, ...): expected a number as value; got "
                           f"{type(value).__name__} {value!r}.")
    raw = np.asarray(partials)
    if raw.dtype.kind not in "biufc":
        raise DualgpuError(f"Dual: expected the partials as numbers; got dtype {raw.dtype}.")
    if dtype is None:
        like = raw.dtype if isinstance(partials, np.ndarray) and raw.dtype.kind in "fc" else (
            value.dtype if isinstance(value, np.inexact) else np.float64)
        dtype = complex_of(like)
    dtype = np.dtype(dtype)
    if dtype not in COMPLEX_DTYPES:
        raise DualgpuError(
            f"Dual(value, partials, dtype={dtype}): the value {value!r} or the partials are "
            "complex; the imaginary parts would be dropped. Fix: pass dtype=np.complex128 (or "
            "complex64) for a complex dual, or the real parts (.real) for a real one.")
    lanes = np.array(raw, dtype=dtype, copy=True).reshape(-1)
    if lanes.size < 1:
        raise DualgpuError("Dual: partials need at least one lane (N >= 1).")
    self.value = dtype.type(value)
    self.partials = lanes
    self.weak = False


_SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%",
            "pow": "**", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def _describe(dual, name, args):
    names = [f"Dual({a.dtype})" if isinstance(a, dual) else type(a).__name__ for a in args]
    if name in _SYMBOLS and len(args) == 2:
        return f"{names[0]} {_SYMBOLS[name]} {names[1]}"
    return f"{name}({', '.join(names)})"


def _operand(dual, a):
    return isinstance(a, (dual, numbers.Number, np.number)) and not isinstance(a, (bool, np.bool_))


def apply_duals(dual, key, args, primal=None):
    """Apply the complex rule ``key`` to ``dual`` instances and numbers; return a ``dual``.

    The answer is complex (a complex dual) or real (a real dual: ``abs``, ``real``, ``imag``,
    ``phase``). Nested and tagged duals (second order) are refused.
    """
    what = _describe(dual, key, args)
    for a in args:
        if isinstance(a, dual) and (a.tag or isinstance(a.value, dual)):
            raise DualgpuError(
                f"{what}: complex duals of a nested derivative (a tag, or duals of duals) are "
                "not supported. Fix: differentiate the real and imaginary parts as real duals.")
    lanes = {a.lanes for a in args if isinstance(a, dual)}
    if len(lanes) > 1:
        raise DualgpuError(f"{what}: the duals have different lane counts {sorted(lanes)}; all "
                           "duals in one computation must be seeded with the same N.")
    values = [a.value if isinstance(a, dual) else a for a in args]
    partials = [a.partials if isinstance(a, dual) else None for a in args]
    ans, out = apply(key, values, partials, what, primal)
    return dual(ans, out, dtype=out.dtype)


def complex_class(dual):
    """The subclass of ``dual`` (:class:`dualgpu.Dual`) for complex values and partials."""

    class ComplexDual(dual):
        """A dual with a complex value and complex partials (complex64 or complex128).

        ``Dual(value, partials)`` makes one when the value or the partials are complex (or
        ``dtype`` is complex); a real Dual that meets a complex number gives one. Its rules
        are :mod:`dualgpu.complex_rules`: holomorphic functions scale the tangent by their
        complex derivative; ``abs``, ``.real``, ``.imag``, ``.conjugate()`` and phase take
        their real-linear tangents. Ordering comparisons raise a TypeError naming the fix.

        Examples
        --------
        >>> import numpy as np
        >>> from dualgpu import Dual
        >>> u = Dual(0.5, [1.0])                 # d/du
        >>> z = np.exp(1j * u)                   # exp(i u): a complex dual
        >>> bool(np.isclose(z.partials[0], 1j * np.exp(0.5j)))
        True
        >>> bool(abs(abs(z).partials[0]) < 1e-15)  # |exp(i u)| = 1 does not move
        True
        """

        __slots__ = ()

        def __complex__(self):
            # as float(dual): the message names the line (a store into a plain array, a
            # cmath call outside a kernel...) and the fix that keeps the partials
            if hooks.values_followed():  # a store into a kept host buffer (as __float__)
                return complex(self.value)
            message = hooks.float_message(sys._getframe(1))
            for real, imaginary in (("float(Dual)", "complex(Dual)"), ("float()", "complex()"),
                                    ("float array", "complex array"),
                                    ("a Python float", "a Python complex")):
                message = message.replace(real, imaginary)
            raise TypeError(message)

        def __bool__(self):
            return bool(self.value)

        def __int__(self):
            raise TypeError("int() of a complex dual: a complex number has no int. Fix: "
                            "int(d.real.value) (an integer has no derivative).")

        def _primal(self):
            return self.value

        @property
        def real(self):
            """The real part, a real dual (partials: the real parts of the tangents)."""
            return apply_duals(dual, "real", (self,))

        @property
        def imag(self):
            """The imaginary part, a real dual."""
            return apply_duals(dual, "imag", (self,))

        def conjugate(self):
            """The complex conjugate (conjugate partials)."""
            return apply_duals(dual, "conj", (self,))

        def astype(self, dtype):
            """This dual cast to a complex ``dtype`` (complex64/complex128)."""
            dtype = np.dtype(dtype)
            if dtype.kind != "c":
                raise TypeError(
                    f"astype({dtype}) of a complex dual would drop the imaginary part. Fix: "
                    "take d.real (or d.imag, abs(d)) first.")
            return dual(self.value, self.partials, dtype=dtype)

        def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
            # np.exp(z), np.abs(z), np.conj(z) of complex scalar duals; the rest: host arrays
            scalars = [a[()] if isinstance(a, np.ndarray) and a.ndim == 0 else a for a in inputs]
            key = complex_rules.COMPLEX_NUMPY.get(ufunc.__name__)
            if method == "__call__" and not kwargs and key is not None and all(
                    _operand(dual, a) for a in scalars):
                return apply_duals(dual, key, scalars, ufunc)
            if ufunc.__name__ in complex_rules.ORDERING:
                raise TypeError(complex_rules.ordering_message(f"numpy.{ufunc.__name__}"))
            return hooks.array_ufunc(ufunc, method, inputs, kwargs)

    def binary(name, reflected=False):
        def method(self, other):
            if not _operand(dual, other):
                return NotImplemented
            args = (other, self) if reflected else (self, other)
            return apply_duals(dual, name, args)

        method.__name__ = f"__{'r' if reflected else ''}{name}__"
        return method

    def unary(name):
        def method(self):
            return apply_duals(dual, name, (self,))

        method.__name__ = f"__{name}__"
        return method

    def comparison(name):
        op = getattr(operator, name)

        def method(self, other):
            if not _operand(dual, other):
                return NotImplemented
            if name in ("eq", "ne"):
                return op(self.value, other.value if isinstance(other, dual) else other)
            raise TypeError(complex_rules.ordering_message(_describe(dual, name, (self, other))))

        method.__name__ = f"__{name}__"
        return method

    for name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow"):
        setattr(ComplexDual, f"__{name}__", binary(name))
        setattr(ComplexDual, f"__r{name}__", binary(name, reflected=True))
    for name in ("neg", "pos", "abs"):
        setattr(ComplexDual, f"__{name}__", unary(name))
    for name in rules.COMPARISONS:
        setattr(ComplexDual, f"__{name}__", comparison(name))
    ComplexDual.__module__ = dual.__module__
    ComplexDual.__qualname__ = "ComplexDual"
    return ComplexDual
