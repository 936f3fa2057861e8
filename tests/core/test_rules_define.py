"""Rules added with ``dualgpu.rules.define``, checked like the built-in ones on every path.

The rules of ``rules_define_lib`` (a plain Python function, one of two arguments, a @njit
function and ``math.exp2`` with its ufunc) are written out by the generated harness of
tests/fixtures/rule_harness.py and checked against 5-point central differences on the Python dual,
``@njit``, a cpu-backend kernel and a simulator-backend kernel (``dualgpu.jit``, a small
grid), for float32 and float64; PTX compilation for numba.cuda; host numpy arrays; and the
errors (wrong arity, a clash with a built-in rule, a derivative that does not parse, a change
after compilation).
"""
import functools
import importlib.util
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from numba import cuda, njit, types

import dualgpu
from dualgpu import Dual, DualArray, dmath, rules
from dualgpu.compiled.arrays import dual_array_type

import rules_define_lib as lib
from rule_harness import (
    build_function,
    check_results,
    defined_cases,
    draw_inputs,
    kernel_source,
    module_source,
)

DTYPES = [np.float32, np.float64]
KINDS = [("d",), ("d", "d"), ("d", "n"), ("n", "d")]
PATHS = ["python", "njit", "cpu", "cudasim"]
COUNT = 3
LANES = 3


def cases_for(kinds):
    return [c for c in defined_cases(lib.NAMES) if c[3] == len(kinds)]


def operand(kind, values, partials, dtype):
    if kind == "d":
        return DualArray(values.astype(dtype), partials.astype(dtype))
    return values.astype(dtype)


@functools.lru_cache(maxsize=None)
def backend_kernel(kinds, directory):
    """``dualgpu.jit`` of the harness's kernel, written to a module file as a user writes it."""
    # a module name of this process only: the cpu backend's disk cache then never reloads an
    # entry written by another run (numba rebuilds a cached kernel's environment by module)
    name = f"rules_define_kernel_{''.join(kinds)}_{os.getpid()}"
    path = Path(directory) / f"{name}.py"
    path.write_text(module_source(cases_for(kinds), kinds, ["import math",
                                                           "import rules_define_lib"]))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dualgpu.jit(module.kernel)


def run_path(path, kinds, dtype, xs, ys, px, py, directory):
    cases = cases_for(kinds)
    x = operand(kinds[0], xs, px, dtype)
    y = operand(kinds[1] if len(kinds) > 1 else "n", ys, py, dtype)
    out = dualgpu.dual_array(np.zeros(len(cases)), lanes=LANES, dtype=dtype)
    plain = kernel_source(cases, kinds, cuda_kernel=False)
    if path == "python":
        build_function(plain, {"math": dmath, "rules_define_lib": lib})(x, y, out)
    elif path == "njit":
        njit(build_function(plain, {"math": math, "rules_define_lib": lib}))(x, y, out)
    else:
        with dualgpu.using_backend(path):
            backend_kernel(kinds, directory)[2, 4](x, y, out)  # 8 threads, one does the work
    return out


@pytest.fixture(scope="module")
def kernel_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("rules_define_kernels"))


@pytest.mark.parametrize("kinds", KINDS, ids="".join)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("path", PATHS)
def test_defined_rules_match_finite_differences(path, dtype, kinds, kernel_dir):
    cases = cases_for(kinds)
    rng = np.random.default_rng(len(kinds) * 7 + len(path))
    xs, ys = draw_inputs(cases, rng, count=COUNT)
    px = rng.normal(size=(COUNT, LANES, len(cases)))
    py = rng.normal(size=(COUNT, LANES, len(cases)))
    where = f"{path} {np.dtype(dtype).name} {''.join(kinds)}"
    for row in range(COUNT):
        out = run_path(path, kinds, dtype, xs[row], ys[row], px[row], py[row], kernel_dir)
        assert out.dtype == np.dtype(dtype)
        check_results(cases, kinds, xs[row], ys[row], px[row], py[row], out.values,
                      out.partials, dtype, where=where)


