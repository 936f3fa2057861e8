"""The compiled CPU backend (dualgpu.backends.cpu.kernel) against the CUDA simulator run
in-process."""
import math
import types

import numba
import numpy as np
import pytest
from numba import cuda
from numba.cuda import simulator as sim

import kernels_for_cpu_backend as kfc
from tile_checks import launched
from kernels_for_cpu_backend import laplacian_1d
from dualgpu.backends.cpu import intrinsics as cpu_intrinsics
from dualgpu.backends.cpu import kernel as cpu
from dualgpu.backends.cpu import llvm as cpu_llvm
from dualgpu.backends.cpu import parallel as cpu_parallel
from dualgpu.backends.cpu import translation as cpu_translation
from dualgpu.backends.common.translate import device_py_func, unwrap
from dualgpu.errors import DualgpuError


# --- the reference: the same kernel on the CUDA simulator ----------------------
def _simulator_value(value, memo):
    py_func = device_py_func(value)
    if py_func is not None:
        return sim.jit(device=True)(_for_simulator(py_func, memo))
    if isinstance(value, types.ModuleType) and value.__name__ == kfc.__name__:
        clone = memo.get(value)
        if clone is None:
            clone = memo[value] = types.ModuleType(value.__name__)
            clone.__dict__.update({k: _simulator_value(v, memo) for k, v in vars(value).items()})
        return clone
    return value


def _for_simulator(py_func, memo):
    """A copy of ``py_func`` whose device functions are simulator device functions.

    The simulator cannot call real numba.cuda device dispatchers, so globals,
    closure cells and attributes of the helper module are swapped for simulator
    versions in copies; the simulator then swaps ``cuda`` in the copy's globals.
    """
    if py_func in memo:
        return memo[py_func]
    namespace = {}
    closure = None
    if py_func.__closure__:
        closure = tuple(
            types.CellType(_simulator_value(c.cell_contents, memo)) for c in py_func.__closure__
        )
    copy = types.FunctionType(
        py_func.__code__, namespace, py_func.__name__, py_func.__defaults__, closure
    )
    memo[py_func] = copy
    namespace.update({k: _simulator_value(v, memo) for k, v in py_func.__globals__.items()})
    return copy


def simulate(kernel, griddim, blockdim, *args):
    sim.jit(_for_simulator(unwrap(kernel), {}))[griddim, blockdim](*args)


def run_cpu(kernel, griddim, blockdim, *args):
    cpu.compile_kernel(kernel).launch(griddim, blockdim, args)


# --- kernels defined in this module, using device functions from another module
@cuda.jit
def heat_1d_device(u, u_new):
    i = cuda.grid(1)
    if i > 0 and i < u.shape[0] - 1:
        u_new[i] = u[i] + kfc.DIFFUSIVITY * laplacian_1d(u, i)


@cuda.jit
def write_global_x(out):
    i = kfc.global_x()
    if i < out.size:
        out[i] = i


@cuda.jit
def early_return_odd(x, out):
    i = cuda.grid(1)
    if i >= x.size:
        return
    if i % 2 == 1:
        return
    out[i] = math.exp(-x[i])


# --- correctness against the simulator --------------------------------------------
def test_heat_1d_boundary_branches(rng, launch_mode):
    u = rng.random(1000)
    expected, got = np.full_like(u, np.nan), np.full_like(u, np.nan)
    simulate(kfc.heat_1d, 4, 256, u, expected, 0.2)
    kernel = cpu.compile_kernel(kfc.heat_1d)
    kernel.launch(4, 256, (u, got, 0.2))
    np.testing.assert_allclose(got, expected, rtol=1e-14)
    assert not kernel._translation.uses_block_index
    # "if i >= n: return" is hoisted out of the launch loop
    assert (0, "bounded", launch_mode) in launched(kernel)


def test_heat_2d_boundary_branches(rng, launch_mode):
    u = rng.random((37, 21))
    expected, got = np.full_like(u, np.nan), np.full_like(u, np.nan)
    simulate(kfc.heat_2d, (5, 3), (8, 8), u, expected, 0.1)
    kernel = cpu.compile_kernel(kfc.heat_2d)
    kernel.launch((5, 3), (8, 8), (u, got, 0.1))
    np.testing.assert_allclose(got, expected, rtol=1e-14)
    # "if i < nx and j < ny:" is hoisted out of the launch loops (40 x 24 threads, 37 x 21 cells)
    assert (0, "bounded", launch_mode) in launched(kernel)


