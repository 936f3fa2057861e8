"""The pure-Python dual number, generated from :mod:`dualgpu.rules`.

This class is what ``dualgpu.Dual`` is on the host and inside kernels run by
the CUDA simulator. Compiled code (``@njit``, ``@cuda.jit``) sees the same
class as a numba extension type whose lanes live in registers
(:mod:`dualgpu.compiled.types`). There is deliberately no working ``__float__``:
``float(d)`` or ``math.sin(d)`` would silently drop the partials.
"""
import builtins
import dis
import math
import numbers
import operator
import sys

import numpy as np

from dualgpu import nansafe, rules
from dualgpu.core import _primals, complex_dual, hooks
from dualgpu.core import dual_fast as _fast
from dualgpu.core._expressions import expression
from dualgpu.core.special import digamma_numpy, digamma_scalar
from dualgpu.core.traced_branch import refuse_traced_python
from dualgpu.errors import COMPLEX_DUAL, DualgpuError

__all__ = [
    "Dual", "DualArrayBase", "check_dtype", "apply_rule", "DTYPES", "MAX_TAG", "check_tag",
    "primal_value", "is_nested_input", "lift", "init_nested", "apply_tagged", "ComplexDual",
    "apply_complex", "DECISIONS",
]

DTYPES = (np.dtype(np.float32), np.dtype(np.float64))

#: ``DECISIONS[0]``: Python decisions taken from a dual's value so far in this process (a
#: branch, a comparison, ``int()``, ``round()``, ``math.floor()``, a value-only ufunc): a
#: traced run (:mod:`dualgpu.porting.trace`) that took one replays only for the same
#: argument values, as ``jax.jit`` would need ``static_argnums`` for them.
DECISIONS = [0]

#: numpy stand-ins for math functions, so that float32 inputs stay float32.
_NUMPY_NAMES = {
    "asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh",
    "acosh": "arccosh", "atanh": "arctanh", "atan2": "arctan2", "pow": "power",
}


def _same(a, b):
    """True when two numpy floats have the same bits (NaNs and signed zeros count)."""
    return a.dtype == b.dtype and a.tobytes() == b.tobytes()


#: dualgpu's own functions of the rule expressions (numpy has none of them)
_OWN_FUNCTIONS = {"same": _same, "digamma": digamma_numpy}
_EXPRESSION_NAMESPACE = {
    name: _OWN_FUNCTIONS.get(name) or getattr(np, _NUMPY_NAMES.get(name, name))
    for name in rules.EXPRESSION_FUNCTIONS
}


def check_dtype(dtype, what):
    """Return ``dtype`` as a numpy dtype, or raise unless it is float32/float64."""
    dtype = np.dtype(dtype)
    if dtype not in DTYPES:
        raise DualgpuError(
            f"{what}: expected dtype float32 or float64; got {dtype}. Cast with "
            ".astype(np.float64) (or np.float32) first."
        )
    return dtype


def _resolve(dotted):
    module, _, name = dotted.rpartition(".")
    return getattr({"math": math, "operator": operator, "builtins": builtins}[module], name)


class _CompiledFactor:
    """A rule expression compiled for Python, evaluated per dtype.

    A gated factor (``A if test else 0``) is evaluated in two steps, as in
    compiled code: :meth:`active` says whether the term contributes at all.
    """

    def __init__(self, text):
        self.expression = expression(text)
        gate = self.expression.gate
        self.code = compile(gate.source if gate else self.expression.source, f"<rule {text}>",
                            "eval")
        self.unit = gate.unit if gate else self.expression.unit
        self.test = compile(gate.test, f"<rule {text} test>", "eval") if gate else None
        self._namespaces = {}

    def _namespace(self, dtype):
        ns = self._namespaces.get(dtype)
        if ns is None:
            ns = dict(_EXPRESSION_NAMESPACE)
            ns.update({k: dtype.type(v) for k, v in self.expression.constants.items()})
            self._namespaces[dtype] = ns
        return ns

    def active(self, dtype, x, y, ans):
        """False where a gated factor's term contributes nothing (always True ungated)."""
        if self.test is None:
            return True
        test = eval(self.test, self._namespace(dtype), {"x": x, "y": y, "ans": ans})
        return bool(test) == self.expression.gate.when

    def __call__(self, dtype, x, y, ans):
        return dtype.type(eval(self.code, self._namespace(dtype), {"x": x, "y": y, "ans": ans}))


