"""``DualArray.tolist()``: nested lists of Dual scalars, as numpy's ``tolist`` gives floats."""
import numpy as np
import pytest

import dualgpu
from dualgpu import Dual, DualArray, cuda


def _array(shape, dtype):
    values = np.arange(np.prod(shape), dtype=dtype).reshape(shape) * 0.5
    partials = np.stack([values * 2.0, -values]).astype(dtype)
    return DualArray(values, partials)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(3,), (2, 3), (2, 1, 2)])
def test_tolist_nests_like_numpy(shape, dtype):
    a = _array(shape, dtype)
    out = a.tolist()
    plain = a.values.tolist()

    def check(item, value, index):
        if isinstance(value, list):
            assert isinstance(item, list) and len(item) == len(value)
            for k, (i, v) in enumerate(zip(item, value)):
                check(i, v, index + (k,))
            return
        assert isinstance(item, Dual), type(item)
        assert item.dtype == np.dtype(dtype)
        assert item.value == value
        np.testing.assert_array_equal(item.partials, a.partials[(slice(None),) + index])

    check(out, plain, ())


def test_tolist_elements_are_copies():
    a = _array((3,), np.float64)
    out = a.tolist()
    a[0] = Dual(9.0, [7.0, 7.0])
    assert out[0].value == 0.0 and out[0].partials.tolist() == [0.0, 0.0]


@pytest.mark.parametrize("name", ["cpu", "cudasim"])
def test_tolist_of_a_device_array(name):
    with dualgpu.using_backend(name):
        d = cuda.to_device(_array((2, 2), np.float64))
        out = d.tolist()
    assert [[x.value for x in row] for row in out] == [[0.0, 0.5], [1.0, 1.5]]
    assert out[1][1].partials.tolist() == [3.0, -1.5]


def test_tolist_under_the_driver_keeps_the_derivative():
    # a debug log line in a simulation: the list's elements carry the partials
    def f(p):
        u = p * np.linspace(1.0, 2.0, 3)
        items = u.tolist()
        return items[0] + items[2]

    jac = dualgpu.jacobian(f, 1.5)
    assert float(np.asarray(jac)) == pytest.approx(3.0)


@cuda.jit
def _scale(u, a):
    i = cuda.grid(1)
    if i < u.shape[0]:
        u[i] = u[i] * a + 0.5 * u[i] * u[i]


def _rescaled(a):
    d = cuda.to_device(np.linspace(-0.7, 0.9, 16))
    _scale[1, 16](d, a)
    vmax = d.copy_to_host().max().item()  # numpy's idiom for a Python float
    _scale[1, 16](d, 0.1 / vmax)
    return d.copy_to_host()


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
def test_item_of_a_reduction_keeps_the_derivative(backend):
    """``u.max().item()`` (a CFL number read back) under the driver was an AttributeError:
    a Dual's item() is the Dual (a copy), so the derivative flows through it (found by an
    unseen port)."""
    d = Dual(2.0, [1.0, 0.5])
    assert d.item() is not d and d.item().value == 2.0 and d.item(0).partials.tolist() == [1, 0.5]
    with pytest.raises(IndexError, match="one number"):
        d.item(1)
    u = _array((2, 3), np.float64)
    for index, flat in (((1, 2), 5), ((0, 1), 1), ((1, 0), -3)):
        got = u.item(flat)
        assert got.value == u.values[index]
        assert got.partials.tolist() == u.partials[(slice(None),) + index].tolist()
        assert u.item(*index).value == u.item(index).value == u.values[index]
    assert _array((1,), np.float32).item().dtype == np.float32
    with pytest.raises(ValueError, match="has 6 elements"):
        u.item()
    with dualgpu.using_backend(backend):
        jac = dualgpu.jacobian(_rescaled, 0.8, progress=False)
        h = 1e-6
        fd = (_rescaled(0.8 + h) - _rescaled(0.8 - h)) / (2 * h)
    np.testing.assert_allclose(jac, fd, rtol=1e-6, atol=1e-8)
