"""Launch plans of the cpu backend: a repeated launch binds its arguments and calls compiled code.

:meth:`CpuKernel.plan <dualgpu.backends.cpu.kernel.CpuKernel.plan>` is asked after a launch
ran :meth:`~dualgpu.backends.cpu.kernel.CpuKernel.launch` (so its launchers exist and it
succeeded). It decides once what that path decides from the kinds of the arguments and
the configuration (see :mod:`dualgpu.porting.launch_plan`, which keys the plans): the
grid as three numbers each, the loop shape, the lanes, which arguments are duals, the
tile of lanes and how many tiles, the arrays to restore between tiles that the kernel
reads and writes, the launcher. What it generates is one Python function per plan that
splits the duals into the launcher's arrays and calls the launcher.

Checked again at each launch, because they may change with the same kinds of arguments:

- the kernel's state: a retry that recompiled (with NRT, or without the hoisted guard)
  forgets launchers and bumps :attr:`CpuKernel.epoch`; its ``tile_lanes``;
- the parallel switches (:data:`dualgpu.backends.cpu.parallel.ENABLED`, ``FORCE``);
- with several lane tiles, which written arrays share memory with another argument
  (they are restored between tiles), and for a compute-bound kernel whether the launch
  can run lanes-last (:func:`dualgpu.backends.cpu.lanes_last.usable`).

A plan that no longer holds returns False, and the caller takes the full path.
Whether a launch runs serially or on several cores stays decided per launch by its
measured cost, as on the full path (:meth:`CpuKernel._run`).
"""
import textwrap
import time

import numpy as np
from numba.core.errors import NumbaError

from dualgpu.backends.cpu import lanes_last as _lanes_last
from dualgpu.backends.cpu import parallel as cpu_parallel
from dualgpu.backends.cpu.lane_model import kernel_profile
from dualgpu.backends.cpu.launchers import LaunchSpec
from dualgpu.backends.cpu.tiles import dual_kind
from dualgpu.core.nested import lane_key

__all__ = ["make_plan"]


def _dims(value):
    dims = (value,) if isinstance(value, (int, np.integer)) else tuple(value)
    return tuple(int(d) for d in dims) + (1,) * (3 - len(dims))


def _unpacked(args, mask):
    """Source of the launcher's arguments for kernel arguments ``_a0, _a1...``."""
    names = []
    for k, kind in enumerate(mask):
        if kind == "a":
            names += [f"_a{k}.values", f"_a{k}.partials"]
        elif kind == "s":
            names += [f"_a{k}.value", f"_a{k}.partials"]
        else:
            names.append(f"_a{k}")
    return names


def _function(source, namespace, name):
    exec(compile(source, f"<cpu launch plan {name}>", "exec"), namespace)
    return namespace["plan"]


def make_plan(kernel, griddim, blockdim, args, sharedmem):
    """The plan ``plan(args) -> bool`` of launches like ``kernel``'s last one, or None.

    None where every launch like it takes the full path: block-level kernels, nested
    or tagged duals, no arguments.
    """
    translation = kernel._translation
    if not args or translation.block_level or sharedmem:
        return None
    lanes = lane_key(args, f"kernel {kernel.name!r}")
    if isinstance(lanes, tuple):
        return None
    g, b = _dims(griddim), _dims(blockdim)
    base = kernel._base(args)
    items = g[0] * b[0] * g[1] * b[1] * g[2] * b[2]
    grid = ", ".join(map(str, g + b))
    unpack = "".join(f"_a{k}, " for k in range(len(args)))
    head = (f"def plan(args):\n"
            f"    if (kernel.epoch != {kernel.epoch} or kernel.tile_lanes != {kernel.tile_lanes!r}"
            f" or switches.ENABLED is not {cpu_parallel.ENABLED}"
            f" or switches.FORCE is not {cpu_parallel.FORCE}):\n"
            f"        return False\n"
            f"    {unpack}= args\n")
    namespace = {"kernel": kernel, "switches": cpu_parallel, "np": np, "g": g, "b": b,
                 "NumbaError": NumbaError}
    if not lanes:
        spec = LaunchSpec(base, "serial", 0, kernel._plain_mask, ())
        if (items < cpu_parallel.PARALLEL_MIN_ITEMS and not cpu_parallel.FORCE) or (
                translation.uses_atomics):
            launcher = kernel._launchers.get(spec)
            if launcher is None:
                return None
            namespace["launcher"] = launcher
            call = f"launcher({unpack}{grid})"
            source = head + f"    try:\n        {call}\n"
        else:
            source = head + "    try:\n" + _serial_or_decided(
                kernel, spec, namespace, unpack.rstrip(", "), "", items, 1, "()")
        source += _RETRY.format(lanes=0, base=base)
        return _function(source, namespace, kernel.name)
    mask = tuple(dual_kind(a) for a in args)
    tile, tiles = kernel._tiles(lanes, args, mask, base)
    tracer = translation.lanes_dependent and args_are_tracers(args)
    compute = not tracer and kernel_profile(translation).kind == "compute"
    flat = "[" + ", ".join(_unpacked(args, mask)) + "]"
    namespace.update(mask=mask, usable=_lanes_last.usable, specs=kernel._specs,
                     LaunchSpec=LaunchSpec)
    body = ""
    if compute:  # lanes-last where the arrays allow it (decided per launch, as launch does)
        body += (f"        if usable(args, mask):\n"
                 f"            kernel._launch_lanes_last({base!r}, g, b, args, mask, {tile}, "
                 f"{tiles}, {items})\n"
                 f"            return True\n")
    if tiles > 1:
        fixed, shared = _restores(kernel, args, mask)
        namespace.update(fixed=fixed, may_share=np.may_share_memory, _values=_values,
                         specs=kernel._specs)
        snapshots = "[" + "".join(f"np.array(_values(_a{p}), copy=True), " for p in fixed) + "]"
        usual = _spec(kernel, base, tile, mask, fixed, tracer)
        inline = _serial_or_decided(kernel, usual, namespace, flat[1:-1],
                                    f", 0, {tiles}, *snapshots", items * tiles, tiles,
                                    "snapshots")
        if not shared:
            body += f"        snapshots = {snapshots}\n" + inline
        else:  # in order, as CpuKernel._restore lists them
            arrays = [k for k, (a, kind) in enumerate(zip(args, mask))
                      if kind == "a" or isinstance(a, np.ndarray)]
            body += (f"        restore = tuple(sorted(fixed + "
                     f"{_shared_source(shared, arrays)}))\n"
                     f"        if restore == fixed:\n"
                     f"            snapshots = {snapshots}\n"
                     + textwrap.indent(inline, "    ")
                     + f"        else:\n"
                     f"            key = ({base!r}, {tile}, mask, restore, {tracer})\n"
                     f"            other = specs.get(key)\n"
                     f"            if other is None:\n"
                     f"                other = specs[key] = LaunchSpec({base!r}, 'serial', {tile}, "
                     f"mask, restore, {tracer})\n"
                     f"            snapshots = [np.array(_values(args[p]), copy=True) "
                     f"for p in restore]\n"
                     f"            kernel._run(other, {flat}, g, b, {items * tiles}, {tiles}, "
                     f"snapshots)\n")
    else:
        usual = _spec(kernel, base, tile, mask, (), tracer)
        body += _serial_or_decided(kernel, usual, namespace, flat[1:-1], f", 0, {tiles}",
                                   items * tiles, tiles, "()")
    source = head + "    try:\n" + body + _RETRY.format(lanes=lanes, base=base)
    return _function(source, namespace, kernel.name)