def _real_value(value):
    """``value`` as a real number, or a DualgpuError saying what came instead."""
    if isinstance(value, Dual):
        raise DualgpuError("Dual(value, ...): value must be a number, not a Dual.")
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (numbers.Real, np.floating, np.integer, np.bool_)):
        return value
    if isinstance(value, (numbers.Complex, np.complexfloating)):
        raise _ComplexInput  # a complex dual: Dual.__init__ makes a ComplexDual
    raise DualgpuError(
        f"Dual(value, ...): expected a real number (int, float or numpy float) as value; got "
        f"{type(value).__name__} {value!r}. Fix: convert it first, e.g. Dual(float(text), ...)."
    )


def _real_lanes(partials, dtype):
    """``partials`` as a new 1-D array of ``dtype`` with at least one lane, or a DualgpuError."""
    raw = np.asarray(partials)
    if raw.dtype.kind == "c":
        raise _ComplexInput  # complex tangents: a complex dual
    if raw.dtype.kind not in "biuf":
        raise DualgpuError(
            f"Dual: expected the partials as real numbers (a sequence or 1-D array of floats); "
            f"got {type(partials).__name__} of dtype {raw.dtype}. Fix: e.g. Dual(x, [1.0, 0.0])."
        )
    lanes = np.array(raw, dtype=dtype, copy=True).reshape(-1)
    if lanes.size < 1:
        raise DualgpuError("Dual: partials need at least one lane (N >= 1).")
    return lanes


def _lanes(item):
    return len(item.partials)


class _ComplexInput(Exception):
    """Raised inside ``Dual.__init__`` for a complex value or complex partials."""


def _init_complex(self, value, partials, dtype):
    complex_dual.init_complex(self, value, partials, dtype)
    self.__class__ = ComplexDual


