"""Shared fixtures. The offline-PTX shim lives here, in test code only.

See the documentation's "numba notes" page, ``docs/dev/numba-notes.md``.
"""
import os
import tempfile

import numpy as np
import pytest
from hypothesis import settings

os.environ.setdefault("MPLBACKEND", "Agg")
# the cpu backend's compile cache: a fresh one per test session, so every run (and CI)
# compiles from scratch; DUALGPU_TEST_CACHE=keep reuses one directory across local runs
# (tests/test_cpu_cache.py checks the cache itself in subprocesses with their own directories)
if os.environ.get("DUALGPU_TEST_CACHE") == "keep":
    os.environ.setdefault("DUALGPU_CACHE_DIR",
                          os.path.join(tempfile.gettempdir(), "dualgpu-test-cache-kept"))
os.environ.setdefault("DUALGPU_CACHE_DIR", tempfile.mkdtemp(prefix="dualgpu-test-cache-"))

# Property tests (tests/test_properties.py). The default keeps the suite fast and repeatable;
# DUALGPU_HYPOTHESIS_PROFILE=dualgpu-long (or --hypothesis-profile=dualgpu-long) explores far
# more programs, with fresh random draws each run.
settings.register_profile("dualgpu-ci", max_examples=100, derandomize=True, database=None,
                          deadline=None, print_blob=True)
settings.register_profile("dualgpu-long", max_examples=3000, database=None, deadline=None,
                          print_blob=True)
settings.load_profile(os.environ.get("DUALGPU_HYPOTHESIS_PROFILE", "dualgpu-ci"))


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
