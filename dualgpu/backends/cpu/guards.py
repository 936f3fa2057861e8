"""Hoisting a 1-D kernel's bounds guard out of the cpu backend's launch loop.

A 1-D kernel that starts with a bounds guard (``i = cuda.grid(1)``,
``n = u.shape[0]``, then ``if i < n: <body>`` or ``if i >= n: return``) gets a
"bounded" launcher: :func:`find_guard` returns a :class:`Guard` whose bound the
launcher computes once per launch, and whose tree (the thread function without
the guard) runs for ``min(threads, n)`` indices. A guard inside the loop made
LLVM emit masked vector loads and stores, up to 2.5x slower at some relative
buffer alignments. Only integer bounds made of parameters and array sizes
qualify.
"""
import ast
import builtins
import copy

import numpy as np

from dualgpu.core.dualarray import DualArray
from dualgpu.backends.cpu.launchers import CONTEXT

__all__ = ["Guard", "find_guard"]

#: Context names a kernel may use and still get a bounded launcher.
_GUARD_CONTEXT = frozenset({"_dg_gx", "_dg_gdx", "_dg_bdx"})
_INT_OPS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)
_PURE_OPS = _INT_OPS + (ast.Div, ast.Pow)
_ARRAY_SIZES = ("size", "ndim")


class _NotHoistable(Exception):
    """Raised inside the guard analysis: the kernel keeps the ordinary launchers."""


class Guard:
    """A hoistable bounds guard at the top of a 1-D kernel (see :func:`find_guard`).

    Attributes
    ----------
    tree : ast.FunctionDef
        The thread function without the guard (for threads below the bound).
    bound : str
        Launcher source lines that set ``_dg_m`` to the number of leading
        global indices that pass the guard, clamped to ``[0, _dg_gdx * _dg_bdx]``.
    int_params, array_params : tuple of int
        Positions of the arguments the bound reads as integers / as array sizes;
        :meth:`applies` checks them at each launch.
    """

    def __init__(self, tree, bound, int_params, array_params):
        self.tree = tree
        self.bound = bound
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

    def __init__(self, params, namespace, index):
        self.params = params
        self.namespace = namespace
        self.index = index
        self.kinds = {}  # prefix local -> "int" or "pure"
        self.int_params = set()
        self.array_params = set()

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
                if name == self.index or name.startswith("_dg_"):
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


def _is_index(node, index):
    return isinstance(node, ast.Name) and node.id == index


def _keep_condition(test, index):
    """For a guard test on ``index``: return (bound expr, strict) meaning "keep iff
    index < bound" (strict) or "index <= bound"; None if it is not of that form."""
    negate = False
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        negate = not negate
        test = test.operand
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    left, op, right = test.left, test.ops[0], test.comparators[0]
    flipped = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE}
    if _is_index(right, index) and not _is_index(left, index) and type(op) in flipped:
        left, right, op = right, left, flipped[type(op)]()
    if not _is_index(left, index):
        return None
    if negate:  # not (i < e) == i >= e (integers)
        opposite = {ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.LtE: ast.Gt, ast.Gt: ast.LtE}
        if type(op) not in opposite:
            return None
        op = opposite[type(op)]()
    return right, type(op)


def find_guard(tree, params, namespace):
    """Return a :class:`Guard` for a rewritten kernel ``tree``, or None.

    Recognised (``i`` the name given ``cuda.grid(1)``, the prefix being
    assignments of pure size expressions such as ``n = u.shape[0]``)::

        i = cuda.grid(1); <prefix>; if i < EXPR: <body>          (last statement)
        i = cuda.grid(1); <prefix>; if i >= EXPR: return; <body>

    (also ``EXPR > i``, ``i <= EXPR``, ``not i < EXPR`` ...), where EXPR is an
    integer built from parameters, array sizes and the prefix. Anything else
    (or a kernel reading other thread indices) returns None.
    """
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id in CONTEXT}
    if not used <= _GUARD_CONTEXT:
        return None
    body = list(tree.body)
    start = 0
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        start = 1  # docstring
    builder = _BoundBuilder(params, namespace, None)
    prefix = []  # (target, rewritten value, is_int, int params, array params), in order
    for pos in range(start, len(body)):
        stmt = body[pos]
        if (
            isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
        ):
            target = stmt.targets[0].id
            if target == builder.index or target.startswith("_dg_"):
                return None
            if builder.index is None and _is_index(stmt.value, "_dg_gx"):
                if target in params or target in builder.kinds:
                    return None
                builder.index = target
                continue
            try:
                value, is_int, ints, arrays = builder.expr(stmt.value, need_int=False)
            except _NotHoistable:
                return None
            builder.kinds[target] = "int" if is_int else "pure"
            prefix.append((target, value, is_int, ints, arrays))
            continue
        if builder.index is None or not isinstance(stmt, ast.If):
            return None
        keep = _keep_condition(stmt.test, builder.index)
        if keep is None:
            return None
        bound, op = keep
        if op in (ast.Lt, ast.LtE):  # keep iff i < / <= EXPR: the body is the if's body
            if stmt.orelse or pos != len(body) - 1:
                return None
            rest = stmt.body
        else:  # exit iff i >= / > EXPR: the if must be a bare return
            if stmt.orelse or len(stmt.body) != 1 or not isinstance(stmt.body[0], ast.Return):
                return None
            value = stmt.body[0].value
            if value is not None and not (isinstance(value, ast.Constant) and value.value is None):
                return None
            rest = body[pos + 1:]
        strict = op in (ast.Lt, ast.GtE)
        return _make_guard(tree, body[:pos] + rest, builder, prefix, bound, strict, params)
    return None


def _prefix_names(node):
    return {n.id[len("_dg_p_"):] for n in ast.walk(node)
            if isinstance(n, ast.Name) and n.id.startswith("_dg_p_")}


def _make_guard(tree, new_body, builder, prefix, bound, strict, params):
    """Build the :class:`Guard` once the pattern matched (None if EXPR does not qualify)."""
    try:
        expr, _, ints, arrays = builder.expr(bound, need_int=True)
    except _NotHoistable:
        return None
    # the prefix lines EXPR depends on (latest assignment first), and what they read
    needed = _prefix_names(expr)
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
    total = "_dg_gdx * _dg_bdx"
    source = "".join(lines) + f"    _dg_m = {total} * 0 + ({ast.unparse(expr)})\n"
    if strict:  # threads 0 .. EXPR - 1 pass
        source += f"    if _dg_m > {total}:\n        _dg_m = {total} * 1\n"
    else:  # threads 0 .. EXPR pass
        source += (
            f"    if _dg_m >= {total}:\n        _dg_m = {total} * 1\n"
            "    else:\n        _dg_m = _dg_m + 1\n"
        )
    source += "    if _dg_m < 0:\n        _dg_m = _dg_m * 0\n"
    unguarded = copy.deepcopy(tree)
    unguarded.body = copy.deepcopy(new_body) or [ast.Pass()]
    positions = {p: k for k, p in enumerate(params)}
    return Guard(
        unguarded, source, tuple(sorted(positions[p] for p in ints)),
        tuple(sorted(positions[p] for p in arrays)),
    )