def test_3d_grid_and_every_index(launch_mode):
    shape = (5, 6, 7)
    griddim, blockdim = (2, 3, 2), (3, 2, 4)
    expected = np.full(shape, -1, dtype=np.int64)
    got = expected.copy()
    ids_expected = np.full(shape + (5,), -1, dtype=np.int64)
    ids_got = ids_expected.copy()
    simulate(kfc.indices_3d, griddim, blockdim, expected, ids_expected)
    kernel = cpu.compile_kernel(kfc.indices_3d)
    kernel.launch(griddim, blockdim, (got, ids_got))
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(ids_got, ids_expected)
    assert kernel._translation.uses_block_index
    assert (0, "blocks", launch_mode) in launched(kernel)


def test_3d_flat_grid(launch_mode):
    shape = (5, 6, 7)
    expected = np.full(shape, -1.0)
    got = expected.copy()
    simulate(kfc.fill_3d, (2, 2, 2), (4, 4, 4), expected, 0.5)
    kernel = cpu.compile_kernel(kfc.fill_3d)
    kernel.launch((2, 2, 2), (4, 4, 4), (got, 0.5))
    np.testing.assert_array_equal(got, expected)
    assert kernel._translation.inner_axis == "z"
    # its 3-D guard is hoisted: the loops run over the 5 x 6 x 7 cells, innermost over z
    assert (0, "bounded", launch_mode) in launched(kernel)


def test_innermost_loop_follows_the_contiguous_index(rng):
    assert cpu.compile_kernel(kfc.heat_2d)._translation.inner_axis == "y"
    assert cpu.compile_kernel(kfc.heat_1d)._translation.inner_axis == "x"
    kernel = cpu.compile_kernel(kfc.transpose_columns)
    assert kernel._translation.inner_axis == "x"  # out[col, row] and a[row, col] tie: x
    a = rng.random((9, 13))
    expected, got = np.zeros((13, 9)), np.zeros((13, 9))
    simulate(kfc.transpose_columns, (2, 3), (8, 4), a, expected)
    kernel.launch((2, 3), (8, 4), (a, got))
    np.testing.assert_array_equal(got, expected)


def test_grid_stride_loop(rng):
    x, y = rng.random(1000), rng.random(1000)
    expected, got = np.zeros_like(x), np.zeros_like(x)
    simulate(kfc.saxpy_grid_stride, 3, 32, 2.5, x, y, expected)
    run_cpu(kfc.saxpy_grid_stride, 3, 32, 2.5, x, y, got)
    np.testing.assert_allclose(got, expected, rtol=1e-14)
    np.testing.assert_allclose(got, 2.5 * x + y, rtol=1e-14)


def test_early_return(rng):
    x = rng.random(100)
    expected, got = np.zeros_like(x), np.zeros_like(x)
    simulate(early_return_odd, 4, 32, x, expected)
    run_cpu(early_return_odd, 4, 32, x, got)
    np.testing.assert_allclose(got, expected, rtol=1e-14)
    assert np.all(got[1::2] == 0) and np.all(got[::2] > 0)


def test_particles_inner_loop_over_all_others(rng):
    pos = rng.random((40, 2))
    expected, got = np.zeros_like(pos), np.zeros_like(pos)
    simulate(kfc.nbody_accel, 2, 32, pos, expected, 0.05)
    run_cpu(kfc.nbody_accel, 2, 32, pos, got, 0.05)
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_function_attributes_apply_from_llvmlite_048():
    # llvmlite 0.47 (numba 0.65) put add_function_attribute's attribute on the return value
    # (the module then failed LLVM's verifier); 0.48 (numba 0.66) and later on the function
    import llvmlite

    newer = tuple(int(part) for part in llvmlite.__version__.split(".")[:2]) >= (0, 48)
    assert cpu_llvm.function_attributes_apply() is newer


