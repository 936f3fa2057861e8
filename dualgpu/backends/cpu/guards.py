"""Hoisting a kernel's bounds guard out of the cpu backend's launch loop.

A kernel that starts with a bounds guard (``i = cuda.grid(1)``, ``n = u.shape[0]``,
then ``if i < n: <body>`` or ``if i >= n: return``; in 2-D and 3-D
``i, j = cuda.grid(2)``, ``nx, ny = u.shape``, then ``if i >= nx or j >= ny: return``
or ``if i < nx and j < ny: <body>``) gets a "bounded" launcher: :func:`find_guard`
returns a :class:`Guard` whose bounds the launcher computes once per launch, and whose
tree (the thread function without the guard) runs for ``min(threads, bound)`` indices
per axis. A guard inside the loop made LLVM emit masked vector loads and stores, up to
2.5x slower at some relative buffer alignments; in 2-D it kept the row's work (a
periodic stencil's ``(i - 1) % nx``) inside the inner loop, where it may not be
hoisted past the guard. Only integer bounds made of parameters and array sizes qualify.
"""
import ast
import builtins
import copy

import numpy as np

from dualgpu.core.dualarray import DualArray
from dualgpu.backends.cpu.launchers import CONTEXT

__all__ = ["Guard", "find_guard"]

#: Context names a kernel may use and still get a bounded launcher: the global index and the
#: grid's size (the block and thread indices would need the block loops).
_GUARD_CONTEXT = frozenset({"_dg_gx", "_dg_gy", "_dg_gz", "_dg_gdx", "_dg_gdy", "_dg_gdz",
                            "_dg_bdx", "_dg_bdy", "_dg_bdz"})
#: The global index names and their axes.
_AXES = {"_dg_gx": "x", "_dg_gy": "y", "_dg_gz": "z"}
_INT_OPS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)
_PURE_OPS = _INT_OPS + (ast.Div, ast.Pow)
_ARRAY_SIZES = ("size", "ndim")


class _NotHoistable(Exception):
    """Raised inside the guard analysis: the kernel keeps the ordinary launchers."""


class Guard:
    """A hoistable bounds guard at the top of a kernel (see :func:`find_guard`).

    Attributes
    ----------
    tree : ast.FunctionDef
        The thread function without the guard (for threads below the bounds).
    bound : str
        Launcher source lines that set ``_dg_mx``, ``_dg_my`` and ``_dg_mz`` to the
        number of leading global indices per axis that pass the guard, each clamped to
        ``[0, _dg_gd<axis> * _dg_bd<axis>]`` (the whole axis where the guard does not
        test it).
    assume : str
        ``_dg_assume(...); `` calls saying that each guarded index is below its bound
        (``_dg_e<axis>``, set by ``bound``), for the launcher's loop body.
    int_params, array_params : tuple of int
        Positions of the arguments the bound reads as integers / as array sizes;
        :meth:`applies` checks them at each launch.
    """

    def __init__(self, tree, bound, int_params, array_params, assume=""):
        self.tree = tree
        self.bound = bound
        self.assume = assume
        self.int_params = int_params
        self.array_params = array_params

    def applies(self, args):
        """True if the launch arguments make the bound an exact integer."""
        for k in self.int_params:
            a = args[k]
            if isinstance(a, bool) or not isinstance(a, (int, np.integer)):
                return False
            if isinstance(a, np.uint64) or (type(a) is int and not -(2**63) <= a < 2**63):
                return False
        for k in self.array_params:
            a = args[k]
            if not isinstance(a, (np.ndarray, DualArray)):
                return False
        return True


