"""The backend choice is context-local: threads and asyncio tasks do not change each other's."""
import asyncio
import threading

import numpy as np
import pytest

import dualgpu
from dualgpu import DualgpuError, cuda
from dualgpu.autodiff.api import jacobian
from dualgpu.core import selection


@cuda.jit
def double(u, out):
    i = cuda.grid(1)
    if i < u.shape[0]:
        out[i] = 2.0 * u[i]


def doubled(u):
    d_u = cuda.to_device(u)
    out = cuda.device_array_like(d_u)
    double[1, 8](d_u, out)
    return out.copy_to_host()


def test_another_threads_using_backend_leaves_this_thread_alone():
    entered, leave = threading.Event(), threading.Event()
    seen = {}

    def other():
        with dualgpu.using_backend("cudasim"):
            seen["other"] = dualgpu.backend()
            entered.set()
            leave.wait(30)

    with dualgpu.using_backend("cpu"):
        worker = threading.Thread(target=other)
        worker.start()
        try:
            assert entered.wait(30)
            assert dualgpu.backend() == "cpu"
            J = jacobian(doubled, np.arange(3.0), chunk_size=3, progress=False)
            assert "cpu" in double._compiled and "cudasim" not in double._compiled
        finally:
            leave.set()
            worker.join()
    assert seen["other"] == "cudasim"
    np.testing.assert_array_equal(J, 2.0 * np.eye(3))


def test_set_backend_is_process_wide_and_using_backend_restores():
    seen = []
    try:
        dualgpu.set_backend("cudasim")
        thread = threading.Thread(target=lambda: seen.append(dualgpu.backend()))
        thread.start()
        thread.join()
        with dualgpu.using_backend("cpu"):
            assert dualgpu.backend() == "cpu"
        assert dualgpu.backend() == "cudasim"
    finally:
        dualgpu.set_backend(None)
    assert seen == ["cudasim"]


def test_asyncio_tasks_keep_their_own_backend():
    async def task(name, log):
        with dualgpu.using_backend(name):
            for _ in range(3):
                await asyncio.sleep(0)  # let the other task run inside its own block
                log.append((name, dualgpu.backend()))

    async def main():
        log = []
        await asyncio.gather(task("cpu", log), task("cudasim", log))
        return log

    log = asyncio.run(main())
    assert len(log) == 6 and all(name == seen for name, seen in log)


def _report_backend(out):
    out[0] = 1.0 if dualgpu.backend() == "cudasim" else 0.0


@cuda.jit
def report(out):
    if cuda.grid(1) == 0:
        _report_backend(out)


def test_code_inside_a_simulated_kernel_sees_cudasim():
    out = np.zeros(1)
    with dualgpu.using_backend("cudasim"):
        report[1, 2](out)  # the simulator runs each CUDA thread in a fresh Python thread
    assert out[0] == 1.0


def test_environment_asking_for_cuda_without_a_gpu(monkeypatch):
    import importlib

    module = importlib.import_module("dualgpu.core.selection")
    if module._gpu_available():
        pytest.skip("this machine has a GPU: DUALGPU_BACKEND=cuda is valid here")
    monkeypatch.setenv("DUALGPU_BACKEND", "cuda")
    with pytest.raises(DualgpuError) as from_env:
        dualgpu.backend()
    with pytest.raises(DualgpuError) as from_call:
        dualgpu.set_backend("cuda")
    for error in (from_env, from_call):
        assert module._NO_GPU in str(error.value)
    assert "DUALGPU_BACKEND" in str(from_env.value)
    monkeypatch.setenv("DUALGPU_BACKEND", "tpu")
    with pytest.raises(DualgpuError, match="unknown backend in DUALGPU_BACKEND 'tpu'"):
        dualgpu.backend()


def _numba_kernel():
    from numba import cuda as numba_cuda

    @numba_cuda.jit
    def scale(a):
        i = numba_cuda.grid(1)
        if i < a.shape[0]:
            a[i] *= 2.0

    return scale


@pytest.mark.parametrize("name", ["cpu", "cudasim"])
def test_no_gpu_occupancy_warning_off_the_gpu(name):
    """numba-cuda's "Grid size 1 will likely result in GPU under-utilization" is GPU advice:
    configuring a launch while the cpu or cudasim backend is active does not emit it."""
    import warnings

    from numba.cuda.core import config

    kernel = _numba_kernel()
    before = config.CUDA_LOW_OCCUPANCY_WARNINGS
    try:
        config.CUDA_LOW_OCCUPANCY_WARNINGS = 1
        selection._USER_OCCUPANCY_WARNINGS = None
        with dualgpu.using_backend(name), warnings.catch_warnings():
            warnings.simplefilter("error")
            kernel[1, 32]  # configuring is where numba-cuda warns
        dualgpu.set_backend(name)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            kernel[1, 32]
        # the user's own setting comes back for the GPU backend
        selection._occupancy_warnings_for("cuda")
        assert config.CUDA_LOW_OCCUPANCY_WARNINGS == 1
        with pytest.warns(Warning, match="under-utilization"):
            kernel[3, 32]  # numba-cuda keeps a configuration once made: a new grid
    finally:
        dualgpu.set_backend(None)
        config.CUDA_LOW_OCCUPANCY_WARNINGS = before
        selection._USER_OCCUPANCY_WARNINGS = None
