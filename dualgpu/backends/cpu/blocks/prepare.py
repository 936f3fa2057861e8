"""Turn a rewritten block-level kernel into one flat list of statements ready to be cut.

:func:`prepare` takes the cpu backend's translation of a kernel (its body
already rewritten: ``cuda.*`` references replaced, block-level calls turned
into markers, see :mod:`.markers`) and

1. inlines the device functions that synchronise (or use shared memory), so
   that every barrier is in the kernel's own statements: their locals are
   renamed, their globals bound into the kernel's namespace and their
   ``return`` statements lowered;
2. resolves grid groups: ``g = cuda.cg.this_grid()`` ... ``g.sync()`` becomes a
   ``grid_sync`` marker (also through aliases and device-function parameters);
3. hoists every synchronising marker out of expressions into a statement of
   its own, ``_dg_r3 = _dg_blk_shfl_down(_dg_a1, _dg_a2, _dg_a3)``, its
   arguments first assigned to temporaries (so their types are known);
4. turns ``cuda.local.array`` calls into ``local`` markers with constant
   shapes and numbers every site.

A barrier inside a conditional expression (``a if c else syncthreads_count(x)``,
``and``/``or``, comprehensions), a ``with``/``try`` block or a recursive device
function is refused with a message that names it and its line.
"""
import ast
import builtins
import copy

from dualgpu.errors import DualgpuError
from dualgpu.backends.common.translate import UNRESOLVED, dotted
from dualgpu.backends.cpu.blocks.markers import (
    SYNC_KINDS, WARP_KINDS, Site, array_spec, marker, site_of,
)
from dualgpu.backends.cpu.translation import Translation

__all__ = ["Prepared", "prepare", "lower_exits"]

#: Names that mean the same thing in a kernel and in every function inlined into it.
_SHARED_PREFIXES = ("_dg_blk_", "_dg_inline_")


class Prepared:
    """A block-level kernel as one statement list, with what the code generator needs.

    Attributes
    ----------
    stmts : list of ast.stmt
        The kernel body after inlining, grid-group resolution and hoisting.
    params : list of str
        The kernel's parameter names.
    values : dict
        Globals of the statements (the kernel's, plus names bound for inlined code).
    devices : dict
        Bound name -> translation of the (non-inlined) device functions called.
    sites : list of Site
        Every block-level construct, indexed by ``Site.index``.
    uses_grid_sync, uses_warp : bool
    filename : str
    where : str
        ``"kernel 'name'"``.
    line : int
        The line of the kernel's ``def``.
    """

    def __init__(self, stmts, params, values, devices, sites, filename, where, line):
        self.stmts = stmts
        self.params = params
        self.values = values
        self.devices = devices
        self.sites = sites
        self.filename = filename
        self.where = where
        self.line = line
        kinds = {s.kind for s in sites}
        self.uses_grid_sync = "grid_sync" in kinds
        self.uses_warp = bool(kinds & WARP_KINDS)

    def of_kind(self, *kinds):
        return [s for s in self.sites if s.kind in kinds]


class _Values:
    """``Namespace.value`` over a plain dict of globals (for constant shapes)."""

    def __init__(self, values, local_names):
        self.values = values
        self.locals = local_names

    def value(self, node):
        if isinstance(node, ast.Name):
            if node.id in self.locals:
                return UNRESOLVED
            if node.id in self.values:
                return self.values[node.id]
            return getattr(builtins, node.id, UNRESOLVED)
        if isinstance(node, ast.Attribute):
            base = self.value(node.value)
            if base is not UNRESOLVED:
                return getattr(base, node.attr, UNRESOLVED)
        return UNRESOLVED


