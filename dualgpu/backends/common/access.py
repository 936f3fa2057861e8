"""Which array parameters a kernel reads and which it writes, from its (rewritten) source.

The cpu backend runs many lane tiles of one dual launch one after another (or
at once): every tile recomputes the values, so an array that the kernel both
reads and writes must be put back to its pre-launch contents before the next
tile runs, and tiles may only run at the same time when no array is both read
and written. This module answers, per parameter, "read?" and "written?", and
says "both" whenever it cannot tell; a wrong "no" would give wrong numbers,
a wrong "yes" only costs a copy or keeps a launch serial.

What counts (``p`` a parameter; ``ndim`` its number of dimensions at launch):

- ``p[i, j] = v`` writes p; ``p[i] += v`` reads and writes it; ``p[...]`` in an
  expression reads it;
- an atomic (``_dg_atomic_*(p, ...)``, the cpu backend's rewrite of
  ``cuda.atomic.*``) reads and writes p;
- a call of a device function passes p's reads and writes through to the
  callee's parameter (recursion: both);
- ``p.shape``, ``p.size``, ``p.ndim``, ``len(p)`` touch nothing;
- anything else that lets p (or a view of it: ``p[i]`` with fewer indices than
  ``ndim``, or a slice) escape -- bound to a name, returned, put in a tuple,
  passed to another function -- counts as both.

Examples
--------
>>> import ast
>>> tree = ast.parse("def k(u, v, a):\\n    v[0] = u[0] * a\\n    u[1] += 1.0").body[0]
>>> summary = analyse(tree, {})
>>> summary.resolve((1, 1, 0))
((True, True), (False, True), (False, False))
"""
import ast

from dualgpu.backends.common.translate import Namespace, device_py_func, function_source

__all__ = ["Summary", "analyse", "analyse_source", "BOTH", "NEITHER"]

#: (read, written) flags.
BOTH = (True, True)
NEITHER = (False, False)

_SIZE_ATTRIBUTES = frozenset({"shape", "size", "ndim", "dtype", "lanes"})
_ATOMIC_PREFIX = "_dg_atomic_"


class _Use:
    """One use of a parameter: how many plain indices, whether a slice, and what it does."""

    __slots__ = ("kind", "indices", "sliced", "callee", "position")

    def __init__(self, kind, indices=0, sliced=False, callee=None, position=None):
        # "load", "store", "update", "bound" (a view or element escapes), "call", "both"
        self.kind = kind
        self.indices = indices
        self.sliced = sliced
        self.callee = callee
        self.position = position


class Summary:
    """Reads and writes of one function's parameters (see :func:`analyse`).

    ``resolve(ndims)`` turns the recorded uses into ``(read, written)`` flags
    for given parameter dimensions (0 for scalars, None when unknown).
    """

    def __init__(self, params, uses):
        self.params = tuple(params)
        self.uses = uses  # param name -> list of _Use
        self._cache = {}
        self._active = False  # on the resolution stack (recursion): answer BOTH

    def resolve(self, ndims):
        ndims = tuple(ndims) + (None,) * (len(self.params) - len(ndims))
        cached = self._cache.get(ndims)
        if cached is not None:
            return cached
        if self._active:
            return tuple(BOTH for _ in self.params)
        self._active = True
        try:
            flags = tuple(self._flags(name, ndim) for name, ndim in zip(self.params, ndims))
        finally:
            self._active = False
        self._cache[ndims] = flags
        return flags

    def _flags(self, name, ndim):
        if ndim == 0:  # a scalar is passed by value
            return NEITHER
        read = written = False
        for use in self.uses.get(name, ()):
            if use.kind == "both":
                return BOTH
            element = ndim is not None and not use.sliced and use.indices == ndim and ndim > 0
            if use.kind == "load":
                read = True
            elif use.kind == "store":
                written = True
            elif use.kind == "update":
                read = written = True
            elif use.kind == "bound":
                if not element:  # a view escapes: anything may happen to it
                    return BOTH
                read = True
            elif use.kind == "call":
                callee = use.callee
                if callee is None:
                    return BOTH
                sub_ndims = [None] * len(callee.params)
                if use.position < len(sub_ndims):
                    sub_ndims[use.position] = ndim
                flags = callee.resolve(sub_ndims)
                if use.position >= len(flags):
                    return BOTH
                r, w = flags[use.position]
                read, written = read or r, written or w
        return read, written