class Dual:
    """A dual number: a value and N tangent lanes (partials) of one float dtype.

    Parameters
    ----------
    value : float
    partials : sequence of float or 1-D ndarray
        The N tangent lanes (N >= 1).
    dtype : float32 or float64, optional
        Defaults to the partials' dtype when they are an ndarray, else to the
        value's dtype when it is a numpy float, else float64.
    weak : bool, optional
        A *weak* dual stands for a Python float (the driver seeds Python float
        arguments so): on the host, numpy's promotion treats it as a Python
        scalar (NEP 50), so a float32 operand keeps the result float32, as in
        the plain run. Compiled kernels type it as numba types a float
        argument (float64). Default False: a dual of its dtype.
    tag : int, optional
        The perturbation this dual belongs to (0, the default, for first-order
        work). A dual whose ``value`` is itself a Dual (a *nested* dual, second
        order) has a higher tag than its value; duals of different tags never
        mix their lanes: see :func:`dualgpu.hessian`.

    Examples
    --------
    >>> import math
    >>> from dualgpu import Dual, dmath
    >>> d = dmath.sin(Dual(0.0, [1.0, 2.0]))
    >>> float(d.value), d.partials.tolist()
    (0.0, [1.0, 2.0])
    """

    __slots__ = ("value", "partials", "tag", "weak")
    __array_priority__ = 1000  # numpy scalars defer to our reflected operators

    def __init__(self, value, partials, dtype=None, *, tag=0, weak=False):
        self.tag = check_tag(tag) if tag else 0
        self.weak = bool(weak)
        if isinstance(value, Dual) or (
            (not isinstance(partials, np.ndarray) or partials.dtype.kind == "O")
            and is_nested_input(value, partials)
        ):
            init_nested(self, value, partials, dtype)
            return
        given = dtype
        if dtype is None:
            if isinstance(partials, np.ndarray) and partials.dtype.kind == "f":
                dtype = partials.dtype
            elif isinstance(value, np.floating):
                dtype = value.dtype
            else:
                dtype = np.float64
        dtype = np.dtype(dtype)
        if dtype not in DTYPES:
            if dtype in complex_dual.COMPLEX_DTYPES:
                _init_complex(self, value, partials, dtype)
                return
            check_dtype(dtype, "Dual")  # raises, naming the dtypes
        try:
            value = _real_value(value)
            partials = _real_lanes(partials, dtype)
        except _ComplexInput:
            _init_complex(self, value, partials, given)
            return
        self.value = dtype.type(value)
        self.partials = partials

    @property
    def lanes(self):
        """N, the number of tangent lanes."""
        return self.partials.size

    @property
    def _partials_tuple(self):
        # read by the compiled code's unboxing
        return tuple(self.partials.tolist())

    @classmethod
    def _from_float32(cls, value, partials):
        # called by the compiled code's boxing
        return cls(value, partials, dtype=np.float32)

    @classmethod
    def _from_float64(cls, value, partials):
        # called by the compiled code's boxing
        return cls(value, partials, dtype=np.float64)

    @property
    def dtype(self):
        return self.value.dtype if isinstance(self.value, Dual) else self.partials.dtype

    def __repr__(self):
        tag = f", tag={self.tag}" if self.tag else ""
        if isinstance(self.value, Dual):
            return f"Dual({self.value!r}, {list(self.partials)!r}{tag})"
        return f"Dual({self.value!r}, {self.partials.tolist()!r}, dtype={self.dtype}{tag})"

    # -- conversions ------------------------------------------------------------
    def tolist(self):
        """Return the Dual itself, as a copy (numpy's ``scalar.tolist()`` gives the Python
        scalar; ``DualArray.tolist()`` gives Duals, and this Dual for a 0-d array).

        Examples
        --------
        >>> import dualgpu
        >>> d = dualgpu.Dual(2.0, [1.0, 0.5])
        >>> e = d.tolist()
        >>> (float(e.value), e.partials.tolist(), e is d)
        (2.0, [1.0, 0.5], False)
        """
        partials = self.partials.copy() if isinstance(self.partials, np.ndarray) \
            else self.partials
        return type(self)(self.value, partials, tag=self.tag) if self.tag \
            else type(self)(self.value, partials)

    def item(self, *index):
        """Return the Dual itself, as a copy: numpy's ``scalar.item()`` gives the Python scalar
        (``u.max().item()`` read back for a time step or a CFL number), and a Dual is the
        scalar here, so the derivative keeps flowing through what host code computes from it.

        Examples
        --------
        >>> import dualgpu
        >>> d = dualgpu.Dual(2.0, [1.0])
        >>> (0.1 / d.item()).partials.tolist()
        [-0.025]
        """
        if index not in ((), (0,), (-1,), ((),)):
            raise IndexError(f"Dual.item{index}: a dual is one number; call item() (or item(0)).")
        return self.tolist()

    def __float__(self):
        # the message names the host line that needs a float and its fix: a store into a
        # plain numpy buffer (state[0] = p, dualgpu.host.buffers), math.*, float(), np.float32
        # (dualgpu.core._host_lines); dualgpu.host installs it into hooks.float_message
        if hooks.values_followed():  # a store into a kept host buffer, its partials kept
            return self._primal()
        raise TypeError(hooks.float_message(sys._getframe(1)))

    def __complex__(self):
        # (a store into a complex array on cudasim comes here: never suggest d.value, which
        # would drop the derivative silently)
        raise TypeError(
            f"{COMPLEX_DUAL} (complex(Dual): a real dual converted with complex(), or stored "
            "into a plain complex array) would drop the partials: Python's complex() must "
            "return a plain complex. Fix: build the complex dual with arithmetic, "
            "a + 1j * b (or a + 0j), which keeps them; store it into a complex DualArray "
            "(cuda.device_array_like of a dual array, dualgpu.dual_array) instead of a plain "
            "one.")

    def _primal(self):
        # the innermost value (a float), also of a nested dual
        value = self.value
        while isinstance(value, Dual):
            value = value.value
        return float(value)

    def _decided(self):
        # the value, for a conversion that can choose an index or a branch: a global
        # sparsity tracer refuses it (dualgpu.core.traced_branch)
        refuse_traced_python(self.partials)
        DECISIONS[0] += 1
        return self._primal()

    def __int__(self):
        return int(self._decided())

    def __bool__(self):
        return bool(self._decided())

    def __round__(self, ndigits=None):
        return round(self._decided(), ndigits) if ndigits is not None else round(self._decided())

    def __floor__(self):
        return math.floor(self._decided())

    def __ceil__(self):
        return math.ceil(self._decided())

    def __trunc__(self):
        return math.trunc(self._decided())

    def __hash__(self):
        # unhashable, as numpy arrays and JAX's tracers are (== compares values); the message
        # says where a user meets it: a cache keyed by a differentiated parameter
        raise TypeError(
            "unhashable type: 'Dual': a differentiated value cannot key a dict, a set or "
            "functools.lru_cache (equal values may carry different partials, and a kernel "
            "cached for one Dual would reuse its partials for another). A kernel factory "
            "cached by its parameter meets this under the driver. Fix: pass the parameter to "
            "the kernel as an argument (one kernel for every value), or key the cache on "
            "plain numbers only.")

    def astype(self, dtype):
        """Return this dual cast to ``dtype`` (float32/float64 keep the partials).

        ``np.float32(d)`` cannot keep them (numpy calls ``float(d)``); use
        ``d.astype(np.float32)`` or ``dualgpu.float32(d)``. An integer or bool dtype
        gives the value alone, as ``int(d)`` does.
        """
        dtype = np.dtype(dtype)
        if dtype.kind != "f":
            refuse_traced_python(self.partials)
            DECISIONS[0] += 1
            return dtype.type(self.value)
        return Dual(self.value, self.partials, dtype=dtype)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        # np.sin(d), np.float64(2) * d, 0-d array < d: numpy ufuncs on scalars follow the
        # rule table (comparisons compare values). Arrays, DualArrays, ufunc methods and
        # ufuncs without a math rule go to the host array machinery (dualgpu.host.protocol,
        # installed into hooks.array_ufunc).
        scalars = [a[()] if isinstance(a, np.ndarray) and a.ndim == 0 else a for a in inputs]
        rule_name = rules.NUMPY_UFUNCS.get(ufunc.__name__)
        if method != "__call__" or kwargs or not all(_is_operand(a) for a in scalars) or (
                rule_name is None and ufunc.__name__ not in _UFUNC_COMPARISONS):
            return hooks.array_ufunc(ufunc, method, inputs, kwargs)
        if ufunc.__name__ in _UFUNC_COMPARISONS:
            DECISIONS[0] += 1
            values = [a.value if isinstance(a, Dual) else a for a in scalars]
            return ufunc(*values)
        if _called_by_operator():
            # np.float32(2) - d: numpy's scalar runs the ufunc for the operator; the plain
            # code is the operator (numba types int32 - float32 as float64, np.subtract as
            # float32), so the rule's own primal applies
            return apply_rule(rule_name, *scalars)
        return apply_rule(rule_name, *scalars, primal=ufunc)  # the value is numpy's own

    def __array_function__(self, func, types, args, kwargs):
        # np.sum(d), np.stack([d0, d1]), np.clip(d, 0, 1): see dualgpu.host.protocol
        return hooks.array_function(func, types, args, kwargs)


