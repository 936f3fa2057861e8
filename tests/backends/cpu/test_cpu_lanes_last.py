"""Compute-bound kernels on the cpu backend: a model picks their tile, they run lanes-last,
and their lane loops are SIMD.

A launch lanes-last must give, bit for bit, what separate launches of each tile's slice
give (tests/fixtures/tile_checks.py), in place, on 2-D arrays, with dual scalars, with
outputs written only in part, serially and in pieces; its Jacobians must match central
differences; and the emitted assembly must show packed FMA in the lane loop.
"""
import re

import numpy as np
import pytest

import kernels_lanes_last as kl
import kernels_tiles as kt
from tile_checks import check_against_slices as _check_against_slices
from tile_checks import random_dual as _dual
import dualgpu
from dualgpu import Dual
from dualgpu.core import _context
from dualgpu.backends.cpu import kernel as cpu
from dualgpu.backends.cpu import parallel as cpu_parallel
from dualgpu.backends.cpu import lane_model
from dualgpu.backends.cpu.lane_model import TILE_WIDTH, kernel_profile
from simulations import heat1d, nbody, pendulum_samples


@pytest.mark.parametrize("kernel, kind", [
    (nbody.accelerations, "compute"), (pendulum_samples.integrate, "compute"),
    (kl.pair_sum, "compute"), (kl.relax_in_place, "compute"), (kl.even_rows, "compute"),
    (kl.scatter_pairs, "compute"),
    (heat1d.step_periodic, "memory"), (nbody.kick_drift, "memory"),
    (kt.axpy_in_place, "memory"),
])
def test_profile_of_kernels(kernel, kind):
    assert kernel_profile(cpu.compile_kernel(kernel)._translation).kind == kind


@pytest.mark.parametrize("lanes, expected", [(64, (32, 2)), (48, (16, 3)), (24, (24, 1)),
                                             (40, (8, 5))])
def test_compute_bound_kernels_take_wide_tiles(rng, monkeypatch, lanes, expected):
    monkeypatch.setitem(TILE_WIDTH, "compute", 32)  # the width with AVX, AVX2 or AVX-512
    kernel = cpu.compile_kernel(kl.pair_sum)
    args = (_dual(rng, 4, lanes), _dual(rng, 4, lanes), 0.1, _dual(rng, 4, lanes))
    with _context.dual_allocation(lanes):  # no tile from the driver
        assert kernel._tiles(lanes, args, ("a", "a", "", "a")) == expected


@pytest.mark.parametrize("features, vector, registers, width", [
    ("+avx512f,+avx2,+avx,+fma", 64, 32, 32), ("-avx512f,+avx2,+avx,+fma", 32, 16, 32),
    ("+sse4.2,-avx", 16, 16, 16), ("+neon", 16, 16, 16)])
def test_compute_tile_width_follows_the_vector_width(features, vector, registers, width):
    assert lane_model.vector_bytes(features) == vector
    assert lane_model.vector_registers(features) == registers
    assert lane_model.compute_tile_width(vector) == width
    assert TILE_WIDTH["compute"] == lane_model.compute_tile_width()  # this machine's


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pair_loop_matches_its_tile_slices(rng, dtype, launch_mode):
    x, w, out = _dual(rng, 40, 64, dtype), _dual(rng, 40, 64, dtype), _dual(rng, 40, 64, dtype)
    compiled = _check_against_slices(kl.pair_sum, 2, 32, (x, w, dtype(0.3), out), tile=32)
    assert any(spec.lanes_last for spec in compiled._launchers)


def test_in_place_kernel_is_restored_between_tiles(rng, launch_mode):
    x, w = _dual(rng, 70, 64), _dual(rng, 70, 64)
    _check_against_slices(kl.relax_in_place, 3, 32, (x, w, 5), tile=32)


def test_two_d_arrays_dual_scalars_and_outputs_written_in_part(rng, launch_mode):
    a, out = _dual(rng, (9, 5), 64), _dual(rng, (9, 5), 64)
    s = Dual(0.7, rng.random(64))
    before = out.partials[:, 1::2].copy()
    compiled = _check_against_slices(kl.even_rows, 1, 16, (a, s, out), tile=32)
    np.testing.assert_array_equal(out.partials[:, 1::2], before)  # rows the kernel skips
    assert any(spec.lanes_last for spec in compiled._launchers)


