"""The cpu backend's disk cache and the module a kernel is defined in (issue 25, crash 2).

numba rebuilds a cached function's environment by importing the module that
defined it. Keyed by source alone, a second module with the same kernel source
(a renamed module, a kernel copied from the README) loaded the first module's
entry and failed with ``ModuleNotFoundError`` naming the first module.
"""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytestmark = pytest.mark.slow

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))

KERNEL_MODULE = textwrap.dedent('''
    import math
    from dualgpu import cuda


    @cuda.jit
    def step(u, out, a):
        i = cuda.grid(1)
        if i < u.shape[0]:
            if u[i] < -1e300:
                raise ValueError("the state diverged")
            out[i] = u[i] + a * math.sin(u[i])


    def run(u, a=0.5):
        out = cuda.device_array_like(u)
        step[1, u.shape[0]](cuda.to_device(u), out, a)
        return out.copy_to_host()
''')

DRIVER = textwrap.dedent('''
    import importlib, json, sys
    sys.path[:0] = [{folder!r}, {root!r}]
    import numpy as np
    import dualgpu
    dualgpu.set_backend("cpu")
    module = importlib.import_module({name!r})
    u = np.linspace(0.0, 1.0, 5)
    print(json.dumps({{"out": module.run(u).tolist()}}))
''')


def _run_module(folder, name, cache):
    env = dict(os.environ, DUALGPU_CACHE_DIR=str(cache), DUALGPU_CACHE="1")
    script = DRIVER.format(folder=str(folder), root=ROOT, name=name)
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=600, cwd=str(folder))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_same_kernel_source_in_a_renamed_module(tmp_path):
    cache = tmp_path / "cache"
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    (first / "kernels_before.py").write_text(KERNEL_MODULE)
    before = _run_module(first, "kernels_before", cache)
    # the module is renamed: the old one is gone, the new one has the same source
    (first / "kernels_before.py").unlink()
    (second / "kernels_after.py").write_text(KERNEL_MODULE)
    after = _run_module(second, "kernels_after", cache)
    u = np.linspace(0.0, 1.0, 5)
    np.testing.assert_allclose(after["out"], u + 0.5 * np.sin(u), rtol=1e-14)
    assert after == before
    # both modules' launchers are in the cache, as separate entries
    launchers = [n for n in os.listdir(cache / "cpu-launchers-v1") if n.startswith("dg_")]
    assert len(launchers) == 2, launchers
