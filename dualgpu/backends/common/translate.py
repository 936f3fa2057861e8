"""Find and rewrite the ``numba.cuda`` parts of a kernel's Python source.

Backend-neutral machinery for backends that run a CUDA kernel's unchanged
source somewhere other than ``numba.cuda`` (the compiled CPU backend uses it;
another backend can reuse it). It does four things:

1. :func:`unwrap` finds the plain Python function behind a kernel or device
   function (a ``numba.cuda`` dispatcher, a simulator kernel, a dualgpu wrapper).
2. :func:`function_source` returns its source as an ``ast.FunctionDef`` whose
   line numbers match the file, so errors point at the user's lines.
3. :class:`Namespace` answers, without running anything, what a name or a
   dotted chain such as ``numba.cuda.threadIdx.x`` in the function refers to:
   a path inside ``numba.cuda`` (``("threadIdx", "x")``), a device function,
   or something else. "cuda" is any global (or closure variable, or module
   attribute chain) bound to ``numba.cuda``, to a module flagged
   ``__dualgpu_cuda__ = True``, or to one of their members imported by name
   (``from numba.cuda import grid``).
4. :class:`CudaRewriter` walks the tree and hands every cuda reference and
   every device-function reference to methods that a backend overrides;
   :func:`compile_function` turns the rewritten tree back into a function.

Nothing here knows what a backend does with ``cuda.grid(1)``.
"""
import ast
import builtins
import inspect
import linecache
import sys
import textwrap
import types as pytypes
import weakref

from dualgpu.backends.common.rebind import frozen_values
from dualgpu.errors import DualgpuError

__all__ = [
    "UNRESOLVED",
    "CudaRewriter",
    "FunctionSource",
    "Namespace",
    "FunctionCache",
    "compile_function",
    "compile_source",
    "cuda_member_names",
    "device_py_func",
    "dotted",
    "function_source",
    "is_cuda_module",
    "unwrap",
]

#: Returned by :meth:`Namespace.value` for anything it cannot (or will not) resolve.
UNRESOLVED = object()

_CUDA_MEMBER_MODULES = ("numba.cuda.stubs", "numba.cuda.intrinsics", "numba.cuda.cache_hints")
_member_names = None


def _numba_cuda():
    import numba.cuda

    return sys.modules.get("numba.cuda", numba.cuda)


def cuda_member_names():
    """Return the names of numba.cuda's kernel-side members (``grid``, ``threadIdx`` ...).

    These are the objects from ``numba.cuda.stubs`` and ``numba.cuda.intrinsics``
    (and the cache-hint loads/stores): the things that only mean something inside
    a kernel.
    """
    global _member_names
    if _member_names is None:
        cuda = _numba_cuda()
        names = set()
        for name in dir(cuda):
            if name.startswith("_"):
                continue
            value = getattr(cuda, name, None)
            if getattr(value, "__module__", None) in _CUDA_MEMBER_MODULES:
                names.add(name)
        if hasattr(cuda, "libdevice"):  # a module: its functions are cuda.libdevice.<name>
            names.add("libdevice")
        _member_names = frozenset(names)
    return _member_names


def is_cuda_module(obj):
    """Return True if ``obj`` is ``numba.cuda`` or a module flagged ``__dualgpu_cuda__``."""
    if not isinstance(obj, pytypes.ModuleType):
        return False
    return obj is _numba_cuda() or getattr(obj, "__dualgpu_cuda__", False) is True


def _cuda_modules():
    modules = [_numba_cuda()]
    drop_in = sys.modules.get("dualgpu.cuda")
    if drop_in is not None and getattr(drop_in, "__dualgpu_cuda__", False) is True:
        modules.append(drop_in)
    return modules


def _is_simulator_kernel(obj):
    kernel_module = sys.modules.get("numba.cuda.simulator.kernel")
    return kernel_module is not None and isinstance(obj, kernel_module.FakeCUDAKernel)


def _is_cuda_dispatcher(obj):
    dispatcher_module = sys.modules.get("numba.cuda.dispatcher")
    return dispatcher_module is not None and isinstance(obj, dispatcher_module.CUDADispatcher)


