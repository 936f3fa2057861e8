"""Lane tiles on the cpu backend: a launch with L lanes runs tiles of N lanes in one call.

Every tiled launch must give, bit for bit, what separate launches of each N-lane slice
give (the arithmetic is the same), for kernels that update in place, read what they
write, use atomics, scratch arrays and device functions; serial and parallel launchers
must agree too.
"""
import copy
import os

import numpy as np
import pytest

import kernels_tiles as kt
from tile_checks import assert_slice_equal, lane_slice
from tile_checks import check_against_slices as _check_against_slices
from tile_checks import launch_tiled as _launch
from tile_checks import random_dual as _dual
from dualgpu.core import _context
from dualgpu.backends.common import access as _access
from dualgpu.backends.cpu import kernel as cpu
from dualgpu.backends.cpu import parallel as cpu_parallel
from dualgpu.backends.cpu import tiles as cpu_tiles
from dualgpu.core.dualarray import DualArray


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_in_place_update_restores_values_between_tiles(rng, dtype, launch_mode):
    x, v = _dual(rng, 50, 24, dtype), _dual(rng, 50, 24, dtype)
    _check_against_slices(kt.axpy_in_place, 2, 32, (x, v, dtype(0.1)), tile=8, launches=3)
    spec = next(iter(cpu.compile_kernel(kt.axpy_in_place)._launchers))
    assert spec.restore == (0,)  # x is read and written; v is only read


def test_kernel_that_reads_what_it_writes(rng, launch_mode):
    x, out = _dual(rng, 40, 16), _dual(rng, 40, 16)
    _check_against_slices(kt.prefix_sum, 2, 32, (x, out), tile=8)


def test_atomics_on_a_plain_counter(rng, launch_mode):
    x, out = _dual(rng, 64, 24), _dual(rng, 64, 24)
    counter = np.zeros(1, np.int64)
    _check_against_slices(kt.count_and_scale, 2, 32, (x, out, counter), tile=8)
    assert counter[0] == 2 * 64  # two launches, every tile started from the same count


def test_dual_atomics_accumulate(rng, launch_mode):
    x, acc = _dual(rng, 30, 16), _dual(rng, 1, 16)
    _check_against_slices(kt.accumulate, 1, 32, (x, acc), tile=4)


def test_local_array_and_device_function(rng, launch_mode):
    x, out = _dual(rng, 37, 24), _dual(rng, 37, 24)
    _check_against_slices(kt.smooth_with_scratch, 2, 32, (x, out), tile=8)


def test_device_function_that_writes(rng, launch_mode):
    x, amounts = _dual(rng, 33, 12), _dual(rng, 33, 12)
    _check_against_slices(kt.bump_through_device, 2, 32, (x, amounts), tile=4)
    spec = next(iter(cpu.compile_kernel(kt.bump_through_device)._launchers))
    assert spec.restore == (0,)


def test_row_view_written_through_a_local_name(rng, launch_mode):
    a = _dual(rng, (6, 5), 16)
    _check_against_slices(kt.rows_in_place, 1, 8, (a, 1.5), tile=8)


def test_aliased_arguments_are_restored(rng, launch_mode):
    u = _dual(rng, 20, 16)
    _check_against_slices(kt.write_through_alias, 1, 32, (u, u), tile=8)
    spec = next(iter(cpu.compile_kernel(kt.write_through_alias)._launchers))
    assert spec.restore == (1,)  # dst is only written, but it is src


def test_two_d_launch(rng, launch_mode):
    u = _dual(rng, (9, 7), 24)
    _check_against_slices(kt.two_d_in_place, (3, 2), (4, 4), (u, 0.9), tile=8)


@pytest.mark.parametrize("lanes, tile, expected", [
    (24, None, (8, 3)),   # the default tile divides
    (20, None, (5, 4)),   # the largest divisor not above 8
    (13, None, (13, 1)),  # no good divisor: one tile
    (12, 3, (3, 4)),      # the driver's tile
    (12, 5, (6, 2)),      # a driver tile that does not divide: the kernel's own rule
])
def test_tile_choice(rng, lanes, tile, expected):
    kernel = cpu.compile_kernel(kt.axpy_in_place)
    args = (_dual(rng, 4, lanes), _dual(rng, 4, lanes), 0.1)
    with _context.dual_allocation(lanes, tile=tile or 0):
        got = kernel._tiles(lanes, args, ("a", "a", ""))
    assert got == expected


def test_tiles_that_do_not_divide_give_the_same_answer(rng):
    x, v = _dual(rng, 50, 20), _dual(rng, 50, 20)
    _check_against_slices(kt.axpy_in_place, 2, 32, (x, v, 0.3), tile=5)