def _root(node):
    """The Name at the root of a chain of subscripts (``p[i][j]`` -> p), and the index count."""
    indices, sliced = 0, False
    while isinstance(node, ast.Subscript):
        index = node.slice
        parts = index.elts if isinstance(index, ast.Tuple) else [index]
        indices += len(parts)
        sliced |= any(isinstance(p, ast.Slice) or _is_ellipsis(p) for p in parts)
        node = node.value
    return (node if isinstance(node, ast.Name) else None), indices, sliced


def _is_ellipsis(node):
    return isinstance(node, ast.Constant) and node.value is Ellipsis


class _Analyser(ast.NodeVisitor):
    def __init__(self, params, devices):
        self.params = set(params)
        self.devices = devices
        self.uses = {p: [] for p in params}
        self.handled = set()  # ids of Name nodes already accounted for

    def _add(self, name, use):
        if name in self.uses:
            self.uses[name].append(use)

    # -- stores ------------------------------------------------------------------
    def _target(self, target, update):
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._target(element, update)
            return
        if isinstance(target, ast.Starred):
            self._target(target.value, update)
            return
        if isinstance(target, ast.Subscript):
            root, indices, sliced = _root(target)
            if root is not None and root.id in self.params:
                self.handled.add(id(root))
                self._add(root.id, _Use("update" if update else "store", indices, sliced))
            self._visit_indices(target)
            return
        if isinstance(target, ast.Name):
            if target.id in self.params:  # the parameter is rebound: give up on it
                self._add(target.id, _Use("both"))
            return
        self.visit(target)

    def _visit_indices(self, node):
        while isinstance(node, ast.Subscript):
            self.visit(node.slice)
            node = node.value

    def visit_Assign(self, node):
        for target in node.targets:
            self._target(target, update=False)
        self._value(node.value)

    def visit_AnnAssign(self, node):
        self._target(node.target, update=False)
        if node.value is not None:
            self._value(node.value)

    def visit_AugAssign(self, node):
        self._target(node.target, update=True)
        self.visit(node.value)

    def visit_Return(self, node):
        if node.value is not None:
            self._value(node.value)

    def _value(self, value):
        """An expression whose result is bound to a name or returned: views escape."""
        parts = value.elts if isinstance(value, (ast.Tuple, ast.List)) else [value]
        for part in parts:
            root, indices, sliced = _root(part)
            if isinstance(part, ast.Subscript) and root is not None and root.id in self.params:
                self.handled.add(id(root))
                self._add(root.id, _Use("bound", indices, sliced))
                self._visit_indices(part)
            else:
                self.visit(part)

    # -- loads -------------------------------------------------------------------
    def visit_Subscript(self, node):
        root, indices, sliced = _root(node)
        if root is not None and root.id in self.params and isinstance(node.ctx, ast.Load):
            self.handled.add(id(root))
            self._add(root.id, _Use("load", indices, sliced))
            self._visit_indices(node)
            return
        self.generic_visit(node)

    def visit_Attribute(self, node):
        if (
            isinstance(node.value, ast.Name) and node.value.id in self.params
            and node.attr in _SIZE_ATTRIBUTES
        ):
            self.handled.add(id(node.value))
            return
        self.generic_visit(node)

    def visit_Call(self, node):
        func = node.func
        name = func.id if isinstance(func, ast.Name) else None
        if name == "len" and len(node.args) == 1 and isinstance(node.args[0], ast.Name):
            self.handled.add(id(node.args[0]))
            return
        if name is not None and name.startswith(_ATOMIC_PREFIX) and node.args:
            root, indices, sliced = _root(node.args[0])
            if root is not None and root.id in self.params:
                self.handled.add(id(root))
                self._add(root.id, _Use("update", indices, sliced))
                self._visit_indices(node.args[0])
            for arg in node.args[1:]:
                self.visit(arg)
            for kw in node.keywords:
                self.visit(kw.value)
            return
        callee = self.devices(name) if name is not None else None
        if callee is not None:
            for position, arg in enumerate(node.args):
                self._argument(arg, callee, position)
            for kw in node.keywords:
                position = callee.params.index(kw.arg) if kw.arg in callee.params else None
                if position is None:
                    self.visit(kw.value)
                else:
                    self._argument(kw.value, callee, position)
            return
        self.generic_visit(node)

    def _argument(self, arg, callee, position):
        if isinstance(arg, ast.Name) and arg.id in self.params:
            self.handled.add(id(arg))
            self._add(arg.id, _Use("call", callee=callee, position=position))
            return
        root, indices, sliced = _root(arg)
        if isinstance(arg, ast.Subscript) and root is not None and root.id in self.params:
            # an element (or a view) passed on: the callee may write a view
            self.handled.add(id(root))
            self._add(root.id, _Use("bound", indices, sliced))
            self._visit_indices(arg)
            return
        self.visit(arg)

    def visit_Name(self, node):
        loaded = isinstance(node.ctx, ast.Load) and node.id in self.params
        if loaded and id(node) not in self.handled:
            self._add(node.id, _Use("both"))  # the array itself escapes


