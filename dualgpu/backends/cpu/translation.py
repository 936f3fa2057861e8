"""One function's translation for the cpu backend, and the njit dispatchers built from it.

A :class:`Translation` holds a kernel's or device function's rewritten source
(:mod:`dualgpu.backends.cpu.rewrite`), what the rewriter found (atomics, thread
indices, local arrays, block-level features), the translations of the device
functions it calls (:func:`device_translation`, one per function), its hoisted
bounds guard (:mod:`dualgpu.backends.cpu.guards`) and the launch axis to loop
over innermost (:func:`inner_axis`). :meth:`Translation.build` compiles it with
``numba.njit`` per lane count and options; callers compile without numba's NRT first,
and again with it when :func:`is_nrt_error` says that the code allocates. Both
:class:`~dualgpu.backends.cpu.kernel.CpuKernel` and the block-level runner
(:mod:`dualgpu.backends.cpu.blocks`) build from it.
"""
import ast

from numba import njit

from dualgpu.errors import DualgpuError
from dualgpu.backends.common import translate as _translate
from dualgpu.backends.common.translate import Namespace
from dualgpu.backends.cpu import BACKEND, COMPILED_CODE_ONLY
from dualgpu.backends.cpu.guards import find_guard
from dualgpu.backends.cpu.intrinsics import RUNTIME, TRACER_LOCAL_ARRAYS, stack_array
from dualgpu.backends.cpu.launchers import CONTEXT
from dualgpu.backends.cpu.rewrite import AXES, CpuRewriter

__all__ = ["Translation", "device_translation", "inner_axis", "is_nrt_error"]

#: Translation per device function (see :func:`device_translation`).
_DEVICE_TRANSLATIONS = _translate.FunctionCache()


def _check_signature(tree, where):
    a = tree.args
    if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs:
        raise DualgpuError(
            f"{where}: *args, **kwargs, keyword-only and positional-only parameters are not "
            f"supported by the {BACKEND} backend (nor by numba.cuda); list the parameters "
            "plainly: def kernel(a, b, n)."
        )
    clashes = [arg.arg for arg in a.args if arg.arg.startswith("_dg_")]
    if clashes:
        raise DualgpuError(
            f"{where}: parameter names starting with '_dg_' are reserved by dualgpu; "
            f"rename {clashes}."
        )


class Translation:
    """One function's rewritten source; builds njit dispatchers per lanes value.

    Parameters
    ----------
    py_func : function
    role : {"kernel", "device function"}
    kernel_name : str
        The kernel being compiled (named in error messages).
    """

    def __init__(self, py_func, role, kernel_name):
        self.py_func = py_func
        self.role = role
        name = py_func.__qualname__
        self.where = (
            f"kernel {name!r}" if role == "kernel"
            else f"device function {name!r} (called from kernel {kernel_name!r})"
        )
        source = _translate.function_source(py_func, role, BACKEND)
        self.filename = source.filename
        tree = source.tree
        _check_signature(tree, self.where)
        self.params = [arg.arg for arg in tree.args.args]
        self.namespace = Namespace(py_func, tree)
        # Registered before the body is rewritten, so recursion finds it (and
        # marks it recursive: a recursive function cannot be inlined).
        self.tree = None
        self.recursive = False
        self.star_called = False  # called as dev(*args) somewhere: compiled, not inlined
        self.uses_atomics = False
        self.uses_context = False
        self.uses_block_index = False
        self.lanes_dependent = False
        self.block_level = False
        self.devices = {}
        self._built = {}
        if role != "kernel":
            _DEVICE_TRANSLATIONS.set(py_func, self)
        rewriter = CpuRewriter(self.namespace, self.where, kernel_name, device_translation)
        try:
            tree = rewriter.visit(tree)
        except BaseException:
            if role != "kernel":
                _DEVICE_TRANSLATIONS.pop(py_func)
            raise
        self.uses_atomics = rewriter.uses_atomics
        self.uses_context = rewriter.uses_context or role == "kernel"
        self.uses_block_index = rewriter.uses_block_index
        self.devices = rewriter.devices
        # shared memory, barriers or warp intrinsics: run by .blocks (a device function
        # calling x.sync() may be syncing a grid group it was given: it is inlined too)
        self.block_level = rewriter.block_level or (role != "kernel" and _calls_sync(tree))
        self.lanes_dependent = rewriter.uses_local_array or any(
            d.lanes_dependent for d in self.devices.values()
        )
        if self.uses_context:
            tree.args.args += [ast.arg(arg=c) for c in CONTEXT]
            if tree.args.defaults:
                tree.args.defaults += [ast.Constant(0) for _ in CONTEXT]
        self.tree = tree
        self.inner_axis = inner_axis(tree)
        self.guard = None
        if (
            role == "kernel" and not self.uses_atomics and not self.uses_block_index
            and not self.block_level
        ):
            self.guard = find_guard(tree, self.params, self.namespace)
        self.namespace.values.update(RUNTIME)

    def stale(self, seen=None):
        """True if a name undefined at translation is defined now (here or in a callee)."""
        seen = set() if seen is None else seen
        if id(self) in seen:
            return False
        seen.add(id(self))
        if any(n in self.py_func.__globals__ for n in self.namespace.unresolved):
            return True
        return any(d.stale(seen) for d in self.devices.values())

    def function(self, lanes, unguarded=False, tracer=False):
        """Return the rewritten Python function for ``lanes`` (not yet jitted).

        ``unguarded``: the kernel without its hoisted bounds guard (``self.guard``).
        ``tracer``: the lanes are sparsity tracers (float scratch gets tracer lanes: uint64
        for ``True``, int64 for ``"global"``).
        """
        lanes = lanes if self.lanes_dependent else 0
        values = dict(self.namespace.values)
        values["_dg_lanes"] = lanes
        if not lanes:  # plain scratch on the stack: no allocation, no NRT needed
            values["_dg_local_array"] = stack_array
        elif tracer:
            values["_dg_local_array"] = TRACER_LOCAL_ARRAYS[tracer]
        tree = self.guard.tree if unguarded else self.tree
        return _translate.compile_function(tree, values, self.filename), values

    def build(self, lanes, fastmath, unguarded=False, tracer=False, **options):
        """Return the njit dispatcher of this function for ``lanes`` (cached).

        ``tracer``: a sparsity-detection build (tracer lanes in local scratch): False, True
        (local) or ``"global"``.
        """
        tracer = tracer if tracer and lanes and self.lanes_dependent else False
        key = (
            lanes if self.lanes_dependent else 0, fastmath, unguarded, tracer,
            tuple(sorted(options.items())), self.star_called,
        )
        dispatcher = self._built.get(key)
        if dispatcher is None:
            function, values = self.function(lanes, unguarded, tracer)
            if self.role != "kernel" and not self.recursive and not self.star_called:
                # Inlined in numba's IR, a device function is compiled with the
                # thread function's options (no NRT: no reference counting), and
                # without the wrappers for Python or C callers that it never has.
                # (numba cannot inline a call with *args: such a callee stays a function.)
                options.setdefault("inline", "always")
                options = {**COMPILED_CODE_ONLY, **options}
            dispatcher = njit(fastmath=fastmath, error_model="numpy", **options)(function)
            self._built[key] = dispatcher
            for name, device in self.devices.items():
                values[name] = device.build(lanes, fastmath, tracer=tracer)
        return dispatcher