class _BoundBuilder:
    """Checks expressions before the guard and rewrites them for the launcher.

    Names in the bound may be kernel parameters, locals assigned earlier in the
    kernel's prefix (renamed ``_dg_p_<name>`` in the launcher), module-level
    Python ints (inlined) and the builtins len/min/max. Nothing that reads
    array elements, calls other functions or uses the thread index qualifies.
    """

    def __init__(self, params, namespace):
        self.params = params
        self.namespace = namespace
        self.indices = {}  # name -> axis of the global indices assigned so far
        self.kinds = {}  # prefix local -> "int" or "pure"

    def _builtin(self, name):
        return (
            name not in self.namespace.locals
            and self.namespace.values.get(name, getattr(builtins, name)) is getattr(builtins, name)
        )

    def _array(self, node):
        """``node`` as an array parameter (sizes of arrays never change in a launch)."""
        if isinstance(node, ast.Name) and node.id in self.params and node.id not in self.kinds:
            return ast.Name(id=node.id, ctx=ast.Load()), {node.id}
        raise _NotHoistable

    def expr(self, node, need_int):
        """Return ``(rewritten node, is_int, int params, array params)`` or raise _NotHoistable."""
        ints, arrays = set(), set()

        def walk(n):
            if isinstance(n, ast.Constant):
                if isinstance(n.value, bool) or not isinstance(n.value, (int, float)):
                    raise _NotHoistable
                return ast.Constant(n.value), isinstance(n.value, int)
            if isinstance(n, ast.Name):
                name = n.id
                if name in self.indices or name.startswith("_dg_"):
                    raise _NotHoistable
                if name in self.kinds:
                    return ast.Name(id="_dg_p_" + name, ctx=ast.Load()), self.kinds[name] == "int"
                if name in self.params:
                    ints.add(name)
                    return ast.Name(id=name, ctx=ast.Load()), True
                if name in self.namespace.locals:
                    raise _NotHoistable  # a local not yet assigned here
                value = self.namespace.values.get(name)
                if type(value) is int and -(2**62) < value < 2**62:
                    return ast.Constant(value), True
                raise _NotHoistable
            if isinstance(n, ast.Attribute) and n.attr in _ARRAY_SIZES:
                base, names = self._array(n.value)
                arrays.update(names)
                return ast.Attribute(value=base, attr=n.attr, ctx=ast.Load()), True
            if isinstance(n, ast.Subscript):
                shape = n.value
                index = n.slice
                if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub):
                    index = index.operand
                    sign = -1
                else:
                    sign = 1
                if (
                    isinstance(shape, ast.Attribute) and shape.attr == "shape"
                    and isinstance(index, ast.Constant) and type(index.value) is int
                ):
                    base, names = self._array(shape.value)
                    arrays.update(names)
                    return ast.Subscript(
                        value=ast.Attribute(value=base, attr="shape", ctx=ast.Load()),
                        slice=ast.Constant(sign * index.value), ctx=ast.Load(),
                    ), True
                raise _NotHoistable
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and not n.keywords:
                name = n.func.id
                if name == "len" and len(n.args) == 1 and self._builtin("len"):
                    base, names = self._array(n.args[0])
                    arrays.update(names)
                    return ast.Call(func=ast.Name(id="len", ctx=ast.Load()), args=[base],
                                    keywords=[]), True
                if name in ("min", "max") and len(n.args) >= 2 and self._builtin(name):
                    parts = [walk(a) for a in n.args]
                    return ast.Call(func=ast.Name(id=name, ctx=ast.Load()),
                                    args=[p[0] for p in parts], keywords=[]), all(
                        p[1] for p in parts)
                raise _NotHoistable
            if isinstance(n, ast.BinOp) and isinstance(n.op, _PURE_OPS):
                (left, li), (right, ri) = walk(n.left), walk(n.right)
                return ast.BinOp(left=left, op=n.op, right=right), (
                    li and ri and isinstance(n.op, _INT_OPS))
            if isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.USub, ast.UAdd)):
                operand, is_int = walk(n.operand)
                return ast.UnaryOp(op=n.op, operand=operand), is_int
            raise _NotHoistable

        rewritten, is_int = walk(node)
        if need_int and not is_int:
            raise _NotHoistable
        return rewritten, is_int, ints, arrays


def _is_index(node, indices):
    return isinstance(node, ast.Name) and node.id in indices


def _keep_condition(test, indices):
    """For a test comparing one global index with a bound: return ``(index, bound, op)``
    meaning "keep iff index op bound" (op one of Lt, LtE, Gt, GtE); None otherwise."""
    negate = False
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        negate = not negate
        test = test.operand
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    left, op, right = test.left, test.ops[0], test.comparators[0]
    flipped = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE}
    if _is_index(right, indices) and not _is_index(left, indices) and type(op) in flipped:
        left, right, op = right, left, flipped[type(op)]()
    if not _is_index(left, indices):
        return None
    if negate:  # not (i < e) == i >= e (integers)
        opposite = {ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.LtE: ast.Gt, ast.Gt: ast.LtE}
        if type(op) not in opposite:
            return None
        op = opposite[type(op)]()
    return left.id, right, type(op)


