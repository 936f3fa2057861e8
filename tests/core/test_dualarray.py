"""DualArray on the host, in compiled code, and through dualgpu.cuda's allocation helpers."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from numba import njit

import dualgpu
from dualgpu import Dual, DualArray, cuda, dmath, dual_array
from dualgpu.core._context import dual_allocation
from dualgpu.testing import check_jacobian


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_indexing_host_and_compiled(shape, dtype):
    rng = np.random.default_rng(0)
    a = dual_array(rng.normal(size=shape), rng.normal(size=(3,) + shape), dtype=dtype)
    idx = tuple(s - 1 for s in shape)
    key = idx if len(idx) > 1 else idx[0]
    d = a[key]
    assert (d.value == a.values[idx]
            and d.partials.tolist() == a.partials[(slice(None),) + idx].tolist())

    @njit
    def roundtrip(a, key):
        a[key] = a[key] * 2.0
        return a.shape, a.size, a.ndim, len(a), a.lanes

    before = a.copy()
    assert roundtrip(a, key) == (shape, int(np.prod(shape)), len(shape), shape[0], 3)
    np.testing.assert_allclose(a.values[idx], 2 * before.values[idx], rtol=1e-6)
    np.testing.assert_allclose(a.partials[(slice(None),) + idx],
                               2 * before.partials[(slice(None),) + idx], rtol=1e-6)
    assert a.dtype == np.dtype(dtype)


def test_storing_a_float_stores_zero_partials():
    a = dual_array(np.ones(4), np.ones((2, 4)))
    @njit
    def store(a):
        a[1] = 5.0

    store(a)
    a[2] = 7.0
    assert a.values.tolist() == [1, 5, 7, 1]
    assert a.partials[:, 1].tolist() == [0, 0] and a.partials[:, 2].tolist() == [0, 0]


def test_copy_to_host_into_a_buffer_and_reductions():
    a = dual_array(np.arange(4.0), np.ones((2, 4)))
    buffer = dual_array(np.zeros(4), lanes=2)
    assert a.copy_to_host(buffer) is buffer
    np.testing.assert_array_equal(buffer.partials, a.partials)
    with pytest.raises(dualgpu.DualgpuError, match="would drop the 2 lanes of partials"):
        a.copy_to_host(np.zeros(4))
    total, mean = a.sum(), a.mean()
    assert total.value == 6.0 and total.partials.tolist() == [4.0, 4.0]
    assert mean.value == 1.5 and mean.partials.tolist() == [1.0, 1.0]
    with pytest.raises(TypeError, match="cannot become a plain numpy array"):
        np.asarray(a)  # would drop the partials: numpy functions work on a directly
    like = np.zeros_like(a)
    assert isinstance(like, DualArray) and like.lanes == 2 and not like.partials.any()


def test_views_and_host_helpers():
    a = dual_array(np.arange(6.0).reshape(2, 3), lanes=2)
    row = a[1]
    assert isinstance(row, DualArray) and row.shape == (3,) and row.lanes == 2
    a[:] = 0.0
    assert not a.values.any()
    row_compiled = njit(lambda a: a[1])(dual_array(np.arange(6.0).reshape(2, 3), lanes=2))
    assert row_compiled.shape == (3,) and row_compiled.values.tolist() == [3.0, 4.0, 5.0]
    values = np.arange(3.0)
    b = dual_array(values, lanes=1)
    b.values[0] = 99
    assert values[0] == 0  # dual_array copies the caller's data


@pytest.mark.parametrize("name", ["cpu", "cudasim"])
def test_to_device_and_allocation_follow_the_argument(name):
    with dualgpu.using_backend(name):
        cuda = dualgpu.cuda
        a = dual_array(np.arange(4.0), np.ones((2, 4)))
        d = cuda.to_device(a)
        assert isinstance(d, DualArray) and d.lanes == 2
        back = d.copy_to_host()
        np.testing.assert_array_equal(back.values, a.values)
        np.testing.assert_array_equal(back.partials, a.partials)
        like = cuda.device_array_like(d)
        assert isinstance(like, DualArray) and like.shape == (4,) and like.lanes == 2
        plain = cuda.to_device(np.arange(3.0))
        assert not isinstance(plain, DualArray)
        np.testing.assert_array_equal(plain.copy_to_host(), np.arange(3.0))
        with dual_allocation(5):
            u = cuda.to_device(np.arange(3.0))
            w = cuda.device_array(7, np.float32)
            ints = cuda.to_device(np.arange(3))
        assert isinstance(u, DualArray) and u.lanes == 5 and not u.copy_to_host().partials.any()
        assert isinstance(w, DualArray) and w.dtype == np.float32
        assert not isinstance(ints, DualArray)


# --- property tests of the pure-Python dual over wide input ranges -----------------

finite = st.floats(min_value=-1e3, max_value=1e3, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(x=finite, y=finite, p=finite, q=finite)
def test_product_and_quotient_rules(x, y, p, q):
    a, b = Dual(x, [p]), Dual(y, [q])
    assert np.isclose((a * b).partials[0], p * y + x * q, rtol=1e-12, atol=1e-9)
    if abs(y) > 1e-3:
        assert np.isclose((a / b).partials[0], (p * y - x * q) / y**2, rtol=1e-9, atol=1e-9)


@settings(max_examples=60, deadline=None)
@given(x=st.floats(min_value=-30, max_value=30), p=finite)
def test_chain_rule_through_exp_and_tanh(x, p):
    d = dmath.tanh(dmath.exp(Dual(x, [p]) * 0.1))
    e = np.exp(0.1 * x)
    assert np.isclose(d.partials[0], (1 - np.tanh(e) ** 2) * e * 0.1 * p, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_element_lanes_read_and_written_as_numba_indexes(dtype):
    """An element's lanes are read and written by one lowering (its value by numba's own
    getitem and setitem): negative indices wrap around, index tuples may mix integer types, views
    with strides (a transposed array, every other lane) are honoured, and a dual of float64
    lanes stored into float32 partials is cast as numba's setitem casts."""
    rng = np.random.default_rng(3)
    values, partials = rng.normal(size=(4, 5)), rng.normal(size=(6, 4, 5))
    base = dual_array(values, partials, dtype=dtype)
    strided = DualArray(base.values.T, base.partials[::2].transpose(0, 2, 1))

    @njit
    def read(a, i, j):
        return a[i, j], a[np.int32(i), np.int16(j)]

    @njit
    def write(a, i, j, d):
        a[i, j] = d
        a[np.int32(0), -1] = 7.0

    for i, j in [(-1, -2), (2, 0), (-5, 3)]:
        d, same = read(strided, i, j)
        assert d.value == same.value == strided.values[i, j]
        assert d.partials.tolist() == same.partials.tolist() == \
            strided.partials[:, i, j].tolist()
    d = Dual(2.5, [1.0, -2.0, 0.5], dtype=np.float64)
    write(strided, -2, 1, d)
    assert strided.values[3, 1] == dtype(2.5)
    assert strided.partials[:, 3, 1].tolist() == np.array([1.0, -2.0, 0.5], dtype).tolist()
    assert strided.values[0, -1] == 7.0 and not strided.partials[:, 0, -1].any()
    # the views wrote through to the base: every other lane, transposed
    assert base.values[1, 3] == dtype(2.5) and base.partials[2, 1, 3] == dtype(-2.0)
    assert base.partials[1, 1, 3] == dtype(partials[1, 1, 3])  # an odd lane: not written


