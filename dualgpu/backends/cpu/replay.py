"""Captured time loops on the cpu backend: one compiled function replays recorded launches.

:mod:`dualgpu.porting.capture` records the launches of a run of f that it can defer
(their arrays are buffers f allocated, their other arguments numbers and dual scalars),
as rows of a table. This module gives each kind of launch its *step* (:func:`step_of`:
the serial launcher the full launch path would run, and the constants it takes), and
compiles a *program* (:func:`compile_program`): one ``@njit`` function that walks the
table and calls each row's launcher, so that the steps of a time loop cost no Python.

A step exists only where the full path runs that launcher serially with the same
arguments whatever the run (so that a replay computes bit for bit what the launch
would): no lanes-last run (memory-bound kernels only), no block-level kernel, no sparsity
tracers, no captured duals; several lane tiles only with the arrays the launch path
restores between them passed as snapshots. The launch path may run a launch on several
cores; the serial launcher computes the same numbers (each thread's arithmetic is the
same), and the first replay of every program is checked against the launch path bit for
bit by the caller. A table whose launches all run the same lane tiles runs tile by tile
(:func:`tiles_outer`, :func:`run_program`): the whole table per tile, on helper threads
where that is measured to pay.

Examples
--------
>>> program_source([("a", "s", "f")], 1)  # doctest: +ELLIPSIS
'def replay(codes, rows, V0, P0, F, I, DV0, DP0):\\n...'
"""
import itertools
import linecache
import time

import numpy as np

from numba import njit

from dualgpu.backends.cpu.lane_model import kernel_profile
from dualgpu.backends.cpu import parallel as _parallel
from dualgpu.backends.cpu.launchers import LaunchSpec, _restore
from dualgpu.backends.cpu.parallel import _PIECES, _fetch_add, claim, finish
from dualgpu.backends.cpu.plans import _spec, args_are_tracers
from dualgpu.backends.cpu.tiles import dual_kind
from dualgpu.core.nested import lane_key

__all__ = ["Step", "step_of", "tiles_outer", "program_source", "compile_program",
           "outer_inputs", "run_program", "TILES_OUTER", "STATS"]

_PROGRAMS = itertools.count()

#: False: programs run each launch's lane tiles in turn (see :func:`tiles_outer`).
TILES_OUTER = True

# the control array of a tile-by-tile program: the parallel launchers' slots, then the next
# thread slot, the tiles slot 0 ran, and the last slot that finished a tile
_SLOT, _RAN0, _LAST = _parallel.CONTROL_SLOTS, _parallel.CONTROL_SLOTS + 1, \
    _parallel.CONTROL_SLOTS + 2
_COSTS = {}  # program entry -> LaunchCost of its tile-by-tile runs

#: Tile-by-tile runs so far: on this thread alone, with helpers, and those where the
#: buffers took the values of a helper's slot (slot 0 ran no tile).
STATS = {"serial": 0, "parallel": 0, "taken_from_a_helper": 0}


class Step:
    """One kind of launch as a replay calls it.

    Attributes
    ----------
    launcher : numba dispatcher
        The serial launcher.
    mask : tuple of str
        Per kernel argument: "a" (DualArray: values and partials), "s" (Dual scalar:
        value and partials) or "" (passed as it is).
    constants : tuple of int
        The launcher's trailing arguments: the grid (3 + 3 numbers), then for a dual
        launch the tile range ``0, tiles``.
    kernel, epoch, tile_lanes
        The :class:`~dualgpu.backends.cpu.kernel.CpuKernel` and its state when the step
        was made (a step whose kernel's state changed is made again).
    distinct : bool
        True where the step holds only for launches whose dual arrays are distinct
        buffers (several tiles of lanes: an array written through another argument
        would be restored between tiles).
    restore : tuple of int
        The dual array arguments whose values the launcher restores between lane tiles
        (read and written by the kernel): the replay passes a copy taken before the launch.
    watch : object or None
        Set by the caller: a kernel whose captured globals are looked at before each
        launch is deferred (one that holds a dual makes the launch run at once).
    """

    __slots__ = ("launcher", "mask", "constants", "kernel", "epoch", "tile_lanes", "distinct",
                 "watch", "restore", "tile", "plain_arrays")

    def __init__(self, launcher, mask, constants, kernel):
        self.launcher = launcher
        self.mask = mask
        self.constants = constants
        self.kernel = kernel
        self.epoch = kernel.epoch
        self.tile_lanes = kernel.tile_lanes
        self.distinct = False
        self.watch = None
        self.restore = ()
        self.tile = 0
        self.plain_arrays = False  # a dual launch that also takes plain arrays

    @staticmethod
    def compile(steps, ops, groups):
        """:func:`compile_program` (the recorder above this floor reaches it here)."""
        return compile_program(steps, ops, groups)

    @staticmethod
    def outer(steps):
        """:func:`tiles_outer` (the recorder above this floor reaches it here)."""
        return tiles_outer(steps)

    @staticmethod
    def outer_inputs(values, tiles):
        """:func:`outer_inputs` (the recorder above this floor reaches it here)."""
        return outer_inputs(values, tiles)

    @staticmethod
    def run(entry, inputs, steps, codes, groups):
        """:func:`run_program` (the recorder above this floor reaches it here)."""
        run_program(entry, inputs, steps, codes, groups)

    def holds(self):
        """True while the kernel is in the state the step was made in."""
        kernel = self.kernel
        return kernel.epoch == self.epoch and kernel.tile_lanes == self.tile_lanes


