"""Write the Python source of a block-level kernel's team function, launcher and typing function.

Three functions are generated from a :class:`~.structure.Structure`:

``_dg_typing``
    The kernel as one thread sees it, shared and local arrays replaced by what
    the launcher provides and barriers by typing stand-ins
    (:func:`.runtime.typing_stubs`). numba's type inference over it gives the
    type of every variable, hence the storage each kept variable needs.
``_dg_team``
    Runs one team (a block; the whole grid for kernels with ``grid.sync()``):
    every region is ``for _dg_t in range(_dg_n): if <thread active>: <load
    kept variables>; <the kernel's statements>; <store them>``; between
    regions sit the barrier checks and the warp operations of :mod:`.runtime`.
    The kernel's statements keep their line numbers.
``_dg_launch``
    Allocates the team's storage (per worker), fills the thread indices and
    runs the team for each block of a worker (a run of blocks); the threads of a
    launch claim workers from a shared counter (one thread claims them all when
    serial), so one compiled launcher serves serial and parallel launches.
"""
import ast
import copy

import numpy as np
from numba.core import types
from numba.np import numpy_support

from dualgpu.backends.cpu.blocks.markers import WARP_KINDS, site_of
from dualgpu.backends.cpu.blocks.prepare import lower_exits
from dualgpu.backends.cpu.blocks.runtime import VOTE_KINDS, WARP_OPS
from dualgpu.backends.cpu.blocks.structure import Barrier, IfOp, LoopOp, Unit
from dualgpu.compiled.arrays import DualArrayType, dual_array_type

__all__ = ["Layout", "typing_function_tree", "team_tree", "launcher_source", "CONTEXT_FILL"]

#: Thread context names, as the cpu rewriter spells them.
_THREAD = ("_dg_tx", "_dg_ty", "_dg_tz")
_BLOCK = ("_dg_bx", "_dg_by", "_dg_bz")
_GLOBAL = ("_dg_gx", "_dg_gy", "_dg_gz")
_DIMS = ("_dg_bdx", "_dg_bdy", "_dg_bdz", "_dg_gdx", "_dg_gdy", "_dg_gdz")
_MATCHES = ("match_any", "match_all")
_SHUFFLES = ("shfl_idx", "shfl_up", "shfl_down", "shfl_xor")


def _dtype_global(dtype):
    return f"_dg_D_{np.dtype(dtype).name}"


def _int(value):
    """Source for the int ``value`` as a runtime helper's argument, typed int64, not a literal.

    numba compiles a dispatcher once per distinct literal argument: a barrier's site number or a
    warp operation's kind written as a constant compiled ``check_sync`` or ``warp_op`` again for
    every barrier and warp call of every kernel (about half a second each).
    """
    return f"_dg_np.int64({int(value)})"


