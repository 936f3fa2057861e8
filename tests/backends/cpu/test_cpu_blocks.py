"""Block-level kernels on the cpu backend: shared memory, barriers, warp intrinsics, grid sync.

Every kernel is checked three ways: its plain result on the cpu backend equals
numba's CUDA simulator (dualgpu's ``cudasim`` backend with plain arrays; numpy where
the simulator lacks warp functions) and a numpy reference, and its Jacobians with
respect to state and parameters on the cpu backend equal central finite
differences (float64 and, where the kernel has one, float32). Jacobians are taken
8 lanes at a time (the last chunk padded), so each kernel compiles once for duals.
"""
import numpy as np
import pytest

import block_kernels as bk
import block_kernels_cpu as bkc
import dualgpu
from dualgpu import DualgpuError
from dualgpu.backends.cpu import kernel as cpu
from dualgpu.testing import check_jacobian

pytestmark = pytest.mark.compile


def on(backend, fn, *args, **kwargs):
    with dualgpu.using_backend(backend):
        return fn(*args, **kwargs)


def on_cpu_and_simulator(fn, *args, **kwargs):
    """``fn``'s result on the cpu backend, after checking it equals the simulator's."""
    got = on("cpu", fn, *args, **kwargs)
    expected = on("cudasim", fn, *args, **kwargs)
    for g, e in zip(got if isinstance(got, tuple) else (got,),
                    expected if isinstance(expected, tuple) else (expected,)):
        np.testing.assert_allclose(g, e, rtol=1e-13, atol=1e-13)
    return got


def jacobian_matches_fd(f, args, argnums, **kwargs):
    # one lane count for every test: the dual arithmetic compiles once per process
    with dualgpu.using_backend("cpu"):
        check_jacobian(f, *args, argnums=argnums, chunk_size=8, n_directions=2, **kwargs)


@pytest.fixture
def parallel_blocks(monkeypatch):
    """Make the cpu backend run blocks on several workers whatever the machine."""
    from dualgpu.backends.cpu import parallel as cpu_parallel

    monkeypatch.setattr(cpu_parallel, "FORCE", True)


# --- the kernels (tests/fixtures/block_kernels.py) ----------------------------------------
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


def test_warp_shuffle_reduction():
    x = np.random.default_rng(1).random(70)
    got = on("cpu", bk.sum_of_squares_warp, x)  # the simulator has no shuffles
    padded = np.r_[x, np.zeros(96 - 70)] ** 2
    np.testing.assert_allclose(got, padded.reshape(3, 32).sum(1), rtol=1e-13)
    jacobian_matches_fd(bk.sum_of_squares_warp, (x[:40],), 0)


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


# --- more shapes (tests/fixtures/block_kernels_cpu.py) --------------------------------------------
@pytest.mark.parametrize("kernel, dtype", [(bkc.fast_matmul, np.float64),
                                           (bkc.fast_matmul_f32, np.float32)])
def test_documented_tiled_matmul(kernel, dtype):
    rng = np.random.default_rng(5)
    a, b = rng.random((6, 6)).astype(dtype), rng.random((6, 6)).astype(dtype)
    got = on_cpu_and_simulator(bkc.matmul, a, b, kernel)
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-5 if dtype == np.float32
                               else 1e-13)
    a, b = a[:3, :3].copy(), b[:3, :3].copy()
    jacobian_matches_fd(lambda a, b: bkc.matmul(a, b, kernel), (a, b), (0, 1))


def test_shared_memory_prefix_sum():
    x = np.random.default_rng(6).random(40)
    got = on_cpu_and_simulator(bkc.prefix_sums, x)
    padded = np.r_[x, np.zeros(8)].reshape(3, 16)
    np.testing.assert_allclose(got, np.cumsum(padded, axis=1).ravel()[:40], rtol=1e-13)
    jacobian_matches_fd(bkc.prefix_sums, (x[:20],), 0)


def test_warp_scans_broadcast_and_votes():
    x = np.random.default_rng(7).random(50)
    x[3] = 2.5  # warp 0: one value >= 2 (eq_sync false), warp 1: none (eq_sync true)
    scan, total, first, ballots, votes = on("cpu", bkc.warp_scans, x)
    warps = np.r_[x, np.zeros(14)].reshape(2, 32)
    np.testing.assert_allclose(scan, np.cumsum(warps, axis=1).ravel()[:50], rtol=1e-13)
    np.testing.assert_allclose(total, np.repeat(warps.sum(1), 32)[:50], rtol=1e-13)
    np.testing.assert_allclose(first, np.repeat(warps[:, 0], 32)[:50] * x, rtol=1e-13)
    bits = [sum(1 << lane for lane in range(32) if w[lane] >= 0.5) for w in warps]
    np.testing.assert_array_equal(ballots.astype(np.int64) & 0xFFFFFFFF, bits)
    expected = [[w.max() > 0.9, w.min() >= 0.0, (w >= 2.0).all() or not (w >= 2.0).any()]
                for w in warps]
    np.testing.assert_array_equal(votes, np.array(expected, np.int32))
    assert votes[0, 2] == 0 and votes[1, 2] == 1

    def floats(x):
        return bkc.warp_scans(x)[:3]

    jacobian_matches_fd(floats, (x[:36],), 0)


