"""The cpu backend's launchers: generated ``numba.njit`` loops that run a thread function.

A launcher has the kernel's parameter names (see :mod:`dualgpu.backends.cpu.kernel`)
and calls ``_dg_thread(<params>, <15 context values>)`` once per CUDA thread.
What a launcher looks like is set by a :class:`LaunchSpec`:

``base``
    ``"flat"`` walks the global index directly, innermost over the axis the
    kernel's last array index uses (LLVM vectorises that loop); ``"bounded"``
    is flat with the kernel's bounds guard hoisted out (the prologue sets
    ``_dg_mx``, ``_dg_my`` and ``_dg_mz``, the indices per axis that pass it);
    ``"blocks"`` walks blocks then the threads of each block (kernels reading
    threadIdx/blockIdx).
``mode``
    ``"serial"`` runs everything in order. ``"pieces"`` cuts the launch into
    pieces (a chunk of one row, or a run of blocks, of one lane tile) that the
    caller and helper threads claim from a shared counter
    (:mod:`dualgpu.backends.cpu.parallel`); such launchers are compiled with
    ``nogil=True``. Threads of one launch then run in no fixed order, as on a
    GPU: a kernel in which two threads write one element (a race on a GPU)
    may end with either value, and kernels with atomics never run this way.
``lanes``, ``mask``
    Plain launches (``lanes == 0``) take the kernel's arguments as they are.
    Dual launches take every DualArray as two arrays, its values and its
    partials of L lanes (``_dg_av_<p>``, ``_dg_ap_<p>``), and every Dual as its
    value and its partials array; ``mask`` says which parameter is which
    (``"a"``, ``"s"`` or ``""``). The launcher runs lane tiles ``_dg_t0`` to
    ``_dg_t1 - 1`` of ``lanes`` lanes each: for tile t it binds the kernel's
    parameter names to views of lanes ``t * lanes`` to ``(t + 1) * lanes - 1``,
    so the thread function is the one compiled for ``lanes`` lanes, whatever L.
``restore``
    Every tile recomputes the values. Arrays the kernel both reads and writes
    (see :mod:`dualgpu.backends.common.access`) are copied back from a snapshot taken
    before the launch (``_dg_s<k>``) before each tile after the first; a
    ``"pieces"`` launcher with several tiles never has any.

Examples
--------
>>> spec = LaunchSpec("flat", "serial", 0, ("", ""), ())
>>> print(launcher_source(spec, ("u", "v"), "", "x").splitlines()[0])
def _dg_launch(u, v, _dg_gdx, _dg_gdy, _dg_gdz, _dg_bdx, _dg_bdy, _dg_bdz):
"""
import collections
import textwrap

from llvmlite import ir
from numba import njit, types
from numba.extending import overload

from dualgpu.backends.common import translate as _translate
from dualgpu.backends.cpu import cache as cpu_cache
from dualgpu.backends.cpu.parallel import claim, finish
from dualgpu.compiled.arrays import make_dual_array
from dualgpu.compiled.intrinsics import intrinsic
from dualgpu.compiled.complex_duals import make_scalar_dual

__all__ = ["LaunchSpec", "launcher_source", "make_launcher", "flatten", "ORDERS", "CONTEXT"]

#: The thread function's extra parameters, in order: global index (what
#: ``cuda.grid`` returns), thread index, block index, block size, grid size.
CONTEXT = (
    "_dg_gx", "_dg_gy", "_dg_gz",
    "_dg_tx", "_dg_ty", "_dg_tz",
    "_dg_bx", "_dg_by", "_dg_bz",
    "_dg_bdx", "_dg_bdy", "_dg_bdz",
    "_dg_gdx", "_dg_gdy", "_dg_gdz",
)

#: Loop order (outer, middle, inner) for each choice of innermost axis.
ORDERS = {"x": ("z", "y", "x"), "y": ("z", "x", "y"), "z": ("y", "x", "z")}

LaunchSpec = collections.namedtuple("LaunchSpec", "base mode lanes mask restore tracer lanes_last",
                                    defaults=(False, False))
LaunchSpec.__doc__ = """What a launcher does (see the module docstring); hashable, a cache key.

``tracer``: the duals are sparsity tracers (a detection run: scratch gets tracer lanes).
``lanes_last``: each dual array's partials come as one tile laid out lanes-last (a Fortran
array of shape ``(lanes, *shape)``, see :mod:`dualgpu.backends.cpu.lanes_last`), bound
as they are: the launcher runs that one tile."""

