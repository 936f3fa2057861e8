"""A dual-aware stand-in for the :mod:`cmath` module.

Every function and constant of :mod:`cmath` is here. Given a :class:`dualgpu.Dual` (real or
complex) the functions with a complex rule (:mod:`dualgpu.complex_rules`) propagate partials:
``exp``, ``log`` (also with a base), ``log10``, ``sqrt``, ``sin``, ``cos``, ``tan``, the
hyperbolic and inverse functions, ``phase``, ``polar`` and ``rect``; ``isfinite``, ``isnan``
and ``isinf`` read the value; any other function given a Dual raises
:class:`~dualgpu.errors.MissingRuleError`. Plain numbers go straight to :mod:`cmath`. The
CUDA simulator backend puts this module in place of ``cmath`` in a kernel's globals while it
runs (and :func:`complex` in place of the builtin, so ``complex(a, b)`` of duals is a dual).

A real dual given to a complex function is a complex number with zero imaginary part (and
real tangents): ``exp(1j * v)`` and ``exp(complex(0, v))`` differentiate along ``v``.

Examples
--------
>>> from dualgpu import Dual
>>> from dualgpu.core import dcmath
>>> z = dcmath.exp(1j * Dual(0.0, [1.0]))        # d exp(i v) / dv at 0: i
>>> complex(z.value), complex(z.partials[0])
((1+0j), 1j)
"""
import builtins as _builtins
import cmath as _cmath


from dualgpu.core.dual import Dual as _Dual
from dualgpu.core.dual import apply_complex as _apply_complex
from dualgpu.errors import MissingRuleError as _MissingRuleError
from dualgpu.errors import missing_rule_message as _missing_rule_message

#: cmath function -> complex rule key
RULED = {
    "exp": "exp", "log10": "log10", "sqrt": "sqrt", "sin": "sin", "cos": "cos", "tan": "tan",
    "sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "asin": "asin", "acos": "acos",
    "atan": "atan", "asinh": "asinh", "acosh": "acosh", "atanh": "atanh", "phase": "phase",
}


def _has_dual(args):
    return any(isinstance(a, _Dual) for a in args)


#: arguments for each function's example (one complex argument otherwise)
_EXAMPLE_ARGS = {"rect": (2.0, 0.0), "isclose": (0.5j, 0.5j), "log": (1j, 2.0),
                 "acosh": (1.5 + 0.5j,), "complex": (0.5, 2.0)}


def _doc(name, summary, kind, params=("x",)):
    """A numpydoc docstring for dcmath.<name> (``kind``: 'rule', 'value' or 'none'), whose
    function takes ``params`` (``"*args"`` and ``"**kwargs"`` for the pass-through ones)."""
    plain = getattr(_cmath, name, _builtins.complex if name == "complex" else None)
    args = _EXAMPLE_ARGS.get(name, (0.5 + 0.25j,))
    where = "the builtin ``complex``" if name == "complex" else f"``cmath.{name}``"
    lines = [summary, "", "Parameters", "----------"]
    for param in params:
        what = ("keyword arguments" if param == "**kwargs" else "the arguments"
                if param == "*args" else f"``{param}``")
        lines += [param, f"    {what.capitalize()} of {where}; a :class:`~dualgpu.Dual` (real "
                         "or complex) where it may take one."]
    lines += ["", "Returns", "-------", "object",
              f"    {where} of the arguments (of their values, for a dual)."]
    if kind == "rule":
        lines[-1] += " A dual when an argument is one, with its partials."
    if kind == "none":
        lines += ["", "Raises", "------", "MissingRuleError",
                  "    When an argument is a dual: this function has no derivative rule."]
    call = f"dcmath.{name}({', '.join(map(repr, args))})"
    lines += ["", "Examples", "--------", ">>> from dualgpu import dcmath",
              f">>> {call}", repr(plain(*args))]
    return "\n".join(lines) + "\n"