def test_parallel_and_serial_launchers_agree(rng, monkeypatch):
    monkeypatch.setattr(cpu_parallel, "available_threads", lambda: 2)
    x, out = _dual(rng, 3000, 32), _dual(rng, 3000, 32)
    serial_out = copy.deepcopy(out)
    with cpu_parallel.serial_launches():
        _launch(kt.smooth_with_scratch, 12, 256, (x, serial_out), 8)
    monkeypatch.setattr(cpu_parallel, "FORCE", True)
    for _ in range(3):
        _launch(kt.smooth_with_scratch, 12, 256, (x, out), 8)
        np.testing.assert_array_equal(out.values, serial_out.values)
        np.testing.assert_array_equal(out.partials, serial_out.partials)
    assert any(s.mode == "pieces" for s in cpu.compile_kernel(kt.smooth_with_scratch)._launchers)


def test_max_lanes_agrees_with_the_compiled_dual():
    from dualgpu.compiled.types import MAX_LANES

    assert cpu_tiles.MAX_LANES == MAX_LANES


# --- which arrays a kernel reads and writes -------------------------------------
def _summary(kernel):
    translation = cpu.compile_kernel(kernel)._translation
    return cpu_tiles.access_summary(translation, set())


@pytest.mark.parametrize("kernel, ndims, expected", [
    (kt.axpy_in_place, (1, 1, 0), ((True, True), (True, False), (False, False))),
    (kt.prefix_sum, (1, 1), ((True, False), (True, True))),
    (kt.count_and_scale, (1, 1, 1), ((True, False), (False, True), (True, True))),
    (kt.bump_through_device, (1, 1), ((True, True), (True, False))),
    (kt.rows_in_place, (2, 0), ((True, True), (False, False))),
    (kt.write_through_alias, (1, 1), ((True, False), (False, True))),
])
def test_access_summary(kernel, ndims, expected):
    assert _summary(kernel).resolve(ndims)[:len(ndims)] == expected


def test_access_summary_is_conservative_when_unsure():
    import ast

    source = """
def k(a, b, c, d):
    t = (a, b)          # a and b escape
    v = c[0]            # a row of a 2-D c escapes: it may be written through v
    v[1] = 2.0
    d[0] = unknown(d)   # d passed to something that is not a device function
"""
    tree = ast.parse(source).body[0]
    flags = _access.analyse(tree, {}).resolve((1, 1, 2, 1))
    assert flags == (_access.BOTH,) * 4
    # with c 1-D, c[0] is an element: read only
    assert _access.analyse(tree, {}).resolve((1, 1, 1, 1))[2] == (True, False)


# --- the driver: many tiles per run of f ------------------------------------------
def _jacobian(f, args, argnums, chunk_size):
    from dualgpu.autodiff.api import jacobian

    return jacobian(f, *args, argnums=argnums, chunk_size=chunk_size, progress=False)


def _flat(result):
    parts = result if isinstance(result, tuple) else (result,)
    return [np.asarray(p) for p in parts]


#: four of the seven simulations by default (1-D and 2-D stencils, several kernels per step, two
#: fields); DUALGPU_TEST_CASES=all runs all seven
BATCHED_SIMULATIONS = ["heat1d", "heat2d", "pendulums", "gray_scott"] + (
    ["wave2d", "nbody", "mass_spring"]
    if os.environ.get("DUALGPU_TEST_CASES", "").strip().lower() == "all" else [])


