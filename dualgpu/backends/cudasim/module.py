"""``cuda`` inside a kernel run by the ``cudasim`` backend: one module object per launch.

It extends numba's simulated module (``FakeCUDAModule``: ``grid``, ``threadIdx``,
atomics...) with what the simulator lacks or gets wrong for dualgpu:

* ``cuda.shared.array``: one array per call site (code object and bytecode offset, so
  two tiles on one line are distinct) per block, shared by the block's threads and
  fresh for every block. In a dual launch a float tile is a :class:`DualArray` with
  the launch's lanes. Static float tiles start as NaN (uninitialised memory: a read
  of a cell no thread wrote shows). Dynamic shared memory (``shape`` 0) is one zeroed
  buffer per block laid out as on the GPU backend: in a dual launch the values take
  the first ``sharedmem`` bytes (rounded up to 8) and lane k the k-th region after them;
* ``cuda.local.array``: a DualArray for floats in a dual launch;
* ``syncthreads`` (and ``_count``/``_and``/``_or``), ``cuda.cg.this_grid().sync()``
  and the warp collectives (``shfl_sync``, ``shfl_up/down/xor_sync``, ``all_sync``,
  ``any_sync``, ``eq_sync``, ``ballot_sync``, ``match_any_sync``, ``match_all_sync``,
  ``activemask``, ``lanemask_lt``, ``syncwarp``) through the scheduler of
  :mod:`dualgpu.backends.cudasim.threads`. A shuffled dual carries its partials;
* in a dual launch, ``cuda.float32`` and the other number types cast duals
  (:mod:`dualgpu.backends.cudasim.casts`).
"""
import types as pytypes

import numpy as np
from numba.cuda.simulator.kernelapi import FakeCUDALocal, FakeCUDAModule

from dualgpu.compiled.libdevice import formula_functions
from dualgpu.core import dmath
from dualgpu.core.dualarray import DualArray
from dualgpu.errors import DualgpuError
from dualgpu.backends.cudasim import bits as _bits
from dualgpu.backends.cudasim.casts import as_dtype, cast_for
from dualgpu.backends.cudasim.threads import WARP_SIZE, caller_frame, current_thread

__all__ = ["LaunchModule", "dynamic_region_bytes"]

