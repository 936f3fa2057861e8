"""Random programs over every rule, on every path: the same value, bit for bit, and agreeing
partials.

hypothesis draws programs for the stack machine of ``property_interpreter`` (every rule of the
table as operators, ``math`` calls, aliases, in-place operators, numpy ufuncs and integer
powers) and their inputs, edge values included (0, -0, +-inf, nan, 1e+-300, float32
extremes). Each program runs on four paths with dual inputs (one seed lane per input):

* ``python``: the pure-Python dual on the host (``math`` made dual-aware, as ``dmath``);
* ``njit``: the interpreter compiled with ``@njit``;
* ``cpu``: the interpreter as a CUDA kernel on the cpu backend;
* ``cudasim``: the same kernel in numba's CUDA simulator.

Checked, instruction by instruction:

1. the value is bit-identical to the plain computation on the same operands (a NaN's sign
   and payload aside: IEEE leaves them unspecified, and libm and numba differ): plain numba
   (the same interpreter compiled for floats) -- except where the plain code on that path is
   numpy (numpy ufuncs on the Python paths, ``x ** n`` on the host), which numba does not
   match bit for bit (``np.minimum(-0.0, 0.0)``);
2. the partials agree between all paths (bit for bit in practice; checked to a few ulps) up to
   the first instruction where their plain values legitimately differ (item 1's exception);
3. the partials equal the chain rule with central finite differences of the plain operation,
   where the operation is smooth at its operands (a generic smoothness test: two step sizes
   agree), and, when JAX is installed, ``jax.jvp`` of the same operation.

Runtime: two compiles per dtype (the plain reference and one compiled dual path), shared by
all examples. ``DUALGPU_HYPOTHESIS_PROFILE=dualgpu-long`` runs many more examples
(conftest.py), ``DUALGPU_PROPERTY_ALL_PATHS=1`` every path in both dtypes, and
``DUALGPU_PROPERTY_JAX=0`` skips the JAX comparison even where JAX is installed.
"""
import functools
import importlib.util
import math
import os
import types as pytypes
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numba import njit

import dualgpu
from dualgpu import DualArray, dmath, rules

import property_interpreter as P

DTYPES = ("float64", "float32")
N_INPUTS = 3  # one seed lane per input
N_CONSTS = 3
MAX_LENGTH = 8
PATHS = ("python", "njit", "cpu", "cudasim")
INF, NAN = math.inf, math.nan
EDGE_VALUES = (
    0.0, -0.0, INF, -INF, NAN, 1.0, -1.0, 0.5, 2.0, 3.0, -2.5, 1e-8, 1e10,
    1e300, -1e300, 1e-300, -1e-300, 5e-324,
    3.4028235e38, -3.4028235e38, 1.17549435e-38, 1.4e-45,  # float32 extremes
    0.1, 0.3, 7.0,  # x % y near its jump: 1.0 % 0.1 is 1 - 9 * 0.1 though 1.0 / 0.1 == 10.0
)
#: partials of different paths: bit for bit is expected, this many ulps are accepted
ULPS = 4


# ---------------------------------------------------------------------------
# the interpreters, compiled once per process
# ---------------------------------------------------------------------------
#: the instructions each dtype's interpreters implement: float32 takes each rule written once
#: as its primal (aliases, in-place forms and ufuncs cost compile time; float64 has them all)
CODES = {"float64": list(range(1, len(P.OPERATIONS))), "float32": P.primary_codes()}
#: the paths run per dtype: the cpu backend in both dtypes (every compile costs seconds; the njit
#: path meets every rule in both dtypes in tests/core/test_rules.py, and the cpu backend compiles
#: the same overloads through its own translation); DUALGPU_PROPERTY_ALL_PATHS=1 runs all four
#: in both
DTYPE_PATHS = {"float64": ("python", "cpu", "cudasim"), "float32": ("python", "cpu", "cudasim")}
if os.environ.get("DUALGPU_PROPERTY_ALL_PATHS", "").strip() in ("1", "true", "yes"):
    DTYPE_PATHS = {dtype: PATHS for dtype in DTYPES}


def _module_source():
    parts = ["import math", "import numpy as np", "from dualgpu import cuda", ""]
    for dtype in DTYPES:
        parts.append(P.interpreter_source(f"interpret_{dtype}", kernel=False, codes=CODES[dtype]))
        parts.append("@cuda.jit")
        parts.append(P.interpreter_source(f"kernel_{dtype}", kernel=True, codes=CODES[dtype]))
    return "\n".join(parts)


