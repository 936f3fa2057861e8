"""The cpu backend's compile cache on disk: launchers compiled once per machine (``cache=True``).

numba's ``cache=True`` finds a function's cache from its source file, so it
cannot cache the functions dualgpu makes with ``exec`` from rewritten source.
Here each launcher's generated source is written, as a real module, to
:func:`cache_dir` under a name that is the hash of everything its machine code
depends on, and compiled from there with ``numba.njit(cache=True)``; numba
keeps the compiled code next to it (``__pycache__``) and checks the argument
types, the CPU and numba's own version. A launcher calls the thread function
(the kernel's rewritten source) and its device functions, which numba links
into the launcher's code: once the launcher is cached, nothing else compiles.

The hash (:func:`launcher_key`) covers:

- the launcher's source and the rewritten source of the kernel and of every
  device function it calls, with the options they are compiled with, and the
  modules defining them (numba rebuilds a cached function's environment by
  importing its module: the same kernel copied into another module, or its
  module renamed, must not load an entry that imports the old one);
- the values of the globals and closure variables they read (numbers,
  strings, tuples, numpy arrays by content, numba types, modules by name and
  source file contents for user modules, njit functions by source);
- dualgpu's own source files, and the versions of Python, numba, llvmlite and
  numpy, and the LLVM options set (:mod:`dualgpu.backends.cpu.llvm`);
- the derivative rules added with :func:`dualgpu.rules.define` (their expressions and
  their primals' source: :func:`dualgpu.rules.fingerprint`);
- the switches read at import that change the generated code (:func:`switches`:
  NaN-safe mode, numba's bounds checking, optimisation level and debug info).

Any change gives another file, never a stale one. A kernel reading a global it
cannot fingerprint (an arbitrary object), or defined in a module that a later process
cannot import by name (loaded by path with ``importlib.util.spec_from_file_location``
without a ``sys.modules`` entry, made by ``exec``: numba rebuilds a cached function's
environment by importing its module, issue 44), is compiled in memory. A cache entry that
cannot be loaded (an unimportable module all the same, a truncated file) is compiled again
and written over, never an error.
``DUALGPU_CACHE=0`` turns the cache off; ``DUALGPU_CACHE_DIR`` moves it
(default ``$XDG_CACHE_HOME/dualgpu`` or ``~/.cache/dualgpu``).
"""
import ast
import builtins
import hashlib
import importlib.util
import inspect
import os
import sys
import tempfile
import types as pytypes
import warnings

import numpy as np
from dualgpu import rules
from dualgpu.core._paths import PACKAGE_DIR
from dualgpu import nansafe
from dualgpu.backends.cpu import llvm as _llvm

__all__ = [
    "cache_dir", "enabled", "launcher_key", "load_launcher", "needs_nrt", "mark_needs_nrt",
    "Uncacheable",
]

#: Bump when the layout of cached files changes.
FORMAT = 1

_PACKAGE_KEY = []
_MODULE_FILES = {}


class Uncacheable(Exception):
    """Raised while fingerprinting: something the compiled code depends on has no stable key."""


def enabled():
    """True unless ``DUALGPU_CACHE`` is 0/false/no."""
    return os.environ.get("DUALGPU_CACHE", "1").strip().lower() not in ("0", "false", "no")


def cache_dir():
    """Return the directory of cached launchers (created on first use)."""
    path = os.environ.get("DUALGPU_CACHE_DIR")
    if not path:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = os.path.join(base, "dualgpu")
    path = os.path.join(path, f"cpu-launchers-v{FORMAT}")
    os.makedirs(path, exist_ok=True)
    return path


# ---------------------------------------------------------------------------
# keys
# ---------------------------------------------------------------------------
def _package_key():
    """dualgpu's sources and the tool versions, hashed once per process."""
    if not _PACKAGE_KEY:
        import llvmlite
        import numba

        digest = hashlib.sha256()
        root = PACKAGE_DIR
        for folder, _, files in sorted(os.walk(root)):
            for name in sorted(files):
                if name.endswith(".py"):
                    with open(os.path.join(folder, name), "rb") as fh:
                        digest.update(name.encode() + b"\0" + fh.read())
        versions = (sys.version, numba.__version__, llvmlite.__version__, np.__version__,
                    _llvm.tune(), FORMAT)
        digest.update(repr(versions).encode())
        digest.update(repr(switches()).encode())
        _PACKAGE_KEY.append(digest.hexdigest())
    return _PACKAGE_KEY[0]


