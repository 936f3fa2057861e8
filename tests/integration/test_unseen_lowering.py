"""Unseen kernels and @njit functions, written as numba.cuda users write them, through the
dual operations lowered into the caller (dualgpu/compiled/lowering.py): every arithmetic
operator on duals, Python and numpy scalars, ints and bools; powers; in-place operators on
duals and DualArray elements; min/max (ties included); abs, copysign, fmod, remainder, hypot,
atan2; value-only functions; numpy ufuncs on scalars; comparisons and branches; element
access with every integer type, negative indices, views and 1-D to 3-D arrays; float32
arrays storing float64 duals.

Each kernel's Jacobian is checked against central differences of its plain run on the cpu
backend and on the simulator, in float32 and float64 (on the cpu backend, by default, each kernel
in one dtype here and the float64 Jacobians of SPARSE_KERNELS through the sparse driver;
DUALGPU_TEST_CASES=all runs both dtypes here); each dual value must be bit-identical to
the plain compiled value (the simulator's dual computes what compiled code computes, which is
not always what the simulator's plain Python run computes in float32). The kernels are in
tests/fixtures/kernels_unseen_lowering.py and scalars_unseen_lowering.py.
"""
import functools
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from numba import cuda as numba_cuda, from_dtype, njit, types

import dualgpu
from dualgpu import cuda, dual_array
from dualgpu.compiled.arrays import dual_array_type
from dualgpu.compiled.types import dual_type
from dualgpu.core.dual import Dual

import kernels_unseen_lowering as K
import scalars_unseen_lowering as S

BACKENDS = ["cpu", "cudasim"]
DTYPES = [np.float64, np.float32]
RTOL = {np.float64: 1e-6, np.float32: 2e-3}
FD_RTOL = {"mixed_precision": 1e-4}  # finite-difference noise of the float32 steps


def _rtol(name, dtype):
    return max(RTOL[dtype], FD_RTOL.get(name, 0.0))


# Values that are not bit-identical to the plain cpu-backend run, for a known reason: ufuncs
# on the simulator, float32: the simulator's dual calls numpy's own ufuncs, which differ from
# the compiled ones in the last bit (documented in dualgpu/core/_primals.py).
VALUES_CLOSE_ONLY = {("ufuncs", "cudasim", np.float32)}


def _launcher(kernel, threads):
    def f(x):
        d = cuda.to_device(x)
        o = cuda.device_array_like(d)
        o[...] = 0.0
        kernel[1, threads](d, o)
        return o.copy_to_host()
    return f


# name: (kernel, input shape, threads, finite-difference step)
# (mixed_precision: np.float32(a) of a float64 input makes the plain function a staircase of
# float32 steps; a wide step and a looser tolerance see through them)
KERNELS = {
    "arith_mix": (K.arith_mix, (6,), 6, 1e-6),
    "powers": (K.powers, (6,), 6, 1e-6),
    "inplace_scalars": (K.inplace_scalars, (6,), 6, 1e-6),
    "inplace_elements": (K.inplace_elements, (6,), 6, 1e-6),
    "minmax": (K.minmax, (6,), 6, 1e-6),
    "special_math": (K.special_math, (6,), 6, 1e-6),
    "value_only": (K.value_only, (6,), 6, 1e-6),
    "ufuncs": (K.ufuncs, (6,), 6, 1e-6),
    "comparisons": (K.comparisons, (6,), 6, 1e-6),
    "indexing_1d": (K.indexing_1d, (6,), 6, 1e-6),
    "indexing_2d": (K.indexing_2d, (3, 4), (3, 4), 1e-6),
    "indexing_3d": (K.indexing_3d, (2, 3, 2), (2, 3, 2), 1e-6),
    "views_in_kernel": (K.views_in_kernel, (4, 3), 4, 1e-6),
    # np.float32(a) of a float64 input: steps below float32's resolution would see its rounding
    "mixed_precision": (K.mixed_precision, (6,), 6, 1e-2),
    "branchy": (K.branchy, (6,), 6, 1e-6),
    "negative_operands": (K.negative_operands, (8,), 8, 1e-6),
    "device_local_shared": (K.device_local_shared, (6,), 6, 1e-6),
}


