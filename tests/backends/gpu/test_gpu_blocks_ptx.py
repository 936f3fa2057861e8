"""The GPU backend's dual versions of block-level kernels, checked offline by compiling to PTX.

Every kernel of ``block_kernels.py`` compiles for lanes 1 and 8 (float32 ones as float32);
a float tile becomes two ``.shared`` allocations (values, then N lanes of partials), one
pair per call site, also for tiles of the same shape and dtype; dynamic shared memory is
carved out of the one extern buffer and the launch asks for (1 + N) times the user's
bytes; a dual shuffle moves the value and every lane; the grid-sync kernel is marked
cooperative; tiles that no longer fit 48 KB are refused with the tile, its size and the
chunk_size that fits. Where ``ptxas`` is installed the PTX is also assembled for sm_90.
"""
import functools
import os
import re
import shutil
import subprocess

import numba
import numpy as np
import pytest
from numba import cuda, types

import block_kernels as B
import block_kernels_extra as X
import dualgpu
from dualgpu import DualgpuError, dual_array
from dualgpu.backends.gpu import kernel as gpu
from dualgpu.backends.gpu.shared import STATIC_SHARED_LIMIT, dynamic_request
from dualgpu.compiled.arrays import dual_array_type
from dualgpu.compiled.types import dual_type

pytestmark = pytest.mark.compile

F64, F32, I64 = types.float64, types.float32, types.int64


def _signature(name, n):
    def A(ndim, dt=F64):
        return dual_array_type(dt, ndim, n)

    def D(dt=F64):
        return dual_type(dt, n)

    i32 = types.Array(types.int32, 1, "C")
    return {
        "nbody_accel_tiled": (A(2), A(1), A(2), D()),
        "kinetic_energy_partial": (A(2), A(1), A(1)),
        "kinetic_energy_dynamic_shared": (A(2), A(1), A(1)),
        "warp_sum_of_squares": (A(1), A(1)),
        "heat2d_halo_step": (A(2), A(2), D()),
        "heat2d_halo_step_f32": (A(2, F32), A(2, F32), D(F32)),
        "solve_heat_equation": (A(1), A(1), I64, D()),
        "block_jacobi_smooth": (A(1), A(1), I64, D()),
        "count_hot_cells": (A(1), D(), i32, i32),
        "neighbour_average_tiled": (A(1), A(1)),
        "nbody_accel_untiled": (A(2), A(1), A(2), D()),
        "nbody_kick_drift": (A(2), A(2), A(2), D()),
        "sum_partials": (A(1), A(1)),
        "heat2d_plain_step": (A(2), A(2), D()),
    }[name]


#: kernel name -> (tile sizes in bytes of the plain kernel, itemsize); dynamic: ()
TILES = {
    "nbody_accel_tiled": ((B.TILE * 4 * 8,), 8),
    "kinetic_energy_partial": ((B.RED_TPB * 8,), 8),
    "heat2d_halo_step": (((B.BY + 2) * (B.BX + 2) * 8,), 8),
    "heat2d_halo_step_f32": (((B.BY + 2) * (B.BX + 2) * 4,), 4),
    "block_jacobi_smooth": ((B.SMOOTH_TPB * 8,), 8),
    "neighbour_average_tiled": ((B.SMOOTH_TPB * 8,), 8),
}
KERNELS = ["nbody_accel_tiled", "kinetic_energy_partial", "kinetic_energy_dynamic_shared",
           "warp_sum_of_squares", "heat2d_halo_step", "heat2d_halo_step_f32",
           "solve_heat_equation", "block_jacobi_smooth", "count_hot_cells",
           "neighbour_average_tiled", "nbody_accel_untiled", "nbody_kick_drift", "sum_partials",
           "heat2d_plain_step"]


@pytest.fixture(autouse=True)
def _offline(offline_ptx):
    return offline_ptx


@functools.lru_cache(maxsize=None)
def _ptx(name, n):
    kernel = getattr(B, name) if hasattr(B, name) else getattr(X, name)
    ptx, _ = cuda.compile_ptx(gpu.prepare_function(kernel, n), _signature(name, n), cc=(9, 0))
    return ptx


