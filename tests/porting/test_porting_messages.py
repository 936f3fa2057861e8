"""Messages of issue 44: none suggests dropping a derivative; cpu and cudasim refuse alike.

A dual stored into a complex array on cudasim suggested ``d.value``, which would drop the
derivative silently; complex physics with duals on the cpu backend failed inside numba (or a
generated launcher) where cudasim gave the clear complex-number refusal.
"""
import ast
import cmath
import inspect
import math
import pathlib
import re

import numpy as np
import pytest

import dualgpu
from dualgpu import cuda
from dualgpu.errors import COMPLEX_DUAL, DualgpuError, MissingRuleError

BACKENDS = ["cpu", "cudasim"]
PACKAGE = pathlib.Path(dualgpu.__file__).parent


@cuda.jit
def _store_into_complex(u, z):
    i = cuda.grid(1)
    if i < u.shape[0]:
        z[i] = u[i]


@cuda.jit
def _complex_product(u, out, k):
    i = cuda.grid(1)
    if i < u.shape[0]:
        out[i] = (u[i] * cmath.exp(-1j * k)).real


@cuda.jit
def _cmath_of_dual(u, out):
    i = cuda.grid(1)
    if i < u.shape[0]:
        out[i] = cmath.exp(u[i]).real


@cuda.jit
def _complex_of_dual(u, out):
    i = cuda.grid(1)
    if i < u.shape[0]:
        out[i] = complex(math.cos(u[i]), math.sin(u[i])).real


@cuda.jit(device=True)
def _phase(x):
    return cmath.exp(1j * x)


@cuda.jit
def _complex_in_device_function(u, out):
    i = cuda.grid(1)
    if i < u.shape[0]:
        out[i] = _phase(u[i]).real


@cuda.jit
def _complex_with_tuple(uv, out, c):
    i = cuda.grid(1)
    u, v = uv
    if i < u.shape[0]:
        out[i] = (u[i] * c).real + v[i]


@cuda.jit
def _sign_of_dual(u, out):
    i = cuda.grid(1)
    if i < u.shape[0]:
        out[i] = np.sign(u[i]) * u[i]


def _line(kernel, text):
    lines, first = inspect.getsourcelines(kernel.py_func)
    return first + next(k for k, line in enumerate(lines) if text in line)


def _launched(kernel, *args):
    """Launch ``kernel`` on 4 threads; return its output (the second argument)."""
    kernel[1, 4](*args)
    return args[1]


CASES = {
    "store": (lambda u: _launched(_store_into_complex, u, cuda.to_device(np.zeros(4, complex))),
              _store_into_complex, "z[i] = u[i]", None),
    "product": (lambda u: _launched(_complex_product, u, cuda.device_array_like(u), 0.3),
                _complex_product, "cmath.exp(-1j", lambda x: np.full_like(x, math.cos(0.3))),
    "cmath": (lambda u: _launched(_cmath_of_dual, u, cuda.device_array_like(u)),
              _cmath_of_dual, "cmath.exp(u[i])", np.exp),
    "complex()": (lambda u: _launched(_complex_of_dual, u, cuda.device_array_like(u)),
                  _complex_of_dual, "complex(math.cos", lambda x: -np.sin(x)),
    "device function": (lambda u: _launched(_complex_in_device_function, u,
                                            cuda.device_array_like(u)),
                        _phase, "cmath.exp(1j * x)", lambda x: -np.sin(x)),
    "tuple argument": (lambda u: _complex_with_tuple[1, 4]((u, u), cuda.device_array_like(u), 1j),
                       _complex_with_tuple, "(u[i] * c)", None),
}


def test_a_dual_stored_into_a_plain_complex_array_names_the_fix_on_the_cpu_backend():
    """Compiled kernels carry complex duals, but a plain complex array cannot hold partials:
    the message names the array and the allocation that fixes it."""
    launch, where, text, _ = CASES["store"]
    u = dualgpu.dual_array(np.linspace(0.0, 1.0, 4), np.ones((1, 4)))
    with dualgpu.using_backend("cpu"):
        with pytest.raises(DualgpuError) as info:
            launch(u)
    message = str(info.value)
    assert "stores a dual into the plain array argument(s) z" in message
    assert "Allocate" in message and ".value" not in message


def test_a_dual_stored_into_a_plain_complex_array_is_refused_on_cudasim():
    launch, where, text, _ = CASES["store"]
    u = dualgpu.dual_array(np.linspace(0.0, 1.0, 4), np.ones((1, 4)))
    with dualgpu.using_backend("cudasim"):
        with pytest.raises(DualgpuError) as info:
            launch(u)
    message = str(info.value)
    assert COMPLEX_DUAL in message and ".value" not in message
    assert f"test_porting_messages.py:{_line(where, text)}" in message


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(name for name, c in CASES.items() if c[3] is not None))
def test_complex_arithmetic_with_duals_differentiates(case, backend):
    """Kernels with complex arithmetic on duals (cmath, complex(), a device function, a tuple
    argument) on the cpu backend and cudasim: derivatives against the closed form and
    central differences."""
    launch, _, _, derivative = CASES[case]
    x = np.linspace(0.1, 0.9, 4)

    def f(u):
        return launch(u).copy_to_host()

    with dualgpu.using_backend(backend):
        J = dualgpu.jacobian(f, x)
        h = 1e-6
        fd = (f(x + h) - f(x - h)) / (2 * h)
    np.testing.assert_allclose(np.diag(J), derivative(x), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.diag(J), fd, rtol=1e-7, atol=1e-8)
    np.testing.assert_array_equal(J - np.diag(np.diag(J)), 0.0)


