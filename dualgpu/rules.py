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

To add a rule from your own code, without editing dualgpu, call :func:`define` (it reaches
every path through the listeners the floors above register with ``subscribe``). To add
a rule to dualgpu, add one line here: for example
``"gamma": Rule("math.gamma", ("ans * digamma(x)",), ((0.3, 4),))`` (a function an
expression calls, such as ``digamma``, is listed in :data:`EXPRESSION_FUNCTIONS`). Nothing else
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
pure-Python dual, what numba's compiled code computes), so a dual's value is
bit-identical to the plain value. Derivative factors are computed without raising (numpy's error
model); where plain ``@njit`` code raises (see :data:`ZERO_DIVISION_ERRORS`)
the dual raises the same error.
"""
import ast
import functools
import hashlib
import inspect
import math
from collections import namedtuple

import numpy as np

from dualgpu.errors import DualgpuError

__all__ = [
    "Rule", "UNARY_RULES", "BINARY_RULES", "VALUE_ONLY", "COMPARISONS", "INPLACE", "NUMPY_UFUNCS",
    "NUMPY_ONLY_RULES", "NUMPY_VALUE_ONLY", "EXPRESSION_FUNCTIONS", "ZERO_DIVISION_ERRORS",
    "RuleError", "Definition", "DEFINED", "define", "undefine", "lookup", "definition_of",
]
# subscribe, add_call_handler, note_compiled and fingerprint are hooks for dualgpu's own
# layers (the compiled rules, the caches, dmath), not part of the public API: not in __all__.

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
    # log|gamma(x)|' = digamma(x) for x > 0 and between the poles below 0 (lgamma's sign does
    # not enter); gamma' = gamma digamma
    "lgamma": Rule("math.lgamma", ("digamma(x)",), ((0.3, 6),)),
    "gamma": Rule("math.gamma", ("ans * digamma(x)",), ((0.3, 4),)),
    # angles: 180 / pi and pi / 180 (numpy's rad2deg and deg2rad are these)
    "degrees": Rule("math.degrees", ("57.29577951308232",), ((-3, 3),)),
    "radians": Rule("math.radians", ("0.017453292519943295",), ((-180, 180),)),
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
    "degrees": "degrees", "rad2deg": "degrees", "radians": "radians", "deg2rad": "radians",
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
#: function of the same name so that float32 stays float32. ``digamma`` (the derivative of
#: ``lgamma``) is dualgpu's own (``dualgpu/core/special.py``), on every path. ``floor``, ``trunc``
#: and ``rint`` (round half to even) return floats (not ints, as ``math.floor``
#: does in numba; there is no ``math.rint``), and
#: ``same(a, b)`` is True when two floats have the same bits (NaN and the sign of
#: zero included).
EXPRESSION_FUNCTIONS = (
    "sin", "cos", "sinh", "cosh", "sqrt", "exp", "log", "pow",
    "floor", "trunc", "rint", "copysign", "same", "digamma",
)

#: Where plain ``@njit`` code (numba's default ``error_model="python"``) raises
#: ``ZeroDivisionError``, with numba's message: primal -> (condition, message). Conditions:
#: ``"zero divisor"`` (the second argument is 0) and ``"zero to a negative int"`` (a zero
#: base and a negative *integer* exponent; ``0.0 ** -1.0`` gives inf). A dual raises the same
#: there. Kernels (numpy's error model) give inf/nan for a zero divisor, as the plain code
#: does. Plain compiled CPU code raises for ``0.0 ** -n`` under either error model (numba
#: compiles its integer power with Python's); under numpy's error model a dual gives inf
#: there instead, as numba.cuda, numpy and the cpu backend's kernels do. The pure-Python dual
#: (cudasim, host) gives inf/nan, as numpy scalars do.
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


# ---------------------------------------------------------------------------
# rules added without editing this file: define()
# ---------------------------------------------------------------------------
class RuleError(DualgpuError):
    """A rule given to :func:`define` (or :func:`undefine`) that cannot be added.

    The message says what is wrong and the fix. A :class:`~dualgpu.errors.DualgpuError`
    (so a :class:`ValueError`).

    Examples
    --------
    >>> from dualgpu import rules
    >>> try:
    ...     rules.define("math.sin", "cos(x)")
    ... except rules.RuleError as error:
    ...     print(str(error).split(";")[0])
    math.sin already has a built-in derivative rule
    """


Definition = namedtuple("Definition", "name key rule function ufunc wrapper")
Definition.__doc__ = """A rule added with :func:`define`, as the execution paths read it.

