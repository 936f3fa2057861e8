"""The ``cudasim`` backend: numba's CUDA simulator, with duals as Python objects.

Each kernel runs as Python code, one Python thread per CUDA thread. A copy of
the kernel function is made whose ``math`` (and names imported from ``math``)
refer to :mod:`dualgpu.dmath`, whose ``cuda`` is numba.cuda (replaced by the
launch's module while it runs, as numba's simulator does), and whose device
functions are simulator device functions made the same way, wherever they are
defined.

A launch runs on the threads of :mod:`dualgpu.backends.cudasim.threads` with a
``cuda`` module of :mod:`dualgpu.backends.cudasim.module`: block barriers, warp
collectives, shared memory per block, and -- for a kernel that calls
``cuda.cg.this_grid()`` -- every thread of the grid at once, so that
``grid.sync()`` is a true grid-wide barrier.

A launch with dual arguments (N lanes) runs a second copy in which float
``cuda.local.array`` and ``cuda.shared.array`` give DualArrays with N lanes and
number types (``float32``, ``np.float64``, ``numba.float32``...) cast duals
instead of dropping their partials.
"""
import cmath
import math
import threading
import types as pytypes

import numpy as np

from dualgpu.core import dbuiltins
from dualgpu.core import dcmath, dmath
from dualgpu.core.dual import Dual
from dualgpu.core.dualarray import DualArray
from dualgpu.errors import DualgpuError
from dualgpu.backends.common.rebind import global_names, rebind, uses_dual_scratch
from dualgpu.backends.cudasim.casts import CastingModule, cast_for
from dualgpu.backends.common.translate import (
    cuda_member_names, device_py_func, is_cuda_module, unwrap,
)
from dualgpu.core.nested import lane_key, nested_local_array_error
from dualgpu.backends.cudasim.module import LaunchModule
from dualgpu.backends.cudasim.threads import run_groups

__all__ = ["compile_kernel", "SimulatorKernel", "MAX_GRID_THREADS"]

#: Most threads a launch that synchronises its grid may have (all run at once, as OS threads).
MAX_GRID_THREADS = 8192

_DEVICE_CACHE = {}
#: numba's simulator runs one kernel at a time per process (it asserts so, and swaps
#: module globals during a launch): launches from several threads take turns.
_LAUNCH_LOCK = threading.RLock()


def _simulator():
    from numba.cuda import simulator

    return simulator


def _launch_module():
    from numba.cuda.simulator import kernel

    context = kernel._get_kernel_context()
    if context is None:
        import numba.cuda

        return numba.cuda
    return context


class _LaunchMember:
    """A numba.cuda member imported by name (``from numba.cuda import syncthreads``):
    the running launch's version of it."""

    def __init__(self, name):
        self._name = name

    def __call__(self, *args, **kwargs):
        return getattr(_launch_module(), self._name)(*args, **kwargs)

    def __getattr__(self, attr):
        return getattr(getattr(_launch_module(), self._name), attr)


_MEMBERS = {}


def _cuda_member(value):
    if not _MEMBERS:
        import numba.cuda

        for name in cuda_member_names():
            member = getattr(numba.cuda, name, None)
            if member is not None and not isinstance(member, (int, float, str, bool)):
                _MEMBERS[id(member)] = (member, _LaunchMember(name))
    found = _MEMBERS.get(id(value))
    return found[1] if found is not None and found[0] is value else None


_MODULE_PROXIES = {}


class _LaunchCuda(pytypes.ModuleType):
    """numba.cuda as a closure variable (``from numba import cuda`` inside a kernel factory):
    the running launch's module. numba's simulator swaps the module only where it is a
    global of the kernel; a closure cell holds this instead (issue 44)."""

    def __init__(self):
        super().__init__("numba.cuda")

    def __getattr__(self, name):
        return getattr(_launch_module(), name)


_LAUNCH_CUDA = _LaunchCuda()


class _ModuleView(pytypes.ModuleType):
    """A user module as a simulated kernel sees it: ``mod.func(x)`` calls the simulator's
    copy of the device function ``mod.func`` (dual ``math``, the launch's ``cuda``), as a
    device function imported by name does; other attributes are read live."""

    def __init__(self, wrapped, replace):
        super().__init__(wrapped.__name__, getattr(wrapped, "__doc__", None))
        self.__dict__["_wrapped"] = wrapped
        self.__dict__["_replace"] = replace

    def __getattr__(self, name):
        value = getattr(self.__dict__["_wrapped"], name)
        if is_cuda_module(value):  # pkg.cuda.grid(1): the launch's module, as a global's
            return _LAUNCH_CUDA
        return self.__dict__["_replace"](value)

    def __repr__(self):
        return f"<module {self.__name__!r} seen by a simulated launch>"


_LIBRARIES = ("numpy", "numba", "math", "cmath", "scipy", "llvmlite")


