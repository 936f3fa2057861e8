"""Shared fixtures and markers. The offline-PTX shim lives here, in test code only.

The tests mirror the package (``tests/core`` for ``dualgpu.core``, ``tests/backends/cpu`` for
``dualgpu.backends.cpu``...); ``tests/integration`` runs simulations, scripts, docs and
benchmarks end to end. ``tests/fixtures`` holds the kernels and harnesses the tests import by
module name (setup.cfg puts it on the path); it holds no tests and is not collected.

Markers (declared in setup.cfg): ``slow``, ``compile``, ``gpu``, ``peers``. The default run
runs them all; ``-m "not slow"`` and the like pick a subset. A test that asks for the
``offline_ptx`` fixture is marked ``compile``; a ``gpu`` test is skipped without a real GPU.

See the documentation's "numba notes" page, ``docs/dev/numba-notes.md``.
"""
import atexit
import gc
import os
import shutil
import tempfile

import numpy as np
import pytest
from hypothesis import settings

os.environ.setdefault("MPLBACKEND", "Agg")
# numba's compiler allocates millions of container objects, and every compiled function keeps
# many for the life of the process: with CPython's default thresholds (700, 10, 10) a full
# collection walks that ever-growing heap after every ~70 thousand surviving allocations, about
# a tenth of a test process's CPU time (gc.callbacks: 14 of 103 CPU-s over three compiling
# files). A young generation of 25000 makes every collection ~35 times rarer; full collections
# keep CPython's rule (only once the objects new since the last one are a quarter of the old),
# so the memory peak stays where it was. Test processes only (the fresh processes some tests
# start keep CPython's defaults, as users' do); DUALGPU_TEST_GC=default keeps them here too.
_TUNED_GC = os.environ.get("DUALGPU_TEST_GC", "").strip().lower() != "default"
if _TUNED_GC:
    gc.set_threshold(25000, 10, 10)


@pytest.fixture(autouse=True)
def _auto_capture_counts_per_test():
    """``capture="auto"`` counts each f's uncaptured launches and seconds for the life of the
    process (dualgpu.porting.capture.AUTO_LAUNCHES, AUTO_SECONDS); each test starts from none,
    so that what a test sees does not depend on the tests that ran before it in its worker."""
    from dualgpu.porting import capture

    capture._LAUNCHES.clear()
    yield


@pytest.fixture
def users_gc():
    """CPython's default collection thresholds for one test, as users' processes have them
    (a check that something is freed by the cyclic collector as soon as users would see it)."""
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        yield
    finally:
        gc.set_threshold(*before)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    """pytest's cleanup collects garbage five times over the whole heap to report unraisable
    exceptions; in a pytest-xdist worker that runs after the worker reported that it finished,
    and execnet interrupts a worker still busy 5 s later (a KeyboardInterrupt, reported as an
    unraisable exception in hypothesis's gc callback, once per run with the thresholds above).
    The same five collections here, before the worker reports, then a frozen heap: pytest's
    own find only what is allocated after (unraisable exceptions are still caught: its hook is
    installed until its cleanup)."""
    if _TUNED_GC:
        for _ in range(5):
            gc.collect()
        gc.freeze()
# the cpu backend's compile cache: a fresh one per test run, so every run (and CI)
# compiles from scratch, removed when the run ends; DUALGPU_TEST_CACHE=keep reuses one
# directory across local runs (tests/backends/cpu/test_cpu_cache.py checks the cache itself in
# subprocesses with their own directories). pytest-xdist's workers inherit the environment of
# the process that made the directory, so the workers of one run share it (a launcher one
# worker compiled, the other loads, as two processes of a user do; entries are written
# atomically), and that process removes it at exit.
if os.environ.get("DUALGPU_TEST_CACHE") == "keep":
    os.environ.setdefault("DUALGPU_CACHE_DIR",
                          os.path.join(tempfile.gettempdir(), "dualgpu-test-cache-kept"))
if "DUALGPU_CACHE_DIR" not in os.environ:
    os.environ["DUALGPU_CACHE_DIR"] = tempfile.mkdtemp(prefix="dualgpu-test-cache-")
    atexit.register(shutil.rmtree, os.environ["DUALGPU_CACHE_DIR"], ignore_errors=True)

# Property tests (tests/core/test_properties.py). The default keeps the suite fast and repeatable;
# DUALGPU_HYPOTHESIS_PROFILE=dualgpu-long (or --hypothesis-profile=dualgpu-long) explores far
# more programs, with fresh random draws each run.
settings.register_profile("dualgpu-ci", max_examples=50, derandomize=True, database=None,
                          deadline=None, print_blob=True)
settings.register_profile("dualgpu-long", max_examples=3000, database=None, deadline=None,
                          print_blob=True)
settings.load_profile(os.environ.get("DUALGPU_HYPOTHESIS_PROFILE", "dualgpu-ci"))


# kernels and harnesses, imported by the tests (not tests themselves)
collect_ignore = ["fixtures"]


def _gpu_available():
    """A real CUDA GPU (not numba's simulator) is usable in this process."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM"):
        return False
    try:
        from numba import cuda

        return cuda.is_available()
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    """Mark the tests that compile to PTX; skip the ``gpu`` tests on a machine without one."""
    gpu_tests = []
    for item in items:
        if "offline_ptx" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.compile)
        if item.get_closest_marker("gpu") is not None:
            gpu_tests.append(item)
    if gpu_tests and not _gpu_available():
        skip = pytest.mark.skip(reason="needs a CUDA GPU")
        for item in gpu_tests:
            item.add_marker(skip)


class _FakeDevice:
    compute_capability = (9, 0)


@pytest.fixture
def offline_ptx(monkeypatch):
    """Let ``numba.cuda.compile_ptx`` compile kernels that call device functions without a GPU.

    numba-cuda asks the driver for the current device's compute capability when it
    compiles a device function; without a GPU that lookup fails. This fixture makes it
    return 9.0 (Hopper) for the duration of one test.
    """
    import numba.cuda.dispatcher as dispatcher

    monkeypatch.setattr(dispatcher, "get_current_device", lambda: _FakeDevice())
    return (9, 0)


@pytest.fixture
def rng():
    return np.random.default_rng(20261130)
