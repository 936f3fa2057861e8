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