@pytest.fixture(scope="module")
def interpreters(tmp_path_factory):
    """The generated module (in a file: the cpu backend reads kernel source)."""
    path = tmp_path_factory.mktemp("property") / "property_programs.py"
    path.write_text(_module_source())
    spec = importlib.util.spec_from_file_location("property_programs", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.lru_cache(maxsize=None)
def _reference(module, dtype):
    """Plain numba, numpy's error model (as kernels): the values every path must give."""
    return njit(error_model="numpy")(getattr(module, f"interpret_{dtype}"))


@functools.lru_cache(maxsize=None)
def _user_njit(module, dtype):
    """The interpreter as a user's @njit function (numba's default error model)."""
    return njit(getattr(module, f"interpret_{dtype}"))


@functools.lru_cache(maxsize=None)
def _python(module, dtype):
    fn = getattr(module, f"interpret_{dtype}")
    return pytypes.FunctionType(fn.__code__, {**fn.__globals__, "math": dmath})


# ---------------------------------------------------------------------------
# running one program
# ---------------------------------------------------------------------------
def _duals(values, dtype, lanes_from):
    values = np.asarray(values, dtype)
    partials = np.zeros((N_INPUTS, values.size), dtype)
    for k in range(min(values.size, N_INPUTS)):
        partials[lanes_from + k, k] = 1.0
    return DualArray(values, partials)


def run_path(module, path, dtype, program, inputs, consts):
    """``(values, partials)`` of every instruction, shape (n,) and (N_INPUTS, n)."""
    n = len(program)
    x = _duals(inputs, dtype, 0)
    out = dualgpu.dual_array(np.zeros(n, dtype), lanes=N_INPUTS)
    stack = dualgpu.dual_array(np.zeros(P.MAX_STACK, dtype), lanes=N_INPUTS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy on inf/nan operands
        if path == "python":
            _python(module, dtype)(program, consts, x, stack, out)
        elif path == "njit":
            try:
                _user_njit(module, dtype)(program, consts, x, stack, out)
            except ZeroDivisionError as error:  # checked by _check_zero_division
                return error
        else:
            warnings.simplefilter("ignore", dualgpu.errors.LaunchCoverageWarning)
            with dualgpu.using_backend(path):  # one thread: the interpreter is serial
                try:
                    getattr(module, f"kernel_{dtype}")[1, 1](program, consts, x, stack, out)
                except ZeroDivisionError as error:
                    if path == "cudasim":
                        raise
                    return error
    return out.values.copy(), out.partials.copy()


def plain_op(module, dtype, code, values, const):
    """Plain numba's value of one operation on plain operands (numpy's error model)."""
    op = P.OPERATIONS[code]
    if op.kinds == "dd":
        program = [[P.PUSH, 0], [P.PUSH, 1], [code, 0]]
    else:
        program = [[P.PUSH, 0], [code, 0]]
    stack, out = np.zeros(P.MAX_STACK, dtype), np.zeros(len(program), dtype)
    operand = [v for v in values if v is not None]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        _reference(module, dtype)(np.array(program, np.int64), np.array([const], dtype),
                                 np.array(operand, dtype), stack, out)
    return out[-1]


#: ``**`` on the host is numpy's scalar power, which is not the C pow numba calls
HOST_POWERS = ("operator.pow", "builtins.pow", "operator.ipow")


def _host_numpy(op):
    return op.ufunc is not None or op.int_power or op.name.split()[0] in HOST_POWERS


def numpy_op(dtype, op, a, b):
    """numpy's value of one instruction (operands in call order)."""
    t = np.dtype(dtype).type
    with np.errstate(all="ignore"):
        if op.int_power:
            return t(t(a) ** int(op.name.split()[-1]))
        if op.ufunc is None:  # a power on numpy scalars
            return t(t(a) ** t(b))
        return t(op.ufunc(t(a)) if op.kinds == "d" else op.ufunc(t(a), t(b)))


def _operand_values(sources, values, inputs, consts):
    out = []
    for kind, k in sources:
        out.append({"input": inputs, "const": consts, "out": values}[kind][k])
    return out


def _operand_partials(sources, partials, dtype):
    lanes = []
    for kind, k in sources:
        if kind == "out":
            lanes.append(partials[:, k].astype(np.float64))
        elif kind == "input":
            lanes.append(np.eye(N_INPUTS)[:, k] if k < N_INPUTS else np.zeros(N_INPUTS))
        else:
            lanes.append(np.zeros(N_INPUTS))
    return lanes


def _same(a, b):
    if a is None or b is None:  # None: the plain code raised
        return a is None and b is None
    a, b = float(a), float(b)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def _close_lanes(p, q, dtype, terms=None):
    """Equal lanes, NaNs and infinities in the same places, finite ones within ULPS ulps of
    the larger of the two, or of ``terms`` (per lane: the size of the chain rule's terms,
    :func:`_term_sizes`) where given."""
    p, q = np.asarray(p, np.float64), np.asarray(q, np.float64)
    if not np.array_equal(np.isnan(p), np.isnan(q)):
        return False
    finite = np.isfinite(p) & np.isfinite(q)
    if not np.array_equal(p[~finite & ~np.isnan(p)], q[~finite & ~np.isnan(q)]):
        return False
    eps = np.finfo(dtype).eps
    scale = np.maximum(np.abs(p[finite]), np.abs(q[finite]))
    if terms is not None:
        scale = np.fmax(scale, np.asarray(terms, np.float64)[finite])
    return bool(np.all(np.abs(p[finite] - q[finite]) <= ULPS * eps * scale))


def _term_sizes(module, dtype, code, operand, lanes):
    """Per lane, the sum of the chain rule's terms' sizes, |da| |df/da| + |db| |df/db|, for
    an instruction on ``operand`` whose dual operands carry ``lanes``; or None.

    A partial that cancels (d/dx x / degrees(x) = 1/y - (x/y) y'/y) is rounded to a few ulps
    of its terms, not of itself: compiled code fuses a multiply and an add where Python
    rounds twice (8e-19 against 0 there), and both are right.
    """
    op = P.OPERATIONS[code]
    values, consts = [0.0] * N_INPUTS, [0.0] * N_CONSTS
    if op.kinds == "dd":
        program, values[:2] = [(P.PUSH, 0), (P.PUSH, 1), (code, 0)], operand
    elif op.kinds == "nd":
        program, consts[0], values[0] = [(P.PUSH, 0), (code, 0)], operand[0], operand[1]
    else:
        program, values[0] = [(P.PUSH, 0), (code, 0)], operand[0]
        if op.kinds == "dn":
            consts[0] = operand[1]
    with np.errstate(all="ignore"):
        try:
            result = run_path(module, "python", dtype, np.array(program, np.int64),
                              np.array(values, dtype),
                              np.array(consts, dtype))
        except Exception:  # noqa: BLE001 - no second opinion: the strict check stands
            return None
        factors = np.abs(result[1][:, -1])
        duals = [lanes[k] for k in range(len(lanes)) if not (op.kinds == "dn" and k == 1)
                 and not (op.kinds == "nd" and k == 0)]
        return sum(np.abs(lane) * factor for lane, factor in zip(duals, factors))


# ---------------------------------------------------------------------------
# derivative oracles: central differences (always) and JAX (when installed)
# ---------------------------------------------------------------------------
#: where an operation is not differentiable or jumps: no oracle is asked there
def _kink(rule, x, y, h):
    if rule in ("abs", "fabs"):
        return abs(x) <= 4 * h
    if rule in ("min", "max", "hypot", "atan2"):
        return abs(x - y) <= 4 * h * max(1.0, abs(x)) or (rule != "min" and rule != "max"
                                                           and abs(x) + abs(y) <= 4 * h)
    if rule in ("floordiv", "mod", "fmod"):
        q = x / y if y else INF
        return not math.isfinite(q) or abs(q - round(q)) <= 1e-3 * max(1.0, abs(q))
    if rule == "remainder":  # jumps where x / y is half an odd integer
        q = x / y if y else INF
        return not math.isfinite(q) or abs(abs(q - math.floor(q)) - 0.5) <= 1e-3 * max(1.0, abs(q))
    if rule == "copysign":
        return abs(x) <= 4 * h or abs(y) <= 4 * h
    if rule == "pow":
        return x <= 4 * h
    return False


def _fd_slopes(module, code, values, const):
    """Central-difference slopes of the plain float64 operation in each dual operand, or None."""
    op = P.OPERATIONS[code]
    duals = [k for k in range(len(values)) if values[k] is not None]
    slopes, noise = [], []
    period = None
    if op.rule in ("floordiv", "mod", "fmod", "remainder"):
        period = {"dd": abs(values[-1] or 0.0), "dn": abs(const), "nd": abs(values[0])}[op.kinds]
    for k in duals:
        scale = abs(values[k]) or 1.0  # the step follows the operand's own size (1e-300 too)
        if period:
            scale = min(scale, period)  # never step over a jump of x mod y
        estimates, size = [], 0.0
        for h in (1e-6, 5e-7):
            step = h * scale
            up, down = list(values), list(values)
            up[k] += step
            down[k] -= step
            try:
                f_up = plain_op(module, "float64", code, up, const)
                f_down = plain_op(module, "float64", code, down, const)
            except ZeroDivisionError:
                return None, None
            with np.errstate(all="ignore"):
                estimates.append((f_up - f_down) / (2 * step))
            size = max(size, abs(f_up), abs(f_down))
        a, b = estimates
        if size < np.finfo(np.float64).tiny / np.finfo(np.float64).eps:
            return None, None  # f underflows near here: differences see 0
        if 5e-7 * scale == 0.0:
            return None, None  # a subnormal operand: no step small enough and nonzero
        # rounding in f(x +- step) makes each slope uncertain by about eps * |f| / step
        with np.errstate(all="ignore"):
            uncertainty = 1e3 * np.finfo(np.float64).eps * size / (5e-7 * scale)
        if not (math.isfinite(a) and math.isfinite(b)) or abs(a - b) > 1e-4 * max(
                abs(a), uncertainty):
            return None, None  # not smooth enough here for a difference to judge
        slopes.append(b + (b - a) / 3)  # Richardson: the h**2 error terms cancel
        noise.append(uncertainty)
    return slopes, noise


def _jax_functions():
    if os.environ.get("DUALGPU_PROPERTY_JAX", "1").strip() in ("0", "false", "no"):
        return None
    try:
        import jax
        import jax.numpy as jnp
        import jax.scipy.special as special
    except ImportError:
        return None
    names = {
        "neg": jnp.negative, "pos": jnp.positive, "abs": jnp.abs, "fabs": jnp.fabs,
        "asin": jnp.arcsin, "acos": jnp.arccos, "atan": jnp.arctan, "asinh": jnp.arcsinh,
        "acosh": jnp.arccosh, "atanh": jnp.arctanh, "erf": special.erf, "erfc": special.erfc,
        "lgamma": special.gammaln, "gamma": special.gamma,
        "add": jnp.add, "sub": jnp.subtract, "mul": jnp.multiply, "truediv": jnp.true_divide,
        "floordiv": jnp.floor_divide, "mod": jnp.remainder, "pow": jnp.power,
        "min": jnp.minimum, "max": jnp.maximum, "atan2": jnp.arctan2,
        "remainder": lambda x, y: x - jnp.round(x / y) * y,  # IEEE (jnp.remainder is Python's %)
    }
    table = {name: names.get(name) or getattr(jnp, name)
             for name in list(rules.UNARY_RULES) + list(rules.BINARY_RULES)}
    return jax, table


JAX = _jax_functions()


def _jax_slopes(code, values, const):
    """d op / d operand by jax.jvp in float64, one per dual operand."""
    jax, table = JAX
    op = P.OPERATIONS[code]
    fn = table[op.rule]
    if op.int_power:
        exponent = int(op.name.split()[-1])
        call = lambda x: fn(x, exponent)  # noqa: E731
        args = [values[0]]
    elif op.kinds == "d":
        call, args = fn, [values[0]]
    elif op.kinds == "dd":
        call, args = fn, list(values)
    elif op.kinds == "dn":
        call, args = (lambda x: fn(x, const)), [values[0]]  # noqa: E731
    else:
        call, args = (lambda y: fn(const, y)), [values[1]]  # noqa: E731
    enable = getattr(jax, "enable_x64", None)
    context = enable(True) if enable is not None else __import__(
        "jax.experimental", fromlist=["enable_x64"]).enable_x64()
    with context:
        primals = [jax.numpy.asarray(a, jax.numpy.float64) for a in args]
        slopes = []
        for k in range(len(args)):
            tangents = [jax.numpy.asarray(1.0 if j == k else 0.0, jax.numpy.float64)
                        for j in range(len(args))]
            slopes.append(float(jax.jvp(call, primals, tangents)[1]))
    return slopes


def _answer_rounding(op, operand, answer, dtype):
    """Per dual operand, how much its factor moves when the answer it reuses moves by an ulp.

    A factor written in ``ans`` (``tanh``: (1 - ans)(1 + ans)) cannot be more accurate than
    the rounded answer: near tanh(x) = 1 a float32 derivative keeps few digits. That much is
    allowed on top of the oracles' tolerance.
    """
    rule = rules.UNARY_RULES.get(op.rule) or rules.BINARY_RULES[op.rule]
    factors = dualgpu.core.dual._RUNTIME[op.rule][1]
    t = np.dtype(dtype).type
    args, const = _plain_args(op, operand)
    x, y = ((const, args[0]) if op.kinds == "nd"
            else (args[0], const if args[1] is None else args[1]))
    x, y, answer = t(x), t(y), t(answer)
    moved = t(np.nextafter(answer, np.inf if answer >= 0 else -np.inf))
    moved = np.nextafter(moved, moved * 2) if dtype == "float32" else moved  # 2 ulps
    wiggle = []
    for k, factor in enumerate(factors):
        if "ans" not in rule.derivatives[k] or not factor.active(t(0).dtype, x, y, answer):
            wiggle.append(0.0)
            continue
        with np.errstate(all="ignore"):
            step = abs(float(factor(np.dtype(dtype), x, y, moved)) -
                       float(factor(np.dtype(dtype), x, y, answer)))
        wiggle.append(step if math.isfinite(step) else 0.0)
    index = {"d": [0], "dd": [0, 1], "dn": [0], "nd": [1]}[op.kinds]
    return [wiggle[i] for i in index if i < len(wiggle)]


def _check_slopes(where, got, slopes, lanes, rtol, slope_atol=None, floor=0.0, dtype="float64"):
    """``got`` (the dual's partials) against the chain rule: sum of slope * operand partials.

    Allowed: ``rtol`` of the sum of |slope * partials| plus each slope's own uncertainty,
    plus ``floor`` (below the dtype's smallest normal number, rounding is absolute). Lanes
    whose derivative overflows the dtype are not compared; when a slope itself overflows, the
    factor is infinite and ``inf * 0`` makes the other lanes NaN unless NaN-safe mode is on.
    """
    slope_atol = slope_atol or [0.0] * len(slopes)
    biggest = float(np.finfo(dtype).max) / 2
    if any(abs(s) > biggest for s in slopes) and not dualgpu.nansafe.NANSAFE_MODE_ENABLED:
        return
    with np.errstate(all="ignore"):
        expected = sum(s * p for s, p in zip(slopes, lanes))
        allowed = sum((rtol * abs(s) + a) * np.abs(p) for s, a, p in zip(slopes, slope_atol, lanes))
    if not (np.all(np.isfinite(expected)) and np.all(np.isfinite(allowed))):
        return
    representable = np.abs(expected) <= biggest
    diff = np.abs(np.asarray(got, np.float64) - expected)[representable]
    allowed = allowed[representable]
    assert np.all(diff <= allowed + floor), (
        f"{where}: partials {np.asarray(got).tolist()} but the chain rule with the oracle's "
        f"slopes {slopes} gives {expected.tolist()}"
    )


# ---------------------------------------------------------------------------
# the check
# ---------------------------------------------------------------------------
def _describe(program, inputs, consts):
    lines = [f"inputs {inputs!r}, consts {consts!r}"]
    for k, (code, arg) in enumerate(program):
        lines.append(f"  {k}: " + ("PUSH" if code == P.PUSH else P.OPERATIONS[code].name)
                     + f" {arg}")
    return "\n".join(lines)


def check_program(module, dtype, program, inputs, consts):
    program = np.array(program, np.int64).reshape(-1, 2)
    assert P.valid(program.tolist())
    assert set(program[:, 0].tolist()) <= {P.PUSH, *CODES[dtype]}, "opcode not in this dtype"
    with np.errstate(all="ignore"):
        inputs = np.array(inputs, np.float64).astype(dtype)
        consts = np.array(consts, np.float64).astype(dtype)
    paths = DTYPE_PATHS[dtype]
    results = {path: run_path(module, path, dtype, program, inputs, consts) for path in paths}
    sources = P.operands(program)
    text = _describe(program, inputs.tolist(), consts.tolist())
    _check_zero_division(results, program, sources, inputs, consts, text)
    paths = [path for path in paths if not isinstance(results[path], Exception)]
    diverged = set()  # paths whose plain values legitimately left the compiled ones
    for k, (code, arg) in enumerate(program):
        if code == P.PUSH:
            continue
        op = P.OPERATIONS[code]
        for path in paths:
            values, partials = results[path]
            operand = _operand_values(sources[k], values, inputs, consts)
            expected, numpy_plain = _expected_value(module, path, dtype, code, operand)
            assert _same(values[k], expected), (
                f"[{path} {dtype}] instruction {k} ({op.name}): value {values[k]!r}, the plain "
                f"computation gives {expected!r}\n{text}"
            )
            if numpy_plain and not _same(expected, _numba_value(module, dtype, code, operand)):
                diverged.add(path)
        # partials: every path agrees with the compiled one until its values diverge legitimately
        compiled = next(path for path in ("cpu", "njit", "cudasim") if path in paths)
        reference = results[compiled][1][:, k]
        for path in paths:
            if path in diverged:
                continue
            assert _close_lanes(results[path][1][:, k], reference, dtype) or _close_lanes(
                results[path][1][:, k], reference, dtype, _term_sizes(
                    module, dtype, code, _operand_values(sources[k], results[compiled][0],
                                                         inputs, consts),
                    _operand_partials(sources[k], results[compiled][1], dtype))), (
                f"[{path} {dtype}] instruction {k} ({op.name}): partials "
                f"{results[path][1][:, k].tolist()}, {compiled} gives {reference.tolist()}"
                f"\n{text}"
            )
            ours, theirs = results[path][0][k], results[compiled][0][k]
            if np.isnan(ours) and np.signbit(ours) != np.signbit(theirs):
                # IEEE leaves a NaN's sign unspecified (libm's log(-1) and numba's differ);
                # copysign(1, nan) reads it, so later partials may legitimately differ
                diverged.add(path)
        _check_against_oracles(module, dtype, program, k, sources[k], results[compiled],
                               inputs, consts, text)


def _numba_value(module, dtype, code, operand):
    """Plain numba's value, or None where plain numba raises ZeroDivisionError."""
    op = P.OPERATIONS[code]
    try:
        return plain_op(module, dtype, code, *_plain_args(op, operand))
    except ZeroDivisionError:
        return None


def _expected_value(module, path, dtype, code, operand):
    """``(value, numpy_plain)``: the plain computation's value of one instruction on ``path``.

    Plain numba's, except where the plain code on that path is numpy: ufuncs on the Python
    paths, ``**`` on the host, and ``0.0 ** -n`` in kernels (numpy's and numba.cuda's inf,
    where the user's @njit raises).
    """
    op = P.OPERATIONS[code]
    a = operand[0]
    b = operand[1] if len(operand) > 1 else None
    python = path in ("python", "cudasim")
    if python and op.ufunc is not None or path == "python" and _host_numpy(op):
        return numpy_op(dtype, op, a, b), True
    value = _numba_value(module, dtype, code, operand)
    if value is None and path != "njit":
        return numpy_op(dtype, op, a, b), True
    return value, False


def _raises_in(path, op, operand):
    """True where plain code on a compiled path raises ZeroDivisionError.

    The user's @njit (error_model="python"): every entry of rules.ZERO_DIVISION_ERRORS. A
    cpu kernel never: it compiles with numpy's error model, and ``0.0 ** -n`` as
    ``dualgpu.core.int_power.power`` (inf, as numba.cuda gives; numba's own integer power
    raises whatever the caller's error model).
    """
    dotted = "operator.pow" if op.int_power else op.name.split()[0]
    entry = rules.ZERO_DIVISION_ERRORS.get(dotted)
    if entry is None or path != "njit":
        return False
    if entry[0] == "zero divisor":
        return operand[1] == 0
    exponent = int(op.name.split()[-1]) if op.int_power else 0
    if exponent >= 0:
        return False
    # numba multiplies |n| times by squaring, then divides 1 by the product: it raises when
    # the product is 0 -- a zero base, or one whose power underflows (1e-300 ** -2)
    base = operand[0]
    product, square, remaining = base.dtype.type(1), base, -exponent
    with np.errstate(all="ignore"):
        while remaining:
            if remaining & 1:
                product = product * square
            remaining >>= 1
            square = square * square
    return product == 0


def _check_zero_division(results, program, sources, inputs, consts, text):
    """Compiled paths raise ZeroDivisionError exactly where their plain code would."""
    # numba's values (the simulator computes as compiled code does; no ufunc raises)
    values = results["cudasim"][0]
    for path in ("njit", "cpu"):
        if path not in results:
            continue
        expected = None
        for k, (code, _) in enumerate(program):
            if code != P.PUSH and _raises_in(
                    path, P.OPERATIONS[code], _operand_values(sources[k], values, inputs, consts)):
                expected = k
                break
        raised = isinstance(results[path], ZeroDivisionError)
        assert raised == (expected is not None), (
            f"[{path}] {'raised ' + repr(results[path]) if raised else 'did not raise'}; its "
            "plain code " + ("does not raise" if expected is None
                             else f"raises ZeroDivisionError at instruction {expected}")
            + f"\n{text}"
        )


def _plain_args(op, operand):
    if op.kinds == "dd":
        return [operand[0], operand[1]], 0.0
    if op.kinds == "dn":
        return [operand[0], None], operand[1]
    if op.kinds == "nd":
        return [operand[1], None], operand[0]
    return [operand[0], None], 0.0


def _check_against_oracles(module, dtype, program, k, sources, result, inputs, consts, text):
    code = program[k, 0]
    op = P.OPERATIONS[code]
    values, partials = result
    operand = [float(v) for v in _operand_values(sources, values, inputs, consts)]
    lanes = _operand_partials(sources, partials, dtype)
    # the dual operands, in the order of the oracle's slopes
    dual_lanes = {"d": lanes[:1], "dd": lanes, "dn": lanes[:1], "nd": lanes[1:]}[op.kinds]
    args, const = _plain_args(op, operand)
    x, y = (args[0], args[1] if args[1] is not None else const)
    if op.kinds == "nd":
        x, y = const, args[0]
    if not all(math.isfinite(v) and abs(v) < 1e6 for v in operand) or not math.isfinite(values[k]):
        return
    if op.rule in ("mod", "fmod", "remainder"):  # exact, at the jump too
        _check_quotient(op, x, y, float(values[k]), dual_lanes, partials[:, k], dtype,
                        f"[njit {dtype}] instruction {k} ({op.name}) at {operand}\n{text}")
    if _kink(op.rule, x, y, 1e-6 * max(1.0, abs(x), abs(y))) or (op.int_power and x == 0):
        return
    where = f"[njit {dtype}] instruction {k} ({op.name}) at {operand}"
    # float32 partials carry float32 rounding of the factor: relative 1e-6, more after
    # cancellation inside a factor; the oracles are float64
    rtol = {"float64": (1e-5, 1e-9), "float32": (2e-3, 2e-3)}[dtype]
    slopes, noise = _fd_slopes(module, code, [float(a) if a is not None else None for a in args],
                               const)
    # a difference of a few tiny is the rounding of an intermediate that underflowed (x ** y
    # at y ~ 1e-308: y * x ** (y - 1) and jax's form differ by 5 tiny, both noise)
    floor = 64 * float(np.finfo(dtype).tiny)
    rounding = _answer_rounding(op, operand, values[k], dtype)
    if slopes is not None and abs(float(values[k])) < 1e6:
        _check_slopes(where + " vs central differences\n" + text, partials[:, k], slopes,
                      dual_lanes, rtol[0], [a + b for a, b in zip(noise, rounding)], floor,
                      dtype)
    if JAX is not None:
        plain = [float(a) for a in args if a is not None]
        if op.kinds == "nd":
            plain = [None, plain[0]]
        _check_slopes(where + " vs jax.jvp\n" + text, partials[:, k],
                      _jax_slopes(code, plain, const), dual_lanes, rtol[1], rounding, floor,
                      dtype)


def _check_quotient(op, x, y, ans, dual_lanes, got, dtype, where):
    """x % y, fmod, remainder are ``x - n y`` with n the quotient the value used: the partials
    are ``dx - n dy`` exactly (even where x / y rounds to the next integer)."""
    with np.errstate(all="ignore"):
        n = np.rint((np.float64(x) - np.float64(ans)) / np.float64(y))
    if not math.isfinite(n) or abs(n) >= 2.0 ** 20 or y == 0:
        return
    has_x, has_y = op.kinds in ("d", "dd", "dn"), op.kinds in ("dd", "nd")
    lanes = list(dual_lanes)
    dx = np.asarray(lanes.pop(0), np.float64) if has_x else 0.0
    dy = np.asarray(lanes.pop(0), np.float64) if has_y else 0.0
    expected = dx - n * dy
    got = np.asarray(got, np.float64)
    if not (np.all(np.isfinite(expected)) and np.all(np.isfinite(got))):
        return
    scale = np.abs(dx) + np.abs(n * dy)
    assert np.all(np.abs(got - expected) <= 4 * np.finfo(dtype).eps * scale), (
        f"{where}: partials {got.tolist()}, but the value is x - {n:g} y: expected "
        f"{expected.tolist()}")


# ---------------------------------------------------------------------------
# strategies
# ---------------------------------------------------------------------------
def _codes(dtype, two):
    return [c for c in CODES[dtype] if (P.OPERATIONS[c].kinds == "dd") == two]

values = st.one_of(
    st.sampled_from(EDGE_VALUES),
    st.floats(-4.0, 4.0),
    st.floats(allow_nan=True, allow_infinity=True),
)


@st.composite
def programs(draw, dtype):
    one, two = _codes(dtype, False), _codes(dtype, True)
    length = draw(st.integers(1, MAX_LENGTH))
    program, depth = [], 0
    for _ in range(length):
        choices = (["push"] if depth < P.MAX_STACK else []) + (["one"] if depth else []) + (
            ["two"] if depth >= 2 else [])
        choice = draw(st.sampled_from(choices))
        if choice == "push":
            program.append((P.PUSH, draw(st.integers(0, N_INPUTS - 1))))
            depth += 1
        elif choice == "two":
            program.append((draw(st.sampled_from(two)), 0))
            depth -= 1
        else:
            program.append((draw(st.sampled_from(one)), draw(st.integers(0, N_CONSTS - 1))))
    return program


def examples(dtype):
    return st.tuples(programs(dtype), st.lists(values, min_size=N_INPUTS, max_size=N_INPUTS),
                     st.lists(values, min_size=N_CONSTS, max_size=N_CONSTS))


@pytest.mark.parametrize("dtype", DTYPES)
def test_random_programs_agree_on_every_path(interpreters, dtype):
    @settings(deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                    HealthCheck.function_scoped_fixture])
    @given(examples(dtype))
    def check(example):
        program, inputs, consts = example
        assert P.valid(program)
        check_program(interpreters, dtype, program, inputs, consts)

    check()


# ---------------------------------------------------------------------------
# the checker itself: it must catch what it is for
# ---------------------------------------------------------------------------
def _code(name):
    return next(c for c, op in enumerate(P.OPERATIONS) if op is not None and op.name == name)


def test_every_rule_is_an_instruction():
    used = {op.rule for op in P.OPERATIONS if op is not None}
    assert used == set(rules.UNARY_RULES) | set(rules.BINARY_RULES)
    ufuncs = {op.ufunc for op in P.OPERATIONS if op is not None and op.ufunc is not None}
    assert ufuncs == {getattr(np, name) for name in rules.NUMPY_UFUNCS}


@pytest.mark.parametrize("dtype", DTYPES)
def test_known_edge_programs(interpreters, dtype):
    """Programs that once gave silently wrong answers (issue 10), pinned as examples."""
    cases = [
        # x % y w.r.t. y with |x / y| >= 2**63
        ([(0, 0), (0, 1), (_code("operator.mod dd"), 0)], [1e30, 3.0, 0.0], [1.0, 1.0, 1.0]),
        ([(0, 0), (0, 1), (_code("math.fmod dd"), 0)], [1e30, 3.0, 0.0], [1.0, 1.0, 1.0]),
        # x % y where x / y rounds up to the next integer: 1.0 % 0.1 = 1 - 9 * 0.1 (issue 25)
        ([(0, 0), (0, 1), (_code("operator.mod dd"), 0)], [1.0, 0.1, 0.0], [1.0, 1.0, 1.0]),
        ([(0, 0), (0, 1), (_code("math.fmod dd"), 0)], [-1.0, 0.1, 0.0], [1.0, 1.0, 1.0]),
        ([(0, 0), (0, 1), (_code("math.remainder dd"), 0)], [7.0, 0.7, 0.0], [1.0, 1.0, 1.0]),
        # min/max with a NaN operand: value and partials from the same operand
        ([(0, 0), (0, 1), (_code("builtins.min dd"), 0)], [NAN, 1.0, 0.0], [1.0, 1.0, 1.0]),
        ([(0, 0), (0, 1), (_code("builtins.max dd"), 0)], [1.0, NAN, 0.0], [1.0, 1.0, 1.0]),
        ([(0, 0), (0, 1), (_code("np.maximum dd"), 0)], [-0.0, 0.0, 0.0], [1.0, 1.0, 1.0]),
        ([(0, 0), (0, 1), (_code("np.floor_divide dd"), 0)], [INF, 1.0, 0.0], [1.0, 1.0, 1.0]),
        # points where factors divide by zero
        ([(0, 0), (_code("sqrt"), 0), (0, 1), (_code("math.atan2 dd"), 0)], [0.0, 0.0, 0.0],
         [1.0, 1.0, 1.0]),
        # a power of zero with a negative int exponent in a kernel: inf, as numba.cuda's
        ([(0, 0), (_code("** -1"), 0)], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]),
        # lgamma at a pole below -2**63: compiled floor() overflowed int64 and missed it
        ([(0, 0), (_code("lgamma"), 0)], [-3.4028235e38, 0.0, 0.0], [0.0, 0.0, 0.0]),
        # a partial that cancels: d/dx x / degrees(x) = 0 up to rounding (fma or not)
        ([(0, 0), (0, 0), (_code("degrees"), 0), (_code("operator.truediv dd"), 0)],
         [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]),
    ]
    for program, inputs, consts in cases:
        if {code for code, _ in program} <= {P.PUSH, *CODES[dtype]}:
            check_program(interpreters, dtype, program, inputs, consts)


