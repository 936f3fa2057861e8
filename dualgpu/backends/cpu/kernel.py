"""The compiled CPU backend's kernels: :func:`compile_kernel` and :class:`CpuKernel`.

How the backend runs a numba.cuda kernel is told in :mod:`dualgpu.backends.cpu`.
A :class:`CpuKernel` holds the kernel's :class:`~dualgpu.backends.cpu.translation.Translation`
and one launcher per loop shape, mode, tile of lanes and dual arguments; it runs
launches serially or on several cores by their measured cost, in tiles of lanes,
recompiles with numba's NRT once when the kernel turns out to allocate, and hands
block-level kernels to a :class:`~dualgpu.backends.cpu.blocks.launch.BlockLauncher`.

Examples
--------
A kernel's source must live in a file; here one of the example simulations:

>>> import numpy as np
>>> from dualgpu.backends.cpu.kernel import compile_kernel
>>> from simulations.heat1d import step_periodic
>>> k = compile_kernel(step_periodic)
>>> u, u_new = np.arange(8.0), np.zeros(8)
>>> k.launch(1, 8, (u, u_new, 0.25))
>>> u_new[:3].tolist()
[2.0, 1.0, 2.0]
"""
import time

import numba
import numpy as np

from dualgpu import compiled as _compiled  # noqa: F401  (numba typing of Dual, DualArray)
from dualgpu.core._context import active_tile_lanes
from dualgpu.core.dualarray import DualArray
from dualgpu.core.lanes import TILE_LANES, launch_tile
from dualgpu.core.nested import lane_key, nested_local_array_error
from dualgpu.errors import DualgpuError
from dualgpu.backends.common import translate as _translate
from dualgpu.backends.common.tiles import launch_tiles
from dualgpu.backends.cpu import BACKEND, COMPILED_CODE_ONLY
from dualgpu.backends.cpu import cache as cpu_cache
from dualgpu.backends.cpu import lanes_last as _lanes_last
from dualgpu.backends.cpu import llvm as _llvm
from dualgpu.backends.cpu import parallel as cpu_parallel
from dualgpu.backends.cpu import replay
from dualgpu.backends.cpu.blocks.launch import BlockLauncher
from dualgpu.backends.cpu.intrinsics import RUNTIME
from dualgpu.backends.cpu.lane_model import kernel_profile
from dualgpu.backends.cpu.launchers import CONTEXT, LaunchSpec, flatten, make_launcher
from dualgpu.backends.cpu.plans import args_are_tracers as _tracer_launch
from dualgpu.backends.cpu.plans import make_plan
from dualgpu.backends.cpu.tiles import LaneTiles, dual_kind, values_of
from dualgpu.backends.cpu.translation import Translation, is_nrt_error

__all__ = ["CpuKernel", "compile_kernel", "BACKEND", "DEFAULT_TILE_LANES"]

_llvm.tune()  # let LLVM vectorise loops over many lane rows (see dualgpu.backends.cpu.llvm)

#: Lanes per tile of a dual launch when neither the driver nor the kernel says
#: otherwise (see :attr:`CpuKernel.tile_lanes` and :mod:`dualgpu.core.lanes`).
DEFAULT_TILE_LANES = TILE_LANES[BACKEND]

#: CUDA's limit on the number of threads in one block.
MAX_THREADS_PER_BLOCK = 1024


def _dim3(value, what, kernel):
    if type(value) is int and value > 0:
        return value, 1, 1
    if type(value) is tuple and 1 <= len(value) <= 3 and all(
        type(v) is int and v > 0 for v in value
    ):
        return value + (1,) * (3 - len(value))
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        dims = (int(value),)
    elif isinstance(value, (tuple, list)) and all(
        isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value
    ):
        dims = tuple(int(v) for v in value)
    else:
        dims = None
    if dims is None or not 1 <= len(dims) <= 3 or min(dims) < 1:
        raise DualgpuError(
            f"kernel {kernel!r}: {what} must be a positive int or a tuple of 1 to 3 positive "
            f"ints (x, y, z); got {value!r}. Example: kernel[(n + 255) // 256, 256](...)."
        )
    return dims + (1,) * (3 - len(dims))