def test_thread_function_is_inlined_into_the_launch_loop(rng):
    # LLVM would not inline this one by itself (an inner loop, a device function);
    # dualgpu.backends.cpu.llvm.inline_every_overload makes it, through numba internals: this
    # test tells when a numba upgrade breaks that (launches would only be slower).
    if not cpu_llvm.function_attributes_apply():
        pytest.skip("this llvmlite puts a function attribute on the return value (llvmlite "
                    "0.47, numba 0.65): the cpu backend does not ask for inlining there")
    pos = rng.random((40, 2))
    kernel = cpu.compile_kernel(kfc.nbody_accel)
    kernel.launch(2, 32, (pos, np.zeros_like(pos), 0.05))
    (launcher,) = [v for k, v in kernel._launchers.items() if (k.lanes, k.base) == (0, "bounded")]
    thread = launcher.py_func.__globals__["_dg_thread"]
    (compiled,) = thread.overloads.values()
    (launcher_ir,) = launcher.inspect_llvm().values()
    assert f"@{compiled.fndesc.llvm_func_name}(" not in launcher_ir


def test_device_functions_from_another_module_nested(rng):
    u = rng.random(300) * 3 - 1.5
    expected, got = np.zeros_like(u), np.zeros_like(u)
    simulate(kfc.smooth_with_devices, 3, 128, u, expected)
    run_cpu(kfc.smooth_with_devices, 3, 128, u, got)
    np.testing.assert_allclose(got, expected, rtol=1e-14)

    expected, got = np.zeros_like(u), np.zeros_like(u)
    simulate(heat_1d_device, 3, 128, u, expected)
    run_cpu(heat_1d_device, 3, 128, u, got)
    np.testing.assert_allclose(got, expected, rtol=1e-14)


def test_device_function_reading_thread_index():
    expected, got = np.zeros(100), np.zeros(100)
    simulate(write_global_x, 4, 32, expected)
    kernel = cpu.compile_kernel(write_global_x)
    kernel.launch(4, 32, (got,))
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(got, np.arange(100))
    assert kernel._translation.uses_block_index  # inherited from the device function


def test_device_translation_cached_per_function():
    cpu.compile_kernel(kfc.smooth_with_devices)
    first = cpu_translation._DEVICE_TRANSLATIONS.get(kfc.clamp.py_func)
    cpu.compile_kernel(kfc.make_scaler(1.0, 0.0))
    assert cpu_translation._DEVICE_TRANSLATIONS.get(kfc.clamp.py_func) is first


def test_closure_kernel(rng):
    scaler = kfc.make_scaler(3.0, -1.0)
    x = rng.random(50)
    expected, got = np.zeros_like(x), np.zeros_like(x)
    simulate(scaler, 2, 32, x, expected)
    run_cpu(scaler, 2, 32, x, got)
    np.testing.assert_allclose(got, expected, rtol=1e-14)


def test_float32_kernel(rng):
    x = rng.random(200).astype(np.float32)
    expected, got = np.zeros_like(x), np.zeros_like(x)
    simulate(kfc.scale_float32, 2, 128, x, expected, 0.5)
    run_cpu(kfc.scale_float32, 2, 128, x, got, 0.5)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_local_array_scratch(rng):
    u = rng.random(100)
    expected, got = np.zeros_like(u), np.zeros_like(u)
    simulate(kfc.moving_average_local, 4, 32, u, expected)
    kernel = cpu.compile_kernel(kfc.moving_average_local)
    kernel.launch(4, 32, (u, got))
    np.testing.assert_allclose(got, expected, rtol=1e-14)
    assert kernel._translation.lanes_dependent


def test_local_array_2d_with_module_constant_shape(rng):
    x = rng.random(50)
    expected, got = np.zeros_like(x), np.zeros_like(x)
    simulate(kfc.outer_product_local, 2, 32, x, expected)
    run_cpu(kfc.outer_product_local, 2, 32, x, got)
    np.testing.assert_allclose(got, expected, rtol=1e-14)
    np.testing.assert_allclose(got, 3 * x * 3 + 2 * 3, rtol=1e-14)


def test_local_array_needs_constant_shape():
    kernel = cpu.compile_kernel(kfc.local_array_runtime_shape)
    with pytest.raises(numba.core.errors.TypingError, match="compile-time constant"):
        kernel.launch(1, 4, (np.zeros(4), 3))


def test_kernel_that_allocates_is_recompiled_with_nrt(rng):
    x = rng.random(20)
    out = np.zeros_like(x)
    kernel = cpu.compile_kernel(kfc.allocates_with_numpy)
    kernel.launch(1, 32, (x, out))
    np.testing.assert_allclose(out, x + 1.0)
    assert kernel._nrt_lanes == {0}