class Layout:
    """What a team needs, for one kernel, one mode and one set of argument types.

    Parameters
    ----------
    prepared : Prepared
    structure : Structure
    grid : bool
        True for a team of the whole grid (kernels with ``grid.sync()``).
    lanes : int
        0 for plain runs; N: float shared and local arrays are dual arrays.
    tracer : bool
        True (local) or ``"global"`` in sparsity detection: those dual arrays have uint64
        (local) or int64 (global) tracer lanes.
    """

    def __init__(self, prepared, structure, grid, lanes, tracer=False):
        self.prepared = prepared
        self.structure = structure
        self.grid = grid
        self.lanes = lanes
        self.tracer = tracer or False  # sparsity detection: True (uint64 lanes), "global" (int64)
        # one array per declaration in the source, however many times a device function
        # declaring it is inlined (as numba.cuda makes one per block)
        self.static, self._shared_names = [], {}
        for site in prepared.of_kind("shared"):
            if site.shape != (0,) and site.key not in self._shared_names:
                self._shared_names[site.key] = f"_dg_sh{site.index}"
                self.static.append(site)
        self.dynamic = sorted({s.dtype for s in prepared.of_kind("shared") if s.shape == (0,)},
                              key=lambda d: d.name)
        self.local = prepared.of_kind("local")
        self.payloads = [s for s in prepared.sites if s.kind in _SHUFFLES + _MATCHES]
        self.uses_exchange = any(s.kind in WARP_KINDS or s.kind in VOTE_KINDS
                                 for s in prepared.sites)
        self.types = {}  # kept variable / payload -> numba type (set by the launcher)
        self.globals = {}

    @property
    def tracer_lane(self):
        """The numba lane type of tracer arrays: int64 (global) or uint64 (local)."""
        return types.int64 if self.tracer == "global" else types.uint64

    def dual(self, dtype):
        return bool(self.lanes) and np.dtype(dtype) in (np.float32, np.float64)  # (not float16)

    # -- numba types of the arrays the launcher makes (typing function parameters) --
    def array_type(self, dtype, ndim):
        element = numpy_support.from_dtype(np.dtype(dtype))
        if self.dual(dtype):
            if self.tracer:
                return DualArrayType(types.Array(element, ndim, "C"),
                                     types.Array(self.tracer_lane, ndim + 1, "C"), self.lanes)
            return dual_array_type(element, ndim, self.lanes)
        return types.Array(element, ndim, "C")

    def remade_arrays(self):
        """``(name, numba type)`` of the arrays that shared/local markers are re-made from."""
        out = []
        extra = 1 if self.grid else 0
        for site in self.static:
            ty = self.array_type(site.dtype, len(site.shape) + extra)
            out.append((f"_dg_sh{site.index}", ty))
        for dtype in self.dynamic:
            element = numpy_support.from_dtype(dtype)
            out.append((f"_dg_dyn_{dtype.name}", types.Array(element, 2, "C")))
            out.append((f"_dg_dc_{dtype.name}", types.int64))
            if self.dual(dtype):
                lane = self.tracer_lane if self.tracer else element
                out.append((f"_dg_dynp_{dtype.name}", types.Array(lane, 3, "C")))
        for site in self.local:
            out.append((f"_dg_ls{site.index}", self.array_type(site.dtype, len(site.shape) + 1)))
        return out

    def remake(self, site):
        """Source of the expression that gives a shared or local array inside a region."""
        if site.kind == "local":
            return f"_dg_ls{site.index}[_dg_t]"
        if site.shape != (0,):
            name = self._shared_names[site.key]
            return f"{name}[_dg_blk]" if self.grid else name
        name = site.dtype.name
        values = f"_dg_dyn_{name}[_dg_blk, :_dg_dc_{name}]"
        if self.dual(site.dtype):
            return (f"_dg_make_dual_array({values}, _dg_dynp_{name}[_dg_blk, :, :_dg_dc_{name}], "
                    "_dg_lanes)")
        return values

    # -- storage of kept variables ---------------------------------------------------
    def numeric(self, ty):
        return isinstance(ty, (types.Integer, types.Float, types.Boolean, types.Complex))

    def load(self, name):
        ty = self.types.get(name)
        if ty is None:
            return None
        if self.numeric(ty):
            return f"{name} = _dg_s_{name}[_dg_t]"
        return f"{name} = _dg_slot_get(_dg_s_{name}, _dg_t, _dg_T_{name})"

    def store(self, name):
        ty = self.types.get(name)
        if ty is None:
            return None
        if self.numeric(ty):
            return f"_dg_s_{name}[_dg_t] = {name}"
        return f"_dg_slot_put(_dg_s_{name}, _dg_t, {name}, _dg_T_{name})"

    # -- the team's arrays: name -> allocation source (in the launcher) --------------
    def team_arrays(self):
        s = self.structure
        arrays = {"_dg_alive": "_dg_np.zeros(_dg_n, _dg_np.bool_)"}
        for k in range(s.ifs):
            arrays[f"_dg_c{k}"] = "_dg_np.zeros(_dg_n, _dg_np.bool_)"
        for k in range(s.loops):
            for mask in ("lm", "im", "bk", "el"):
                arrays[f"_dg_{mask}{k}"] = "_dg_np.zeros(_dg_n, _dg_np.bool_)"
            for counter in ("it", "stop", "step"):
                arrays[f"_dg_{counter}{k}"] = "_dg_np.zeros(_dg_n, _dg_np.int64)"
        for name in ("_dg_TX", "_dg_TY", "_dg_TZ") + (
                ("_dg_BX", "_dg_BY", "_dg_BZ", "_dg_BLK") if self.grid else ()):
            arrays[name] = "_dg_np.zeros(_dg_n, _dg_np.int64)"
        if self.uses_exchange:
            for name in ("_dg_xm", "_dg_xa", "_dg_src", "_dg_res"):
                arrays[name] = "_dg_np.zeros(_dg_n, _dg_np.int64)"
            arrays["_dg_part"] = "_dg_np.zeros(_dg_n, _dg_np.bool_)"
            arrays["_dg_xv_none"] = "_dg_np.zeros((1, 16), _dg_np.uint8)"
        else:
            arrays["_dg_part"] = "_dg_np.zeros(_dg_n, _dg_np.bool_)"
        for site in self.payloads:
            arrays[f"_dg_xv{site.index}"] = f"_dg_slots_new(_dg_n, _dg_T_xv{site.index})"
        for name in self.structure.kept:
            ty = self.types.get(name)
            if ty is None:
                continue
            if self.numeric(ty):
                dtype = numpy_support.as_dtype(ty)
                self.globals[_dtype_global(dtype)] = dtype.type
                arrays[f"_dg_s_{name}"] = f"_dg_np.zeros(_dg_n, {_dtype_global(dtype)})"
            else:
                arrays[f"_dg_s_{name}"] = f"_dg_slots_new(_dg_n, _dg_T_{name})"
        lead = "(_dg_nblk,) + " if self.grid else ""
        for site in self.static:
            arrays[f"_dg_sh{site.index}"] = self._zeros(f"{lead}{site.shape!r}", site.dtype)
        if self.dynamic:
            arrays["_dg_dynraw"] = "_dg_np.zeros(_dg_nblk * _dg_dpad, _dg_np.uint8)"
        for dtype in self.dynamic:
            name, size = dtype.name, dtype.itemsize
            self.globals[_dtype_global(dtype)] = dtype.type
            arrays[f"_dg_dyn_{name}"] = (
                f"_dg_dynraw.view({_dtype_global(dtype)}).reshape((_dg_nblk, _dg_dpad // {size}))")
            arrays[f"_dg_dc_{name}"] = f"_dg_dynbytes // {size}"
            if self.dual(dtype):
                lane = "_dg_lane_dtype" if self.tracer else _dtype_global(dtype)
                arrays[f"_dg_dynp_{name}"] = (
                    f"_dg_np.zeros((_dg_nblk, _dg_lanes, _dg_dpad // {size}), {lane})")
        for site in self.local:
            arrays[f"_dg_ls{site.index}"] = self._zeros(f"(_dg_n,) + {site.shape!r}", site.dtype)
        return arrays

    def _zeros(self, shape, dtype):
        self.globals[_dtype_global(dtype)] = np.dtype(dtype).type
        if self.dual(dtype):
            return f"_dg_zeros_dual({shape}, {_dtype_global(dtype)}, _dg_lanes)"
        return f"_dg_np.zeros({shape}, {_dtype_global(dtype)})"

    def slot_storages(self):
        """``(array name, type global)`` of every slot storage (released after the run)."""
        out = [(f"_dg_xv{s.index}", f"_dg_T_xv{s.index}") for s in self.payloads]
        out += [(f"_dg_s_{n}", f"_dg_T_{n}") for n in self.structure.kept
                if n in self.types and not self.numeric(self.types[n])]
        return out


