"""The GPU backend runs every lane tile of a dual launch in one launch when that is exact.

A launch with L lanes and tiles of N lanes becomes one launch with a third grid dimension of
L / N blocks (``dualgpu.backends.gpu.tile_grid``) unless the kernel reads and writes an array,
uses atomics on its arguments, takes a Dual scalar, reads the grid's third dimension or syncs
its grid; then it stays one launch per tile. No GPU here, so the generated wrapper kernel runs
on the cpu backend standing in for numba.cuda (same source, same 3-D grid) and must equal, bit
for bit, the kernel run on each N-lane slice; the real wrapper is compiled to PTX. (The cpu
backend sizes dual shared and local arrays by the lanes of a launch's DualArrays, which the
wrapper does not have: those kernels are checked in PTX only.)
"""
import copy
import types

import numba.cuda
import numpy as np
import pytest
from numba import types as nbtypes

import block_kernels as bk
import kernels_tile_grid as kg
import kernels_tiles as kt
from tile_checks import assert_slice_equal, lane_slice
from dualgpu import Dual
from dualgpu.core import _context
from dualgpu import cuda as dcuda
from dualgpu.backends.cpu import kernel as cpu
from dualgpu.backends.gpu import kernel as gpu
from dualgpu.backends.gpu import tile_grid as tg
from dualgpu.core.dualarray import DualArray
from dualgpu.compiled.arrays import dual_array_type

LANES, TILE = 24, 8


def _dual(rng, shape, lanes=LANES, dtype=np.float64):
    shape = (shape,) if np.ndim(shape) == 0 else tuple(shape)
    return DualArray(rng.standard_normal(shape).astype(dtype),
                     rng.standard_normal((lanes,) + shape).astype(dtype))


class _HostLoopStandIn:
    """``GpuKernel.dispatcher_for``: the kernel on the cpu backend, one launch per tile."""

    def __init__(self, py_func, calls):
        self.py_func, self.calls = py_func, calls

    def __call__(self, lanes):
        return self

    def __getitem__(self, config):
        def launch(*args):
            self.calls.append(max(a.lanes for a in args if isinstance(a, DualArray)))
            cpu.compile_kernel(self.py_func).launch(config[0], config[1], args)
        return launch


class _TilesStandIn:
    """``GpuKernel.tiles_dispatcher``: the generated wrapper, run by the cpu backend."""

    def __init__(self, py_func, grids):
        self.py_func, self.grids = py_func, grids

    def __call__(self, mask, tile):
        body = dcuda.jit(device=True)(self.py_func)
        wrapper = tg.tiles_kernel(body, mask, tile, dcuda)

        class Launcher:
            def __getitem__(_, config):
                def launch(*flat):
                    self.grids.append(config[0])
                    cpu.compile_kernel(wrapper).launch(config[0], config[1], tuple(flat))
                return launch
        return Launcher()


def _stand_in_kernel(kernel, monkeypatch, calls, grids, grid_group=False):
    gpu_kernel = gpu.GpuKernel.__new__(gpu.GpuKernel)  # no numba.cuda dispatcher needed
    gpu_kernel.py_func = kernel.py_func
    gpu_kernel._grid_group = grid_group
    gpu_kernel._tile_dispatchers = {}
    monkeypatch.setattr(gpu_kernel, "dispatcher_for", _HostLoopStandIn(kernel.py_func, calls),
                        raising=False)
    monkeypatch.setattr(gpu_kernel, "tiles_dispatcher", _TilesStandIn(kernel.py_func, grids),
                        raising=False)
    return gpu_kernel