def _input(name):
    if name == "negative_operands":
        return np.array([-0.83, 0.41, -0.27, 0.66, -0.52, 0.93, -0.11, 0.37])
    shape = KERNELS[name][1]
    return np.random.default_rng(3).uniform(0.3, 0.9, shape)


@functools.lru_cache(maxsize=None)
def _reference(name):
    """Central differences of the plain float64 kernel on the cpu backend."""
    kernel, shape, threads, h = KERNELS[name]
    f = _launcher(kernel, threads)
    x = _input(name)
    with dualgpu.using_backend("cpu"):
        J = np.zeros(f(x).shape + x.shape)
        for idx in np.ndindex(x.shape):
            xp, xm = x.copy(), x.copy()
            xp[idx] += h
            xm[idx] -= h
            J[(...,) + idx] = (f(xp) - f(xm)) / (2 * h)
    return J


@functools.lru_cache(maxsize=None)
def _plain_cpu(name, dtype):
    kernel, shape, threads, _ = KERNELS[name]
    with dualgpu.using_backend("cpu"):
        return _launcher(kernel, threads)(_input(name).astype(dtype))


# float32 on the cpu backend only where float32 arithmetic is what the kernel stresses (each
# compile costs about a second; the simulator runs every kernel in both precisions)
NO_CPU_FLOAT32 = {"indexing_2d", "indexing_3d", "views_in_kernel", "branchy", "comparisons",
                  "device_local_shared", "indexing_1d", "value_only", "inplace_scalars",
                  "arith_mix"}
#: the kernels whose float64 Jacobian on the cpu backend test_sparse_jacobian_through_lowered_
#: operations checks against central differences (through sparsity detection and coloring)
SPARSE_KERNELS = ["powers", "minmax", "special_math", "ufuncs", "indexing_1d",
                  "inplace_elements", "mixed_precision"]
#: by default the cpu backend runs each kernel in one dtype here: float32 where float32 is what
#: the kernel stresses and the sparse test checks its float64 Jacobian on the cpu backend (the
#: float64 values of every rule are bit-identical to plain compiled code on the cpu backend in
#: tests/core/test_properties.py); DUALGPU_TEST_CASES=all runs both
FULL_PRODUCT = os.environ.get("DUALGPU_TEST_CASES", "").strip().lower() == "all"
CPU_FLOAT32_ONLY = set() if FULL_PRODUCT else set(SPARSE_KERNELS) - NO_CPU_FLOAT32


def _kernel_cases():
    for name in KERNELS:
        for backend in BACKENDS:
            for dtype in DTYPES:
                if backend == "cpu" and dtype == np.float32 and name in NO_CPU_FLOAT32:
                    continue
                if backend == "cpu" and dtype == np.float64 and name in CPU_FLOAT32_ONLY:
                    continue
                yield pytest.param(name, backend, dtype, id=f"{name}-{backend}-{dtype.__name__}")


@pytest.mark.parametrize("name, backend, dtype", list(_kernel_cases()))
def test_kernel_jacobian_and_values(name, backend, dtype):
    kernel, shape, threads, _ = KERNELS[name]
    f = _launcher(kernel, threads)
    x = _input(name).astype(dtype)
    ref = _reference(name)
    directions = np.eye(x.size, dtype=dtype).reshape((x.size,) + x.shape)
    with dualgpu.using_backend(backend):  # one run: the values and every column of J
        out, tangents = dualgpu.jvp_batch(f, (x,), (directions,))
    J = np.moveaxis(tangents, 0, -1).reshape(ref.shape)
    assert J.dtype == dtype
    np.testing.assert_allclose(J, ref, rtol=_rtol(name, dtype), atol=_rtol(name, dtype))
    plain = _plain_cpu(name, dtype)
    assert out.dtype == plain.dtype
    if (name, backend, dtype) in VALUES_CLOSE_ONLY:
        np.testing.assert_allclose(out, plain, rtol=1e-6)
    else:
        np.testing.assert_array_equal(out, plain)  # bit-identical to the compiled plain run


