"""Duals a kernel captures (closure cells, module globals), lifted into hidden arguments.

Kernel factories bake constants in by closure::

    def model(g_Na):
        @cuda.jit
        def step(v, out, dt):
            ...  g_Na ...
        return step

Under the driver ``g_Na`` is a :class:`~dualgpu.Dual`. The simulator reads it as a Python
object and differentiates it; compiled backends (``cpu``, ``cuda``) would freeze it as a
constant, which numba cannot type (and which would drop its partials). Here such a Dual,
read by the kernel or by a device function it calls (closure cell or module global, found
at launch time), becomes a hidden argument: the kernel's source (and that of each device
function on the way) is rewritten with extra parameters ``_lifted_dual_0 ...`` that replace
the captured names, and call sites of the rewritten device functions pass them on. The
Dual's value is an argument, never a constant of compiled (or cached) code, so a second
run with another value computes with that value.

A captured tuple of Duals (``params = (k1, k2)`` in a factory) is lifted as one tuple
argument. A captured :class:`~dualgpu.DualArray` (or a tuple holding one) is not lifted:
the launch is refused with the variable's name and "pass it as an argument".

Sources are found in the bytecode: closure cells, globals, and attributes of modules read
from them (``mod.RATE``, and ``mod.func(x)`` whose function is rewritten too and called by a
name of its own), so a value reaches every device function however it is named.
"""
import ast
import copy
import dis
import hashlib
import linecache
import types
import warnings
import weakref

import numpy as np

from dualgpu.backends.common.rebind import frozen_plain, frozen_values
from dualgpu.backends.common.translate import (
    _closure_values, _local_names, device_py_func, dotted, function_source,
)
from dualgpu.core.dual import Dual
from dualgpu.core.dualarray import DualArray
from dualgpu.errors import DualgpuError, DualgpuWarning
from dualgpu.host import buffers as host_buffers
from dualgpu.porting.tuple_arguments import holds_duals

__all__ = ["captured_duals", "lift"]

#: the hidden parameters' prefix
PREFIX = "_lifted_dual_"
#: the prefix of the names by which a rewritten function calls ``mod.func`` rewritten
CALL_PREFIX = "_lifted_call_"


#: the instructions that read a global or a closure cell, and those that read an attribute
_ROOTS = ("LOAD_GLOBAL", "LOAD_DEREF", "LOAD_CLASSDEREF")
_ATTRIBUTES = ("LOAD_ATTR", "LOAD_METHOD")


def _chains(code, freevars=None):
    """``{(root, attributes)}``: each global or closure name ``code`` (and the code nested in
    it) reads, with the attributes read from it right after (``mod.RATE`` gives ``("mod",
    ("RATE",))``; ``mod.func(x)``, ``pkg.mod.func(x)`` likewise)."""
    freevars = code.co_freevars if freevars is None else freevars
    found = set()
    instructions = list(dis.get_instructions(code))
    for i, instruction in enumerate(instructions):
        if instruction.opname not in _ROOTS or (
                instruction.opname != "LOAD_GLOBAL" and instruction.argval not in freevars):
            continue  # a cell of the function's own (a local an inner function reads)
        attributes = []
        for following in instructions[i + 1:]:
            if following.opname not in _ATTRIBUTES:
                break
            attributes.append(following.argval)
        found.add((instruction.argval, tuple(attributes)))
    for const in code.co_consts:
        if isinstance(const, types.CodeType):  # comprehensions, inner functions: globals only
            found |= {(r, a) for r, a in _chains(const, freevars) if r not in code.co_cellvars}
    return found


def _fixed(value):
    """True for what a kernel reads as code, not data (modules, functions, classes, kernels):
    such a name is not watched for duals at each launch."""
    return (isinstance(value, (types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
                               type))
            or callable(value) and not isinstance(value, (Dual, DualArray, np.ndarray)))


