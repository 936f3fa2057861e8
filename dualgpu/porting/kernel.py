"""``dualgpu.jit``: numba.cuda kernels that also propagate tangents, on every backend.

A :class:`Kernel` keeps the user's function and launches it with numba's syntax
``kernel[blocks, threads](args)`` (or ``[blocks, threads, stream]``). Called with
plain arrays it behaves like the numba.cuda kernel; called with DualArray or Dual
arguments it compiles a dual specialisation. Which backend runs it is decided at
launch time (:mod:`dualgpu.core.selection`); compiled backends are cached per kernel,
and their specialisations per argument types.
"""
from __future__ import annotations

from typing import Any, Callable

import ast
import functools
import inspect
import linecache
import math
import os
import re
import textwrap
import warnings

import numpy as np
from numba.cuda import args as _numba_args

from dualgpu.backends.common.translate import unwrap
from dualgpu.core._context import active_lanes, active_levels
from dualgpu.core.dual import Dual
from dualgpu.core.dualarray import DualArray
from dualgpu.core.nested import lane_key
from dualgpu.core.object_arrays import from_object_array, is_object_array, write_back
from dualgpu.core.selection import backend
from dualgpu.errors import (
    COMPLEX_DUAL, DualgpuError, LaunchCoverageWarning, MissingRuleError, complex_dual_message,
)
from dualgpu.host.buffers import (_read_only_params, active, caller_line, device_buffer_fix,
                                  launch_store_fix)
from dualgpu.porting import tuple_arguments
from dualgpu.porting.captured_duals import Plan, captured_duals, lift
from dualgpu.porting.launch_errors import (
    ANSI as _ANSI,
    PYTHON_FLOAT as _PYTHON_FLOAT,
    READ_ONLY_STORE as _READ_ONLY_STORE,
    dual_store_target as _dual_store_target,
    kernel_line as _kernel_line,
    missing_dual_version as _missing_dual_version,
    read_only as _read_only,
    whole_array_operation,
)
from dualgpu.porting.launch_plan import configured, make_plan, register_device_arrays
from dualgpu.porting.signatures import apply_signature, parse_signatures

__all__ = ["jit", "Kernel", "DeviceFunction", "LaunchCoverageWarning", "flat_kernel"]



#: numba.cuda's launch-argument hints (``cuda.In(x)``, ``Out``, ``InOut``): only a copy
#: direction for the GPU, so the other backends (and DualArrays, which dualgpu copies itself)
#: launch with the array they wrap
_ARG_HINTS = frozenset((_numba_args.In, _numba_args.Out, _numba_args.InOut))

#: threads per block of ``kernel.forall(n)`` when none is given
_FORALL_THREADS = 128

#: CUDA's limit on the number of threads in one block (checked on every backend).
MAX_THREADS_PER_BLOCK = 1024


def _reduce(obj, cls):
    """Pickle a kernel or device function without its compiled code (workers compile their own).

    By reference to its module attribute when that is importable and is this object,
    else by value (the Python function and the options).
    """
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", "")
    if module and module != "__main__" and "<locals>" not in qualname:
        try:
            found = _lookup(module, qualname)
        except (ImportError, AttributeError):
            found = None
        if found is obj:
            return _lookup, (module, qualname)
    code = obj.py_func.__code__
    return _by_value, (cls, obj.py_func, obj.options, code.co_filename,
                       linecache.getlines(code.co_filename))


def _by_value(cls, py_func, options, filename, lines):
    """Rebuild a kernel shipped by value; its source stays readable for the cpu backend.

    cloudpickle renames the code's file to ``<dynamic-code>``: the name is put back
    and, where the file does not exist (another machine), its shipped lines are
    registered with :mod:`linecache`.
    """
    if lines and py_func.__code__.co_filename != filename:
        py_func.__code__ = py_func.__code__.replace(co_filename=filename)
        if not os.path.exists(filename):
            linecache.cache[filename] = (sum(map(len, lines)), None, list(lines), filename)
    return cls(py_func, options)