def _module_view(module, lanes):
    """The :class:`_ModuleView` of a user module (one with a .py file outside the libraries
    kernels use; dualgpu too, for ``dualgpu.cuda.grid(1)``), else None."""
    path = getattr(module, "__file__", None) or ""
    if not path.endswith(".py") or module.__name__.split(".")[0] in _LIBRARIES:
        return None
    key = (module.__name__, id(module), lanes)
    if key not in _MODULE_PROXIES:
        _MODULE_PROXIES[key] = _ModuleView(module, _replacer(lanes))
    return _MODULE_PROXIES[key]


def _module_proxy(module, lanes):
    key = (module.__name__, bool(lanes))
    if key not in _MODULE_PROXIES:
        extra = {"cuda": _launch_module} if module.__name__ == "numba" else None
        _MODULE_PROXIES[key] = CastingModule(module, casts=bool(lanes), extra=extra)
    return _MODULE_PROXIES[key]


def _replacer(lanes):
    """The global replacement for a plain launch (lanes 0) or a dual one with ``lanes`` lanes."""

    def replace(value):
        import numba
        import numba.cuda
        from numba.core.registry import CPUDispatcher

        if is_cuda_module(value):
            return numba.cuda
        if value is math:
            return dmath
        if value is cmath:
            return dcmath
        if isinstance(value, pytypes.BuiltinFunctionType) and getattr(
                math, value.__name__, None) is value:
            return getattr(dmath, value.__name__)
        if isinstance(value, pytypes.BuiltinFunctionType) and getattr(
                cmath, value.__name__, None) is value:
            return getattr(dcmath, value.__name__)
        if value is numba or (lanes and value is np):
            return _module_proxy(value, lanes)
        if lanes:
            cast = cast_for(value)
            if cast is not None:
                return cast
        member = _cuda_member(value)
        if member is not None:
            return member
        py_func = device_py_func(value)
        if py_func is not None:
            return _device(py_func, lanes)
        if isinstance(value, CPUDispatcher):
            # an @njit function called from a kernel (numba.cuda compiles it for the GPU, as
            # numba.cuda.random's generators): its Python runs, as device functions do
            return _njit_device(value.py_func, lanes)
        if isinstance(value, pytypes.ModuleType):  # mod.func(x): the simulated device function
            return _module_view(value, lanes) or value
        return value

    return replace


def _cell_replacer(lanes):
    """As :func:`_replacer`, for closure values: numba.cuda becomes the launch's module."""
    replace = _replacer(lanes)

    def replace_cell(value):
        if is_cuda_module(value):
            return _LAUNCH_CUDA
        return replace(value)

    return replace_cell


_replace = _replacer(0)

#: builtins a dual launch replaces: Python's min/max return an argument unchanged, compiled
#: code applies numba's typing (a float32 dual with a Python float gives a float64 dual)
_DUAL_BUILTINS = {"min": dbuiltins.min, "max": dbuiltins.max, "complex": dcmath.complex}


def _simulated(py_func, lanes):
    """The copy of ``py_func`` the simulator runs for ``lanes`` lanes (0: a plain launch)."""
    copy = rebind(py_func, _replacer(lanes), _cell_replacer(lanes))
    if lanes:
        names = global_names(py_func.__code__)
        for name, stand_in in _DUAL_BUILTINS.items():
            if name in names and name not in py_func.__globals__:
                copy.__globals__[name] = stand_in  # rebind's globals are the copy's own
    return copy


def _device(py_func, lanes=0):
    key = (py_func, lanes)
    if key not in _DEVICE_CACHE:
        _DEVICE_CACHE[key] = None  # recursion guard
        _DEVICE_CACHE[key] = _keyword_device_class()(_simulated(py_func, lanes), device=True)
    return _DEVICE_CACHE[key]


def _njit_device(py_func, lanes):
    """An @njit function run as Python inside kernels, its integers wrapping silently as in
    compiled code (numba.cuda.random's uint64 arithmetic)."""
    key = ("njit", py_func, lanes)
    if key not in _DEVICE_CACHE:
        device = _device(py_func, lanes)

        def call(*args, **kwargs):
            with np.errstate(over="ignore"):
                return device(*args, **kwargs)

        call.__name__ = py_func.__name__
        _DEVICE_CACHE[key] = call
    return _DEVICE_CACHE[key]


_KEYWORD_DEVICE = []


def _keyword_device_class():
    """numba's simulated device function, also called with keyword arguments.

    numba.cuda compiles ``pressure(rho, e, gamma=g)`` for a device function; the
    simulator's ``FakeCUDAKernel.__call__`` takes positional arguments only.
    """
    if not _KEYWORD_DEVICE:
        from numba.cuda.simulator import kernel

        class KeywordDevice(kernel.FakeCUDAKernel):
            def __call__(self, *args, **kwargs):
                if not kwargs:
                    return super().__call__(*args)
                # the device branch of FakeCUDAKernel.__call__, with the keywords passed on
                with kernel.swapped_cuda_module(self.fn, kernel._get_kernel_context()):
                    return self.fn(*args, **kwargs)

        _KEYWORD_DEVICE.append(KeywordDevice)
    return _KEYWORD_DEVICE[0]


