"""Cut a prepared kernel at its barriers: regions, team operations and per-thread variables.

:func:`build` turns the statements of a :class:`~.prepare.Prepared` kernel
into a tree of operations run by a *team* (one block, or the whole grid):

- :class:`Unit`: a region, statements without barriers that every thread of
  the active set runs, one thread after another;
- :class:`Barrier`: a synchronisation point (``syncthreads``, a warp
  shuffle, ``grid.sync()``...) between two regions;
- :class:`IfOp`: an ``if`` that contains a barrier; each thread's condition is
  kept in a mask, then the branches run for the threads that took them;
- :class:`LoopOp`: a ``for ... in range(...)`` or ``while`` loop that contains
  a barrier; a header region advances every thread's own loop, the body runs
  for the threads still iterating, and the loop ends when none is.

Which threads are active is the *chain* of masks of the enclosing branches and
loops (and ``alive``, cleared by ``return``). ``break`` and ``continue`` clear
the masks of their loop for that thread. This is how a GPU runs divergent code,
so loops with per-thread trip counts and branches on thread indices work, and
a barrier reached by only part of a block is seen (see :mod:`.runtime`).

:func:`build` also decides which variables are kept per thread between
regions (:attr:`Structure.kept`): those used in more than one region, those a
region inside a loop may read before writing, and reassigned parameters.
Variables bound only to a shared or local array are re-made in each region
instead (:attr:`Structure.remade`).
"""
import ast
import builtins
import copy
from collections import Counter

from dualgpu.errors import DualgpuError
from dualgpu.backends.cpu.blocks.markers import SYNC_KINDS, site_of

__all__ = ["Unit", "Barrier", "IfOp", "LoopOp", "Structure", "build", "generated"]


class Unit:
    """A region: ``stmts`` run by each active thread in turn.

    Attributes
    ----------
    stmts : list of ast.stmt
    chain : tuple of str
        Mask expressions (in ``_dg_t``) that, with ``_dg_alive[_dg_t]``, select
        the active threads.
    loop : int or None
        The innermost loop with a barrier around this region (target of its
        ``break``/``continue``).
    in_loop : bool
        True if the region can run more than once per thread.
    counter : int or None
        For a loop header: the loop whose counter of iterating threads it bumps.
    """

    def __init__(self, chain, loop, in_loop, counter=None):
        self.stmts = []
        self.chain = chain
        self.loop = loop
        self.in_loop = in_loop
        self.counter = counter
        self.refs = self.writes = self.exposed = self.definite = frozenset()


class Barrier:
    """A synchronisation point; ``chain`` selects the threads that execute it."""

    def __init__(self, site, chain, result):
        self.site = site
        self.chain = chain
        self.result = result


class IfOp:
    def __init__(self, index, then, orelse):
        self.index = index
        self.then = then
        self.orelse = orelse


class LoopOp:
    def __init__(self, index, header, body, orelse):
        self.index = index
        self.header = header
        self.body = body
        self.orelse = orelse


class _Fill(ast.NodeTransformer):
    def __init__(self, subst):
        self.subst = subst

    def visit_Name(self, node):
        if node.id in self.subst:
            return copy.deepcopy(self.subst[node.id])
        return node


def generated(source, like, **subst):
    """Statements parsed from ``source`` with ``__NAME__`` placeholders replaced by AST nodes.

    Every node gets the line of ``like`` (the user statement it stands for).
    """
    body = ast.parse(source).body
    module = _Fill({f"__{k}__": v for k, v in subst.items()}).visit(
        ast.Module(body=body, type_ignores=[]))
    line = getattr(like, "lineno", 1)
    for node in ast.walk(module):
        if "lineno" in node._attributes:
            node.lineno = node.end_lineno = line
            node.col_offset = node.end_col_offset = 0
    return module.body


def _sync_site(stmt):
    """The site of a synchronising marker statement (after hoisting), or None."""
    if isinstance(stmt, ast.Expr):
        site = site_of(stmt.value)
    elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        site = site_of(stmt.value)
    else:
        return None
    return site if site is not None and site.kind in SYNC_KINDS else None


def first_sync(node):
    for n in ast.walk(node):
        site = site_of(n)
        if site is not None and site.kind in SYNC_KINDS:
            return site
    return None


def _where(stmt, default):
    return getattr(stmt, "dg_where", default)


