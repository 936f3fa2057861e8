"""NaN-safe mode (DUALGPU_NANSAFE_MODE=1): a zero partial stays zero whatever the factor.

The mode is read at import, so the NaN-safe side runs in a subprocess (the four paths on
two poisoning cases); this process, in the default mode, checks plain forward mode.
"""
import json
import math
import os
import subprocess
import sys

import pytest

import dualgpu

_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
_FIXTURES = os.path.join(_ROOT, "tests", "fixtures")

SCRIPT = r'''
import json, math, sys, warnings
import numpy as np
from numba import njit
import dualgpu
from dualgpu import Dual, DualArray, dmath
import kernels_edge_cases as K

warnings.simplefilter("ignore", RuntimeWarning)
results = {"nansafe": dualgpu.nansafe.NANSAFE_MODE_ENABLED}
f32 = np.float32
# x / y in float32: d/dy = -x / y**2 = -4e38 overflows; lane 0 does not perturb y
x = Dual(f32(1e38), np.array([1.0, 0.0], f32))
y = Dual(f32(0.5), np.array([0.0, 1.0], f32))
results["ratio python"] = (x / y).partials.tolist()
results["ratio njit"] = njit(lambda a, b: a / b)(x, y).partials.tolist()
for backend in ("cpu", "cudasim"):
    out = dualgpu.dual_array(np.zeros(1, f32), lanes=2)
    with dualgpu.using_backend(backend):
        K.ratio[1, 1](DualArray(np.array([x.value]), x.partials.reshape(2, 1).copy()),
                      DualArray(np.array([y.value]), y.partials.reshape(2, 1).copy()), out)
    results["ratio " + backend] = out.partials[:, 0].tolist()
# sqrt at 0: an infinite factor; lane 1 does not perturb the argument
z = Dual(0.0, [1.0, 0.0])
results["sqrt python"] = dmath.sqrt(z).partials.tolist()
results["sqrt njit"] = njit(lambda a: math.sqrt(a))(z).partials.tolist()
print(json.dumps(results))
'''


def _run(nansafe):
    env = dict(os.environ, DUALGPU_NANSAFE_MODE="1" if nansafe else "0",
               PYTHONPATH=os.pathsep.join([_ROOT, _FIXTURES,
                                           os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_nansafe_mode_keeps_zero_partials_zero_on_every_path():
    results = _run(nansafe=True)
    assert results.pop("nansafe") is True
    for name, lanes in results.items():
        if name.startswith("ratio"):
            assert lanes[0] == 2.0, f"{name}: {lanes}"  # d(x/y)/dx = 1/y, untouched by inf
            assert lanes[1] == -math.inf, f"{name}: {lanes}"  # the overflow is still reported
        else:
            assert lanes == [math.inf, 0.0], f"{name}: {lanes}"


def test_default_mode_is_plain_forward_mode():
    # inf * 0 = nan, as in JAX and ForwardDiff without NaN-safe mode
    assert dualgpu.nansafe.NANSAFE_MODE_ENABLED is False
    d = dualgpu.dmath.sqrt(dualgpu.Dual(0.0, [1.0, 0.0]))
    assert d.partials[0] == math.inf and math.isnan(d.partials[1])


def test_a_bad_setting_is_refused():
    with pytest.raises(ValueError, match="DUALGPU_NANSAFE_MODE='maybe'.*1/true/yes/on"):
        dualgpu.nansafe._read("maybe")
    assert dualgpu.nansafe._read(" On ") is True and dualgpu.nansafe._read(None) is False