def _spec(kernel, base, tile, mask, restore, tracer):
    """The serial :class:`LaunchSpec` of a dual launch, the one ``_launch_dual`` finds."""
    key = (base, tile, mask, restore, tracer)
    spec = kernel._specs.get(key)
    if spec is None:
        spec = kernel._specs[key] = LaunchSpec(base, "serial", tile, mask, restore, tracer)
    return spec


def _serial_or_decided(kernel, spec, namespace, flat, tail, items, tiles, snapshots):
    """Source of :meth:`CpuKernel._run` for one fixed ``spec`` with its constants in: its
    cost decides serial or parallel as there, and a serial launch outside the pieces
    launcher calls the launcher here (``flat``: the launcher's leading arguments; ``tail``:
    the tile range of a dual launcher)."""
    run = kernel._spec_run(spec)
    namespace.update(spec=spec, run=run, cost=run.cost, launchers=kernel._launchers,
                     pieces=run.pieces, perf_counter=time.perf_counter)
    # as CpuKernel._run_decided: the pieces launcher when the launch may go parallel, when
    # it is large, or once that launcher exists
    eligible = cpu_parallel.ENABLED and run.eligible
    static = eligible and (items >= cpu_parallel.PIECES_SERIAL_MIN_ITEMS or (
        run.presume and items >= cpu_parallel.PARALLEL_MIN_ITEMS))
    grid = ", ".join(f"{n}" for n in namespace["g"] + namespace["b"])
    if static:
        return (f"        kernel._run(spec, [{flat}], g, b, {items}, {tiles}, {snapshots})\n")
    if not eligible:
        decide = "        if False:\n"
    else:
        decide = (f"        parallel = cost.parallel({items}, presume={run.presume})\n"
                  f"        if parallel or pieces in launchers:\n")
    return (decide
            + f"            kernel._run_decided(run, spec, [{flat}], g, b, {items}, {tiles}, "
              f"{snapshots}, 0, {eligible}, {'parallel' if eligible else 'False'})\n"
            + "        else:\n"
            + "            launcher = run.launcher\n"
            + "            if launcher is None:\n"
            + "                launcher = run.launcher = kernel._launcher(spec)\n"
            + "            start = perf_counter()\n"
            + f"            launcher({flat}, {grid}{tail})\n"
            + f"            cost.record_serial(perf_counter() - start, {items})\n")


#: The end of a plan: a failed launch is retried or explained as the full path does.
_RETRY = """\
    except (NumbaError, TypeError) as exc:
        kernel._retry_or_explain(exc, {lanes}, {base!r}, args, g, b)
    return True
"""


def args_are_tracers(args):
    """True when the launch's duals are sparsity tracers (uint64 dependency-bitset lanes)."""
    for arg in args:
        kind = dual_kind(arg)
        if kind:
            return np.asarray(arg.partials).dtype == np.uint64
    return False


def _values(arg):
    return arg.values if dual_kind(arg) == "a" else arg


def _restores(kernel, args, mask):
    """``(always, shared)``: positions restored between tiles whatever the arrays (read and
    written), and written-only array positions restored when they share memory with
    another argument (checked per launch)."""
    flags = kernel._access_of(args, mask)[0]
    always, shared = [], []
    for position, ((read, written), arg, kind) in enumerate(zip(flags, args, mask)):
        is_array = kind == "a" or isinstance(arg, np.ndarray)
        if not is_array or not written:
            continue
        (always if read else shared).append(position)
    return tuple(always), tuple(shared)


def _shared_source(shared, arrays):
    """Source of the tuple of ``shared`` positions whose array shares memory with another
    array argument (``arrays``: the positions of the array arguments)."""
    parts = []
    for position in shared:
        others = " or ".join(f"may_share(_values(_a{position}), _values(_a{k}))"
                             for k in arrays if k != position)
        parts.append(f"(({position},) if {others or 'False'} else ())")
    return " + ".join(parts)