def unwrap(obj):
    """Return the plain Python function behind a kernel or device function.

    Accepts a plain function, a ``numba.cuda`` dispatcher (``.py_func``), a
    CUDA-simulator kernel (``.fn``) or any object with a ``.py_func`` (dualgpu's
    wrappers). Returns None for anything else.
    """
    if _is_simulator_kernel(obj):
        obj = obj.fn
    for _ in range(4):
        if isinstance(obj, pytypes.FunctionType):
            return obj
        inner = getattr(obj, "py_func", None)
        if inner is None or inner is obj:
            return None
        obj = inner
    return None


def device_py_func(obj):
    """Return the Python function of a device function, or None if ``obj`` is not one.

    A device function is a ``numba.cuda`` dispatcher compiled with
    ``device=True``, a simulator kernel made with ``device=True``, or an object
    with ``__dualgpu_device__ = True`` and a ``.py_func``.
    """
    flagged = getattr(obj, "__dualgpu_device__", False) is True
    if flagged and not isinstance(obj, pytypes.ModuleType):
        return unwrap(obj)
    if _is_cuda_dispatcher(obj):
        if obj.targetoptions.get("device"):
            return obj.py_func
        return None
    if _is_simulator_kernel(obj) and getattr(obj, "_device", False):
        return obj.fn
    return None


def dotted(node):
    """Return the source text of a Name/Attribute chain (``"cuda.threadIdx.x"``)."""
    try:
        return ast.unparse(node)
    except Exception:  # pragma: no cover - unparse handles every expression node
        return "<expression>"


class FunctionSource:
    """A function's parsed source.

    Attributes
    ----------
    tree : ast.FunctionDef
        The definition, decorators removed, line numbers as in the file.
    filename : str
        The file the source came from (used for compiled code objects).
    """

    def __init__(self, tree, filename):
        self.tree = tree
        self.filename = filename


def _parse_dedented(text):
    """Return (FunctionDef-or-other first statement, line shift) for a source block."""
    try:
        return ast.parse(textwrap.dedent(text)).body[0], 0
    except SyntaxError:
        # A block whose continuation lines are indented less than its first line.
        return ast.parse("if True:\n" + text).body[0].body[0], -1


def function_source(py_func, what, backend):
    """Return the :class:`FunctionSource` of ``py_func``.

    Parameters
    ----------
    py_func : function
    what : str
        How to call the function in messages (``"kernel"``, ``"device function"``).
    backend : str
        Backend name for messages.

    Raises
    ------
    DualgpuError
        If the source cannot be read (a function typed at the prompt, made by
        ``exec`` or a lambda).
    """
    name = getattr(py_func, "__qualname__", getattr(py_func, "__name__", repr(py_func)))
    try:
        lines, first_line = inspect.getsourcelines(py_func)
    except (OSError, TypeError) as exc:
        raise DualgpuError(
            f"{what} {name!r}: the {backend} backend rewrites the function's Python source, "
            f"but its source is not available ({exc}). Define the {what} with 'def' in a "
            "file (a module or a script), not at the interactive prompt, with exec, or as a "
            "lambda; or run it on the 'cudasim' backend."
        ) from None
    text = "".join(lines)
    try:
        tree, shift = _parse_dedented(text)
    except SyntaxError as exc:
        raise DualgpuError(
            f"{what} {name!r}: could not parse its source for the {backend} backend ({exc}). "
            f"Define the {what} as an ordinary 'def' statement in a file."
        ) from None
    if not isinstance(tree, ast.FunctionDef) or tree.name != py_func.__name__:
        raise DualgpuError(
            f"{what} {name!r}: its source is not a plain 'def {py_func.__name__}(...)' "
            f"statement (got {type(tree).__name__}), which the {backend} backend needs. "
            f"Define the {what} with 'def' in a file; lambdas and async functions are not "
            "supported."
        )
    tree.decorator_list = []
    tree.returns = None
    ast.increment_lineno(tree, first_line - 1 + shift)
    filename = inspect.getsourcefile(py_func) or py_func.__code__.co_filename
    return FunctionSource(tree, filename)


def _closure_values(py_func):
    values = {}
    if py_func.__closure__:
        for name, cell in zip(py_func.__code__.co_freevars, py_func.__closure__):
            try:
                values[name] = cell.cell_contents
            except ValueError:
                raise DualgpuError(
                    f"{py_func.__qualname__!r} uses the variable {name!r} of its enclosing "
                    "function before it is assigned; assign it before the kernel is compiled."
                ) from None
    return values