def _lookup(module, qualname):
    import importlib

    found = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


def _is_float_dim(dims):
    if isinstance(dims, (tuple, list)):
        return any(isinstance(d, (float, np.floating)) for d in dims)
    return isinstance(dims, (float, np.floating))


def _normalise_dims(dims, what, kernel_name):
    if _is_float_dim(dims):  # numba.cuda refuses them too ("must be a sequence of integers")
        raise DualgpuError(
            f"kernel {kernel_name}: {what} must be an int or a tuple of 1-3 ints; got {dims!r}, "
            "a float. Fix: integer division, (n + threads - 1) // threads, or int(...)."
        )
    if isinstance(dims, (int, np.integer)):
        dims = (int(dims),)
    try:
        dims = tuple(int(d) for d in dims)
    except TypeError:
        raise DualgpuError(
            f"kernel {kernel_name}: {what} must be an int or a tuple of 1-3 ints; got {dims!r}."
        ) from None
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise DualgpuError(
            f"kernel {kernel_name}: {what} must be 1-3 positive ints; got {dims!r}."
        )
    return dims


def _backend_module(name):
    # a backend is loaded when a kernel first runs on it (numba's CPU and CUDA targets, the
    # simulator): importing dualgpu loads none of them
    if name == "cpu":
        from dualgpu.backends.cpu import kernel as module
    elif name == "cudasim":
        from dualgpu.backends.cudasim import kernel as module
    else:
        from dualgpu.backends.gpu import kernel as module

        register_device_arrays()
    return module


class DeviceFunction:
    """A ``device=True`` function: compiled for each backend where a kernel calls it.

    Called from plain Python it simply runs its Python function.
    """

    __dualgpu_device__ = True

    def __init__(self, func, options):
        self.py_func = unwrap(func) or func
        self.options = {k: v for k, v in options.items() if k != "device"}
        functools.update_wrapper(self, self.py_func)

    def __call__(self, *args, **kwargs):
        return self.py_func(*args, **kwargs)

    def __reduce__(self):
        return _reduce(self, DeviceFunction)

    def __repr__(self):
        return f"<dualgpu device function {self.py_func.__qualname__}>"


