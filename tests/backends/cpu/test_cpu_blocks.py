"""Block-level kernels on the cpu backend: the issue's kernels, shared memory, barriers, grid sync.

The kernels of ``tests/fixtures/block_kernels.py`` (tiled N-body, shared-memory reductions, a
2-D halo stencil, NVIDIA's grid-synchronised Laplace example, barriers in loops and device
functions) and how block-level launches run (several workers, other argument types, lane
tiles). More shapes are in ``test_cpu_blocks_shared.py``, warp functions in
``test_cpu_blocks_warps.py``.

Every kernel is checked three ways: its plain result on the cpu backend equals
numba's CUDA simulator (dualgpu's ``cudasim`` backend with plain arrays; numpy where
the simulator lacks warp functions) and a numpy reference, and its Jacobians with
respect to state and parameters on the cpu backend equal central finite
differences (float64 and, where the kernel has one, float32). Jacobians are taken
8 lanes at a time (the last chunk padded), so each kernel compiles once for duals
(``tests/fixtures/block_checks.py``).
"""
import numpy as np
import pytest

import block_kernels as bk
import dualgpu
from block_checks import jacobian_matches_fd, on, on_cpu_and_simulator
from dualgpu.backends.cpu import kernel as cpu
from dualgpu.testing import check_jacobian

pytestmark = pytest.mark.compile


@pytest.fixture
def parallel_blocks(monkeypatch):
    """Make the cpu backend run blocks on several workers whatever the machine."""
    from dualgpu.backends.cpu import parallel as cpu_parallel

    monkeypatch.setattr(cpu_parallel, "FORCE", True)
    monkeypatch.setattr(cpu_parallel, "available_threads", lambda: 2)


# --- the kernels (tests/fixtures/block_kernels.py) ------------------------------------
def _accelerations(pos, mass, G):
    d = pos[None, :, :] - pos[:, None, :]
    r2 = (d * d).sum(-1) + bk.SOFTENING2
    return G * (mass[None, :, None] * d / (r2 * np.sqrt(r2))[:, :, None]).sum(1)


def test_tiled_nbody_equals_simulator_untiled_and_numpy():
    pos, _, mass = bk.nbody_initial_state(21)  # three tiles, the last one partial
    acc = on_cpu_and_simulator(_accel, bk.nbody_accel_tiled, pos, mass)
    np.testing.assert_allclose(acc, on("cpu", _accel, bk.nbody_accel_untiled, pos, mass),
                               rtol=1e-13)
    np.testing.assert_allclose(acc, _accelerations(pos, mass, 1.3), rtol=1e-12)