def _dims(value):
    dims = (value,) if isinstance(value, int) else tuple(value)
    return tuple(int(d) for d in dims) + (1,) * (3 - len(dims))


def step_of(kernel, griddim, blockdim, args):
    """``(step, None)`` for launches like ``kernel[griddim, blockdim](*args)``, or
    ``(None, why not)``.

    Ask after the launch ran on the full path (its launchers exist, its arguments are
    fine). No step where the full path does something a replay cannot repeat bit for
    bit: a block-level kernel, nested or tagged duals, lane tiles with arrays restored
    between them (a kernel that reads and writes one array), a compute-bound kernel (it
    runs lanes-last), sparsity tracers. A step of several tiles holds only for launches
    whose dual arrays are distinct (:attr:`Step.distinct`).
    """
    translation = kernel._translation
    if translation.block_level:
        return None, "a block-level kernel (shared memory, syncthreads)"
    lanes = lane_key(args, f"kernel {kernel.name!r}")
    if isinstance(lanes, tuple):
        return None, "nested or tagged duals"
    g, b = _dims(griddim), _dims(blockdim)
    base = kernel._base(args)
    if not lanes:
        spec = LaunchSpec(base, "serial", 0, kernel._plain_mask, ())
        return Step(kernel._launcher(spec), kernel._plain_mask, g + b, kernel), None
    if translation.lanes_dependent and args_are_tracers(args):
        return None, "sparsity tracers"
    if kernel_profile(translation).kind == "compute":
        return None, "a compute-bound kernel (its dual launches run lanes-last)"
    mask = tuple(dual_kind(a) for a in args)
    tile, tiles = kernel._tiles(lanes, args, mask, base)
    restore = kernel._restore(args, mask) if tiles > 1 else ()
    if any(mask[p] != "a" for p in restore):
        return None, "a plain array restored between lane tiles"
    spec = _spec(kernel, base, tile, mask, restore, False)
    step = Step(kernel._launcher(spec), mask, g + b + (0, tiles), kernel)
    step.distinct = tiles > 1
    step.restore = restore
    step.tile = tile
    step.plain_arrays = any(m == "" and isinstance(a, np.ndarray) for m, a in zip(mask, args))
    return step, None


def tiles_outer(steps):
    """The number of lane tiles a program of ``steps`` runs one by one through its whole
    table (:func:`program_source`'s ``outer``), or 0 where it runs each launch's tiles in turn.

    A table runs tile by tile when every launch is a dual launch of the same tiles (the
    same lanes per tile, more than one tile): each tile then keeps its lanes of every buffer
    in cache for the whole run, as a hand-written loop over directions does, instead of
    streaming all lanes through the cache at every launch.
    """
    if not TILES_OUTER or not steps or any(step.plain_arrays for step in steps):
        return 0  # (a plain array a launch writes would need restoring before each tile)
    shapes = {(step.tile, step.constants[-1]) if step.tile else None for step in steps}
    if len(shapes) != 1 or None in shapes:
        return 0
    (_, tiles), = shapes
    return tiles if tiles > 1 else 0


