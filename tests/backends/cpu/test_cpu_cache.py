"""The cpu backend's compile cache on disk (dualgpu.backends.cpu.cache).

A second process must load every launcher from the cache and compile nothing; any
change to what the machine code depends on (kernel source, module constants, closure
values, options) must give another cache entry, never a stale one. NaN-safe mode in the key:
tests/core/test_nansafe.py (one sequence of processes for both caches on disk).
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


def _run(cache_dir):
    env = dict(os.environ, DUALGPU_CACHE_DIR=str(cache_dir), DUALGPU_CACHE="1")
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


def test_cache_can_be_turned_off(tmp_path, monkeypatch):
    """``DUALGPU_CACHE=0``: a kernel the cache would keep (its module is found by name) compiles
    its launchers and writes nothing. In this process: the switch is read at each compile, and
    a kernel no process has compiled before compiles here whatever this process did before."""
    import numba.core.dispatcher as dispatcher

    import dualgpu
    from dualgpu import cuda

    cache = tmp_path / "cache"
    monkeypatch.setenv("DUALGPU_CACHE_DIR", str(cache))
    monkeypatch.setenv("DUALGPU_CACHE", "0")
    compiled = []
    original = dispatcher.Dispatcher.compile

    def compile(self, sig):
        before = len(self.overloads)
        result = original(self, sig)
        if len(self.overloads) > before and not sum(self.stats.cache_hits.values()):
            compiled.append(self.py_func.__qualname__)
        return result

    monkeypatch.setattr(dispatcher.Dispatcher, "compile", compile)
    path = tmp_path / "cache_kernels_off.py"  # KERNEL_SOURCE's kernels as dualgpu kernels
    path.write_text(KERNEL_SOURCE.format(scale=2.0, body="x[i] * x[i]").replace(
        "from numba import cuda", "from dualgpu import cuda"))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # found by name: cacheable
    spec.loader.exec_module(module)

    def f(x):
        out = cuda.device_array_like(x)
        module.plain[1, 8](cuda.to_device(x), out)
        return out.copy_to_host()

    x = np.linspace(0.5, 1.5, 5)
    with dualgpu.using_backend("cpu"):
        np.testing.assert_array_equal(f(x), x * x)
        np.testing.assert_allclose(dualgpu.jacobian(f, x), np.diag(2 * x), rtol=1e-15)
    assert compiled.count("_dg_launch") >= 2  # the plain launcher and the dual one
    assert not os.path.exists(os.path.join(cache, f"cpu-launchers-v{cpu_cache.FORMAT}"))
    # the control: a kernel of the same module with the cache on is written there
    monkeypatch.setenv("DUALGPU_CACHE", "1")
    out = cuda.device_array_like(x)
    with dualgpu.using_backend("cpu"):
        module.make(1.0)[1, 8](cuda.to_device(x), out)
    np.testing.assert_array_equal(out.copy_to_host(), 2.0 * x + 1.0)
    assert os.listdir(os.path.join(cache, f"cpu-launchers-v{cpu_cache.FORMAT}"))


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


def test_switches_cover_nansafe_and_bounds_checking(monkeypatch):
    from numba.core import config

    from dualgpu import nansafe

    before = cpu_cache.switches()
    monkeypatch.setattr(config, "BOUNDSCHECK", True)
    assert cpu_cache.switches() != before
    monkeypatch.setattr(config, "BOUNDSCHECK", before[1][1])
    monkeypatch.setattr(nansafe, "NANSAFE_MODE_ENABLED", not nansafe.NANSAFE_MODE_ENABLED)
    assert cpu_cache.switches() != before
