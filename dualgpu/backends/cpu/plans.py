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

from dualgpu.backends.common.plans import compile_plan, entry_point
from dualgpu.backends.cpu import lanes_last as _lanes_last
from dualgpu.backends.cpu import parallel as cpu_parallel
from dualgpu.backends.cpu.lane_model import kernel_profile
from dualgpu.backends.cpu.launchers import LaunchSpec
from dualgpu.backends.cpu.tiles import dual_kind
from dualgpu.core.nested import lane_key

__all__ = ["make_plan", "args_are_tracers"]


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


def _function(body, namespace, name, head, prologue, failed, lanes, base):
    """Compile a plan (:func:`~dualgpu.backends.common.plans.compile_plan`): ``head`` (its
    checks, then the unpacking of ``args``), then ``body`` (indented for a ``try``), whose
    failures are retried or explained as :meth:`CpuKernel.launch` does."""
    body = ("    try:\n" + body
            + "    except (NumbaError, TypeError) as exc:\n"
            + f"        kernel._retry_or_explain(exc, {lanes}, {base!r}, args, g, b)\n")
    return compile_plan(head[0], head[1], body, namespace, name, prologue, failed)


def make_plan(kernel, griddim, blockdim, args, sharedmem, prologue="", failed=None,
              namespace=None):
    """The plan ``plan(args, stream) -> bool`` of launches like ``kernel``'s last one, or None.

    ``prologue``: source lines (indented by 4, in a function of ``args`` and ``stream``)
    that return False where the plan does not hold, run first; ``namespace``: the names
    they use; ``failed(exc, args)``: called with any error other than a
    :class:`~dualgpu.errors.DualgpuError` (it raises the clear error where there is one,
    else returns, and the error is raised as it is). None where every launch like this one
    takes the full path: block-level kernels, nested or tagged duals, no arguments.
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
    unpack = "".join(f"_a{k}, " for k in range(len(args)))
    check = (f"kernel.epoch != {kernel.epoch} or kernel.tile_lanes != {kernel.tile_lanes!r}"
             f" or switches.ENABLED is not {cpu_parallel.ENABLED}"
             f" or switches.FORCE is not {cpu_parallel.FORCE}")
    namespace = dict(namespace or {})
    namespace.update(kernel=kernel, switches=cpu_parallel, np=np, g=g, b=b,
                     NumbaError=NumbaError, launchers=kernel._launchers)
    if not lanes:
        spec = LaunchSpec(base, "serial", 0, kernel._plain_mask, ())
        if (items < cpu_parallel.PARALLEL_MIN_ITEMS and not cpu_parallel.FORCE) or (
                translation.uses_atomics):  # launch() calls the serial launcher directly
            launcher = kernel._launchers.get(spec)
            if launcher is None:
                return None
            namespace["launcher"] = entry_point(launcher, (*args, *g, *b)) or launcher
            grid = ", ".join(map(str, g + b))
            body = f"        launcher({unpack}{grid})\n"
        else:
            body = _serial_or_decided(kernel, spec, namespace, unpack.rstrip(", "), "", items,
                                      1, "()")
            check += f" or len(launchers) != {len(kernel._launchers)}"
        head = (check, f"    {unpack}= args\n")
        return _function(body, namespace, kernel.name, head, prologue, failed, 0, base)
    mask = tuple(dual_kind(a) for a in args)
    tile, tiles = kernel._tiles(lanes, args, mask, base)
    tracer = translation.lanes_dependent and args_are_tracers(args)
    compute = not tracer and kernel_profile(translation).kind == "compute"
    flat = ", ".join(_unpacked(args, mask))
    namespace.update(mask=mask, usable=_lanes_last.usable, specs=kernel._specs,
                     LaunchSpec=LaunchSpec)
    values = [v for a, kind in zip(args, mask) for v in (  # the serial launcher's arguments
        (a.values, a.partials) if kind == "a" else (a.value, a.partials) if kind == "s"
        else (a,))] + [*g, *b, 0, tiles]
    body = ""
    if compute:  # lanes-last where the arrays allow it (decided per launch, as launch does)
        body += (f"        if usable(args, mask):\n"
                 f"            kernel._launch_lanes_last({base!r}, g, b, args, mask, {tile}, "
                 f"{tiles}, {items})\n"
                 f"            return True\n")
    if tiles > 1:
        fixed, shared = _restores(kernel, args, mask)
        namespace.update(fixed=fixed, may_share=np.may_share_memory, _values=_values)
        snapshots = "[" + "".join(f"np.array(_values(_a{p}), copy=True), " for p in fixed) + "]"
        usual = _spec(kernel, base, tile, mask, fixed, tracer)
        inline = _serial_or_decided(  # (snapshots' layouts are not in the plan's key: with
            kernel, usual, namespace, flat, f", 0, {tiles}, *snapshots",  # any, the
            items * tiles, tiles, "snapshots", None if fixed else values)  # dispatcher)
        if not shared:
            body += f"        snapshots = {snapshots}\n" + inline
        else:  # in order, as CpuKernel._restore lists them
            arrays = [k for k, (a, kind) in enumerate(zip(args, mask))
                      if kind == "a" or isinstance(a, np.ndarray)]
            found = _shared_source(shared, arrays, mask)
            found = f"tuple(sorted(fixed + {found}))" if fixed else found
            body += (f"        restore = {found}\n"
                     f"        if restore == fixed:\n"
                     f"            snapshots = {snapshots}\n"
                     + textwrap.indent(inline, "    ")
                     + "        else:\n"
                     f"            key = ({base!r}, {tile}, mask, restore, {tracer!r})\n"
                     f"            other = specs.get(key)\n"
                     f"            if other is None:\n"
                     f"                other = specs[key] = LaunchSpec({base!r}, 'serial', "
                     f"{tile}, mask, restore, {tracer!r})\n"
                     f"            snapshots = [np.array(_values(args[p]), copy=True) "
                     f"for p in restore]\n"
                     f"            kernel._run(other, [{flat}], g, b, {items * tiles}, "
                     f"{tiles}, snapshots)\n")
    else:
        usual = _spec(kernel, base, tile, mask, (), tracer)
        body += _serial_or_decided(kernel, usual, namespace, flat, f", 0, {tiles}",
                                   items * tiles, tiles, "()", values)
    check += f" or len(launchers) != {len(kernel._launchers)}"
    head = (check, f"    {unpack}= args\n")
    return _function(body, namespace, kernel.name, head, prologue, failed, lanes, base)


def _spec(kernel, base, tile, mask, restore, tracer):
    """The serial :class:`LaunchSpec` of a dual launch, the one ``_launch_dual`` finds."""
    key = (base, tile, mask, restore, tracer)
    spec = kernel._specs.get(key)
    if spec is None:
        spec = kernel._specs[key] = LaunchSpec(base, "serial", tile, mask, restore, tracer)
    return spec


def _serial_or_decided(kernel, spec, namespace, flat, tail, items, tiles, snapshots,
                       values=None):
    """Source of :meth:`CpuKernel._run` for one fixed ``spec``, its constants folded in.

    Its measured cost decides serial or parallel as there; a serial launch that does not
    take the pieces launcher calls the serial launcher here (``flat``: the launcher's
    leading arguments; ``tail``: a dual launcher's tile range), through its compiled entry
    point where ``values`` (the serial launcher's arguments of this launch) find one (see
    :func:`entry_point`). The plan's head checks that no launcher was added since it was
    made (a pieces launcher changes the choice).
    """
    run = kernel._spec_run(spec)
    namespace.update(spec=spec, run=run, cost=run.cost(items), perf_counter=time.perf_counter)
    eligible = cpu_parallel.ENABLED and run.eligible
    if eligible and (items >= cpu_parallel.PIECES_SERIAL_MIN_ITEMS
                     or run.pieces in kernel._launchers
                     or (run.presume and items >= cpu_parallel.PARALLEL_MIN_ITEMS)):
        # the pieces launcher, serial or not: CpuKernel._run_decided
        return f"        kernel._run(spec, [{flat}], g, b, {items}, {tiles}, {snapshots})\n"
    grid = ", ".join(f"{n}" for n in namespace["g"] + namespace["b"])
    entry = None if run.launcher is None or values is None else entry_point(run.launcher,
                                                                               values)
    namespace["entry"] = entry
    serial = ("launcher = run.launcher\n"
              "if launcher is None:\n"
              "    launcher = run.launcher = kernel._launcher(spec)\n") if entry is None else (
              "launcher = entry\n")
    if items < cpu_parallel.PARALLEL_MIN_ITEMS and not cpu_parallel.FORCE:
        # serial whatever its cost (LaunchCost.parallel): nothing to measure
        return textwrap.indent(serial + f"launcher({flat}, {grid}{tail})\n", " " * 8)
    serial += ("start = perf_counter()\n"
               f"launcher({flat}, {grid}{tail})\n"
               f"cost.record_serial(perf_counter() - start, {items})\n")
    if not eligible:
        return textwrap.indent(serial, " " * 8)
    if run.presume:
        decide = f"        if cost.parallel({items}, presume=True):\n"
    else:  # cost.parallel's first test inline (where it returns False, it changes nothing)
        decide = (f"        serial = cost.serial\n"
                  f"        if (serial and min(serial) * {items} >= "
                  f"switches.PARALLEL_MIN_SECONDS\n"
                  f"                and cost.parallel({items}, presume=False)):\n")
    return (decide
            + f"            kernel._run_decided(run, spec, [{flat}], g, b, {items}, {tiles}, "
              f"{snapshots}, 0, True, True)\n"
            + "        else:\n" + textwrap.indent(serial, " " * 12))


def args_are_tracers(args):
    """The tracer mode of the launch's duals: True for local sparsity tracers (uint64
    dependency-bitset lanes), ``"global"`` for global ones (int64), False otherwise."""
    for arg in args:
        if dual_kind(arg):
            dtype = np.asarray(arg.partials).dtype
            return True if dtype == np.uint64 else "global" if dtype == np.int64 else False
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


def _shared_source(shared, arrays, mask):
    """Source of the tuple of ``shared`` positions whose array shares memory with another
    array argument (``arrays``: the positions of the array arguments)."""
    def values(k):
        return f"_a{k}.values" if mask[k] == "a" else f"_a{k}"

    parts = []
    for position in shared:
        others = " or ".join(f"may_share({values(position)}, {values(k)})"
                             for k in arrays if k != position)
        parts.append(f"(({position},) if {others or 'False'} else ())")
    return " + ".join(parts)