@pytest.mark.parametrize("backend", BACKENDS)
def test_min_max_ties_take_the_first_argument(backend):
    def f(x):
        d = cuda.to_device(x)
        o = cuda.device_array(6, dtype=x.dtype)
        K.minmax_ties[1, 1](d, o)
        return o.copy_to_host()

    for dtype in DTYPES:
        with dualgpu.using_backend(backend):
            J = dualgpu.jacobian(f, np.full(3, 0.5, dtype))
        # min(a, b), max(b, a), min(b, a, c), max(c, a, b), np.minimum(a, b), np.maximum(b, a)
        np.testing.assert_array_equal(J, np.eye(3)[[0, 1, 1, 2, 0, 1]])


def _at_zero(x):
    d = cuda.to_device(x)
    o = cuda.device_array_like(d)
    K.at_zero[1, 4](d, o)
    return o.copy_to_host()


@pytest.mark.parametrize("backend", BACKENDS)
def test_derivatives_at_zero_follow_the_documented_conventions(backend):
    """x[0] == 0: z**2, z**2.5, pow(z, 3), math.pow(z, 2), np.power(z, 2) give 0; z**1.0 gives 1;
    1.5**z and 2**z give log 1.5 + log 2; hypot(0, 0) zero partials; abs and fabs +1 (from the
    right); max(z, 0.0) the first argument's partials (1), min(0.0, z) the first's (0);
    copysign(a, +0.0) gives +1 with respect to a."""
    x = np.array([0.0, 0.4, 0.7, 1.3])
    want = np.eye(4)  # d/da: copysign(a, +0.0) gives 1, z * a and np.hypot(z, z * a) give 0
    # d/dz: z**1.0, abs, fabs, max: 1 each; 1.5**z, 2**z; z * a: a (x[0] = 0 at i = 0)
    want[:, 0] = 4.0 + np.log(1.5) + np.log(2.0) + x
    want[0, 0] += 1.0  # i == 0: copysign(z, z) has derivative 1
    for dtype in DTYPES:
        with dualgpu.using_backend(backend):
            J = dualgpu.jacobian(_at_zero, x.astype(dtype))
        np.testing.assert_allclose(J, want, rtol=RTOL[dtype] / 10, atol=RTOL[dtype] / 10)


def _scalar_params(x, p, q):
    d = cuda.to_device(x)
    o = cuda.device_array_like(d)
    K.scalar_params[2, 4](d, o, p, q)
    return o.copy_to_host()


@pytest.mark.parametrize("backend", BACKENDS)
def test_scalar_dual_parameters_with_chunks(backend):
    x = np.random.default_rng(5).uniform(0.3, 0.9, 7)
    p, q, h = 0.6, 0.45, 1e-6
    with dualgpu.using_backend("cpu"):
        f = _scalar_params
        ref = [np.stack([(f(x + e, p, q) - f(x - e, p, q)) / (2 * h) for e in np.eye(7) * h], -1),
               (f(x, p + h, q) - f(x, p - h, q)) / (2 * h),
               (f(x, p, q + h) - f(x, p, q - h)) / (2 * h)]
    dtype, chunk = (np.float64, 3) if backend == "cpu" else (np.float32, None)
    with dualgpu.using_backend(backend):
        J = dualgpu.jacobian(f, x.astype(dtype), dtype(p), dtype(q), argnums=(0, 1, 2),
                             chunk_size=chunk)
    for got, want in zip(J, ref):
        assert got.dtype == dtype
        np.testing.assert_allclose(got, want, rtol=RTOL[dtype], atol=RTOL[dtype])


# --- @njit functions on Dual arguments ---------------------------------------------------

SCALAR_FUNCTIONS = ["zoo", "powers", "functions", "ufuncs_and_branches", "inplace"]


@functools.lru_cache(maxsize=None)
def _njit(name):
    return njit(getattr(S, name))


