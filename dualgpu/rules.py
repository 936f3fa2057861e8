"""The derivative rules: one table, read by every execution path.

Each rule names a primal function and, for each argument, the partial derivative
of the answer with respect to that argument, written as a Python expression in

* ``x`` (the first argument), ``y`` (the second argument) and
* ``ans`` (the primal answer, so ``exp`` can reuse it).

Expressions may call the functions in :data:`EXPRESSION_FUNCTIONS` by their bare
names and use numeric literals. Code generators compile each expression once per
value dtype, turning every literal into a constant of that dtype, so a float32
dual computes its derivative factors in float32. A factor written exactly
``"1"``, ``"-1"`` or ``"0"`` is recognised and costs no multiplication.

``domain`` gives, per argument, an interval where the rule is smooth; the tests
draw their inputs from it.

To add a rule, add one line here: for example
``"gamma": Rule("math.gamma", ("ans * digamma(x)",), ((0.5, 5),))`` (after
making ``digamma`` available in :data:`EXPRESSION_FUNCTIONS`). Nothing else
changes: the compiled (CPU and CUDA) and pure-Python duals are generated from
this table.

Conventions at points where a function is not differentiable (documented in
the README): ``abs``/``fabs`` take the derivative from the right at 0 (+1);
``min``/``max`` (and ``np.minimum``/``np.maximum``) take the partials of the
operand whose value they return -- ``same(ans, x)`` compares bits, so NaN
operands and signed zeros follow the value -- and ties take the first
argument's partials; ``sqrt`` at 0 gives an infinite factor (as JAX does);
``hypot(0, 0)`` gives zero partials; ``x**y`` with ``x == 0`` contributes
nothing through ``y``.

The primal is always the function the user called, computed exactly as the
plain code computes it (numba's own implementation in compiled code; for the
pure-Python dual, what numba's compiled code computes -- see
:mod:`dualgpu.core._primals`), so a dual's value is bit-identical to the plain
value. Derivative factors are computed without raising (numpy's error
model); where plain ``@njit`` code raises (see :data:`ZERO_DIVISION_ERRORS`)
the dual raises the same error.
"""
from collections import namedtuple

__all__ = [
    "Rule",
    "UNARY_RULES",
    "BINARY_RULES",
    "VALUE_ONLY",
    "COMPARISONS",
    "INPLACE",
    "NUMPY_UFUNCS",
    "NUMPY_ONLY_RULES",
    "NUMPY_VALUE_ONLY",
    "EXPRESSION_FUNCTIONS",
    "ZERO_DIVISION_ERRORS",
]

Rule = namedtuple("Rule", "primal derivatives domain")
Rule.__doc__ = """One derivative rule: a primal and the derivative of its answer per argument.

Parameters
----------
primal : str
    Dotted name of the primal callable (``"math.sin"``, ``"operator.add"``).
derivatives : tuple of str
    One expression per argument, in ``x``, ``y`` and ``ans``.
domain : tuple of (float, float)
    Per argument, an interval of smooth inputs used by the tests.

Examples
--------
>>> from dualgpu.rules import Rule, UNARY_RULES
>>> UNARY_RULES["exp"]
Rule(primal='math.exp', derivatives=('ans',), domain=((-3, 3),))
>>> Rule("math.exp2", ("ans * 0.6931471805599453",), ((-3, 3),)).derivatives
('ans * 0.6931471805599453',)
"""

#: Functions of one argument.
UNARY_RULES = {
    # --- operators and builtins ---
    "neg": Rule("operator.neg", ("-1",), ((-5, 5),)),
    "pos": Rule("operator.pos", ("1",), ((-5, 5),)),
    "abs": Rule("builtins.abs", ("1 if x >= 0 else -1",), ((-5, 5),)),
    # --- math: trigonometric ---
    "sin": Rule("math.sin", ("cos(x)",), ((-3, 3),)),
    "cos": Rule("math.cos", ("-sin(x)",), ((-3, 3),)),
    "tan": Rule("math.tan", ("1 + ans * ans",), ((-1.2, 1.2),)),
    # (1 - x) * (1 + x), not 1 - x * x: exact factors near |x| = 1, where x * x loses the digits
    "asin": Rule("math.asin", ("1 / sqrt((1 - x) * (1 + x))",), ((-0.9, 0.9),)),
    "acos": Rule("math.acos", ("-1 / sqrt((1 - x) * (1 + x))",), ((-0.9, 0.9),)),
    "atan": Rule("math.atan", ("1 / (1 + x * x)",), ((-5, 5),)),
    # --- math: hyperbolic ---
    "sinh": Rule("math.sinh", ("cosh(x)",), ((-3, 3),)),
    "cosh": Rule("math.cosh", ("sinh(x)",), ((-3, 3),)),
    # (1 - ans) * (1 + ans): 1 - ans is exact; 1 - ans * ans also rounds ans * ans
    "tanh": Rule("math.tanh", ("(1 - ans) * (1 + ans)",), ((-3, 3),)),
    "asinh": Rule("math.asinh", ("1 / sqrt(x * x + 1)",), ((-5, 5),)),
    "acosh": Rule("math.acosh", ("1 / sqrt((x - 1) * (x + 1))",), ((1.1, 5),)),
    "atanh": Rule("math.atanh", ("1 / ((1 - x) * (1 + x))",), ((-0.9, 0.9),)),
    # --- math: exponential and logarithmic ---
    "exp": Rule("math.exp", ("ans",), ((-3, 3),)),
    # exp(x), not ans + 1: for x << 0, ans rounds near -1 and ans + 1 keeps only its error
    "expm1": Rule("math.expm1", ("exp(x)",), ((-3, 3),)),
    "log": Rule("math.log", ("1 / x",), ((0.1, 5),)),
    "log1p": Rule("math.log1p", ("1 / (1 + x)",), ((-0.9, 5),)),
    "log2": Rule("math.log2", ("1 / (x * 0.6931471805599453)",), ((0.1, 5),)),
    "log10": Rule("math.log10", ("1 / (x * 2.302585092994046)",), ((0.1, 5),)),
    "sqrt": Rule("math.sqrt", ("0.5 / ans",), ((0.1, 5),)),
    # --- math: other ---
    "fabs": Rule("math.fabs", ("1 if x >= 0 else -1",), ((-5, 5),)),
    "erf": Rule("math.erf", ("1.1283791670955126 * exp(-x * x)",), ((-2, 2),)),
    "erfc": Rule("math.erfc", ("-1.1283791670955126 * exp(-x * x)",), ((-2, 2),)),
}

