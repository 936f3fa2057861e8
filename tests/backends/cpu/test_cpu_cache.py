"""The cpu backend's compile cache on disk (dualgpu.backends.cpu.cache).

A second process must load every launcher from the cache and compile nothing; any
change to what the machine code depends on (kernel source, module constants, closure
values, options) must give another cache entry, never a stale one.
"""
import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from dualgpu.backends.cpu import kernel as cpu
from dualgpu.backends.cpu import cache as cpu_cache

pytestmark = pytest.mark.slow

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))

SCRIPT = textwrap.dedent("""
    import json, sys, time
    sys.path[:0] = [{root!r}, {tests!r}]
    import numba.core.dispatcher as dispatcher
    compiled = []
    original = dispatcher.Dispatcher.compile
    def compile(self, sig):
        before = len(self.overloads)
        result = original(self, sig)
        if len(self.overloads) > before and not sum(self.stats.cache_hits.values()):
            compiled.append(self.py_func.__qualname__)
        return result
    dispatcher.Dispatcher.compile = compile
    import numpy as np
    import dualgpu
    from simulations import nbody
    dualgpu.set_backend("cpu")
    pos, vel, m = nbody.default_initial_state(16)
    start = time.perf_counter()
    plain = nbody.simulate(pos, vel, m, n_steps=2)[0]
    jac = dualgpu.jacobian(lambda mm: nbody.simulate(pos, vel, mm, n_steps=2)[0], m,
                           progress=False, chunk_size=4)
    seconds = time.perf_counter() - start
    launchers = [name for name in compiled if name == "_dg_launch"]
    print(json.dumps({{"compiled": compiled, "launchers": len(launchers), "seconds": seconds,
                      "plain": plain.tolist(), "jac": jac.tolist()}}))
""")


def _run(cache_dir, enabled=True):
    env = dict(os.environ, DUALGPU_CACHE_DIR=str(cache_dir), DUALGPU_CACHE="1" if enabled else "0")
    script = SCRIPT.format(root=ROOT, tests=os.path.join(ROOT, "tests", "fixtures"))
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_second_process_compiles_nothing(tmp_path):
    first = _run(tmp_path)
    second = _run(tmp_path)
    assert first["launchers"] > 0  # the first process compiled its launchers ...
    assert second["compiled"] == []  # ... the second loaded every one from the cache
    np.testing.assert_array_equal(second["plain"], first["plain"])
    np.testing.assert_array_equal(second["jac"], first["jac"])
    files = os.listdir(os.path.join(tmp_path, f"cpu-launchers-v{cpu_cache.FORMAT}"))
    assert any(f.startswith("dg_") and f.endswith(".py") for f in files)


def test_cache_can_be_turned_off(tmp_path):
    result = _run(tmp_path, enabled=False)
    assert result["launchers"] > 0
    assert not os.path.exists(os.path.join(tmp_path, f"cpu-launchers-v{cpu_cache.FORMAT}"))


KERNEL_SOURCE = '''
from numba import cuda

SCALE = {scale}


def make(offset):
    @cuda.jit
    def shifted(x, out):
        i = cuda.grid(1)
        if i < x.shape[0]:
            out[i] = SCALE * x[i] + offset
    return shifted


@cuda.jit
def plain(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = {body}
'''


def _module(tmp_path, name, scale=2.0, body="x[i] * x[i]"):
    path = tmp_path / f"{name}.py"
    path.write_text(KERNEL_SOURCE.format(scale=scale, body=body))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    # found by name, as a later process finds it: the kernels of a module that cannot be
    # imported by name are not cached (tests/backends/cpu/test_cpu_cache_modules.py)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _key(kernel):
    return cpu_cache.translation_key(cpu.CpuKernel(kernel.py_func)._translation, 0, False, {})