def test_compile_kernel_returns_cached_kernel():
    assert cpu.compile_kernel(kfc.heat_1d) is cpu.compile_kernel(kfc.heat_1d.py_func)
    assert cpu.compile_kernel(kfc.heat_1d, fastmath=True) is not cpu.compile_kernel(kfc.heat_1d)


def test_atomics_histogram_is_exact(rng, monkeypatch):
    monkeypatch.setattr(cpu_parallel, "FORCE", True)
    monkeypatch.setattr(cpu_parallel, "available_threads", lambda: 2)
    values = rng.random(5000)
    bins = np.zeros(10, dtype=np.int64)
    firsts = np.full(11, -1, dtype=np.int64)
    kernel = cpu.compile_kernel(kfc.histogram)
    assert kernel.uses_atomics
    kernel.launch(40, 128, (values, bins, 0.0, 0.1, firsts))
    np.testing.assert_array_equal(bins, np.histogram(values, bins=10, range=(0.0, 1.0))[0])
    # atomic.add returned the old count: exactly one thread per bin saw 0, and it is
    # the first index in that bin because atomic kernels run serially.
    which = np.minimum((values / 0.1).astype(int), 9)
    for b in range(10):
        assert firsts[b] == np.flatnonzero(which == b)[0]
    assert firsts[10] == values.size - 1  # atomic.max
    # the launch was serial even though parallel launches were forced
    assert launched(kernel) == {(0, "flat", "serial")}

    sim_bins = np.zeros(10, dtype=np.int64)
    simulate(kfc.histogram, 40, 128, values, sim_bins, 0.0, 0.1, np.full(11, -1, dtype=np.int64))
    np.testing.assert_array_equal(bins, sim_bins)


def test_atomic_ops_return_old_values():
    a = np.array([5, 7, 0, 3, 10], dtype=np.int64)
    assert cpu_intrinsics._dg_atomic_add(a, 0, 2) == 5 and a[0] == 7
    assert cpu_intrinsics._dg_atomic_sub(a, 1, 2) == 7 and a[1] == 5
    assert cpu_intrinsics._dg_atomic_max(a, 2, 4) == 0 and a[2] == 4
    assert cpu_intrinsics._dg_atomic_min(a, 3, 1) == 3 and a[3] == 1
    assert cpu_intrinsics._dg_atomic_exch(a, 4, 9) == 10 and a[4] == 9
    assert cpu_intrinsics._dg_atomic_inc(a, 4, 9) == 9 and a[4] == 0
    assert cpu_intrinsics._dg_atomic_dec(a, 4, 3) == 0 and a[4] == 3
    assert cpu_intrinsics._dg_atomic_cas(a, 4, 3, 8) == 3 and a[4] == 8
    assert cpu_intrinsics._dg_atomic_cas(a, 4, 3, 1) == 8 and a[4] == 8
    f = np.array([np.nan, 1.0])
    assert np.isnan(cpu_intrinsics._dg_atomic_nanmax(f, 0, 2.0)) and f[0] == 2.0


def test_laneid_and_warpsize():
    got = np.zeros((100, 2), dtype=np.int64)
    run_cpu(kfc.lanes_and_warps, 2, 64, got)
    np.testing.assert_array_equal(got[:, 0], np.arange(100) % 64 % 32)
    assert np.all(got[:, 1] == 32)


@pytest.mark.parametrize("kernel", [kfc.via_alias, kfc.via_names, kfc.via_drop_in])
def test_other_spellings_of_cuda(kernel):
    got = np.zeros(70)
    run_cpu(kernel, 3, 32, got)
    i = np.arange(70)
    tx, bx = i % 32, i // 32
    expected = {
        "via_alias": tx + 1000 * bx,
        "via_names": tx,
        "via_drop_in": tx + 2 * i,
    }[kernel.__name__]
    np.testing.assert_array_equal(got, expected)


def test_plain_function_and_dispatcher_give_same_result(rng):
    u = rng.random(64)
    a, b = np.zeros_like(u), np.zeros_like(u)
    run_cpu(kfc.heat_1d, 1, 64, u, a, 0.3)
    run_cpu(kfc.heat_1d.py_func, 1, 64, u, b, 0.3)
    np.testing.assert_array_equal(a, b)


