"""Block-level kernels on the cpu backend: warp functions.

Shuffles, inclusive scans, broadcasts, ballots and votes, ``activemask``/``match_any``/
``lanemask_lt`` aggregation, ``syncwarp`` and ``match_all`` (``tests/fixtures/block_kernels.py``
and ``block_kernels_cpu.py``), and the warp misuses the backend refuses, named with their line.
numba's simulator has no warp functions: the references are numpy; Jacobians are checked
against central differences, 8 lanes at a time (``tests/fixtures/block_checks.py``).
"""
import numpy as np
import pytest

import block_kernels as bk
import block_kernels_cpu as bkc
import dualgpu
from block_checks import jacobian_matches_fd, line_of, on
from dualgpu import DualgpuError

pytestmark = pytest.mark.compile


def test_warp_shuffle_reduction():
    x = np.random.default_rng(1).random(70)
    got = on("cpu", bk.sum_of_squares_warp, x)  # the simulator has no shuffles
    padded = np.r_[x, np.zeros(96 - 70)] ** 2
    np.testing.assert_allclose(got, padded.reshape(3, 32).sum(1), rtol=1e-13)
    jacobian_matches_fd(bk.sum_of_squares_warp, (x[:40],), 0)


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


# --- errors: the construct, its line and what to do -------------------------------------------
def test_shuffle_reading_an_exited_lane_is_refused():
    with dualgpu.using_backend("cpu"), pytest.raises(DualgpuError) as info:
        bkc.shuffle_from_exited_lane[1, 32](np.ones(20), np.zeros(20))
    message = str(info.value)
    line = line_of(bkc.shuffle_from_exited_lane, "shfl_down_sync")
    assert f"at line {line} of kernel 'shuffle_from_exited_lane'" in message
    assert "lane 19" in message and "reads lane 20" in message and "undefined" in message


def test_warp_mask_without_the_calling_lane_is_refused():
    with dualgpu.using_backend("cpu"), pytest.raises(DualgpuError, match=r"lane 1 .* passes the "
                                                     r"mask 0x00000001, which leaves the lane"):
        bkc.mask_without_self[1, 32](np.ones(32))
