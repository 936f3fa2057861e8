"""dualgpu.jit: decorator forms, wrapping numba.cuda kernels, launch syntax, caching."""
import math

import numpy as np
import pytest

import dualgpu
from dualgpu import Dual, DualArray, cuda
from dualgpu.porting.kernel import DeviceFunction, Kernel

import kernels_numba_original as original

BACKENDS = ["cpu", "cudasim"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_wrapping_a_numba_cuda_kernel(backend, rng):
    kernel = dualgpu.jit(original.apply_smooth)  # decorated by numba.cuda, not editable
    assert isinstance(kernel, Kernel) and cuda.jit is dualgpu.jit
    u = rng.normal(size=20)
    with dualgpu.using_backend(backend):
        out = np.zeros(20)
        kernel[1, 32](u, out, 1.5)
        np.testing.assert_allclose(out, 1.5 * np.tanh(u) * u, rtol=1e-14)
        seeds = rng.normal(size=(2, 20))
        du, dout = DualArray(u.copy(), seeds), dualgpu.dual_array(np.zeros(20), lanes=2)
        kernel[1, 32, 0](du, dout, Dual(1.5, [0.0, 1.0]))  # stream in the launch syntax
    slope = 1.5 * (np.tanh(u) + u * (1 - np.tanh(u) ** 2))
    np.testing.assert_allclose(dout.values, out, rtol=1e-14)
    np.testing.assert_allclose(dout.partials[0], slope * seeds[0], rtol=1e-12)
    np.testing.assert_allclose(dout.partials[1], slope * seeds[1] + np.tanh(u) * u, rtol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_numba_kernel_with_options_and_duals(backend):
    kernel = dualgpu.jit(original.doubled)
    u = np.arange(5.0)
    with dualgpu.using_backend(backend):
        out = np.zeros(5)
        kernel[1, 8](u, out)
        d = dualgpu.dual_array(u, np.ones((1, 5)))
        dout = cuda.device_array_like(d)
        kernel[1, 8](d, dout)
    np.testing.assert_array_equal(out, 2 * u)
    np.testing.assert_array_equal(dout.copy_to_host().partials, 2 * np.ones((1, 5)))


def test_decorator_forms_and_device_functions():
    @dualgpu.jit(device=True)
    def twice(x):
        return 2 * x

    @dualgpu.jit(fastmath=False)
    def k1(u):
        i = cuda.grid(1)
        if i < u.shape[0]:
            u[i] = twice(u[i])

    @dualgpu.jit("void(float64[:])")
    def k2(u):
        i = cuda.grid(1)
        if i < u.shape[0]:
            u[i] = math.sqrt(u[i])

    assert isinstance(twice, DeviceFunction) and twice(3.0) == 6.0  # plain Python call
    assert isinstance(k1, Kernel) and isinstance(k2, Kernel)
    with dualgpu.using_backend("cpu"):
        u = np.full(4, 4.0)
        k1[1, 4](u)
        k2[1, 4](u)
    np.testing.assert_array_equal(u, np.full(4, math.sqrt(8.0)))


def test_specialisations_are_cached_per_backend():
    kernel = dualgpu.jit(original.apply_smooth)
    with dualgpu.using_backend("cpu"):
        first = kernel.compiled()
        kernel[1, 8](np.ones(4), np.zeros(4), 1.0)
        assert kernel.compiled() is first
        assert kernel[1, 8] is kernel[1, 8]  # launch configurations are reused too


def test_backend_selection(monkeypatch):
    monkeypatch.setenv("DUALGPU_BACKEND", "cudasim")
    dualgpu.set_backend(None)
    assert dualgpu.backend() == "cudasim"
    with dualgpu.using_backend("cpu"):
        assert dualgpu.backend() == "cpu"
    assert dualgpu.backend() == "cudasim"
    monkeypatch.delenv("DUALGPU_BACKEND")
    assert dualgpu.backend() == "cpu"  # no GPU and no simulator flag on this machine
    with pytest.raises(dualgpu.DualgpuError, match="needs an NVIDIA GPU"):
        dualgpu.set_backend("cuda")


def test_gpu_backend_accepts_the_options_of_a_wrapped_numba_kernel(offline_ptx):
    from numba import cuda as numba_cuda, types

    from dualgpu.backends.gpu import kernel as gpu
    from dualgpu.compiled.arrays import dual_array_type

    kernel = dualgpu.jit(original.apply_smooth)
    compiled = gpu.compile_kernel(kernel.py_func, **kernel.options)
    assert compiled.dispatcher.extensions[0] is gpu.DUAL_ARGUMENTS
    arr = dual_array_type(types.float64, 1, 2)
    ptx, _ = numba_cuda.compile_ptx(
        gpu.prepare_function(kernel.py_func, 2), (arr, arr, types.float64), cc=offline_ptx)
    assert ".entry" in ptx