@pytest.mark.parametrize("point", [(0.37, 0.81), (0.73, 0.52)])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("name", SCALAR_FUNCTIONS)
def test_njit_scalars_values_types_and_partials(name, dtype, point):
    fn = _njit(name)
    av, bv = point
    a, b = dtype(av), dtype(bv)
    plain = fn(a, b)
    sig = next(s for s in fn.signatures if s == (from_dtype(np.dtype(dtype)),) * 2)
    result_types = fn.overloads[sig].signature.return_type
    duals = fn(Dual(a, (1.0, 0.0)), Dual(b, (0.0, 1.0)))
    h = 1e-6
    pa, ma = fn(av + h, bv), fn(av - h, bv)
    pb, mb = fn(av, bv + h), fn(av, bv - h)
    assert len(duals) == len(plain)
    for k, (p, d) in enumerate(zip(plain, duals)):
        assert isinstance(d, Dual), k
        assert str(np.asarray(d.value).dtype) == str(result_types[k]), k  # the plain type
        assert np.float64(d.value) == np.float64(p), k  # bit-identical value
        fd = [(pa[k] - ma[k]) / (2 * h), (pb[k] - mb[k]) / (2 * h)]
        np.testing.assert_allclose(np.asarray(d.partials, np.float64), fd,
                                   rtol=RTOL[dtype], atol=RTOL[dtype], err_msg=str(k))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_njit_dual_array_elements(dtype):
    g = njit(S.array_elements)
    rng = np.random.default_rng(1)
    u = rng.uniform(0.3, 0.9, (3, 4)).astype(dtype)
    v0 = rng.uniform(0.3, 0.9, 5).astype(dtype)
    v = v0.copy()
    r = g(u, v, 1, 2)
    U = dual_array(u, np.eye(12, dtype=dtype).reshape(12, 3, 4))
    V = dual_array(v0.copy(), lanes=12)
    rd = g(U, V, np.int32(1), np.uint64(2))
    np.testing.assert_array_equal(np.asarray(V.values), v)
    assert float(rd.value) == float(r)
    h = 1e-6
    J = np.zeros((5, 12))
    for k in range(12):
        up, um = u.astype(np.float64), u.astype(np.float64)
        up.flat[k] += h
        um.flat[k] -= h
        vp, vm = v0.astype(np.float64), v0.astype(np.float64)
        g(up, vp, 1, 2)
        g(um, vm, 1, 2)
        J[:, k] = (vp - vm) / (2 * h)
    np.testing.assert_allclose(np.asarray(V.partials, np.float64).T, J, rtol=RTOL[dtype],
                               atol=RTOL[dtype])


DIVISIONS = ["divide", "modulo", "floordivide", "rdivide", "idivide", "imodulo"]


@pytest.mark.parametrize("error_model", ["python", "numpy"])
@pytest.mark.parametrize("name", DIVISIONS)
def test_division_by_zero_follows_the_error_model(name, error_model):
    fn = njit(error_model=error_model)(getattr(S, name))
    for x, y in ((0.7, 0.0), (0.7, 0.35)):
        try:
            plain, plain_error = fn(x, y), None
        except ZeroDivisionError as error:
            plain, plain_error = None, str(error)
        assert (plain_error is not None) == (error_model == "python" and y == 0.0)
        for dx, dy in ((Dual(x, (1.0, 0.0)), Dual(y, (0.0, 1.0))), (Dual(x, (1.0, 0.0)), y),
                       (x, Dual(y, (0.0, 1.0)))):
            if plain_error is not None:
                with pytest.raises(ZeroDivisionError, match=plain_error):
                    fn(dx, dy)
            else:
                d = fn(dx, dy)
                np.testing.assert_array_equal(np.float64(d.value), np.float64(plain))