def switches():
    """The process-wide switches that change generated machine code, read at import.

    NaN-safe mode selects other lane products (:mod:`dualgpu.nansafe`); numba's
    ``NUMBA_BOUNDSCHECK``, ``NUMBA_OPT`` and ``NUMBA_DEBUGINFO`` change what numba emits.
    A launcher cached under other switches is another file: a process with
    ``DUALGPU_NANSAFE_MODE=1`` never loads NaN-producing code cached without it.
    """
    from numba.core import config

    return (("nansafe", nansafe.NANSAFE_MODE_ENABLED), ("boundscheck", config.BOUNDSCHECK),
            ("opt", str(config.OPT)), ("debuginfo", config.DEBUGINFO_DEFAULT))


def _file_key(path):
    key = _MODULE_FILES.get(path)
    if key is None:
        try:
            with open(path, "rb") as fh:
                key = hashlib.sha256(fh.read()).hexdigest()
        except OSError:
            raise Uncacheable(path) from None
        _MODULE_FILES[path] = key
    return key


def _user_module(module):
    path = getattr(module, "__file__", None)
    if not path or not path.endswith(".py"):
        return False
    name = module.__name__.split(".")[0]
    return name not in ("numpy", "numba", "math", "cmath", "scipy", "llvmlite", "dualgpu")


def fingerprint(value, depth=0):
    """Return a string that changes whenever ``value`` would compile differently."""
    from numba.core import types as numba_types
    from numba.core.dispatcher import Dispatcher

    if depth > 8:
        raise Uncacheable("too deep")
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return f"{type(value).__name__}:{value!r}"
    if isinstance(value, np.generic):
        return f"np.{value.dtype}:{value!r}"
    if isinstance(value, np.ndarray):
        data = np.ascontiguousarray(value)
        digest = hashlib.sha256(data.view(np.uint8).reshape(-1) if data.size else b"").hexdigest()
        return f"ndarray:{value.dtype.str}:{value.shape}:{value.strides}:{digest}"
    if isinstance(value, (tuple, list)):
        inner = ",".join(fingerprint(v, depth + 1) for v in value)
        return f"{type(value).__name__}({inner})"
    if isinstance(value, pytypes.ModuleType):
        if _user_module(value):
            return f"module:{value.__name__}:{_file_key(value.__file__)}"
        return f"module:{value.__name__}:{getattr(value, '__version__', '')}"
    if isinstance(value, (numba_types.Type, np.dtype)) or (
        isinstance(value, type) and issubclass(value, np.generic)
    ):
        return f"type:{value}"
    if isinstance(value, Dispatcher):
        return "njit:" + _function_key(value.py_func, depth + 1)
    if isinstance(value, pytypes.BuiltinFunctionType) or value is getattr(
        builtins, getattr(value, "__name__", ""), None
    ):
        return f"builtin:{getattr(value, '__module__', '')}.{value.__name__}"
    module = getattr(value, "__module__", "") or ""
    if module.split(".")[0] in ("dualgpu", "numba", "math", "numpy"):
        # library code: covered by dualgpu's sources and the versions in the package key
        return f"library:{module}.{getattr(value, '__qualname__', type(value).__name__)}"
    if isinstance(value, pytypes.FunctionType):
        return "function:" + _function_key(value, depth + 1)
    raise Uncacheable(f"a global of type {type(value).__name__}")


def _function_key(function, depth):
    try:
        source = inspect.getsource(function)
        path = inspect.getsourcefile(function)
    except (OSError, TypeError):
        raise Uncacheable(f"no source for {function!r}") from None
    return f"{function.__qualname__}:{hashlib.sha256(source.encode()).hexdigest()}:" + (
        _file_key(path) if path else "")