def test_launch_reuses_compiled_code(rng):
    kernel = cpu.compile_kernel(kfc.saxpy_grid_stride)
    x, out = rng.random(100), np.zeros(100)
    kernel[1, 128](2.0, x, x, out)
    launchers = dict(kernel._launchers)
    for _ in range(3):
        kernel.launch((1,), (128,), (2.0, x, x, out))
    assert kernel._launchers == launchers
    (launcher,) = launchers.values()
    assert len(launcher.signatures) == 1


# --- dual mode (needs the lead's compiled DualArray) ----------------------------
def _dual(values, lanes, rng):
    from dualgpu import dual_array

    return dual_array(values, rng.random((lanes,) + values.shape))


def test_dual_arrays_pass_through(rng):
    pytest.importorskip("dualgpu.compiled.arrays")
    u = _dual(rng.random(50), 3, rng)
    out = _dual(np.zeros(50), 3, rng)
    cpu.compile_kernel(kfc.heat_1d).launch(1, 64, (u, out, 0.2))
    v, p = u.values, u.partials
    np.testing.assert_allclose(out.values[1:-1], v[1:-1] + 0.2 * (v[:-2] - 2 * v[1:-1] + v[2:]))
    np.testing.assert_allclose(
        out.partials[:, 1:-1], p[:, 1:-1] + 0.2 * (p[:, :-2] - 2 * p[:, 1:-1] + p[:, 2:])
    )
    np.testing.assert_allclose(out.partials[:, 0], p[:, 0])


def test_dual_local_array(rng):
    pytest.importorskip("dualgpu.compiled.arrays")
    u = _dual(rng.random(40), 2, rng)
    out = _dual(np.zeros(40), 2, rng)
    kernel = cpu.compile_kernel(kfc.moving_average_local)
    kernel.launch(2, 32, (u, out))
    w = kfc.WEIGHTS
    for x, y in ((u.values, out.values), (u.partials, out.partials)):
        np.testing.assert_allclose(
            y[..., 1:-1], w[0] * x[..., :-2] + w[1] * x[..., 1:-1] + w[2] * x[..., 2:]
        )
    # plain launches of the same kernel still work (one translation per lanes value)
    plain_u, plain_out = rng.random(40), np.zeros(40)
    kernel.launch(2, 32, (plain_u, plain_out))
    assert {lanes for lanes, _, _ in launched(kernel)} == {0, 2}


def test_lanes_must_agree():
    class Fake:
        def __init__(self, lanes):
            self.lanes = lanes

    assert cpu._lanes_of((np.zeros(3), Fake(4), 1.0, Fake(4)), "k") == 4
    with pytest.raises(DualgpuError, match="different numbers of lanes"):
        cpu._lanes_of((Fake(4), Fake(2)), "k")


# --- errors -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "kernel, text",
    [
        (kfc.uses_const_array,
         r"kernel 'uses_const_array' uses constant memory .* \('cuda.const.array'\)"),
        (
            kfc.calls_device_with_const_array,
            r"device function 'device_uses_const_array' \(called from kernel "
            r"'calls_device_with_const_array'\) uses constant memory",
        ),
    ],
)
def test_unsupported_features_are_refused(kernel, text):
    with pytest.raises(DualgpuError, match=text) as info:
        cpu.compile_kernel(kernel)
    message = str(info.value)
    assert "cpu backend" in message and "'cudasim' backend" in message


def test_constant_memory_reads_the_host_array():
    x, table = np.zeros(4), np.array([2.5, 1.0, 0.0])
    cpu.compile_kernel(kfc.uses_const).launch(1, 4, (x, table))
    np.testing.assert_array_equal(x, np.full(4, 2.5))


def test_failed_device_translation_is_not_cached():
    for _ in range(2):
        with pytest.raises(DualgpuError, match="device function 'device_uses_const_array'"):
            cpu.compile_kernel(kfc.calls_device_with_const_array)
    assert cpu_translation._DEVICE_TRANSLATIONS.get(kfc.device_uses_const_array.py_func) is None


def test_global_defined_after_compile_is_found_at_first_launch(monkeypatch):
    monkeypatch.delattr(kfc, "late_helper", raising=False)
    kernel = cpu.CpuKernel(kfc.calls_late_helper)
    monkeypatch.setattr(kfc, "late_helper", kfc.double_it, raising=False)
    x = np.arange(5.0)
    kernel.launch(1, 8, (x,))
    np.testing.assert_array_equal(x, 2 * np.arange(5.0))