@pytest.mark.parametrize("kinds", KINDS, ids="".join)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_defined_rules_compile_to_ptx(offline_ptx, dtype, kinds):
    dt = {"float32": types.float32, "float64": types.float64}[dtype]
    fn = build_function(kernel_source(cases_for(kinds), kinds, cuda_kernel=True),
                        {"math": math, "cuda": cuda, "rules_define_lib": lib})

    def arg(kind):
        return dual_array_type(dt, 1, LANES) if kind == "d" else types.Array(dt, 1, "C")

    ptx, _ = cuda.compile_ptx(fn, (arg(kinds[0]), arg(kinds[1] if len(kinds) > 1 else "n"),
                                   dual_array_type(dt, 1, LANES)), cc=offline_ptx)
    assert ".entry" in ptx


# --- the wrapper: plain numbers, duals, host arrays --------------------------------------

def test_wrapper_is_the_function_for_plain_numbers():
    assert lib.softplus(0.5) == math.log1p(math.exp(0.5))
    assert lib.softplus.__name__ == "softplus" and "log(1 + e^x)" in lib.softplus.__doc__
    assert njit(lambda v: lib.softplus(v) + lib.softsign(v))(0.5) == pytest.approx(
        math.log1p(math.exp(0.5)) + 0.5 / 1.5, rel=1e-15)
    assert lib.exp2(3.0) == 8.0 and dmath.exp2(3.0) == 8.0


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_host_arrays_elementwise(dtype):
    x = np.linspace(-2, 2, 5).astype(dtype)
    u = DualArray(x, np.stack([np.ones(5), np.arange(5.0)]).astype(dtype))
    for fn, slope in ((lib.softplus, 1 / (1 + np.exp(-x.astype(np.float64)))),
                      (lib.softsign, 1 / (1 + np.abs(x.astype(np.float64))) ** 2),
                      (lib.exp2, np.log(2) * np.exp2(x.astype(np.float64))),
                      (np.exp2, np.log(2) * np.exp2(x.astype(np.float64)))):
        r = fn(u)
        assert isinstance(r, DualArray) and r.dtype == np.dtype(dtype), fn
        tol = 1e-6 if dtype == np.float32 else 1e-14
        np.testing.assert_allclose(r.partials, slope * u.partials, rtol=tol, atol=tol)
    plain = lib.softplus(x)  # a plain array: the values, element by element
    assert isinstance(plain, np.ndarray) and plain.dtype == np.dtype(dtype)
    both = lib.logaddexp(u, x[::-1].copy())
    np.testing.assert_allclose(both.partials, np.exp(x - both.values) * u.partials, rtol=1e-5)


def test_numpy_ufunc_on_a_host_dual_and_in_compiled_code():
    d = Dual(1.0, [1.0, 2.0])
    for got in (np.exp2(d), njit(lambda v: np.exp2(v))(d), lib.exp2(d), dmath.exp2(d)):
        assert float(got.value) == 2.0
        np.testing.assert_allclose(got.partials, [2 * math.log(2), 4 * math.log(2)], rtol=1e-15)


def test_second_order_python_duals():
    # duals of duals (dualgpu.hessian's Python path): the rule applies at both levels
    inner = Dual(0.3, [1.0])
    outer = Dual(inner, [Dual(1.0, [0.0])], tag=1)
    d2 = lib.softplus(outer).partials[0].partials[0]
    s = 1 / (1 + math.exp(-0.3))
    assert d2 == pytest.approx(s * (1 - s), rel=1e-12)


def test_definitions_are_listed_and_fingerprinted():
    assert rules.definition_of("math.exp2").ufunc is np.exp2
    assert rules.lookup("rules_define_lib.softplus").derivatives == ("1 / (1 + exp(-x))",)
    assert "rules_define_lib.softplus" in rules.fingerprint()
    before = rules.fingerprint()
    f = rules.define("test_rules_define.tmp", "2", lambda x: 2 * x)
    assert rules.fingerprint() != before and f(Dual(1.0, [1.0])).partials.tolist() == [2.0]
    rules.undefine("test_rules_define.tmp")
    assert rules.fingerprint() == before


