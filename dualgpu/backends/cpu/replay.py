"""Captured time loops on the cpu backend: one compiled function replays recorded launches.

:mod:`dualgpu.porting.capture` records the launches of a run of f that it can defer
(their arrays are buffers f allocated, their other arguments numbers and dual scalars),
as rows of a table. This module gives each kind of launch its *step* (:func:`step_of`:
the serial launcher the full launch path would run, and the constants it takes), and
compiles a *program* (:func:`compile_program`): one ``@njit`` function that walks the
table and calls each row's launcher, so that the steps of a time loop cost no Python.

A step exists only where the full path runs that launcher serially with the same
arguments whatever the run (so that a replay computes bit for bit what the launch
would): one tile of lanes (no restores between tiles), no lanes-last run (memory-bound
kernels only), no block-level kernel, no sparsity tracers, no captured duals. The
launch path may run a launch on several cores; the serial launcher computes the same
numbers (each thread's arithmetic is the same), and the first replay of every program is
checked against the launch path bit for bit by the caller.

Examples
--------
>>> program_source([("a", "s", "f")], 1)  # doctest: +ELLIPSIS
'def replay(codes, rows, V0, P0, F, I, DV0, DP0):\\n...'
"""
import itertools
import linecache

from numba import njit

from dualgpu.backends.cpu.lane_model import kernel_profile
from dualgpu.backends.cpu.launchers import LaunchSpec
from dualgpu.backends.cpu.plans import _spec, args_are_tracers
from dualgpu.backends.cpu.tiles import dual_kind
from dualgpu.core.nested import lane_key

__all__ = ["Step", "step_of", "program_source", "compile_program"]

_PROGRAMS = itertools.count()


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
                 "watch", "restore")

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

    @staticmethod
    def compile(steps, ops, groups):
        """:func:`compile_program` (the recorder above this floor reaches it here)."""
        return compile_program(steps, ops, groups)

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
    return step, None


def program_source(ops, groups, constants=None, restores=None):
    """The source of a replay function.

    ``ops``: per kind of launch (its code in the table), the source of each kernel
    argument: ``"a"`` (a buffer of group ``V<g>``/``P<g>``: the group follows, as
    ``("a", g)``, or ``"a"`` alone for group 0), ``"s"`` (a dual scalar of dual group 0,
    or ``("s", g)``), ``"f"`` (a float of table ``F``), ``"i"`` (an int of table ``I``),
    ``("n", g)`` (a number of table ``N<g>``: other numpy scalar types, bools).
    ``groups``: ``[buffer groups, dual groups, number tables]`` counts (or one number:
    buffer groups, one dual group, no number table). ``constants[k]``: the numbers launch
    kind ``k`` passes after the arguments; ``restores[k]``: the arguments whose values it
    passes copies of last. Row ``e`` of ``rows`` holds, per argument of launch ``e``, its
    index in its group or table; ``codes[e]`` its kind of launch.
    """
    if isinstance(groups, int):
        groups = [groups, 1, 0]
    buffers, duals, numbers = groups
    params = ["codes", "rows"]
    params += [f"V{g}, P{g}" for g in range(max(buffers, 1))]
    params += ["F", "I"]
    params += [f"DV{g}, DP{g}" for g in range(max(duals, 1))]
    params += [f"N{g}" for g in range(numbers)]
    lines = [f"def replay({', '.join(params)}):",
             "    for e in range(codes.shape[0]):",
             "        c = codes[e]"]
    for code, sources in enumerate(ops):
        args = []
        for k, source in enumerate(sources):
            kind, group = (source, 0) if isinstance(source, str) else source
            index = f"rows[e, {k}]"
            if kind == "a":
                args += [f"V{group}[{index}]", f"P{group}[{index}]"]
            elif kind == "s":
                args += [f"DV{group}[{index}]", f"DP{group}[{index}]"]
            elif kind == "f":
                args.append(f"F[{index}]")
            elif kind == "n":
                args.append(f"N{group}[{index}]")
            else:
                args.append(f"I[{index}]")
        keyword = "if" if code == 0 else "elif"
        lines.append(f"        {keyword} c == {code}:")
        args += [str(int(n)) for n in (constants[code] if constants else ())]
        for k in (restores[code] if restores else ()):  # snapshots, as the launch path takes
            group = 0 if isinstance(sources[k], str) else sources[k][1]
            lines.append(f"            s{k} = V{group}[rows[e, {k}]].copy()")
            args.append(f"s{k}")
        lines.append(f"            L{code}({', '.join(args)})")
    return "\n".join(lines) + "\n"


def compile_program(steps, ops, groups):
    """The ``@njit`` replay function of ``ops`` (see :func:`program_source`), launch kind
    ``k`` calling ``steps[k].launcher`` with ``steps[k].constants`` last."""
    source = program_source(ops, groups, [step.constants for step in steps],
                            [step.restore for step in steps])
    namespace = {f"L{code}": step.launcher for code, step in enumerate(steps)}
    filename = f"<captured loop {next(_PROGRAMS)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)
    return njit(namespace["replay"])