def _lanes_of(args, kernel):
    """The launch's lane count (first order), or its lane structure with nested duals."""
    return lane_key(args, f"kernel {kernel!r}")


#: Block-level launches run their blocks on several cores from this many threads up (and
#: when cores are free, see cpu_parallel.available_threads). Measured on 2 cores (tiled
#: N-body, blocks of 8 threads): 2048 bodies gained nothing (0.96-0.97x), small launches
#: lost up to 23x to waking the workers.
BLOCKS_PARALLEL_MIN_ITEMS = 1 << 16


class CpuKernel(LaneTiles):
    """A numba.cuda kernel compiled for the CPU; launch with :meth:`launch`.

    Made by :func:`compile_kernel`. One launcher dispatcher is kept per
    :class:`~dualgpu.backends.cpu.launchers.LaunchSpec` (loop shape, serial or
    pieces, tile lanes, which arguments are duals, which arrays are restored
    between tiles), and numba keeps one specialisation per argument types, so
    repeated launches never recompile.

    Attributes
    ----------
    tile_lanes : int or None
        Lanes per tile of dual launches; None: the driver's chunk size, else the
        width the kernel's profile asks for (:mod:`dualgpu.backends.cpu.lane_model`),
        the largest of :data:`dualgpu.core.lanes.TILE_CANDIDATES` up to it that divides
        the launch's lanes.
    """

    def __init__(self, py_func, fastmath=False):
        self.py_func = py_func
        self.name = py_func.__qualname__
        self.fastmath = bool(fastmath)
        self._translation = Translation(py_func, "kernel", self.name)
        self.params = tuple(self._translation.params)
        self._plain_mask = ("",) * len(self.params)
        self._launchers = {}
        self._costs = {}  # serial LaunchSpec -> {size class: cpu_parallel.LaunchCost}
        self._runs = {}  # serial LaunchSpec -> _SpecRun (what _run decides once per spec)
        self._warm = set()  # "pieces" specs that have run once (compiled)
        self._nrt_lanes = set()  # tile lanes whose thread function needs numba's NRT
        self._summary = None
        self._access = {}  # (mask, ndims) -> (flags, tileable)
        self._specs = {}
        self.tile_lanes = None
        self.default_tile_lanes = DEFAULT_TILE_LANES
        self._blocks = None  # the block-level runner (.blocks.launch), made at first launch
        #: bumped whenever launchers are forgotten or the translation is made again: launch
        #: plans (:mod:`.plans`) made before then no longer hold
        self.epoch = 0

    @property
    def uses_atomics(self):
        """True if the kernel (or a device function it calls) uses cuda.atomic: runs serially."""
        return self._translation.uses_atomics

    def _thread(self, spec):
        """Return ``(thread function dispatcher, nrt)`` for the launcher of ``spec``."""
        lanes = spec.lanes
        # Without NRT the thread function does no reference counting, so LLVM
        # inlines it into the launcher's loop and can vectorise across threads
        # (reference-count calls per thread would block that and cost ~20 ns).
        # Plain local arrays live on the stack; dual ones need NRT.
        nrt = lanes in self._nrt_lanes or bool(lanes and self._translation.lanes_dependent)
        unguarded = spec.base == "bounded"
        if not nrt and cpu_cache.needs_nrt(self._thread_key(lanes, unguarded, False)):
            self._nrt_lanes.add(lanes)  # an earlier process found that it allocates
            nrt = True
        if nrt:
            # numba inlines it: reference counts then live in one function
            thread = self._translation.build(
                lanes, self.fastmath, unguarded, spec.tracer, _nrt=True, inline="always",
                **COMPILED_CODE_ONLY)
        else:
            # a separate function that LLVM inlines (vectorises more loops than
            # numba's IR inlining does)
            thread = self._translation.build(
                lanes, self.fastmath, unguarded, spec.tracer, _nrt=False, inline="never",
                **COMPILED_CODE_ONLY)
            _llvm.inline_every_overload(thread)
        return thread, nrt

    def _launcher(self, spec):
        """Return (building once) the launcher for ``spec``."""
        launcher = self._launchers.get(spec)
        if launcher is None:
            thread, nrt = self._thread(spec)
            unguarded = spec.base == "bounded"
            guard = self._translation.guard if unguarded else None
            launcher = make_launcher(
                spec, self.params, guard.bound if guard else "", self._translation.inner_axis,
                thread, self.fastmath, nrt, f"cpu launcher of {self.name}",
                thread_key=self._thread_key(spec.lanes, unguarded, nrt, spec.tracer),
                assume=guard.assume if guard else "",
            )
            self._launchers[spec] = launcher
        return launcher

    def _thread_key(self, lanes, unguarded, nrt, tracer=False):
        """Fingerprint of the thread function for the disk cache (None: not cacheable)."""
        if not cpu_cache.enabled():
            return None
        options = {"fastmath": self.fastmath, "nrt": nrt}
        if tracer:
            options["tracer"] = tracer
        try:
            return cpu_cache.translation_key(self._translation, lanes, unguarded, options)
        except cpu_cache.Uncacheable:
            return None

    def _base(self, args):
        """The loop shape for these arguments: "blocks", "bounded" or "flat"."""
        if self._translation.uses_block_index:
            return "blocks"
        guard = self._translation.guard
        if guard is not None and guard.applies(args):
            return "bounded"
        return "flat"

    def launch(self, griddim, blockdim, args, sharedmem=0):
        """Run the kernel over a ``griddim`` x ``blockdim`` launch with ``args``.

        Parameters
        ----------
        griddim, blockdim : int or tuple of 1 to 3 ints
        args : tuple
            The kernel's arguments: numpy arrays, scalars, and dualgpu duals.
        sharedmem : int
            Bytes of dynamic shared memory per block (``cuda.shared.array(0, dtype)``).
        """
        g = _dim3(griddim, "griddim", self.name)
        b = _dim3(blockdim, "blockdim", self.name)
        if len(args) != len(self.params):
            raise DualgpuError(
                f"kernel {self.name!r} takes {len(self.params)} arguments "
                f"({', '.join(self.params)}); got {len(args)}."
            )
        if b[0] * b[1] * b[2] > MAX_THREADS_PER_BLOCK:
            raise DualgpuError(
                f"kernel {self.name!r}: blockdim {blockdim!r} has {b[0] * b[1] * b[2]} threads; "
                f"CUDA allows at most {MAX_THREADS_PER_BLOCK} per block (the {BACKEND} backend "
                "keeps that limit so the kernel also runs on a GPU). Use more blocks."
            )
        lanes = _lanes_of(args, self.name) if args else 0
        if isinstance(lanes, tuple) and (
            self._translation.lanes_dependent or self._translation.block_level
        ):
            raise nested_local_array_error(f"kernel {self.name!r}", BACKEND)
        if not self._launchers and self._blocks is None and self._translation.stale():
            # a global the kernel uses was defined after compile_kernel: look again
            self._translation = Translation(self.py_func, "kernel", self.name)
            self._summary = None
            self.epoch += 1
        if self._translation.block_level:
            self._block_launch(g, b, sharedmem, args, lanes)
            return
        base = self._base(args)
        items = g[0] * b[0] * g[1] * b[1] * g[2] * b[2]
        try:
            if lanes and not isinstance(lanes, tuple):  # nested duals: passed as they are
                self._launch_dual(base, g, b, args, lanes, items)
                return
            spec = LaunchSpec(base, "serial", 0, self._plain_mask, ())
            if (items < cpu_parallel.PARALLEL_MIN_ITEMS and not cpu_parallel.FORCE) or (
                self._translation.uses_atomics
            ):
                launcher = self._launchers.get(spec)
                if launcher is None:
                    launcher = self._launcher(spec)
                launcher(*args, *g, *b)
                return
            self._run(spec, args, g, b, items, 1, ())
        except (numba.core.errors.NumbaError, TypeError) as exc:
            self._retry_or_explain(exc, lanes, base, args, g, b)

    def plan(self, griddim, blockdim, args, sharedmem=0, **options):
        """A plan for launches like the last one (see :mod:`.plans`), or None.

        Ask after :meth:`launch` ran with these arguments; the plan is
        ``plan(args, stream)``, which launches and returns True, or returns False where it
        no longer holds. ``options``: :func:`~dualgpu.backends.cpu.plans.make_plan`'s.
        """
        return make_plan(self, griddim, blockdim, args, sharedmem, **options)

    def replay_step(self, griddim, blockdim, args):
        """``(step, None)``: how a captured loop replays launches like the last one, or
        ``(None, why not)`` (see :func:`dualgpu.backends.cpu.replay.step_of`)."""
        return replay.step_of(self, griddim, blockdim, args)

    def _launch_dual(self, base, g, b, args, lanes, items):
        """A launch with dual arguments of ``lanes`` lanes: tiles of :meth:`_tiles` lanes."""
        mask = tuple(dual_kind(a) for a in args)
        tile, tiles = self._tiles(lanes, args, mask, base)
        tracer = self._translation.lanes_dependent and _tracer_launch(args)
        if (not tracer and kernel_profile(self._translation).kind == "compute"
                and _lanes_last.usable(args, mask)):
            self._launch_lanes_last(base, g, b, args, mask, tile, tiles, items)
            return
        flat = flatten(args, mask)
        restore = self._restore(args, mask) if tiles > 1 else ()
        spec = self._specs.get((base, tile, mask, restore, tracer))
        if spec is None:
            spec = self._specs[(base, tile, mask, restore, tracer)] = LaunchSpec(
                base, "serial", tile, mask, restore, tracer)
        self._run(spec, flat, g, b, items * tiles, tiles,
                  [np.array(values_of(args[p]), copy=True) for p in restore])

    def _launch_lanes_last(self, base, g, b, args, mask, tile, tiles, items):
        """A compute-bound kernel's dual launch: tile by tile, lanes-last (see .lanes_last)."""
        restore = self._restore(args, mask) if tiles > 1 else ()
        targets = [values_of(args[p]) for p in restore]
        snapshots = [np.array(t, copy=True) for t in targets]
        buffers = _lanes_last.Buffers(args, mask, tile, self._access_of(args, mask)[0])
        key = (base, tile, mask, "lanes-last")
        spec = self._specs.get(key)
        if spec is None:
            spec = self._specs[key] = LaunchSpec(base, "serial", tile, mask, (), False, True)
        for t in range(tiles):
            for target, snapshot in zip(targets, snapshots) if t else ():
                np.copyto(target, snapshot)
            buffers.load(t)
            self._run(spec, buffers.flat, g, b, items, 1, (), first_tile=t)
            buffers.store(t)

    def _run(self, spec, flat, g, b, items, tiles, snapshots, first_tile=0):
        """Run the launcher of ``spec`` serially or on several cores, by its measured cost.

        Compute-bound kernels (:mod:`dualgpu.backends.cpu.lane_model`) go parallel from
        their first launch when large enough, plain or dual; lanes-last launchers compile
        with LLVM's SLP vectoriser.
        """
        run = self._runs.get(spec)
        if run is None:
            run = self._spec_run(spec)
        if spec.lanes_last:
            with _llvm.slp_vectorize():
                self._run_spec(run, spec, flat, g, b, items, tiles, snapshots, first_tile)
        else:
            self._run_spec(run, spec, flat, g, b, items, tiles, snapshots, first_tile)

    def _spec_run(self, spec):
        """The :class:`_SpecRun` of ``spec`` (made once)."""
        run = self._runs.get(spec)
        if run is None:
            costs = self._costs.get(spec)
            if costs is None:
                costs = self._costs[spec] = {}
            run = self._runs[spec] = _SpecRun(
                costs, spec._replace(mode="pieces"),
                not spec.restore and not self._translation.uses_atomics,
                kernel_profile(self._translation).kind == "compute")
        return run

    def _run_spec(self, run, spec, flat, g, b, items, tiles, snapshots, first_tile):
        eligible = cpu_parallel.ENABLED and run.eligible
        parallel = eligible and run.cost(items).parallel(items, presume=run.presume)
        self._run_decided(run, spec, flat, g, b, items, tiles, snapshots, first_tile, eligible,
                          parallel)

    def _run_decided(self, run, spec, flat, g, b, items, tiles, snapshots, first_tile, eligible,
                     parallel):
        """:meth:`_run` once its cost said whether the launch may go ``parallel``."""
        cost, presume = run.cost(items), run.presume
        threads = 1
        if parallel:  # the measured costs chose parallel: the load reading sets how many
            threads = cpu_parallel.launch_threads()
            parallel = threads > 1
        # a launch that may go parallel runs its serial launches with the pieces launcher
        # too (one thread claims every piece): one launcher to compile, not two. So do a
        # compute-bound kernel's launches, which go parallel whenever a core is free (a busy
        # machine at one launch used to cost a second launcher, 0.4-0.5 s to compile), and
        # any launch whose pieces launcher exists already.
        pieces = run.pieces
        in_pieces = parallel or (eligible and (
            items >= cpu_parallel.PIECES_SERIAL_MIN_ITEMS or pieces in self._launchers
            or (presume and items >= cpu_parallel.PARALLEL_MIN_ITEMS)))
        if in_pieces:
            launcher = self._launcher(pieces)
            control = cpu_parallel.control_array()
            chunk = cpu_parallel.chunk_length(spec.base, g, b, self._translation.inner_axis,
                                              tiles, threads)
            arguments = (*flat, *g, *b, first_tile, first_tile + tiles, chunk, control)
            if pieces not in self._warm:  # compile before helpers may call it
                cpu_parallel.compile_here(launcher, arguments)
                self._warm.add(pieces)
            start = time.perf_counter()
            cpu_parallel.run_parallel(launcher, arguments, control, threads)
            if parallel:
                cost.record_parallel(time.perf_counter() - start, items)
            else:
                cost.record_serial(time.perf_counter() - start, items)
            return
        launcher = run.launcher
        if launcher is None:
            launcher = run.launcher = self._launcher(spec)
        if spec.lanes:
            start = time.perf_counter()
            launcher(*flat, *g, *b, first_tile, first_tile + tiles, *snapshots)
        else:
            start = time.perf_counter()
            launcher(*flat, *g, *b)
        cost.record_serial(time.perf_counter() - start, items)

    def _block_launch(self, g, b, sharedmem, args, lanes):
        """Run a kernel with shared memory, barriers or warp intrinsics (see .blocks)."""
        if self._blocks is None:
            self._blocks = BlockLauncher(self._translation, RUNTIME, CONTEXT, self.fastmath)
        items = g[0] * b[0] * g[1] * b[1] * g[2] * b[2]
        parallel = cpu_parallel.ENABLED and not self._translation.uses_atomics and (
            cpu_parallel.FORCE or (
                items >= BLOCKS_PARALLEL_MIN_ITEMS and cpu_parallel.available_threads() > 1)
        )
        tile = launch_tile(lanes, self.tile_lanes or self.default_tile_lanes,
                           active_tile_lanes()) if lanes else 0
        try:
            if tile == lanes:
                self._blocks.launch(g, b, sharedmem, args, lanes, parallel)
            else:  # more lanes than a tile: one block-level launch per lane tile (as on a GPU)
                launch_tiles(lambda views: self._blocks.launch(g, b, sharedmem, views, tile,
                                                                parallel),
                             self.py_func, args, lanes // tile, tile)
        except (numba.core.errors.NumbaError, TypeError) as exc:
            self._retry_or_explain(exc, lanes, None, args, g, b)

    def _retry_or_explain(self, exc, lanes, base, args, g, b):
        """After a failed launch: recompile with NRT once if needed, or explain device arrays."""
        on_device = [p for p, a in zip(self.params, args) if _in_device_memory(a)]
        if on_device:
            verb = "is a device array" if len(on_device) == 1 else "are device arrays"
            raise DualgpuError(
                f"kernel {self.name!r}: the {BACKEND} backend runs on host arrays, but "
                f"{', '.join(on_device)} {verb}. Pass numpy arrays (dualgpu.cuda.to_device "
                "keeps host arrays on this backend), or call .copy_to_host() first."
            ) from exc
        if base is None:  # a block-level kernel: retried with NRT by its launcher
            raise exc
        tile = (self._tiles(lanes, args, tuple(dual_kind(a) for a in args))[0]
                if lanes and not isinstance(lanes, tuple) else 0)
        if tile in self._nrt_lanes or not is_nrt_error(exc):
            if base == "bounded" and isinstance(exc, numba.core.errors.NumbaError):
                # compiling the hoisted bound failed (before anything ran): fall
                # back to the ordinary launchers, which report any real error
                self._translation.guard = None
                self._forget(lambda spec: spec.base == "bounded")
                self.launch(g, b, args)
                return
            raise exc
        # something in the kernel allocates: compile again with NRT (once)
        cpu_cache.mark_needs_nrt(self._thread_key(tile, base == "bounded", False))
        self._nrt_lanes.add(tile)
        self._forget(lambda spec: spec.lanes == tile)
        self.launch(g, b, args)

    def _forget(self, which):
        self.epoch += 1
        self._runs.clear()
        for store in (self._launchers, self._costs):
            for spec in [s for s in store if which(s)]:
                del store[spec]
        self._warm = {s for s in self._warm if not which(s)}

    def __getitem__(self, config):
        """``kernel[griddim, blockdim](*args)``, as with numba.cuda."""
        if not isinstance(config, tuple) or len(config) not in (2, 3, 4):
            raise DualgpuError(
                f"kernel {self.name!r}: launch as kernel[griddim, blockdim](*args); got "
                f"kernel[{config!r}]."
            )
        griddim, blockdim = config[0], config[1]
        sharedmem = config[3] if len(config) == 4 else 0

        def configured(*args):
            self.launch(griddim, blockdim, args, sharedmem)

        return configured

    def __repr__(self):
        return f"<CpuKernel {self.name}({', '.join(self.params)})>"


def compile_kernel(kernel, fastmath=False):
    """Return a :class:`CpuKernel` running ``kernel`` on the CPU.

    Parameters
    ----------
    kernel : function or numba.cuda dispatcher
        A numba.cuda kernel (decorated or not); its source must be in a file.
    fastmath : bool
        Passed to ``numba.njit``.

    Returns the same CpuKernel for the same function and ``fastmath``.

    Raises
    ------
    DualgpuError
        If the source is unavailable or the kernel uses a feature this backend
        cannot run (constant memory other than ``cuda.const.array_like``, a
        cuda function it does not know), naming the feature.
    """
    py_func = _translate.unwrap(kernel)
    if py_func is None:
        raise DualgpuError(
            f"compile_kernel expects a Python function or a numba.cuda kernel; got "
            f"{type(kernel).__name__}. Pass the function you decorate with @cuda.jit."
        )
    if _translate.device_py_func(kernel) is not None:
        raise DualgpuError(
            f"{py_func.__qualname__!r} is a device function (device=True), not a kernel; "
            "launch the kernel that calls it instead."
        )
    fastmath = bool(fastmath)
    compiled = _KERNELS.get(py_func)
    if compiled is None:
        compiled = {}
        _KERNELS.set(py_func, compiled)
    kernel = compiled.get(fastmath)
    if kernel is None:
        kernel = compiled[fastmath] = CpuKernel(py_func, fastmath=fastmath)
    return kernel


class _SpecRun:
    """What :meth:`CpuKernel._run` decides once per launch spec: its measured costs, its
    "pieces" spec, whether it may ever go parallel (no restores, no atomics), whether the
    kernel is compute-bound, and (once built) its serial launcher."""

    __slots__ = ("costs", "pieces", "eligible", "presume", "launcher")

    def __init__(self, costs, pieces, eligible, presume):
        self.costs, self.pieces, self.eligible, self.presume = costs, pieces, eligible, presume
        self.launcher = None

    def cost(self, items):
        """The :class:`~dualgpu.backends.cpu.parallel.LaunchCost` of launches of about
        ``items`` items (within a factor of 2): a launch's fixed overhead is most of a small
        launch's cost per item (~60 ns per item on 16 cells against ~0.4 ns on 10^4), so
        small launches' samples must not estimate large ones (they once sent a kernel's
        10^4-cell launches parallel for good, 5x slower)."""
        size = int(items).bit_length()
        cost = self.costs.get(size)
        if cost is None:
            cost = self.costs[size] = cpu_parallel.LaunchCost()
        return cost


#: CpuKernel per Python function and fastmath flag: compiling a kernel twice
#: returns the same object, so its compiled launchers are reused.
_KERNELS = _translate.FunctionCache()


def _in_device_memory(arg):
    """True for numba.cuda device arrays (and DualArrays holding them), not host arrays."""
    if isinstance(arg, DualArray):
        return arg.is_device
    return hasattr(arg, "copy_to_host") and not isinstance(arg, np.ndarray)
