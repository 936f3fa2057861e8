"""2-D and 3-D bounds guards hoisted out of the cpu backend's launch loops ("bounded"
launchers): the same results as numba's CUDA simulator, plain and dual, serial and in pieces;
the forms that are not bounds stay inside."""
import numpy as np
import pytest
from numba.cuda import simulator as sim

import dualgpu
import kernels_guards_nd as kg
from tile_checks import launched
from dualgpu.backends.common.translate import unwrap
from dualgpu.backends.cpu import kernel as cpu
from dualgpu.testing import check_jacobian


def simulate(kernel, griddim, blockdim, *args):
    sim.jit(unwrap(kernel))[griddim, blockdim](*args)


def fresh(kernel):
    return cpu.CpuKernel(unwrap(kernel))


# grids that cover the arrays exactly, with spare threads on one axis, and on both
GRIDS = [((2, 2), (8, 8), (16, 16)), ((3, 2), (8, 8), (19, 16)), ((3, 3), (8, 4), (21, 9))]


@pytest.mark.parametrize("griddim, blockdim, shape", GRIDS, ids=["exact", "spare x", "spare xy"])
def test_periodic_stencil_matches_simulator(griddim, blockdim, shape, launch_mode, rng):
    u = rng.random(shape)
    expected, got = np.full(shape, np.nan), np.full(shape, np.nan)
    simulate(kg.periodic_exit_or, griddim, blockdim, u, expected, 0.2)
    kernel = fresh(kg.periodic_exit_or)
    kernel.launch(griddim, blockdim, (u, got, 0.2))
    np.testing.assert_array_equal(got, expected)
    assert (0, "bounded", launch_mode) in launched(kernel)


@pytest.mark.parametrize("kernel, extra, shape", [
    (kg.keep_and_unpacked_shape, (), (19, 9)),
    (kg.one_axis_guarded, (), (19, 24)),
    (kg.flipped_and_not_strict, (10,), (19, 9)),
], ids=lambda v: getattr(v, "__name__", None))
def test_guard_forms_match_simulator(kernel, extra, shape, launch_mode, rng):
    u = rng.random(shape)
    expected, got = np.full(shape, np.nan), np.full(shape, np.nan)
    griddim, blockdim = (3, 3), (8, 8)
    simulate(kernel, griddim, blockdim, u, expected, *extra)
    compiled = fresh(kernel)
    assert compiled._translation.guard is not None
    compiled.launch(griddim, blockdim, (u, got, *extra))
    np.testing.assert_array_equal(got, expected)
    assert (0, "bounded", launch_mode) in launched(compiled)


def test_3d_guard_matches_simulator(launch_mode, rng):
    shape = (5, 7, 9)
    u = rng.random(shape)
    expected, got = np.full(shape, np.nan), np.full(shape, np.nan)
    simulate(kg.separate_index_lines, (2, 2, 3), (4, 4, 4), u, expected)
    kernel = fresh(kg.separate_index_lines)
    kernel.launch((2, 2, 3), (4, 4, 4), (u, got))
    np.testing.assert_array_equal(got, expected)
    assert (0, "bounded", launch_mode) in launched(kernel)


@pytest.mark.parametrize("kernel", [kg.keep_or_is_not_a_bound, kg.same_index_twice,
                                    kg.bound_reads_the_other_index, kg.exit_and_is_not_a_bound],
                         ids=lambda k: unwrap(k).__name__)
def test_forms_that_are_not_bounds_stay_inside(kernel, rng):
    compiled = fresh(kernel)
    assert compiled._translation.guard is None
    shape = (11, 13)
    u = rng.random(shape)
    expected, got = np.full(shape, np.nan), np.full(shape, np.nan)
    simulate(kernel, (2, 2), (8, 8), u, expected)
    compiled.launch((2, 2), (8, 8), (u, got))
    np.testing.assert_array_equal(got, expected)


def test_bounded_launcher_tells_llvm_the_bounds():
    # the launcher says which indices pass, so LLVM can drop the zero check of ``% nx``
    guard = fresh(kg.periodic_exit_or)._translation.guard
    assert guard.assume == "_dg_assume(_dg_gx < _dg_ex); _dg_assume(_dg_gy < _dg_ey); "
    guard = fresh(kg.flipped_and_not_strict)._translation.guard
    assert guard.assume == "_dg_assume(_dg_gx <= _dg_ex); _dg_assume(_dg_gy < _dg_ey); "


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_periodic_stencil_jacobian_matches_differences(dtype, rng):
    shape = (6, 5)
    u0 = rng.random(shape).astype(dtype)
    stepper = dualgpu.jit(kg.periodic_exit_or)

    def run(u):
        u = dualgpu.cuda.to_device(u)
        out = dualgpu.cuda.device_array_like(u)
        for _ in range(2):
            stepper[(1, 1), (8, 8)](u, out, 0.2)
            u, out = out, u
        return u.copy_to_host()

    # the stencil is linear: its Jacobian is M @ M, M the periodic 5-point step
    nx, ny = shape
    step = np.zeros((nx * ny, nx * ny))
    for i in range(nx):
        for j in range(ny):
            row = i * ny + j
            step[row, row] += 1.0 - 4 * 0.2
            for a, b in ((i - 1, j), (i + 1, j), (i, j - 1), (i, j + 1)):
                step[row, (a % nx) * ny + b % ny] += 0.2
    with dualgpu.using_backend("cpu"):
        check_jacobian(run, u0)
        jac = dualgpu.jacobian(run, u0)
    tol = 1e-6 if dtype == np.float32 else 1e-14
    np.testing.assert_allclose(jac.reshape(nx * ny, nx * ny), step @ step, rtol=tol, atol=tol)