_GRID = "_dg_gdx, _dg_gdy, _dg_gdz, _dg_bdx, _dg_bdy, _dg_bdz"
_ZERO_CONTEXT = "    _dg_tx = _dg_ty = _dg_tz = _dg_bx = _dg_by = _dg_bz = _dg_gdx * 0  # int64\n"

#: Serial bodies (one tile). {i} is the innermost axis, {m} and {o} the others.
_SERIAL = {
    "blocks": """\
    _dg_gdxy = _dg_gdx * _dg_gdy
    for _dg_block in range(_dg_gdxy * _dg_gdz):
{block}""",
    "flat": _ZERO_CONTEXT + """\
    for _dg_g{o} in range(_dg_gd{o} * _dg_bd{o}):
        for _dg_g{m} in range(_dg_gd{m} * _dg_bd{m}):
            for _dg_g{i} in range(_dg_gd{i} * _dg_bd{i}):
                {call}
""",
    "bounded": _ZERO_CONTEXT + """\
    for _dg_g{o} in range(_dg_m{o}):
        for _dg_g{m} in range(_dg_m{m}):
            for _dg_g{i} in range(_dg_m{i}):
                {call}
""",
}

#: The threads of block ``_dg_block`` (indented for the loop over blocks).
_BLOCK = """\
        _dg_bz = _dg_block // _dg_gdxy
        _dg_rest = _dg_block - _dg_bz * _dg_gdxy
        _dg_by = _dg_rest // _dg_gdx
        _dg_bx = _dg_rest - _dg_by * _dg_gdx
        _dg_x0 = _dg_bx * _dg_bdx
        for _dg_tz in range(_dg_bdz):
            _dg_gz = _dg_bz * _dg_bdz + _dg_tz
            for _dg_ty in range(_dg_bdy):
                _dg_gy = _dg_by * _dg_bdy + _dg_ty
                for _dg_tx in range(_dg_bdx):
                    _dg_gx = _dg_x0 + _dg_tx
                    {call}
"""

#: Piece bodies: how many units a tile has, and the work of units _dg_lo .. _dg_hi - 1.
#: A piece that starts a row loops from a literal 0, like the serial launcher, and the
#: others under ``_dg_first > 0``: LLVM then knows that ``i - 1`` is not negative and
#: vectorises a stencil's loop (with an unknown start it saw numba's wrap-around of
#: negative indices as an unsafe dependence, and the loop stayed scalar: 2.8x slower).
_UNITS = {
    "blocks": ("""\
    _dg_gdxy = _dg_gdx * _dg_gdy
    _dg_units = _dg_gdxy * _dg_gdz
""", """\
        for _dg_block in range(_dg_lo, _dg_hi):
{block}"""),
    # a unit is one index of one row (the outer two axes); pieces never span rows
    "flat": ("""\
    _dg_len = _dg_gd{i} * _dg_bd{i}
    _dg_nm = _dg_gd{m} * _dg_bd{m}
    _dg_rows = _dg_nm * _dg_gd{o} * _dg_bd{o}
""", """\
        _dg_row = _dg_lo // _dg_len
        _dg_g{o} = _dg_row // _dg_nm
        _dg_g{m} = _dg_row - _dg_g{o} * _dg_nm
        _dg_first = _dg_lo - _dg_row * _dg_len
        if _dg_first > 0:
            for _dg_g{i} in range(_dg_first, _dg_first + _dg_hi - _dg_lo):
                {call}
        else:
            for _dg_g{i} in range(_dg_hi - _dg_lo):
                {call}
"""),
    # the same over the indices that pass the guard (_dg_mx, _dg_my, _dg_mz)
    "bounded": ("""\
    _dg_len = _dg_m{i}
    _dg_nm = _dg_m{m}
    _dg_rows = _dg_nm * _dg_m{o}
""", """\
        _dg_row = _dg_lo // _dg_len
        _dg_g{o} = _dg_row // _dg_nm
        _dg_g{m} = _dg_row - _dg_g{o} * _dg_nm
        _dg_first = _dg_lo - _dg_row * _dg_len
        if _dg_first > 0:
            for _dg_g{i} in range(_dg_first, _dg_first + _dg_hi - _dg_lo):
                {call}
        else:
            for _dg_g{i} in range(_dg_hi - _dg_lo):
                {call}
"""),
}

