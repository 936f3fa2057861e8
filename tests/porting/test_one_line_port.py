"""Issue 3: numba.cuda kernels ported with the one line ``from dualgpu import cuda``.

Every kernel of ``kernels_ported.py`` is run on the ``cpu`` and ``cudasim`` backends:

* plain arguments give what the original kernel gives (its ``py_func`` run by numba's
  CUDA simulator with ``cuda`` meaning numba.cuda again and ``math`` the real math);
* dual arguments (DualArray inputs with random seeds, Dual scalar parameters) give the
  same values, and partials equal to central finite differences of the plain kernel
  along the seed directions;
* the errors of issue 3 point 4 say what went wrong, and caller arrays are not modified
  except those the kernel writes.
"""
import warnings

import numpy as np
import pytest

import dualgpu
import dualgpu.cuda
import kernels_ported as K
from dualgpu import Dual, DualArray, DualgpuError, cuda
from unported import original
from dualgpu.errors import LaunchCoverageWarning

BACKENDS = ("cpu", "cudasim")
LANES = 2


# --- cases: arguments, launch, which arguments are seeded and which are written -------------

def _cases():
    f64, f32 = np.float64, np.float32
    return {
        # name: (make_args(rng), griddim, blockdim, seeded indices, written indices, dtype)
        "stencil_1d": (lambda r: [r.random(11), np.zeros(11), 0.23, 1.0, -0.5],
                       2, 8, (0, 2, 3), (1,), f64),
        "stencil_2d": (lambda r: [r.random((5, 6)), np.zeros((5, 6)), 0.11, 0.5],
                       (2, 2), (4, 4), (0, 2, 3), (1,), f64),
        "nbody_accel": (lambda r: [r.random((5, 2)), r.random(5) + 0.5, 0.3, np.zeros((5, 2))],
                        1, 8, (0, 1, 2), (3,), f64),
        "smooth_with_lib": (lambda r: [r.random(10), np.zeros(10), 0.3, 0.1],
                            2, 8, (0, 2, 3), (1,), f64),
        "grid_stride_scale": (lambda r: [r.random(10) - 0.5, np.zeros(10), 0.7],
                              1, 4, (0, 2), (1,), f64),
        "stencil_1d_f32": (lambda r: [r.random(9).astype(f32), np.zeros(9, f32), f32(0.2)],
                           2, 8, (0, 2), (1,), f32),
        "local_scratch": (lambda r: [r.random(9), np.zeros(9), 1.3],
                          2, 8, (0, 2), (1,), f64),
        "early_return": (lambda r: [r.random(10) + 0.1, r.random(10), 0.4],
                         2, 8, (0, 2), (1,), f64),
    }


CASES = _cases()


def _copy(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def _run_plain(name, args, runner=None):
    make, griddim, blockdim, *_ = CASES[name]
    args = _copy(args)
    kernel = runner or getattr(K, name)
    kernel[griddim, blockdim](*args)
    return args


def _assert_close(got, expected, rtol, what):
    got, expected = np.asarray(got, np.float64), np.asarray(expected, np.float64)
    scale = max(np.abs(expected).max(initial=0.0), 1e-300)
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol * scale, err_msg=what)


# --- plain: equal to the original ---------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(CASES))
def test_plain_equals_original(backend, name, rng):
    make, griddim, blockdim, seeded, written, dtype = CASES[name]
    args = make(rng)
    expected = _run_plain(name, args, original(getattr(K, name)))
    with dualgpu.using_backend(backend):
        got = _run_plain(name, args)
    # float32: numba promotes `2.0 * u[i]` to float64, the simulator's NumPy keeps float32
    rtol = 1e-12 if dtype == np.float64 else 2e-6
    for k, (g, e) in enumerate(zip(got, expected)):
        if isinstance(e, np.ndarray):
            assert g.dtype == e.dtype
            _assert_close(g, e, rtol, f"{name} on {backend}: argument {k}")


# --- dual: values equal plain, partials equal central differences -------------------------

def _seeds(args, seeded, rng):
    return {k: rng.standard_normal((LANES,) + np.shape(args[k])) for k in seeded}


def _dual_args(args, seeds, written):
    out = []
    for k, a in enumerate(args):
        if k in seeds:
            if isinstance(a, np.ndarray):
                out.append(DualArray(a.copy(), seeds[k].astype(a.dtype)))
            else:
                out.append(Dual(a, seeds[k].astype(np.asarray(a).dtype)))
        elif k in written:
            out.append(DualArray(a.copy(), np.zeros((LANES,) + a.shape, a.dtype)))
        else:
            out.append(a.copy() if isinstance(a, np.ndarray) else a)
    return out


