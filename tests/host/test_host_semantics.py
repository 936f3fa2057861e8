"""Host duals beyond the generic grid: conventions, stores, creation, casts, errors, the driver.

test_host_numpy.py checks every supported operation against numpy and central
differences at smooth points; here are the points where a derivative is a convention
(ties, NaN, zeros), the analytic values where they are known, the stores of issue 11,
allocation on the template's side, float32 casts, and objectives under the driver.
"""
import numpy as np
import pytest

import dualgpu
from dualgpu import Dual, DualArray, DualgpuError, MissingRuleError, dual_array
from dualgpu.testing import check_jacobian


def _lanes_eye(values, dtype=np.float64):
    """A DualArray whose lane k is the unit tangent of element k (N = size)."""
    values = np.asarray(values, dtype)
    n = values.size
    return DualArray(values.copy(), np.eye(n, dtype=dtype).reshape((n,) + values.shape))


# ---------------------------------------------------------------------------
# conventions and analytic values
# ---------------------------------------------------------------------------
def test_max_min_ties_take_the_first_element():
    u = _lanes_eye([1.0, 3.0, 3.0, -2.0, -2.0])
    assert u.max().partials.tolist() == [0, 1, 0, 0, 0]  # np.argmax picks index 1
    assert np.min(u).partials.tolist() == [0, 0, 0, 1, 0]
    m = _lanes_eye([[2.0, 2.0], [1.0, 5.0]])
    np.testing.assert_array_equal(np.max(m, axis=1).partials, [[1, 0], [0, 0], [0, 0], [0, 1]])


def test_max_with_nan_takes_the_nan_elements_partials():
    u = _lanes_eye([1.0, np.nan, 4.0, np.nan])
    top = np.max(u)
    assert np.isnan(top.value) and top.partials.tolist() == [0, 1, 0, 0]
    rows = np.max(_lanes_eye([[1.0, np.nan], [5.0, 2.0]]), axis=1)
    assert np.isnan(rows.values[0]) and rows.values[1] == 5.0
    np.testing.assert_array_equal(rows.partials, [[0, 0], [1, 0], [0, 1], [0, 0]])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_prod_with_zeros_has_exact_partials(dtype):
    x = np.array([2.0, 0.0, 3.0, 0.5], dtype)
    p = np.prod(_lanes_eye(x, dtype))
    assert p.value == 0 and p.partials.tolist() == [0.0, 3.0, 0.0, 0.0]  # d/dx1 = 2*3*0.5
    two = np.prod(_lanes_eye([0.0, 4.0, 0.0]))
    assert two.partials.tolist() == [0.0, 0.0, 0.0]
    rows = np.prod(_lanes_eye([[0.0, 2.0], [3.0, 4.0]]), axis=1)
    np.testing.assert_array_equal(rows.partials, [[2, 0], [0, 0], [0, 4], [0, 3]])


def test_norm_at_zero_has_zero_partials_like_hypot():
    zero = _lanes_eye(np.zeros(3))
    for r in (np.linalg.norm(zero), np.linalg.norm(zero.reshape(1, 3), "fro")):
        assert r.value == 0 and not r.partials.any()
    cols = np.linalg.norm(_lanes_eye([[0.0, 3.0], [0.0, 4.0]]), axis=0)
    np.testing.assert_allclose(cols.values, [0.0, 5.0])
    np.testing.assert_allclose(cols.partials, [[0, 0], [0, 0.6], [0, 0], [0, 0.8]])
    assert np.linalg.norm(zero, 1).partials.tolist() == [1.0, 1.0, 1.0]  # |x|' = +1 at 0


def test_analytic_derivatives():
    x = np.array([0.3, -1.2, 2.0])
    u = _lanes_eye(x)
    np.testing.assert_allclose(np.linalg.norm(u).partials, x / np.linalg.norm(x), rtol=1e-15)
    np.testing.assert_allclose(np.sum(u ** 2).partials, 2 * x)
    np.testing.assert_allclose(np.sin(u).partials, np.diag(np.cos(x)))
    w = np.array([1.0, 2.0, 3.0])
    centroid = np.sum(w * u) / np.sum(u)
    np.testing.assert_allclose(centroid.partials, (w * x.sum() - (w * x).sum()) / x.sum() ** 2)
    a = np.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose((a @ u).partials, a.T)