def _guard_conditions(test, indices):
    """The per-index conditions of a guard's test, and whether the if's body is the kept
    work (True: ``i < n and j < m``) or a bare exit (False: ``i >= n or j >= m``).

    Returns ``(keeps, conditions)`` with ``conditions`` a list of ``(index, bound,
    strict)``, each index at most once, or None when the test is not of that form.
    """
    if isinstance(test, ast.BoolOp):
        parts, joined_by_and = test.values, isinstance(test.op, ast.And)
    else:
        parts, joined_by_and = [test], None
    found = [_keep_condition(part, indices) for part in parts]
    if any(f is None for f in found) or len({f[0] for f in found}) != len(found):
        return None
    keeps = {op in (ast.Lt, ast.LtE) for _, _, op in found}
    if len(keeps) != 1:
        return None
    (keeps,) = keeps
    if joined_by_and is not None and joined_by_and != keeps:
        return None  # "i < n or j < m" and "i >= n and j >= m" are not bounds
    # keep iff i < e / exit iff i >= e: strict; keep iff i <= e / exit iff i > e: not
    return keeps, [(index, bound, op in (ast.Lt, ast.GtE)) for index, bound, op in found]


def _index_assignment(stmt, builder):
    """The ``{name: axis}`` a statement assigns from global indices (``i = cuda.grid(1)``,
    ``i, j = cuda.grid(2)`` as rewritten), {} if it assigns none, None if it is unusable."""
    target, value = stmt.targets[0], stmt.value
    if isinstance(target, ast.Name) and isinstance(value, ast.Name) and value.id in _AXES:
        pairs = [(target, value)]
    elif (
        isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple)
        and len(target.elts) == len(value.elts)
        and all(isinstance(v, ast.Name) and v.id in _AXES for v in value.elts)
    ):
        pairs = list(zip(target.elts, value.elts))
    else:
        return {}
    found = {}
    axes = set(builder.indices.values())
    for name, index in pairs:
        if not isinstance(name, ast.Name):
            return None
        axis = _AXES[index.id]
        if (name.id in builder.params or name.id in builder.kinds or name.id in builder.indices
                or name.id in found or axis in axes):
            return None
        found[name.id] = axis
        axes.add(axis)
    return found


def _shape_unpacking(stmt):
    """``nx, ny = u.shape`` (u an array parameter): ``[(name, u.shape[k]), ...]``, else None."""
    target, value = stmt.targets[0], stmt.value
    if not (
        isinstance(target, ast.Tuple) and all(isinstance(t, ast.Name) for t in target.elts)
        and isinstance(value, ast.Attribute) and value.attr == "shape"
    ):
        return None
    return [(t.id, ast.Subscript(value=value, slice=ast.Constant(k), ctx=ast.Load()))
            for k, t in enumerate(target.elts)]