def _shifted(args, seeds, lane, h):
    """Inputs moved by h along seed lane ``lane``, in float64 (the kernels are dtype-generic)."""
    out = []
    for k, a in enumerate(args):
        a64 = np.asarray(a, np.float64) if isinstance(a, np.ndarray) else float(a)
        if k in seeds:
            a64 = a64 + h * seeds[k][lane]
            a64 = a64 if isinstance(a, np.ndarray) else float(a64)
        out.append(a64.copy() if isinstance(a64, np.ndarray) else a64)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(CASES))
def test_dual_matches_plain_and_finite_differences(backend, name, rng):
    make, griddim, blockdim, seeded, written, dtype = CASES[name]
    args = make(rng)
    seeds = _seeds(args, seeded, rng)
    dual_args = _dual_args(args, seeds, written)
    before = [(a.values.copy(), a.partials.copy()) if isinstance(a, DualArray) else None
              for a in dual_args]
    with dualgpu.using_backend(backend):
        plain = _run_plain(name, args)
        getattr(K, name)[griddim, blockdim](*dual_args)
        h = 1e-5
        fd = []
        for lane in range(LANES):
            up = _run_plain(name, _shifted(args, seeds, lane, h))
            down = _run_plain(name, _shifted(args, seeds, lane, -h))
            fd.append([(u - d) / (2 * h) if isinstance(u, np.ndarray) else None
                       for u, d in zip(up, down)])
    value_rtol = 1e-12 if dtype == np.float64 else 1e-6
    partial_rtol = 1e-6 if dtype == np.float64 else 1e-3
    for k in written:
        d = dual_args[k]
        assert isinstance(d, DualArray) and d.dtype == dtype
        _assert_close(d.values, plain[k], value_rtol, f"{name} on {backend}: values of arg {k}")
        for lane in range(LANES):
            _assert_close(d.partials[lane], fd[lane][k], partial_rtol,
                          f"{name} on {backend}: lane {lane} of arg {k}")
    for k, b in enumerate(before):  # inputs the kernel only reads are untouched
        if b is not None and k not in written:
            np.testing.assert_array_equal(dual_args[k].values, b[0])
            np.testing.assert_array_equal(dual_args[k].partials, b[1])


# --- errors and launch checks (issue 3 point 4) ----------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_lane_count_mismatch(backend, rng):
    u = DualArray(rng.random(6), rng.random((2, 6)))
    out = DualArray(np.zeros(6), np.zeros((2, 6)))
    alpha = Dual(0.1, [1.0, 0.0, 0.0])
    with dualgpu.using_backend(backend), pytest.raises(DualgpuError) as info:
        K.stencil_1d[1, 8](u, out, alpha, 0.0, 0.0)
    message = str(info.value)
    assert "lane count" in message and "u has 2" in message and "alpha has 3" in message