BOUNDS_SCRIPT = textwrap.dedent("""
    import numpy as np
    from numba import njit
    from dualgpu import dual_array
    from dualgpu.compiled.arrays import make_dual_array
    from dualgpu.core.dual import Dual

    @njit
    def get(u, i, j):
        return u[i, j]

    @njit
    def get1(u, i):
        return u[i]

    @njit
    def put(u, i, d):
        u[i] = d

    @njit
    def short_lanes(i):  # values in range, lanes not
        u = make_dual_array(np.arange(4.0), np.ones((2, 3)), 2)
        return u[i]

    @njit
    def short_lanes_put(i):
        u = make_dual_array(np.arange(4.0), np.ones((2, 3)), 2)
        u[i] = Dual(1.0, (1.0, 2.0))

    u2 = dual_array(np.arange(6.0).reshape(2, 3), np.ones((2, 2, 3)))
    u1 = dual_array(np.arange(4.0), np.ones((2, 4)))
    calls = [lambda: get(u2, 1, 3), lambda: get(u2, np.int8(-3), 0),
             lambda: get(u2, 2, np.uint64(0)), lambda: get1(u1, 4),
             lambda: put(u1, 4, Dual(1.0, (1.0, 2.0))), lambda: put(u1, -5, 1.0),
             lambda: short_lanes(3), lambda: short_lanes_put(3)]
    for call in calls:
        try:
            call()
            print("no error")
        except IndexError:
            print("IndexError")
    print(get(u2, -1, -1).value, short_lanes(2).value)

    import dualgpu
    from dualgpu import cuda

    @cuda.jit
    def reads_past_the_end(x, out):
        i = cuda.grid(1)
        if i < x.shape[0]:
            out[i] = x[i + 1] * 2.0  # x[n] in the last thread

    def f(x):
        d = cuda.to_device(x)
        o = cuda.device_array_like(d)
        reads_past_the_end[1, 4](d, o)
        return o.copy_to_host()

    for backend in ("cpu", "cudasim"):
        with dualgpu.using_backend(backend):
            for call in (lambda: f(np.arange(4.0)), lambda: dualgpu.jacobian(f, np.arange(4.0))):
                try:
                    call()
                    print("no error")
                except IndexError:
                    print("IndexError")
""")


def _run(script, directory, **env):
    """Run ``script`` from a file (the cpu backend reads kernels' source) in a fresh process."""
    path = directory / "script.py"
    path.write_text(script)
    # the repository root first, so the fresh process imports this checkout's dualgpu
    # whether or not (and wherever) the package is installed
    root = str(Path(__file__).resolve().parents[2])
    environment = dict(os.environ, **env)
    environment["PYTHONPATH"] = os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          env=environment, timeout=240)


def test_boundscheck_covers_values_and_lanes(tmp_path):
    """Under NUMBA_BOUNDSCHECK=1 (a fresh process) DualArray elements are checked like numba's
    arrays, values and lanes, read and written, 1-D and 2-D, with any integer type; kernels
    reading past the end raise on the cpu backend and the simulator, plain and dual."""
    result = _run(BOUNDS_SCRIPT, tmp_path, NUMBA_BOUNDSCHECK="1")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split("\n")
    assert lines[:8] == ["IndexError"] * 8, result.stdout
    assert lines[8] == "5.0 2.0"
    assert lines[9:13] == ["IndexError"] * 4, result.stdout  # plain and dual, cpu and cudasim


# --- sparsity, second order, rules of one's own, NaN-safe mode -----------------------------

@pytest.mark.parametrize("name", SPARSE_KERNELS)
def test_sparse_jacobian_through_lowered_operations(name):
    kernel, shape, threads, _ = KERNELS[name]
    f = _launcher(kernel, threads)
    x = _input(name)
    with dualgpu.using_backend("cpu"):
        J = dualgpu.jacobian(f, x, sparsity="detect")
        pattern = dualgpu.sparse.detect_sparsity(f, (x,))
    dense = _reference(name)
    np.testing.assert_allclose(J.toarray(), dense, rtol=_rtol(name, np.float64),
                               atol=_rtol(name, np.float64))
    assert np.all(pattern.toarray()[np.abs(dense) > 1e-9])  # the pattern covers every entry