_UFUNC_COMPARISONS = {"less", "less_equal", "greater", "greater_equal", "equal", "not_equal"}
_OPERATOR_OPCODES = {op for op in dis.opmap if op.startswith(("BINARY_", "INPLACE_"))} - {
    "BINARY_SUBSCR", "BINARY_SLICE"}


def _called_by_operator():
    """True when ``__array_ufunc__`` runs for a binary operator (``x - d``), not a call.

    A numpy scalar on the left of an operator hands it to the ufunc; the Python frame that
    started it is then executing a binary-operator instruction rather than a call.
    """
    frame = sys._getframe(2)  # 0: this function, 1: __array_ufunc__, 2: the caller
    code = frame.f_code.co_code
    lasti = frame.f_lasti
    return 0 <= lasti < len(code) and dis.opname[code[lasti]] in _OPERATOR_OPCODES


def apply_rule(name, *args, primal=None):
    """Apply the rule ``name`` of :mod:`dualgpu.rules` to Dual/number arguments.

    ``primal`` is the function the user called (``math.pow`` for the ``pow``
    rule, ``np.minimum`` for ``min``...); default: the rule's own. Its value is
    computed as numba's compiled code computes it, in the dtype numba's typing
    gives (as the compiled kernel computes it). Tagged and nested duals (second order)
    apply the same table to their dual values (:func:`apply_tagged`).
    """
    for a in args:
        if isinstance(a, Dual) and a.tag:
            return apply_tagged(name, *args)  # tagged or nested duals: one table, applied twice
    rule = rules.lookup(name)  # a rule added with dualgpu.rules.define first
    default_primal, factors = _RUNTIME[name]
    primal = default_primal if primal is None else primal
    duals = [a for a in args if isinstance(a, Dual)]
    lanes = {d.lanes for d in duals}
    if len(lanes) > 1:
        raise DualgpuError(
            f"{rule.primal}: the duals have different lane counts {sorted(lanes)}; "
            "all duals in one computation must be seeded with the same N."
        )
    values = [a.value if isinstance(a, Dual) else a for a in args]
    with np.errstate(all="ignore"):
        dtype = check_dtype(_primals.result_dtype(primal, args), rule.primal)
        ans = _primals.primal(primal)(dtype, *values)
        cast = [dtype.type(v) for v in values]
        x = cast[0]
        y = cast[1] if len(cast) > 1 else None
        partials = None
        for arg, factor in zip(args, factors):
            if not isinstance(arg, Dual) or not factor.active(dtype, x, y, ans):
                continue
            unit = factor.unit
            lanes_in = arg.partials.astype(dtype, copy=False)
            if unit == 0:
                term = None
            elif unit == 1:
                term = lanes_in
            elif unit == -1:
                term = -lanes_in
            elif nansafe.NANSAFE_MODE_ENABLED:  # a zero partial stays zero, whatever the factor
                term = np.where(lanes_in == 0, dtype.type(0), factor(dtype, x, y, ans) * lanes_in)
            else:
                term = factor(dtype, x, y, ans) * lanes_in
            if term is not None:
                partials = term if partials is None else partials + term
        if partials is None:
            partials = np.zeros(duals[0].lanes, dtype)
    return Dual(ans, partials, dtype=dtype, weak=_stays_weak(args))