@pytest.mark.parametrize("name", BATCHED_SIMULATIONS)
def test_batched_jacobian_equals_one_tile_per_run(name, monkeypatch):
    import dualgpu
    from integration.test_simulations_jacobian import CASES

    f, args, argnums = CASES[name]()
    with dualgpu.using_backend("cpu"):
        batched = _jacobian(f, args, argnums, chunk_size=4)
        monkeypatch.setattr(dualgpu.core.lanes, "BATCH_BYTES", 1)  # one tile per run, as before
        single = _jacobian(f, args, argnums, chunk_size=4)
    for got, want in zip(_flat(batched), _flat(single)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype, rtol", [(np.float32, 2e-3), (np.float64, 1e-7)])
def test_batched_jacobian_of_several_kernels_per_step_vs_central_differences(dtype, rtol,
                                                                              monkeypatch):
    import dualgpu
    from dualgpu.testing import check_jacobian
    from simulations import pendulums

    monkeypatch.setattr(cpu_parallel, "FORCE", True)
    monkeypatch.setattr(cpu_parallel, "available_threads", lambda: 2)
    theta0, omega0 = pendulums.default_initial_state(40)

    def final(theta, damping):
        return pendulums.simulate(theta, omega0.astype(dtype), n_steps=6, damping=damping,
                                  dt=dtype(0.05))[0]

    with dualgpu.using_backend("cpu"):
        error = check_jacobian(final, theta0.astype(dtype), dtype(0.5), argnums=(0, 1),
                               chunk_size=8, n_directions=2, rtol=rtol)
    assert error < rtol


# --- the GPU backend's tiles (host loop), checked with the cpu backend standing in -----------
class _CpuStandIn:
    """A GpuKernel's dispatcher_for(lanes), running the kernel on the cpu backend instead."""

    def __init__(self, py_func, calls):
        self.py_func = py_func
        self.calls = calls

    def __call__(self, lanes):
        return self

    def __getitem__(self, config):
        griddim, blockdim = config[0], config[1]

        def launch(*args):
            self.calls.append(max((a.lanes for a in args if isinstance(a, DualArray)), default=0))
            cpu.compile_kernel(self.py_func).launch(griddim, blockdim, args)
        return launch


@pytest.mark.parametrize("kernel, make, restored", [
    (kt.axpy_in_place, lambda rng: (_dual(rng, 40, 24), _dual(rng, 40, 24), 0.1), [0]),
    (kt.count_and_scale, lambda rng: (_dual(rng, 40, 24), _dual(rng, 40, 24),
                                      np.zeros(1, np.int64)), [2]),
    (kt.prefix_sum, lambda rng: (_dual(rng, 40, 24), _dual(rng, 40, 24)), [1]),
])
def test_gpu_tiles_run_one_launch_per_tile_with_restores(kernel, make, restored, rng,
                                                         monkeypatch):
    from dualgpu.backends.gpu import kernel as gpu
    from dualgpu.backends.common import tiles as gpu_tiles

    gpu_kernel = gpu.GpuKernel.__new__(gpu.GpuKernel)  # no numba.cuda dispatcher needed
    gpu_kernel.py_func = kernel.py_func
    gpu_kernel._grid_group = False  # no grid sync in these kernels
    calls = []
    monkeypatch.setattr(gpu_kernel, "dispatcher_for", _CpuStandIn(kernel.py_func, calls),
                        raising=False)
    args = make(rng)
    assert gpu_tiles.restore_positions(kernel.py_func, args) == restored
    reference = copy.deepcopy(args)
    with _context.dual_allocation(24, tile=8):
        gpu_kernel.launch(1, 64, 0, 0, args)
    assert calls == [8, 8, 8]
    for t in range(3):
        memo = {}
        sliced = [lane_slice(a, 8 * t, 8 * (t + 1), memo) for a in reference]
        cpu.compile_kernel(kernel).launch(1, 64, tuple(sliced))
        assert_slice_equal(args, sliced, 8 * t, 8 * (t + 1))


def test_gpu_source_analysis_matches_the_cpu_translation():
    from dualgpu.backends.common import access as _access

    for kernel, ndims in ((kt.axpy_in_place, (1, 1, 0)), (kt.count_and_scale, (1, 1, 1)),
                          (kt.bump_through_device, (1, 1)), (kt.rows_in_place, (2, 0)),
                          (kt.write_through_alias, (1, 1)), (kt.accumulate, (1, 1))):
        from_source = _access.analyse_source(kernel.py_func).resolve(ndims)
        assert from_source == _summary(kernel).resolve(ndims)[:len(ndims)], kernel


def _packed_double_ops(dispatcher):
    import re

    asm = "\n".join(dispatcher.inspect_asm().values())
    return len(re.findall(r"\b(?:v?mulpd|v?addpd|v?subpd|vfn?m(?:add|sub)\w*pd)\b", asm))


def test_serial_and_pieces_launchers_both_vectorise_a_dual_stencil(monkeypatch, rng):
    # LLVM vectorises the loop over cells of a dual stencil (lane rows are contiguous) only
    # with dualgpu's memory-check limits (backends/_llvm.py) and, in pieces launchers, a loop
    # whose start it can bound (cpu_launchers._UNITS): both used to be scalar
    from benchmarks.cases_dualgpu import heat_step

    monkeypatch.setenv("DUALGPU_CACHE", "0")  # compile here, so the assembly can be read
    monkeypatch.setattr(cpu_parallel, "FORCE", True)
    monkeypatch.setattr(cpu_parallel, "available_threads", lambda: 2)
    kernel = cpu.CpuKernel(heat_step.py_func)
    u, u_new = _dual(rng, 3000, 16), _dual(rng, 3000, 16)
    with _context.dual_allocation(16, tile=8):
        kernel.launch(12, 256, (u, u_new, 0.25))
        with cpu_parallel.serial_launches():
            kernel.launch(12, 256, (u, u_new, 0.25))
    by_mode = {spec.mode: launcher for spec, launcher in kernel._launchers.items()}
    assert set(by_mode) == {"serial", "pieces"}
    for mode, launcher in by_mode.items():
        assert _packed_double_ops(launcher) >= 8, f"the {mode} launcher is not vectorised"


def test_kernel_takes_its_tile_from_its_profile_without_timing(rng, monkeypatch):
    # a memory-bound kernel (no loop per thread) gets narrow tiles on its first launch, and
    # only one launcher is compiled: no launches spent timing other widths
    monkeypatch.setattr(cpu_parallel, "ENABLED", False)
    kernel = cpu.CpuKernel(kt.smooth_with_scratch.py_func)
    x, out = _dual(rng, 500, 32), _dual(rng, 500, 32)
    results = []
    with _context.dual_allocation(32):  # no tile from the driver
        for _ in range(3):
            kernel.launch(2, 256, (x, out))
            results.append(out.partials.copy())
    assert {spec.lanes for spec in kernel._launchers} == {8}
    for partials in results[1:]:
        np.testing.assert_array_equal(partials, results[0])