#: what a message that names ``.value``/``.values`` must also say (within 200 characters): that
#: it drops the derivative, that it is for when no derivative is wanted, or that it is about
#: indices (which carry no derivative) or the partials themselves
_SAYS_WHAT_IT_COSTS = re.compile(
    r"no derivative|drops (its|the) derivative|silently drops|without (its|the) derivative|"
    r"index|indices|argsort|This happens|a dropped partial|\.partials")


def _message_text(call):
    """The literal text of an exception's or warning's message (f-string holes left out)."""
    return "".join(node.value for arg in call.args for node in ast.walk(arg)
                   if isinstance(node, ast.Constant) and isinstance(node.value, str))


def test_no_message_suggests_value_where_a_derivative_must_flow():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            name = getattr(getattr(node, "func", None), "id",
                           getattr(getattr(node, "func", None), "attr", ""))
            if not (isinstance(node, ast.Call) and (name.endswith(("Error", "Warning"))
                                                    or name == "warn")):
                continue
            text = _message_text(node)
            for found in re.finditer(r"\.values?\b", text):
                window = text[max(0, found.start() - 200):found.end() + 200]
                if not _SAYS_WHAT_IT_COSTS.search(window):
                    offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {window!r}")
    assert not offenders, "\n".join(offenders)


def test_a_call_numba_has_no_dual_version_of_is_named_with_its_line_on_cpu():
    """cpu: numba's bare TypingError became a refusal naming the call, the line and the fix."""
    u = dualgpu.dual_array(np.linspace(-1.0, 1.0, 4), np.ones((1, 4)))
    with dualgpu.using_backend("cpu"):
        out = np.zeros(4)
        _sign_of_dual[1, 4](u.values, out)  # plain: numba's own np.sign
        assert out.tolist() == pytest.approx(np.abs(u.values).tolist())
        with pytest.raises(MissingRuleError) as info:
            _sign_of_dual[1, 4](u, cuda.device_array_like(u))
    # (a dual type names the digest of rules defined earlier in the process: left out here)
    message = re.sub(r", rules=[0-9a-f]+", "", str(info.value))
    line = _line(_sign_of_dual, "np.sign(u[i])")
    assert message.startswith(f"kernel _sign_of_dual (at {__file__}:{line}): "
                              "sign(Dual(float64, 1)) has no dual version")
    assert "Fix: write it with operations that take duals" in message


@cuda.jit
def _double_into(a, b):
    i = cuda.grid(1)
    if i < a.shape[0]:
        b[i] = 2.0 * a[i]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_write_into_a_read_only_array_names_the_argument_and_the_fix(backend):
    """Writing into a read-only array (np.broadcast_to, a lent buffer) names the argument,
    not numba's setitem typing failure; the read-only input it only reads is not blamed."""
    a = np.ones(4)
    a.flags.writeable = False  # read only, and only read: fine
    b = np.zeros(4)
    b.flags.writeable = False
    with dualgpu.using_backend(backend):
        with pytest.raises(DualgpuError, match=r"read-only array: argument b \(") as info:
            _double_into[1, 4](a, b)
    assert "argument a" not in str(info.value) and "np.array(a)" in str(info.value)
    np.testing.assert_array_equal(b, 0.0)
    if backend == "cpu":  # (numba's simulator copies every host array back, as a GPU does)
        with dualgpu.using_backend(backend):
            _double_into[1, 4](a, np.zeros(4))  # a read-only array that is only read


@cuda.jit
def _whole_row(u, out):
    i = cuda.grid(1)
    if i < u.shape[0]:
        out[i] = 2.0 * u[i]  # a row, for a 2-D u: array arithmetic, which kernels cannot do


def test_arithmetic_on_a_whole_dual_array_in_a_kernel_names_the_line_and_the_fix():
    # numba's raw TypingError "mul(float64, DualArray(...))" on the cpu backend (unseen round)
    def f(x):
        d = cuda.to_device(x)
        out = cuda.device_array_like(d)
        _whole_row[1, 32](d, out)
        return out.copy_to_host()

    with dualgpu.using_backend("cpu"), pytest.raises(DualgpuError) as info:
        dualgpu.jacobian(f, np.ones((2, 3)))
    message = str(info.value)
    assert "kernel _whole_row (at " in message and "test_porting_messages.py:" in message
    assert "works on a whole array" in message and "index every dimension" in message
