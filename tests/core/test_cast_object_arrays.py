"""``dualgpu.float32`` / ``float64`` / ``astype`` of numpy object arrays of Duals (issue 44).

Host code that collects duals in ``np.array([...], dtype=object)`` (or that numpy made an object
array) and casts it with ``dualgpu.float32`` was refused by a message that recommended
``dualgpu.float32`` itself; each dual is now converted, partials kept.
"""
import numpy as np
import pytest

import dualgpu


@pytest.mark.parametrize("cast, dtype", [(dualgpu.float32, np.float32),
                                         (dualgpu.float64, np.float64)])
def test_object_array_of_duals_is_cast_dual_by_dual(cast, dtype):
    p = dualgpu.Dual(0.5, [1.0, 0.0])
    q = dualgpu.Dual(2.0, [0.0, 3.0])
    array = np.empty((2, 2), dtype=object)
    array[:] = [[p, 1.5], [q, p * q]]
    got = cast(array)
    assert isinstance(got, dualgpu.DualArray) and got.dtype == dtype and got.shape == (2, 2)
    np.testing.assert_allclose(got.values, [[0.5, 1.5], [2.0, 1.0]])
    np.testing.assert_allclose(got.partials[0], [[1.0, 0.0], [0.0, 2.0]])
    np.testing.assert_allclose(got.partials[1], [[0.0, 0.0], [3.0, 1.5]])
    assert array[0, 0] is p  # the caller's array is left as it was


def test_object_array_of_numbers_stays_plain():
    got = dualgpu.float32(np.array([1.0, 2], dtype=object))
    assert isinstance(got, np.ndarray) and got.dtype == np.float32


def test_cast_of_an_object_array_under_the_driver_differentiates():
    def f(x):
        frames = np.array([x * x, 3.0 * x], dtype=object)
        return dualgpu.float32(frames)

    jac = dualgpu.jacobian(f, 1.5)
    h = 1e-3
    fd = (np.array([(1.5 + h) ** 2, 3 * (1.5 + h)]) - np.array([(1.5 - h) ** 2, 3 * (1.5 - h)]))
    np.testing.assert_allclose(np.asarray(jac, np.float64).reshape(-1), fd / (2 * h), rtol=1e-5)