def _accel(kernel, pos, mass):
    acc = np.zeros_like(pos)
    kernel[(pos.shape[0] + bk.TILE - 1) // bk.TILE, bk.TILE](pos, mass, acc, 1.3)
    return acc


def test_tiled_nbody_jacobians():
    pos, vel, mass = bk.nbody_initial_state(5)

    def final_positions(p, m, G):
        return bk.simulate_nbody(p, vel, m, G, n_steps=2)

    jacobian_matches_fd(final_positions, (pos, mass, 1.0), (0, 1, 2))


def test_energy_reduction_static_and_dynamic_shared_memory():
    _, vel, mass = bk.nbody_initial_state(37)
    expected = 0.5 * (mass * (vel ** 2).sum(1)).sum()
    for f in (bk.kinetic_energy, bk.kinetic_energy_dynamic):
        np.testing.assert_allclose(on_cpu_and_simulator(f, vel, mass), [expected], rtol=1e-13)
    _, vel, mass = bk.nbody_initial_state(5)
    jacobian_matches_fd(bk.kinetic_energy, (vel, mass), (0, 1))
    jacobian_matches_fd(bk.kinetic_energy_dynamic, (vel, mass), (0, 1))


@pytest.mark.parametrize("dtype, kernel", [(np.float64, "halo"), (np.float32, "halo_f32")])
def test_halo_stencil_2d(dtype, kernel):
    u0 = bk.heat2d_initial_state(13, 11, dtype)
    r = dtype(0.2)
    got = on_cpu_and_simulator(bk.simulate_heat2d, u0, r, n_steps=2, kernel=kernel)
    untiled = on("cpu", bk.simulate_heat2d, u0.astype(np.float64), 0.2, n_steps=2,
                 kernel="plain")
    np.testing.assert_allclose(got, untiled, rtol=1e-6 if dtype == np.float32 else 1e-13)
    u0 = bk.heat2d_initial_state(9, 10, dtype)

    def final(u, r):
        return bk.simulate_heat2d(u, r, n_steps=2, kernel=kernel)

    jacobian_matches_fd(final, (u0, r), (0, 1))


def _laplace_numpy(data, k, timesteps):
    a = data.copy()
    for _ in range(timesteps):
        left = np.r_[0.0, a[:-1]]
        right = np.r_[a[1:], 0.0]
        a = a + k * (left - 2 * a + right)
    return a


def test_laplace_grid_sync_at_1001_cells():
    # numba's simulator runs blocks one after another, so its grid.sync() does not wait for
    # the other blocks: the reference is numpy. Random data makes every block boundary count.
    data = bk.laplace_initial_state(1001)
    got = on("cpu", bk.simulate_laplace, data, 0.25, timesteps=10)
    np.testing.assert_allclose(got, _laplace_numpy(data, 0.25, 10), rtol=1e-12, atol=1e-9)
    data = np.random.default_rng(17).random(1001)
    got = on("cpu", bk.simulate_laplace, data, 0.25, timesteps=10)
    np.testing.assert_allclose(got, _laplace_numpy(data, 0.25, 10), rtol=1e-13)

    def final(d, k):
        return bk.simulate_laplace(d, k, timesteps=6)

    jacobian_matches_fd(final, (data, 0.25), (0, 1))


def test_syncthreads_inside_a_loop():
    u = np.random.default_rng(2).random(37)
    on_cpu_and_simulator(bk.smooth_blocks, u, 4, 0.8)

    def smoothed(u, w):
        return bk.smooth_blocks(u, 3, w)

    jacobian_matches_fd(smoothed, (u[:20], 0.8), (0, 1))


def test_syncthreads_count_and_or():
    u = np.random.default_rng(3).random(50)
    counts, any_hot = np.zeros(4, np.int32), np.zeros(4, np.int32)

    def votes(u):
        counts[:] = 0
        any_hot[:] = 0
        bk.count_hot_cells[4, 16](u, 0.7, counts, any_hot)
        return counts.copy(), any_hot.copy()

    got_counts, got_any = on_cpu_and_simulator(votes, u)
    hot = np.r_[u > 0.7, np.zeros(14, bool)].reshape(4, 16)
    np.testing.assert_array_equal(got_counts, hot.sum(1))
    np.testing.assert_array_equal(got_any, hot.any(1))


def test_device_function_that_synchronises():
    u = np.random.default_rng(4).random(37)
    on_cpu_and_simulator(bk.neighbour_average, u)
    jacobian_matches_fd(bk.neighbour_average, (u[:20],), 0)


# --- launches: workers, argument types, lane tiles --------------------------------------------
def test_blocks_on_several_workers_give_the_same_results(parallel_blocks, monkeypatch):
    from dualgpu.backends.cpu import parallel as cpu_parallel

    pos, _, mass = bk.nbody_initial_state(40)
    kernel = cpu.compile_kernel(bk.nbody_accel_tiled)
    threads = []
    run_parallel = cpu_parallel.run_parallel
    monkeypatch.setattr(cpu_parallel, "run_parallel",
                        lambda *a: threads.append(a[3]) or run_parallel(*a))
    acc = np.zeros_like(pos)
    kernel.launch(5, bk.TILE, (pos, mass, acc, 1.3))
    assert kernel._blocks is not None and threads == [2]
    np.testing.assert_allclose(acc, _accelerations(pos, mass, 1.3), rtol=1e-12)
    # a serial launch runs the same compiled launcher (one thread claims every worker)
    monkeypatch.setattr(cpu_parallel, "FORCE", False)
    monkeypatch.setattr(cpu_parallel, "ENABLED", False)
    serial = np.zeros_like(pos)
    kernel.launch(5, bk.TILE, (pos, mass, serial, 1.3))
    assert threads == [2, 1]
    np.testing.assert_array_equal(serial, acc)
    # (other tests' launches of this kernel have entries of their own: other argument types)
    assert all(len(b.launcher.signatures) == 1 for b in kernel._blocks._built.values())


def test_launches_with_other_argument_types_get_their_own_code():
    from dualgpu import dual_array

    u = np.random.default_rng(21).random(32)
    expected = np.convolve(np.r_[u[:1], u, u[-1:]], np.ones(3) / 3, "valid")
    expected[[0, 15, 16, 31]] = [(2 * u[0] + u[1]) / 3, (u[14] + 2 * u[15]) / 3,
                                 (2 * u[16] + u[17]) / 3, (u[30] + 2 * u[31]) / 3]
    kernel = bk.neighbour_average_tiled
    with dualgpu.using_backend("cpu"):
        for make in (lambda a: a.copy(), lambda a: np.repeat(a, 2)[::2],  # C and strided
                     lambda a: dual_array(a.copy(), lanes=2)):
            x, out = make(u), make(np.zeros(32))
            kernel[2, 16](x, out)
            values = getattr(out, "values", out)
            np.testing.assert_allclose(values, expected, rtol=1e-13)
        x = dual_array(u.copy(), lanes=2)
        x.partials[:] = [u, 2 * u]
        out = dual_array(np.zeros(32), lanes=2)
        kernel[2, 16](x, out)
        np.testing.assert_allclose(out.partials, [expected, 2 * expected], rtol=1e-13)


def test_block_level_kernels_with_more_lanes_than_a_tile(monkeypatch):
    """Runs of many lane tiles: one block-level launch per tile, arrays restored between them.

    The N-body step updates positions and velocities in place (read and written), so every
    tile must start from the same state; the Jacobian must equal the one computed a tile per
    run of f, bit for bit, and central differences.
    """
    pos, vel, mass = bk.nbody_initial_state(24)

    def final_positions(mass):
        return bk.simulate_nbody(pos, vel, mass, n_steps=2, tiled=True)

    tiles = []
    launch_tiles = cpu.launch_tiles

    def counted(launch, py_func, args, n_tiles, lanes, *rest):
        tiles.append((py_func.__name__, n_tiles, lanes))
        return launch_tiles(launch, py_func, args, n_tiles, lanes, *rest)

    monkeypatch.setattr(cpu, "launch_tiles", counted)
    with dualgpu.using_backend("cpu"):
        wide = dualgpu.jacobian(final_positions, mass, chunk_size=8)  # 24 lanes: 3 tiles
        assert ("nbody_accel_tiled", 3, 8) in tiles
        monkeypatch.setattr(dualgpu.core.lanes, "BATCH_BYTES", 1)  # one tile per run of f
        narrow = dualgpu.jacobian(final_positions, mass, chunk_size=8)
        check_jacobian(final_positions, mass, chunk_size=8, n_directions=2)
    np.testing.assert_array_equal(wide, narrow)