class Kernel:
    """A kernel launched as ``kernel[griddim, blockdim](*args)`` on the active backend."""

    __dualgpu_kernel__ = True
    #: the argument types of the kernel's eager signatures (``@cuda.jit("void(...)")``), or None
    signatures = None
    #: the class of the device functions a kernel calls, which
    #: :func:`~dualgpu.porting.captured_duals.lift` rebuilds with hidden arguments
    device_function_type = DeviceFunction

    def __init__(self, func, options):
        self.py_func = unwrap(func) or func
        self.options = dict(options)
        self._compiled = {}
        self._launchers = {}
        self._flat_kernels = {}
        functools.update_wrapper(self, self.py_func)
        self._params = list(inspect.signature(self.py_func).parameters)

    def __reduce__(self):
        return _reduce(self, Kernel)

    def __repr__(self):
        return f"<dualgpu kernel {self.py_func.__qualname__}>"

    def __getitem__(self, config):
        try:
            launcher = self._launchers[config]  # simulations launch the same configuration often
            # (1.0, 32) == (1, 32): a float configuration must not find the int one's launcher
            g, b = config[0], config[1]
            if ((type(g) is int or not _is_float_dim(g))
                    and (type(b) is int or not _is_float_dim(b))):
                return launcher
        except (KeyError, TypeError):
            pass
        if not isinstance(config, tuple) or not 2 <= len(config) <= 4:
            raise DualgpuError(
                f"kernel {self.__name__}: launch as kernel[griddim, blockdim](...) or "
                f"kernel[griddim, blockdim, stream](...); got kernel[{config!r}]."
            )
        griddim = _normalise_dims(config[0], "griddim", self.__name__)
        blockdim = _normalise_dims(config[1], "blockdim", self.__name__)
        if math.prod(blockdim) > MAX_THREADS_PER_BLOCK:  # a GPU refuses the launch
            raise DualgpuError(
                f"kernel {self.__name__}: blockdim {blockdim!r} has {math.prod(blockdim)} "
                f"threads; CUDA allows at most {MAX_THREADS_PER_BLOCK} per block, on every "
                "backend so that the kernel also runs on a GPU. Use more blocks."
            )
        stream = config[2] if len(config) > 2 else 0
        sharedmem = config[3] if len(config) > 3 else 0
        launcher = configured(self, griddim, blockdim, stream, sharedmem)
        try:
            if len(self._launchers) < 256:
                self._launchers[config] = launcher
        except TypeError:  # an unhashable stream object
            pass
        return launcher

    def forall(self, ntasks, tpb=0, stream=0, sharedmem=0):
        """A launcher with enough threads for ``ntasks`` (numba.cuda's ``kernel.forall``)."""
        ntasks = int(ntasks)
        if ntasks < 1:
            raise DualgpuError(f"kernel {self.__name__}.forall needs ntasks >= 1; got {ntasks}.")
        tpb = int(tpb) or min(ntasks, _FORALL_THREADS)
        return self[(ntasks + tpb - 1) // tpb, tpb, stream, sharedmem]

    def __call__(self, *args, **kwargs):
        raise DualgpuError(
            f"kernel {self.__name__} needs a launch configuration: call it as "
            f"{self.__name__}[blocks, threads_per_block](...)."
        )

    # -- launching -------------------------------------------------------------------
    def compiled(self, name=None):
        """The backend kernel object for backend ``name`` (default: the active one)."""
        name = name or backend()
        if name not in self._compiled:
            self._compiled[name] = _backend_module(name).compile_kernel(
                self.py_func, **_backend_options(name, self.options)
            )
        return self._compiled[name]

    def launch(self, griddim, blockdim, stream, sharedmem, *args, **kwargs):
        if kwargs:  # numba.cuda's launch takes positional arguments only
            order = ", ".join(self._params)
            raise DualgpuError(
                f"kernel {self.__name__} got keyword argument(s) {', '.join(sorted(kwargs))}; "
                f"kernels take their arguments positionally, as numba.cuda's do. Fix: "
                f"{self.__name__}[griddim, blockdim]({order})."
            )
        if len(args) != len(self._params):
            raise DualgpuError(
                f"kernel {self.__name__} takes {len(self._params)} arguments "
                f"({', '.join(self._params)}); got {len(args)}."
            )
        if list in map(type, args):
            self._refuse_lists(args)
        if self.signatures:
            args = self.apply_signatures(args)
        name = backend()
        if not _ARG_HINTS.isdisjoint(map(type, args)):  # cuda.In(x): numba's only on the GPU
            args = tuple(a.value if type(a) in _ARG_HINTS
                         and (name != "cuda" or isinstance(a.value, DualArray)) else a
                         for a in args)
        registry, shadows = active(), None
        if registry is not None:  # under the driver: host buffers that receive duals
            captured = self._may_capture and bool(self._captured())
            if registry.followed:  # numbers host code computed from them: on their duals
                args = registry.followed.launch_arguments(args)
            args, shadows = registry.before_launch(self, args, captured)
        objects = {i: a for i, a in enumerate(args) if is_object_array(a)}
        if objects:  # np.array([dual, 0.0]) built by host code: launched as a DualArray
            args = list(args)
            for i, array in objects.items():
                args[i] = from_object_array(array, f"argument {self._params[i]} of kernel "
                                                   f"{self.__name__}")
            self._launch(name, griddim, blockdim, stream, sharedmem, args)
            for i, array in objects.items():  # as numba copies a host array back
                write_back(array, args[i])
        else:
            self._launch(name, griddim, blockdim, stream, sharedmem, args)
        if shadows is not None:  # as numba copies a host array back; partials stay in the registry
            registry.after_launch(shadows)

    def apply_signatures(self, args):
        """``args`` converted as the kernel's eager signatures say (numba.cuda's launch does)."""
        return apply_signature(self.__name__, self._params, self.signatures, args)

    def plan(self, name, griddim, blockdim, sharedmem, args):
        """A plan for launches like this one on backend ``name``, or None (see
        :func:`dualgpu.porting.launch_plan.make_plan`)."""
        return make_plan(self, name, griddim, blockdim, sharedmem, args)

    def _captured(self):
        return captured_duals(self)

    def _launch(self, name, griddim, blockdim, stream, sharedmem, args):
        if self._may_capture:
            # a kernel factory's dual constant (closure) or a dual module global: a hidden
            # argument, on every backend (compiled code, and the simulator's copy of the
            # globals, would keep the value of the first launch)
            captured = captured_duals(self)
            if captured:
                try:
                    lifted, values = lift(self, captured, name)
                except DualgpuError:
                    if name != "cudasim":
                        raise
                    lifted = None  # no source to rewrite: the simulator reads the closure
                if lifted is not None:
                    lifted._launch(name, griddim, blockdim, stream, sharedmem,
                                   list(args) + values)
                    return
        if name != "cudasim" and any(tuple_arguments.holds_duals(a) for a in args):
            # tuples of duals: a kernel taking their members one by one (lane tiles need them)
            shape = tuple_arguments.structure(args)
            flat = self._flat_kernels.get(shape)
            if flat is None:
                flat = self._flat_kernels[shape] = flat_kernel(self, shape)
            flat._launch(name, griddim, blockdim, stream, sharedmem,
                         tuple_arguments.flatten(args, shape))
            return
        self._check_duals(args, name)
        self._check_coverage(griddim, blockdim, args)
        kernel = self.compiled(name)
        try:
            if name == "cpu":
                kernel.launch(griddim, blockdim, args, sharedmem)
            else:
                kernel.launch(griddim, blockdim, stream, sharedmem, args)
        except DualgpuError:
            raise
        except Exception as exc:
            self._launch_failed(exc, args, name)
            raise

    def _launch_failed(self, exc, args, name):
        """Raise the clear error for a launch with ``args`` on backend ``name`` that raised
        ``exc`` where there is one (a dual stored into a plain array, a complex dual, a
        function without a dual version, float(Dual)...); otherwise return, and the caller
        re-raises ``exc``."""
        stored = _dual_store_target(exc)
        if stored is not None:
            raise DualgpuError(self._drop_message(args, *stored)) from exc
        if _READ_ONLY_STORE.search(_ANSI.sub("", str(exc))) or (
                type(exc) is ValueError and "read-only" in str(exc)):  # compiled; simulator
            only_read = _read_only_params(self)  # (from the source: never written)
            locked = [p for p, a in zip(self._params, args)
                      if _read_only(a) and p not in only_read]
            if locked:
                raise DualgpuError(
                    f"kernel {self.__name__}{_kernel_line(exc)} writes into a read-only "
                    f"array: argument {' or '.join(locked)} (its flags.writeable is False, "
                    "as for an np.broadcast_to view or an array another library lent). "
                    "Fix: pass a writeable copy (np.array(a)) or, if the array is yours, "
                    "set a.flags.writeable = True first. numba's message follows.\n\n"
                    f"{exc}") from exc
        if len(active_levels()) > 1 and "complex" in str(exc).lower():
            raise DualgpuError(
                f"kernel {self.__name__}{_kernel_line(exc)}: complex arithmetic with the duals "
                "of a nested derivative (hessian, hvp, jacfwd of jacfwd) is not supported: "
                "complex duals carry first-order partials only. Fix: write the complex "
                "quantity as two real arrays or numbers (real and imaginary parts; e.g. "
                "z * exp(-i p) as (re cos p + im sin p, im cos p - re sin p)), so that the "
                "nested duals only meet real numbers, or take a first-order derivative "
                "(jacobian, jvp) of this simulation.") from exc
        if COMPLEX_DUAL in str(exc):
            found = re.search(re.escape(COMPLEX_DUAL) + r" \((.*?)\) is not", str(exc))
            raise DualgpuError(
                f"kernel {self.__name__}{_kernel_line(exc)}: " + complex_dual_message(
                    found.group(1) if found else "a complex number and a dual")) from exc
        whole = whole_array_operation(exc)
        if whole is not None:
            raise DualgpuError(
                f"kernel {self.__name__}{_kernel_line(exc)}: {whole} works on a whole array "
                "(a row of a 2-D array, u[i] for u[i, j]?), which kernels cannot: numba.cuda "
                "compiles operations on elements only (the cpu backend runs array arithmetic "
                "on plain arrays, which a GPU refuses). Fix: index every dimension (u[i, j]), "
                "with a loop over the row if needed. numba's message follows.\n\n" + str(exc)
            ) from exc
        missing = _missing_dual_version(exc)
        if missing is not None:
            raise MissingRuleError(
                f"kernel {self.__name__}{_kernel_line(exc)}: {missing} has no dual version "
                f"in compiled kernels (the {name} backend compiles with numba): numba has "
                "no implementation of it for a Dual and dualgpu no derivative rule (the "
                "cudasim backend, which runs kernels in Python, may run it through numpy). "
                "Fix: write it with operations that take duals (arithmetic, comparisons, "
                "min/max, abs, math.* functions), or give it a derivative rule with "
                "dualgpu.rules.define. numba's message follows.\n\n" + str(exc)
            ) from exc
        if _PYTHON_FLOAT in str(exc):
            host = self._written_host_arrays(args)
            if len(host) == 1:  # the simulator's atomic into a host numpy array
                raise DualgpuError(self._drop_message(args, host[0])) from exc
            raise DualgpuError(
                f"kernel {self.__name__}: float(Dual) would drop the partials; keep the dual "
                "(arithmetic with floats promotes) or use .value if no derivative is wanted."
            ) from exc
        host = self._written_host_arrays(args)
        if host and type(exc).__name__ == "TypingError":
            name = host[0]
            raise DualgpuError(
                f"kernel {self.__name__} does not compile for its dual arguments, and it is "
                f"given the host numpy array {name} (shape "
                f"{tuple(dict(zip(self._params, args))[name].shape)}) that it writes or "
                "passes on: a dual stored into it (also by an atomic) cannot keep its "
                "partials. numba's message follows." + launch_store_fix(
                    name, dict(zip(self._params, args))[name], caller_line())
                + f"\n\n{exc}"
            ) from exc

    def _written_host_arrays(self, args):
        """Names of the float host numpy arguments of a dual launch that the kernel may write."""
        if not any(isinstance(a, (Dual, DualArray)) or tuple_arguments.holds_duals(a)
                   for a in args):
            return []
        read_only = _read_only_params(self)
        return [p for p, a in zip(self._params, args)
                if type(a) is np.ndarray and a.dtype.kind in "fc"
                and a.ndim > read_only.get(p, 0)]

    @functools.cached_property
    def _may_capture(self):
        """False when neither the kernel nor a device function it reaches reads a closure
        cell or a global that holds data (not code): launches skip the scan for captured
        duals (:mod:`dualgpu.porting.captured_duals`)."""
        plan = self.__dict__["_capture_plan"] = Plan(self.py_func)
        return any(plan.functions.values())

    def _refuse_lists(self, args):
        # numba.cuda cannot pass a Python list to a kernel (its launch knows arrays, scalars,
        # records and tuples); the simulators would run it, the cpu backend fail to type it
        for p, a in zip(self._params, args):
            if isinstance(a, list):
                raise DualgpuError(
                    f"kernel {self.__name__}: argument {p} is a Python list "
                    f"(length {len(a)}); numba.cuda kernels take arrays, scalars and tuples, "
                    f"not lists. Fix: pass np.asarray({p}) (or cuda.to_device(np.asarray({p}))) "
                    "instead."
                )

    def _check_duals(self, args, name):
        duals = [(p, a) for p, a in zip(self._params, args) if isinstance(a, (Dual, DualArray))]
        if not duals:
            return
        first = duals[0][1]
        if any(getattr(a, "tag", 0) for _, a in duals):
            lane_key([a for _, a in duals], f"kernel {self.__name__}")  # lanes agree per tag
        elif any(a.lanes != first.lanes for _, a in duals):
            listing = ", ".join(f"{p} has {a.lanes}" for p, a in duals)
            raise DualgpuError(
                f"kernel {self.__name__}: the dual arguments disagree on the lane count "
                f"({listing}). "
                "Seed every dual input of one launch with the same N (the driver does this)."
            )
        # duals of different dtypes mix as floats do (numba's promotion; a store casts), as
        # a plain kernel takes float32 arrays with a float64 scalar
        complex_duals = [p for p, a in duals if np.dtype(a.dtype).kind == "c"]
        if complex_duals and name not in ("cpu", "cudasim"):
            raise DualgpuError(f"kernel {self.__name__}: " + complex_dual_message(
                f"the complex dual argument {complex_duals[0]} on the {name} backend"))
        if name == "cpu":
            for p, a in duals:
                if isinstance(a, DualArray) and a.is_device:
                    raise DualgpuError(
                        f"kernel {self.__name__}: argument {p} is a DualArray in device memory, "
                        "but the active backend is 'cpu'; copy it with .copy_to_host() or "
                        "switch to the backend it was allocated on."
                    )

    def _check_coverage(self, griddim, blockdim, args):
        if "gridsize" in self._source_names:
            return  # grid-stride loops cover any size
        threads = math.prod(griddim) * math.prod(blockdim)
        shortest = min((len(a) for a in args if getattr(a, "ndim", 0) >= 1), default=0)
        if threads >= shortest:
            return
        rows = [
            (p, a.shape[0]) for p, a in zip(self._params, args) if getattr(a, "ndim", 0) >= 1
        ]
        if rows and "grid" in self._source_names and self._bounds_by_extent:
            listing = ", ".join(f"{p}: {n}" for p, n in rows)
            warnings.warn(
                f"kernel {self.__name__} is launched with {threads} threads "
                f"(griddim {griddim}, blockdim {blockdim}), fewer than the first dimension of "
                f"every array argument ({listing}); some cells will not be computed. Use "
                "blocks = (n + threads - 1) // threads.",
                LaunchCoverageWarning,
                stacklevel=3,
            )

    @functools.cached_property
    def _source_tree(self):
        """The kernel's parsed source, or None where it is not available."""
        try:
            return ast.parse(textwrap.dedent(inspect.getsource(self.py_func)))
        except (OSError, TypeError, SyntaxError):
            return None

    @functools.cached_property
    def _bounds_by_extent(self):
        """True if the kernel orders an index against an array's extent (``i < u.shape[0]``,
        ``if i >= n`` with ``n = len(u)``): it means to cover the array, one thread per
        element. A kernel that only picks fixed elements (``if i == 0``, boundary updates
        launched with a few threads) does not, and gets no coverage warning."""
        tree = self._source_tree
        if tree is None:
            return False

        def extent(node):
            return any((isinstance(n, ast.Attribute) and n.attr in ("shape", "size"))
                       or (isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                           and n.func.id == "len")
                       or (isinstance(n, ast.Name) and n.id in names)
                       for n in ast.walk(node))

        names = set()
        for node in ast.walk(tree):  # n = u.shape[0]; ny, nx = u.shape
            if isinstance(node, ast.Assign) and extent(node.value):
                for target in node.targets:
                    names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        ordering = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
        return any(isinstance(node, ast.Compare)
                   and any(isinstance(op, ordering) for op in node.ops)
                   and any(extent(side) for side in [node.left, *node.comparators])
                   for node in ast.walk(tree))

    @functools.cached_property
    def _source_names(self):
        tree = self._source_tree
        if tree is None:
            return frozenset()
        return frozenset(
            node.attr if isinstance(node, ast.Attribute) else node.id
            for node in ast.walk(tree)
            if isinstance(node, (ast.Attribute, ast.Name))
        )

    def _stored_plain_arrays(self, args):
        plain = [
            p for p, a in zip(self._params, args)
            if not isinstance(a, (Dual, DualArray)) and np.ndim(a) >= 1
            and getattr(getattr(a, "dtype", None), "kind", "") == "f"
        ]
        if self._source_tree is None:
            return plain
        stored = {
            node.value.id
            for node in ast.walk(self._source_tree)
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
        }
        return [p for p in plain if p in stored] or plain

    def _drop_message(self, args, target, where=""):
        if target:
            names = [target]
        else:
            names = self._stored_plain_arrays(args)
        at = f" (at {where})" if where else ""
        names = [_aliased_param(self._source_tree, n, self._params) for n in names]
        if names and not all(n in self._params for n in names):
            return (
                f"kernel {self.__name__} stores a dual into {', '.join(names)}{at}, an array "
                "the kernel did not receive as an argument and that cannot hold partials: a "
                "cuda.shared.array or cuda.local.array of a dtype other than float32/float64 "
                "(float16, an integer type, or complex: complex scratch is not made dual), an "
                "array made with numpy inside the kernel, or a global array. Make tiles and "
                "scratch with cuda.shared.array / cuda.local.array in float32 or float64 (a "
                "dual launch makes those dual; complex scratch as two such arrays, real and "
                "imaginary parts), or pass the array as a DualArray argument. An integer "
                "array where the truncation is meant (a bin index): store int(x)."
            )
        which = f"the plain array argument(s) {', '.join(names)}" if names else "a plain array"
        given = dict(zip(self._params, args))
        integers = [n for n in names if np.issubdtype(getattr(given.get(n), "dtype", np.float64),
                                                      np.integer)
                    or getattr(given.get(n), "dtype", None) == np.bool_]
        complexes = [n for n in names if np.issubdtype(
            getattr(given.get(n), "dtype", np.float64), np.complexfloating)]
        if complexes and backend() not in ("cpu", "cudasim"):  # complex duals do not launch
            # there (dualgpu.porting.memory gives complex arrays no lanes on the cuda backend)
            return f"kernel {self.__name__}{at}: " + complex_dual_message(
                f"a dual stored into the complex array {complexes[0]} "
                f"({given[complexes[0]].dtype})")
        if integers:
            return (
                f"kernel {self.__name__} stores a dual into the integer array(s) "
                f"{', '.join(f'{n} ({given[n].dtype})' for n in integers)}{at}: it would be "
                "truncated and its partials dropped, and an integer array cannot hold them. If "
                "the array holds a state, give it a float dtype where it is made (for example "
                "u0 = np.asarray(u0, dtype=np.float64) before cuda.to_device or "
                "device_array_like); if the truncation is meant, store int(x)."
            )
        if active_lanes():
            fix = ("Allocate it through dualgpu.cuda (to_device, device_array, "
                   "device_array_like), not with numpy (np.zeros_like...): under the driver "
                   "those calls make DualArrays.")
        else:
            fix = ("Allocate it as a DualArray (dualgpu.cuda.device_array_like(dual_input) or "
                   "dualgpu.dual_array), or run the simulation under the driver (dualgpu.jvp / "
                   "dualgpu.jacfwd), which allocates dual arrays through dualgpu.cuda for you.")
        device = [n for n in names if hasattr(given.get(n), "copy_to_host")
                  and not isinstance(given.get(n), DualArray)]
        if active_lanes() and device:
            fix = device_buffer_fix(", ".join(device))
        host = [n for n in names if type(given.get(n)) is np.ndarray]
        if len(names) == 1 and host:
            return (f"kernel {self.__name__} stores a dual into the host numpy array "
                    f"{names[0]}{at} (shape {tuple(given[names[0]].shape)}), which cannot "
                    "hold its partials." + launch_store_fix(names[0], given[names[0]],
                                                            caller_line()))
        return (
            f"kernel {self.__name__} stores a dual into {which}, which would drop its partials. "
            + fix
        )


def _aliased_param(tree, name, params):
    """The kernel parameter that the local ``name`` is a view of (``row = I_nu[k]``,
    ``row = I_nu[k][1:]``, through other such locals), or ``name`` itself."""
    seen = set()
    while tree is not None and name not in params and name not in seen:
        seen.add(name)
        bases = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == name for t in node.targets):
                value = node.value
                while isinstance(value, ast.Subscript):
                    value = value.value
                bases.add(value.id if isinstance(value, ast.Name) else None)
        if len(bases) != 1 or None in bases:
            break
        name = bases.pop()
    return name


