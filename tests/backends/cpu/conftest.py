"""Fixtures of the cpu backend's tests."""
import pytest

from dualgpu.backends.cpu import parallel as cpu_parallel


@pytest.fixture(params=["serial", "pieces"])
def launch_mode(request, monkeypatch):
    """Every launch serial, or every launch that may run in pieces on 2 threads."""
    if request.param == "pieces":
        monkeypatch.setattr(cpu_parallel, "FORCE", True)
        monkeypatch.setattr(cpu_parallel, "available_threads", lambda: 2)
    else:
        monkeypatch.setattr(cpu_parallel, "ENABLED", False)
    return request.param
