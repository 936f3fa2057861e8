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


#: a driver that loads the kernel module by its file (issue 44): ``spec`` as tools that import
#: by path do (no ``sys.modules`` entry), ``registered`` the importlib recipe that adds one,
#: ``exec`` into a module object made by hand; plain run and Jacobian, float64. One process may
#: run several cases, each with its own file and cache directory.
BY_PATH = textwrap.dedent('''
    import importlib.util, json, os, sys, types
    sys.path[:0] = [{root!r}]
    import numpy as np
    import dualgpu
    dualgpu.set_backend("cpu")
    for how, path, cache in {cases!r}:
        os.environ["DUALGPU_CACHE_DIR"] = cache  # read at each compile
        if how == "exec":
            module = types.ModuleType("kernels_made_by_exec")
            with open(path) as fh:
                exec(compile(fh.read(), path, "exec"), module.__dict__)
        else:
            spec = importlib.util.spec_from_file_location("kernels_by_path", path)
            module = importlib.util.module_from_spec(spec)
            if how == "registered":
                sys.modules[spec.name] = module
            spec.loader.exec_module(module)
        u = np.linspace(0.0, 1.0, 5)
        J = dualgpu.jacobian(module.run, u)
        print(json.dumps({{"how": how, "out": module.run(u).tolist(), "diag": np.diag(J).tolist(),
                           "off": float(np.abs(J - np.diag(np.diag(J))).max())}}))
''')


def _run_by_path(cases, folder):
    """One process running ``cases``, ``[(how, kernel file, cache directory)]``: their results."""
    env = dict(os.environ, DUALGPU_CACHE="1")
    script = BY_PATH.format(root=ROOT, cases=[(how, str(path), str(cache))
                                              for how, path, cache in cases])
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=600, cwd=str(folder))
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = [json.loads(line) for line in proc.stdout.strip().splitlines()[-len(cases):]]
    assert [r.pop("how") for r in results] == [how for how, _, _ in cases]
    return results


def _launchers(cache):
    folder = cache / "cpu-launchers-v1"
    return sorted(n for n in os.listdir(folder) if n.startswith("dg_")) if folder.exists() else []


@pytest.fixture(scope="module")
def by_path(tmp_path_factory):
    """Every case's runs: ``spec`` and ``exec`` in one process (each its own file and cache
    directory), ``registered`` in two processes over one cache directory, and a third after
    the data files of that cache were truncated: ``{how: ([results], cache)}``."""
    root = tmp_path_factory.mktemp("by_path")
    files = {}
    for how in ("spec", "exec", "registered"):
        (root / how).mkdir()
        files[how] = (root / how / "kernels_on_disk.py", root / how / "cache")
        files[how][0].write_text(KERNEL_MODULE)
    spec, exec_ = _run_by_path([("spec",) + files["spec"], ("exec",) + files["exec"]], root)
    registered = [_run_by_path([("registered",) + files["registered"]], root)[0]
                  for _ in range(2)]
    cache = files["registered"][1]
    damaged = 0
    for folder, _, names in os.walk(cache):
        for name in names:
            if name.endswith(".nbc"):
                with open(os.path.join(folder, name), "r+b") as fh:
                    fh.truncate(16)
                damaged += 1
    again = _run_by_path([("registered",) + files["registered"]], root)[0]
    return {"spec": ([spec], files["spec"][1]), "exec": ([exec_], files["exec"][1]),
            "registered": (registered, cache), "damaged": ([again], damaged)}


@pytest.mark.parametrize("how", ["spec", "exec", "registered"])
def test_kernel_of_a_module_loaded_by_path_runs_in_the_next_process(by_path, how):
    """Issue 44: the next process with the same cache failed with ``ModuleNotFoundError: No
    module named '<dynamic>'`` from numba's cache (the plain run and the Jacobian).

    A module found by name in sys.modules is cached: a second process loads its entries. The
    others compile in memory and write nothing to the cache, so a next process starts from
    the state the first did (the test checks that no file was written instead of running it).
    """
    results, cache = by_path[how]
    u = np.linspace(0.0, 1.0, 5)
    for result in results:
        np.testing.assert_allclose(result["out"], u + 0.5 * np.sin(u), rtol=1e-14)
        np.testing.assert_allclose(result["diag"], 1 + 0.5 * np.cos(u), rtol=1e-12)
        assert result["off"] == 0.0
    if how == "registered":
        assert _launchers(cache)
    else:
        written = [os.path.join(folder, name) for folder, _, names in os.walk(cache)
                   for name in names]
        assert written == [], written


def test_an_entry_that_cannot_be_loaded_is_compiled_again(by_path):
    """A damaged cache entry (truncated data files) compiles again instead of raising (the
    entries the ``registered`` case's processes wrote and loaded)."""
    (again,), damaged = by_path["damaged"]
    assert damaged
    assert again == by_path["registered"][0][0]