Parameters
----------
name : str
    The dotted name given to :func:`define` (``"mylib.softplus"``, ``"math.exp2"``).
key : str
    The rule's key, what :func:`lookup` takes: the built-in key for an override of a built-in
    rule (``"sin"`` for ``"math.sin"``), else ``name``.
rule : Rule
    The primal's name (``name``), one derivative expression per argument and the domain.
function : callable
    The primal: the user's function, or ``math.NAME`` / the numpy ufunc for those names.
ufunc : numpy.ufunc or None
    The numpy ufunc that means the same function on arrays, if any (host ``DualArray``).
wrapper : callable
    What :func:`define` returns: the primal that propagates partials on every path.

Examples
--------
>>> from dualgpu.rules import Definition
>>> Definition._fields
('name', 'key', 'rule', 'function', 'ufunc', 'wrapper')
"""

#: rule key -> :class:`Definition`, for every rule added with :func:`define` (read only: add and
#: remove rules with :func:`define` and :func:`undefine`)
DEFINED = {}
_LISTENERS = []
_CALL_HANDLERS = []
_COMPILED = set()
_FINGERPRINT = []
_BUILTIN_NAMESPACES = ("math", "numpy", "operator", "builtins")


def lookup(key):
    """Return the rule ``key`` applies: a defined one (:func:`define`) first, then the tables.

    Parameters
    ----------
    key : str
        A rule's key: ``"exp"`` (a built-in rule) or the ``key`` of a :class:`Definition`.

    Returns
    -------
    Rule

    Examples
    --------
    >>> from dualgpu.rules import lookup
    >>> lookup("exp").derivatives
    ('ans',)
    """
    definition = DEFINED.get(key)
    if definition is not None:
        return definition.rule
    return UNARY_RULES.get(key) or BINARY_RULES[key]


def definition_of(name):
    """Return the :class:`Definition` whose name (or key) is ``name``, or None.

    Parameters
    ----------
    name : str
        The name given to :func:`define` (``"math.exp2"``), or the rule's key.

    Returns
    -------
    Definition or None

    Examples
    --------
    >>> from dualgpu.rules import definition_of
    >>> definition_of("math.sin") is None  # built-in, not defined
    True
    """
    return DEFINED.get(name) or next((d for d in DEFINED.values() if d.name == name), None)


def subscribe(listener):
    """Call ``listener(new, old)`` whenever a rule is defined, redefined or removed.

    ``new`` and ``old`` are :class:`Definition` objects (``old`` None for a new rule, ``new``
    None for a removed one). The listener is first called once for each rule already defined,
    so a floor imported after a rule was defined catches up. The execution paths (the Python
    dual, the compiled duals, host numpy) subscribe at their import: this module imports none
    of them (JAX's ``primitive_jvps`` pattern).

    Parameters
    ----------
    listener : callable
        ``listener(new, old)``.

    Examples
    --------
    >>> from dualgpu import rules
    >>> seen = []
    >>> rules.subscribe(lambda new, old, seen=seen: seen.append(new and new.name))
    >>> f = rules.define("doc.half", "0.5", lambda x: x / 2)
    >>> rules.undefine("doc.half")
    >>> seen[-2:]
    ['doc.half', None]
    """
    _LISTENERS.append(listener)
    for definition in list(DEFINED.values()):
        listener(definition, None)


def add_call_handler(handler):
    """Make ``handler(definition, args)`` a way of calling a defined rule's wrapper.

    The wrapper :func:`define` returns tries each handler in turn: the first result that is
    not ``NotImplemented`` is the answer (the Python dual registers one for ``Dual`` arguments,
    host numpy one for arrays); plain arguments go to the primal.

    Parameters
    ----------
    handler : callable
        ``handler(definition, args)``: the answer, or ``NotImplemented``.

    Examples
    --------
    >>> from dualgpu import rules
    >>> rules.add_call_handler(lambda definition, args: NotImplemented)  # declines every call
    """
    _CALL_HANDLERS.append(handler)


def note_compiled(key):
    """Record that the rule ``key`` was compiled into machine code in this process.

    Compiled code keeps the rule it was compiled with, so :func:`define` and :func:`undefine`
    then refuse to change that rule (see :func:`define`).

    Parameters
    ----------
    key : str
        The rule's key (:func:`lookup`).

    Examples
    --------
    >>> from dualgpu import rules
    >>> rules.note_compiled("exp")  # as compiling math.exp(dual) does
    """
    _COMPILED.add(key)


def fingerprint():
    """A string that changes whenever the defined rules change (part of on-disk cache keys).

    Returns
    -------
    str

    Examples
    --------
    >>> from dualgpu.rules import fingerprint
    >>> isinstance(fingerprint(), str)
    True
    """
    if not _FINGERPRINT:
        parts = []
        for key in sorted(DEFINED):
            d = DEFINED[key]
            parts.append(repr((d.name, key, d.rule.derivatives, getattr(d.ufunc, "__name__", None),
                               _source_key(d.function))))
        _FINGERPRINT.append("\n".join(parts))
    return _FINGERPRINT[0]


def _source_key(function):
    function = getattr(function, "py_func", function)
    try:
        source = inspect.getsource(function)
    except (OSError, TypeError):
        source = ""
    return f"{getattr(function, '__module__', '')}.{getattr(function, '__qualname__', '')}:" + (
        hashlib.sha256(source.encode()).hexdigest()[:16])


def _builtin_key(name):
    """The built-in rule key that ``name`` (a dotted primal or numpy ufunc name) means, or None."""
    for key, rule in {**UNARY_RULES, **BINARY_RULES}.items():
        if rule.primal == name:
            return key
    if name in ALIASES:
        return ALIASES[name]
    if name.startswith("numpy.") and name[6:] in NUMPY_UFUNCS:
        return NUMPY_UFUNCS[name[6:]]
    return None


def _derivative_texts(name, derivatives):
    if isinstance(derivatives, str):
        derivatives = (derivatives,)
    try:
        texts = tuple(derivatives)
    except TypeError:
        texts = None
    if not texts or not all(isinstance(t, str) for t in texts):
        raise RuleError(
            f"define({name!r}, ...): derivatives must be a string (one argument) or a tuple of "
            f"strings, one per argument, in x, y and ans; got {derivatives!r}. Fix: e.g. "
            f"define({name!r}, '1 / (1 + exp(-x))', function).")
    if len(texts) > 2:
        raise RuleError(
            f"define({name!r}, ...): {len(texts)} derivatives given; a rule takes a function of "
            "one or two arguments (x, y). Fix: write the function with at most two arguments "
            "(e.g. close over the others), or leave it without a rule so that the derivative "
            "flows through its body.")
    for text in texts:
        _check_expression(name, text, len(texts))
    return texts


#: how many arguments each function of EXPRESSION_FUNCTIONS takes
_EXPRESSION_ARITY = dict.fromkeys(EXPRESSION_FUNCTIONS, 1) | dict.fromkeys(
    ("pow", "copysign", "same"), 2)


def _check_expression(name, text, nargs):
    """Parse ``text`` as the rule table parses it; raise a RuleError naming the problem and the
    fix for anything that could never compile (every path would fail at first use)."""
    def refuse(problem, fix):
        raise RuleError(f"define({name!r}, ...): the derivative {text!r} {problem}. Fix: {fix}.")

    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as error:
        refuse(f"is not a Python expression ({error.msg})",
               "write it as Python in x, y and ans, e.g. '1 / (1 + exp(-x))'")
    allowed = ("x", "ans") + (("y",) if nargs == 2 else ())
    functions = ", ".join(EXPRESSION_FUNCTIONS)
    nodes = sorted(ast.walk(tree), key=lambda n: not isinstance(
        n, (ast.Attribute, ast.Subscript, ast.Lambda, ast.NamedExpr)))  # the syntax first
    calls = [n.func for n in nodes if isinstance(n, ast.Call)]
    for node in nodes:
        if isinstance(node, (ast.Attribute, ast.Subscript, ast.Lambda, ast.NamedExpr)):
            refuse(f"uses {type(node).__name__.lower()} syntax; a derivative is arithmetic, "
                   f"comparisons and calls of {functions} by their bare names", "e.g. 'cos(x)', "
                   "not 'math.cos(x)'")
        if isinstance(node, ast.Call):
            callee = node.func.id if isinstance(node.func, ast.Name) else None
            if node.keywords or callee in (None, "x", "y", "ans"):  # unknown names: below
                refuse(f"calls {ast.unparse(node.func)!r} (or passes keywords); calls are of "
                       f"{functions}, by their bare names with positional arguments",
                       "e.g. 'exp(-x)', 'pow(x, 2)'")
            if callee in _EXPRESSION_ARITY and len(node.args) != _EXPRESSION_ARITY[callee]:
                refuse(f"calls {callee} with {len(node.args)} argument(s); {callee} takes "
                       f"{_EXPRESSION_ARITY[callee]}", "e.g. " + _EXAMPLES.get(
                           callee, f"'{callee}(x)'"))
        if isinstance(node, ast.Name) and node.id not in allowed + EXPRESSION_FUNCTIONS:
            one = " (y is a second argument; this rule is for a function of one)"
            refuse(f"uses {node.id!r}; a derivative may use {', '.join(allowed)}, numbers "
                   f"and the functions {functions}" + (one if node.id == "y" else ""),
                   "write it with these (e.g. sigmoid(x) as 1 / (1 + exp(-x)))")
        if isinstance(node, ast.Name) and node.id in EXPRESSION_FUNCTIONS and node not in calls:
            refuse(f"names the function {node.id} without calling it", f"{node.id}(x)")
        if isinstance(node, ast.Constant) and (
                isinstance(node.value, bool) or not isinstance(node.value, (int, float))):
            refuse(f"has the literal {node.value!r}; only int and float literals are allowed",
                   "write the number")


_EXAMPLES = {"pow": "'pow(x, 2)'", "copysign": "'copysign(1, x)'",
             "same": "'1 if same(ans, x) else 0' (same compares the bits of two floats)"}


def _resolve_builtin(name):
    """The callable of a ``math.``/``numpy.`` name, or a RuleError."""
    module, _, short = name.rpartition(".")
    if module == "math" and callable(getattr(math, short, None)) and not short.startswith("_"):
        return getattr(math, short)
    if module == "numpy" and isinstance(getattr(np, short, None), np.ufunc):
        return getattr(np, short)
    raise RuleError(
        f"define({name!r}, ...): {module}.{short} is not a function dualgpu can hook: a rule's "
        "name is math.NAME (a function of the math module), numpy.NAME (a numpy ufunc), or "
        "your own dotted name with the function passed along. Fix: e.g. "
        "define('mylib.softplus', '1 / (1 + exp(-x))', softplus).")


def _arity(function):
    """The number of positional parameters of ``function``, or None when it cannot be read."""
    if isinstance(getattr(function, "nin", None), int):  # a numpy ufunc
        return function.nin
    function = getattr(function, "py_func", function)
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return None
    kinds = [p.kind for p in signature.parameters.values()]
    if inspect.Parameter.VAR_POSITIONAL in kinds:
        return None
    return sum(k in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
               for k in kinds)


def define(name, derivatives, function=None, *, domain=None, ufunc=None, override=False):
    """Add a derivative rule without editing dualgpu (DiffRules' ``@define_diffrule``).

    The rule reaches every path: the Python dual (the simulator backend, host code), compiled
    code (``@njit``, the cpu backend, numba.cuda) and, with a ufunc, host numpy arrays.

    Parameters
    ----------
    name : str
        A dotted name. ``"math.NAME"``: a :mod:`math` function without a rule (``math.exp2``);
        ``math.NAME`` then takes duals in kernels (and :mod:`dualgpu.dmath` has it).
        ``"numpy.NAME"``: a numpy ufunc (``numpy.cbrt``); ``np.NAME`` then takes host duals and
        dual arrays. Any other name (``"mylib.softplus"``) names ``function``, your own.
    derivatives : str or tuple of str
        One expression per argument (one or two arguments), in ``x``, ``y``, ``ans`` (the
        primal's answer) and the functions of :data:`EXPRESSION_FUNCTIONS`, as in the tables
        above.
    function : callable, optional
        The primal, for a name of your own: a plain Python function numba can compile, or a
        ``@njit`` / ``@cuda.jit(device=True)`` function (its Python function is compiled in
        place). Without it (and for a name of your own), ``define`` returns a decorator.
    domain : tuple of (float, float), optional
        Per argument, an interval of smooth inputs, drawn by the tests (default ``(-3, 3)``).
    ufunc : numpy.ufunc, optional
        A numpy ufunc that computes the same function elementwise: ``ufunc(u)`` of a host
        ``DualArray`` (and of a host Dual) then propagates partials too, and the wrapper uses
        it for arrays.
    override : bool, optional
        Replace a built-in rule (``"math.sin"``) or an earlier definition. Default False: a
        name that already has a rule is an error.

    Returns
    -------
    callable
        The wrapper: call it in place of the primal. It gives the primal's value for plain
        numbers, propagates partials for duals (Python and compiled), and applies elementwise
        to host arrays and ``DualArray`` (through ``ufunc`` when given, else element by
        element).

    Raises
    ------
    RuleError
        For a wrong number of derivatives (or one that does not match the function's
        arguments), a derivative that does not parse or uses unknown names, a name that
        already has a rule (without ``override=True``), or a change to a rule that compiled
        code in this process already uses: compiled code keeps the rule it was compiled with,
        so define rules before the first kernel that uses them compiles (at import of your
        module) and restart the process to change one.

    Examples
    --------
    >>> import math
    >>> from dualgpu import Dual, rules
    >>> @rules.define("doc.softplus", "1 / (1 + exp(-x))")
    ... def softplus(x):
    ...     return math.log1p(math.exp(x))
    >>> d = softplus(Dual(0.0, [1.0]))
    >>> round(float(d.value), 6), float(d.partials[0])
    (0.693147, 0.5)
    >>> rules.undefine("doc.softplus")
    """
    if not isinstance(name, str) or "." not in name or not all(
            p.isidentifier() for p in name.split(".")):
        raise RuleError(
            f"define({name!r}, ...): the name must be a dotted name such as 'mylib.softplus' "
            "(your function), 'math.exp2' or 'numpy.cbrt'.")
    module = name.rpartition(".")[0]
    if function is None and module not in _BUILTIN_NAMESPACES:
        def decorator(fn):
            return define(name, derivatives, fn, domain=domain, ufunc=ufunc, override=override)
        return decorator
    texts = _derivative_texts(name, derivatives)
    nargs = len(texts)
    if module in _BUILTIN_NAMESPACES:
        if module in ("operator", "builtins") or name in VALUE_ONLY.values():
            raise RuleError(
                f"define({name!r}, ...): {name} is an operator, builtin or value-only function "
                "of the rule tables, which define() does not replace. Fix: wrap your variant "
                "in a function of your own name, e.g. define('mylib.myfun', ..., myfun).")
        primal = _resolve_builtin(name)
        if function is not None and function is not primal:
            raise RuleError(
                f"define({name!r}, ...): the primal of {name} is {name} itself; pass no "
                "function, or define your own function under a name of your own.")
        function = primal
        if module == "numpy" and ufunc is None:
            ufunc = primal
    if not callable(function):
        raise RuleError(f"define({name!r}, ...): function must be callable; got {function!r}.")
    if ufunc is not None:
        if not isinstance(ufunc, np.ufunc) or ufunc.nin != nargs or ufunc.nout != 1:
            raise RuleError(
                f"define({name!r}, ...): ufunc must be a numpy ufunc of {nargs} argument(s) "
                f"and one output (np.frompyfunc gives object arrays; numba.vectorize or "
                f"np.vectorize do not make one); got {ufunc!r}. Fix: pass e.g. np.cbrt, or "
                "leave ufunc out (the wrapper then applies element by element).")
    arity = _arity(function)
    if arity is not None and arity != nargs:
        raise RuleError(
            f"define({name!r}, ...): {nargs} derivative(s) for a function of {arity} "
            f"argument(s). Fix: give one derivative per argument (in x, y and ans).")
    if domain is None:
        domain = ((-3, 3),) * nargs
    domain = tuple(tuple(float(b) for b in interval) for interval in domain)
    if len(domain) != nargs or not all(len(i) == 2 and i[0] < i[1] for i in domain):
        raise RuleError(
            f"define({name!r}, ...): domain needs one (low, high) interval per argument "
            f"({nargs}); got {domain!r}.")
    builtin = _builtin_key(name)
    if ufunc is not None and builtin is None and (ufunc.__name__ in NUMPY_UFUNCS or (
            ufunc.__name__ in NUMPY_ONLY_RULES and not override)):
        builtin = NUMPY_UFUNCS.get(ufunc.__name__)
        if builtin is None:
            raise RuleError(
                f"define({name!r}, ...): numpy.{ufunc.__name__} already has a built-in rule; "
                "pass override=True to replace it.")
    key = builtin or name
    if builtin is not None and len(lookup(builtin).derivatives) != nargs:
        raise RuleError(f"define({name!r}, ...): the built-in rule takes "
                        f"{len(lookup(builtin).derivatives)} argument(s); got {nargs} derivatives.")
    previous = DEFINED.get(key)
    if not override and builtin is not None:
        raise RuleError(
            f"{name} already has a built-in derivative rule; pass override=True to replace it "
            f"(on every path), e.g. define({name!r}, {texts!r}, override=True).")
    rule = Rule(name, texts, domain)
    if previous is not None and previous.rule == rule and previous.function is function and (
            previous.ufunc is ufunc):
        return previous.wrapper  # the same definition again (the same call run twice)
    if previous is not None and not override:
        raise RuleError(
            f"{name} already has a rule defined with dualgpu.rules.define; pass override=True "
            "to replace it, or dualgpu.rules.undefine it first.")
    _refuse_if_compiled(key, "redefine")
    wrapper = previous.wrapper if previous is not None else _make_wrapper(key, function)
    definition = Definition(name, key, rule, function, ufunc, wrapper)
    DEFINED[key] = definition
    _changed(definition, previous)
    return wrapper


def undefine(name):
    """Remove a rule added with :func:`define` (a built-in rule it replaced applies again).

    Parameters
    ----------
    name : str
        The name given to :func:`define`.

    Raises
    ------
    RuleError
        If there is no such rule, or if compiled code in this process already uses it (see
        :func:`define`).

    Examples
    --------
    >>> from dualgpu import rules
    >>> f = rules.define("doc.twice", "2", lambda x: 2 * x)
    >>> rules.undefine("doc.twice")
    >>> rules.definition_of("doc.twice") is None
    True
    """
    definition = definition_of(name)
    if definition is None:
        raise RuleError(f"undefine({name!r}): no rule was defined under that name with "
                        "dualgpu.rules.define.")
    _refuse_if_compiled(definition.key, "remove")
    del DEFINED[definition.key]
    _changed(None, definition)


def _refuse_if_compiled(key, what):
    if key in _COMPILED:
        raise RuleError(
            f"cannot {what} the rule {key!r}: code compiled in this process already uses it and "
            "would keep the old derivative while new code got the new one. Fix: define rules "
            "before the first kernel that uses them compiles (e.g. at import of your module), "
            "and restart the process to change one.")


def _changed(new, old):
    _FINGERPRINT.clear()
    for listener in _LISTENERS:
        listener(new, old)


def _make_wrapper(key, function):
    def wrapper(*args):
        definition = DEFINED.get(key)
        if definition is None:
            raise RuleError(f"the rule {key!r} was removed (dualgpu.rules.undefine); define it "
                            "again to call this function.")
        for handler in _CALL_HANDLERS:
            result = handler(definition, args)
            if result is not NotImplemented:
                return result
        return definition.function(*args)

    functools.update_wrapper(wrapper, getattr(function, "py_func", function))
    wrapper.__dualgpu_rule__ = key
    return wrapper
