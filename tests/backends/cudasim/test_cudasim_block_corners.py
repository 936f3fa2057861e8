"""Corners of block-level porting (``block_kernels_extra.py``): simulator semantics, casts,
slice stores, copies into existing buffers, and the errors of kernels that would hang.

Plain results are compared with NumPy references (numba's simulator has no warp
collectives) or with numba's simulator; dual results with central differences and, for
casts, with the derivative worked out by hand.
"""
import numpy as np
import pytest
from numba import njit

import block_kernels_extra as X
import dualgpu
from dualgpu import Dual, DualArray, DualgpuError, cuda, dual_array
from dualgpu.testing import check_jvp
from unported import original

HOST_BACKENDS = ("cpu", "cudasim")


@pytest.fixture
def cudasim():
    with dualgpu.using_backend("cudasim"):
        yield


# --- shared memory on cudasim -----------------------------------------------------------------

def test_tiles_of_one_shape_are_distinct(cudasim):
    u = np.linspace(0.1, 1.7, 13)
    out = np.zeros(13)
    X.two_tiles[2, X.TPB](u, out)
    padded = np.concatenate([u, np.zeros(3)])
    base = (np.arange(16) // 8) * 8
    t = np.arange(16) % 8
    expected = (padded[base + (t + 1) % 8] + 2 * padded
                + padded[base + (t + 2) % 8] ** 2 * -padded[base + (t + 3) % 8])
    np.testing.assert_allclose(out, expected[:13], rtol=1e-15)


def test_tiles_are_fresh_in_every_block(cudasim):
    """A cell read before any thread of the block wrote it reads NaN, in every block (a tile
    shared between blocks would show the previous block's write)."""
    probe = np.zeros(3)
    X.first_read_of_tile[3, 4](probe)
    assert np.isnan(probe).all()


def test_dynamic_shared_two_dtypes_equal_numba_simulator(cudasim):
    u = np.linspace(-0.5, 1.0, 13).astype(np.float32)
    expected, got = np.zeros(13, np.float32), np.zeros(13, np.float32)
    original(X.dynamic_two_dtypes)[2, 8, 0, 64](u, expected)
    X.dynamic_two_dtypes[2, 8, 0, 64](u, got)
    np.testing.assert_array_equal(got, expected)


def test_dynamic_shared_two_dtypes_derivative(cudasim):
    def f(u):
        d_u = cuda.to_device(u)
        out = cuda.device_array_like(d_u)
        X.dynamic_two_dtypes[2, 8, 0, 64](d_u, out)
        return out.copy_to_host()

    # no u[i] at 0: the flags u > 0 must not flip under the finite-difference step
    check_jvp(f, (np.linspace(-0.45, 1.0, 13).astype(np.float32),))


# --- warps on cudasim -------------------------------------------------------------------------

def test_shuffles_equal_numpy(cudasim):
    x = np.linspace(-1.0, 1.0, 64)
    b, up, down, xor = (np.zeros(64) for _ in range(4))
    X.warp_shuffles[2, 32](x, b, up, down, xor)
    lane = np.arange(64) % 32
    base = np.arange(64) - lane
    np.testing.assert_array_equal(b, x[base + 3])
    np.testing.assert_array_equal(up, np.where(lane >= 1, x[np.maximum(np.arange(64) - 1, 0)], x))
    np.testing.assert_array_equal(
        down, np.where(lane + 2 < 32, x[np.minimum(np.arange(64) + 2, 63)], x))
    np.testing.assert_array_equal(xor, x[base + (lane ^ 5)])


def test_shuffled_duals_carry_their_partials(cudasim):
    x = dual_array(np.linspace(-1.0, 1.0, 32), np.stack([np.arange(32.0), -np.arange(32.0)]))
    outs = [dual_array(np.zeros(32), lanes=2) for _ in range(4)]
    X.warp_shuffles[1, 32](x, *outs)
    lane = np.arange(32)
    for out, source in zip(outs, [np.full(32, 3), np.maximum(lane - 1, 0),
                                  np.where(lane + 2 < 32, lane + 2, lane), lane ^ 5]):
        np.testing.assert_array_equal(out.values, x.values[source])
        np.testing.assert_array_equal(out.partials, x.partials[:, source])


def test_votes_equal_numpy(cudasim):
    x = np.sin(np.arange(32.0))
    out = np.zeros((32, 6), np.int64)
    X.warp_votes[1, 32](x, out)
    positive = x > 0
    ballot = int(sum(1 << k for k in range(32) if positive[k]))
    lane = np.arange(32)
    assert (out[:, 0] == int(positive.all())).all() and (out[:, 1] == int(positive.any())).all()
    assert (out[:, 2] == 0).all()  # the predicates differ
    assert (out[:, 3] == ballot - (1 << 32 if ballot >= 1 << 31 else 0)).all()  # int32
    groups = np.array([sum(1 << k for k in range(8 * g, 8 * g + 8)) for g in lane // 8])
    np.testing.assert_array_equal(
        out[:, 4], np.where(groups >= 1 << 31, groups - (1 << 32), groups))
    np.testing.assert_array_equal(out[:, 5], (1 << lane) - 1)


def test_activemask_is_the_lanes_in_the_branch(cudasim):
    x = np.arange(32.0)
    masks = np.zeros(32, np.int64)
    X.active_lanes[1, 32](x, masks)
    even = np.arange(32) % 2 == 0
    np.testing.assert_array_equal(masks[even], 0x55555555)
    np.testing.assert_array_equal(masks[~even], 0)
    expected = np.arange(32.0)
    expected[even] = np.where(np.arange(32)[even] + 2 < 32, np.arange(32)[even] + 2,
                              np.arange(32)[even])
    np.testing.assert_array_equal(x, expected)


def test_kernel_side_names_imported_from_numba_cuda(cudasim):
    x = np.arange(32.0) ** 1.5
    out, masks = np.zeros(32), np.zeros(32, np.int64)
    X.imported_names[1, 32](x, out, masks)
    np.testing.assert_array_equal(out, x[::-1] + np.r_[x[1:], x[31]])
    np.testing.assert_array_equal(masks, np.where(np.arange(32) < 16, 0xFFFF, 0xFFFF0000))

    def f(x):
        d_x = cuda.to_device(x)
        d_out = cuda.device_array_like(d_x)
        X.imported_names[1, 32](d_x, d_out, np.zeros(32, np.int64))
        return d_out.copy_to_host()

    check_jvp(f, (x,))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_warp_butterfly_norm_derivative(cudasim, dtype):
    x = np.cos(np.arange(40.0)).astype(dtype)
    got = X.warp_norms(x, dtype(1.5))
    norms = [np.sqrt(((1.5 * x[:32].astype(np.float64)) ** 2).sum()),
             np.sqrt(((1.5 * x[32:].astype(np.float64)) ** 2).sum())]
    rtol = 1e-6 if dtype == np.float32 else 1e-14
    np.testing.assert_allclose(got, np.repeat(norms, [32, 8]), rtol=rtol)
    check_jvp(X.warp_norms, (x, dtype(1.5)))


# --- kernels that would hang or read undefined values -----------------------------------------

def test_shuffle_reading_a_lane_that_returned_is_an_error(cudasim):
    with pytest.raises(DualgpuError, match=r"shfl_down_sync at .*block_kernels_extra.py:\d+: "
                                           r"lane 29 .* reads lane 30, which has already returned"):
        X.shuffle_after_return[1, 32](np.ones(30), np.zeros(30))


def test_shuffle_and_barrier_in_different_branches_would_hang(cudasim):
    with pytest.raises(DualgpuError, match="would hang on a GPU") as info:
        X.barrier_in_branch[1, 32](np.ones(32), np.zeros(32))
    message = str(info.value)
    assert "16 thread(s) of block(s) (0, 0, 0) wait at cuda.shfl_sync()" in message
    assert "wait at cuda.syncthreads()" in message and "block_kernels_extra.py:" in message


def test_grid_sync_that_a_block_skips_would_hang(cudasim):
    with pytest.raises(DualgpuError, match=r"block\(s\) \(1, 0, 0\) returned without "
                                           r"reaching grid.sync\(\)"):
        X.grid_sync_in_branch[2, 32](np.ones(64), np.zeros(64))


def test_grid_sync_refuses_more_threads_than_the_simulator_can_run(cudasim, monkeypatch):
    import block_kernels as B
    from dualgpu.backends.cudasim import kernel as backend

    monkeypatch.setattr(backend, "MAX_GRID_THREADS", 64)
    with pytest.raises(DualgpuError, match=r"all 96 threads .* at most 64.*grid-stride"):
        B.solve_heat_equation[3, 32](np.ones(96), np.zeros(96), 1, 0.25)


# --- float casts ------------------------------------------------------------------------------

def _casts_derivatives(u, a):
    """out = u a + 2 u + a + int(4 u) + u^2 (with float32 roundings): d/du and d/da."""
    return a + 2.0 + 2.0 * u, u + 1.0


@pytest.mark.parametrize("backend", HOST_BACKENDS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_casts_keep_the_partials(backend, dtype):
    u = (0.13 + 0.11 * np.arange(13)).astype(dtype)
    a = dtype(0.7)
    seeds = np.stack([np.ones(13), np.zeros(13)]).astype(dtype)
    with dualgpu.using_backend(backend):
        out = dual_array(np.zeros(13, dtype), lanes=2)
        X.casts[2, X.TPB](dual_array(u, seeds), out, Dual(a, [0.0, 1.0], dtype=dtype))
        plain = np.zeros(13, dtype)
        X.casts[2, X.TPB](u, plain, a)
    du, da = _casts_derivatives(u.astype(np.float64), float(a))
    np.testing.assert_allclose(out.partials[0], du, rtol=1e-6)
    np.testing.assert_allclose(out.partials[1], da, rtol=1e-6)
    np.testing.assert_array_equal(out.values, plain)


@pytest.mark.parametrize("backend", HOST_BACKENDS)
def test_casts_jvp_equals_central_differences(backend):
    u = (0.13 + 0.11 * np.arange(13)).astype(np.float32)  # 4u stays away from integers
    with dualgpu.using_backend(backend):
        check_jvp(X.simulate_casts, (u, np.float32(0.7)))


def test_casts_in_njit_code():
    import numba

    @njit
    def f(x):
        return numba.float32(x) * np.float32(3.0) + np.float64(x) + numba.int32(x * 2.0)

    d = f(Dual(1.25, [1.0, 2.0]))
    assert float(d.value) == 1.25 * 3 + 1.25 + 2
    np.testing.assert_array_equal(d.partials, [4.0, 8.0])


# --- slice stores -----------------------------------------------------------------------------

def _tile_slices(u, a):
    d_u = cuda.to_device(u)
    out = cuda.device_array_like(d_u)
    X.tile_slices[1, 16](d_u, out, a)
    return out.copy_to_host()


def _row_broadcast(u, a):
    d_u = cuda.to_device(u)
    out = cuda.device_array((u.shape[0], 3))
    X.row_broadcast[2, X.TPB](d_u, out, a)
    return out.copy_to_host()


def test_slice_stores_into_a_shared_tile(cudasim):
    u = np.linspace(0.1, 1.3, 12)
    got = _tile_slices(u, 0.5)
    tile = np.concatenate([u[4:8], np.full(4, 0.5 * u[0]), np.full(4, 0.5)])
    np.testing.assert_allclose(got, tile * u, rtol=1e-15)
    check_jvp(_tile_slices, (u, 0.5))
    check_jvp(_tile_slices, (u, 0.5), argnums=1)  # a plain u copied into a dual tile


@pytest.mark.parametrize("backend", HOST_BACKENDS)
def test_row_broadcast_into_a_dual_array(backend):
    u = np.linspace(0.1, 1.3, 13)
    with dualgpu.using_backend(backend):
        got = _row_broadcast(u, 0.5)
        check_jvp(_row_broadcast, (u, 0.5))
    expected = np.repeat((0.5 * u)[:, None], 3, axis=1)
    expected[:, 0] = u * u
    np.testing.assert_allclose(got, expected, rtol=1e-15)


def test_slice_stores_in_njit_code():
    @njit
    def f(t, u, d, plain):
        t[0:3] = u[2:5]
        t[3:5] = d
        t[5:7] = plain[0:2]
        t[7:] = 2.5

    rng = np.random.default_rng(0)
    t = dual_array(np.zeros(9), lanes=2)
    u = dual_array(rng.random(6), rng.random((2, 6)))
    f(t, u, Dual(0.7, [1.0, 2.0]), np.array([5.0, 6.0]))
    np.testing.assert_array_equal(t.values, np.r_[u.values[2:5], 0.7, 0.7, 5.0, 6.0, 2.5, 2.5])
    np.testing.assert_array_equal(t.partials[:, :3], u.partials[:, 2:5])
    np.testing.assert_array_equal(t.partials[:, 3:5], [[1.0, 1.0], [2.0, 2.0]])
    np.testing.assert_array_equal(t.partials[:, 5:], 0.0)


def test_slice_store_of_mismatched_lanes_is_refused():
    from numba.core.errors import TypingError

    @njit
    def f(t, u):
        t[0:2] = u[0:2]

    with pytest.raises(TypingError, match="2 lanes into a DualArray with 3 lanes"):
        f(dual_array(np.zeros(4), lanes=3), dual_array(np.zeros(4), lanes=2))


# --- copies into existing buffers -------------------------------------------------------------

@pytest.mark.parametrize("backend", HOST_BACKENDS)
def test_to_device_into_buffer_and_copy_to_device_differentiate(backend):
    u = np.sin(np.linspace(0.0, 3.0, 13))
    with dualgpu.using_backend(backend):
        plain = X.relax_with_buffers(u, 0.6)
        check_jvp(X.relax_with_buffers, (u, 0.6))
    expected = u.copy()
    for _ in range(3):
        new = expected.copy()
        new[1:-1] = 0.4 * expected[1:-1] + 0.3 * (expected[:-2] + expected[2:])
        expected = new
    np.testing.assert_allclose(plain, expected, rtol=1e-14)


@pytest.mark.parametrize("backend", HOST_BACKENDS)
def test_copies_between_dual_and_plain_buffers(backend):
    x = dual_array(np.arange(4.0), np.ones((2, 4)))
    with dualgpu.using_backend(backend):
        buffer = cuda.device_array_like(x)
        assert cuda.to_device(x, to=buffer) is buffer
        host = buffer.copy_to_host()
        np.testing.assert_array_equal(host.values, x.values)
        np.testing.assert_array_equal(host.partials, x.partials)
        buffer.copy_to_device(np.full(4, 3.0))  # a plain array: zero partials
        host = buffer.copy_to_host()
        np.testing.assert_array_equal(host.values, 3.0)
        np.testing.assert_array_equal(host.partials, 0.0)
        plain = cuda.to_device(np.zeros(4))
        with pytest.raises(DualgpuError, match="would drop its partials"):
            cuda.to_device(x, to=plain)
        with pytest.raises(DualgpuError, match=r"with 3 lane\(s\) from one with 2"):
            cuda.device_array_like(dual_array(np.zeros(4), lanes=3)).copy_to_device(x)
        with pytest.raises(DualgpuError, match="shape"):
            buffer.copy_to_device(np.zeros(5))
    np.testing.assert_array_equal(x.values, np.arange(4.0))  # the source is untouched
    assert isinstance(host, DualArray)