class Source:
    """One place a function reads a value from: a closure cell or a global (``name``), or an
    attribute of a module read from one (``mod.RATE``, ``pkg.mod.func``: ``name`` dotted).

    :meth:`read` reads it now (None where it no longer resolves).
    """

    __slots__ = ("name", "cell", "namespace", "attributes")

    def __init__(self, name, cell, namespace, attributes=()):
        self.name = ".".join((name,) + attributes)
        self.cell, self.namespace, self.attributes = cell, namespace, attributes

    @property
    def root(self):
        return self.name.split(".")[0]

    def read(self):
        value = _read(self.cell, self.namespace, self.root)
        for attribute in self.attributes:
            if not isinstance(value, types.ModuleType):
                return None
            value = getattr(value, attribute, None)
        return value


#: modules whose attributes are library code and constants, never a captured value
_LIBRARIES = ("numpy", "numba", "math", "cmath", "scipy", "llvmlite", "dualgpu", "builtins")


def _user_module(value):
    return isinstance(value, types.ModuleType) and (
        value.__name__.split(".")[0] not in _LIBRARIES)


def _sources(py_func, everything=False):
    """``[Source]``: each closure cell, global name and module attribute ``py_func`` reads
    (``everything=False``: those that do not hold code now)."""
    code = py_func.__code__
    cells = dict(zip(code.co_freevars, py_func.__closure__ or ()))
    namespace = py_func.__globals__
    found = []
    for root, attributes in sorted(_chains(code)):
        cell = cells.get(root)
        scope = None if cell is not None else namespace
        for depth in range(len(attributes) + 1):  # mod, mod.sub, mod.sub.NAME ...
            source = Source(root, cell, scope, attributes[:depth])
            if depth and not _user_module(Source(root, cell, scope, attributes[:depth - 1]).read()):
                break  # an attribute of data (u.shape) or of a library (np.pi, math.tau)
            found.append(source)
    unique = {}
    for source in found:
        unique.setdefault(source.name, source)
    found = list(unique.values())
    if everything:
        return found
    return [source for source in found if not _fixed(source.read())]


def _read(cell, namespace, name):
    if cell is not None:
        try:
            return cell.cell_contents
        except ValueError:  # assigned later in the enclosing function
            return None
    return namespace.get(name)


def _device_funcs(py_func):
    """``[(name, py_func)]``: the device functions ``py_func`` names (closure, globals and
    module attributes: ``name`` is dotted for ``mod.func``)."""
    found = []
    for source in _sources(py_func, everything=True):
        inner = device_py_func(source.read())
        if inner is not None and inner is not py_func:
            found.append((source.name, inner))
    return found


class Plan:
    """Where a kernel (and the device functions it reaches) may read a captured value.

    Built once per kernel; :meth:`scan` reads the values at each launch.
    """

    def __init__(self, py_func):
        self.kernel = py_func
        self.functions = {}  # py_func -> its sources
        self.calls = {}  # py_func -> [(name, callee py_func)]
        self._visit(py_func)

    def _visit(self, py_func):
        if py_func in self.functions:
            return
        self.functions[py_func] = _sources(py_func)
        self.calls[py_func] = _device_funcs(py_func)
        for _, callee in self.calls[py_func]:
            self._visit(callee)

    def scan(self):
        """``[(py_func, name, value)]`` of every Dual read now; refuses captured DualArrays."""
        found = []
        registry = host_buffers.active()
        followed = registry.followed if registry is not None else None
        for py_func, sources in self.functions.items():
            for source in sources:
                name, cell = source.name, source.cell
                value = source.read()
                if followed and type(value) in (float, np.float64):  # kept host buffers:
                    value = followed.launch_argument(value)  # a value computed from them
                if isinstance(value, Dual) or (holds_duals(value) and not _holds_arrays(value)):
                    if "." not in name:
                        _note_frozen(py_func, self.kernel, name, cell)
                    found.append((py_func, name, value))  # a tuple of duals: a tuple argument
                elif isinstance(value, DualArray) or holds_duals(value):
                    where = "its closure" if cell is not None else "a module global"
                    what = "DualArray" if isinstance(value, DualArray) else (
                        "tuple holding a DualArray")
                    raise DualgpuError(
                        f"kernel {self.kernel.__name__}: {_who(py_func, self.kernel)} reads the "
                        f"{what} {name!r} from {where}; a compiled kernel cannot capture an "
                        f"array that carries partials. Pass it as an argument: add a "
                        f"parameter for {name} to the kernel and give {name} at the launch."
                    )
        return found