# ---------------------------------------------------------------------------
# the typing function
# ---------------------------------------------------------------------------
class _Remake(ast.NodeTransformer):
    """Replace shared/local array markers by the expressions that re-make them."""

    def __init__(self, layout):
        self.layout = layout

    def visit_Call(self, node):
        site = site_of(node)
        if site is not None and site.kind in ("shared", "local"):
            expr = ast.parse(self.layout.remake(site), mode="eval").body
            return ast.copy_location(_located(expr, node), node)
        self.generic_visit(node)
        return node


def _located(tree, like):
    line = getattr(like, "lineno", 1)
    for node in ast.walk(tree):
        if "lineno" in node._attributes:
            node.lineno = node.end_lineno = line
            node.col_offset = node.end_col_offset = 0
    return tree


def _args(names):
    return ast.arguments(posonlyargs=[], args=[ast.arg(arg=n) for n in names], vararg=None,
                         kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])


def _function(name, params, body, line):
    tree = ast.FunctionDef(name=name, args=_args(params), body=body or [ast.Pass()],
                           decorator_list=[], returns=None, type_comment=None, type_params=[])
    tree.lineno = tree.end_lineno = line
    tree.col_offset = tree.end_col_offset = 0
    tree = ast.fix_missing_locations(tree)
    for node in ast.walk(tree):  # spans of nodes from several places: keep them valid
        if "lineno" in node._attributes and node.end_lineno < node.lineno:
            node.end_lineno = node.lineno
    return tree


