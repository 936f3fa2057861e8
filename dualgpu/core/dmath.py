"""A dual-aware stand-in for the :mod:`math` module.

Every function of :mod:`math` is here. Those with a rule in
:mod:`dualgpu.rules` accept :class:`dualgpu.Dual` arguments and propagate
partials; those that act on the value (``floor``, ``isnan``...) read the value;
any other function given a Dual raises :class:`~dualgpu.errors.MissingRuleError`
naming the function and how to add a rule. The CUDA simulator backend puts this
module in place of ``math`` in a kernel's globals while it runs.

Plain numbers go straight to :mod:`math` on the host. Inside a kernel run by
the simulator they are computed as the compiled kernel computes them (see
:mod:`dualgpu.core._primals`): ``log(0.0)`` is ``-inf`` instead of Python's
``ValueError``, and a float32 stays float32.

Examples
--------
>>> from dualgpu import Dual, dmath
>>> d = dmath.exp(Dual(0.0, [1.0]))
>>> float(d.value), float(d.partials[0])
(1.0, 1.0)
"""
import math as _math

import numpy as _np

from dualgpu import rules as _rules
from dualgpu.core import _primals
from dualgpu.core import float_to_int as _float_to_int
from dualgpu.core.dual import Dual as _Dual
from dualgpu.core.dual import apply_rule as _apply_rule
from dualgpu.core.dual import primal_value as _primal_value
from dualgpu.errors import MissingRuleError as _MissingRuleError
from dualgpu.errors import missing_rule_message as _missing_rule_message


def _has_dual(args):
    return any(isinstance(a, _Dual) for a in args)

# example arguments of the math functions whose first argument is not a float near 0.5
_EXAMPLE_ARGS = {
    "acosh": (1.5,), "atan2": (0.5, 1.0), "copysign": (0.5, -1.0), "fmod": (2.5, 1.0),
    "hypot": (0.5, 1.0), "pow": (0.5, 2.0), "remainder": (2.5, 1.0), "ldexp": (0.5, 3),
    "nextafter": (0.5, 1.0), "comb": (5, 2), "perm": (5, 2), "factorial": (4,),
    "gcd": (12, 8), "lcm": (4, 6), "isqrt": (10,), "prod": ([0.5, 4.0],),
    "fsum": ([0.5, 0.25],), "dist": ([0.0, 0.0], [3.0, 4.0]), "isclose": (0.5, 0.5),
    "sumprod": ([0.5, 2.0], [2.0, 0.5]), "fma": (0.5, 2.0, 1.0), "trunc": (2.5,),
    "floor": (2.5,), "ceil": (2.5,), "modf": (2.5,), "frexp": (0.5,),
    # (a dual's value is the C library's, as compiled code's; Python's own gamma and lgamma
    # differ from it in the last bit at most points, not at 2)
    "gamma": (2.0,), "lgamma": (2.0,),
}


def _doc(name, summary, kind):
    """A numpydoc docstring for dmath.<name> (``kind``: 'rule', 'value' or 'none')."""
    plain = getattr(_math, name)
    args = _EXAMPLE_ARGS.get(name, (0.5,))
    try:
        expected = repr(plain(*args))
    except (TypeError, ValueError):  # another Python's math: no example arguments known
        args, expected = None, None
    call = f"dmath.{name}({', '.join(map(repr, args))})" if args else None
    lines = [summary, "", "Parameters", "----------", "*args",
             f"    The arguments of ``math.{name}``; a :class:`~dualgpu.Dual` where it may "
             "take one."]
    if kind == "none":
        lines += ["**kwargs", f"    Keyword arguments of ``math.{name}``, if it takes any."]
    lines += ["", "Returns", "-------", "object",
              f"    ``math.{name}`` of the arguments (of their values, for a dual)."]
    if kind == "rule":
        lines[-1] += " A dual when an argument is one, with its partials."
    if kind == "none":
        lines += ["", "Raises", "------", "MissingRuleError",
                  "    When an argument is a dual: this function has no derivative rule "
                  "(add one with :func:`dualgpu.rules.define`)."]
    lines += ["", "Examples", "--------", ">>> from dualgpu import Dual, dmath"]
    if call is None:
        lines += [f">>> callable(dmath.{name})", "True"]
    else:
        lines += [f">>> {call}", expected]
        if kind in ("rule", "value") and isinstance(args[0], float):
            rest = "".join(f", {a!r}" for a in args[1:])
            dual_call = f"dmath.{name}(Dual({args[0]!r}, [1.0]){rest})"
            if kind == "rule":
                lines += [f">>> bool({dual_call}.value == {call})", "True"]
            else:
                lines += [f">>> bool({dual_call} == {call})", "True"]
    return "\n".join(lines) + "\n"