#: Functions of two arguments. A dual combined with a plain number uses only
#: the dual argument's expression.
BINARY_RULES = {
    # --- operators ---
    "add": Rule("operator.add", ("1", "1"), ((-5, 5), (-5, 5))),
    "sub": Rule("operator.sub", ("1", "-1"), ((-5, 5), (-5, 5))),
    "mul": Rule("operator.mul", ("y", "x"), ((-5, 5), (-5, 5))),
    "truediv": Rule("operator.truediv", ("1 / y", "-ans / y"), ((-5, 5), (0.5, 5))),
    "floordiv": Rule("operator.floordiv", ("0", "0"), ((0.5, 5), (0.7, 3))),
    # x - n y: d/dy = -n, n the quotient the value used, (x - ans) / y rounded: -floor(x / y)
    # rounds x / y first and can land on the next integer (1.0 % 0.1 is 1 - 9 * 0.1, not -10)
    "mod": Rule("operator.mod", ("1", "rint((ans - x) / y)"), ((0.5, 5), (0.7, 3))),
    "pow": Rule(
        "operator.pow",
        ("y * pow(x, y - 1)", "log(x) * ans if x != 0 else 0"),
        ((0.5, 3), (-2, 2)),
    ),
    # --- builtins ---
    # the partials follow the value: whichever operand the primal returned (bit for bit)
    "min": Rule("builtins.min", ("1 if same(ans, x) else 0", "0 if same(ans, x) else 1"),
                ((-5, 5), (-5, 5))),
    "max": Rule("builtins.max", ("1 if same(ans, x) else 0", "0 if same(ans, x) else 1"),
                ((-5, 5), (-5, 5))),
    # --- math ---
    "atan2": Rule(
        "math.atan2", ("y / (x * x + y * y)", "-x / (x * x + y * y)"), ((-3, 3), (0.5, 3))
    ),
    "hypot": Rule(
        "math.hypot",
        ("x / ans if ans != 0 else 0", "y / ans if ans != 0 else 0"),
        ((-3, 3), (-3, 3)),
    ),
    "copysign": Rule(
        "math.copysign", ("copysign(1, x) * copysign(1, y)", "0"), ((0.5, 3), (-3, 3))
    ),
    # as mod: -n from the value (fmod's n is truncated, but it is the one the value used)
    "fmod": Rule("math.fmod", ("1", "rint((ans - x) / y)"), ((0.5, 5), (0.7, 3))),
    # IEEE remainder x - n y, n = x / y rounded half to even: d/dy = -n = (ans - x) / y, an
    # integer (rounded, as for mod: the division's rounding error is not part of it)
    "remainder": Rule("math.remainder", ("1", "rint((ans - x) / y)"), ((0.5, 5), (0.7, 3))),
}

#: Aliases that share a rule: ``pow(a, b)`` and ``math.pow`` behave like ``a ** b``.
ALIASES = {
    "builtins.pow": "pow",
    "math.pow": "pow",
}

#: numpy ufuncs called on scalars (``np.sin(u[i])`` in a kernel) and the rule each one means.
NUMPY_UFUNCS = {
    "negative": "neg", "positive": "pos", "absolute": "abs", "fabs": "fabs",
    "sin": "sin", "cos": "cos", "tan": "tan",
    "arcsin": "asin", "arccos": "acos", "arctan": "atan",
    "sinh": "sinh", "cosh": "cosh", "tanh": "tanh",
    "arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh",
    "exp": "exp", "expm1": "expm1", "log": "log", "log1p": "log1p", "log2": "log2",
    "log10": "log10", "sqrt": "sqrt",
    "add": "add", "subtract": "sub", "multiply": "mul", "divide": "truediv",
    "floor_divide": "floordiv", "remainder": "mod", "power": "pow",
    "minimum": "min", "maximum": "max", "arctan2": "atan2", "hypot": "hypot",
    "copysign": "copysign", "fmod": "fmod",
}

