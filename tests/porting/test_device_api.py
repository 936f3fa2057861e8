"""numba.cuda's device and context API through ``dualgpu.cuda`` on every backend.

Real codes size their launches from the device (``MULTIPROCESSOR_COUNT``, ``WARP_SIZE``)
and pick a GPU with ``select_device``; off the GPU these went to the CUDA driver and
raised ``CudaSupportError``.
"""
import contextlib
import io
import math

import numpy as np
import pytest

import dualgpu
from dualgpu import cuda
from dualgpu.errors import DualgpuError

BACKENDS = ["cpu", "cudasim"]


@pytest.mark.parametrize("name", BACKENDS)
def test_device_queries_off_the_gpu(name):
    with dualgpu.using_backend(name):
        device = cuda.select_device(0)
        current = cuda.get_current_device()
        assert current.id == device.id == 0
        assert isinstance(current.name, str) and current.name
        assert current.compute_capability == (5, 2)  # numba's simulator device
        assert current.COMPUTE_CAPABILITY_MAJOR == 5 and current.COMPUTE_CAPABILITY_MINOR == 2
        assert current.WARP_SIZE == 32
        assert current.MAX_THREADS_PER_BLOCK == 1024
        assert current.MAX_SHARED_MEMORY_PER_BLOCK == 48 * 1024
        assert (current.MAX_BLOCK_DIM_X, current.MAX_BLOCK_DIM_Y, current.MAX_BLOCK_DIM_Z) \
            == (1024, 1024, 64)
        assert current.MAX_GRID_DIM_X == 2 ** 31 - 1
        assert isinstance(current.MULTIPROCESSOR_COUNT, int) and current.MULTIPROCESSOR_COUNT >= 1
        assert current.uuid.startswith("GPU-")
        current.reset()  # nothing to reset off the GPU


@pytest.mark.parametrize("name", BACKENDS)
def test_device_lists_and_contexts(name):
    with dualgpu.using_backend(name):
        assert cuda.is_available()
        assert len(cuda.gpus) == 1 and len(cuda.list_devices()) == 1
        assert [d.id for d in cuda.gpus] == [0]
        with cuda.gpus[0]:  # the multi-GPU idiom
            assert cuda.get_current_device().id == 0
        assert cuda.gpus.current.id == 0
        context = cuda.current_context()
        assert context.device.id == 0
        free, total = context.get_memory_info()
        assert 0 < free <= total and math.isfinite(total)
        info = context.get_memory_info()
        assert (info.free, info.total) == (free, total)
        context.synchronize()
        cuda.synchronize()
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert cuda.detect() is True
        assert "Found 1 CUDA devices" in out.getvalue()
        cuda.close()
        assert cuda.get_current_device().id == 0  # usable again after close, as numba's


@pytest.mark.parametrize("name", BACKENDS)
def test_bad_device_requests_name_the_fix(name):
    with dualgpu.using_backend(name):
        with pytest.raises(DualgpuError, match=r"select_device\(1\).*one device.*id 0"):
            cuda.select_device(1)
        with pytest.raises(AttributeError, match="NOT_AN_ATTRIBUTE"):
            cuda.get_current_device().NOT_AN_ATTRIBUTE  # noqa: B018 (the read must raise)


def test_gpu_backend_uses_numbas_own(monkeypatch):
    """With a GPU (the ``cuda`` backend) every call goes to numba.cuda's driver API."""
    from numba import cuda as numba_cuda

    import dualgpu.porting.devices as host_devices

    monkeypatch.setattr(host_devices, "backend", lambda: "cuda")
    sentinel = object()
    for attr in ("select_device", "get_current_device", "list_devices", "current_context",
                 "close", "detect"):
        monkeypatch.setattr(numba_cuda, attr, lambda *a, _s=sentinel, **k: _s)
    assert cuda.select_device(0) is sentinel
    assert cuda.get_current_device() is sentinel
    assert cuda.list_devices() is sentinel
    assert cuda.current_context() is sentinel
    assert cuda.close() is sentinel
    assert cuda.detect() is sentinel
    monkeypatch.setattr(numba_cuda, "gpus", [sentinel])
    assert cuda.gpus[0] is sentinel and len(cuda.gpus) == 1