def typing_function_tree(layout, context_names):
    """The ``_dg_typing`` function and ``(parameter names, extra parameter types)``.

    Its parameters are the kernel's, then ``_dg_t``, ``_dg_blk``, the thread
    context and the arrays of :meth:`Layout.remade_arrays`; the caller types
    the kernel's own parameters from the launch arguments.
    """
    prepared = layout.prepared
    body = [_Remake(layout).visit(copy.deepcopy(s)) for s in prepared.stmts]
    arrays = layout.remade_arrays()
    extra = [("_dg_t", types.int64), ("_dg_blk", types.int64)]
    extra += [(c, types.int64) for c in context_names]
    extra += arrays
    params = list(prepared.params) + [n for n, _ in extra]
    return _function("_dg_typing", params, body, prepared.line), [t for _, t in extra]


# ---------------------------------------------------------------------------
# the team function
# ---------------------------------------------------------------------------
def _parse_statements(source, line):
    return _located(ast.Module(body=ast.parse(source).body, type_ignores=[]),
                    ast.Pass(lineno=line)).body


class _TeamWriter:
    def __init__(self, layout):
        self.layout = layout
        self.line = layout.prepared.line
        self.flags = 0

    def lines(self, source):
        return _parse_statements(source, self.line)

    # -- regions ---------------------------------------------------------------------
    def _guard(self, chain):
        return " and ".join(("_dg_alive[_dg_t]",) + tuple(chain))

    def _context(self, used):
        grid = self.layout.grid
        out = []
        if grid:
            for axis, (b, cap) in enumerate(zip(_BLOCK, ("_dg_BX", "_dg_BY", "_dg_BZ"))):
                if b in used or _GLOBAL[axis] in used:
                    out.append(f"{b} = {cap}[_dg_t]")
            if "_dg_blk" in used:
                out.append("_dg_blk = _dg_BLK[_dg_t]")
        for axis, (t, cap) in enumerate(zip(_THREAD, ("_dg_TX", "_dg_TY", "_dg_TZ"))):
            if t in used or _GLOBAL[axis] in used:
                out.append(f"{t} = {cap}[_dg_t]")
        for axis, g in enumerate(_GLOBAL):
            if g in used:
                out.append(f"{g} = {_BLOCK[axis]} * {_DIMS[axis]} + {_THREAD[axis]}")
        return out

    def unit(self, unit, emitter):
        """Add the region ``unit`` to the thread loop being built by ``emitter``."""
        layout = self.layout
        structure = layout.structure
        stmts = [_Remake(layout).visit(copy.deepcopy(s)) for s in unit.stmts]
        if not stmts:
            return
        stmts = self._exits(unit, stmts)
        kept = set(structure.kept)
        loads = [layout.load(v) for v in sorted(kept & unit.refs)
                 if v in unit.exposed or (v in unit.writes and v not in unit.definite)]
        stores = [layout.store(v) for v in sorted(kept & unit.writes)]
        remade = [f"{v} = {layout.remake(structure.remade[v])}"
                  for v in sorted(unit.refs & set(structure.remade))]
        head = [s for s in loads + remade if s]
        tail = [s for s in stores if s]
        used = set()
        for node in ast.walk(ast.Module(body=stmts + self.lines("\n".join(head) or "pass"),
                                        type_ignores=[])):
            if isinstance(node, ast.Name):
                used.add(node.id)
        context = self._context(used)
        inner = (self.lines("\n".join(context + head)) if context or head else []) + stmts + (
            self.lines("\n".join(tail)) if tail else [])
        init = self.lines(f"_dg_cnt{unit.counter} = 0") if unit.counter is not None else []
        emitter.piece(self._guard(unit.chain), inner, init)

    def _exits(self, unit, stmts):
        """Lower return/break/continue of the region into mask updates and a wrapper exit."""
        def is_exit(stmt, depth):
            return isinstance(stmt, ast.Return) or (
                depth == 0 and isinstance(stmt, (ast.Break, ast.Continue)))

        def replace(stmt):
            if isinstance(stmt, ast.Return):
                return self.lines("_dg_alive[_dg_t] = False")
            k = unit.loop
            if k is None:  # pragma: no cover - Python rejects break outside a loop
                raise AssertionError("break/continue outside a loop with a barrier")
            if isinstance(stmt, ast.Break):
                return self.lines(
                    f"_dg_lm{k}[_dg_t] = False\n_dg_im{k}[_dg_t] = False\n_dg_bk{k}[_dg_t] = True")
            return self.lines(f"_dg_im{k}[_dg_t] = False")

        self.flags += 1
        flag = f"_dg_xf{self.flags}"
        new, wrapper, flag_needed = lower_exits(stmts, is_exit, replace, flag)
        if not wrapper:
            return new
        loop = ast.While(test=ast.Constant(True), body=new + [ast.Break()], orelse=[])
        _located(loop, stmts[0])
        return (self.lines(f"{flag} = False") if flag_needed else []) + [loop]

    # -- team operations ---------------------------------------------------------------
    def barrier(self, op, emitter):
        """Add barrier ``op``: participation after the regions before it, then the check."""
        site, layout = op.site, self.layout
        kind, k = site.kind, site.index
        record = ("    _dg_err[5] = _dg_bx\n    _dg_err[6] = _dg_by\n    _dg_err[7] = _dg_bz\n"
                  "    return 1")
        participation = f"_dg_part[_dg_t] = {self._guard(op.chain)}"
        if kind in ("sync", "grid_sync"):
            if not op.chain:  # every thread that has not returned is here: nothing to check
                emitter.team([])  # but the regions before it end here
                return
            gridwide = kind == "grid_sync"
            if gridwide or not layout.grid:
                # one group: count arrivals and live threads in the same pass
                emitter.tail(
                    self.lines(f"if _dg_alive[_dg_t]:\n    _dg_na{k} += 1\n"
                               f"    if {' and '.join(op.chain)}:\n        _dg_np{k} += 1"),
                    self.lines(f"_dg_na{k} = 0\n_dg_np{k} = 0"))
                emitter.team(self.lines(
                    f"if _dg_np{k} != 0 and _dg_np{k} != _dg_na{k}:\n"
                    "    for _dg_t in range(_dg_n):\n"
                    f"        {participation}\n"
                    f"    _dg_check_sync(_dg_part, _dg_alive, _dg_n, _dg_bs, {_int(gridwide)}, "
                    f"_dg_err, {_int(k)})\n" + record))
                return
            emitter.tail(self.lines(participation))
            emitter.team(self.lines(
                f"if _dg_check_sync(_dg_part, _dg_alive, _dg_n, _dg_bs, {_int(0)}, _dg_err, "
                f"{_int(k)}):\n"
                + record))
            return
        emitter.tail(self.lines(participation))
        if kind in VOTE_KINDS:
            emitter.team(self.lines(
                f"if _dg_vote_block({_int(VOTE_KINDS[kind])}, _dg_part, _dg_alive, _dg_xa, "
                f"_dg_res, _dg_n, _dg_bs, _dg_err, {_int(k)}):\n" + record))
            return
        payload = f"_dg_xv{k}" if kind in _MATCHES else "_dg_xv_none"
        emitter.team(self.lines(
            f"if _dg_warp_op({_int(WARP_OPS[kind])}, _dg_part, _dg_alive, _dg_xm, _dg_xa, "
            f"_dg_src, _dg_res, {payload}, _dg_n, _dg_bs, _dg_err, {_int(k)}):\n" + record))

    def ops(self, ops, emitter):
        for op in ops:
            if isinstance(op, Unit):
                self.unit(op, emitter)
            elif isinstance(op, Barrier):
                self.barrier(op, emitter)
            elif isinstance(op, IfOp):  # the branches run one after the other, masked
                self.ops(op.then, emitter)
                self.ops(op.orelse, emitter)
            elif isinstance(op, LoopOp):
                inner = _Emitter(self)
                self.unit(op.header, inner)
                # the first regions of the body run in the header's thread loop (their
                # masks are false for a thread that stopped); the loop ends after it
                inner.post(self.lines(f"if _dg_cnt{op.index} == 0:\n    break"))
                self.ops(op.body, inner)
                loop = ast.While(test=ast.Constant(True), body=inner.finish(), orelse=[])
                emitter.team([_located(loop, ast.Pass(lineno=self.line))])
                self.ops(op.orelse, emitter)