#: The claim loop of a "pieces" launcher. A piece is up to _dg_chunk units of
#: one tile (and, for flat launchers, of one row).
_PIECES = """\
    _dg_per_row = (_dg_len + _dg_chunk - 1) // _dg_chunk
    _dg_per_tile = _dg_rows * _dg_per_row
    _dg_pieces = _dg_per_tile * (_dg_t1 - _dg_t0)
    _dg_ctl[3] = _dg_pieces
    while True:
        _dg_piece = _dg_claim(_dg_ctl, 1)
        if _dg_piece >= _dg_pieces:
            break
        _dg_t = _dg_t0 + _dg_piece // _dg_per_tile
        _dg_in_tile = _dg_piece - (_dg_t - _dg_t0) * _dg_per_tile
{views}\
        _dg_row = _dg_in_tile // _dg_per_row
        _dg_lo = _dg_row * _dg_len + (_dg_in_tile - _dg_row * _dg_per_row) * _dg_chunk
        _dg_hi = _dg_lo + _dg_chunk
        if _dg_hi > (_dg_row + 1) * _dg_len:
            _dg_hi = (_dg_row + 1) * _dg_len
{work}\
        _dg_finish(_dg_ctl, 1)
"""


def _call(params):
    return "_dg_thread(" + "".join(p + ", " for p in params) + ", ".join(CONTEXT) + ")"


def _launcher_params(params, mask):
    names = []
    for p, kind in zip(params, mask):
        names += [f"_dg_av_{p}", f"_dg_ap_{p}"] if kind else [p]
    return names


def _views(params, mask, lanes, tile, indent, lanes_last=False):
    """Source binding each dual parameter to its view of lane tile ``tile``."""
    lines = []
    for p, kind in zip(params, mask):
        if kind == "a" and lanes_last:
            lines.append(f"{p} = _dg_dual_array(_dg_av_{p}, _dg_ap_{p}, {lanes})")
        elif kind == "a":
            lines.append(
                f"{p} = _dg_dual_array(_dg_av_{p}, "
                f"_dg_ap_{p}[{tile} * {lanes}:({tile} + 1) * {lanes}], {lanes})"
            )
        elif kind == "s":
            lanes_of = "".join(f"_dg_ap_{p}[{tile} * {lanes} + {k}], " for k in range(lanes))
            lines.append(f"{p} = _dg_dual(_dg_av_{p}, ({lanes_of}))")
    return "".join(indent + line + "\n" for line in lines)


def _restores(params, mask, restore, indent):
    lines = []
    for k, position in enumerate(restore):
        p = params[position]
        target = f"_dg_av_{p}" if mask[position] == "a" else p
        lines.append(f"_dg_restore({target}, _dg_s{k})")
    return "".join(indent + line + "\n" for line in lines)


def _fill(template, order, call, block_indent=""):
    outer, middle, inner = order
    text = template.replace("{o}", outer).replace("{m}", middle).replace("{i}", inner)
    block = textwrap.indent(_BLOCK, block_indent)
    return text.replace("{block}", block).replace("{call}", call)


def launcher_source(spec, params, bound, inner, assume=""):
    """Return the Python source of the launcher ``_dg_launch`` for ``spec``.

    ``params`` are the kernel's parameter names, ``bound`` the guard prologue
    of a bounded launcher (lines setting ``_dg_mx``, ``_dg_my`` and ``_dg_mz``, the
    indices per axis that pass the guard), ``inner`` the innermost axis of flat and
    bounded launchers; ``assume`` (bounded launchers) what every index in the loops
    satisfies, as ``_dg_assume(...); `` calls placed before the thread function's call.
    """
    base, mode, lanes, mask, restore = spec[:5]
    last = spec.lanes_last
    order = ORDERS[inner]
    call = (assume if base == "bounded" else "") + _call(params)
    dual = bool(lanes) and any(mask)
    plain = ("",) * len(params)
    head = "".join(p + ", " for p in _launcher_params(params, mask if dual else plain))
    extra = ""
    if dual or mode == "pieces":
        extra += ", _dg_t0, _dg_t1"
    if mode == "pieces":
        extra += ", _dg_chunk, _dg_ctl"
    extra += "".join(f", _dg_s{k}" for k in range(len(restore)))
    source = f"def _dg_launch({head}{_GRID}{extra}):\n"
    if dual:
        source += _views(params, mask, lanes, "_dg_t0", "    ", last)
    source += bound if base == "bounded" else ""
    if mode == "serial":
        body = _fill(_SERIAL[base], order, call)
        if not dual:
            return source + body
        source += "    for _dg_t in range(_dg_t0, _dg_t1):\n"
        source += "        if _dg_t > _dg_t0:\n"
        source += _restores(params, mask, restore, " " * 12)
        source += _views(params, mask, lanes, "_dg_t", " " * 12, last)
        return source + textwrap.indent(body, "    ")
    setup, work = _UNITS[base]
    source += _ZERO_CONTEXT if base != "blocks" else ""
    source += _fill(setup, order, call)
    if base == "blocks":
        source += "    _dg_len = _dg_units\n    _dg_rows = 1\n"
    views = _views(params, mask, lanes, "_dg_t", " " * 8, last) if dual else ""
    return source + _PIECES.format(views=views, work=_fill(work, order, call, "    "))


