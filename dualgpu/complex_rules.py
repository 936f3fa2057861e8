"""The rule table's complex entries: how each rule differentiates complex numbers.

A complex function ``f`` of ``z`` moves its answer by ``df`` when ``z`` moves by ``dz``
(a complex tangent; a real tangent is one with a zero imaginary part). Two kinds of rule:

* **holomorphic** functions (``exp``, ``sin``, ``log``, ``*``, ``/``, ``**``...):
  ``df = f'(z) dz``. Their derivative is the real rule's expression continued to complex
  numbers, so these entries name the real rule and reuse its derivative
  (:data:`dualgpu.rules.UNARY_RULES`, :data:`~dualgpu.rules.BINARY_RULES`,
  :data:`~dualgpu.rules.NUMPY_ONLY_RULES`): one line per function stays the one source.
* **real-linear** functions (``abs``, ``real``, ``imag``, ``conj``, ``phase``) are not
  holomorphic; their tangent is a real-linear map of ``dz``, written as a factor ``c`` and
  what is taken of the product ``c dz`` (the *tangent* of the entry):

  ========== ================================= ==================================
  function   tangent                           entry (factor, tangent)
  ========== ================================= ==================================
  ``abs``    ``Re(conj(z) dz) / |z|``           ``ans / x``, ``"real"``
  ``real``   ``Re(dz)``                         ``1``, ``"real"``
  ``imag``   ``Im(dz)``                         ``1``, ``"imag"``
  ``conj``   ``conj(dz)``                       ``1``, ``"conj"``
  ``phase``  ``Im(dz / z)``                     ``1 / x``, ``"imag"``
  ========== ================================= ==================================

  (``Re(conj(z) dz) / |z| = Re(dz |z| / z)``: the factor ``ans / x``.)

Conventions at ``z = 0``, where ``abs`` and ``phase`` have no derivative: both give zero
partials there (``abs``'s directional derivative ``|dz|`` is not linear in ``dz``; JAX also
gives 0 for ``abs`` of a complex zero). A real ``abs`` keeps the real rule's +1 at 0.
Ordering comparisons (``<``, ``<=``, ``>``, ``>=``, ``min``, ``max``) of complex numbers are
refused, as numba refuses them; ``==`` and ``!=`` compare values.

A dual whose value is complex has complex partials; a real dual that meets a complex number
(``u * 1j``, ``np.exp(1j * u)``) gives a complex dual. The derivative of a complex answer
with respect to a real input is complex (``d exp(i u) / du = i exp(i u)``).
"""
from collections import namedtuple

from dualgpu import rules

__all__ = ["ComplexRule", "COMPLEX_RULES", "HOLOMORPHIC", "TANGENTS", "COMPLEX_NUMPY",
           "ORDERING", "complex_rule", "ordering_message"]

ComplexRule = namedtuple("ComplexRule", "primal derivatives tangents domain")
ComplexRule.__doc__ = """One complex rule: a primal, a factor per argument and its tangent.

Parameters
----------
primal : str
    Dotted name of the primal callable for complex numbers (``"cmath.exp"``).
derivatives : tuple of str
    One factor per argument, in ``x``, ``y`` and ``ans`` as in :mod:`dualgpu.rules`.
tangents : tuple of str
    Per argument, what the tangent is made of ``c = factor * dz``: ``"holomorphic"`` (``c``),
    ``"real"`` (``Re(c)``), ``"imag"`` (``Im(c)``) or ``"conj"`` (``conj(c)``).
domain : tuple of ((float, float), (float, float))
    Per argument, a rectangle of the complex plane (real interval, imaginary interval) away
    from branch cuts, drawn by the tests.

Examples
--------
>>> from dualgpu.complex_rules import COMPLEX_RULES
>>> COMPLEX_RULES["abs"].derivatives, COMPLEX_RULES["abs"].tangents
(('ans / x if ans != 0 else 0',), ('real',))
>>> COMPLEX_RULES["exp"].derivatives
('ans',)
"""

#: What a tangent takes of ``factor * dz``.
TANGENTS = ("holomorphic", "real", "imag", "conj")

#: Rules of the real table that are holomorphic: key -> primal for complex numbers. Their
#: derivative expressions hold for complex arguments as written.
HOLOMORPHIC = {
    "neg": "operator.neg", "pos": "operator.pos",
    "add": "operator.add", "sub": "operator.sub", "mul": "operator.mul",
    "truediv": "operator.truediv", "pow": "operator.pow",
    "exp": "cmath.exp", "expm1": "numpy.expm1", "log": "cmath.log", "log1p": "numpy.log1p",
    "log2": "numpy.log2", "log10": "cmath.log10", "sqrt": "cmath.sqrt",
    "sin": "cmath.sin", "cos": "cmath.cos", "tan": "cmath.tan",
    "asin": "cmath.asin", "acos": "cmath.acos", "atan": "cmath.atan",
    "sinh": "cmath.sinh", "cosh": "cmath.cosh", "tanh": "cmath.tanh",
    "asinh": "cmath.asinh", "acosh": "cmath.acosh", "atanh": "cmath.atanh",
    "square": "numpy.square", "reciprocal": "numpy.reciprocal",
}