class _Emitter:
    """Collects thread loops and team statements; consecutive regions share one thread loop.

    Regions with no barrier between them may run in any interleaving of their
    threads (CUDA gives no order), so thread ``t`` runs all of them before
    thread ``t + 1`` starts: fewer passes over the block.
    """

    def __init__(self, writer):
        self.writer = writer
        self.out = []
        self.open = None

    def _loop(self):
        if self.open is None:
            self.open = {"init": [], "body": [], "post": []}
        return self.open

    def piece(self, guard, stmts, init=()):
        loop = self._loop()
        loop["init"] += list(init)
        test = _located(ast.parse(guard, mode="eval").body, ast.Pass(lineno=self.writer.line))
        loop["body"].append(ast.If(test=test, body=stmts, orelse=[]))

    def tail(self, stmts, init=()):
        loop = self._loop()
        loop["init"] += list(init)
        loop["body"] += stmts

    def post(self, stmts):
        if self.open is None:
            self.out += stmts
        else:
            self.open["post"] += stmts

    def team(self, stmts):
        self.close()
        self.out += stmts

    def close(self):
        if self.open is None:
            return
        loop = self.writer.lines("for _dg_t in range(_dg_n):\n    pass")[0]
        loop.body = self.open["body"]
        self.out += self.open["init"] + [loop] + self.open["post"]
        self.open = None

    def finish(self):
        self.close()
        return self.out or self.writer.lines("pass")