def test_warp_aggregated_count_with_activemask_match_any_and_lanemask():
    keys = np.random.default_rng(8).integers(0, 5, 75).astype(np.int32)  # last warp partial
    counts = np.zeros(5, np.int32)
    with dualgpu.using_backend("cpu"):
        bkc.warp_aggregated_count[3, 32](keys, counts)
    np.testing.assert_array_equal(counts, np.bincount(keys, minlength=5))


def test_syncwarp_and_match_all():
    x = np.random.default_rng(18).random(60)
    out = np.zeros(2)
    with dualgpu.using_backend("cpu"):
        bkc.warp_shared_reduce[1, 64](x, out)
    np.testing.assert_allclose(out, np.r_[x, 0, 0, 0, 0].reshape(2, 32).sum(1), rtol=1e-13)
    keys = np.zeros(64, np.int64)
    keys[40] = 3  # warp 0: all equal; warp 1: not
    mask, same = np.zeros(64, np.int32), np.zeros(64, np.bool_)
    with dualgpu.using_backend("cpu"):
        bkc.warp_match_all[2, 32](keys, mask, same)
    np.testing.assert_array_equal(mask.astype(np.int64) & 0xFFFFFFFF,
                                  [0xFFFFFFFF] * 32 + [0] * 32)
    np.testing.assert_array_equal(same, [True] * 32 + [False] * 32)


def test_tuple_view_and_int_to_float_state_with_a_uniform_continue():
    u = np.random.default_rng(19).random((11, 3))
    got = on_cpu_and_simulator(bkc.row_mix, u)
    rows = u.sum(1)
    blocks = np.r_[rows, np.full(5, rows[-1])].reshape(2, 8)
    acc = blocks.copy()
    for step in (0, 1, 3):
        acc = acc + 0.25 * np.roll(blocks, -step, axis=1)
    np.testing.assert_allclose(got, acc.ravel()[:11] * u[:, 0], rtol=1e-13)
    jacobian_matches_fd(bkc.row_mix, (u[:5],), 0)


def test_nested_loops_and_a_branch_uniform_per_block():
    u = np.random.default_rng(9).random((7, 10))
    on_cpu_and_simulator(bkc.smooth_tiles, u)
    jacobian_matches_fd(bkc.smooth_tiles, (u[:4, :5].copy(),), 0)


def test_3d_blocks_with_a_3d_tile():
    u = np.random.default_rng(10).random((3, 4, 3))
    got = on_cpu_and_simulator(bkc.block_sums, u)
    padded = np.zeros((4, 4, 4))
    padded[:3, :4, :3] = u
    np.testing.assert_allclose(got, (padded ** 2).reshape(2, 2, 2, 2, 2, 2).sum((1, 3, 5)),
                               rtol=1e-13)
    jacobian_matches_fd(bkc.block_sums, (u,), 0)


def test_shared_arrays_of_several_dtypes_with_atomics():
    x = np.random.default_rng(11).random(45)
    hist, energy = on_cpu_and_simulator(bkc.histogram, x)
    bins = np.minimum((x * bkc.NBINS).astype(int), bkc.NBINS - 1)
    np.testing.assert_array_equal(hist, np.bincount(bins, minlength=bkc.NBINS))
    np.testing.assert_allclose(energy, np.bincount(bins, x * x, minlength=bkc.NBINS),
                               rtol=1e-13)
    jacobian_matches_fd(lambda x: bkc.histogram(x)[1], (x[:20],), 0)


def test_dynamic_shared_memory_in_float32():
    x = np.random.default_rng(12).random(24).astype(np.float32)
    got = on_cpu_and_simulator(bkc.reversed_products, x)
    np.testing.assert_allclose(got, (x.reshape(3, 8)[:, ::-1] * x.reshape(3, 8)).ravel(),
                               rtol=1e-6)
    jacobian_matches_fd(bkc.reversed_products, (x[:16],), 0)


def test_local_array_kept_across_barriers():
    u = np.random.default_rng(13).random(13)
    on_cpu_and_simulator(bkc.histories, u)
    jacobian_matches_fd(bkc.histories, (u,), 0)


@pytest.mark.parametrize("kernel", [bkc.suffix_max, bkc.suffix_max_break])
def test_syncthreads_or_loop_and_uniform_break(kernel):
    x = np.random.default_rng(14).permutation(19) / 19.0
    got = on_cpu_and_simulator(bkc.suffix_maxima, x, kernel)
    blocks = np.r_[x, np.full(5, -1e300)].reshape(3, 8)
    expected = np.maximum.accumulate(blocks[:, ::-1], axis=1)[:, ::-1].ravel()[:19]
    np.testing.assert_array_equal(got, expected)
    jacobian_matches_fd(lambda x: bkc.suffix_maxima(x, kernel), (x,), 0)