# under NUMBA_BOUNDSCHECK=1 (a fresh process) element indexing raises IndexError, for the lanes
# as for the values, read and written: test_boundscheck_covers_values_and_lanes in
# tests/integration/test_unseen_lowering.py


@cuda.jit
def _double_into(a, b):
    i, j = cuda.grid(2)
    if i < b.shape[0] and j < b.shape[1]:
        b[i, j] = a[i, j] * 2.0


def test_kernel_writes_into_a_transposed_device_view_under_the_driver():
    """``kernel(x, out.T)`` on a device array: numba's simulator hands the kernel a view, so
    the plain run writes into ``out``; the dual run must too, values and partials (a host
    numpy transpose used to copy the simulator's arrays to the host and lose both)."""
    def f(x):
        out = dualgpu.cuda.device_array((4, 3), dtype=x.dtype)
        _double_into[(1, 1), (4, 4)](dualgpu.cuda.to_device(x), out.T)
        return out.copy_to_host()

    x = np.arange(12.0).reshape(3, 4)
    want = np.zeros((12, 12))
    for i in range(3):
        for j in range(4):
            want[j * 3 + i, i * 4 + j] = 2.0
    for backend in ("cpu", "cudasim"):
        with dualgpu.using_backend(backend):
            np.testing.assert_array_equal(f(x), 2 * x.T)
            np.testing.assert_array_equal(dualgpu.jacobian(f, x).reshape(12, 12), want)
    with dualgpu.using_backend("cudasim"), dual_allocation(2):
        out = dualgpu.cuda.device_array((2, 3, 4))
        view = out.transpose(2, 0, -2)
        assert view.shape == (4, 2, 3) and view.partials.shape == (2, 4, 2, 3)
        view[1, 0, 2] = Dual(5.0, [1.0, -1.0])
        assert out[0, 2, 1].value == 5.0 and out[0, 2, 1].partials.tolist() == [1.0, -1.0]