def program_source(ops, groups, constants=None, restores=None, outer=0):
    """The source of a replay function.

    ``ops``: per kind of launch (its code in the table), the source of each kernel
    argument: ``"a"`` (a buffer of group ``V<g>``/``P<g>``: the group follows, as
    ``("a", g)``, or ``"a"`` alone for group 0), ``"s"`` (a dual scalar of dual group 0,
    or ``("s", g)``), ``"f"`` (a float of table ``F``), ``"i"`` (an int of table ``I``),
    ``("n", g)`` (a number of table ``N<g>``: other numpy scalar types, bools), ``("p", g)``
    (a plain array of group ``A<g>``, passed as it is).
    ``groups``: ``[buffer groups, dual groups, number tables, plain array groups]`` counts
    (the last may be left out: none; or one number: buffer groups, one dual group, no
    number table). ``constants[k]``: the numbers launch
    kind ``k`` passes after the arguments; ``restores[k]``: the arguments whose values it
    passes copies of last. Row ``e`` of ``rows`` holds, per argument of launch ``e``, its
    index in its group or table; ``codes[e]`` its kind of launch.

    ``outer`` (:func:`tiles_outer`): the whole table runs once per lane tile, tile
    ``t`` launching lanes of tile ``t`` only; before each tile after the first, every
    buffer's values are copied back from its snapshot ``S<g>`` (the values the table
    started from: the function takes one tuple of snapshots per buffer group, last), so
    each tile computes the values, and its lanes, as the launches would.
    """
    if isinstance(groups, int):
        groups = [groups, 1, 0]
    buffers, duals, numbers, plains = (list(groups) + [0])[:4]
    params = ["codes", "rows"]
    params += [f"V{g}, P{g}" for g in range(max(buffers, 1))]
    params += ["F", "I"]
    params += [f"DV{g}, DP{g}" for g in range(max(duals, 1))]
    params += [f"N{g}" for g in range(numbers)]
    params += [f"A{g}" for g in range(plains)]
    pad = ""
    if outer:
        params += [f"S{g}" for g in range(buffers)] + [f"W{g}" for g in range(buffers)]
        params.append("ctl")
    lines = [f"def replay({', '.join(params)}):"]
    if outer:
        pad = "    "
        lines += [f"    ctl[{_PIECES}] = {int(outer)}",
                  f"    me = _fetch_add(ctl, {_SLOT}, 1)",
                  "    if me * len(V0) > len(W0):",
                  "        return",
                  "    ran = 0",
                  "    while True:",
                  "        t = _claim(ctl, 1)",
                  f"        if t >= {int(outer)}:",
                  "            break",
                  "        if me > 0 or ran > 0:"]
        for g in range(buffers):
            lines += [f"            for k in range(len(V{g})):",
                      f"                _restore({_values(g, 'k')}, S{g}[k])"]
    lines += [pad + "    for e in range(codes.shape[0]):", pad + "        c = codes[e]"]
    for code, sources in enumerate(ops):
        args = []
        for k, source in enumerate(sources):
            kind, group = (source, 0) if isinstance(source, str) else source
            index = f"rows[e, {k}]"
            if kind == "a":
                args += [_values(group, index) if outer else f"V{group}[{index}]",
                         f"P{group}[{index}]"]
            elif kind == "s":
                args += [f"DV{group}[{index}]", f"DP{group}[{index}]"]
            elif kind == "f":
                args.append(f"F[{index}]")
            elif kind == "n":
                args.append(f"N{group}[{index}]")
            elif kind == "p":
                args.append(f"A{group}[{index}]")
            else:
                args.append(f"I[{index}]")
        keyword = "if" if code == 0 else "elif"
        lines.append(pad + f"        {keyword} c == {code}:")
        # int64 numbers, not literals: a literal would compile another specialisation of
        # the launcher (its grid folded in), which LLVM may round differently in the last
        # bit of a partial (reassociated lane arithmetic) than the launch path's own
        numbers_after = [f"_i64({int(n)})" for n in (constants[code] if constants else ())]
        if outer:  # one tile per launch: the launcher never restores (its snapshots unused)
            args += numbers_after[:-2] + ["t", "t + 1"]
            for k in (restores[code] if restores else ()):
                group = 0 if isinstance(sources[k], str) else sources[k][1]
                args.append(_values(group, f"rows[e, {k}]"))
        else:
            args += numbers_after
            for k in (restores[code] if restores else ()):  # snapshots, as the launch takes
                group = 0 if isinstance(sources[k], str) else sources[k][1]
                lines.append(f"            s{k} = V{group}[rows[e, {k}]].copy()")
                args.append(f"s{k}")
        lines.append(pad + f"            L{code}({', '.join(args)})")
    if outer:  # what the caller reads once all tiles are done (see run_outer)
        lines += ["        ran += 1",
                  "        if me == 0:",
                  f"            ctl[{_RAN0}] = ran",
                  f"        ctl[{_LAST}] = me",
                  "        _finish(ctl, 1)"]
    return "\n".join(lines) + "\n"


