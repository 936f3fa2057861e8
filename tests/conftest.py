"""Shared fixtures. The offline-PTX shim lives here, in test code only (see the numba notes)."""
import os
import tempfile

import numpy as np
import pytest

os.environ.setdefault("MPLBACKEND", "Agg")
# the cpu backend's compile cache: a fresh one per test session (tests/test_cpu_cache.py
# checks the cache itself in subprocesses with their own directories)
os.environ.setdefault("DUALGPU_CACHE_DIR", tempfile.mkdtemp(prefix="dualgpu-test-cache-"))


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