def test_the_check_catches_wrong_values_and_partials(interpreters, monkeypatch):
    program = [(0, 0), (_code("sin"), 0)]
    check_program(interpreters, "float64", program, [0.3, 1.0, 0.0], [0.0, 0.0, 0.0])
    sin = dmath.sin

    def off_value(d):  # one ulp off
        right = sin(d)
        return dualgpu.Dual(np.nextafter(right.value, np.inf), right.partials)

    def off_partials(d):  # a derivative 1e-9 off
        right = sin(d)
        return dualgpu.Dual(right.value, right.partials * (1 + 1e-9))

    for wrong, message in ((off_value, "value .* the plain computation gives"),
                           (off_partials, "partials .* cpu gives")):
        monkeypatch.setattr(dmath, "sin", wrong)
        with pytest.raises(AssertionError, match=r"\[python float64\] instruction 1 \(sin\): "
                           + message):
            check_program(interpreters, "float64", program, [0.3, 1.0, 0.0], [0.0, 0.0, 0.0])


def test_the_oracles_catch_a_wrong_derivative():
    lanes = [np.array([1.0, 0.0, 0.0])]
    _check_slopes("sin", np.array([math.cos(0.3), 0.0, 0.0]), [math.cos(0.3)], lanes, 1e-5)
    with pytest.raises(AssertionError, match="chain rule"):
        _check_slopes("sin", np.array([math.cos(0.3) * 1.001, 0.0, 0.0]), [math.cos(0.3)],
                      lanes, 1e-5)