class _Context:
    """State shared by the passes over one kernel: counters, the namespace, the devices."""

    def __init__(self, translation, runtime_names, context_names):
        self.kernel = translation
        self.where = translation.where
        self.values = dict(translation.namespace.values)
        self.devices = dict(translation.devices)
        self.preserved = frozenset(runtime_names) | frozenset(context_names) | {"_dg_lanes"}
        self.counter = 0
        self.stack = []

    def fresh(self, prefix):
        self.counter += 1
        return f"_dg_{prefix}{self.counter}"

    def bind(self, value, name):
        """Bind ``value`` in the kernel's namespace under a fresh name derived from ``name``."""
        for bound, existing in self.values.items():
            if existing is value and bound.startswith("_dg_x") and bound.endswith("_" + name):
                return bound
        bound = self.fresh("x") + "_" + name
        self.values[bound] = value
        if isinstance(value, Translation):  # the devices of inlined code are built with the kernel
            self.devices[bound] = value
        return bound


def _docstring_free(body):
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[1:]
    return list(body)


def _name(identifier, store=False):
    return ast.Name(id=identifier, ctx=ast.Store() if store else ast.Load())


def _assign(target, value, like=None):
    node = ast.Assign(targets=[_name(target, store=True)], value=value)
    if like is not None:
        ast.copy_location(node, like)
    return node


# ---------------------------------------------------------------------------
# 3. hoisting synchronising markers out of expressions
# ---------------------------------------------------------------------------
def _hoistable(node):
    site = site_of(node)
    return site is not None and (site.kind in SYNC_KINDS or site.kind == "inline")


class _ExpressionHoister(ast.NodeTransformer):
    """Replace hoistable markers in one expression by temporaries; collect the statements."""

    def __init__(self, ctx, stmt, keep_top):
        self.ctx = ctx
        self.stmt = stmt
        self.keep_top = keep_top  # the statement's whole value is a marker: keep it in place
        self.prefix = []
        self.conditional = None  # the enclosing conditional expression, if any

    def _refuse(self, node, site):
        raise DualgpuError(
            f"{site.where}, line {site.line}: {site.text} is inside a conditional expression "
            f"('{type(self.conditional).__name__}': an 'x if c else y', 'and'/'or', a "
            "comprehension or a lambda), where the threads of a block cannot be sure to reach "
            "it together. Call it in a statement of its own and use the result: "
            "r = cuda.syncthreads_count(p), then the expression."
        )

    def _conditional(self, node, fields):
        outer = self.conditional
        for field, value in ast.iter_fields(node):
            if field in fields:
                self.conditional = self.conditional or node
            if isinstance(value, list):
                setattr(node, field, [self.visit(v) if isinstance(v, ast.AST) else v
                                      for v in value])
            elif isinstance(value, ast.AST):
                setattr(node, field, self.visit(value))
            self.conditional = outer
        return node

    def visit_IfExp(self, node):
        return self._conditional(node, ("body", "orelse"))

    def visit_BoolOp(self, node):
        first, rest = node.values[0], node.values[1:]
        node.values = [self.visit(first)]
        outer = self.conditional
        self.conditional = outer or node
        node.values += [self.visit(v) for v in rest]
        self.conditional = outer
        return node

    def _scope(self, node):
        return self._conditional(node, tuple(f for f, _ in ast.iter_fields(node)))

    visit_Lambda = visit_ListComp = visit_SetComp = visit_DictComp = _scope
    visit_GeneratorExp = _scope

    def visit_Call(self, node):
        self.generic_visit(node)
        if not _hoistable(node):
            return node
        site = site_of(node)
        if self.conditional is not None:
            self._refuse(node, site)
        args = []
        for arg in node.args:
            temp = self.ctx.fresh("a")
            self.prefix.append(_assign(temp, arg, self.stmt))
            args.append(_name(temp))
        keywords = []
        for kw in node.keywords:
            temp = self.ctx.fresh("a")
            self.prefix.append(_assign(temp, kw.value, self.stmt))
            keywords.append(ast.keyword(arg=kw.arg, value=_name(temp)))
        node.args, node.keywords = args, keywords
        if node is self.keep_top:
            return node
        result = self.ctx.fresh("r")
        self.prefix.append(_assign(result, node, self.stmt))
        return _name(result)


def _contains_marker(node, test=_hoistable):
    return any(test(n) for n in ast.walk(node))