def team_params(layout):
    """Parameter names of ``_dg_team`` (the launcher passes them in this order)."""
    return (list(layout.prepared.params) + list(layout.team_arrays())
            + list(_BLOCK) + list(_DIMS) + ["_dg_n", "_dg_bs", "_dg_err"])


def team_tree(layout):
    """The ``_dg_team`` function of ``layout`` (types of kept variables set)."""
    writer = _TeamWriter(layout)
    structure = layout.structure
    start = ["_dg_blk = 0"] if not layout.grid else []
    init = ["for _dg_t in range(_dg_n):", "    _dg_alive[_dg_t] = True"]
    for p in structure.reassigned_params:
        store = layout.store(p)
        if store:
            init.append("    " + store)
    emitter = _Emitter(writer)
    writer.ops(structure.ops, emitter)
    body = writer.lines("\n".join(start + init)) + emitter.finish() + writer.lines("return 0")
    return _function("_dg_team", team_params(layout), body, layout.prepared.line)


# ---------------------------------------------------------------------------
# the launcher
# ---------------------------------------------------------------------------
CONTEXT_FILL = {
    "block": """\
        for _dg_tz in range(_dg_bdz):
            for _dg_ty in range(_dg_bdy):
                for _dg_tx in range(_dg_bdx):
                    _dg_k = _dg_tx + _dg_bdx * (_dg_ty + _dg_bdy * _dg_tz)
                    _dg_TX[_dg_k] = _dg_tx
                    _dg_TY[_dg_k] = _dg_ty
                    _dg_TZ[_dg_k] = _dg_tz
""",
    "grid": """\
        for _dg_b in range(_dg_nb):
            _dg_bz = _dg_b // (_dg_gdx * _dg_gdy)
            _dg_rest = _dg_b - _dg_bz * (_dg_gdx * _dg_gdy)
            _dg_by = _dg_rest // _dg_gdx
            _dg_bx = _dg_rest - _dg_by * _dg_gdx
            for _dg_tz in range(_dg_bdz):
                for _dg_ty in range(_dg_bdy):
                    for _dg_tx in range(_dg_bdx):
                        _dg_k = _dg_b * _dg_bs + _dg_tx + _dg_bdx * (_dg_ty + _dg_bdy * _dg_tz)
                        _dg_TX[_dg_k] = _dg_tx
                        _dg_TY[_dg_k] = _dg_ty
                        _dg_TZ[_dg_k] = _dg_tz
                        _dg_BX[_dg_k] = _dg_bx
                        _dg_BY[_dg_k] = _dg_by
                        _dg_BZ[_dg_k] = _dg_bz
                        _dg_BLK[_dg_k] = _dg_b
""",
}