def test_the_same_definition_twice_is_one_rule():
    # the same call again (docs/user/rules.md defines math.exp2 as rules_define_lib does)
    again = rules.define("math.exp2", "ans * 0.6931471805599453", ufunc=np.exp2)
    assert again is lib.exp2


# --- errors: each names the fix --------------------------------------------------------

@pytest.mark.parametrize("call, match", [
    (lambda: rules.define("math.sin", "cos(x)"),
     r"math\.sin already has a built-in .*override=True"),
    (lambda: rules.define("numpy.minimum", ("1", "0")), r"already has a built-in .*override=True"),
    (lambda: rules.define("math.atan2", "1", override=True), r"for a function of 2 argument"),
    (lambda: rules.define("m.f", ("1", "1", "1"), lambda x, y, z: x), r"one or two arguments"),
    (lambda: rules.define("m.f", ("1", "1"), lambda x: x),
     r"2 derivative\(s\) for a function of 1"),
    (lambda: rules.define("m.f", "1 +", lambda x: x), r"not a Python expression"),
    (lambda: rules.define("m.f", "sigmoid(x)", lambda x: x), r"uses 'sigmoid'.*Fix"),
    (lambda: rules.define("m.f", "math.cos(x)", lambda x: x), r"attribute syntax"),
    (lambda: rules.define("m.f", "'1'", lambda x: x), r"literal"),
    (lambda: rules.define("m.f", (), lambda x: x), r"derivatives must be"),
    (lambda: rules.define("softplus", "1", lambda x: x), r"dotted name"),
    (lambda: rules.define("math.nosuch", "1"), r"not a function dualgpu can hook"),
    (lambda: rules.define("math.floor", "0"), r"value-only"),
    (lambda: rules.define("operator.add", ("1", "1")), r"operator, builtin"),
    (lambda: rules.define("m.f", "1", lambda x: x, ufunc=np.add), r"ufunc must be a numpy ufunc"),
    (lambda: rules.define("m.f", "1", lambda x: x, domain=((1, 0),)), r"domain"),
    (lambda: rules.define("rules_define_lib.softplus", "0.5", lambda x: x), r"override=True"),
    (lambda: rules.undefine("m.never"), r"no rule was defined"),
    # expressions that could never compile: refused at define, naming the rule and the problem
    (lambda: rules.define("m.f", "y", lambda x: x), r"'m\.f'.*uses 'y'.*function of one"),
    (lambda: rules.define("m.f", "exp(x, 2)", lambda x: x), r"'m\.f'.*calls exp with 2 .*takes 1"),
    (lambda: rules.define("m.f", "same(x)", lambda x: x), r"calls same with 1 .*takes 2"),
    (lambda: rules.define("m.f", "pow(x)", lambda x: x), r"calls pow with 1 .*pow\(x, 2\)"),
    (lambda: rules.define("m.f", "x(2)", lambda x: x), r"calls 'x'"),
    (lambda: rules.define("m.f", "2 * exp", lambda x: x), r"names the function exp without"),
])
def test_bad_definitions_name_the_fix(call, match):
    with pytest.raises(rules.RuleError, match=match):
        call()
    assert rules.definition_of("m.f") is None


def test_a_rule_compiled_into_code_cannot_change():
    njit(lambda v: lib.softplus(v))(Dual(0.0, [1.0]))  # compiled code now uses the rule
    with pytest.raises(rules.RuleError, match="already uses it.*restart the process"):
        rules.define("rules_define_lib.softplus", "0.5", lib.softplus.__wrapped__, override=True)
    with pytest.raises(rules.RuleError, match="already uses it"):
        rules.undefine("rules_define_lib.softplus")