def _hoist_expression(ctx, stmt, expr, keep_top=False):
    """Return ``(prefix statements, new expression)`` for one expression of ``stmt``."""
    hoister = _ExpressionHoister(ctx, stmt, expr if keep_top and _hoistable(expr) else None)
    new = hoister.visit(expr)
    return hoister.prefix, new


def hoist(ctx, stmts):
    """Return ``stmts`` with every synchronising marker in a statement of its own."""
    out = []
    for stmt in stmts:
        out.extend(_hoist_statement(ctx, stmt))
    return out


def _hoist_statement(ctx, stmt):
    if not _contains_marker(stmt):
        return [stmt]
    if isinstance(stmt, ast.Expr):
        prefix, stmt.value = _hoist_expression(ctx, stmt, stmt.value, keep_top=True)
        return prefix + [stmt]
    if isinstance(stmt, ast.Assign):
        single = len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
        prefix, stmt.value = _hoist_expression(ctx, stmt, stmt.value, keep_top=single)
        for k, target in enumerate(stmt.targets):
            more, stmt.targets[k] = _hoist_expression(ctx, stmt, target)
            prefix += more
        return prefix + [stmt]
    if isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        prefix = []
        if stmt.value is not None:
            prefix, stmt.value = _hoist_expression(ctx, stmt, stmt.value)
        more, stmt.target = _hoist_expression(ctx, stmt, stmt.target)
        return prefix + more + [stmt]
    if isinstance(stmt, (ast.Return, ast.Assert, ast.Raise, ast.Delete)):
        prefix = []
        for field in ("value", "test", "msg", "exc", "cause"):
            value = getattr(stmt, field, None)
            if isinstance(value, ast.AST):
                more, new = _hoist_expression(ctx, stmt, value)
                setattr(stmt, field, new)
                prefix += more
        if isinstance(stmt, ast.Delete):
            for k, target in enumerate(stmt.targets):
                more, stmt.targets[k] = _hoist_expression(ctx, stmt, target)
                prefix += more
        return prefix + [stmt]
    if isinstance(stmt, ast.If):
        prefix, stmt.test = _hoist_expression(ctx, stmt, stmt.test)
        stmt.body = hoist(ctx, stmt.body)
        stmt.orelse = hoist(ctx, stmt.orelse)
        return prefix + [stmt]
    if isinstance(stmt, ast.For):
        prefix, stmt.iter = _hoist_expression(ctx, stmt, stmt.iter)
        if _contains_marker(stmt.target):
            _refuse_statement(stmt, "the target of a for loop")
        stmt.body = hoist(ctx, stmt.body)
        stmt.orelse = hoist(ctx, stmt.orelse)
        return prefix + [stmt]
    if isinstance(stmt, ast.While):
        stmt.body = hoist(ctx, stmt.body)
        stmt.orelse = hoist(ctx, stmt.orelse)
        if _contains_marker(stmt.test):
            if stmt.orelse:
                _refuse_statement(stmt, "the condition of a while loop with an else clause")
            prefix, test = _hoist_expression(ctx, stmt, stmt.test)
            leave = ast.If(test=ast.UnaryOp(op=ast.Not(), operand=test), body=[ast.Break()],
                           orelse=[])
            stmt.test = ast.Constant(True)
            stmt.body = prefix + [ast.copy_location(leave, stmt)] + stmt.body
            ast.fix_missing_locations(stmt)
        return [stmt]
    _refuse_statement(stmt, f"a '{type(stmt).__name__.lower()}' statement")


def _refuse_statement(stmt, what):
    site = next(site_of(n) for n in ast.walk(stmt) if _hoistable(n))
    raise DualgpuError(
        f"{site.where}, line {site.line}: {site.text} is inside {what} (line "
        f"{getattr(stmt, 'lineno', '?')}), which the cpu backend cannot cut at a barrier. "
        "Move the call into the body of an if/for/while statement, or out of it."
    )