def test_unknown_cuda_attribute_is_named():
    with pytest.raises(DualgpuError, match=r"kernel 'uses_nanosleep' uses cuda.nanosleep, "
                       r"which the cpu backend does not know"):
        cpu.compile_kernel(kfc.uses_nanosleep)


def test_source_not_available():
    namespace = {"cuda": cuda}
    exec("def typed_at_prompt(x):\n    x[cuda.grid(1)] = 1.0\n", namespace)
    with pytest.raises(DualgpuError, match=r"source is not available.*in a\s+file"):
        cpu.compile_kernel(namespace["typed_at_prompt"])


def test_device_function_is_not_a_kernel():
    with pytest.raises(DualgpuError, match="is a device function"):
        cpu.compile_kernel(kfc.clamp)


@pytest.mark.parametrize(
    "griddim, blockdim, what",
    [
        (0, 32, "griddim"),
        (-1, 32, "griddim"),
        ((1, 2, 3, 4), 32, "griddim"),
        (1.5, 32, "griddim"),
        (1, (32, 0), "blockdim"),
        (1, "32", "blockdim"),
    ],
)
def test_bad_launch_configuration(griddim, blockdim, what):
    kernel = cpu.compile_kernel(kfc.heat_1d)
    with pytest.raises(DualgpuError, match=f"{what} must be a positive int or a tuple of 1 to 3"):
        kernel.launch(griddim, blockdim, (np.zeros(4), np.zeros(4), 0.1))


def test_too_many_threads_per_block():
    kernel = cpu.compile_kernel(kfc.heat_1d)
    with pytest.raises(DualgpuError, match="at most 1024 per block"):
        kernel.launch(1, (64, 32), (np.zeros(4), np.zeros(4), 0.1))


def test_device_arrays_are_refused_clearly():
    device_array = sim.to_device(np.zeros(4))
    kernel = cpu.compile_kernel(kfc.heat_1d)
    with pytest.raises(DualgpuError, match="runs on host arrays, but u_new is a device array"):
        kernel.launch(1, 32, (np.zeros(4), device_array, 0.1))


def test_wrong_number_of_arguments():
    kernel = cpu.compile_kernel(kfc.heat_1d)
    with pytest.raises(DualgpuError, match=r"takes 3 arguments \(u, u_new, alpha\); got 2"):
        kernel.launch(1, 32, (np.zeros(4), np.zeros(4)))


def bad_grid_argument(x, n):
    i = cuda.grid(n)
    x[i] = 1.0


def test_grid_needs_literal():
    with pytest.raises(DualgpuError, match=r"needs a literal 1, 2 or 3"):
        cpu.compile_kernel(bad_grid_argument)


# --- bounds guards hoisted out of the launch loop ----------------------------------
_HOISTED = [
    (kfc.guard_lt_shape, ()),
    (kfc.guard_size_return, ()),
    (kfc.guard_len_flipped, ()),
    (kfc.guard_scalar_param, (37,)),
    (kfc.guard_scalar_param, (np.int32(-3),)),
    (kfc.guard_scalar_param, (np.int64(100),)),
    (kfc.guard_le_last, ()),
    (kfc.guard_gt_return_global, ()),
    (kfc.heat_1d, (0.2,)),
]


@pytest.mark.parametrize("kernel, extra", _HOISTED, ids=lambda v: getattr(v, "__name__", None))
@pytest.mark.parametrize("n, griddim, blockdim", [(100, 4, 32), (100, 2, 32), (64, 2, 32)])
def test_hoisted_guard_matches_simulator(kernel, extra, n, griddim, blockdim, rng, launch_mode):
    u = rng.random(n) + 0.5
    expected, got = np.full_like(u, np.nan), np.full_like(u, np.nan)
    simulate(kernel, griddim, blockdim, u, expected, *extra)
    compiled = cpu.compile_kernel(kernel)
    assert compiled._translation.guard is not None
    compiled.launch(griddim, blockdim, (u, got, *extra))
    np.testing.assert_array_equal(got, expected)
    assert (0, "bounded", launch_mode) in launched(compiled)