def test_device_function_with_barrier_and_early_return_inlined_twice():
    u = np.random.default_rng(15).random(13)
    on_cpu_and_simulator(bkc.left_averages, u)
    jacobian_matches_fd(bkc.left_averages, (u,), 0)


def test_shared_array_declared_in_a_device_function_is_one_per_block():
    u = np.random.default_rng(20).random(16)
    got = on_cpu_and_simulator(bkc.rotated_squares, u)
    np.testing.assert_allclose(got, np.roll(u.reshape(2, 8), -1, axis=1).ravel() ** 2,
                               rtol=1e-13)
    jacobian_matches_fd(bkc.rotated_squares, (u,), 0)


def test_grid_group_handed_to_a_device_function():
    u = np.random.default_rng(16).random(37)
    got = on("cpu", bkc.relax, u)  # numpy, not the simulator: see the Laplace test
    a = u.copy()
    for _ in range(6):
        a = a + 0.2 * (np.r_[a[0], a[:-1]] - 2 * a + np.r_[a[1:], a[-1]])
    np.testing.assert_allclose(got, a, rtol=1e-13)
    jacobian_matches_fd(lambda u, k: bkc.relax(u, 2, k), (u[:20], 0.2), (0, 1))


def test_blocks_on_several_workers_give_the_same_results(parallel_blocks):
    pos, _, mass = bk.nbody_initial_state(40)
    kernel = cpu.compile_kernel(bk.nbody_accel_tiled)
    acc = np.zeros_like(pos)
    kernel.launch(5, bk.TILE, (pos, mass, acc, 1.3))
    assert kernel._blocks is not None
    np.testing.assert_allclose(acc, _accelerations(pos, mass, 1.3), rtol=1e-12)


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


# --- errors: the construct, its line and what to do ------------------------------------------
def _line_of(function, text):
    import inspect

    lines, first = inspect.getsourcelines(function.py_func)
    return first + next(k for k, line in enumerate(lines) if text in line)


def test_divergent_barrier_is_refused_with_line_and_block():
    line = _line_of(bkc.divergent_barrier, "cuda.syncthreads()")
    with dualgpu.using_backend("cpu"), pytest.raises(DualgpuError) as info:
        bkc.divergent_barrier[2, 8](np.zeros(16))
    message = str(info.value)
    assert f"cuda.syncthreads() at line {line} of kernel 'divergent_barrier'" in message
    assert "reached by 4 of the 8 threads of the block (0, 0, 0)" in message
    assert "thread (4, 0, 0)" in message and "undefined behaviour" in message


def test_shuffle_reading_an_exited_lane_is_refused():
    with dualgpu.using_backend("cpu"), pytest.raises(DualgpuError) as info:
        bkc.shuffle_from_exited_lane[1, 32](np.ones(20), np.zeros(20))
    message = str(info.value)
    line = _line_of(bkc.shuffle_from_exited_lane, "shfl_down_sync")
    assert f"at line {line} of kernel 'shuffle_from_exited_lane'" in message
    assert "lane 19" in message and "reads lane 20" in message and "undefined" in message


def test_warp_mask_without_the_calling_lane_is_refused():
    with dualgpu.using_backend("cpu"), pytest.raises(DualgpuError, match=r"lane 1 .* passes the "
                                                     r"mask 0x00000001, which leaves the lane"):
        bkc.mask_without_self[1, 32](np.ones(32))


@pytest.mark.parametrize("kernel, args, text", [
    (bkc.barrier_in_conditional_expression, (np.zeros(8),),
     r"kernel 'barrier_in_conditional_expression', line \d+: cuda.syncthreads_count\(1\) is "
     r"inside a conditional expression"),
    (bkc.barrier_in_loop_over_array, (np.zeros(8), np.ones(2)),
     r"kernel 'barrier_in_loop_over_array', line \d+: a for loop that contains "
     r"cuda.syncthreads\(\) \(line \d+\) must be 'for name in range\(...\)'"),
    (bkc.shared_size_from_argument, (np.zeros(8), 4),
     r"kernel 'shared_size_from_argument', line \d+: the shape of cuda.shared.array \('n'\) "
     r"must be a compile-time constant"),
    (bkc.calls_recursive_sync, (np.zeros(8),),
     r"'recursive_sync' synchronises and is recursive"),
    (bkc.grid_group_misused, (np.zeros(8),),
     r"kernel 'grid_group_misused', line \d+: the grid group 'g.size' is used other than"),
])
def test_unsupported_constructs_are_named_with_their_line(kernel, args, text):
    with dualgpu.using_backend("cpu"), pytest.raises(DualgpuError, match=text):
        kernel[1, 8](*args)


def test_dynamic_shared_memory_needs_a_size():
    with dualgpu.using_backend("cpu"), pytest.raises(DualgpuError, match=r"declares dynamic "
                                                     r"shared memory .* 4th launch parameter"):
        bkc.reverse_in_blocks[1, 8](np.ones(8, np.float32), np.zeros(8, np.float32))


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