# ---------------------------------------------------------------------------
# lowering return (and break/continue) into exits from a wrapper loop
# ---------------------------------------------------------------------------
def lower_exits(stmts, is_exit, replace, flag):
    """Return ``(new statements, wrapper needed, flag needed)``.

    Every statement ``s`` with ``is_exit(s, depth)`` (``depth``: loops around
    it inside ``stmts``) becomes ``replace(s)`` followed by a ``break`` out of a
    wrapper loop placed around the result by the caller; from inside nested
    loops it sets ``flag`` and breaks, and ``if flag: break`` after each such
    loop carries the exit outwards (skipping their ``else`` clauses, as the
    exit would).
    """
    state = {"wrapper": False, "flag": False}

    def lower(block, depth):
        out, exits = [], False
        for s in block:
            if is_exit(s, depth):
                out += replace(s)
                if depth:
                    out.append(ast.copy_location(_assign(flag, ast.Constant(True)), s))
                    state["flag"] = True
                out.append(ast.copy_location(ast.Break(), s))
                exits = True
                continue
            if isinstance(s, (ast.For, ast.While)):
                s.body, inner = lower(s.body, depth + 1)
                s.orelse, outer = lower(s.orelse, depth)
                out.append(s)
                if inner:
                    out.append(ast.copy_location(
                        ast.If(test=_name(flag), body=[ast.Break()], orelse=[]), s))
                    state["flag"] = True
                exits |= inner or outer
                continue
            if isinstance(s, ast.If):
                s.body, a = lower(s.body, depth)
                s.orelse, b = lower(s.orelse, depth)
                exits |= a or b
            out.append(s)
        return out, exits

    new, exits = lower(stmts, 0)
    state["wrapper"] = exits
    return ast.fix_missing_locations(ast.Module(body=new, type_ignores=[])).body, \
        state["wrapper"], state["flag"]


def _wrap(stmts, flag, flag_needed, like):
    """``[flag = False]; while True: <stmts>; break``."""
    loop = ast.While(test=ast.Constant(True), body=stmts + [ast.Break()], orelse=[])
    ast.copy_location(loop, like)
    out = [ast.copy_location(_assign(flag, ast.Constant(False)), like)] if flag_needed else []
    return out + [ast.fix_missing_locations(loop)]


# ---------------------------------------------------------------------------
# 1. inlining device functions that synchronise
# ---------------------------------------------------------------------------
def _stored_names(stmts):
    names = set()
    for stmt in stmts:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                names.add(node.id)
    return names


class _Renamer(ast.NodeTransformer):
    def __init__(self, mapping):
        self.mapping = mapping

    def visit_Name(self, node):
        new = self.mapping.get(node.id)
        if new is not None:
            node.id = new
        return node