def _launch_and_compare(kernel, griddim, blockdim, args, monkeypatch):
    """Launch through the GPU backend's launch path; compare with per-slice cpu launches."""
    calls, grids = [], []
    gpu_kernel = _stand_in_kernel(kernel, monkeypatch, calls, grids)
    reference = copy.deepcopy(args)
    with _context.dual_allocation(LANES, tile=TILE):
        gpu_kernel.launch(griddim, blockdim, 0, 0, args)
    for t in range(LANES // TILE):
        memo = {}  # an array passed twice stays one array
        sliced = [lane_slice(a, t * TILE, (t + 1) * TILE, memo) for a in copy.deepcopy(reference)]
        cpu.compile_kernel(kernel).launch(griddim, blockdim, tuple(sliced))
        assert_slice_equal(args, sliced, t * TILE, (t + 1) * TILE)
    return calls, grids


ONE_LAUNCH = [
    pytest.param(kg.heat_step, 2, 32, lambda rng, dt: (_dual(rng, 50, dtype=dt),
                                                       _dual(rng, 50, dtype=dt), 0.3),
                 (2, 1, 3), id="stencil-device-function"),
    pytest.param(kg.wave_2d, (2, 2), (8, 8), lambda rng, dt: (_dual(rng, (12, 10), dtype=dt),
                                                              _dual(rng, (12, 10), dtype=dt), 0.2),
                 (2, 2, 3), id="2d-grid"),
    pytest.param(kg.heat_step, (2,), 32, lambda rng, dt: (np.linspace(0, 1, 50).astype(dt),
                                                          _dual(rng, 50, dtype=dt), 0.3),
                 (2, 1, 3), id="plain-input-dual-output"),
    pytest.param(kg.heat_step, (2, 1, 1), 32, lambda rng, dt: (_dual(rng, 50, dtype=dt),
                                                               _dual(rng, 50, dtype=dt), 0.3),
                 (2, 1, 3), id="3d-griddim-of-one-layer"),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kernel, griddim, blockdim, make, grid", ONE_LAUNCH)
def test_safe_kernels_run_all_tiles_in_one_launch(kernel, griddim, blockdim, make, grid, dtype,
                                                  rng, monkeypatch):
    calls, grids = _launch_and_compare(kernel, griddim, blockdim, make(rng, dtype), monkeypatch)
    assert (grids, calls) == ([grid], [])


PER_TILE = [
    pytest.param(kt.axpy_in_place, lambda rng: (_dual(rng, 40), _dual(rng, 40), 0.1),
                 id="in-place"),
    pytest.param(kt.accumulate, lambda rng: (_dual(rng, 40), _dual(rng, 1)), id="atomics"),
    pytest.param(kt.write_through_alias, lambda rng: (lambda a: (a, a))(_dual(rng, 40)),
                 id="aliased"),
    pytest.param(kg.reads_block_z, lambda rng: (_dual(rng, 40), _dual(rng, 40)), id="blockIdx.z"),
    pytest.param(kg.grid_3d, lambda rng: (_dual(rng, 40), _dual(rng, 40)), id="grid(3)"),
    pytest.param(kg.z_through_device, lambda rng: (_dual(rng, 40), _dual(rng, 40)),
                 id="gridDim.z-in-device-function"),
    pytest.param(kg.heat_step, lambda rng: (_dual(rng, 40), _dual(rng, 40),
                                            Dual(0.3, rng.standard_normal(LANES))),
                 id="dual-scalar"),
]


@pytest.mark.parametrize("kernel, make", PER_TILE)
def test_unsafe_kernels_keep_one_launch_per_tile(kernel, make, rng, monkeypatch):
    calls, grids = _launch_and_compare(kernel, 2, 32, make(rng), monkeypatch)
    assert (grids, calls) == ([], [TILE] * (LANES // TILE))


def test_plan_refusals(rng):
    args = (_dual(rng, 40), _dual(rng, 40), 0.3)
    safe = types.SimpleNamespace(py_func=kg.heat_step.py_func, grid_group=False)
    assert tg.plan(safe, args, 2, 3, 0, 48_000) == (2, 1, 3)
    assert tg.plan(safe, args, 2, 1, 0, 48_000) is None               # one tile
    assert tg.plan(safe, args, (2, 1, 2), 3, 0, 48_000) is None       # a third grid dim in use
    assert tg.plan(safe, args, 2, 3, 64_000, 48_000) is None          # large dynamic shared
    assert tg.plan(safe, args, 2, tg.MAX_GRID_Z + 1, 0, 48_000) is None
    synced = types.SimpleNamespace(py_func=kg.heat_step.py_func, grid_group=True)
    assert tg.plan(synced, args, 2, 3, 0, 48_000) is None


def test_third_dimension_analysis():
    assert not tg.uses_third_dimension(kg.heat_step.py_func)
    assert not tg.uses_third_dimension(bk.kinetic_energy_partial.py_func)  # blockIdx.x
    assert not tg.uses_third_dimension(kt.smooth_with_scratch.py_func)  # local.array(3, ...)
    assert tg.uses_third_dimension(kg.reads_block_z.py_func)
    assert tg.uses_third_dimension(kg.grid_3d.py_func)
    assert tg.uses_third_dimension(kg.z_through_device.py_func)


def test_wrapper_source():
    assert tg.tiles_source((True, False, True)) == (
        "def _dg_tiles(a0_values, a0_partials, a1, a2_values, a2_partials):\n"
        "    t = cuda.blockIdx.z\n"
        "    body(make(a0_values, a0_partials[t * N:(t + 1) * N], N), a1, "
        "make(a2_values, a2_partials[t * N:(t + 1) * N], N))\n")


def _lines(ptx):
    return [line.strip() for line in ptx.splitlines()
            if line.strip() and not line.strip().startswith("//")]


@pytest.mark.parametrize("dtype", [nbtypes.float32, nbtypes.float64], ids=str)
@pytest.mark.parametrize("kernel, ndims", [
    (kg.heat_step, (1, 1, 0)),
    (kg.wave_2d, (2, 2, 0)),
    (bk.kinetic_energy_partial, (2, 1, 1)),
    (bk.kinetic_energy_dynamic_shared, (2, 1, 1)),
    (kt.smooth_with_scratch, (1, 1)),
], ids=["stencil", "2d", "shared", "dynamic-shared", "local"])
def test_wrapper_compiles_to_ptx_like_the_one_tile_kernel(kernel, ndims, dtype, offline_ptx):
    gpu_kernel = gpu.compile_kernel(kernel)
    mask = tuple(ndim > 0 for ndim in ndims)  # every array dual, scalars plain
    wrapper = gpu_kernel.tiles_dispatcher(mask, TILE)
    assert gpu_kernel.tiles_dispatcher(mask, TILE) is wrapper  # made once per argument shape
    flat, one_tile = [], []
    for ndim in ndims:
        if ndim:
            flat += [nbtypes.Array(dtype, ndim, "C"), nbtypes.Array(dtype, ndim + 1, "C")]
            one_tile.append(dual_array_type(dtype, ndim, TILE))
        else:
            flat.append(dtype)
            one_tile.append(dtype)
    tiled, _ = numba.cuda.compile_ptx(wrapper.py_func, tuple(flat), cc=offline_ptx)
    single, _ = numba.cuda.compile_ptx(gpu_kernel.dispatcher_for(TILE).py_func, tuple(one_tile),
                                       cc=offline_ptx)
    tiled, single = _lines(tiled), _lines(single)
    assert any("%ctaid.z" in line for line in tiled)
    assert not any("%ctaid.z" in line for line in single)
    # the kernel's body is inlined into the wrapper: no function of its own, no more calls
    # (libdevice's pow may be one, in both) and no more local memory than the one-tile kernel
    name = kernel.py_func.__name__
    assert not [line for line in tiled if line.startswith(".func") and name in line]
    # and the same shared memory
    for what in ("call", ".local", ".shared .align"):
        assert (sum(what in line for line in tiled) == sum(what in line for line in single)), what


# --- the simulations: which kernels run their tiles in one launch, and that they compile -------

def _dual_launches(f, args, lanes=16):
    """{py_func: (griddim, arguments, shared bytes)} of the first launch of each kernel in a
    ``lanes``-lane jvp_batch of ``f`` on the cpu backend (tiles of 8).

    The launches are recorded, not run: the plan and the PTX need their arguments' types and
    shapes only (a launch compiles its kernel for the cpu first).
    """
    import warnings

    import dualgpu
    from dualgpu.backends.cpu.kernel import CpuKernel
    from dualgpu.porting import launch_plan

    seen = {}

    def record(self, griddim, blockdim, launch_args, sharedmem=0):
        seen.setdefault(self.py_func, (griddim, list(launch_args), sharedmem))

    tangents = tuple(np.stack([np.ones_like(a)] * lanes) for a in args)
    monkey = pytest.MonkeyPatch()
    monkey.setattr(CpuKernel, "launch", record)
    # launch plans made by earlier tests would run the kernels without CpuKernel.launch
    monkey.setattr(launch_plan, "ENABLED", False)
    try:
        with dualgpu.using_backend("cpu"), warnings.catch_warnings():
            warnings.simplefilter("ignore", dualgpu.errors.ChunkSizeWarning)
            dualgpu.jvp_batch(f, args, tangents, chunk_size=TILE, progress=False)
    finally:
        monkey.undo()
    return seen


@pytest.mark.parametrize("module_name, size, one_launch, per_tile", [
    ("heat2d", 9, {"step"}, set()),
    ("gray_scott", 8, {"step"}, set()),
    ("nbody", 16, {"accelerations"}, {"kick_drift", "kick"}),
])
def test_simulation_kernels_on_the_one_launch_path_compile_to_ptx(module_name, size, one_launch,
                                                                  per_tile, offline_ptx):
    import importlib

    from dualgpu.backends.cudasim.kernel import uses_grid_group

    module = importlib.import_module(f"simulations.{module_name}")
    state = module.default_initial_state(size)
    state = state if isinstance(state, tuple) else (state,)
    floats = [k for k, a in enumerate(state) if isinstance(a, np.ndarray)]

    def f(*arrays):
        full = list(state)
        for k, a in zip(floats, arrays):
            full[k] = a
        return module.simulate(*full, n_steps=1)

    taken = {"one": set(), "per_tile": set()}
    for py_func, (griddim, args, shared) in _dual_launches(f, [state[k] for k in floats]).items():
        owner = types.SimpleNamespace(py_func=py_func, grid_group=uses_grid_group(py_func))
        grid = tg.plan(owner, args, griddim, 16 // TILE, shared, 48 * 1024)
        taken["per_tile" if grid is None else "one"].add(py_func.__name__)
        if grid is not None:
            wrapper = gpu.compile_kernel(py_func).tiles_dispatcher(tg.dual_mask(args), TILE)
            flat = tuple(numba.typeof(a) for a in tg.flat_arguments(args))
            ptx, _ = numba.cuda.compile_ptx(wrapper.py_func, flat, cc=offline_ptx)
            assert "%ctaid.z" in ptx
    assert taken == {"one": one_launch, "per_tile": per_tile}


def test_wrapper_of_a_cached_kernel_compiles_in_memory(offline_ptx):
    # numba's cache=True needs the function's source file; the generated wrapper has none
    gpu_kernel = gpu.compile_kernel(kg.heat_step, cache=True, fastmath=True)
    wrapper = gpu_kernel.tiles_dispatcher((True, True, False), TILE)
    assert type(wrapper._cache).__name__ == "NullCache" and wrapper.targetoptions["fastmath"]
    array = nbtypes.Array(nbtypes.float64, 1, "C")
    lanes = nbtypes.Array(nbtypes.float64, 2, "C")
    ptx, _ = numba.cuda.compile_ptx(wrapper.py_func, (array, lanes, array, lanes, nbtypes.float64),
                                    cc=offline_ptx, fastmath=True)
    assert "%ctaid.z" in ptx