def test_atomics_into_a_dual_array(rng, launch_mode):
    # kernels with atomics run serially; every tile starts from the same values of out
    x, out = _dual(rng, 24, 64), _dual(rng, 24, 64)
    compiled = _check_against_slices(kl.scatter_pairs, 1, 32, (x, out), tile=32)
    assert any(spec.lanes_last for spec in compiled._launchers)


def test_atomic_scatter_jacobian_matches_central_differences(rng):
    n = 24
    x0 = np.sort(rng.random(n)) * 3

    def f(x):
        out = dualgpu.cuda.to_device(np.zeros(n))
        kl.scatter_pairs[1, 32](dualgpu.cuda.to_device(x), out)
        return out.copy_to_host()

    def numpy_f(x):
        d = x[None, :] - x[:, None]  # d[i, j] = x[j] - x[i], added to out[j]
        terms = 0.5 * d / (d * d + 0.5) ** 1.5
        np.fill_diagonal(terms, 0.0)
        return terms.sum(axis=0)

    with dualgpu.using_backend("cpu"):
        np.testing.assert_allclose(f(x0), numpy_f(x0), rtol=1e-12)
        jac = np.asarray(dualgpu.jacfwd(f, progress=False)(x0))
    h = 1e-6
    fd = np.stack([(numpy_f(x0 + h * e) - numpy_f(x0 - h * e)) / (2 * h) for e in np.eye(n)], 1)
    np.testing.assert_allclose(jac, fd, rtol=1e-6, atol=1e-8)


def test_aliased_dual_arguments_run_lane_major(rng, launch_mode):
    x, out = _dual(rng, 30, 32), _dual(rng, 30, 32)
    compiled = _check_against_slices(kl.pair_sum, 1, 32, (x, x, 0.2, out), tile=32)
    assert any(not spec.lanes_last and spec.lanes == 32 for spec in compiled._launchers)


