"""What the cpu rewriter emits for block-level ``cuda`` calls: marker calls with a :class:`Site`.

A marker is a call ``_dg_blk_<kind>(args)`` whose AST node carries a
:class:`Site` in its ``dg_site`` attribute (the construct, its line and the
function it is written in). Later passes find markers by that attribute:
:mod:`.prepare` hoists the synchronising ones to statements of their own,
:mod:`.structure` cuts the kernel at them and :mod:`.codegen` replaces them by
region boundaries and the team-level code that computes their results.

``cuda.shared.array`` (and ``cuda.local.array`` in a block-level kernel)
become markers too, because their storage is made by the launcher: one shared
array per block, one local array per thread.
"""
import ast
import builtins
import copy
import operator
import types as pytypes

import numpy as np
from numba.core import types
from numba.core.errors import NumbaError
from numba.np import numpy_support

from dualgpu.errors import DualgpuError
from dualgpu.backends.common.translate import UNRESOLVED, dotted

__all__ = [
    "Site", "SYNC_KINDS", "WARP_KINDS", "BLOCK_KINDS", "BLOCK_CALLS", "block_call", "site_of",
    "marker", "constant_value", "array_dtype", "array_spec",
]

WARP_SIZE = 32
FULL_MASK = 0xFFFFFFFF

#: cuda path -> (marker kind, number of arguments accepted)
BLOCK_CALLS = {
    ("syncthreads",): ("sync", (0,)),
    ("syncthreads_count",): ("sync_count", (1,)),
    ("syncthreads_and",): ("sync_and", (1,)),
    ("syncthreads_or",): ("sync_or", (1,)),
    ("syncwarp",): ("syncwarp", (0, 1)),
    ("shfl_sync",): ("shfl_idx", (3,)),
    ("shfl_up_sync",): ("shfl_up", (3,)),
    ("shfl_down_sync",): ("shfl_down", (3,)),
    ("shfl_xor_sync",): ("shfl_xor", (3,)),
    ("all_sync",): ("all", (2,)),
    ("any_sync",): ("any", (2,)),
    ("eq_sync",): ("eq", (2,)),
    ("ballot_sync",): ("ballot", (2,)),
    ("match_any_sync",): ("match_any", (2,)),
    ("match_all_sync",): ("match_all", (2,)),
    ("activemask",): ("activemask", (0,)),
    ("lanemask_lt",): ("lanemask_lt", (0,)),
    ("cg", "this_grid"): ("grid_group", (0,)),
    ("shared", "array"): ("shared", (2,)),
}

#: Markers that all threads of a block must reach together.
BLOCK_KINDS = frozenset({"sync", "sync_count", "sync_and", "sync_or"})
#: Markers that the lanes of a warp named in a mask must reach together.
WARP_KINDS = frozenset({
    "syncwarp", "shfl_idx", "shfl_up", "shfl_down", "shfl_xor", "all", "any", "eq", "ballot",
    "match_any", "match_all", "activemask",
})
#: Every marker that is a synchronisation point (a region boundary).
SYNC_KINDS = BLOCK_KINDS | WARP_KINDS | {"grid_sync"}

class Site:
    """One block-level construct in the source: what it is and where.

    Attributes
    ----------
    kind : str
        The marker kind (a value of :data:`BLOCK_CALLS`, or ``"grid_sync"``,
        ``"local"``, ``"inline"``).
    line : int
        Line in ``filename``.
    text : str
        The call as written (``"cuda.syncthreads()"``).
    where : str
        The function it is written in (``"kernel 'step'"``, ``"device function ..."``).
    shape, dtype : tuple of int, numpy.dtype
        For shared and local arrays: the compile-time shape and element type
        (shape ``(0,)`` is dynamic shared memory).
    index : int
        Position in the kernel's site table (set by :mod:`.prepare`).
    """

    def __init__(self, kind, line, text, where, shape=None, dtype=None):
        self.kind = kind
        self.line = line
        self.text = text
        self.where = where
        self.shape = shape
        self.dtype = dtype
        self.index = -1
        self.key = self  # the declaration in the source; copies (inlined twice) share it

    def __deepcopy__(self, memo):
        # copies of a statement get their own site (numbered apart); the device
        # function an inline site refers to is shared, not copied
        new = copy.copy(self)
        memo[id(self)] = new
        return new

    def describe(self):
        """``"cuda.syncthreads() at line 12 of kernel 'step'"``."""
        return f"{self.text} at line {self.line} of {self.where}"

    def __repr__(self):
        return f"<Site {self.kind} line {self.line}>"


