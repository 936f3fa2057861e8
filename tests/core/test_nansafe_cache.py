"""NaN-safe mode and the caches on disk: neither numba's cache index (users' ``@njit(cache=True)``
functions on duals) nor the cpu backend's launcher cache may hand a process code compiled under
the other mode. The mode is part of the numba types of duals (their key), so it is part of every
cache index key numba makes for them, and of the cpu backend's keys.

One sequence of fresh processes (off, on, off again, over the same cache directories) checks
both caches: each process runs the user's cached functions and a cpu-backend kernel."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytestmark = pytest.mark.slow

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

USER_MODULE = textwrap.dedent("""
    import math
    from numba import njit

    @njit(cache=True)
    def root(a):
        return math.sqrt(a)  # at 0: an infinite factor

    @njit(cache=True)
    def roots(x, out):
        for i in range(x.shape[0]):
            out[i] = math.sqrt(x[i])
""")

SCRIPT = textwrap.dedent("""
    import json, warnings
    import numpy as np
    import dualgpu
    from dualgpu import Dual, DualArray
    import kernels_edge_cases as K
    import user_cached
    warnings.simplefilter("ignore", RuntimeWarning)
    # the cpu backend's launcher: d(x/y)/dy overflows in float32 (x = 1e38, y = 0.5)
    f32 = np.float32
    dx = Dual(f32(1e38), np.array([1.0, 0.0], f32))
    dy = Dual(f32(0.5), np.array([0.0, 1.0], f32))
    ratio = dualgpu.dual_array(np.zeros(1, f32), lanes=2)
    with dualgpu.using_backend("cpu"):
        K.ratio[1, 1](DualArray(np.array([dx.value]), dx.partials.reshape(2, 1).copy()),
                      DualArray(np.array([dy.value]), dy.partials.reshape(2, 1).copy()), ratio)
    scalar = user_cached.root(Dual(0.0, [1.0, 0.0]))
    x = DualArray(np.zeros(2), np.array([[1.0, 0.0], [0.0, 0.0]]))
    out = dualgpu.dual_array(np.zeros(2), lanes=2)
    user_cached.roots(x, out)
    print(json.dumps({"ratio": ratio.partials[:, 0].tolist(),
                      "scalar": scalar.partials.tolist(), "array": out.partials[1].tolist(),
                      "cached": [len(f.stats.cache_hits) for f in (user_cached.root,
                                                                    user_cached.roots)]}))
""")


def _run(tmp_path, nansafe):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"),
               DUALGPU_CACHE_DIR=str(tmp_path / "dualgpu"),
               DUALGPU_CACHE="1", DUALGPU_NANSAFE_MODE="1" if nansafe else "0",
               PYTHONPATH=os.pathsep.join([str(tmp_path), ROOT,
                                           os.path.join(ROOT, "tests", "fixtures")]))
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The three processes, in order: mode off, on, off again (the same cache directories)."""
    tmp_path = tmp_path_factory.mktemp("nansafe_cache")
    (tmp_path / "user_cached.py").write_text(USER_MODULE)
    return [_run(tmp_path, nansafe=nansafe) for nansafe in (False, True, False)]


def test_users_cached_function_is_not_loaded_under_the_other_mode(runs):
    off, on, again = runs
    assert np.isnan(off["scalar"][1])  # inf * 0 without the mode
    assert on["scalar"] == [np.inf, 0.0], on  # same cache directory; NaN-safe: the zero lane
    assert on["array"] == [0.0, 0.0], on  # stays zero
    assert np.isnan(again["scalar"][1])  # each mode's entry stays cached beside the other
    assert again["cached"] == [1, 1], again  # both loaded from the cache (DualArrays too)


def test_cpu_launchers_cached_without_the_mode_are_not_loaded_under_it(runs):
    """A launcher cached without NaN-safe mode was loaded by a NaN-safe process: NaN partials
    where the mode promises the zero lane's own derivative (tests/backends/cpu/test_cpu_cache.py
    checks the rest of the launcher cache)."""
    off, on, again = runs
    assert np.isnan(off["ratio"][0])  # inf * 0 = nan without the mode
    assert on["ratio"] == [2.0, -np.inf], on  # from the same cache directory
    assert np.isnan(again["ratio"][0])
