"""Block-level kernels (``block_kernels.py``) on the ``cudasim`` backend, plain and dual.

* plain launches equal the unported kernel run by numba's CUDA simulator where the
  simulator has the feature (shared tiles, ``syncthreads``, dynamic shared memory, votes,
  one-block grid sync), and a NumPy reference where it has not (warp shuffles, grid-wide
  sync across blocks, where the simulator syncs one block only);
* Jacobians with respect to states and parameters equal central differences.

Sizes are small: the simulator runs one Python thread per CUDA thread.
"""
import numpy as np
import pytest

import block_kernels as B
import dualgpu
from dualgpu import cuda
from dualgpu.testing import check_jacobian, check_jvp
from unported import original

BACKEND = "cudasim"


@pytest.fixture(autouse=True)
def _cudasim():
    with dualgpu.using_backend(BACKEND):
        yield


def _rng():
    return np.random.default_rng(11)


# --- references -----------------------------------------------------------------------------

def laplace_reference(data, k, timesteps):
    """NumPy version of NVIDIA's grid-sync heat example (walls held at T = 0)."""
    u = np.array(data, dtype=np.float64)
    for _ in range(timesteps):
        new = u.copy()
        new[1:-1] = u[1:-1] + k * (u[:-2] - 2 * u[1:-1] + u[2:])
        new[0] = u[0] + k * (u[1] - 2 * u[0])
        new[-1] = u[-1] + k * (u[-2] - 2 * u[-1])
        u = new
    return u