@pytest.mark.parametrize("backend", BACKENDS)
def test_mixed_dtypes_run_as_plain_kernels_do(backend, rng):
    # a plain kernel reads float32 and writes float64 arrays; so does a dual one
    u = DualArray(rng.random(6).astype(np.float32), rng.random((2, 6)).astype(np.float32))
    out = DualArray(np.zeros(6), np.zeros((2, 6)))
    plain = np.zeros(6)
    with dualgpu.using_backend(backend):
        K.stencil_1d_f32[1, 8](u, out, np.float32(0.1))
    with dualgpu.using_backend("cpu"):  # the compiled plain kernel (the simulator's own float32
        K.stencil_1d_f32[1, 8](u.values, plain, np.float32(0.1))  # arithmetic is numpy's)
    np.testing.assert_array_equal(out.values, plain)
    p = u.partials.astype(np.float64)
    a = np.float64(np.float32(0.1))  # float32 * float64 promotes: the chain runs in float64
    expected = p + a * (np.roll(p, 1, axis=1) - 2.0 * p + np.roll(p, -1, axis=1))
    np.testing.assert_allclose(out.partials, expected, rtol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dual_stored_into_plain_array_names_it(backend, rng):
    u = DualArray(rng.random(6), rng.random((2, 6)))
    out = np.zeros(6)
    with dualgpu.using_backend(backend), pytest.raises(DualgpuError) as info:
        K.stencil_1d[1, 8](u, out, 0.1, 0.0, 0.0)
    message = str(info.value)
    assert "out" in message and "partials" in message and "DualArray" in message
    np.testing.assert_array_equal(out[1:-1], 0.0)  # nothing dual was half-written


@cuda.jit
def _block_sum(x, out):
    buf = cuda.shared.array(8, dtype=np.float64)
    t = cuda.threadIdx.x
    buf[t] = x[t]
    cuda.syncthreads()
    if t == 0:
        s = 0.0
        for k in range(8):
            s += buf[k]
        out[0] = s


def test_shared_memory_block_sum_on_cpu_and_cudasim(rng):
    x = rng.random(8)
    for backend in ("cudasim", "cpu"):
        with dualgpu.using_backend(backend):
            out = np.zeros(1)
            _block_sum[1, 8](x, out)
            assert out[0] == pytest.approx(x.sum(), rel=1e-14)


@pytest.mark.parametrize("backend", BACKENDS)
def test_plain_caller_arrays_only_written_ones_change(backend, rng):
    pos, mass = rng.random((5, 2)), rng.random(5) + 0.5
    acc = np.full((5, 2), 7.0)
    copies = pos.copy(), mass.copy()
    with dualgpu.using_backend(backend):
        K.nbody_accel[1, 8](pos, mass, 0.3, acc)
    np.testing.assert_array_equal(pos, copies[0])
    np.testing.assert_array_equal(mass, copies[1])
    assert not np.any(acc == 7.0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_too_few_threads_warn(backend, rng):
    u = rng.random(20)
    with dualgpu.using_backend(backend):
        with pytest.warns(LaunchCoverageWarning, match="fewer than"):
            K.stencil_1d[1, 8](u, np.zeros(20), 0.1, 0.0, 0.0)
        with warnings.catch_warnings():
            warnings.simplefilter("error", LaunchCoverageWarning)
            K.stencil_1d[3, 8](u, np.zeros(20), 0.1, 0.0, 0.0)
            K.grid_stride_scale[1, 4](u, np.zeros(20), 0.5)  # a grid-stride loop covers all
            K.fixed_ends[1, 2](u, 0.0, 1.0)  # sets two elements on purpose: no extent guard


# --- `from numba import cuda, float32, float64` ported by editing that line -----------------

def _typed_scratch(x, c):
    from kernels_ported_types import typed_scratch

    d_x = cuda.to_device(x)
    out = cuda.device_array_like(d_x)
    typed_scratch[2, 8](d_x, out, c)
    return out.copy_to_host()


@pytest.mark.parametrize("backend", BACKENDS)
def test_numba_number_types_imported_from_dualgpu(backend, rng):
    """``from dualgpu import cuda, float32, float64``: the names are numba's types in kernels
    (local and shared array dtypes, casts); they were dualgpu's host casts, which numba could
    not type ("Untyped global name 'float64'"). Found by an unseen port."""
    from kernels_ported_types import typed_scratch

    x, c = rng.random(11), 0.7
    expected = [x.copy(), np.zeros(11), c]
    original(typed_scratch)[2, 8](*expected)
    with dualgpu.using_backend(backend):
        assert np.array_equal(_typed_scratch(x, c), expected[1])
        jac = dualgpu.jacobian(lambda v: _typed_scratch(v, c), x, progress=False)
        jvp = dualgpu.jvp(lambda cc: _typed_scratch(x, cc), (c,), (1.0,))[1]
    # out = (c x)^2 + float32((c x)^3 - c x): the float32 share is exact to float32's precision
    np.testing.assert_allclose(np.diag(jac), 2 * c * c * x + 3 * c ** 3 * x * x - c,
                               rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(jvp, 2 * c * x * x + 3 * c * c * x ** 3 - x, rtol=1e-6, atol=1e-7)
    h = 1e-3
    fd_c = (_fd_run(backend, x, c + h) - _fd_run(backend, x, c - h)) / (2 * h)
    np.testing.assert_allclose(jvp, fd_c, rtol=1e-4, atol=1e-4)
    assert np.count_nonzero(jac - np.diag(np.diag(jac))) == 0


def _fd_run(backend, x, c):
    with dualgpu.using_backend(backend):
        return _typed_scratch(x, c)


def test_numba_number_types_imported_from_dualgpu_compile_to_ptx(offline_ptx):
    from numba import cuda as numba_cuda, types

    from dualgpu.backends.gpu import kernel as gpu
    from dualgpu.compiled.arrays import dual_array_type
    from kernels_ported_types import typed_scratch

    arr = dual_array_type(types.float64, 1, 2)
    ptx, _ = numba_cuda.compile_ptx(gpu.prepare_function(typed_scratch.py_func, 2),
                                    (arr, arr, types.float64), cc=offline_ptx)
    assert ".entry" in ptx and ".shared" in ptx