def test_hoisted_guard_over_a_2d_launch(rng):
    # a 1-D kernel launched with several y rows: every row runs the same threads
    u = rng.random(50)
    expected, got = np.full_like(u, np.nan), np.full_like(u, np.nan)
    simulate(kfc.guard_size_return, (2, 3), (32, 2), u, expected)
    run_cpu(kfc.guard_size_return, (2, 3), (32, 2), u, got)
    np.testing.assert_array_equal(got, expected)


def test_hoisted_guard_float_bound_uses_the_guarded_launcher(rng):
    # i < 10.5 is not an integer bound: the ordinary launcher checks it per thread
    u = rng.random(40)
    expected, got = np.full_like(u, np.nan), np.full_like(u, np.nan)
    simulate(kfc.guard_scalar_param, 2, 32, u, expected, 10.5)
    kernel = cpu.CpuKernel(unwrap(kfc.guard_scalar_param))  # a fresh one, not the cached one
    kernel.launch(2, 32, (u, got, 10.5))
    np.testing.assert_array_equal(got, expected)
    assert np.isnan(got[11]) and not np.isnan(got[10])
    assert launched(kernel) == {(0, "flat", "serial")}
    kernel.launch(2, 32, (u, got, True))  # nor is a bool
    assert launched(kernel) == {(0, "flat", "serial")}


def test_hoisted_guard_with_dual_arrays(rng):
    pytest.importorskip("dualgpu.compiled.arrays")
    u = _dual(rng.random(50), 2, rng)
    out = _dual(np.zeros(50), 2, rng)
    kernel = cpu.compile_kernel(kfc.guard_len_flipped)
    kernel.launch(1, 64, (u, out))
    np.testing.assert_allclose(out.values, u.values ** 2)
    np.testing.assert_allclose(out.partials, 2 * u.values * u.partials)
    assert (2, "bounded", "serial") in launched(kernel)


@pytest.mark.parametrize(
    "kernel",
    [kfc.guard_from_written_array, kfc.guard_index_reassigned, kfc.guard_then_more,
     kfc.guard_after_device_call, kfc.saxpy_grid_stride, kfc.moving_average_local,
     kfc.histogram, kfc.indices_3d, heat_1d_device],
    ids=lambda k: unwrap(k).__name__,
)
def test_guards_that_must_not_be_hoisted(kernel):
    assert cpu.compile_kernel(kernel)._translation.guard is None


def test_guard_from_a_written_array_keeps_thread_order_semantics():
    # each thread lowers the limit the next one sees: hoisting it would write all 10
    out, limit = np.full(32, -1.0), np.array([10])
    kernel = cpu.compile_kernel(kfc.guard_from_written_array)
    kernel.launch(1, 32, (out, limit))
    np.testing.assert_array_equal(out[:5], np.arange(5.0))
    assert np.all(out[5:] == -1) and limit[0] == 5
    assert launched(kernel) == {(0, "flat", "serial")}


@pytest.mark.parametrize("kernel", [kfc.guard_index_reassigned, kfc.guard_then_more])
def test_unhoisted_guards_match_simulator(kernel, rng):
    u = rng.random(60)
    expected, got = np.full_like(u, np.nan), np.full_like(u, np.nan)
    extra = (np.zeros(40),) if kernel is kfc.guard_then_more else ()
    extra_got = tuple(np.zeros(40) for _ in extra)
    simulate(kernel, 3, 32, u, expected, *extra)
    run_cpu(kernel, 3, 32, u, got, *extra_got)
    np.testing.assert_array_equal(got, expected)
    for a, b in zip(extra, extra_got):
        np.testing.assert_array_equal(a, b)


def test_bound_that_does_not_compile_falls_back(rng, monkeypatch):
    kernel = cpu.CpuKernel(unwrap(kfc.guard_lt_shape))  # a fresh one, not the cached one
    monkeypatch.setattr(kernel._translation.guard, "bound", "    _dg_mx = u.no_such_attribute\n")
    u, got = rng.random(40), np.zeros(40)
    kernel.launch(2, 32, (u, got))
    expected = np.zeros(40)
    simulate(kfc.guard_lt_shape, 2, 32, u, expected)
    np.testing.assert_array_equal(got, expected)
    assert kernel._translation.guard is None
    assert launched(kernel) == {(0, "flat", "serial")}