def _shared(ptx):
    """(symbol, bytes or None for extern) of every .shared declaration."""
    out = []
    for symbol, size in re.findall(r"\.shared \.align \d+ \.b8 (\w+)\[(\d*)\]", ptx):
        out.append((symbol, int(size) if size else None))
    return out


def _body(ptx):
    return ptx.split(".entry", 1)[1]


@pytest.mark.parametrize("n", [1, 8])
@pytest.mark.parametrize("name", KERNELS)
def test_dual_block_kernel_compiles_with_dual_tiles(name, n):
    ptx = _ptx(name, n)
    assert ".entry" in ptx
    shared = _shared(ptx)
    if name in TILES:
        sizes, _ = TILES[name]
        expected = sorted(list(sizes) + [n * s for s in sizes])
        assert sorted(s for _, s in shared) == expected, shared
        for symbol, _ in shared:  # every allocation is used by the kernel
            assert symbol in _body(ptx)
    if name == "heat2d_halo_step_f32":  # float32 tiles (sizes above) and float32 stores
        assert "st.shared.f32" in ptx and "st.shared.f64" not in ptx


@pytest.mark.parametrize("n", [1, 8])
def test_dynamic_shared_memory_is_one_extern_buffer(n):
    shared = _shared(_ptx("kinetic_energy_dynamic_shared", n))
    assert shared and all(size is None for _, size in shared)
    assert "%dynamic_smem_size" in _ptx("kinetic_energy_dynamic_shared", n)


@pytest.mark.parametrize("n", [1, 8])
def test_dual_shuffle_moves_value_and_every_lane(n):
    ptx = _ptx("warp_sum_of_squares", n)
    # one shfl_down_sync call site in the loop (which LLVM may unroll); every shuffle of a
    # float64 dual moves the value and the n lanes, each as two 32-bit halves
    count = len(re.findall(r"shfl\.sync\.down\.b32", ptx))
    assert count > 0 and count % (2 * (1 + n)) == 0


@pytest.mark.parametrize("n", [1, 8])
def test_grid_sync_dual_kernel_is_cooperative(n):
    from numba.cuda.compiler import compile_cuda

    ptx = _ptx("solve_heat_equation", n)
    assert "cudaCGSynchronize" in ptx
    copy = gpu.prepare_function(B.solve_heat_equation, n)
    result = compile_cuda(copy, None, _signature("solve_heat_equation", n), cc=(9, 0))
    assert result.library.use_cooperative  # numba launches it with a cooperative launch


def test_two_tiles_of_one_shape_are_distinct_allocations():
    """Four float64 tiles of 8 (two on one line): eight .shared allocations, all used."""
    n = 2
    t = dual_array_type(F64, 1, n)
    ptx, _ = cuda.compile_ptx(gpu.prepare_function(X.two_tiles, n), (t, t), cc=(9, 0))
    shared = _shared(ptx)
    symbols = {symbol for symbol, _ in shared}
    assert len(symbols) == 8
    assert sorted(size for _, size in shared) == [64] * 4 + [128] * 4
    body = _body(ptx)
    assert all(re.search(rf"\b{symbol}\b", body) for symbol in symbols)


@pytest.mark.parametrize("n", [1, 8])
def test_extra_kernels_compile(n):
    t = dual_array_type(F64, 1, n)
    t32 = dual_array_type(F32, 1, n)
    d = dual_type(F64, n)
    cases = [(X.dynamic_two_dtypes, (t32, t32)), (X.warp_shuffles, (t,) * 5),
             (X.warp_norm, (t, t, d)), (X.casts, (t, t, d)),
             (X.casts, (t32, t32, dual_type(F32, n))),
             (X.row_broadcast, (t, dual_array_type(F64, 2, n), d)), (X.relax, (t, t, d)),
             (X.imported_names, (t, t, types.Array(types.int64, 1, "C")))]
    for kernel, signature in cases:
        ptx, _ = cuda.compile_ptx(gpu.prepare_function(kernel, n), signature, cc=(9, 0))
        assert ".entry" in ptx