def _stays_weak(args):
    """A result of weak duals and Python numbers only is weak too (as Python floats are)."""
    return all(a.weak if isinstance(a, Dual) else _is_python_number(a) for a in args) and any(
        isinstance(a, Dual) for a in args)


def _is_python_number(a):
    return isinstance(a, (int, float)) and not isinstance(a, (np.generic, bool))


_RUNTIME = {}
for _name, _rule in {**rules.UNARY_RULES, **rules.BINARY_RULES}.items():
    _RUNTIME[_name] = (
        _resolve(_rule.primal),
        tuple(_CompiledFactor(t) for t in _rule.derivatives),
    )


def _on_rule_defined(new, old):
    """Keep ``_RUNTIME`` in step with :func:`dualgpu.rules.define` (a rules.subscribe listener)."""
    if old is not None:
        builtin = rules.UNARY_RULES.get(old.key) or rules.BINARY_RULES.get(old.key)
        _RUNTIME.pop(old.key, None)
        if builtin is not None:
            _RUNTIME[old.key] = (_resolve(builtin.primal),
                                 tuple(_CompiledFactor(t) for t in builtin.derivatives))
    if new is not None:  # a @njit or device function runs here as its Python function
        _RUNTIME[new.key] = (getattr(new.function, "py_func", new.function),
                             tuple(_CompiledFactor(t) for t in new.rule.derivatives))
        _FAST.discard(new.key)  # (a replaced + - * /: its own rule, on the general path)
    elif old is not None and old.key in ("add", "sub", "mul", "truediv"):
        _FAST.add(old.key)