def _local_names(tree):
    """Names bound inside the function (parameters, assignment targets, imports...)."""
    names = set()
    a = tree.args
    for arg in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]:
        if arg is not None:
            names.add(arg.arg)
    declared_global = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node is not tree:
                names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.Global):
            declared_global.update(node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
    return names - declared_global


class Namespace:
    """What the free names of one function refer to.

    Parameters
    ----------
    py_func : function
        The function; its ``__globals__`` and closure cells are read now.
    tree : ast.FunctionDef
        Its source, used to tell local names from globals.

    Attributes
    ----------
    values : dict
        Globals overlaid with closure values, as they were at the function's first compile
        (:func:`~dualgpu.backends.common.rebind.frozen_values`): a fresh copy, safe to extend
        and to use as the globals of the rewritten function.
    unresolved : set of str
        Free names that were neither global, closure nor builtin when read (a
        global defined later in the module, for instance).
    """

    def __init__(self, py_func, tree):
        self.values = dict(py_func.__globals__)
        self.values.update(_closure_values(py_func))
        # the values of the function's first compile on any backend (numba's rule: a global
        # changed since is not seen, by the plain build nor by a dual one compiled later)
        frozen, cells = frozen_values(py_func)
        self.values.update(frozen)
        for name, cell, value in zip(py_func.__code__.co_freevars, py_func.__closure__ or (),
                                     cells):
            if value is not cell:
                self.values[name] = value
        self.locals = _local_names(tree)
        self.unresolved = set()
        self._cuda_modules = _cuda_modules()
        self._members = {}
        for module in self._cuda_modules:
            self._add_members(module)

    def _add_members(self, module):
        for name in cuda_member_names():
            value = getattr(module, name, None)
            if value is not None and not isinstance(value, (int, float, str, bool)):
                self._members.setdefault(id(value), (value, name))

    def value(self, node):
        """Return the object a Name/Attribute chain refers to, or :data:`UNRESOLVED`.

        Only global/closure names and attributes of modules are followed, so
        nothing but module attribute lookups is run.
        """
        if isinstance(node, ast.Name):
            if node.id in self.locals:
                return UNRESOLVED
            if node.id in self.values:
                return self.values[node.id]
            if hasattr(builtins, node.id):
                return getattr(builtins, node.id)
            self.unresolved.add(node.id)
            return UNRESOLVED
        if isinstance(node, ast.Attribute):
            base = self.value(node.value)
            if isinstance(base, pytypes.ModuleType):
                return getattr(base, node.attr, UNRESOLVED)
        return UNRESOLVED

    def cuda_path(self, node):
        """Return the path inside ``numba.cuda`` that a Name/Attribute chain names.

        ``()`` for the cuda module itself, ``("threadIdx", "x")`` for
        ``cuda.threadIdx.x`` (or ``threadIdx.x`` after ``from numba.cuda import
        threadIdx``), None if the chain is not a cuda reference.
        """
        if not isinstance(node, (ast.Name, ast.Attribute)):
            return None
        value = self.value(node)
        if value is not UNRESOLVED:
            if is_cuda_module(value):
                if value not in self._cuda_modules:
                    self._cuda_modules.append(value)
                    self._add_members(value)
                return ()
            member = self._members.get(id(value))
            if member is not None and member[0] is value:
                return (member[1],)
        if isinstance(node, ast.Attribute):
            base = self.cuda_path(node.value)
            if base is not None:
                return base + (node.attr,)
        return None

    def cuda_value(self, path):
        """Return numba.cuda's object at ``path`` (UNRESOLVED if there is none)."""
        value = _numba_cuda()
        for part in path:
            value = getattr(value, part, UNRESOLVED)
            if value is UNRESOLVED:
                break
        return value


class CudaRewriter(ast.NodeTransformer):
    """Walk a function and hand its cuda and device-function references to hooks.

    Subclasses override:

    - :meth:`cuda_call` for calls ``cuda.X(...)`` (``node.func`` is the cuda chain,
      the arguments are already rewritten),
    - :meth:`cuda_value` for any other use of a cuda chain (``cuda.threadIdx.x``),
    - :meth:`device_call` for calls of device functions,
    - :meth:`device_value` for other uses of a device function's name.

    Each hook returns the replacement node. :meth:`bind` adds a value to the
    namespace under a fresh name and returns a Name node that loads it.

    Parameters
    ----------
    namespace : Namespace
    where : str
        How to name the function in messages (``"kernel 'step'"``).
    """

    def __init__(self, namespace, where):
        self.namespace = namespace
        self.where = where
        self._bound = {}

    # -- helpers ---------------------------------------------------------------
    def bind(self, value, hint):
        """Return a Name node loading ``value``, bound in the namespace as ``_dg_<hint>_<k>``."""
        key = id(value)
        name = self._bound.get(key)
        if name is None:
            name = f"_dg_{hint}_{len(self._bound)}"
            self._bound[key] = name
            self.namespace.values[name] = value
        return ast.Name(id=name, ctx=ast.Load())

    # -- hooks -----------------------------------------------------------------
    def cuda_call(self, path, node):  # pragma: no cover - abstract
        raise NotImplementedError

    def cuda_value(self, path, node):  # pragma: no cover - abstract
        raise NotImplementedError

    def device_call(self, py_func, node):  # pragma: no cover - abstract
        raise NotImplementedError

    def device_value(self, py_func, node):  # pragma: no cover - abstract
        raise NotImplementedError

    # -- traversal -------------------------------------------------------------
    def _device_of(self, node):
        if not isinstance(node, (ast.Name, ast.Attribute)):
            return None
        value = self.namespace.value(node)
        if value is UNRESOLVED:
            return None
        return device_py_func(value)

    def visit_Call(self, node):
        path = self.namespace.cuda_path(node.func)
        if path is not None:
            node.args = [self.visit(a) for a in node.args]
            for kw in node.keywords:
                kw.value = self.visit(kw.value)
            return ast.copy_location(self.cuda_call(path, node), node)
        py_func = self._device_of(node.func)
        if py_func is not None:
            node.args = [self.visit(a) for a in node.args]
            for kw in node.keywords:
                kw.value = self.visit(kw.value)
            return ast.copy_location(self.device_call(py_func, node), node)
        return self.generic_visit(node)

    def _value(self, node):
        path = self.namespace.cuda_path(node)
        if path is not None:
            return ast.copy_location(self.cuda_value(path, node), node)
        py_func = self._device_of(node)
        if py_func is not None:
            return ast.copy_location(self.device_value(py_func, node), node)
        if isinstance(node, ast.Attribute):
            value = self.namespace.value(node)
            if _is_data(value) and isinstance(self.namespace.value(node.value),
                                              pytypes.ModuleType):
                # mod.CONSTANT: frozen at translation as a global is, so that every build
                # (plain, each lane count) compiles the same value (numba would read the
                # attribute again at each compile: a dual build after a change would
                # differentiate another function than the plain build runs)
                return ast.copy_location(self.bind(value, "attribute"), node)
        return None

    def visit_Attribute(self, node):
        if isinstance(node.ctx, ast.Load):
            new = self._value(node)
            if new is not None:
                return new
        return self.generic_visit(node)

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Load):
            new = self._value(node)
            if new is not None:
                return new
        return node