class _Builder:
    def __init__(self, prepared):
        self.prepared = prepared
        self.ifs = 0
        self.loops = 0
        self.units = []

    def unit(self, chain, loop, in_loop, counter=None):
        unit = Unit(chain, loop, in_loop, counter)
        self.units.append(unit)
        return unit

    def block(self, stmts, chain, loop, in_loop):
        ops = []
        current = [None]

        def unit():
            if current[0] is None:
                current[0] = self.unit(chain, loop, in_loop)
                ops.append(current[0])
            return current[0]

        for stmt in stmts:
            if first_sync(stmt) is None:
                unit().stmts.append(stmt)
                continue
            site = _sync_site(stmt)
            if site is not None:
                call = stmt.value
                site.operands = [a.id for a in call.args]
                result = stmt.targets[0] if isinstance(stmt, ast.Assign) else None
                unit().stmts.extend(_deposit(site, call, stmt))
                ops.append(Barrier(site, chain, result))
                current[0] = None
                if result is not None:
                    unit().stmts.extend(_result(site, call, result, stmt))
                continue
            if isinstance(stmt, ast.If):
                k = self.ifs
                self.ifs += 1
                unit().stmts.extend(generated(
                    f"_dg_c{k}[_dg_t] = True if __TEST__ else False", stmt, TEST=stmt.test))
                current[0] = None
                then = self.block(stmt.body, chain + (f"_dg_c{k}[_dg_t]",), loop, in_loop)
                orelse = self.block(stmt.orelse, chain + (f"not _dg_c{k}[_dg_t]",), loop,
                                    in_loop)
                ops.append(IfOp(k, then, orelse))
                continue
            if isinstance(stmt, (ast.For, ast.While)):
                ops.append(self.loop(stmt, unit(), chain, loop, in_loop))
                current[0] = None
                continue
            site = first_sync(stmt)
            raise DualgpuError(
                f"{site.where}, line {site.line}: {site.text} is inside a "
                f"'{type(stmt).__name__.lower()}' statement (line {stmt.lineno}), which the cpu "
                "backend cannot cut at a barrier; use if, for ... in range(...) or while."
            )
        return ops

    def loop(self, stmt, before, chain, outer, in_loop):
        k = self.loops
        self.loops += 1
        lm, im = f"_dg_lm{k}[_dg_t]", f"_dg_im{k}[_dg_t]"
        before.stmts.extend(generated(f"{lm} = True\n_dg_bk{k}[_dg_t] = False", stmt))
        header = self.unit(chain + (lm,), None, True, counter=k)
        if isinstance(stmt, ast.For):
            start, stop, step, items = self._range(stmt)
            it = f"_dg_it{k}[_dg_t]"  # (the item of a literal tuple at that index)
            check = "" if isinstance(step, ast.Constant) else (
                f"\nif _dg_step{k}[_dg_t] == 0:\n"
                "    raise ValueError('range() arg 3 must not be zero')")
            before.stmts.extend(generated(
                f"_dg_it{k}[_dg_t] = __START__\n_dg_stop{k}[_dg_t] = __STOP__\n"
                f"_dg_step{k}[_dg_t] = __STEP__" + check,
                stmt, START=start, STOP=stop, STEP=step))
            header.stmts.extend(generated(
                f"if (_dg_step{k}[_dg_t] > 0 and _dg_it{k}[_dg_t] < _dg_stop{k}[_dg_t]) or "
                f"(_dg_step{k}[_dg_t] < 0 and _dg_it{k}[_dg_t] > _dg_stop{k}[_dg_t]):\n"
                f"    __TARGET__ = {f'__ITEMS__[{it}]' if items else it}\n"
                f"    _dg_it{k}[_dg_t] += _dg_step{k}[_dg_t]\n"
                f"    {im} = True\n"
                f"    _dg_cnt{k} += 1\n"
                "else:\n"
                f"    {lm} = False\n"
                f"    {im} = False",
                stmt, TARGET=ast.Name(id=stmt.target.id, ctx=ast.Store()),
                **({"ITEMS": items} if items else {})))
        else:
            header.stmts.extend(generated(
                f"if __TEST__:\n    {im} = True\n    _dg_cnt{k} += 1\n"
                f"else:\n    {lm} = False\n    {im} = False",
                stmt, TEST=stmt.test))
        body = self.block(stmt.body, chain + (im,), k, True)
        orelse = []
        if stmt.orelse:
            exit_unit = self.unit(chain, outer, in_loop)
            exit_unit.stmts.extend(generated(f"_dg_el{k}[_dg_t] = not _dg_bk{k}[_dg_t]", stmt))
            orelse = [exit_unit] + self.block(
                stmt.orelse, chain + (f"_dg_el{k}[_dg_t]",), outer, in_loop)
        return LoopOp(k, header, body, orelse)

    def _range(self, stmt):
        """``(start, stop, step, items)`` of a loop over ``range(...)``, or over a literal
        tuple or list (``for m in (16, 8, 4, 2, 1)``: its indices, ``items`` the literal)."""
        it = stmt.iter
        values = self.prepared.values
        if isinstance(it, (ast.Tuple, ast.List)) and it.elts and isinstance(stmt.target,
                                                                            ast.Name):
            items = ast.Tuple(elts=it.elts, ctx=ast.Load())
            return ast.Constant(0), ast.Constant(len(it.elts)), ast.Constant(1), items
        ok = (
            isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
            and values.get("range", builtins.range) is builtins.range
            and 1 <= len(it.args) <= 3 and not it.keywords
            and isinstance(stmt.target, ast.Name)
        )
        if not ok:
            site = first_sync(stmt)
            raise DualgpuError(
                f"{_where(stmt, site.where)}, line {stmt.lineno}: a for loop that contains "
                f"{site.text} (line {site.line}) must be 'for name in range(...)' (or a "
                "literal tuple, 'for m in (16, 8, 4, 2, 1)') on the cpu backend; got "
                f"'for {ast.unparse(stmt.target)} in {ast.unparse(it)}'. Loop over "
                "range(len(...)) and index instead."
            )
        args = list(it.args)
        if len(args) == 1:
            return ast.Constant(0), args[0], ast.Constant(1), None
        if len(args) == 2:
            return args[0], args[1], ast.Constant(1), None
        return args[0], args[1], args[2], None