def _note_frozen(py_func, kernel, name, cell):
    """Warn (once per function and name) where a lifted Dual sits in a global (or closure
    cell) that ``py_func``'s first launch compiled in as a plain value: dual runs use the
    Dual's value, plain runs keep the old one, so finite differences of plain runs disagree
    with the derivative."""
    frozen, value = frozen_plain(py_func, name, cell)
    if not frozen:
        return
    noted = _NOTED.setdefault(py_func, set())
    if name in noted:
        return
    noted.add(name)
    where = "closure variable" if cell is not None else "global"
    warnings.warn(
        f"kernel {kernel.__name__}: {_who(py_func, kernel)} reads the {where} {name!r}, which "
        f"holds a Dual now; dual runs use its value, but {name} held {value!r} at the kernel's "
        f"first launch and numba compiled that value in, so plain runs keep {value!r} whatever "
        f"{name} holds later: the derivative is that of the dual runs, not of the plain runs "
        f"(their finite differences disagree). Fix: pass {name} as an argument (a parameter "
        f"of the kernel, given at each launch), or build the kernel in a function of {name}.",
        DualgpuWarning, stacklevel=2)


_NOTED: "weakref.WeakKeyDictionary[types.FunctionType, set[str]]" = weakref.WeakKeyDictionary()
# (per function, the names already warned of)


def _holds_arrays(value):
    return isinstance(value, DualArray) or type(value) is tuple and any(map(_holds_arrays, value))


def _who(py_func, kernel):
    return "it" if py_func is kernel else f"its device function {py_func.__name__}"


def captured_duals(kernel):
    """``[(py_func, name, value)]``: the Duals ``kernel``
    (a :class:`~dualgpu.porting.kernel.Kernel`) and its device functions capture now; empty
    when none.

    Parameters
    ----------
    kernel : dualgpu.porting.kernel.Kernel

    Returns
    -------
    list of tuple

    Examples
    --------
    >>> import dualgpu
    >>> from dualgpu import cuda
    >>> def model(k):
    ...     def step(u):
    ...         u[0] = k
    ...     return cuda.jit(step)
    >>> found = captured_duals(model(dualgpu.Dual(2.0, [1.0])))
    >>> [(name, float(value.value)) for _, name, value in found]
    [('k', 2.0)]
    >>> captured_duals(model(2.0))
    []
    """
    plan = kernel.__dict__.get("_capture_plan")
    if plan is None:
        plan = kernel.__dict__["_capture_plan"] = Plan(kernel.py_func)
    return plan.scan()


class _Rename(ast.NodeTransformer):
    """Captured names become hidden parameters; calls of lifted device functions pass them on."""

    def __init__(self, own, callees, hidden):
        self.own, self.callees, self.hidden = own, callees, hidden

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Load) and node.id in self.own:
            return ast.copy_location(ast.Name(self.own[node.id], ast.Load()), node)
        return node

    def visit_Attribute(self, node):  # mod.RATE, a captured module attribute
        if isinstance(node.ctx, ast.Load) and dotted(node) in self.own:
            return ast.copy_location(ast.Name(self.own[dotted(node)], ast.Load()), node)
        self.generic_visit(node)
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        name = dotted(node.func) if isinstance(node.func, (ast.Name, ast.Attribute)) else None
        if name in self.callees:  # mod.func(...) calls the rewritten function by a new name
            node.func = ast.copy_location(ast.Name(self.callees[name], ast.Load()), node.func)
            node.args = node.args + [ast.Name(h, ast.Load()) for h in self.hidden]
        return node


