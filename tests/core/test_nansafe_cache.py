"""NaN-safe mode and users' ``@njit(cache=True)`` functions on duals: numba's cache index must
not hand a process code compiled under the other mode. The mode is part of the numba types of
duals (their key), so it is part of every cache index key numba makes for them."""
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
    import user_cached
    warnings.simplefilter("ignore", RuntimeWarning)
    scalar = user_cached.root(Dual(0.0, [1.0, 0.0]))
    x = DualArray(np.zeros(2), np.array([[1.0, 0.0], [0.0, 0.0]]))
    out = dualgpu.dual_array(np.zeros(2), lanes=2)
    user_cached.roots(x, out)
    print(json.dumps({"scalar": scalar.partials.tolist(), "array": out.partials[1].tolist(),
                      "cached": [len(f.stats.cache_hits) for f in (user_cached.root,
                                                                    user_cached.roots)]}))
""")


def _run(tmp_path, nansafe):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"),
               DUALGPU_CACHE_DIR=str(tmp_path / "dualgpu"),
               DUALGPU_NANSAFE_MODE="1" if nansafe else "0",
               PYTHONPATH=os.pathsep.join([str(tmp_path), ROOT]))
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_users_cached_function_is_not_loaded_under_the_other_mode(tmp_path):
    (tmp_path / "user_cached.py").write_text(USER_MODULE)
    off = _run(tmp_path, nansafe=False)
    assert np.isnan(off["scalar"][1])  # inf * 0 without the mode
    on = _run(tmp_path, nansafe=True)  # same cache directory
    assert on["scalar"] == [np.inf, 0.0], on  # NaN-safe: the zero lane stays zero
    assert on["array"] == [0.0, 0.0], on
    again = _run(tmp_path, nansafe=False)  # each mode's entry stays cached beside the other
    assert np.isnan(again["scalar"][1])
    assert again["cached"] == [1, 1], again  # both loaded from the cache (DualArrays too)