def _backend_options(name, options):
    """The numba.cuda.jit options each backend understands (the GPU takes them all)."""
    if name == "cuda":
        return options
    if name == "cpu" and options.get("fastmath"):
        return {"fastmath": options["fastmath"]}
    return {}


def flat_kernel(kernel, shape):
    """A dualgpu kernel taking the members of ``kernel``'s tuple arguments one by one.

    Its source is :func:`~dualgpu.porting.tuple_arguments.flat_source` for the argument
    structure ``shape``; it rebuilds the tuples and calls ``kernel``'s body, compiled as a
    device function (see :mod:`dualgpu.porting.tuple_arguments`).
    """
    name = f"_dg_flat_{kernel.py_func.__name__}"
    source = tuple_arguments.flat_source(name, shape)
    filename = f"<dualgpu tuple arguments of {kernel.py_func.__qualname__} {shape}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    options = {k: v for k, v in kernel.options.items() if k != "cache"}
    namespace = {"body": DeviceFunction(kernel.py_func, options)}
    exec(compile(source, filename, "exec"), namespace)
    flat = Kernel(namespace[name], options)
    flat.__name__ = kernel.__name__  # messages name the user's kernel
    return flat


def jit(func_or_sig: Callable[..., Any] | str | Any = None, device: bool = False,
        **options: Any) -> Any:
    """Decorate a numba.cuda kernel or device function so that it also propagates tangents.

    Accepts the same options as ``numba.cuda.jit`` and works as ``@dualgpu.jit``,
    ``@dualgpu.jit(...)``, ``@dualgpu.jit(device=True)``, or applied to an
    already-decorated numba.cuda kernel. A kernel's explicit signature converts its
    scalar arguments at every launch and checks its arrays, as numba.cuda's launch does
    (as numba.cuda reads them); specialisations are still compiled per argument types
    (duals included). A device function's signature is ignored.

    Parameters
    ----------
    func_or_sig : function, numba.cuda kernel, signature or list of signatures, optional
        The function to decorate, or the eager signature(s) when used as
        ``@jit("void(float32[:], float32)")``.
    device : bool, optional
        Make a device function (called from kernels) instead of a kernel.
    **options
        numba.cuda.jit's options (``fastmath``, ``lineinfo``...).

    Returns
    -------
    Kernel or DeviceFunction

    Examples
    --------
    >>> import numpy as np
    >>> import dualgpu
    >>> from dualgpu import cuda
    >>> def saxpy(a, x, y, out):
    ...     i = cuda.grid(1)
    ...     if i < x.shape[0]:
    ...         out[i] = a * x[i] + y[i]
    >>> kernel = dualgpu.jit(saxpy)
    >>> out = np.zeros(4)
    >>> with dualgpu.using_backend("cudasim"):
    ...     kernel[1, 4](2.0, np.ones(4), np.arange(4.0), out)
    >>> out.tolist()
    [2.0, 3.0, 4.0, 5.0]
    """
    signatures = None
    if isinstance(func_or_sig, (str, list, tuple)) or _is_signature(func_or_sig):
        signatures, func_or_sig = func_or_sig, None

    def decorate(func):
        target_options = dict(getattr(func, "targetoptions", {}) or {})
        is_device = device or target_options.pop("device", False)
        target_options.update(options)
        if is_device:
            return DeviceFunction(func, target_options)
        kernel = Kernel(func, target_options)
        if signatures is not None:
            kernel.signatures = parse_signatures(signatures)
        return kernel

    if func_or_sig is None:
        return decorate
    return decorate(func_or_sig)


def _is_signature(obj):
    from numba.core import typing

    return isinstance(obj, typing.Signature)