def _restore(target, snapshot):
    """Copy ``snapshot`` into ``target`` (same shape), element by element (compiled code only)."""
    raise NotImplementedError("_restore runs inside cpu-backend launchers only")


@overload(_restore, jit_options={"inline": "always"})
def _ov_restore(target, snapshot):
    # explicit loops: ``target[...] = snapshot`` would allocate (numba copies a source
    # that may overlap the target), which needs NRT in an NRT-free launcher
    ndim = target.ndim
    index = ", ".join(f"i{k}" for k in range(ndim))
    source = "def restore(target, snapshot):\n"
    for k in range(ndim):
        source += "    " * (k + 1) + f"for i{k} in range(snapshot.shape[{k}]):\n"
    source += "    " * (ndim + 1) + f"target[{index}] = snapshot[{index}]\n"
    namespace = {}
    exec(source, namespace)
    return namespace["restore"]


@intrinsic
def _assume(typingctx, condition):
    """Tell LLVM that ``condition`` holds (``llvm.assume``): a bounded launcher's index is
    below the guard's bound, as it was after the guard. Measured on a 1024^2 heat2d step
    (serial, 2-core AMD EPYC VM): 0.50 ms per step with it, 0.70 ms without, 0.63 ms with
    the guard inside the loop. It also lets LLVM drop the zero check of a periodic
    stencil's ``(i - 1) % nx``; that modulo still stays in the inner loop."""
    if not isinstance(condition, types.Boolean):
        return None

    def codegen(context, builder, signature, args):
        fn = builder.module.declare_intrinsic(
            "llvm.assume", fnty=ir.FunctionType(ir.VoidType(), [ir.IntType(1)]))
        builder.call(fn, [args[0]])
        return context.get_dummy_value()

    return types.none(condition), codegen


def make_launcher(spec, params, bound, inner, thread, fastmath, nrt, label, thread_key=None,
                  assume=""):
    """Return the njit launcher for ``spec`` calling ``thread`` (see :func:`launcher_source`).

    With ``thread_key`` (a fingerprint of the thread function, see
    :mod:`dualgpu.backends.cpu.cache`) the launcher is compiled from a module
    in the disk cache, so later processes load it instead of compiling.
    """
    source = launcher_source(spec, params, bound, inner, assume)
    namespace = {
        "_dg_thread": thread, "_dg_claim": claim, "_dg_finish": finish, "_dg_assume": _assume,
        "_dg_restore": _restore, "_dg_dual_array": make_dual_array,
        "_dg_dual": make_scalar_dual,
    }
    # called from Python only: numba's C wrapper (for cfunc and first-class function use)
    # would be built and compiled for nothing
    options = dict(fastmath=fastmath, error_model="numpy", _nrt=nrt, nogil=spec.mode == "pieces",
                   no_cfunc_wrapper=True)
    if thread_key is not None and cpu_cache.enabled():
        key = cpu_cache.launcher_key(source, thread_key, options)
        try:
            return cpu_cache.load_launcher(key, source, namespace, options)
        except OSError:  # a read-only or full disk: compile in memory
            pass
    function = _translate.compile_source(source, namespace, "_dg_launch", label)
    return njit(**options)(function)


def flatten(args, mask):
    """The launcher's arguments for kernel arguments ``args`` (duals split by ``mask``)."""
    flat = []
    for arg, kind in zip(args, mask):
        if kind == "a":
            flat += (arg.values, arg.partials)
        elif kind == "s":
            flat += (arg.value, arg.partials)
        else:
            flat.append(arg)
    return flat