def _compile(tree, namespace, py_func):
    """Compile the rewritten definition ``tree``; its text is kept in :mod:`linecache` so that
    the compiled backends, which read a function's source, read the rewritten one."""
    body = ast.unparse(ast.fix_missing_locations(tree))
    text = "\n" * max(getattr(tree, "lineno", 1) - 1, 0) + body + "\n"
    digest = hashlib.sha1(text.encode()).hexdigest()[:12]
    filename = f"<dualgpu lifted {py_func.__module__}.{py_func.__qualname__} {digest}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    scope = {}
    exec(compile(text, filename, "exec"), namespace, scope)
    function = scope[tree.name]
    function.__qualname__ = py_func.__qualname__
    return function


def lift(kernel, found, backend_name):
    """Return ``(lifted_kernel, values)``: launch ``lifted_kernel`` with ``args + values``.

    Parameters
    ----------
    kernel : dualgpu.porting.kernel.Kernel
    found : list of tuple
        :func:`captured_duals`' answer for ``kernel``.
    backend_name : str
        The backend launching (for messages).

    Returns
    -------
    tuple
        The lifted :class:`~dualgpu.porting.kernel.Kernel`, cached on ``kernel`` per set of
        captured names (values are arguments, never compiled in), and the Duals to pass.

    Raises
    ------
    DualgpuError
        If the source of the kernel or of a device function that captures a Dual cannot
        be read: names the variable and says to pass it as an argument.
    """

    keys = tuple((id(f), name) for f, name, _ in found)
    cache = kernel.__dict__.setdefault("_lifted", {})
    values = [value for _, _, value in found]
    if keys in cache:
        return cache[keys], values
    index = {(f, name): i for i, (f, name, _) in enumerate(found)}
    hidden = [f"{PREFIX}{i}" for i in range(len(found))]
    plan = kernel.__dict__["_capture_plan"]
    needs = {f for f, _, _ in found}
    changed = True
    while changed:  # a function needs the hidden arguments if a callee does
        changed = False
        for f, calls in plan.calls.items():
            if f not in needs and any(c in needs for _, c in calls):
                needs.add(f)
                changed = True
    built = {}

    def build(py_func, what):
        if py_func in built:
            return built[py_func]
        try:
            source = function_source(py_func, what, backend_name)
        except DualgpuError:
            names = ", ".join(repr(n) for f, n, _ in found if f is py_func) or "a captured dual"
            raise DualgpuError(
                f"kernel {kernel.__name__}: {_who(py_func, kernel.py_func)} captures the dual "
                f"{names} (closure or module global) and its source cannot be read to turn it "
                f"into an argument. Pass it as an argument: add a parameter to the kernel and "
                "give the value at the launch."
            ) from None
        tree = copy.deepcopy(source.tree)
        local = _local_names(tree)
        own = {name: hidden[i] for (f, name), i in index.items() if f is py_func
               and name.split(".")[0] not in local}
        namespace = dict(py_func.__globals__)
        namespace.update(_closure_values(py_func))
        frozen, cells = frozen_values(py_func)  # as the plain runs compiled them
        namespace.update(frozen)
        namespace.update({name: value for name, cell, value in zip(
            py_func.__code__.co_freevars, py_func.__closure__ or (), cells) if value is not cell})
        callees = {}
        for name, callee in plan.calls.get(py_func, ()):
            if callee in needs and name.split(".")[0] not in local:
                # a dotted name (mod.func) is called by a name of its own in the copy
                alias = name if "." not in name else CALL_PREFIX + name.replace(".", "_")
                namespace[alias] = build(callee, "device function")
                callees[name] = alias
        tree = _Rename(own, callees, hidden).visit(tree)
        tree.args.args = tree.args.args + [ast.arg(h) for h in hidden]
        function = _compile(tree, namespace, py_func)
        if what == "kernel":  # the kernel's own class, and that of the functions it calls
            result = type(kernel)(function, kernel.options)
        else:
            result = kernel.device_function_type(function, {})
        built[py_func] = result
        return result

    lifted = build(kernel.py_func, "kernel")
    cache[keys] = lifted
    return lifted, values