def test_swapaxes_and_moveaxis_of_device_arrays_are_views_on_the_simulator():
    with dualgpu.using_backend("cudasim"), dual_allocation(2):
        out = dualgpu.cuda.device_array((2, 3, 4))
        cases = [(np.swapaxes(out, 0, -1), (3, 1, 0), (0, 1, 3)),
                 (out.swapaxes(1, 2), (1, 2, 0), (1, 0, 2)),
                 (np.moveaxis(out, 0, -1), (2, 1, 1), (1, 2, 1)),
                 (np.transpose(out), (3, 2, 1), (1, 2, 3))]
        for k, (view, where, _) in enumerate(cases):
            view[where] = Dual(k + 1.0, [k + 1.0, -2.0 * k - 1])
        for k, (_, _, target) in enumerate(cases):
            assert out[target].value == k + 1.0
            assert out[target].partials.tolist() == [k + 1.0, -2.0 * k - 1]


def test_kernel_writes_into_a_reshaped_device_view_under_the_driver():
    """``kernel(x, out.reshape(3, 4))`` and ``out.ravel()`` of device arrays: views on the
    simulator (the plain run writes into ``out``), so the dual run writes into it too."""
    def f(x):
        out = dualgpu.cuda.device_array(12, dtype=x.dtype)
        _double_into[(1, 1), (4, 4)](dualgpu.cuda.to_device(x), out.reshape(3, 4))
        flat = dualgpu.cuda.device_array((2, 6), dtype=x.dtype)
        _double_into[(1, 1), (4, 4)](dualgpu.cuda.to_device(x), flat.ravel().reshape((3, 4)))
        return out.copy_to_host() + flat.copy_to_host().ravel()

    x = np.arange(12.0).reshape(3, 4)
    for backend in ("cpu", "cudasim"):
        with dualgpu.using_backend(backend):
            np.testing.assert_array_equal(f(x), 4 * x.ravel())
            np.testing.assert_array_equal(dualgpu.jacobian(f, x).reshape(12, 12), 4 * np.eye(12))