def _call_defined(definition, args):
    """A defined rule's wrapper called with Duals (a rules.add_call_handler handler)."""
    if any(isinstance(a, Dual) for a in args) and all(_is_operand(a) for a in args):
        return apply_rule(definition.key, *args)
    return NotImplemented


rules.subscribe(_on_rule_defined)
rules.add_call_handler(_call_defined)


def _is_operand(other):
    return isinstance(other, (Dual, int, float, np.integer, np.floating))


_SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%",
            "pow": "**"}


#: rules whose Python duals take :func:`dualgpu.core.dual_fast.binary` (while
#: dualgpu.rules.define has not replaced them: :func:`_on_rule_defined` removes a replaced one)
_FAST = {"add", "sub", "mul", "truediv"}


def _binary_method(name, reflected=False):
    def method(self, other):
        if name in _FAST and not nansafe.NANSAFE_MODE_ENABLED:
            found = _fast.binary(Dual, name, other, self) if reflected else _fast.binary(
                Dual, name, self, other)
            if found is not None:
                return found
        if not _is_operand(other):
            if isinstance(other, (complex, np.complexfloating)):  # a complex dual results
                return apply_complex(name, other, self) if reflected else apply_complex(
                    name, self, other)
            return NotImplemented
        return apply_rule(name, other, self) if reflected else apply_rule(name, self, other)

    method.__name__ = f"__{'r' if reflected else ''}{name}__"
    return method


def _unary_method(name):
    def method(self):
        return apply_rule(name, self)

    method.__name__ = f"__{name}__"
    return method


def _comparison_method(op):
    def method(self, other):
        DECISIONS[0] += 1
        if isinstance(other, Dual):
            return op(self.value, other.value)
        if not _is_operand(other):
            return NotImplemented
        return op(self.value, other)

    return method


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow"):
    setattr(Dual, f"__{_name}__", _binary_method(_name))
    setattr(Dual, f"__r{_name}__", _binary_method(_name, reflected=True))
for _name in ("neg", "pos", "abs"):
    setattr(Dual, f"__{_name}__", _unary_method(_name))
for _name, _dotted in rules.COMPARISONS.items():
    setattr(Dual, f"__{_name}__", _comparison_method(_resolve(_dotted)))


def _real_part(self):
    """The real part: the dual itself (a real dual is its own real part, as a float is)."""
    return self


def _imag_part(self):
    """The imaginary part of a real dual: zero, with zero partials."""
    return Dual(self.dtype.type(0), np.zeros(self.lanes, self.dtype), tag=self.tag)


Dual.real = property(_real_part)
Dual.imag = property(_imag_part)
Dual.conjugate = _real_part


# ---------------------------------------------------------------------------
# complex duals: the rules of dualgpu.complex_rules (dualgpu.core.complex_dual)
# ---------------------------------------------------------------------------
#: A dual of complex value and partials: what ``Dual(1j, [1.0])`` makes.
ComplexDual = complex_dual.complex_class(Dual)


def apply_complex(name, *args, primal=None):
    """Apply the complex rule ``name`` to Duals and numbers of which one is complex."""
    return complex_dual.apply_duals(Dual, name, args, primal)


# ---------------------------------------------------------------------------
# tags and nested duals (second order): the scalar half; arrays: dualgpu.core.nested
# ---------------------------------------------------------------------------
#: Largest tag (nesting depth) a dual may carry.
MAX_TAG = 7


class DualArrayBase:
    """The base class of :class:`~dualgpu.DualArray`, defined here so that a :class:`Dual`
    recognises an array of duals (the lanes of a nested dual) without importing the array
    module, which builds on this one (as ``jax.Array`` is the base of JAX's arrays)."""

    __slots__ = ()