def marker(kind, args, site, like=None):
    """Return the marker call ``_dg_blk_<kind>(*args)`` carrying ``site``."""
    call = ast.Call(func=ast.Name(id=f"_dg_blk_{kind}", ctx=ast.Load()), args=list(args),
                    keywords=[])
    call.dg_site = site
    if like is not None:
        ast.copy_location(call, like)
        ast.copy_location(call.func, like)
    return call


def site_of(node):
    """The :class:`Site` of a marker call, or None for any other node."""
    return getattr(node, "dg_site", None) if isinstance(node, ast.Call) else None


# ---------------------------------------------------------------------------
# compile-time constants (shapes and dtypes)
# ---------------------------------------------------------------------------
_BINARY = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
    ast.LShift: operator.lshift, ast.RShift: operator.rshift,
}


class _NotConstant(Exception):
    pass


def constant_value(node, namespace):
    """Return the value of a compile-time constant expression, or raise ``_NotConstant``.

    Literals, tuples, global and closure names (``namespace.value``),
    attributes of modules and of numba/numpy objects, integer arithmetic.
    Nothing else runs: local variables are not constants.
    """
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(constant_value(e, namespace) for e in node.elts)
    if isinstance(node, ast.Name):
        value = namespace.value(node)
        if value is UNRESOLVED:
            raise _NotConstant(node.id)
        return value
    if isinstance(node, ast.Attribute):
        base = constant_value(node.value, namespace)
        if isinstance(base, (pytypes.ModuleType, type, np.dtype, types.Type)):
            try:
                return getattr(base, node.attr)
            except AttributeError:
                raise _NotConstant(dotted(node)) from None
        raise _NotConstant(dotted(node))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](constant_value(node.left, namespace),
                                      constant_value(node.right, namespace))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = constant_value(node.operand, namespace)
        return -value if isinstance(node.op, ast.USub) else value
    raise _NotConstant(dotted(node))


def array_dtype(value):
    """The numpy dtype named by a numba type, numpy type or dtype; None if it is none of these."""
    try:
        if isinstance(value, types.NumberClass):
            value = value.instance_type
        if isinstance(value, types.Type):
            return np.dtype(numpy_support.as_dtype(value))
        if value is builtins.float:
            return np.dtype(np.float64)
        if value is builtins.int:
            return np.dtype(np.int64)
        if value is builtins.bool:
            return np.dtype(np.bool_)
        return np.dtype(value)
    except (TypeError, NotImplementedError, NumbaError):
        return None


def array_spec(construct, shape_node, dtype_node, namespace, where, line):
    """Return ``(shape tuple, numpy dtype)`` of a shared or local array declaration.

    Raises DualgpuError naming the construct and the line when the shape is not
    a compile-time constant or the dtype is not a scalar type (numba.cuda has
    the same requirements).
    """
    try:
        shape = constant_value(shape_node, namespace)
    except _NotConstant as exc:
        raise DualgpuError(
            f"{where}, line {line}: the shape of {construct} ('{dotted(shape_node)}') must be "
            f"a compile-time constant (literals, module-level or closure constants), as "
            f"numba.cuda requires; '{exc.args[0]}' is not one. Make the size a module-level "
            "constant."
        ) from None
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (int(shape),)
    if not (isinstance(shape, tuple) and shape
            and all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in shape)):
        raise DualgpuError(
            f"{where}, line {line}: the shape of {construct} must be an int or a tuple of "
            f"ints; got {shape!r}."
        )
    shape = tuple(int(d) for d in shape)
    try:
        dtype = array_dtype(constant_value(dtype_node, namespace))
    except _NotConstant:
        dtype = None
    if dtype is None or dtype.kind not in "biufc":
        raise DualgpuError(
            f"{where}, line {line}: the dtype of {construct} ('{dotted(dtype_node)}') must be "
            "a numba or numpy scalar type such as float64, numba.int32 or np.float32."
        )
    return shape, dtype