def test_kernel_writes_into_squeezed_and_expanded_device_views_under_the_driver():
    """``out.squeeze()``, ``np.squeeze`` and ``np.expand_dims`` of device arrays: views (the
    device arrays' own squeeze, a reshape of contiguous ones), so a kernel writing into them
    under the driver writes into ``out`` as the plain run does (both used to go through host
    numpy, which copied the simulator's arrays and lost the writes)."""
    def f(x):
        out = dualgpu.cuda.device_array((3, 1, 4), dtype=x.dtype)
        _double_into[(1, 1), (4, 4)](dualgpu.cuda.to_device(x), out.squeeze())
        flat = dualgpu.cuda.device_array((3, 4), dtype=x.dtype)
        view = np.squeeze(np.expand_dims(flat, 1), axis=1)
        _double_into[(1, 1), (4, 4)](dualgpu.cuda.to_device(x), view)
        return out.copy_to_host().ravel() + flat.copy_to_host().ravel()

    x = np.arange(12.0).reshape(3, 4)
    for backend in ("cpu", "cudasim"):
        with dualgpu.using_backend(backend):
            np.testing.assert_array_equal(f(x), 4 * x.ravel())
            np.testing.assert_array_equal(dualgpu.jacobian(f, x).reshape(12, 12), 4 * np.eye(12))
    with dualgpu.using_backend("cudasim"), dual_allocation(1):
        out = dualgpu.cuda.device_array((1, 3, 1))
        assert out.squeeze().shape == (3,) and out.squeeze().partials.shape == (1, 3)
        assert np.expand_dims(out.squeeze(), -1).partials.shape == (1, 3, 1)
        with pytest.raises(ValueError):
            out.squeeze(axis=1)  # numpy's error: not an axis of length one


@cuda.jit
def _through_transposes(x, y, out):
    """Reads through ``x.T`` (2-D) and ``y.T`` (3-D) and writes through ``out.T``."""
    i = cuda.grid(1)
    if i < x.shape[0]:
        t = x.T
        yt = y.T
        out.T[0, i] = t[0, i] * t[1, i] + yt[1, 0, i] * yt[0, 1, i]


def test_transposed_dual_arrays_inside_kernels():
    """``a.T`` of a DualArray inside a kernel is a view as numba's ``ndarray.T`` (values and
    lanes), on the cpu backend as on the simulator (it failed to type on the cpu backend);
    the Jacobian matches central differences (PTX: tests/compiled/test_lowering.py)."""
    def f(x, y):
        out = dualgpu.cuda.device_array((x.shape[0], 1), dtype=x.dtype)
        _through_transposes[1, 8](dualgpu.cuda.to_device(x), dualgpu.cuda.to_device(y), out)
        return out.copy_to_host()[:, 0]

    rng = np.random.default_rng(5)
    x, y = rng.normal(size=(4, 2)), rng.normal(size=(4, 2, 2))
    want = x[:, 0] * x[:, 1] + y[:, 1, 0] * y[:, 0, 1]
    for backend in ("cpu", "cudasim"):
        with dualgpu.using_backend(backend):
            np.testing.assert_allclose(f(x, y), want, rtol=1e-15)
            check_jacobian(lambda x: f(x, y), x)
            check_jacobian(lambda y: f(x, y), y)


def _contiguous(u):
    return np.ascontiguousarray(u)


def _fortran(u):
    return np.asfortranarray(u.T)


def _asarray(u):
    return np.asarray(u, dtype=np.float64)


@pytest.mark.parametrize("call", [_contiguous, _fortran, _asarray])
def test_numpy_array_constructors_get_their_own_message(call):
    """numpy's array constructors do not dispatch to a DualArray (``like=`` only): the general
    message said numpy functions work on it directly, which they do not here."""
    u = DualArray(np.arange(6.0).reshape(2, 3), np.ones((2, 2, 3)))
    with pytest.raises(TypeError, match=r"cannot become a plain numpy array.*np\.\w+\(\.\.\.\) "
                                        r"makes one \(numpy's array constructors.*Fix: leave "
                                        r"the call out.*u\.copy\(\)"):
        call(u)
    assert np.array_equal(u.copy().values, u.values)