def test_abs_and_interp_conventions():
    assert abs(_lanes_eye([0.0, -1.0])).partials.tolist() == [[1.0, 0.0], [0.0, -1.0]]
    xp, fp = np.array([0.0, 1.0, 2.0]), np.array([0.0, 2.0, 3.0])
    at_knot = np.interp(_lanes_eye([1.0]), xp, fp)  # from the right: slope of [1, 2]
    assert at_knot.values.tolist() == [2.0] and at_knot.partials.tolist() == [[1.0]]
    outside = np.interp(_lanes_eye([-1.0, 3.0]), xp, fp)
    assert not outside.partials.any()


# ---------------------------------------------------------------------------
# stores on the host (issue 11)
# ---------------------------------------------------------------------------
def test_slice_stores_copy_values_and_partials():
    u = dual_array(np.zeros(6), lanes=2)
    v = dual_array(np.arange(6.0), np.arange(12.0).reshape(2, 6))
    u[1:4] = v[2:5]
    np.testing.assert_array_equal(u.values, [0, 2, 3, 4, 0, 0])
    np.testing.assert_array_equal(u.partials, [[0, 2, 3, 4, 0, 0], [0, 8, 9, 10, 0, 0]])
    v.partials[:] = -1  # the store copied: u does not follow v
    assert u.partials[0, 1] == 2


def test_a_dual_or_a_number_broadcasts_into_a_slice():
    u = dual_array(np.ones((3, 4)), np.ones((2, 3, 4)))
    u[1, :] = Dual(5.0, [7.0, 8.0])
    np.testing.assert_array_equal(u.values[1], 5.0)
    np.testing.assert_array_equal(u.partials[:, 1], [[7.0] * 4, [8.0] * 4])
    u[:, 2] = 9.0
    assert (u.values[:, 2] == 9).all() and not u.partials[:, :, 2].any()
    u[2] = dual_array(np.full(4, 3.0), np.full((2, 4), 4.0))[None]  # (1, 4) into (4,)
    assert (u.partials[:, 2] == 4).all()


def test_a_stored_plain_array_gets_zero_partials():
    u = dual_array(np.ones(5), np.ones((3, 5)))
    u[::2] = np.array([7.0, 8.0, 9.0])
    u[1:2] = [4.0]
    np.testing.assert_array_equal(u.values, [7, 4, 8, 1, 9])
    np.testing.assert_array_equal(u.partials[0], [0, 0, 0, 1, 0])