def _calls_sync(tree):
    """True if ``tree`` calls a method ``.sync()`` without arguments (a grid group's)."""
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "sync"
        and not n.args and not n.keywords
        for n in ast.walk(tree)
    )


def device_translation(py_func, kernel_name):
    """Return the translation of device function ``py_func`` (one per function, cached).

    A function referenced while its own body is being rewritten is marked recursive;
    a cached translation that was never built is made again if a global it reads has
    been defined since.
    """
    translation = _DEVICE_TRANSLATIONS.get(py_func)
    if translation is not None and translation.tree is None:
        translation.recursive = True  # referenced while its own body is being rewritten
        return translation
    if translation is None or (translation._built == {} and translation.stale()):
        translation = Translation(py_func, "device function", kernel_name)
    return translation


def inner_axis(tree):
    """Return the launch axis ("x", "y" or "z") to put in the innermost loop.

    Thread order does not matter to a valid kernel, but on a CPU it decides
    whether neighbouring iterations touch neighbouring memory. numba.cuda
    kernels often write ``i, j = cuda.grid(2)`` and index ``u[i, j]``: the
    last index, contiguous in a C-ordered array, is then the y axis. This
    counts, over subscripts with several indices, which axis variable the last
    index uses, and picks the most frequent (x when none or tied).
    """
    axis_of = {f"_dg_g{a}": a for a in AXES}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
            if isinstance(target, ast.Name) and isinstance(value, ast.Name) and value.id in axis_of:
                axis_of[target.id] = axis_of[value.id]
            elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
                for t, v in zip(target.elts, value.elts):
                    if isinstance(t, ast.Name) and isinstance(v, ast.Name) and v.id in axis_of:
                        axis_of[t.id] = axis_of[v.id]
    votes = dict.fromkeys(AXES, 0)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple)
                and node.slice.elts):
            names = [n.id for n in ast.walk(node.slice.elts[-1]) if isinstance(n, ast.Name)]
            used = {axis_of[n] for n in names if n in axis_of}
            for axis in used:
                votes[axis] += 1
    best = max(AXES, key=lambda a: (votes[a], a == "x"))
    return best if votes[best] > votes["x"] else "x"


#: What numba says when code compiled without NRT allocates an array.
_NRT_MESSAGES = ("NRT required", "Only accept returning of array passed into the function")


def is_nrt_error(exc):
    """True if ``exc`` says that code compiled without numba's NRT allocates."""
    text = str(exc)
    return any(m in text for m in _NRT_MESSAGES)
