"""Rules added with ``dualgpu.rules.define`` and users' ``@njit(cache=True)`` functions on duals
(issue 43 S8): numba's cache index knows a function by its argument types, so the defined
rules are part of the dual types' key (as the NaN-safe mode is): a process whose rules differ
(a corrected formula, a built-in rule overridden or not) never loads code compiled under the
others, and one with the same rules loads it."""
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
    import os

    from numba import njit

    from dualgpu import rules

    @rules.define("user_rules.softplus", os.environ["SOFTPLUS_RULE"])
    def softplus(x):
        return math.log1p(math.exp(x))

    if os.environ["TANH_RULE"]:
        rules.define("math.tanh", os.environ["TANH_RULE"], override=True)

    @njit(cache=True)
    def scalar(d):
        return 2.0 * softplus(d)

    @njit(cache=True)
    def arrays(x, out):
        for i in range(x.shape[0]):
            out[i] = math.tanh(x[i])
""")

SCRIPT = textwrap.dedent("""
    import json
    import numpy as np
    import dualgpu
    from dualgpu import Dual, DualArray
    import user_rules
    s = user_rules.scalar(Dual(0.0, [1.0]))
    x = DualArray(np.array([0.5]), np.array([[1.0]]))
    out = dualgpu.dual_array(np.zeros(1), lanes=1)
    user_rules.arrays(x, out)
    print(json.dumps({"scalar": float(s.partials[0]), "array": float(out.partials[0, 0]),
                      "cached": [len(f.stats.cache_hits) for f in (user_rules.scalar,
                                                                    user_rules.arrays)]}))
""")

WRONG, RIGHT = "0.25", "1 / (1 + exp(-x))"  # softplus'(0) = 0.5: the wrong rule gives 2 * 0.25


def _run(tmp_path, softplus, tanh=""):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"),
               DUALGPU_CACHE_DIR=str(tmp_path / "dualgpu"), SOFTPLUS_RULE=softplus,
               TANH_RULE=tanh, PYTHONPATH=os.pathsep.join([str(tmp_path), ROOT]))
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_corrected_rule_in_a_later_process_is_not_loaded_from_numbas_cache(tmp_path):
    (tmp_path / "user_rules.py").write_text(USER_MODULE)
    tanh = 1 - np.tanh(0.5) ** 2
    before = _run(tmp_path, WRONG)
    assert before["scalar"] == 0.5 and before["array"] == pytest.approx(tanh, rel=1e-14)
    corrected = _run(tmp_path, RIGHT)  # the same cache directories
    assert corrected["scalar"] == pytest.approx(1.0, rel=1e-14), corrected
    overridden = _run(tmp_path, RIGHT, tanh="2")  # a built-in rule overridden: another entry
    assert overridden["array"] == 2.0, overridden
    assert overridden["scalar"] == pytest.approx(1.0, rel=1e-14)
    again = _run(tmp_path, WRONG)  # each set of rules keeps its own entries
    assert again["scalar"] == 0.5 and again["array"] == pytest.approx(tanh, rel=1e-14)
    assert again["cached"] == [1, 1], again  # loaded from the cache, scalar and DualArray