def _inline_call(ctx, stmt, call, result):
    """The statements that replace ``result = call`` (``result`` None: a bare call)."""
    site = site_of(call)
    device = site.device
    if device in ctx.stack:
        chain = " -> ".join(d.py_func.__qualname__ for d in ctx.stack + [device])
        raise DualgpuError(
            f"{site.where}, line {site.line}: the device function "
            f"{device.py_func.__qualname__!r} synchronises and is recursive ({chain}); the "
            "cpu backend inlines such functions into the kernel and cannot inline recursion. "
            "Rewrite the recursion as a loop."
        )
    body = _docstring_free(copy.deepcopy(device.tree.body))
    params = list(device.params)
    local_names = (set(device.namespace.locals) | set(params) | _stored_names(body)) \
        - ctx.preserved
    k = ctx.fresh("v")
    mapping = {n: f"{k}_{n}" for n in local_names if not n.startswith("_dg_")}
    # globals of the device function, bound into the kernel's namespace
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if not isinstance(node, ast.Name) or node.id in mapping or node.id in local_names:
            continue
        name = node.id
        if name in ctx.preserved or name.startswith(_SHARED_PREFIXES):
            continue
        if name in device.namespace.values:
            value = device.namespace.values[name]
            if getattr(value, "block_level", False):
                # a device function that synchronises, called before its own translation
                # ended: only recursion does that
                raise DualgpuError(
                    f"{site.where}, line {site.line}: the device function "
                    f"{value.py_func.__qualname__!r} synchronises and is recursive; the cpu "
                    "backend inlines such functions into the kernel and cannot inline "
                    "recursion. Rewrite the recursion as a loop."
                )
            mapping[name] = ctx.bind(value, name)
        elif hasattr(builtins, name) and name in ctx.values:
            mapping[name] = ctx.bind(getattr(builtins, name), name)
    body = [_Renamer(mapping).visit(s) for s in body]
    for stmt in body:  # messages about these lines name the device function
        for node in ast.walk(stmt):
            if not hasattr(node, "dg_where"):
                node.dg_where = device.where
    # parameters: positional, keyword, defaults
    defaults = device.py_func.__defaults__ or ()
    default_of = dict(zip(params[len(params) - len(defaults):], defaults))
    given = dict(zip(params, call.args))
    if len(call.args) > len(params):
        raise DualgpuError(
            f"{site.where}, line {site.line}: {device.py_func.__qualname__}() takes "
            f"{len(params)} arguments; got {len(call.args)}."
        )
    for kw in call.keywords:
        if kw.arg in given or kw.arg not in params:
            raise DualgpuError(
                f"{site.where}, line {site.line}: unexpected or repeated keyword argument "
                f"{kw.arg!r} in the call of {device.py_func.__qualname__}()."
            )
        given[kw.arg] = kw.value
    bindings = []
    for p in params:
        if p in given:
            value = given[p]
        elif p in default_of:
            value = _name(ctx.bind(default_of[p], p))
        else:
            raise DualgpuError(
                f"{site.where}, line {site.line}: {device.py_func.__qualname__}() is called "
                f"without its argument {p!r}."
            )
        bindings.append(_assign(mapping.get(p, p), value, stmt))
    ctx.stack.append(device)
    try:
        body = hoist(ctx, body)
        body = _lower_returns(ctx, body, result, stmt)
        body = _inline_all(ctx, body)
    finally:
        ctx.stack.pop()
    return bindings + body


def _lower_returns(ctx, body, result, like):
    returns = [n for s in body for n in ast.walk(s) if isinstance(n, ast.Return)]
    if not returns:
        if result is not None:
            body = body + [_assign(result, ast.Constant(None), like)]
        return body

    def replace(ret):
        if result is None:
            return []
        value = ret.value if ret.value is not None else ast.Constant(None)
        return [ast.copy_location(_assign(result, value), ret)]

    if len(returns) == 1 and body and body[-1] is returns[0]:
        return body[:-1] + replace(returns[0])
    flag = ctx.fresh("ret")
    new, _, flag_needed = lower_exits(body, lambda s, d: isinstance(s, ast.Return), replace, flag)
    return _wrap(new, flag, flag_needed, like)


def _inline_all(ctx, stmts):
    """Expand every statement-level inline marker in ``stmts`` (recursively)."""
    out = []
    for stmt in stmts:
        call, result = _inline_target(stmt)
        if call is not None:
            out.extend(_inline_call(ctx, stmt, call, result))
            continue
        for field in ("body", "orelse"):
            block = getattr(stmt, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                setattr(stmt, field, _inline_all(ctx, block))
        out.append(stmt)
    return out


def _inline_target(stmt):
    if isinstance(stmt, ast.Expr) and site_of(stmt.value) and site_of(stmt.value).kind == "inline":
        return stmt.value, None
    if (
        isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name) and site_of(stmt.value)
        and site_of(stmt.value).kind == "inline"
    ):
        return stmt.value, stmt.targets[0].id
    return None, None


# ---------------------------------------------------------------------------
# 2. grid groups
# ---------------------------------------------------------------------------
def _is_group_marker(node):
    site = site_of(node)
    return site is not None and site.kind == "grid_group"