def test_keys_change_with_what_the_code_depends_on(tmp_path):
    base = _module(tmp_path, "cache_kernels_a")
    same = _module(tmp_path, "cache_kernels_b")
    assert _key(base.make(1.0)) == _key(base.make(1.0))  # same source, same values
    # another module with the same source: another entry (numba's cached code imports the
    # defining module; see tests/backends/cpu/test_cpu_cache_modules.py)
    assert _key(base.make(1.0)) != _key(same.make(1.0))
    assert _key(base.make(1.0)) != _key(base.make(1.5))  # a closure value
    other_constant = _module(tmp_path, "cache_kernels_c", scale=3.0)
    assert _key(base.make(1.0)) != _key(other_constant.make(1.0))  # a module constant
    other_body = _module(tmp_path, "cache_kernels_d", body="x[i] + x[i]")
    assert _key(base.plain) != _key(other_body.plain)  # the kernel's source


def test_module_constant_changed_at_run_time_changes_the_key(tmp_path, monkeypatch):
    module = _module(tmp_path, "cache_kernels_e")
    before = _key(module.make(0.0))
    monkeypatch.setattr(module, "SCALE", 5.0)
    # a new kernel (a kernel compiled before keeps the value it was compiled with)
    assert _key(module.make(0.0)) != before


def test_launcher_key_covers_options_and_source():
    key = cpu_cache.launcher_key("def _dg_launch(): pass\n", "thread", {"fastmath": False})
    assert key != cpu_cache.launcher_key("def _dg_launch(): pass\n", "thread", {"fastmath": True})
    assert key != cpu_cache.launcher_key("def _dg_launch(): return\n", "thread",
                                         {"fastmath": False})
    assert key != cpu_cache.launcher_key("def _dg_launch(): pass\n", "other", {"fastmath": False})


class _Opaque:
    pass


def test_values_without_a_stable_key_are_not_cached():
    with pytest.raises(cpu_cache.Uncacheable):
        cpu_cache.fingerprint(_Opaque())
    assert cpu_cache.fingerprint(np.arange(3.0)) != cpu_cache.fingerprint(np.arange(3.0) + 1)
    assert cpu_cache.fingerprint((1, 2.0)) != cpu_cache.fingerprint((1, 2))


NANSAFE_SCRIPT = textwrap.dedent("""
    import json, sys, warnings
    sys.path[:0] = [{root!r}, {tests!r}]
    warnings.simplefilter("ignore")
    import numpy as np
    import dualgpu
    from dualgpu import Dual, DualArray
    import kernels_edge_cases as K
    f32 = np.float32
    x = Dual(f32(1e38), np.array([1.0, 0.0], f32))  # d(x/y)/dy overflows in float32
    y = Dual(f32(0.5), np.array([0.0, 1.0], f32))
    out = dualgpu.dual_array(np.zeros(1, f32), lanes=2)
    with dualgpu.using_backend("cpu"):
        K.ratio[1, 1](DualArray(np.array([x.value]), x.partials.reshape(2, 1).copy()),
                      DualArray(np.array([y.value]), y.partials.reshape(2, 1).copy()), out)
    print(json.dumps(out.partials[:, 0].tolist()))
""")


def test_nansafe_mode_is_part_of_the_key(tmp_path):
    """A launcher cached without NaN-safe mode was loaded by a NaN-safe process: NaN partials
    where the mode promises the zero lane's own derivative."""
    def run(nansafe):
        env = dict(os.environ, DUALGPU_CACHE_DIR=str(tmp_path), DUALGPU_CACHE="1",
                   DUALGPU_NANSAFE_MODE="1" if nansafe else "0")
        script = NANSAFE_SCRIPT.format(root=ROOT, tests=os.path.join(ROOT, "tests", "fixtures"))
        proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                              text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    plain = run(nansafe=False)
    assert np.isnan(plain[0])  # inf * 0 = nan without the mode
    assert run(nansafe=True) == [2.0, -np.inf]  # from the same cache directory


def test_switches_cover_nansafe_and_bounds_checking(monkeypatch):
    from numba.core import config

    from dualgpu import nansafe

    before = cpu_cache.switches()
    monkeypatch.setattr(config, "BOUNDSCHECK", True)
    assert cpu_cache.switches() != before
    monkeypatch.setattr(config, "BOUNDSCHECK", before[1][1])
    monkeypatch.setattr(nansafe, "NANSAFE_MODE_ENABLED", not nansafe.NANSAFE_MODE_ENABLED)
    assert cpu_cache.switches() != before