def test_mask_and_index_array_stores():
    u = dual_array(np.arange(6.0), np.ones((2, 6)))
    mask = u.values > 2.5
    u[mask] = Dual(0.0, [5.0, 6.0])
    np.testing.assert_array_equal(u.values, [0, 1, 2, 0, 0, 0])
    np.testing.assert_array_equal(u.partials, [[1, 1, 1, 5, 5, 5], [1, 1, 1, 6, 6, 6]])
    u[[0, 2]] = dual_array([10.0, 20.0], [[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(u.partials[:, [0, 2]], [[1, 2], [3, 4]])
    u[u.values > 15] = 0.5
    assert u.values[2] == 0.5 and not u.partials[:, 2].any()
    w = dual_array(np.zeros((3, 2, 4)), lanes=2)
    w[[0, 2], :, [1, 3]] = dual_array(np.ones((2, 2)), np.arange(8.0).reshape(2, 2, 2))
    np.testing.assert_array_equal(w.partials[:, [0, 2], :, [1, 3]].transpose(1, 0, 2),
                                  np.arange(8.0).reshape(2, 2, 2))


def test_index_arrays_keep_the_lane_axis_first():
    u = _lanes_eye(np.arange(24.0).reshape(2, 3, 4))
    picked = u[[0, 1], :, [2, 3]]  # numpy moves the indexed axis first: shape (2, 3)
    assert picked.shape == (2, 3) and picked.partials.shape == (24, 2, 3)
    np.testing.assert_array_equal(picked.values, u.values[[0, 1], :, [2, 3]])
    for k in range(24):
        np.testing.assert_array_equal(picked.partials[k], (np.arange(24) == k).reshape(2, 3, 4)
                                      [[0, 1], :, [2, 3]])


def test_store_errors_are_clear():
    u = dual_array(np.zeros(3), lanes=2)
    with pytest.raises(DualgpuError, match="1 lanes into a DualArray with 2 lanes"):
        u[0] = Dual(1.0, [1.0])
    with pytest.raises(DualgpuError, match="cannot store dict"):
        u[0] = {}
    with pytest.raises(DualgpuError, match="index holds a Dual"):
        u[Dual(1.0, [1.0, 0.0])]
    with pytest.raises(TypeError, match="float\\(Dual\\) would drop the partials"):
        np.zeros(3)[0] = Dual(1.0, [1.0])
    with pytest.raises(TypeError, match="cannot become a plain numpy array"):
        np.zeros(3)[:] = u


def test_add_at_scatters_values_and_partials():
    bins = dual_array(np.zeros(3), lanes=2)
    weights = dual_array([1.0, 2.0, 3.0, 4.0], np.arange(8.0).reshape(2, 4))
    np.add.at(bins, [0, 2, 0, 1], weights)
    np.testing.assert_array_equal(bins.values, [4, 4, 2])
    np.testing.assert_array_equal(bins.partials, [[2, 3, 1], [10, 7, 5]])


# ---------------------------------------------------------------------------
# creation and casts on the template's side
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_zeros_like_family(dtype):
    u = dual_array(np.arange(6.0).reshape(2, 3), np.ones((4, 2, 3)), dtype=dtype)
    for like in (np.zeros_like(u), np.empty_like(u), np.ones_like(u), np.full_like(u, 2.5)):
        assert isinstance(like, DualArray) and like.lanes == 4 and like.dtype == dtype
        assert like.shape == (2, 3) and not like.partials.any()
        assert like.values is not u.values and like.partials is not u.partials
    np.testing.assert_array_equal(np.full_like(u, 2.5).values, 2.5)
    np.testing.assert_array_equal(np.ones_like(u).values, 1)
    filled = np.full_like(u, Dual(1.5, [1.0, 2.0, 3.0, 4.0]))
    np.testing.assert_array_equal(filled.partials[:, 1, 2], [1, 2, 3, 4])
    ints = np.zeros_like(u, dtype=np.int64)
    assert type(ints) is np.ndarray and ints.dtype == np.int64
    other = np.zeros_like(u, dtype=np.float64, shape=(5,))
    assert other.shape == (5,) and other.dtype == np.float64 and other.lanes == 4
    assert isinstance(np.zeros_like(Dual(1.0, [1.0])), Dual)


def test_creation_and_casts_keep_the_device_side_on_the_simulator():
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    with dualgpu.using_backend("cudasim"):
        d = dualgpu.cuda.to_device(dual_array(np.arange(4.0), np.ones((2, 4))))
    assert d.is_device
    for like in (np.zeros_like(d), np.empty_like(d), np.full_like(d, 1.0), d.astype(np.float32),
                 d.copy()):
        assert isinstance(like, DualArray) and like.is_device and like.lanes == 2
        assert isinstance(like.values, FakeCUDAArray)  # a simulated device array, as d's
        assert isinstance(d.values, FakeCUDAArray)
    assert d.astype(np.float32).copy_to_host().partials.dtype == np.float32
    total = np.sum(d * 2.0)  # host operations copy device memory to the host first
    assert total.value == 12.0 and total.partials.tolist() == [8.0, 8.0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_astype_and_module_level_casts(dtype):
    u = dual_array(np.array([0.1, 0.7]), np.array([[1.0, 2.0]]))
    cast = u.astype(dtype)
    assert cast.dtype == dtype and cast.partials.dtype == dtype
    np.testing.assert_array_equal(cast.values, u.values.astype(dtype))
    assert cast.values is not u.values
    assert u.astype(np.float64, copy=False) is u
    np.testing.assert_array_equal(u.astype(np.int32), [0, 0])
    p = Dual(0.7, [1.0, -2.0])
    for q in (p.astype(dtype), dualgpu.astype(p, dtype),
              (dualgpu.float32 if dtype == np.float32 else dualgpu.float64)(p)):
        assert type(q) is Dual and q.dtype == dtype and q.value == dtype(0.7)
        assert q.partials.tolist() == [1.0, -2.0]
    assert p.astype(np.int64) == 0
    assert type(dualgpu.float32(0.7)) is np.float32 and dualgpu.float32(0.7) == np.float32(0.7)
    assert dualgpu.float32(np.float64(0.7)) == np.float32(0.7)
    assert dualgpu.float32([1.0, 2.0]).dtype == np.float32
    assert dualgpu.float64(u.astype(np.float32)).dtype == np.float64
    with pytest.raises(TypeError, match=r"dualgpu\.float32\(p\)"):  # names the argument
        np.float32(p)


# ---------------------------------------------------------------------------
# mixing Duals, DualArrays and plain operands
# ---------------------------------------------------------------------------
def test_duals_and_arrays_mix_in_every_order():
    d = Dual(2.0, [1.0, 0.0])
    u = dual_array([1.0, 3.0], [[0.0, 0.0], [1.0, 1.0]])
    x = np.array([10.0, 20.0])
    for r in (d * u, u * d, d * x, x * d, np.float64(3.0) * u, u * np.float64(3.0)):
        assert isinstance(r, DualArray) and r.lanes == 2
    np.testing.assert_array_equal((d * x).partials, [[10.0, 20.0], [0.0, 0.0]])
    np.testing.assert_array_equal((x - d).partials, [[-1.0, -1.0], [0.0, 0.0]])
    assert np.sum(d).value == 2.0 and isinstance(np.clip(d, 0.0, 1.0), Dual)
    assert np.clip(d, 0.0, 1.0).partials.tolist() == [0.0, 0.0]


def test_no_operation_mutates_its_inputs():
    u = dual_array(np.array([3.0, -1.0, 2.0]), np.eye(3))
    values, partials = u.values.copy(), u.partials.copy()
    # (basic slices and ravel are views, as in numpy)
    for r in (u + 0.0, u * 1.0, +u, np.positive(u), np.sort(u), u.flatten(), u.copy(), u[[0, 1]],
              np.where(u > 0, u, 0.0), np.concatenate([u]), np.maximum(u, -5.0)):
        r.values[...] = 7
        r.partials[...] = 7
    np.testing.assert_array_equal(u.values, values)
    np.testing.assert_array_equal(u.partials, partials)


# ---------------------------------------------------------------------------
# nothing is dropped silently
# ---------------------------------------------------------------------------
def test_unsupported_functions_and_ufuncs_name_themselves():
    u = dual_array(np.arange(1.0, 4.0), lanes=2)
    with pytest.raises(MissingRuleError, match=r"numpy\.ptp is not supported.*u\.values"):
        np.ptp(u)
    with pytest.raises(MissingRuleError, match=r"numpy\.unwrap is not supported"):
        np.unwrap(u)
    with pytest.raises(MissingRuleError, match=r"numpy\.cbrt has no derivative rule.*NUMPY_ONLY"):
        np.cbrt(u)
    with pytest.raises(MissingRuleError, match=r"numpy\.maximum\.accumulate is not supported"):
        np.maximum.accumulate(u)
    with pytest.raises(MissingRuleError, match=r"numpy\.divmod has no derivative rule"):
        np.divmod(u, 2.0)
    with pytest.raises(MissingRuleError, match=r"numpy\.linalg\.det is not supported"):
        np.linalg.det(u.reshape(1, 3)[:, :1])  # (np.linalg.inv has an implementation now)
    with pytest.raises(TypeError, match="cannot become a plain numpy array"):
        np.asarray(u)


def test_bad_arguments_say_what_was_expected():
    u = dual_array(np.arange(3.0), lanes=2)
    with pytest.raises(DualgpuError, match=r"different lane counts \[1, 2\]"):
        u + Dual(1.0, [1.0])
    with pytest.raises(DualgpuError, match=r"keyword\(s\) \['where'\] are not supported"):
        np.sum(u, where=u.values > 0)
    with pytest.raises(DualgpuError, match=r"out=\.\.\.\) writes into a plain numpy array"):
        np.add(u, 1.0, out=np.zeros(3))
    with pytest.raises(DualgpuError, match="np.stack"):
        u + np.array([Dual(1.0, [1.0, 0.0])] * 3, dtype=object)
    with pytest.raises(DualgpuError, match="indices are a DualArray"):
        np.take(u, u)
    with pytest.raises(np.exceptions.AxisError):
        np.sum(u, axis=1)


def test_sparsity_tracer_refuses_host_operations():
    from dualgpu.core.dualarray import TRACER_DTYPE

    tracer = DualArray(np.zeros(3), np.zeros((1, 3), TRACER_DTYPE))
    with pytest.raises(DualgpuError, match="structural tracer"):
        np.sum(tracer)


def test_sparsity_tracer_moves_through_functions_that_only_move_data():
    """np.stack / np.concatenate / reshape around a simulation's outputs under
    sparsity='detect' (they were refused with every other host operation)."""
    from dualgpu.core.dualarray import TRACER_DTYPE

    bits = (np.uint64(1) << np.arange(3, dtype=np.uint64)).reshape(1, 3)
    u = DualArray(np.arange(3.0), bits.copy())                       # u[j] depends on input j
    v = DualArray(10 + np.arange(3.0), (bits << np.uint64(3)).copy())  # v[j] on input 3 + j
    stacked = np.stack([u, np.ones(3), v], axis=1)
    assert stacked.is_tracer and stacked.shape == (3, 3)
    np.testing.assert_array_equal(stacked.values, np.stack([u.values, np.ones(3), v.values], 1))
    np.testing.assert_array_equal(stacked.partials[0], [[1, 0, 8], [2, 0, 16], [4, 0, 32]])
    joined = np.concatenate([u, [7.0]]).reshape(2, 2).T
    assert joined.partials.dtype == TRACER_DTYPE
    np.testing.assert_array_equal(joined.partials[0], [[1, 4], [2, 0]])
    np.testing.assert_array_equal(np.flip(v).partials[0], [32, 16, 8])
    picked = np.take(v, np.array([2, 0, 2]))  # an index array is not data: it selects
    np.testing.assert_array_equal(picked.partials[0], [32, 8, 32])
    np.testing.assert_array_equal(np.repeat(u, [0, 2, 1]).partials[0], [2, 2, 4])
    np.testing.assert_array_equal(np.stack([u, np.float32(2.0) * np.ones(3, np.float32)])
                                  .partials[0], [[1, 2, 4], [0, 0, 0]])
    with pytest.raises(DualgpuError, match="integer data"):
        np.concatenate([u, np.arange(2)])
    with pytest.raises(DualgpuError, match="only move data"):
        np.stack([u, v]) * 2.0  # arithmetic on dependency sets stays refused


# ---------------------------------------------------------------------------
# objectives under the driver (the acceptance example)
# ---------------------------------------------------------------------------
def _heat_objectives(u0, alpha, left, data, x):
    from simulations import heat1d

    # one block of 16 threads for the 16 cells (the simulator runs each thread in Python)
    u = heat1d.simulate(u0, n_steps=15, alpha=alpha, left=left, threads_per_block=16)
    misfit = np.linalg.norm(u - data)
    centroid = np.sum(x * u) / np.sum(u)
    return misfit, centroid, u.max()


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
def test_jacobian_of_host_objectives_matches_differences(backend):
    from simulations import heat1d

    n = 16
    u0 = heat1d.default_initial_state(n)
    x = np.linspace(0.0, 1.0, n)
    data = 0.9 * u0 + 0.05
    args = (u0, 0.8, 0.3, data, x)
    with dualgpu.using_backend(backend):
        check_jacobian(_heat_objectives, *args, argnums=(1, 2), n_directions=2)
        (m_a, m_l), (c_a, c_l), _ = dualgpu.jacobian(
            _heat_objectives, *args, argnums=(1, 2), progress=False)
        h = 1e-6
        plus = _heat_objectives(u0, 0.8 + h, 0.3, data, x)
        minus = _heat_objectives(u0, 0.8 - h, 0.3, data, x)
    assert np.ndim(m_a) == 0 and np.isfinite(m_a) and m_a != 0
    np.testing.assert_allclose(m_a, (plus[0] - minus[0]) / (2 * h), rtol=1e-6)
    np.testing.assert_allclose(c_a, (plus[1] - minus[1]) / (2 * h), rtol=1e-6)


def test_jacobian_of_objective_wrt_the_initial_state():
    from simulations import heat1d

    u0 = heat1d.default_initial_state(12)
    data = np.linspace(0.0, 1.0, 12)

    def objective(u0):
        return 0.5 * np.sum((heat1d.simulate(u0, n_steps=10) - data) ** 2)

    with dualgpu.using_backend("cpu"):
        grad = dualgpu.jacobian(objective, u0, progress=False)
        check_jacobian(objective, u0, n_directions=2)
    assert grad.shape == (12,)


def test_questions_about_the_values_have_plain_answers():
    u = dual_array(np.array([[3.0, -1.0, 2.0], [0.5, 4.0, 4.0]]), lanes=2)
    assert np.shape(u) == (2, 3) and np.ndim(u) == 2 and np.size(u) == 6 and np.size(u, 1) == 3
    assert np.argmax(u) == 4 and u.argmax(axis=1).tolist() == [0, 1] and u.argmin() == 1
    np.testing.assert_array_equal(np.argsort(u, axis=1), np.argsort(u.values, axis=1))
    assert np.count_nonzero(u > 1) == 4 and np.allclose(u, u.values)
    assert np.result_type(u, np.float32) == np.float64 and not np.iscomplexobj(u)
    np.testing.assert_array_equal(np.flatnonzero(u - 4.0), [0, 1, 2, 3])
    assert np.searchsorted(u[1], 3.0) == 1