def _energy(x):
    d = cuda.to_device(x)
    o = cuda.device_array_like(d)
    o[...] = 0.0
    K.hessian_kernel[1, 1](d, o)
    return o.copy_to_host()[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_hessian_through_min_max_abs_pow_hypot(backend):
    x = np.array([0.7, 0.4, 1.3])
    h = 1e-4
    with dualgpu.using_backend("cpu"):
        H_fd = np.zeros((3, 3))
        for i, j in np.ndindex(3, 3):
            ei, ej = np.eye(3)[i] * h, np.eye(3)[j] * h
            H_fd[i, j] = (_energy(x + ei + ej) - _energy(x + ei - ej) - _energy(x - ei + ej)
                          + _energy(x - ei - ej)) / (4 * h * h)
    dtype, rtol = (np.float64, 1e-5) if backend == "cpu" else (np.float32, 2e-3)
    with dualgpu.using_backend(backend):
        H = dualgpu.hessian(_energy, x.astype(dtype))
    assert H.dtype == dtype
    np.testing.assert_allclose(H, H_fd, rtol=rtol, atol=rtol)


# rules of one's own in a kernel: tests/core/test_rules_define.py (in the one fresh process it
# starts for every check that defines rules process-wide)


_nansafe_probe = _launcher(K.nansafe_probe, 4)
# the same kernel in NaN-safe mode: tests/core/test_nansafe.py (the mode is read at import; one
# NaN-safe process there runs every NaN-safe check)


@pytest.mark.parametrize("backend", BACKENDS)
def test_nansafe_mode_off_refuses_the_nan(backend):
    if dualgpu.nansafe.NANSAFE_MODE_ENABLED:
        pytest.skip("this process runs in NaN-safe mode")
    with dualgpu.using_backend(backend):
        with pytest.raises(dualgpu.DualgpuError, match="non-finite derivative nan"):
            dualgpu.jacobian(_nansafe_probe, np.array([0.3, 0.5, 0.7, 0.9]))


# --- writing through views of device arrays under the driver --------------------------------

N_VIEW = 5


def _write_squeeze(x):
    d = cuda.to_device(x)
    o = cuda.device_array((1, N_VIEW, 1), dtype=x.dtype)
    o[...] = 0.0
    K.write_views[1, N_VIEW](d, o.squeeze())
    return o.copy_to_host()


def _write_np_squeeze(x):
    d = cuda.to_device(x)
    o = cuda.device_array((1, N_VIEW), dtype=x.dtype)
    K.write_views[1, N_VIEW](d, np.squeeze(o))
    return o.copy_to_host()


def _write_expand_dims(x):
    d = cuda.to_device(x)
    o = cuda.device_array(N_VIEW, dtype=x.dtype)
    K.write_views[1, N_VIEW](d, np.expand_dims(o, 0)[0])
    return o.copy_to_host()


def _write_transpose(x):
    d = cuda.to_device(x)
    o = cuda.device_array((2, N_VIEW), dtype=x.dtype)
    K.write_views_2d[1, N_VIEW](d, o.T)
    return o.copy_to_host()


def _write_reshape(x):
    d = cuda.to_device(x)
    o = cuda.device_array(2 * N_VIEW, dtype=x.dtype)
    K.write_views_2d[1, N_VIEW](d, o.reshape(N_VIEW, 2))
    return o.copy_to_host()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_write_squeeze, _write_np_squeeze, _write_expand_dims,
                                _write_transpose, _write_reshape], ids=lambda f: f.__name__[7:])
def test_kernel_writes_through_views_of_device_arrays(fn, backend):
    x = np.linspace(0.2, 0.9, N_VIEW)
    h = 1e-6
    with dualgpu.using_backend(backend):
        ref = np.stack([(fn(x + e) - fn(x - e)) / (2 * h) for e in np.eye(N_VIEW) * h], -1)
        J = dualgpu.jacobian(fn, x)
        out, _ = dualgpu.jvp(fn, (x,), (np.ones_like(x),))
        plain = fn(x)
    assert np.abs(ref).max() > 0.5
    np.testing.assert_allclose(J, ref, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(out, plain)


# --- real CUDA code generation (offline PTX) -------------------------------------------------

PTX_KERNELS = {types.float32: [("powers", 1), ("special_math", 1), ("views_in_kernel", 2)],
               types.float64: [("minmax", 1), ("ufuncs", 1), ("indexing_3d", 3),
                               ("inplace_elements", 1)]}


@pytest.mark.parametrize("dtype", [types.float32, types.float64], ids=str)
def test_kernels_and_device_functions_compile_to_ptx(offline_ptx, dtype):
    for name, ndim in PTX_KERNELS[dtype]:
        a = dual_array_type(dtype, ndim, 4)
        ptx, _ = numba_cuda.compile_ptx(getattr(K, name).py_func, (a, a), cc=offline_ptx)
        assert ".entry" in ptx, name
    for name in ("powers",) if dtype == types.float32 else ("ufuncs_and_branches",):
        ptx, _ = numba_cuda.compile_ptx(getattr(S, name), (dual_type(dtype, 2),) * 2,
                                        device=True, cc=offline_ptx)
        assert ".func" in ptx or ".visible" in ptx, name