#: Rules defined in a fresh process (defined rules are process-wide and cannot be removed once
#: compiled): one process runs the sections in order, each defining its rules just before it
#: uses them, and prints ``<section> ok`` (or the traceback and ``<section> failed``); a section
#: that fails leaves the later ones to run. The cpu backend reads kernels' source, so the
#: script is a file.
FRESH_PROCESS = textwrap.dedent("""
    import math
    import traceback

    import numpy as np
    from numba import njit

    import dualgpu
    from dualgpu import Dual, MissingRuleError, cuda, rules


    def section(name, body):
        try:
            body()
        except BaseException:
            traceback.print_exc()
            print(name, "failed", flush=True)
        else:
            print(name, "ok", flush=True)


    # --- after_a_kernel_compiled: a math function without a rule refuses duals in compiled
    # code; once defined, the same @njit function compiles (numba keeps no failed typing); a
    # built-in rule replaced before its first compilation applies everywhere; after, it
    # cannot change
    def after_a_kernel_compiled():
        f = njit(lambda d: math.nextafter(d, 2.0))
        d = Dual(2.5, [1.0])
        try:
            f(d)
        except MissingRuleError as error:
            assert "math.nextafter has no derivative rule" in str(error)
        else:
            raise AssertionError("no error")
        rules.define("math.nextafter", ("1", "0"), domain=((2.4, 2.6), (3, 4)))
        assert f(d).partials[0] == 1.0 and f(d).value == math.nextafter(2.5, 2.0)
        assert dualgpu.dmath.nextafter(d, 2.0).partials[0] == f(d).partials[0]

        rules.define("math.tanh", "1 - ans * ans", override=True)  # before any compilation
        g = njit(lambda d: math.tanh(d))
        t = Dual(0.5, [1.0])
        for got in (g(t), dualgpu.dmath.tanh(t), np.tanh(t),
                    np.tanh(dualgpu.dual_array([0.5], [[1.0]]))):
            assert np.all(got.partials == 1 - np.tanh(0.5) ** 2), got
        try:
            rules.define("math.tanh", "(1 - ans) * (1 + ans)", override=True)
        except rules.RuleError as error:
            assert "already uses it" in str(error)
        else:
            raise AssertionError("no error")


    section("after_a_kernel_compiled", after_a_kernel_compiled)


    # --- overridden_under_hessian: atan overridden with a (deliberately different) rule gives
    # the override's second derivative on the cpu backend as on cudasim
    @cuda.jit
    def atan_kernel(u, out):
        i = cuda.grid(1)
        if i < u.shape[0]:
            out[i] = math.atan(u[i])


    def overridden_under_hessian():
        rules.define("math.atan", "2 * x", override=True)  # before the kernel compiles

        def f(u):
            d_u = cuda.to_device(u)
            out = cuda.device_array_like(d_u)
            atan_kernel[1, 4](d_u, out)
            return out.sum()

        u = np.array([0.3, -0.6])
        for backend in ("cpu", "cudasim"):
            with dualgpu.using_backend(backend):
                H = dualgpu.hessian(f, u)
            assert np.allclose(H, np.diag([2.0, 2.0]), rtol=1e-12, atol=0), (backend, H)


    section("overridden_under_hessian", overridden_under_hessian)


    # --- in_a_kernel: rules of one's own (a decorator, two arguments, a math function without
    # a built-in rule, the function rules.define returns) in a kernel: the Jacobian against
    # central differences, the dual value equal to the compiled plain one
    @rules.define("user.softplus", "1 / (1 + exp(-x))")
    def softplus(x):
        return math.log1p(math.exp(x))


    def _blend(x, y):
        return x * x * y + math.sin(y)


    blend = rules.define("user.blend", ("2 * x * y", "x * x + cos(y)"), _blend)
    exp2 = rules.define("math.exp2", "ans * 0.6931471805599453")


    @cuda.jit
    def user_rules_kernel(x, out):
        i = cuda.grid(1)
        n = x.shape[0]
        if i < n:
            a = x[i]
            b = x[(i + 1) % n]
            out[i] = (softplus(a) * 2.0 + blend(a, b) + blend(a, 0.5) + blend(2.0, b)
                      + math.exp2(a) + exp2(b))


    def in_a_kernel():
        def f(x):
            d = cuda.to_device(x)
            o = cuda.device_array_like(d)
            user_rules_kernel[1, 5](d, o)
            return o.copy_to_host()

        def ref(x):
            n = len(x)
            return np.array([math.log1p(math.exp(x[i])) * 2 + _blend(x[i], x[(i + 1) % n])
                             + _blend(x[i], 0.5) + _blend(2.0, x[(i + 1) % n]) + 2 ** x[i]
                             + 2 ** x[(i + 1) % n] for i in range(n)])

        x = np.linspace(0.2, 1.0, 5)
        J_fd = np.array([(ref(x + e) - ref(x - e)) / 2e-6 for e in np.eye(5) * 1e-6]).T
        for backend, dtype, rtol in (("cpu", np.float64, 1e-6), ("cudasim", np.float32, 1e-3)):
            with dualgpu.using_backend(backend):
                J = dualgpu.jacobian(f, x.astype(dtype))
                out, _ = dualgpu.jvp(f, (x.astype(dtype),), (np.ones(5, dtype),))
            np.testing.assert_allclose(J, J_fd, rtol=rtol, atol=rtol)
            with dualgpu.using_backend("cpu"):
                plain = f(x.astype(dtype))
            np.testing.assert_array_equal(out, plain)  # the compiled plain value


    section("in_a_kernel", in_a_kernel)
""")