def _resolve_grid_groups(ctx, stmts):
    module = ast.Module(body=stmts, type_ignores=[])
    groups = set()
    changed = True
    while changed:  # names bound to this_grid() or to another such name
        changed = False
        for node in ast.walk(module):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                    and isinstance(node.targets[0], ast.Name):
                value = node.value
                if _is_group_marker(value) or (isinstance(value, ast.Name) and value.id in groups):
                    if node.targets[0].id not in groups:
                        groups.add(node.targets[0].id)
                        changed = True

    def is_group(node):
        return _is_group_marker(node) or (isinstance(node, ast.Name) and node.id in groups)

    class Resolver(ast.NodeTransformer):
        def visit_Call(self, node):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "sync" and is_group(func.value):
                if node.args or node.keywords:
                    raise DualgpuError(
                        f"{ctx.where}, line {node.lineno}: grid.sync() takes no arguments."
                    )
                site = Site("grid_sync", node.lineno, dotted(node), _where_of(func.value, ctx))
                return marker("grid_sync", [], site, node)
            self.generic_visit(node)
            return node

        def visit_Assign(self, node):
            if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                    and node.targets[0].id in groups:
                node.value = ast.copy_location(ast.Constant(0), node.value)
                return node
            self.generic_visit(node)
            return node

        def visit_Name(self, node):
            if node.id in groups and isinstance(node.ctx, ast.Load):
                _refuse_group(ctx, node, node.id)
            return node

        def visit_Attribute(self, node):
            if is_group(node.value):
                _refuse_group(ctx, node, dotted(node))
            self.generic_visit(node)
            return node

    module = Resolver().visit(module)
    for node in ast.walk(module):
        if _is_group_marker(node):
            _refuse_group(ctx, node, "cuda.cg.this_grid()")
    return module.body


def _where_of(node, ctx):
    site = site_of(node)
    return site.where if site is not None else getattr(node, "dg_where", ctx.where)


def _refuse_group(ctx, node, text):
    raise DualgpuError(
        f"{_where_of(node, ctx)}, line {getattr(node, 'lineno', '?')}: the grid group '{text}' "
        "is used "
        "other than as 'grid = cuda.cg.this_grid()' and 'grid.sync()' (numba.cuda's grid "
        "group offers sync() only). Keep to those two forms."
    )


# ---------------------------------------------------------------------------
# 4. local arrays and the site table
# ---------------------------------------------------------------------------
class _LocalArrays(ast.NodeTransformer):
    def __init__(self, ctx, values):
        self.ctx = ctx
        self.values = values

    def visit_Call(self, node):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "_dg_local_array" \
                and len(node.args) == 3:
            line = getattr(node, "lineno", 0)
            where = getattr(node, "dg_where", self.ctx.where)
            shape, dtype = array_spec(
                "cuda.local.array", node.args[0], node.args[1], self.values, where, line
            )
            if 0 in shape:
                raise DualgpuError(
                    f"{where}, line {line}: cuda.local.array needs a positive size; got shape "
                    f"{shape}."
                )
            site = Site("local", line, "cuda.local.array(...)", where, shape, dtype)
            return marker("local", [], site, node)
        return node


def _number_sites(stmts):
    sites = []
    for stmt in stmts:
        for node in ast.walk(stmt):
            site = site_of(node)
            if site is not None:
                site.index = len(sites)
                sites.append(site)
    return sites


def prepare(translation, runtime_names, context_names):
    """Return the :class:`Prepared` form of a block-level kernel translation.

    Parameters
    ----------
    translation : dualgpu.backends.cpu.translation.Translation
        The kernel's translation (``block_level`` true).
    runtime_names, context_names : iterable of str
        Names that inlined code shares with the kernel (runtime helpers, thread
        context parameters): never renamed.
    """
    ctx = _Context(translation, runtime_names, context_names)
    stmts = _docstring_free(copy.deepcopy(translation.tree.body))
    stmts = hoist(ctx, stmts)
    stmts = _inline_all(ctx, stmts)
    stmts = _resolve_grid_groups(ctx, stmts)
    stmts = hoist(ctx, stmts)
    kernel_locals = set(translation.namespace.locals) | _stored_names(stmts)
    values = _Values(ctx.values, kernel_locals)
    module = _LocalArrays(ctx, values).visit(ast.Module(body=stmts, type_ignores=[]))
    stmts = ast.fix_missing_locations(module).body or [ast.Pass()]
    return Prepared(
        stmts, list(translation.params), ctx.values, ctx.devices, _number_sites(stmts),
        translation.filename, translation.where, translation.tree.lineno,
    )