def check_tag(tag):
    """Return ``tag`` as an int, or raise unless it is an int from 0 to MAX_TAG."""
    if isinstance(tag, bool) or not isinstance(tag, (int, np.integer)) or not 0 <= tag <= MAX_TAG:
        raise DualgpuError(
            f"Dual tag must be an int from 0 to {MAX_TAG} (the derivative's nesting depth); "
            f"got {tag!r}."
        )
    return int(tag)


def primal_value(x):
    """The innermost value of ``x`` (a float), through any nesting of duals."""
    while isinstance(x, Dual):
        x = x.value
    return x


def is_nested_input(value, partials):
    """True when ``Dual(value, partials)`` is a dual of duals."""
    if isinstance(partials, np.ndarray) and partials.dtype.kind in "fiub":
        return isinstance(value, Dual)
    if isinstance(value, Dual) or isinstance(partials, DualArrayBase):
        return True
    try:
        return any(isinstance(p, Dual) for p in partials)
    except TypeError:
        return False


def _signature(x):
    if isinstance(x, Dual):
        return (x.tag, x.lanes, _signature(x.value))
    return None


def lift(x, like):
    """Return ``x`` with the structure of ``like`` (a dual or a float); lower parts: constants.

    A number or a dual of a lower tag than ``like`` becomes a dual of ``like``'s
    tag with zero partials (recursively); a dual of ``like``'s tag keeps its
    partials. A dual of a higher tag cannot be lowered: that would drop its
    partials.
    """
    if not isinstance(like, Dual):
        if isinstance(x, Dual):
            raise DualgpuError(
                f"a dual of tag {x.tag} cannot be used where a plain number is expected: its "
                "partials would be dropped."
            )
        return np.dtype(like.dtype if hasattr(like, "dtype") else np.float64).type(x)
    if isinstance(x, Dual) and x.tag == like.tag:
        if x.lanes != like.lanes:
            raise DualgpuError(
                f"duals of tag {x.tag} with {x.lanes} and {like.lanes} lanes cannot be combined; "
                "seed every dual of one derivative with the same lane count."
            )
        if _signature(x) == _signature(like):
            return x
        return Dual(lift(x.value, like.value), [lift(p, like.value) for p in x.partials],
                    tag=like.tag)
    if isinstance(x, Dual) and x.tag > like.tag:
        raise DualgpuError(
            f"a dual of tag {x.tag} cannot become part of a dual of tag {like.tag}: its partials "
            "would be dropped (a higher tag is an outer derivative)."
        )
    zero = lift(0.0, like.value)
    return Dual(lift(x, like.value), [zero] * like.lanes, tag=like.tag)


def init_nested(self, value, partials, dtype):
    """``Dual.__init__`` for a nested dual: ``value`` a dual of a lower tag, partials like it."""
    if isinstance(partials, DualArrayBase):
        if partials.ndim != 1:
            raise DualgpuError(
                f"Dual(value, partials): a DualArray of partials must be 1-D (one element per "
                f"lane); got shape {partials.shape}."
            )
        partials = [partials[k] for k in range(partials.shape[0])]
    items = list(partials)
    if not items:
        raise DualgpuError("Dual: partials need at least one lane (N >= 1).")
    if not isinstance(value, Dual):
        # partials are duals but the value is a number: the value is a constant of their tag
        template = next(p for p in items if isinstance(p, Dual))
        value = lift(value, template)
    if value.tag >= self.tag:
        raise DualgpuError(
            f"Dual(value, partials, tag={self.tag}): the value is a dual of tag {value.tag}; a "
            "nested dual's tag must be higher than its value's (give the outer derivative the "
            f"higher tag, e.g. tag={value.tag + 1})."
        )
    if dtype is not None and np.dtype(dtype) != value.dtype:
        raise DualgpuError(
            f"Dual(..., dtype={np.dtype(dtype)}): a nested dual takes its dtype from its value "
            f"({value.dtype}); cast the value first."
        )
    lanes = np.empty(len(items), dtype=object)
    for k, p in enumerate(items):
        lanes[k] = lift(p, value)
    self.value = value
    self.partials = lanes