def translation_key(translation, lanes, unguarded, options, seen=None):
    """Fingerprint of a cpu translation as built for ``lanes`` (and its device functions)."""
    seen = set() if seen is None else seen
    if id(translation) in seen:
        return "recursive"
    seen.add(id(translation))
    tree = translation.guard.tree if unguarded and translation.guard else translation.tree
    # numba names the compiled function, and rebuilds its environment on loading (for
    # exceptions raised in the kernel), by the defining module: the same source in
    # another module (renamed, copied) is another entry, never one that imports the first
    module = getattr(translation.py_func, "__module__", None) or ""
    if not _importable(module, translation.py_func):
        raise Uncacheable(f"module {module!r} cannot be imported by name")
    parts = [ast.unparse(tree), f"module={module}",
             repr((lanes if translation.lanes_dependent else 0, unguarded,
                   sorted(options.items())))]
    values = translation.namespace.values
    names = sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
                    and isinstance(n.ctx, ast.Load)} - _assigned(tree))
    for name in names:
        if name in translation.devices:
            device = translation.devices[name]
            parts.append(f"{name}=" + translation_key(device, lanes, False, {}, seen))
        elif name in values:
            parts.append(f"{name}={fingerprint(values[name])}")
        elif hasattr(builtins, name):
            parts.append(f"{name}=builtin")
        else:
            raise Uncacheable(f"unresolved name {name!r}")
    for node in ast.walk(tree):  # module attributes read by the kernel (mod.CONSTANT)
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            value = translation.namespace.value(node)
            if not isinstance(value, pytypes.ModuleType) and _from_module(node, translation):
                parts.append(f"{ast.unparse(node)}={fingerprint(value)}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _importable(name, py_func):
    """True when a later process finds ``py_func``'s module by importing ``name``: it is in
    ``sys.modules`` now, as the same file (a module loaded by path under a name that names
    another module, or none, is not)."""
    module = sys.modules.get(name)
    if module is None:
        return False
    if getattr(module, "__dict__", None) is py_func.__globals__:
        return True
    return getattr(module, "__file__", None) == py_func.__globals__.get("__file__")


def _from_module(node, translation):
    base = node.value
    while isinstance(base, ast.Attribute):
        base = base.value
    return isinstance(base, ast.Name) and isinstance(
        translation.namespace.values.get(base.id), pytypes.ModuleType)


def _assigned(tree):
    names = {a.arg for a in tree.args.args}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
    return names


def launcher_key(source, thread_key, options):
    """The hash naming a launcher's cache file."""
    # rules added with dualgpu.rules.define are compiled into the launcher too
    text = "\n".join((_package_key(), source, thread_key, repr(sorted(options.items())),
                      rules.fingerprint()))
    return hashlib.sha256(text.encode()).hexdigest()[:40]


# ---------------------------------------------------------------------------
# loading
# ---------------------------------------------------------------------------
def load_launcher(key, source, namespace, options):
    """Return ``njit(cache=True, **options)`` of ``_dg_launch`` from the cached module ``key``.

    The module file is written (atomically) if it does not exist yet; its
    globals are then set from ``namespace``.
    """
    from numba import njit

    directory = cache_dir()
    path = os.path.join(directory, f"dg_{key}.py")
    if not os.path.exists(path):
        handle, temporary = tempfile.mkstemp(dir=directory, suffix=".tmp")
        with os.fdopen(handle, "w") as fh:
            fh.write("# generated by dualgpu.backends.cpu.cache: a cpu-backend launcher\n")
            fh.write(source)
        os.replace(temporary, path)
    name = f"dualgpu_cached_{key}"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    module.__dict__.update(namespace)
    return _recompiling_on_load_errors(njit(cache=True, **options)(module._dg_launch))


def _recompiling_on_load_errors(dispatcher):
    """``dispatcher`` whose cache, when an entry cannot be loaded (an import numba's
    environment needs fails, a damaged file), compiles again (and overwrites the entry)."""
    cache = getattr(dispatcher, "_cache", None)
    load = getattr(cache, "load_overload", None)
    if load is None:
        return dispatcher

    def load_overload(sig, target_context):
        try:
            return load(sig, target_context)
        except Exception:  # never an error: numba compiles when nothing is loaded
            return None

    cache.load_overload = load_overload
    return dispatcher


def _nrt_marker(thread_key):
    digest = hashlib.sha256((_package_key() + thread_key).encode()).hexdigest()[:40]
    return os.path.join(cache_dir(), f"nrt_{digest}")


def needs_nrt(thread_key):
    """True if an earlier process found that this thread function allocates (needs NRT)."""
    return thread_key is not None and enabled() and os.path.exists(_nrt_marker(thread_key))


def mark_needs_nrt(thread_key):
    """Remember that this thread function needs NRT, so later processes skip the failed compile."""
    if thread_key is None or not enabled():
        return
    try:
        with open(_nrt_marker(thread_key), "w") as fh:
            fh.write("compiled with numba's NRT: the kernel allocates\n")
    except OSError:
        pass


# numba warns when a launcher cannot be cached (a large global array is a
# "dynamic global"); it then compiles in memory, which is all we need
warnings.filterwarnings(
    "ignore", message='Cannot cache compiled function "_dg_launch"', category=Warning)
