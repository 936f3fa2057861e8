"""Lanes per run of f that keep a memory-bound f's working set in the L2 cache (issue 41).

The rule (:func:`dualgpu.core.lanes.cache_lanes`), the cache size read from sysfs with a
fallback, the driver using it only where it chose the tiles on the cpu backend (a user's
``chunk_size`` keeps one run of every lane), and derivatives unchanged by the split:
equal to the single-run Jacobian and to central finite differences, float32 and float64.
"""
import numpy as np
import pytest

import dualgpu
from dualgpu import cuda
from dualgpu.autodiff.api import jacobian
from dualgpu.core import lanes as _lanes

import simulations.heat1d as heat


def _cache_dir(tmp_path, entries):
    for k, (level, kind, size) in enumerate(entries):
        index = tmp_path / f"index{k}"
        index.mkdir()
        (index / "level").write_text(f"{level}\n")
        (index / "type").write_text(f"{kind}\n")
        (index / "size").write_text(f"{size}\n")
    return str(tmp_path)


def test_the_l2_size_is_read_from_sysfs(tmp_path):
    root = _cache_dir(tmp_path, [(1, "Data", "32K"), (1, "Instruction", "32K"),
                                 (2, "Unified", "1024K"), (3, "Unified", "32768K")])
    assert _lanes.l2_cache_bytes(root) == 1 << 20
    other = tmp_path / "m"
    other.mkdir()
    assert _lanes.l2_cache_bytes(_cache_dir(other, [(2, "Unified", "2M")])) == 2 << 20


def test_the_l2_size_falls_back_where_it_cannot_be_read(tmp_path):
    assert _lanes.l2_cache_bytes(str(tmp_path / "absent")) == _lanes.L2_FALLBACK_BYTES
    broken = _cache_dir(tmp_path, [(2, "Unified", "lots")])
    assert _lanes.l2_cache_bytes(broken) == _lanes.L2_FALLBACK_BYTES


@pytest.mark.parametrize("n, unit, input_bytes, cache", [
    (1000, 32, 8000, 1 << 20),     # the 1000-cell heat Jacobian: 64 lanes per run
    (1000, 8, 8000, 1 << 20),
    (100, 16, 800, 1 << 16),
    (37, 4, 4000, 1 << 17),
    (5000, 32, 24, 1 << 20),       # a tiny state: every direction in one run
])
def test_the_chosen_lanes_follow_the_rule(n, unit, input_bytes, cache):
    lanes = _lanes.cache_lanes(n, unit, input_bytes, cache_bytes=cache)

    def working_set(lanes):
        return _lanes.TOUCHED_ARRAYS * input_bytes * (1 + lanes)

    tiles = -(-n // unit)
    assert lanes % unit == 0 and unit <= lanes <= tiles * unit
    assert working_set(lanes) <= cache  # the run stays in the cache
    most = (cache // (_lanes.TOUCHED_ARRAYS * input_bytes) - 1) // unit * unit
    runs = -(-tiles * unit // lanes)
    assert runs == -(-tiles * unit // min(most, tiles * unit))  # no more runs than needed
    assert lanes == -(-tiles // runs) * unit  # spread evenly over those runs


def test_no_cache_fitting_when_one_tile_does_not_fit_or_it_is_off(monkeypatch):
    assert _lanes.cache_lanes(100, 8, 10**6, cache_bytes=1 << 20) is None
    monkeypatch.setattr(_lanes, "FIT_CACHE", False)
    assert _lanes.cache_lanes(1000, 32, 8000, cache_bytes=1 << 20) is None


def _spy(seen):
    def f(x):
        seen.append(x.partials.shape[0])
        return cuda.to_device(x).copy_to_host()
    return f


def test_the_driver_fits_its_runs_to_the_cache(monkeypatch):
    x = np.linspace(0.0, 1.0, 100)  # 800 bytes; 100 directions: units of 16 lanes
    monkeypatch.setattr(_lanes, "l2_cache_bytes", lambda: 2 * 800 * 17)  # room for 16 lanes
    seen = []
    with dualgpu.using_backend("cpu"):
        jac = jacobian(_spy(seen), x)
    assert seen == [16] * 7
    np.testing.assert_array_equal(jac, np.eye(100))
    seen.clear()
    with dualgpu.using_backend("cpu"):  # the user's chunk_size wins: one run, as before
        jac = jacobian(_spy(seen), x, chunk_size=16)
    assert seen == [112]
    np.testing.assert_array_equal(jac, np.eye(100))
    seen.clear()
    with dualgpu.using_backend("cudasim"):  # no L2 to fit on a GPU: one run, as before
        jacobian(_spy(seen), x[:20])
    assert len(seen) == 1


def _heat(u0):
    return heat.simulate(u0, 20, 1.0)


@pytest.mark.parametrize("dtype, rtol, step", [(np.float64, 1e-6, 1e-6),
                                               (np.float32, 2e-3, 1e-2)])
def test_derivatives_are_unchanged_by_the_split(monkeypatch, dtype, rtol, step):
    u0 = heat.default_initial_state(64).astype(dtype)  # 64 directions: units of 16 lanes
    with dualgpu.using_backend("cpu"):
        monkeypatch.setattr(_lanes, "l2_cache_bytes", lambda: 1 << 40)
        whole = jacobian(_heat, u0)  # one run of 64 lanes
        nbytes = u0.nbytes
        monkeypatch.setattr(_lanes, "l2_cache_bytes", lambda: 2 * nbytes * 17)
        assert _lanes.cache_lanes(64, 16, nbytes) == 16
        split = jacobian(_heat, u0)  # four runs of 16
    assert split.dtype == whole.dtype == dtype
    np.testing.assert_array_equal(split, whole)
    u = u0.astype(np.float64)
    columns = []
    for j in range(u.size):
        e = np.zeros_like(u)
        e[j] = step
        plus = heat.simulate((u + e).astype(dtype), 20, 1.0).astype(np.float64)
        minus = heat.simulate((u - e).astype(dtype), 20, 1.0).astype(np.float64)
        columns.append((plus - minus) / (2 * step))
    fd = np.stack(columns, axis=1)
    np.testing.assert_allclose(split, fd, rtol=rtol, atol=rtol * np.max(np.abs(fd)))