def uses_grid_group(py_func, _seen=None):
    """True if ``py_func`` or a device function it calls names ``this_grid`` (grid groups)."""
    seen = set() if _seen is None else _seen
    if py_func in seen:
        return False
    seen.add(py_func)
    names = global_names(py_func.__code__)
    if "this_grid" in names:
        return True
    values = [py_func.__globals__.get(n) for n in names]
    values += [c.cell_contents for c in py_func.__closure__ or () if _filled(c)]
    for value in values:
        inner = device_py_func(value)
        if inner is not None and uses_grid_group(inner, seen):
            return True
    return False


def _filled(cell):
    try:
        cell.cell_contents  # noqa: B018 (reading an empty cell raises)
    except ValueError:
        return False
    return True


def _lanes(args):
    for arg in args:
        if isinstance(arg, (Dual, DualArray)):
            return arg.lanes
    return 0


def _fake_arg(arg, retr):
    """An argument as numba's simulator passes it (host arrays become simulated device arrays).

    Arrays of numbers reach the kernel as the numpy array inside the simulated device array
    (the same memory), so that they mix with DualArrays (``tile[0:4] = u[4:8]``); record
    arrays keep the simulator's wrapper (``a.field`` access).
    """
    from numba.cuda.simulator.args import ArgHint, InOut
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray, FakeWithinKernelCUDAArray

    if type(arg) is float:  # a float64 in the kernel, as numba.cuda types it (0.0 ** -1: inf)
        return np.float64(arg)
    if isinstance(arg, np.ndarray) and arg.ndim > 0:
        arg = InOut(arg).to_device(retr)
    elif isinstance(arg, ArgHint):
        arg = arg.to_device(retr)
    elif isinstance(arg, np.void):
        arg = FakeCUDAArray(arg)
    if isinstance(arg, FakeCUDAArray):
        if isinstance(arg._ary, np.ndarray) and arg._ary.dtype.fields is None:
            return arg._ary
        return FakeWithinKernelCUDAArray(arg)
    return arg


def run_launch(fn, griddim, blockdim, sharedmem, args, lanes, grid_group, name="kernel"):
    """Run ``fn`` (a copy made by :func:`_replacer`) for every thread of a launch."""
    from numba.cuda.errors import normalize_kernel_dimensions
    from numba.cuda.simulator import kernel as sim_kernel
    from numba.cuda.simulator.kernelapi import swapped_cuda_module

    grid_dim, block_dim = normalize_kernel_dimensions(griddim, blockdim)
    grid_dim, block_dim = tuple(grid_dim), tuple(block_dim)
    n_blocks = int(np.prod(grid_dim))
    whole_grid = grid_group and n_blocks > 1
    threads = n_blocks * int(np.prod(block_dim))
    if whole_grid and threads > MAX_GRID_THREADS:
        raise DualgpuError(
            f"kernel {name} synchronises its grid (cuda.cg.this_grid()), so the simulator runs "
            f"all {threads} threads of the launch at once, as OS threads; it allows at most "
            f"{MAX_GRID_THREADS}. Simulate a smaller grid (a grid-stride loop covers any size "
            "with fewer threads) or use the 'cpu' or 'cuda' backend."
        )
    module = LaunchModule(grid_dim, block_dim, sharedmem, lanes, whole_grid)
    retr = []
    fake_args = [_fake_arg(a, retr) for a in args]
    with sim_kernel._push_kernel_context(module), swapped_cuda_module(fn, module):
        run_groups(fn, fake_args, grid_dim, block_dim, whole_grid)
    for writeback in retr:
        writeback()


class SimulatorKernel:
    """A kernel prepared for the CUDA simulator (one copy per lane count, 0 for plain)."""

    def __init__(self, func, options=None):
        self.py_func = unwrap(func) or func
        self._copies = {}
        self._grid_group = None

    def copy(self, lanes):
        """The kernel function as the simulator runs it with ``lanes`` lanes (0: plain)."""
        if lanes not in self._copies:
            self._copies[lanes] = _simulated(self.py_func, lanes)
        return self._copies[lanes]

    @property
    def grid_group(self):
        """True when the kernel uses grid groups (its launches run the whole grid at once)."""
        if self._grid_group is None:
            self._grid_group = uses_grid_group(self.py_func)
        return self._grid_group

    def launch(self, griddim, blockdim, stream, sharedmem, args):
        lanes = _launch_lanes(args, self.py_func)
        with _LAUNCH_LOCK:
            run_launch(self.copy(lanes), griddim, blockdim, sharedmem, args, lanes,
                       self.grid_group, self.py_func.__name__)


def _launch_lanes(args, py_func):
    """The lane count of a launch: 0 plain, N first order; nested duals run as plain cuda."""
    lanes = lane_key(args, f"kernel {py_func.__qualname__!r}")
    if isinstance(lanes, tuple):
        if uses_dual_scratch(py_func):
            raise nested_local_array_error(f"kernel {py_func.__qualname__!r}", "cudasim")
        return 0  # nested duals are Python objects: no dual scratch, tiles or shuffles
    return lanes


def compile_kernel(func, **options):
    """Return a :class:`SimulatorKernel` for ``func``."""
    return SimulatorKernel(func, options)