def test_float32_casts_keep_float32_lanes():
    t32 = dual_array_type(F32, 1, 4)
    ptx, _ = cuda.compile_ptx(gpu.prepare_function(X.casts, 4), (t32, t32, dual_type(F32, 4)),
                              cc=(9, 0))
    assert "st.global.f32" in ptx  # out is float32: values and lanes stored as float32


# --- the launch asks for (1 + N) times the dynamic shared memory -----------------------------

class _Recorder:
    def __init__(self):
        self.configs = []

    def __getitem__(self, config):
        self.configs.append(config)
        return lambda *args: None


@pytest.mark.parametrize("sharedmem,lanes,expected", [(128, 8, 9 * 128), (12, 2, 3 * 16),
                                                      (128, 0, 128), (0, 8, 0)])
def test_dual_launch_asks_for_one_region_per_lane(monkeypatch, sharedmem, lanes, expected):
    assert dynamic_request(sharedmem, lanes) == expected
    recorder = _Recorder()
    kernel = gpu.GpuKernel(B.kinetic_energy_dynamic_shared.py_func)
    monkeypatch.setattr(kernel, "dispatcher_for", lambda n: recorder)
    vel = np.ones((16, 3))
    args = ([dual_array(vel, lanes=lanes), dual_array(np.ones(16), lanes=lanes),
             dual_array(np.zeros(1), lanes=lanes)] if lanes else [vel, np.ones(16), np.zeros(1)])
    kernel.launch((1,), (16,), 0, sharedmem, args)
    assert recorder.configs == [((1,), (16,), 0, expected)]


class _FakeKernel:
    """numba's compiled kernel as the GPU-only launch checks see it."""

    def __init__(self, cooperative_blocks=64, optin=227 * 1024, static=0):
        from types import SimpleNamespace

        self.cooperative_blocks = cooperative_blocks
        device = SimpleNamespace(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN=optin, id=0)
        cufunc = SimpleNamespace(device=device, attrs=SimpleNamespace(shared=static), handle=7)
        self._codelibrary = SimpleNamespace(get_cufunc=lambda: cufunc)

    def max_cooperative_grid_blocks(self, blockdim, dynsmemsize=0):
        return self.cooperative_blocks


def _laplace_dual_args(n, lanes):
    return [dual_array(np.ones(n), lanes=lanes), dual_array(np.zeros(n), lanes=lanes), 2,
            dualgpu.Dual(0.25, np.zeros(lanes))]


def test_dual_grid_sync_launch_too_large_for_the_gpu_is_refused(monkeypatch):
    recorder = _Recorder()
    kernel = gpu.GpuKernel(B.solve_heat_equation.py_func)
    monkeypatch.setattr(kernel, "dispatcher_for", lambda n: recorder)
    monkeypatch.setattr(gpu, "_compiled", lambda dispatcher, args: _FakeKernel(3))
    assert kernel.grid_group
    kernel.launch((3,), (256,), 0, 0, _laplace_dual_args(700, 8))  # 3 blocks fit
    with pytest.raises(DualgpuError, match=r"at most 3 blocks of 256 threads.*has 4.*chunk_size"):
        kernel.launch((4,), (256,), 0, 0, _laplace_dual_args(1001, 8))
    assert len(recorder.configs) == 1


def test_dual_dynamic_shared_past_48_kb_opts_in_or_is_refused(monkeypatch):
    from numba.cuda.cudadrv import driver

    calls = []

    class FakeDriver:
        def cuKernelSetAttribute(self, attribute, value, handle, device):
            calls.append((value, handle))

    monkeypatch.setattr(driver, "driver", FakeDriver())
    recorder = _Recorder()
    kernel = gpu.GpuKernel(B.kinetic_energy_dynamic_shared.py_func)
    monkeypatch.setattr(kernel, "dispatcher_for", lambda n: recorder)
    monkeypatch.setattr(gpu, "_compiled", lambda d, a: _FakeKernel(optin=100 * 1024))
    vel = dual_array(np.ones((1024, 3)), lanes=8)
    args = [vel, dual_array(np.ones(1024), lanes=8), dual_array(np.zeros(1), lanes=8)]
    kernel.launch((1,), (1024,), 0, 8 * 1024, args)  # 9 x 8 KB = 72 KB: opt in
    assert calls == [(9 * 8192, 7)] and recorder.configs[-1][3] == 9 * 8192
    with pytest.raises(DualgpuError,
                       match=r"asks for 147456 bytes .* 102400 bytes .* Use chunk_size=5 or less"):
        kernel.launch((1,), (1024,), 0, 16 * 1024, args)  # 144 KB > 100 KB: 6 x 16 KB fit