def warp_sums_reference(x):
    padded = np.zeros(-(-x.size // B.WARP) * B.WARP)
    padded[:x.size] = x
    return (padded ** 2).reshape(-1, B.WARP).sum(axis=1)


# --- plain launches equal numba's simulator ---------------------------------------------------

def _launches():
    rng = _rng()
    pos, vel, mass = B.nbody_initial_state(13, seed=3)
    u2 = B.heat2d_initial_state(11, 13)
    u1 = np.sin(np.linspace(0.0, 3.0, 37)) + 0.1 * rng.standard_normal(37)
    return {
        # name: (kernel, griddim, blockdim, sharedmem, args)
        "nbody_accel_tiled": (B.nbody_accel_tiled, 2, B.TILE, 0,
                              [pos, mass, np.zeros((13, 3)), 0.7]),
        "kinetic_energy_partial": (B.kinetic_energy_partial, 1, B.RED_TPB, 0,
                                   [vel, mass, np.zeros(1)]),
        "kinetic_energy_dynamic_shared": (B.kinetic_energy_dynamic_shared, 1, B.RED_TPB,
                                          8 * B.RED_TPB, [vel, mass, np.zeros(1)]),
        "heat2d_halo_step": (B.heat2d_halo_step, (2, 2), (B.BX, B.BY), 0,
                             [u2, np.zeros_like(u2), 0.2]),
        "heat2d_halo_step_f32": (B.heat2d_halo_step_f32, (2, 2), (B.BX, B.BY), 0,
                                 [u2.astype(np.float32), np.zeros(u2.shape, np.float32),
                                  np.float32(0.2)]),
        "block_jacobi_smooth": (B.block_jacobi_smooth, 3, B.SMOOTH_TPB, 0,
                                [u1, np.zeros_like(u1), 4, 0.8]),
        "neighbour_average_tiled": (B.neighbour_average_tiled, 3, B.SMOOTH_TPB, 0,
                                    [u1, np.zeros_like(u1)]),
        "count_hot_cells": (B.count_hot_cells, 3, B.SMOOTH_TPB, 0,
                            [u1, 0.5, np.zeros(3, np.int64), np.zeros(3, np.int64)]),
        "solve_heat_equation_one_block": (B.solve_heat_equation, 1, 32, 0,
                                          [u1[:29].copy(), np.zeros(29), 5, 0.25]),
    }


LAUNCHES = _launches()


def _copy(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


@pytest.mark.parametrize("name", list(LAUNCHES))
def test_plain_launch_equals_numba_simulator(name):
    kernel, griddim, blockdim, sharedmem, make = LAUNCHES[name]
    expected = _copy(make)
    original(kernel)[griddim, blockdim, 0, sharedmem](*expected)
    got = _copy(make)
    kernel[griddim, blockdim, 0, sharedmem](*got)
    for g, e in zip(got, expected):
        if isinstance(e, np.ndarray):
            assert g.dtype == e.dtype
            np.testing.assert_array_equal(g, e)


def test_nbody_tiled_equals_untiled():
    pos, vel, mass = B.nbody_initial_state(13)
    tiled = B.simulate_nbody(pos, vel, mass, n_steps=2)
    untiled = B.simulate_nbody(pos, vel, mass, n_steps=2, tiled=False)
    np.testing.assert_allclose(tiled, untiled, rtol=1e-13, atol=1e-14)


def test_energy_sum_equals_numpy():
    _, vel, mass = B.nbody_initial_state(37)
    expected = 0.5 * np.sum(mass * np.sum(vel ** 2, axis=1))
    np.testing.assert_allclose(B.kinetic_energy(vel, mass), [expected], rtol=1e-13)
    np.testing.assert_allclose(B.kinetic_energy_dynamic(vel, mass), [expected], rtol=1e-13)


def test_warp_shuffle_sum_equals_numpy():
    x = np.linspace(-1.0, 1.0, 70)
    np.testing.assert_allclose(B.sum_of_squares_warp(x), warp_sums_reference(x), rtol=1e-13)


@pytest.mark.parametrize("kernel", ["halo", "halo_f32"])
def test_halo_stencil_equals_untiled(kernel):
    u0 = B.heat2d_initial_state(11, 13)
    dtype = np.float32 if kernel.endswith("f32") else np.float64
    got = B.simulate_heat2d(u0.astype(dtype), dtype(0.2), 2, kernel=kernel)
    expected = B.simulate_heat2d(u0, 0.2, 2, kernel="plain")
    assert got.dtype == dtype
    rtol = 1e-6 if dtype == np.float32 else 1e-14
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol)


def test_laplace_grid_sync_1001_cells_across_blocks():
    """NVIDIA's example: 1001 cells, 256 threads per block, 4 blocks synchronised by the grid."""
    data = B.laplace_initial_state(1001)
    got = B.simulate_laplace(data, k=0.25, timesteps=6, threads_per_block=256)
    np.testing.assert_allclose(got, laplace_reference(data, 0.25, 6), rtol=1e-14, atol=1e-9)
    # the heat spread across a block boundary (cell 512 is in the third block): one-block
    # syncing would have let neighbouring blocks read stale values
    assert got[500] > 0.0


# --- Jacobians --------------------------------------------------------------------------------

def _nbody(pos, mass, G):
    _, vel, _ = B.nbody_initial_state(10)
    return B.simulate_nbody(pos, vel, mass, G, n_steps=2)


def _heat2d(u, r):
    return B.simulate_heat2d(u, r, n_steps=2)


def _heat2d_f32(u, r):
    return B.simulate_heat2d(u, r, n_steps=2, kernel="halo_f32")


def _laplace_small(data, k):
    return B.simulate_laplace(data, k, timesteps=4, threads_per_block=16)


def _smooth(u, w):
    return B.smooth_blocks(u, n_iter=3, w=w)


def _jacobian_cases():
    pos, vel, mass = B.nbody_initial_state(10)
    u1 = np.sin(np.linspace(0.0, 3.0, 21)) + 0.2
    u2 = B.heat2d_initial_state(8, 10)
    return {
        # name: (f, args, argnums)
        "nbody_tiled": (_nbody, (pos, mass, 1.0), (0, 1, 2)),
        "energy_reduction": (B.kinetic_energy, (vel, mass), (0, 1)),
        "energy_reduction_dynamic": (B.kinetic_energy_dynamic, (vel, mass), (0, 1)),
        "warp_shuffle": (B.sum_of_squares_warp, (np.linspace(-1.0, 1.0, 40),), 0),
        "halo_stencil": (_heat2d, (u2, 0.2), (0, 1)),
        "halo_stencil_f32": (_heat2d_f32, (u2.astype(np.float32), np.float32(0.2)), (0, 1)),
        "laplace_grid_sync_3_blocks": (_laplace_small, (u1 + 1.0, 0.25), (0, 1)),
        "syncthreads_in_loop": (_smooth, (u1, 0.8), (0, 1)),
        "device_function_syncs": (B.neighbour_average, (u1,), 0),
    }


JACOBIANS = _jacobian_cases()


@pytest.mark.parametrize("name", list(JACOBIANS))
def test_jacobian_equals_central_differences(name):
    f, args, argnums = JACOBIANS[name]
    check_jacobian(f, *args, argnums=argnums, chunk_size=16, n_directions=2)


def test_laplace_1001_cells_jvp_equals_central_differences():
    """The dual launch of the 1001-cell grid-sync kernel: state and k along one direction."""
    data = np.sin(np.linspace(0.0, np.pi, 1001)) ** 2

    def final(d, k):
        return B.simulate_laplace(d, k, timesteps=2)

    check_jvp(final, (data, 0.25))


@cuda.jit
def _deposit(w, rho):
    p = cuda.grid(1)
    if p < w.shape[0]:
        cuda.atomic.add(rho, p % 2, w[p])


def test_float_atomics_add_in_thread_order_as_numba_simulator():
    """The simulated threads of a block run one at a time, in thread order (numba's simulator
    does): a float atomic sum is the same bits in every run and equals numba's. Threads
    running at once summed it in a varying order (found by an unseen port: particle
    deposition). Its derivative is deterministic too."""
    p = np.arange(64.0)
    w = np.sin(p * 0.37) * 1e3 + 1e-3 * np.cos(p)
    expected = np.zeros(2)
    original(_deposit)[2, 32](w, expected)
    ordered = np.zeros(2)
    for k in range(64):
        ordered[k % 2] += w[k]
    assert np.array_equal(expected, ordered)
    for _ in range(4):
        rho = np.zeros(2)
        _deposit[2, 32](w, rho)
        assert np.array_equal(rho, expected)

    def deposit(ww):
        d_rho = cuda.to_device(np.zeros(2))
        _deposit[2, 32](cuda.to_device(ww), d_rho)
        return d_rho.copy_to_host()

    value, tangent = dualgpu.jvp(deposit, (w,), (np.cos(p),))
    assert np.array_equal(value, expected)
    np.testing.assert_allclose(tangent, [np.cos(p)[0::2].sum(), np.cos(p)[1::2].sum()],
                               rtol=1e-12)