# -- a real-style code: a grid-stride kernel sized from the device -------------------
@cuda.jit
def _damped_decay(u, rate, dt, steps):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, u.shape[0], stride):
        x = u[i]
        for _ in range(steps):
            x = x - dt * rate * x * x
        u[i] = x


def _simulate(u0, rate):
    device = cuda.get_current_device()
    threads = min(device.WARP_SIZE, device.MAX_THREADS_PER_BLOCK)
    blocks = 2 * device.MULTIPROCESSOR_COUNT
    d_u = cuda.to_device(u0)
    _damped_decay[blocks, threads](d_u, rate, 0.05, 4)
    cuda.synchronize()
    return d_u.copy_to_host()


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_launch_sized_from_the_device_differentiates(name, dtype):
    n = 70  # more cells than threads on cudasim: the grid-stride loop runs
    u0 = np.linspace(0.5, 1.5, n).astype(dtype)
    rate = dtype(0.8)
    with dualgpu.using_backend(name):
        jac = dualgpu.jacobian(_simulate, u0, rate, argnums=1)
        h = 1e-6 if dtype == np.float64 else 1e-2
        up = _simulate(u0, rate + dtype(h)).astype(np.float64)
        down = _simulate(u0, rate - dtype(h)).astype(np.float64)
    fd = (up - down) / (float(rate + dtype(h)) - float(rate - dtype(h)))
    rtol = 1e-7 if dtype == np.float64 else 2e-3
    np.testing.assert_allclose(np.asarray(jac, np.float64).reshape(-1), fd,
                               rtol=rtol, atol=rtol * np.max(np.abs(fd)))


def test_default_backend_without_a_gpu_answers():
    """No backend chosen and no GPU: the default backend answers (numba's driver is not asked)."""
    from numba import cuda as numba_cuda

    if numba_cuda.is_available():
        pytest.skip("a GPU is present: the cuda backend answers with numba's own device")
    device = cuda.get_current_device()
    assert device.WARP_SIZE == 32 and device.id == 0


def test_large_cpu_device_arrays_do_not_start_at_one_address_modulo_4_kib():
    """Two buffers of one size (a stencil's u and u_new) start at different offsets after a
    page boundary (4K aliasing: loads from one falsely wait on stores to the other); their
    contents are zeros or the copied data, and small arrays are plain numpy allocations."""
    import dualgpu
    from dualgpu.porting import memory

    with dualgpu.using_backend("cpu"):
        data = np.arange(16384.0)
        arrays = [dualgpu.cuda.to_device(data), dualgpu.cuda.device_array(16384),
                  dualgpu.cuda.device_array_like(data), dualgpu.cuda.to_device(data)]
        small = dualgpu.cuda.device_array(16)
    offsets = [a.ctypes.data % 4096 for a in arrays]
    assert len(set(offsets)) == len(offsets) and all(o % 64 == 0 for o in offsets)
    assert all(type(a) is memory.HostArray for a in arrays + [small])
    assert np.array_equal(arrays[0], data) and np.array_equal(arrays[3], data)
    assert not arrays[1].any() and not arrays[2].any() and not small.any()


def test_copies_between_host_and_device_check_as_numba_cuda_does():
    # a float32 device array copied into a float64 host buffer: numba.cuda's TypeError (the cpu
    # backend cast silently, so code ran here and failed on a GPU; found by an unseen round)
    with dualgpu.using_backend("cpu"):
        d = cuda.device_array(4, np.float32)
        d.copy_to_host(np.zeros(4, np.float32))
        d.copy_to_host(np.zeros((1, 4), np.float32))  # (the same shape once squeezed)
        d.copy_to_device(np.arange(8.0, dtype=np.float32)[::2])  # (made contiguous first)
        assert d.copy_to_host().tolist() == [0.0, 2.0, 4.0, 6.0]
        with pytest.raises(TypeError, match="incompatible dtype: float32 vs. float64"):
            d.copy_to_host(np.zeros(4))
        with pytest.raises(TypeError, match="incompatible dtype: float32 vs. float64"):
            d.copy_to_device(np.zeros(4))
        with pytest.raises(ValueError, match="incompatible shape"):
            d.copy_to_host(np.zeros(3, np.float32))
        with pytest.raises(ValueError, match="incompatible strides"):
            d.copy_to_host(np.zeros(8, np.float32)[::2])