FULL_MASK = 0xFFFFFFFF
_DUAL_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def dynamic_region_bytes(sharedmem, lanes):
    """Bytes of each region (values, then one per lane) of dynamic shared memory.

    A plain launch has one region of ``sharedmem`` bytes; a dual launch rounds it up to a
    multiple of 8 so that every region is aligned for float64.
    """
    sharedmem = int(sharedmem)
    return sharedmem if not lanes else -(-sharedmem // 8) * 8


def _shape(shape):
    return (int(shape),) if np.ndim(shape) == 0 else tuple(int(s) for s in shape)


class SharedMemory:
    """``cuda.shared`` of one launch."""

    def __init__(self, dynshared_size, lanes):
        self.lanes = lanes
        self.region = dynamic_region_bytes(dynshared_size, lanes)

    def array(self, shape, dtype, alignment=None):
        """The block's shared array for this call site (made by the first thread to get here)."""
        block = current_thread().block
        frame = caller_frame()
        dtype = as_dtype(dtype)
        if np.ndim(shape) == 0 and int(shape) == 0 or _shape(shape) == (0,):
            return self._dynamic(block, dtype)
        key = (frame.f_code, frame.f_lasti)
        with block.lock:
            array = block.shared.get(key)
            if array is None:
                array = block.shared[key] = self._static(_shape(shape), dtype)
        return array

    def _static(self, shape, dtype):
        if dtype.kind != "f":
            return np.empty(shape, dtype)
        values = np.full(shape, np.nan, dtype)
        if not self.lanes or dtype not in _DUAL_DTYPES:  # float16 cannot hold a dual
            return values
        return DualArray(values, np.full((self.lanes,) + shape, np.nan, dtype))

    def _dynamic(self, block, dtype):
        with block.lock:
            if block.dynamic is None:
                block.dynamic = np.zeros((1 + self.lanes) * self.region, np.uint8)
            buffer = block.dynamic
        count = self.region // dtype.itemsize
        values = np.frombuffer(buffer.data, dtype, count=count)
        if not self.lanes or dtype not in _DUAL_DTYPES:
            return values
        # lane k is the k-th region after the values, viewed in place
        lanes = np.lib.stride_tricks.as_strided(
            np.frombuffer(buffer.data, dtype, offset=self.region), shape=(self.lanes, count),
            strides=(self.region, dtype.itemsize),
        )
        return DualArray(values, lanes)


class DualLocal:
    """``cuda.local`` of a dual launch: float scratch is a DualArray with ``lanes`` lanes."""

    def __init__(self, lanes):
        self.lanes = lanes

    def array(self, shape, dtype, alignment=None):
        dtype = as_dtype(dtype)
        if dtype not in _DUAL_DTYPES:
            return np.empty(shape, dtype)
        shape = _shape(shape)
        return DualArray(np.empty(shape, dtype), np.zeros((self.lanes,) + shape, dtype))


class GridGroup:
    """``cuda.cg.this_grid()``: ``sync()`` waits for every live thread of the grid."""

    def __init__(self, whole_grid, n_blocks):
        self._whole_grid = whole_grid
        self._n_blocks = n_blocks

    def sync(self):
        thread = current_thread()
        frame = caller_frame()
        if not self._whole_grid and self._n_blocks > 1:
            raise DualgpuError(
                f"grid.sync() at {frame.f_code.co_filename}:{frame.f_lineno}: this launch runs "
                f"its {self._n_blocks} blocks one after another because the kernel's source "
                "does not call cuda.cg.this_grid() where dualgpu can see it. Call "
                "cuda.cg.this_grid() in the kernel (or a device function it calls) by that name."
            )
        thread.group.arrive(thread, "grid", "grid.sync()", None, frame)


class CooperativeGroups:
    """``cuda.cg``."""

    def __init__(self, whole_grid, n_blocks):
        self._grid = GridGroup(whole_grid, n_blocks)

    def this_grid(self):
        return self._grid


def _signed32(bits):
    return ((bits + 2 ** 31) % 2 ** 32) - 2 ** 31


def _source_lane(op):
    if op == "shfl_sync":
        return lambda lane, b: b
    if op == "shfl_up_sync":
        return lambda lane, b: lane - b if lane - b >= 0 else lane
    if op == "shfl_down_sync":
        return lambda lane, b: lane + b if lane + b < WARP_SIZE else lane
    return lambda lane, b: lane ^ b


def _shuffle_resolver(op):
    source = _source_lane(op)

    def resolve(values, members, where):
        out = {}
        for lane, (value, b) in values.items():
            j = source(lane, int(b) & 31)
            if j == lane:
                out[lane] = value
                continue
            if j not in values:
                if j not in members:
                    why = "does not exist (the block has fewer threads than that warp)"
                elif members[j].exited:
                    why = "has already returned from the kernel"
                else:
                    why = "is not in the mask"
                raise DualgpuError(
                    f"cuda.{op} at {where}: lane {lane} of warp {members[lane].warp} in block "
                    f"{tuple(members[lane].blockIdx)} reads lane {j}, which {why}; the value "
                    "it would get on a GPU is undefined. Keep every lane the shuffle reads "
                    "alive and in the mask (e.g. give out-of-range threads a neutral value "
                    "instead of returning early)."
                )
            out[lane] = values[j][0]
        return out

    return resolve


def _vote_resolver(combine):
    def resolve(values, members, where):
        result = combine(values)
        return {lane: result for lane in values}

    return resolve


def _ballot(values):
    return _signed32(sum(1 << lane for lane, p in values.items() if p))


def _match_any(values, members, where):
    return {
        lane: _signed32(sum(1 << other for other, w in values.items() if w == v))
        for lane, v in values.items()
    }


def _match_all(values):
    first = next(iter(values.values()))
    same = all(v == first for v in values.values())
    return (_signed32(sum(1 << lane for lane in values)) if same else 0), same


def _block_count(predicates):
    return sum(1 for p in predicates if p)


_LIBDEVICE = []


class _SimulatedLibdevice(pytypes.ModuleType):
    """libdevice's float functions as formulas in dual-aware math; the others refused."""

    def __getattr__(self, name):
        raise DualgpuError(
            f"cuda.libdevice.{name} has no code off the GPU, and dualgpu no formula for it in "
            "math (it has them for libdevice's float functions: exp, rsqrt, fma, sincos, "
            f"fast_expf...). Run this kernel on the 'cuda' backend, or write cuda.libdevice."
            f"{name} with math and arithmetic.")


def _simulated_libdevice():
    if not _LIBDEVICE:
        module = _SimulatedLibdevice("numba.cuda.libdevice (dualgpu's simulated formulas)")
        module.__dict__.update(formula_functions(dmath))
        _LIBDEVICE.append(module)
    return _LIBDEVICE[0]


class LaunchModule(FakeCUDAModule):
    """The ``cuda`` module of one simulated launch (plain: ``lanes`` 0)."""

    def __init__(self, grid_dim, block_dim, dynshared_size, lanes, whole_grid):
        super().__init__(grid_dim, block_dim, dynshared_size)
        self.lanes = lanes
        n_blocks = int(np.prod(grid_dim))
        self._shared = SharedMemory(dynshared_size, lanes)
        self._local = DualLocal(lanes) if lanes else FakeCUDALocal()
        self._cg = CooperativeGroups(whole_grid, n_blocks)

    def __getattr__(self, name):
        # numba.cuda's number types (cuda.float32): dual-aware casts in a dual launch
        import numba.cuda

        value = getattr(numba.cuda, name, None)
        cast = cast_for(value) if value is not None else None
        if cast is not None:
            return cast if self.lanes else value
        raise AttributeError(
            f"cuda.{name} is not available in the CUDA simulator (dualgpu's cudasim backend)."
        )

    @property
    def libdevice(self):
        """numba.cuda.libdevice's float functions, as their formulas in dual-aware math
        (libdevice has no code off the GPU; :mod:`dualgpu.compiled.libdevice`)."""
        return _simulated_libdevice()

    # bit functions with numba.cuda's widths and types (numba's simulator counts 32 bits)
    popc, clz, ffs, brev = (staticmethod(_bits.FUNCTIONS[n]) for n in ("popc", "clz", "ffs",
                                                                        "brev"))

    @staticmethod
    def cbrt(x):
        """libdevice's cbrt formula (numba's simulator: ``x ** (1 / 3)``, complex below 0)."""
        single = np.float32 in (type(x), type(getattr(x, "value", None)))
        return getattr(_simulated_libdevice(), "cbrtf" if single else "cbrt")(x)

    # -- block barriers ----------------------------------------------------------------------
    def _barrier(self, what, predicate, resolve):
        thread = current_thread()
        return thread.group.arrive(thread, "block", what, (predicate, resolve), caller_frame())

    def syncthreads(self):
        self._barrier("cuda.syncthreads()", None, None)

    def syncthreads_count(self, predicate):
        return self._barrier("cuda.syncthreads_count()", predicate, _block_count)

    def syncthreads_and(self, predicate):
        return self._barrier("cuda.syncthreads_and()", predicate,
                             lambda ps: 1 if all(ps) else 0)

    def syncthreads_or(self, predicate):
        return self._barrier("cuda.syncthreads_or()", predicate,
                             lambda ps: 1 if any(ps) else 0)

    # -- warp collectives --------------------------------------------------------------------
    def _warp(self, op, mask, value, resolve, key=None):
        thread = current_thread()
        mask = None if mask is None else int(mask) & FULL_MASK
        frame = caller_frame()
        key = (f"cuda.{op}()", mask) if key is None else (f"cuda.{op}()",) + key
        return thread.group.arrive(thread, "warp", key, (mask, value, resolve), frame)

    def shfl_sync(self, mask, value, src_lane):
        return self._warp("shfl_sync", mask, (value, src_lane), _shuffle_resolver("shfl_sync"))

    def shfl_up_sync(self, mask, value, delta):
        return self._warp("shfl_up_sync", mask, (value, delta), _shuffle_resolver("shfl_up_sync"))

    def shfl_down_sync(self, mask, value, delta):
        return self._warp("shfl_down_sync", mask, (value, delta),
                          _shuffle_resolver("shfl_down_sync"))

    def shfl_xor_sync(self, mask, value, lane_mask):
        return self._warp("shfl_xor_sync", mask, (value, lane_mask),
                          _shuffle_resolver("shfl_xor_sync"))

    def all_sync(self, mask, predicate):
        return self._warp("all_sync", mask, bool(predicate),
                          _vote_resolver(lambda v: all(v.values())))

    def any_sync(self, mask, predicate):
        return self._warp("any_sync", mask, bool(predicate),
                          _vote_resolver(lambda v: any(v.values())))

    def eq_sync(self, mask, predicate):
        return self._warp("eq_sync", mask, bool(predicate),
                          _vote_resolver(lambda v: len(set(v.values())) == 1))

    def ballot_sync(self, mask, predicate):
        return self._warp("ballot_sync", mask, bool(predicate), _vote_resolver(_ballot))

    def match_any_sync(self, mask, value):
        return self._warp("match_any_sync", mask, value, _match_any)

    def match_all_sync(self, mask, value):
        return self._warp("match_all_sync", mask, value, _vote_resolver(_match_all))

    def syncwarp(self, mask=FULL_MASK):
        self._warp("syncwarp", mask, None, _vote_resolver(lambda v: None))

    def activemask(self):
        """The lanes of the warp that reach this call together (converged)."""
        frame = caller_frame()
        site = (frame.f_code, frame.f_lasti)
        return self._warp("activemask", None, None,
                          _vote_resolver(lambda v: sum(1 << lane for lane in v)), key=site)

    def lanemask_lt(self):
        return (1 << current_thread().lane) - 1