@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-7), (np.float32, 2e-2)])
def test_wide_tile_jacobian_matches_central_differences(rng, dtype, rtol):
    # 128 directions: the driver's runs carry multiples of 32 lanes, the pair loop's tile
    n = 128
    x0 = np.sort(rng.random(n)).astype(dtype) * 4
    w = (0.5 + rng.random(n)).astype(dtype)

    def f(x):
        out = dualgpu.cuda.device_array_like(x)
        kl.pair_sum[(n + 63) // 64, 64](dualgpu.cuda.to_device(x), w, dtype(0.5), out)
        return out.copy_to_host()

    with dualgpu.using_backend("cpu"):
        jac = np.asarray(dualgpu.jacfwd(f, progress=False)(x0))
        kernel = cpu.compile_kernel(kl.pair_sum)
        width = TILE_WIDTH["compute"]  # 32 with AVX, AVX2 or AVX-512
        assert any(spec.lanes_last and spec.lanes == width for spec in kernel._launchers)
        x64 = x0.astype(np.float64)
        h = 1e-6
        for k in (0, 17, 64, 127):
            e = np.zeros(n)
            e[k] = h
            fd = (f((x64 + e).astype(dtype)).astype(np.float64)
                  - f((x64 - e).astype(dtype)).astype(np.float64)) / (2 * h)
            if dtype == np.float32:  # differences of float32 outputs: compare in float64
                fd = _float64_column(x64, w, k)
            np.testing.assert_allclose(jac[:, k], fd, rtol=rtol, atol=rtol * np.abs(fd).max())


def _float64_column(x, w, k, h=1e-6):
    """Column k of the pair-sum Jacobian by central differences in float64 (numpy)."""
    def f(x):
        d = x[None, :] - x[:, None]
        return (w[None, :].astype(np.float64) * d / (d * d + 0.25) ** 1.5).sum(axis=1)
    e = np.zeros_like(x)
    e[k] = h
    return (f(x + e) - f(x - e)) / (2 * h)


def _host_has_fma():
    import llvmlite.binding as llvm

    features = llvm.get_host_cpu_features()
    return bool(features.get("fma") and features.get("avx2"))


requires_fma = pytest.mark.skipif(not _host_has_fma(),
                                  reason="the host CPU has no AVX2 FMA: nothing packed to find")

#: A packed double fused multiply-add in any of its forms (``vfmadd``, ``vfmsub``,
#: ``vfnmadd``, ``vfnmsub``) on 256- or 512-bit registers (AT&T syntax, as numba prints it).
PACKED_FMA = re.compile(r"\bvfn?m(?:add|sub)\w*pd\s+[^\n]*%[yz]mm")


def _pair_loop_launcher(rng, n=64):
    """(spec, launcher) of one 32-lane-tile launch of the N-body pair loop, whatever this
    machine's tile width."""
    kernel = cpu.CpuKernel(nbody.accelerations.py_func)
    kernel.tile_lanes = 32
    pos, mass, acc = _dual(rng, (n, 3), 32), _dual(rng, n, 32), _dual(rng, (n, 3), 32)
    with _context.dual_allocation(32):
        kernel.launch(1, n, (pos, mass, 1.0, 0.1, acc))
    (spec, launcher), = kernel._launchers.items()
    return spec, launcher


def _asm(dispatcher):
    return "\n".join(dispatcher.inspect_asm().values())


@requires_fma
@pytest.mark.parametrize("mode", ["serial", "pieces"])
def test_nbody_pair_loop_has_packed_fma(monkeypatch, rng, mode):
    monkeypatch.setenv("DUALGPU_CACHE", "0")  # compile here, so the assembly can be read
    if mode == "pieces":
        monkeypatch.setattr(cpu_parallel, "FORCE", True)
        monkeypatch.setattr(cpu_parallel, "available_threads", lambda: 2)
    else:
        monkeypatch.setattr(cpu_parallel, "ENABLED", False)
    spec, launcher = _pair_loop_launcher(rng)
    assert spec.lanes_last and spec.lanes == 32 and spec.mode == mode
    assert len(PACKED_FMA.findall(_asm(launcher))) >= 8


@requires_fma
def test_dual_stencil_has_packed_fma(monkeypatch, rng):
    # the benchmark's 3-point stencil: its loop over cells is vectorised across threads, and
    # each lane's ``u + a * (...)`` is contracted into an FMA (a periodic stencil's modulo
    # indexing keeps that loop scalar, in the plain kernel too)
    from benchmarks.cases_dualgpu import heat_step

    monkeypatch.setenv("DUALGPU_CACHE", "0")
    monkeypatch.setattr(cpu_parallel, "ENABLED", False)
    kernel = cpu.CpuKernel(heat_step.py_func)
    u, u_new = _dual(rng, 3000, 8), _dual(rng, 3000, 8)
    with _context.dual_allocation(8):
        kernel.launch(12, 256, (u, u_new, 0.25))
    (spec, launcher), = kernel._launchers.items()
    assert not spec.lanes_last
    assert len(PACKED_FMA.findall(_asm(launcher))) >= 1


#: Packed double arithmetic instructions (multiplies, adds, subtracts, FMAs of any form).
PACKED_ARITHMETIC = re.compile(r"\b(?:vmulpd|vaddpd|vsubpd|vfn?m(?:add|sub)\w*pd)\s+[^\n]*%[yz]mm")


@requires_fma
def test_nbody_pair_loop_factors_the_chain_rule(monkeypatch, rng):
    # the lane arithmetic carries reassoc/nsz (compiled/types.CPU_LANE_FLAGS), so LLVM folds
    # scalar coefficients before they meet a lane: at 32 lanes the pair loop's launcher held
    # 194 packed arithmetic instructions on AVX2 with `contract` alone, 112 with them (AVX-512
    # halves both); the bound sits between the two
    monkeypatch.setenv("DUALGPU_CACHE", "0")
    monkeypatch.setattr(cpu_parallel, "ENABLED", False)
    spec, launcher = _pair_loop_launcher(rng)
    assert spec.lanes_last
    assert len(PACKED_ARITHMETIC.findall(_asm(launcher))) < 160