def _is_data(value):
    """True for a number, numpy scalar or array, or a tuple of them: a constant of compiled
    code."""
    import numpy as np

    if isinstance(value, tuple):
        return all(_is_data(v) for v in value)
    return isinstance(value, (bool, int, float, complex, np.generic, np.ndarray))


_counter = [0]


def compile_function(tree, globals_dict, filename):
    """Return the function defined by ``tree`` with ``globals_dict`` as its globals.

    ``filename`` names the code object (tracebacks and numba messages point at
    the original file when ``tree`` keeps the original line numbers).
    """
    tree = ast.fix_missing_locations(tree)
    module = ast.Module(body=[tree], type_ignores=[])
    code = compile(module, filename, "exec")
    scope = {}
    exec(code, globals_dict, scope)
    return scope[tree.name]


def compile_source(source, globals_dict, name, label):
    """Return function ``name`` from generated ``source`` (registered with linecache).

    ``label`` becomes part of the fake file name, so tracebacks can show the
    generated lines.
    """
    _counter[0] += 1
    filename = f"<dualgpu {label} {_counter[0]}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    scope = {}
    exec(compile(source, filename, "exec"), globals_dict, scope)
    return scope[name]


class FunctionCache:
    """A cache keyed by function object (weakly; a value that refers to its function
    keeps it alive, as numba's own dispatcher caches do)."""

    def __init__(self):
        self._data = weakref.WeakKeyDictionary()

    def get(self, py_func):
        return self._data.get(py_func)

    def set(self, py_func, value):
        self._data[py_func] = value

    def pop(self, py_func):
        return self._data.pop(py_func, None)