#: Complex domains per rule key, per argument (real interval, imaginary interval); default:
#: the real rule's interval and (-0.5, 0.5).
_DOMAINS = {
    "log": (((0.2, 3), (-1, 1)),), "log1p": (((-0.5, 3), (-1, 1)),),
    "log2": (((0.2, 3), (-1, 1)),), "log10": (((0.2, 3), (-1, 1)),),
    "sqrt": (((0.2, 3), (-1, 1)),), "acosh": (((1.2, 3), (-0.5, 0.5)),),
    "reciprocal": (((0.5, 3), (-1, 1)),),
}


def _holomorphic(key, primal):
    real = rules.UNARY_RULES.get(key) or rules.BINARY_RULES.get(key) or \
        rules.NUMPY_ONLY_RULES[key]
    domain = _DOMAINS.get(key) or tuple((interval, (-0.5, 0.5)) for interval in real.domain)
    return ComplexRule(primal, real.derivatives, ("holomorphic",) * len(real.derivatives),
                       domain)


def _on_the_answers_branch(root, twin):
    """The derivative ``1 / twin`` of an inverse function, ``twin`` computed from its answer
    (``w = asin(z)``, ``z = sin(w)``: ``dw = dz / cos(w)``), so that it follows the branch the
    answer took. The real rule's ``1 / root`` (``root = sqrt((1 - z) * (1 + z))``) takes the
    principal root, which is the other one (the derivative's sign flipped) where ``Re z < 0``
    for acosh, and on a cut, where the product loses the signed zero that chose the
    answer's side (``asin(2 + 0j)``: Snell's law past the critical angle). ``root / root``
    is 1, or NaN where the function is singular (``root`` is 0 there, ``twin`` only
    rounds near it), so that the derivative is refused there as it was."""
    return f"{root} / {root} / {twin}"


#: Inverse functions whose derivative follows their answer's branch (see
#: :func:`_on_the_answers_branch`).
_BRANCHED = {
    "asin": _on_the_answers_branch("sqrt((1 - x) * (1 + x))", "cos(ans)"),
    "acos": "-" + _on_the_answers_branch("sqrt((1 - x) * (1 + x))", "sin(ans)"),
    "asinh": _on_the_answers_branch("sqrt(x * x + 1)", "cosh(ans)"),
    "acosh": _on_the_answers_branch("sqrt((x - 1) * (x + 1))", "sinh(ans)"),
}

#: rule key -> :class:`ComplexRule`: every rule that takes complex numbers.
COMPLEX_RULES = {key: _holomorphic(key, primal) for key, primal in HOLOMORPHIC.items()}
for _key, _derivative in _BRANCHED.items():
    COMPLEX_RULES[_key] = COMPLEX_RULES[_key]._replace(derivatives=(_derivative,))
COMPLEX_RULES.update({
    # real-linear: see the module docstring; zero partials at z = 0
    "abs": ComplexRule("builtins.abs", ("ans / x if ans != 0 else 0",), ("real",),
                       (((-2, 2), (-2, 2)),)),
    "real": ComplexRule("numpy.real", ("1",), ("real",), (((-2, 2), (-2, 2)),)),
    "imag": ComplexRule("numpy.imag", ("1",), ("imag",), (((-2, 2), (-2, 2)),)),
    "conj": ComplexRule("numpy.conjugate", ("1",), ("conj",), (((-2, 2), (-2, 2)),)),
    "phase": ComplexRule("cmath.phase", ("1 / x if x != 0 else 0",), ("imag",),
                         (((0.2, 2), (-2, 2)),)),
})

#: numpy ufunc or function name -> complex rule key (host arrays and host duals).
COMPLEX_NUMPY = {
    **{name: key for name, key in rules.NUMPY_UFUNCS.items() if key in COMPLEX_RULES},
    "square": "square", "reciprocal": "reciprocal",
    "absolute": "abs", "real": "real", "imag": "imag", "conjugate": "conj", "conj": "conj",
    "angle": "phase",
}

#: Rules and numpy ufuncs that order (or round down) numbers: refused for complex numbers.
ORDERING = frozenset({
    "lt", "le", "gt", "ge", "min", "max", "floordiv", "mod", "less", "less_equal", "greater",
    "greater_equal", "minimum", "maximum", "fmin", "fmax", "floor_divide", "remainder",
})


def complex_rule(key):
    """Return the :class:`ComplexRule` of ``key``, or None when complex numbers have none."""
    return COMPLEX_RULES.get(key)


def ordering_message(operation):
    """The error text for an operation that orders complex numbers (``"Dual(complex128) < x"``).

    Examples
    --------
    >>> print(ordering_message("a < b").split(";")[0])
    a < b orders complex numbers, which have no order (nor floor)
    """
    return (
        f"{operation} orders complex numbers, which have no order (nor floor); numba and "
        "Python refuse it too. Fix: compare a real quantity, e.g. abs(z) < r, z.real < x or "
        "(z * z.conjugate())"
        ".real, and differentiate that."
    )