def launcher_source(layout, release):
    """Source of ``_dg_launch`` (``release``: the team counts references; release its slots)."""
    params = "".join(p + ", " for p in layout.prepared.params)
    arrays = layout.team_arrays()
    team_call = "_dg_team(" + ", ".join(
        list(layout.prepared.params) + list(arrays)) + ", "
    alloc = ""
    if layout.dynamic:
        alloc += "        _dg_dpad = (max(_dg_dynbytes, 1) + 15) // 16 * 16\n"
    alloc += "".join(f"        {name} = {source}\n" for name, source in arrays.items())
    freeing = "".join(f"        _dg_slots_release({name}, {ty})\n"
                      for name, ty in layout.slot_storages()) if release else ""
    head = (
        f"def _dg_launch({params}_dg_gdx, _dg_gdy, _dg_gdz, _dg_bdx, _dg_bdy, _dg_bdz, "
        "_dg_dynbytes, _dg_workers, _dg_errs, _dg_ctl):\n"
        "    _dg_bs = _dg_bdx * _dg_bdy * _dg_bdz\n"
        "    _dg_nb = _dg_gdx * _dg_gdy * _dg_gdz\n"
    )
    # each thread of the launch (the caller, and helpers when parallel) claims workers, a
    # run of blocks each, until none are left (see dualgpu.backends.cpu.parallel)
    claim = (
        "    _dg_ctl[3] = _dg_workers\n"
        "    while True:\n"
        "        _dg_w = _dg_claim(_dg_ctl, 1)\n"
        "        if _dg_w >= _dg_workers:\n"
        "            break\n"
    )
    done = "        _dg_finish(_dg_ctl, 1)\n"
    dims = "_dg_bdx, _dg_bdy, _dg_bdz, _dg_gdx, _dg_gdy, _dg_gdz, _dg_n, _dg_bs"
    if layout.grid:
        return head + claim + (
            "        _dg_n = _dg_bs * _dg_nb\n"
            "        _dg_nblk = _dg_nb\n"
            + alloc + CONTEXT_FILL["grid"]
            + f"        {team_call}0, 0, 0, {dims}, _dg_errs[0])\n"
            + freeing + done
        )
    return head + "    _dg_per = (_dg_nb + _dg_workers - 1) // _dg_workers\n" + claim + (
        "        _dg_n = _dg_bs\n"
        "        _dg_nblk = 1\n"
        + alloc + CONTEXT_FILL["block"]
        + "        _dg_err = _dg_errs[_dg_w]\n"
        "        _dg_lo = _dg_w * _dg_per\n"
        "        _dg_hi = min(_dg_nb, _dg_lo + _dg_per)\n"
        "        for _dg_b in range(_dg_lo, _dg_hi):\n"
        "            _dg_bz = _dg_b // (_dg_gdx * _dg_gdy)\n"
        "            _dg_rest = _dg_b - _dg_bz * (_dg_gdx * _dg_gdy)\n"
        "            _dg_by = _dg_rest // _dg_gdx\n"
        "            _dg_bx = _dg_rest - _dg_by * _dg_gdx\n"
        f"            if {team_call}_dg_bx, _dg_by, _dg_bz, {dims}, _dg_err) != 0:\n"
        "                break\n"
        + freeing + done
    )