# ---------------------------------------------------------------------------
# deposits before a barrier and results after it
# ---------------------------------------------------------------------------
_SHUFFLES = ("shfl_idx", "shfl_up", "shfl_down", "shfl_xor")
_VOTES = ("all", "any", "eq", "ballot")


def _deposit(site, call, like):
    """Statements run by each thread just before the barrier: its operands."""
    kind, k, args = site.kind, site.index, call.args
    if kind in ("sync_count", "sync_and", "sync_or"):
        return generated("_dg_xa[_dg_t] = 1 if __P__ else 0", like, P=args[0])
    if kind == "syncwarp":
        return generated("_dg_xm[_dg_t] = __M__", like, M=args[0])
    if kind in _SHUFFLES:
        return generated(
            f"_dg_xm[_dg_t] = __M__\n_dg_xa[_dg_t] = __L__\n"
            f"_dg_slot_put(_dg_xv{k}, _dg_t, __V__, _dg_T_xv{k})", like,
            M=args[0], V=args[1], L=args[2])
    if kind in _VOTES:
        return generated("_dg_xm[_dg_t] = __M__\n_dg_xa[_dg_t] = 1 if __P__ else 0", like,
                         M=args[0], P=args[1])
    if kind in ("match_any", "match_all"):
        return generated(
            f"_dg_xm[_dg_t] = __M__\n"
            f"_dg_slot_put(_dg_xv{k}, _dg_t, _dg_value_of(__V__), _dg_T_xv{k})", like,
            M=args[0], V=args[1])
    return []


def _result(site, call, target, like):
    """Statements run by each thread just after the barrier: its result."""
    kind, k = site.kind, site.index
    source = {
        "sync_count": "_dg_np.int32(_dg_res[_dg_t])",
        "sync_and": "_dg_np.int32(_dg_res[_dg_t])",
        "sync_or": "_dg_np.int32(_dg_res[_dg_t])",
        "all": "_dg_res[_dg_t] != 0", "any": "_dg_res[_dg_t] != 0", "eq": "_dg_res[_dg_t] != 0",
        "ballot": "_dg_to_i32(_dg_res[_dg_t])",
        "match_any": "_dg_to_i32(_dg_res[_dg_t])",
        "match_all": "(_dg_to_i32(_dg_res[_dg_t]), _dg_res[_dg_t] != 0)",
        "activemask": "_dg_np.uint32(_dg_res[_dg_t])",
        "syncwarp": "None", "sync": "None", "grid_sync": "None",
    }.get(kind)
    if kind in _SHUFFLES:
        source = f"_dg_slot_get(_dg_xv{k}, _dg_src[_dg_t], _dg_T_xv{k})"
    return generated(f"__TARGET__ = {source}", like, TARGET=target)