def _resolve_dtype(args):
    # numpy's promotion of the innermost values: Python numbers are weak (float32 stays float32)
    dtype = np.result_type(*(a.dtype.type(0) if isinstance(a, Dual) else a for a in args))
    if dtype.kind != "f":
        dtype = np.dtype(np.float64)
    return check_dtype(np.promote_types(dtype, np.float32), "nested dual")


def _dual_namespace():
    """The rule expressions' functions, made dual-aware: ``cos(x)`` of a dual is the cos rule."""
    namespace = {}
    for name in rules.EXPRESSION_FUNCTIONS:
        plain = _EXPRESSION_NAMESPACE[name]
        if name in rules.VALUE_ONLY or name in ("same", "rint"):  # floor, trunc, rint, same
            namespace[name] = (lambda plain: lambda *v: plain(*map(primal_value, v)))(plain)
        elif name == "digamma":  # no rule of its own: its algorithm, run on the duals
            namespace[name] = (lambda plain: lambda v: digamma_scalar(v) if isinstance(v, Dual)
                               else plain(v))(plain)
        else:
            def call(*a, _name=name, _plain=plain):
                if any(isinstance(v, Dual) for v in a):
                    return apply_rule(_name, *a)
                return _plain(*a)

            namespace[name] = call
    return namespace


_DUAL_NAMESPACE = _dual_namespace()
_DUAL_CONSTANTS = {}


def _factor(factor, dtype, x, y, ans):
    """A rule's derivative factor evaluated on dual values (the rule applied to them)."""
    key = (id(factor), dtype)
    ns = _DUAL_CONSTANTS.get(key)
    if ns is None:
        ns = dict(_DUAL_NAMESPACE)
        ns.update({k: dtype.type(v) for k, v in factor.expression.constants.items()})
        _DUAL_CONSTANTS[key] = ns
    return eval(factor.code, ns, {"x": x, "y": y, "ans": ans})


def apply_tagged(name, *args):
    """Apply the rule ``name`` to arguments among which is a dual of a tag above 0.

    The duals of the highest tag are differentiated; everything else is a
    constant of that tag (see :func:`dualgpu.hessian`).
    """
    rule = rules.lookup(name)  # a rule added with dualgpu.rules.define first
    factors = _RUNTIME[name][1]
    top = max(a.tag for a in args if isinstance(a, Dual))
    outer = [isinstance(a, Dual) and a.tag == top for a in args]
    lanes = {a.lanes for a, o in zip(args, outer) if o}
    if len(lanes) > 1:
        raise DualgpuError(
            f"{rule.primal}: duals of tag {top} with different lane counts {sorted(lanes)}; "
            "all duals of one derivative must be seeded with the same N."
        )
    n = lanes.pop()
    values = [a.value if o else a for a, o in zip(args, outer)]
    if not any(isinstance(v, Dual) for v in values):
        # first order at this tag: the ordinary rule, then the tag
        plain = [Dual(a.value, a.partials) if o else a for a, o in zip(args, outer)]
        result = apply_rule(name, *plain)
        result.tag = top
        return result
    dtype = _resolve_dtype(args)
    values = [v if isinstance(v, Dual) else dtype.type(v) for v in values]
    with np.errstate(all="ignore"):
        ans = apply_rule(name, *values)  # the value: the rule on the inner duals
        x = values[0]
        y = values[1] if len(values) > 1 else None
        total = None
        for arg, is_outer, factor in zip(args, outer, factors):
            if not is_outer:
                continue
            unit = factor.expression.unit
            if unit == 0:
                continue
            if unit == 1:
                term = list(arg.partials)
            elif unit == -1:
                term = [-p for p in arg.partials]
            else:
                f = _factor(factor, dtype, x, y, ans)  # the factor: the rule on the inner duals
                term = [f * p for p in arg.partials]
            total = term if total is None else [s + t for s, t in zip(total, term)]
    if total is None:
        total = [0.0] * n
    return Dual(ans, total, tag=top)