@pytest.fixture(scope="module")
def fresh_process(tmp_path_factory):
    """FRESH_PROCESS run once: its output, and ``{section: "ok" or "failed"}``."""
    path = tmp_path_factory.mktemp("rules_fresh") / "rules_in_a_fresh_process.py"
    path.write_text(FRESH_PROCESS)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          timeout=600, env=env)
    status = dict(line.split() for line in done.stdout.split("\n")
                  if line.endswith((" ok", " failed")))
    return done, status


def _section_ok(fresh_process, name):
    done, status = fresh_process
    assert status.get(name) == "ok", (done.returncode, done.stdout[-2000:], done.stderr[-3000:])


def test_rules_defined_after_a_kernel_compiled(fresh_process):
    _section_ok(fresh_process, "after_a_kernel_compiled")


def test_an_overridden_built_in_rule_under_hessian_in_compiled_code(fresh_process):
    """Second-order compiled code read the built-in table, not the override (first order and
    the Python duals did)."""
    _section_ok(fresh_process, "overridden_under_hessian")


def test_rule_defined_by_the_user_in_a_kernel(fresh_process):
    _section_ok(fresh_process, "in_a_kernel")


@dualgpu.cuda.jit
def energy_terms(u, out):
    i = dualgpu.cuda.grid(1)
    if i < u.shape[0]:
        v = u[i]
        out[i] = (lib.softplus(v) * v + lib.logaddexp(v, 0.5 * v) + math.exp2(v)
                  + lib.softsign(v) * v)


def _energy(kernel, u):
    from dualgpu import cuda as dcuda

    d_u = dcuda.to_device(u)
    out = dcuda.device_array_like(d_u)
    kernel[1, 8](d_u, out)
    return out.sum()


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_defined_rules_under_hessian(backend, dtype):
    """Issue 43: a defined rule under ``hessian`` on the cpu backend failed with numba's
    TypingError (second-order duals in compiled code had no lowering for defined rules)."""
    kernel = energy_terms
    u = np.array([-0.4, 0.2, 0.9], dtype)
    with dualgpu.using_backend(backend):
        H = dualgpu.hessian(lambda x: _energy(kernel, x), u)
        grad = lambda x: np.asarray(dualgpu.jacobian(lambda y: _energy(kernel, y), x))  # noqa
        h = 1e-2 if dtype is np.float32 else 1e-5
        fd = np.stack([(grad(u + h * e) - grad(u - h * e)) / (2 * h)
                       for e in np.eye(3, dtype=dtype)], axis=-1)
    v = u.astype(np.float64)
    s = 1 / (1 + np.exp(-v))
    second = (2 * s + v * s * (1 - s)  # softplus(v) * v
              + 0.25 * np.exp(v) * np.exp(0.5 * v) / (np.exp(v) + np.exp(0.5 * v)) ** 2
              + np.log(2) ** 2 * np.exp2(v)  # exp2
              + 2 / (1 + np.abs(v)) ** 3)  # softsign(v) * v = v^2 / (1 + |v|)
    tol = dict(rtol=2e-3, atol=2e-3) if dtype is np.float32 else dict(rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(H, np.diag(second), **tol)
    np.testing.assert_allclose(H, fd.reshape(H.shape), **tol)