# --- tiles that no longer fit ---------------------------------------------------------------

BIG = 32


@cuda.jit
def big_tile(u, out):
    tile = cuda.shared.array((BIG, BIG), numba.float64)
    i, j = cuda.grid(2)
    if i < BIG and j < BIG:
        tile[i, j] = u[i, j]
    cuda.syncthreads()
    if i < BIG and j < BIG:
        out[i, j] = tile[j, i]


def test_static_tiles_past_48_kb_are_refused_with_the_fix():
    plain = BIG * BIG * 8  # 8 KB: 5 lanes fit (6 x 8 KB = 48 KB), 8 do not
    assert 6 * plain <= STATIC_SHARED_LIMIT < 9 * plain
    gpu.prepare_function(big_tile, 5)  # fits
    with pytest.raises(DualgpuError) as info:
        gpu.prepare_function(big_tile, 8)
    message = str(info.value)
    assert "kernel big_tile" in message
    assert "cuda.shared.array((BIG, BIG), numba.float64)" in message
    assert f"{9 * plain} bytes" in message and "chunk_size=5" in message
    assert "test_gpu_blocks_ptx.py line" in message


# --- assembled for sm_90 where ptxas is installed -------------------------------------------

def _ptxas():
    try:
        import nvidia

        for root in nvidia.__path__:
            for sub in ("cu13", "cuda_nvcc"):
                path = os.path.join(root, sub, "bin", "ptxas")
                if os.path.exists(path):
                    return path
    except ImportError:
        pass
    return shutil.which("ptxas")


@pytest.mark.skipif(_ptxas() is None,
                    reason="ptxas is not installed (pip install nvidia-cuda-nvcc)")
@pytest.mark.parametrize("name", ["nbody_accel_tiled", "kinetic_energy_dynamic_shared",
                                  "warp_sum_of_squares", "heat2d_halo_step_f32",
                                  "solve_heat_equation"])
def test_dual_ptx_assembles_for_sm90(tmp_path, name):
    source = tmp_path / f"{name}.ptx"
    source.write_text(_ptx(name, 8))
    # -c: relocatable (the grid-sync kernel calls into cudadevrt, linked at load time)
    result = subprocess.run([_ptxas(), "-arch=sm_90", "-c", "-v", str(source), "-o",
                             str(tmp_path / f"{name}.cubin")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "Used" in result.stderr and "registers" in result.stderr


@pytest.mark.parametrize("name", ["scale", "smooth", "calls_dev"])
def test_rewritten_device_functions_beside_others_compile(offline_ptx, name):
    import kernels_rewritten_devices as R

    kernel = getattr(R, name)

    def f(u):
        d = dualgpu.cuda.to_device(u)
        out = dualgpu.cuda.device_array_like(d)
        out[...] = 0.0
        kernel[1, 32](d, out)
        return out.copy_to_host()

    x = np.linspace(0.2, 0.9, 6)
    with dualgpu.using_backend("cpu"):
        J = dualgpu.jacobian(f, x)
        fd = np.stack([(f(x + 1e-6 * e) - f(x - 1e-6 * e)) / 2e-6 for e in np.eye(6)], 1)
    np.testing.assert_allclose(J, fd, rtol=1e-6, atol=1e-8)
    for lanes in (1, 8):
        t = dual_array_type(types.float64, 1, lanes)
        ptx, _ = cuda.compile_ptx(gpu.prepare_function(kernel, lanes), (t, t), cc=offline_ptx)
        assert ".entry" in ptx


def test_a_recursive_device_function_needing_a_dual_copy_is_refused(offline_ptx):
    import kernels_rewritten_devices as R

    with pytest.raises(DualgpuError, match="'countdown' calls itself"):
        gpu.prepare_function(R.recursive, 1)