def _with_rule(name, rule_name):
    plain = getattr(_math, name)

    def fn(*args):
        if _has_dual(args):
            return _apply_rule(rule_name, *args, primal=plain)  # math.pow is not **
        if _primals.in_kernel():
            return _primals.compiled_value(plain, args)
        return plain(*args)

    if name == "log":
        one = fn

        def fn(*args):
            if len(args) == 2:
                # math.log(x, base), as Python computes it: log(x) / log(base), the rule twice
                # (plain numbers too: the kernel's compiled value is the one-argument log's)
                return one(args[0]) / one(args[1])
            return one(*args)

    fn.__name__ = name
    fn.__doc__ = _doc(name, f"math.{name}, with partials propagated for Dual arguments.", "rule")
    return fn


def _plain_number(a):
    # a Dual's innermost value (also of a nested, second-order dual), and numpy floats as
    # Python floats: np.float32 has no __trunc__
    value = _primal_value(a) if isinstance(a, _Dual) else a
    return float(value) if isinstance(value, _np.floating) else value


def _on_value(name):
    plain = getattr(_math, name)

    def fn(*args):
        return plain(*(_plain_number(a) for a in args))

    fn.__name__ = name
    fn.__doc__ = _doc(name, f"math.{name} of the value (zero derivative).", "value")
    return fn


def _rounded_to_int(name):
    """math.floor/ceil/trunc: in a kernel as numba.cuda compiles them (saturating int64,
    NaN -> 0, see dualgpu.core.float_to_int); on the host as Python's (which raise on inf/NaN)."""
    plain = _on_value(name)
    compiled = getattr(_float_to_int, f"{name}_i64")

    def fn(*args):
        if len(args) == 1 and _primals.in_kernel():
            return compiled(args[0])
        return plain(*args)

    fn.__name__ = name
    fn.__doc__ = _doc(name, f"math.{name} of the value (zero derivative); int64 as numba.cuda "
                          "in kernels.", "value")
    return fn


def _without_rule(name):
    plain = getattr(_math, name)

    def fn(*args, **kwargs):
        if _has_dual(args) or _has_dual(kwargs.values()):
            raise _MissingRuleError(_missing_rule_message(f"math.{name}", len(args)))
        return plain(*args, **kwargs)

    fn.__name__ = name
    fn.__doc__ = _doc(name, f"math.{name}, for plain numbers only: no derivative rule.", "none")
    return fn


def _build():
    ruled = {}
    for rule_name, rule in {**_rules.UNARY_RULES, **_rules.BINARY_RULES}.items():
        if rule.primal.startswith("math."):
            ruled[rule.primal[5:]] = rule_name
    for dotted, rule_name in _rules.ALIASES.items():
        if dotted.startswith("math."):
            ruled[dotted[5:]] = rule_name
    for definition in _rules.DEFINED.values():  # rules added with dualgpu.rules.define
        if definition.name.startswith("math."):
            ruled[definition.name[5:]] = definition.key
    value_only = {d[5:] for d in _rules.VALUE_ONLY.values() if d.startswith("math.")}
    namespace = {}
    for name in dir(_math):
        if name.startswith("_"):
            continue
        attr = getattr(_math, name)
        if not callable(attr):
            namespace[name] = attr  # pi, e, inf, nan, tau
        elif name in ruled:
            namespace[name] = _with_rule(name, ruled[name])
        elif name in ("floor", "ceil", "trunc"):
            namespace[name] = _rounded_to_int(name)
        elif name in value_only:
            namespace[name] = _on_value(name)
        else:
            namespace[name] = _without_rule(name)
    return namespace


globals().update(_build())
# a math function given a rule with dualgpu.rules.define takes duals from then on (and back)
_rules.subscribe(lambda new, old: globals().update(_build()))