# ---------------------------------------------------------------------------
# the rewriter hook
# ---------------------------------------------------------------------------
def _arguments(node, names):
    """Positional and keyword arguments of a call, by the parameter names of the construct."""
    bound = dict(zip(names, node.args))
    for kw in node.keywords:
        if kw.arg is None or kw.arg not in names or kw.arg in bound:
            return None
        bound[kw.arg] = kw.value
    if len(node.args) > len(names):
        return None
    return bound


_PARAMETERS = {
    "shared": ("shape", "dtype", "alignment"),
    "syncwarp": ("mask",),
    "sync_count": ("predicate",), "sync_and": ("predicate",), "sync_or": ("predicate",),
    "shfl_idx": ("mask", "value", "src_lane"), "shfl_up": ("mask", "value", "delta"),
    "shfl_down": ("mask", "value", "delta"), "shfl_xor": ("mask", "value", "lane_mask"),
    "all": ("mask", "predicate"), "any": ("mask", "predicate"), "eq": ("mask", "predicate"),
    "ballot": ("mask", "predicate"), "match_any": ("mask", "value"),
    "match_all": ("mask", "value"),
}


def block_call(rewriter, path, node, lane_id):
    """Return the replacement of the block-level call ``node`` (a ``cuda.<path>(...)`` call).

    ``rewriter`` is the cpu backend's rewriter (its ``namespace`` and ``where``
    are used; ``block_level`` is set); ``lane_id`` builds the lane-index
    expression. Raises DualgpuError for a malformed call, naming the line.
    """
    kind, counts = BLOCK_CALLS[path]
    line = getattr(node, "lineno", 0)
    text = dotted(node)
    names = _PARAMETERS.get(kind, ())
    bound = _arguments(node, names) if names else ({} if not node.args and not node.keywords
                                                    else None)
    needed = [n for n in names if n not in ("alignment",)][:max(counts)]
    if bound is None or len(bound) - ("alignment" in bound) not in counts or any(
        n not in bound for n in needed[:min(counts)]
    ):
        signature = ", ".join(needed)
        raise DualgpuError(
            f"{rewriter.where}, line {line}: '{text}' should be called as "
            f"cuda.{'.'.join(path)}({signature}), as in numba.cuda."
        )
    if kind == "lanemask_lt":
        # no synchronisation: the lanes below this one, (1 << laneid) - 1
        rewriter.uses_context = True
        rewriter.uses_block_index = True
        return ast.Call(func=ast.Name(id="_dg_lanemask_lt", ctx=ast.Load()), args=[lane_id()],
                        keywords=[])
    rewriter.block_level = True
    if kind == "shared":
        shape, dtype = array_spec(
            "cuda.shared.array", bound["shape"], bound["dtype"], rewriter.namespace,
            rewriter.where, line,
        )
        if 0 in shape and shape != (0,):
            raise DualgpuError(
                f"{rewriter.where}, line {line}: dynamic shared memory is declared as "
                f"cuda.shared.array(0, dtype) (one dimension); got shape {shape}."
            )
        site = Site("shared", line, text, rewriter.where, shape, dtype)
        return marker("shared", [], site, node)
    site = Site(kind, line, text, rewriter.where)
    if kind in ("sync", "activemask", "grid_group"):
        args = []
    elif kind == "syncwarp":
        args = [bound.get("mask", ast.Constant(FULL_MASK))]
    else:
        args = [bound[n] for n in names]
    rewriter.uses_context = True
    rewriter.uses_block_index = True
    return marker(kind, args, site, node)