def _with_rule(name, key):
    plain = getattr(_cmath, name)

    def fn(x):
        if isinstance(x, _Dual):
            return _apply_complex(key, x, primal=plain)
        return plain(x)

    fn.__name__ = name
    fn.__doc__ = _doc(name, f"cmath.{name}, with partials propagated for Dual arguments.", "rule")
    return fn


def log(x, base=None):
    """cmath.log (natural, or to ``base``), with partials for Dual arguments."""
    if not _has_dual((x, base)):
        return _cmath.log(x) if base is None else _cmath.log(x, base)
    natural = _apply_complex("log", x, primal=_cmath.log) if isinstance(x, _Dual) else \
        _cmath.log(x)
    if base is None:
        return natural
    return natural / (_apply_complex("log", base, primal=_cmath.log) if isinstance(
        base, _Dual) else _cmath.log(base))


def polar(x):
    """cmath.polar: ``(abs(x), phase(x))``, duals for a Dual argument."""
    if isinstance(x, _Dual):
        return abs(x), phase(x)  # noqa: F821 - built below
    return _cmath.polar(x)


def rect(r, phi):
    """cmath.rect: ``r * (cos(phi) + i sin(phi))``, a complex dual for Dual arguments."""
    if not _has_dual((r, phi)):
        return _cmath.rect(r, phi)
    unit = exp(1j * phi) if isinstance(phi, _Dual) else _cmath.exp(1j * phi)  # noqa: F821
    return r * unit


def _on_value(name):
    plain = getattr(_cmath, name)

    def fn(*args, **kwargs):
        return plain(*(complex(a.value) if isinstance(a, _Dual) else a for a in args), **kwargs)

    fn.__name__ = name
    fn.__doc__ = _doc(name, f"cmath.{name} of the value (zero derivative).", "value",
                      ("*args", "**kwargs"))
    return fn


def _without_rule(name):
    plain = getattr(_cmath, name)

    def fn(*args, **kwargs):
        if _has_dual(args) or _has_dual(kwargs.values()):
            raise _MissingRuleError(_missing_rule_message(f"cmath.{name}", len(args)))
        return plain(*args, **kwargs)

    fn.__name__ = name
    fn.__doc__ = _doc(name, f"cmath.{name}, for plain numbers only: no derivative rule.", "none",
                      ("*args", "**kwargs"))
    return fn


def complex(real=0, imag=0):  # noqa: A001 - stands in for the builtin inside kernels
    """The builtin ``complex(real, imag)``; a complex dual when either part is a Dual."""
    if not _has_dual((real, imag)):
        return _builtins.complex(real, imag)
    value = real + 1j * imag  # a complex dual: real and imaginary parts keep their partials
    if isinstance(value, _Dual) and value.dtype.kind != "c":  # pragma: no cover - defensive
        value = value + 0j
    return value


def _build():
    namespace = {}
    for name in dir(_cmath):
        if name.startswith("_") or name in ("log", "polar", "rect"):
            continue
        attr = getattr(_cmath, name)
        if not callable(attr):
            namespace[name] = attr  # pi, e, tau, inf, infj, nan, nanj
        elif name in RULED:
            namespace[name] = _with_rule(name, RULED[name])
        elif name in ("isfinite", "isnan", "isinf", "isclose"):
            namespace[name] = _on_value(name)
        else:
            namespace[name] = _without_rule(name)
    return namespace


globals().update(_build())
for _fn, _params, _summary in (
        (log, ("x", "base"), "cmath.log (natural, or to ``base``), with partials for duals."),
        (polar, ("x",), "cmath.polar: ``(abs(x), phase(x))``, duals for a Dual argument."),
        (rect, ("r", "phi"), "cmath.rect: ``r * (cos(phi) + i sin(phi))``, a complex dual for "
                             "Dual arguments."),
        (complex, ("real", "imag"), "The builtin ``complex(real, imag)``; a complex dual when "
                                    "either part is a Dual.")):
    _fn.__doc__ = _doc(_fn.__name__, _summary, "rule", _params)