def find_guard(tree, params, namespace):
    """Return a :class:`Guard` for a rewritten kernel ``tree``, or None.

    Recognised (``i``, ``j``, ``k`` the names given ``cuda.grid``'s indices, the prefix
    being assignments of pure size expressions such as ``n = u.shape[0]`` or
    ``nx, ny = u.shape``)::

        i = cuda.grid(1); <prefix>; if i < EXPR: <body>          (last statement)
        i = cuda.grid(1); <prefix>; if i >= EXPR: return; <body>
        i, j = cuda.grid(2); <prefix>; if i < EX and j < EY: <body>
        i, j = cuda.grid(2); <prefix>; if i >= EX or j >= EY: return; <body>

    (also ``EXPR > i``, ``i <= EXPR``, ``not i < EXPR`` ..., and any subset of the axes),
    where each EXPR is an integer built from parameters, array sizes and the prefix.
    Anything else (or a kernel reading the thread or block indices) returns None.
    """
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id in CONTEXT}
    if not used <= _GUARD_CONTEXT:
        return None
    body = list(tree.body)
    start = 0
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        start = 1  # docstring
    builder = _BoundBuilder(params, namespace)
    prefix = []  # (target, rewritten value, is_int, int params, array params), in order
    for pos in range(start, len(body)):
        stmt = body[pos]
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            indices = _index_assignment(stmt, builder)
            if indices is None:
                return None
            if indices:
                builder.indices.update(indices)
                continue
            unpacked = _shape_unpacking(stmt)
            if unpacked is None and isinstance(stmt.targets[0], ast.Name):
                unpacked = [(stmt.targets[0].id, stmt.value)]
            if unpacked is None:
                return None
            for target, value in unpacked:
                if target in builder.indices or target.startswith("_dg_"):
                    return None
                try:
                    value, is_int, ints, arrays = builder.expr(value, need_int=False)
                except _NotHoistable:
                    return None
                builder.kinds[target] = "int" if is_int else "pure"
                prefix.append((target, value, is_int, ints, arrays))
            continue
        if not builder.indices or not isinstance(stmt, ast.If):
            return None
        found = _guard_conditions(stmt.test, builder.indices)
        if found is None:
            return None
        keeps, conditions = found
        if keeps:  # keep iff i < / <= EXPR ...: the body is the if's body
            if stmt.orelse or pos != len(body) - 1:
                return None
            rest = stmt.body
        else:  # exit iff i >= / > EXPR ...: the if must be a bare return
            if stmt.orelse or len(stmt.body) != 1 or not isinstance(stmt.body[0], ast.Return):
                return None
            value = stmt.body[0].value
            if value is not None and not (isinstance(value, ast.Constant) and value.value is None):
                return None
            rest = body[pos + 1:]
        bounds = {builder.indices[index]: (bound, strict) for index, bound, strict in conditions}
        return _make_guard(tree, body[:pos] + rest, builder, prefix, bounds)
    return None


def _prefix_names(node):
    return {n.id[len("_dg_p_"):] for n in ast.walk(node)
            if isinstance(n, ast.Name) and n.id.startswith("_dg_p_")}


def _make_guard(tree, new_body, builder, prefix, bounds):
    """Build the :class:`Guard` once the pattern matched (None if an EXPR does not qualify).

    ``bounds``: per guarded axis, ``(EXPR, strict)``: indices ``0 .. EXPR - 1`` pass
    (strict) or ``0 .. EXPR``.
    """
    exprs = {}
    ints, arrays = set(), set()
    for axis, (bound, strict) in bounds.items():
        try:
            expr, _, e_ints, e_arrays = builder.expr(bound, need_int=True)
        except _NotHoistable:
            return None
        exprs[axis] = (expr, strict)
        ints |= e_ints
        arrays |= e_arrays
    # the prefix lines the EXPRs depend on (latest assignment first), and what they read
    needed = set().union(*(_prefix_names(e) for e, _ in exprs.values()))
    lines = []
    for target, value, is_int, p_ints, p_arrays in reversed(prefix):
        if target not in needed:
            continue
        if not is_int:
            return None
        needed.discard(target)
        needed |= _prefix_names(value)
        lines.insert(0, f"    _dg_p_{target} = {ast.unparse(value)}\n")
        ints |= p_ints
        arrays |= p_arrays
    source = "".join(lines)
    assume = ""
    for axis in "xyz":
        total = f"_dg_gd{axis} * _dg_bd{axis}"
        m = f"_dg_m{axis}"
        if axis not in exprs:
            source += f"    {m} = {total}\n"
            continue
        expr, strict = exprs[axis]
        source += f"    _dg_e{axis} = {total} * 0 + ({ast.unparse(expr)})\n    {m} = _dg_e{axis}\n"
        assume += f"_dg_assume(_dg_g{axis} {'<' if strict else '<='} _dg_e{axis}); "
        if strict:  # indices 0 .. EXPR - 1 pass
            source += f"    if {m} > {total}:\n        {m} = {total} * 1\n"
        else:  # indices 0 .. EXPR pass
            source += (
                f"    if {m} >= {total}:\n        {m} = {total} * 1\n"
                f"    else:\n        {m} = {m} + 1\n"
            )
        source += f"    if {m} < 0:\n        {m} = {m} * 0\n"
    unguarded = copy.deepcopy(tree)
    unguarded.body = copy.deepcopy(new_body) or [ast.Pass()]
    positions = {p: k for k, p in enumerate(builder.params)}
    return Guard(
        unguarded, source, tuple(sorted(positions[p] for p in ints)),
        tuple(sorted(positions[p] for p in arrays)), assume,
    )