# ---------------------------------------------------------------------------
# which variables live across regions
# ---------------------------------------------------------------------------
def _loads(node):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _stores(node):
    return {n.id for n in ast.walk(node)
            if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))}


def _flow(stmts, defined, names):
    """Return (names possibly read before written, names surely written after ``stmts``)."""
    exposed = set()
    defined = set(defined)
    for s in stmts:
        if isinstance(s, ast.If):
            exposed |= (_loads(s.test) & names) - defined
            e1, d1 = _flow(s.body, defined, names)
            e2, d2 = _flow(s.orelse, defined, names)
            exposed |= e1 | e2
            defined = d1 & d2
        elif isinstance(s, (ast.For, ast.While)):
            head = s.iter if isinstance(s, ast.For) else s.test
            exposed |= (_loads(head) & names) - defined
            inner = defined | (_stores(s.target) if isinstance(s, ast.For) else set())
            exposed |= _flow(s.body, inner, names)[0]
            exposed |= _flow(s.orelse, defined, names)[0]
        else:
            reads = _loads(s)
            if isinstance(s, ast.AugAssign):
                reads |= _stores(s.target)
            exposed |= (reads & names) - defined
            defined |= _stores(s) & names
    return exposed, defined


class Structure:
    """The op tree of a kernel and the variables it keeps per thread.

    Attributes
    ----------
    ops : list
        Top-level operations (Unit, Barrier, IfOp, LoopOp).
    units : list of Unit
    ifs, loops : int
        How many branch masks and loops the team needs.
    kept : list of str
        The variables kept per thread between regions (sorted).
    remade : dict
        Variable -> Site of the shared or local array it is bound to.
    reassigned_params : list of str
        Parameters the kernel assigns (kept per thread, initialised from the argument).
    """

    def __init__(self, ops, units, ifs, loops, kept, remade, reassigned_params):
        self.ops = ops
        self.units = units
        self.ifs = ifs
        self.loops = loops
        self.kept = kept
        self.remade = remade
        self.reassigned_params = reassigned_params


def _remade_variables(stmts):
    """Variables whose only assignment is ``v = <shared or local array marker>`` (one site)."""
    sites, other = {}, set()
    for stmt in stmts:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Assign):
                site = site_of(node.value)
                if (len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                        and site is not None and site.kind in ("shared", "local")):
                    sites.setdefault(node.targets[0].id, set()).add(site)
                    continue
                for target in node.targets:
                    other |= _stores(target)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.comprehension)):
                other |= _stores(node.target)
            elif isinstance(node, ast.Delete):
                for target in node.targets:
                    other |= _stores(target)
            elif isinstance(node, ast.NamedExpr):
                other |= _stores(node.target)
    return {v: next(iter(s)) for v, s in sites.items() if len(s) == 1 and v not in other}


def build(prepared):
    """Return the :class:`Structure` of a :class:`~.prepare.Prepared` kernel."""
    builder = _Builder(prepared)
    ops = builder.block(prepared.stmts, (), None, False)
    variables = set()
    for stmt in prepared.stmts:
        variables |= _stores(stmt)
    remade = _remade_variables(prepared.stmts)
    names = variables - set(remade)
    uses = Counter()
    carried = set()
    for unit in builder.units:
        everything = set()
        for stmt in unit.stmts:
            everything |= _loads(stmt) | _stores(stmt)
        exposed, definite = _flow(unit.stmts, set(), names)
        unit.refs = frozenset(everything & (names | set(remade)))
        unit.writes = frozenset(set().union(*(_stores(s) for s in unit.stmts)) & names) \
            if unit.stmts else frozenset()
        unit.exposed = frozenset(exposed)
        unit.definite = frozenset(definite)
        uses.update(unit.refs & names)
        if unit.in_loop:
            carried |= exposed
    params = set(prepared.params)
    reassigned = sorted(params & names)
    kept = {v for v, count in uses.items() if count >= 2} | carried
    kept |= {p for p in reassigned if uses[p]}
    return Structure(ops, builder.units, builder.ifs, builder.loops, sorted(kept), remade,
                     [p for p in reassigned if p in kept])