def _values(group, index):
    """The values array ``index`` of buffer group ``group`` as thread slot ``me`` sees it:
    slot 0 the buffers themselves, slot j its private copies ``W<g>[(j - 1) * n + index]``."""
    return f"(V{group}[{index}] if me == 0 else W{group}[(me - 1) * len(V{group}) + {index}])"


def compile_program(steps, ops, groups):
    """The ``@njit`` replay function of ``ops`` (see :func:`program_source`), launch kind
    ``k`` calling ``steps[k].launcher`` with ``steps[k].constants`` last."""
    source = program_source(ops, groups, [step.constants for step in steps],
                            [step.restore for step in steps], tiles_outer(steps))
    namespace = {f"L{code}": step.launcher for code, step in enumerate(steps)}
    namespace.update(_restore=_restore, _claim=claim, _finish=finish, _fetch_add=_fetch_add,
                     _i64=np.int64)
    filename = f"<captured loop {next(_PROGRAMS)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)
    return njit(nogil=True)(namespace["replay"])


def outer_inputs(values, tiles):
    """The inputs a tile-by-tile program (:func:`tiles_outer`) of ``tiles`` tiles takes
    after the others.

    ``values``: per buffer group, the tuple of its buffers' values. Returns, per group, the
    snapshots of its values (what every tile starts from), then per group the private
    values of the thread slots after the first (slot j's copy of buffer k at
    ``(j - 1) * n + k``), then the control array. Slots: the threads a launch may use
    (:func:`~dualgpu.backends.cpu.parallel.thread_bound`, which the load does not change:
    the tuples' lengths are part of the program's compiled types), no more than the tiles,
    and at least two, so that the tuples have a type.
    """
    slots = max(min(_parallel.thread_bound(), tiles) - 1, 1)
    snapshots = [tuple(v.copy() for v in group) for group in values]
    private = [tuple(np.zeros_like(v) for _ in range(slots) for v in group) for group in values]
    return snapshots + private + [np.zeros(_parallel.CONTROL_SLOTS + 3, np.int64)]


def run_program(entry, inputs, steps, codes, groups):
    """Run a program's compiled ``entry`` on ``inputs`` (``groups`` buffer groups): at once,
    or, for a tile-by-tile program, its tiles on this thread and on helper threads where
    its measured costs say that pays (:class:`dualgpu.backends.cpu.parallel.LaunchCost`,
    as for launches).

    Each thread slot runs its tiles on its own copy of the values; slot 0 on the buffers
    themselves. Where slot 0 ran no tile, the buffers take the values of a slot that did
    (every tile computes the same values).
    """
    tiles = tiles_outer(steps)
    if not tiles:
        entry(*inputs)
        return
    control = inputs[-1]
    items = tiles * int(np.bincount(codes, minlength=len(steps)) @ _threads(steps))
    cost = _COSTS.get(entry)
    if cost is None:
        if len(_COSTS) > 1024:
            _COSTS.clear()
        cost = _COSTS[entry] = _parallel.LaunchCost()
    snapshots, private = inputs[-1 - 2 * groups:-1 - groups], inputs[-1 - groups:-1]
    threads = min(_parallel.launch_threads(), 1 + len(private[0]) // len(snapshots[0]))
    start = time.perf_counter()
    if threads > 1 and _parallel.ENABLED and cost.parallel(items):
        _parallel.run_parallel(entry, inputs, control, threads)
        cost.record_parallel(time.perf_counter() - start, items)
        STATS["parallel"] += 1
    else:
        entry(*inputs)
        cost.record_serial(time.perf_counter() - start, items)
        STATS["serial"] += 1
    if control[_RAN0] == 0:  # the helpers ran every tile: their values are the results
        STATS["taken_from_a_helper"] += 1
        slot = int(control[_LAST])
        for g in range(groups):
            buffers = inputs[2 + 2 * g]
            n = len(buffers)
            for k, target in enumerate(buffers):
                target[...] = private[g][(slot - 1) * n + k]


def _threads(steps):
    """CUDA threads per launch of each step (its grid's numbers)."""
    return np.array([int(np.prod(step.constants[:6])) for step in steps], np.int64)
