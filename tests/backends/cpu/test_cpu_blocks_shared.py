"""Block-level kernels on the cpu backend: more shapes of shared memory, barriers and grid groups.

The kernels of ``tests/fixtures/block_kernels_cpu.py``: tiled matmul, scans, 3-D blocks, shared
arrays of several dtypes with atomics, dynamic shared memory, local arrays across barriers,
``syncthreads_or`` loops and uniform breaks, barriers in device functions, grid groups; and the
constructs the backend refuses, named with their line. Each kernel is checked as in
``test_cpu_blocks.py``: against numba's simulator and numpy, and its Jacobians against
central differences (``tests/fixtures/block_checks.py``).
"""
import numpy as np
import pytest

import block_kernels_cpu as bkc
import dualgpu
from block_checks import jacobian_matches_fd, line_of, on, on_cpu_and_simulator
from dualgpu import DualgpuError

pytestmark = pytest.mark.compile


# --- more shapes (tests/fixtures/block_kernels_cpu.py) ----------------------------------------
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


def test_block_kernel_relaunched_after_a_rule_is_defined():
    """A defined rule changes every dual type's key (the rules' digest): a block launcher whose
    per-thread storage was typed before is not reused, and numba's typing caches do not hand
    out types of the old digest (numba refused the storage type: a value of one digest kept
    in storage of the other)."""
    u = np.random.default_rng(16).random(13)
    jacobian_matches_fd(bkc.left_averages, (u,), 0)
    dualgpu.rules.define("test_blocks.rule_after_launch", "2 * x", lambda x: x * x)
    try:
        jacobian_matches_fd(bkc.left_averages, (u,), 0)
    finally:  # later tests in this process keep the digest they were typed with
        dualgpu.rules.undefine("test_blocks.rule_after_launch")
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


# --- errors: the construct, its line and what to do -------------------------------------------
@pytest.mark.parametrize("workers", [1, 2])
def test_divergent_barrier_is_refused_with_line_and_block(workers, monkeypatch):
    from dualgpu.backends.cpu import parallel as cpu_parallel

    if workers == 2:  # the blocks on two threads: a helper's error row is reported too
        monkeypatch.setattr(cpu_parallel, "FORCE", True)
        monkeypatch.setattr(cpu_parallel, "available_threads", lambda: 2)
    line = line_of(bkc.divergent_barrier, "cuda.syncthreads()")
    with dualgpu.using_backend("cpu"), pytest.raises(DualgpuError) as info:
        bkc.divergent_barrier[2, 8](np.zeros(16))
    message = str(info.value)
    assert f"cuda.syncthreads() at line {line} of kernel 'divergent_barrier'" in message
    assert "reached by 4 of the 8 threads of the block" in message
    assert "thread (4, 0, 0)" in message and "undefined behaviour" in message
    if workers == 1:
        assert "of the block (0, 0, 0)" in message


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