#: numpy ufuncs with no ``math``/``operator`` counterpart, keyed by the ufunc's name. They
#: apply to host arrays and host duals (``np.square(u - data)`` after a run); the compiled
#: paths do not read this table. A ufunc that has a math counterpart (``cbrt``, ``exp2``)
#: belongs in UNARY_RULES/BINARY_RULES with a line in NUMPY_UFUNCS instead.
NUMPY_ONLY_RULES = {
    "square": Rule("numpy.square", ("2 * x",), ((-5, 5),)),
    "reciprocal": Rule("numpy.reciprocal", ("-ans * ans",), ((0.5, 5),)),
    "deg2rad": Rule("numpy.deg2rad", ("0.017453292519943295",), ((-180, 180),)),
    "radians": Rule("numpy.radians", ("0.017453292519943295",), ((-180, 180),)),
    "rad2deg": Rule("numpy.rad2deg", ("57.29577951308232",), ((-3, 3),)),
    "degrees": Rule("numpy.degrees", ("57.29577951308232",), ((-3, 3),)),
}

#: numpy ufuncs whose answer has zero derivative wherever it has one. On host duals they
#: act on the values: a float answer (``floor``, ``sign``) carries zero partials, a bool
#: answer (comparisons, ``isnan``) is a plain array.
NUMPY_VALUE_ONLY = (
    "less", "less_equal", "greater", "greater_equal", "equal", "not_equal",
    "logical_and", "logical_or", "logical_xor", "logical_not",
    "isnan", "isinf", "isfinite", "signbit",
    "floor", "ceil", "trunc", "rint", "sign", "heaviside",
)

#: Functions that act on the value alone: their answer is not a dual (an int
#: or a bool), so no partials exist to propagate.
VALUE_ONLY = {
    "floor": "math.floor",
    "ceil": "math.ceil",
    "trunc": "math.trunc",
    "isnan": "math.isnan",
    "isinf": "math.isinf",
    "isfinite": "math.isfinite",
    "int": "builtins.int",
    "round": "builtins.round",
    "bool": "builtins.bool",
}

#: Comparisons compare values and return a bool.
COMPARISONS = {
    "lt": "operator.lt",
    "le": "operator.le",
    "gt": "operator.gt",
    "ge": "operator.ge",
    "eq": "operator.eq",
    "ne": "operator.ne",
}

#: In-place operators and the binary rule each one applies.
INPLACE = {
    "operator.iadd": "add",
    "operator.isub": "sub",
    "operator.imul": "mul",
    "operator.itruediv": "truediv",
    "operator.ifloordiv": "floordiv",
    "operator.imod": "mod",
    "operator.ipow": "pow",
}

#: Names a derivative expression may call, with the ``math`` function each
#: stands for. Compiled code calls these; the pure-Python dual calls the numpy
#: function of the same name so that float32 stays float32. ``floor``, ``trunc``
#: and ``rint`` (round half to even) return floats (not ints, as ``math.floor``
#: does in numba; there is no ``math.rint``), and
#: ``same(a, b)`` is True when two floats have the same bits (NaN and the sign of
#: zero included).
EXPRESSION_FUNCTIONS = (
    "sin", "cos", "sinh", "cosh", "sqrt", "exp", "log", "pow",
    "floor", "trunc", "rint", "copysign", "same",
)

#: Where plain ``@njit`` code (numba's default ``error_model="python"``) raises
#: ``ZeroDivisionError``, with numba's message: primal -> (condition, message). Conditions:
#: ``"zero divisor"`` (the second argument is 0) and ``"zero to a negative int"`` (a zero
#: base and a negative *integer* exponent; ``0.0 ** -1.0`` gives inf). A dual raises the same
#: there. Kernels (numpy's error model) give inf/nan for a zero divisor, as the plain code
#: does; compiled CPU code raises for ``0.0 ** -n`` under either error model (numba compiles
#: its integer power with Python's), and so does a dual. The pure-Python dual (cudasim, host)
#: gives inf/nan, as numpy scalars do.
ZERO_DIVISION_ERRORS = {
    "operator.truediv": ("zero divisor", "division by zero"),
    "operator.floordiv": ("zero divisor", "division by zero"),
    "operator.mod": ("zero divisor", "modulo by zero"),
    "operator.itruediv": ("zero divisor", "division by zero"),
    "operator.ifloordiv": ("zero divisor", "division by zero"),
    "operator.imod": ("zero divisor", "modulo by zero"),
    "operator.pow": ("zero to a negative int", "division by zero"),
    "operator.ipow": ("zero to a negative int", "division by zero"),
    "builtins.pow": ("zero to a negative int", "division by zero"),
}