def analyse(tree, devices):
    """Return the :class:`Summary` of ``tree`` (an ``ast.FunctionDef``).

    Parameters
    ----------
    tree : ast.FunctionDef
        The function, with atomics spelled ``_dg_atomic_<op>(array, ...)``.
    devices : dict or callable
        Name of a called device function -> its :class:`Summary` (None: not a
        device function, or not analysable: its arguments count as read and
        written).
    """
    lookup = devices if callable(devices) else devices.get
    params = [a.arg for a in tree.args.args]
    analyser = _Analyser(params, lookup)
    for statement in tree.body:
        analyser.visit(statement)
    return Summary(params, analyser.uses)


class _Atomics(ast.NodeTransformer):
    """Spell ``cuda.atomic.<op>(a, ...)`` (any spelling of cuda) as ``_dg_atomic_<op>(a, ...)``."""

    def __init__(self, namespace):
        self.namespace = namespace

    def visit_Call(self, node):
        self.generic_visit(node)
        path = self.namespace.cuda_path(node.func)
        if path is not None and len(path) == 2 and path[0] == "atomic":
            return ast.Call(func=ast.Name(id=_ATOMIC_PREFIX + path[1], ctx=ast.Load()),
                            args=node.args, keywords=node.keywords)
        return node


def analyse_source(py_func, _active=None):
    """Return the :class:`Summary` of a kernel or device function from its own source.

    For backends that do not rewrite the source (the GPU backend): atomics are
    recognised through any spelling of ``cuda``, device functions (numba.cuda
    ``device=True`` or dualgpu's) are analysed in turn. Returns None when the
    source is not available (callers then treat every array as read and written).
    """
    active = set() if _active is None else _active
    cached = getattr(py_func, "__dualgpu_access__", None)
    if cached is not None:
        return cached
    try:
        tree = function_source(py_func, "kernel", "gpu").tree
    except Exception:  # no source: unknown
        return None
    namespace = Namespace(py_func, tree)
    tree = _Atomics(namespace).visit(tree)
    active.add(py_func)

    def device(name):
        value = namespace.value(ast.Name(id=name, ctx=ast.Load()))
        callee = device_py_func(value) if value is not None else None
        if callee is None or callee in active:
            return None
        return analyse_source(callee, active)

    summary = analyse(tree, device)
    active.discard(py_func)
    try:
        py_func.__dualgpu_access__ = summary
    except (AttributeError, TypeError):  # pragma: no cover - builtins
        pass
    return summary
