"""What the driver keeps of f's outputs: copies where a later run could overwrite them, views
where the partials are stored before f runs again (the driver's own output copies are part of
a JVP's cost), and a finite check that is exact for huge but finite partials."""
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import dualgpu
from dualgpu import DualgpuError, cuda
from dualgpu.autodiff import engine
from dualgpu.autodiff.api import jacobian, jvp, jvp_batch

X = np.linspace(0.5, 1.5, 6)


@pytest.fixture(autouse=True)
def cpu_backend():
    with dualgpu.using_backend("cpu"):
        yield


def returns_its_input(u):
    """f's output is the driver's seed buffer itself: the next run refills it."""
    return u


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_output_that_is_the_seed_buffer_survives_later_runs(dtype):
    x = X.astype(dtype)
    with ThreadPoolExecutor(2) as pool:  # narrow runs of 2 lanes, each thread reuses its buffers
        jac = jacobian(returns_its_input, x, chunk_size=2, executor=pool)
    np.testing.assert_array_equal(jac, np.eye(6, dtype=dtype))
    out, tangents = jvp_batch(returns_its_input, (x,), (np.eye(6, dtype=dtype)[::-1],),
                              chunk_size=2)
    np.testing.assert_array_equal(out, x)
    np.testing.assert_array_equal(tangents, np.eye(6, dtype=dtype)[::-1])


_KEPT = {}


def overwrites_a_kept_buffer(u):
    """f keeps one host DualArray across runs and returns it each time."""
    kept = _KEPT.get(u.partials.shape)
    if kept is None:
        kept = _KEPT[u.partials.shape] = dualgpu.DualArray(np.empty(u.shape),
                                                           np.empty(u.partials.shape))
    kept[...] = 2.0 * u
    return kept


def test_output_kept_by_f_across_runs_gives_every_direction():
    with ThreadPoolExecutor(1) as pool:
        jac = jacobian(overwrites_a_kept_buffer, X, chunk_size=2, executor=pool)
    np.testing.assert_array_equal(jac, 2.0 * np.eye(6))


def test_jvp_values_are_the_callers_own():
    def simulate(u):
        return cuda.to_device(u).copy_to_host()

    out, tangent = jvp(simulate, (X,), (np.ones(6),))
    out[:] = -1.0
    tangent[:] = -1.0
    out2, tangent2 = jvp(simulate, (X,), (np.ones(6),))
    np.testing.assert_array_equal(out2, X)
    np.testing.assert_array_equal(tangent2, np.ones(6))


def test_local_runs_view_partials_and_copy_values():
    fresh = dualgpu.DualArray(np.ones(6), np.ones((2, 6)))
    _, [(values, partials)] = engine._unpack(fresh, 2, "test", views=True)
    assert np.shares_memory(partials, fresh.partials) and type(partials) is np.ndarray
    assert not np.shares_memory(values, fresh.values)
    _, [(values, partials)] = engine._unpack(fresh, 2, "test")
    assert not np.shares_memory(partials, fresh.partials)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_huge_finite_partials_pass_and_non_finite_ones_are_refused(dtype):
    big = np.finfo(dtype).max / 2  # the lanes' sum overflows; each partial is finite

    def scaled(u):
        return big * u

    x = np.ones(4, dtype)
    jac = jacobian(scaled, x, chunk_size=4)
    np.testing.assert_array_equal(jac, big * np.eye(4, dtype=dtype))
    assert engine._all_finite(np.full(8, big, dtype))
    for bad in (np.nan, np.inf, -np.inf):
        partials = np.full(8, big, dtype)
        partials[5] = bad
        assert not engine._all_finite(partials)

    def overflows(u):
        return (big * u) * 4.0  # the partials 4 * big are infinite

    with pytest.raises(DualgpuError, match="not finite|non-finite"):
        jacobian(overflows, x, chunk_size=4)
