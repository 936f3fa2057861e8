"""The ``cuda`` backend: real numba.cuda kernels, with dual arguments marshalled in.

A kernel is compiled by numba.cuda from a copy of its function whose ``cuda``
refers to numba.cuda itself and whose dualgpu device functions are numba.cuda
device functions. The dispatcher gets one extension, :class:`DualArguments`,
which turns a DualArray into the tuple of its two arrays and a Dual into the
tuple of its value and lanes; numba's launcher flattens those tuples in the
order of the data model (see ``_numba_internals``). Plain arguments pass
through untouched, so a plain launch costs what numba.cuda's does.

A launch with dual arguments of N lanes uses a second dispatcher (one per N);
duals with more lanes than a tile (:func:`dualgpu.lanes.launch_tile`) run as
several launches of one tile each (:mod:`dualgpu.backends.gpu_tiles`).
If the kernel or a device function it calls uses ``cuda.local.array``, that
copy is compiled from rewritten source in which each call becomes
``_dg_local_array(shape, dtype, N)``: float scratch is then a dual local array
(two ``cuda.local.array`` buffers, values and ``(N,) + shape`` partials); the
shape must be a compile-time constant, as numba.cuda requires anyway.
"""
import ast

import numba.cuda.extending
from numba import types
from numba.core.errors import TypingError

from .._context import active_tile_lanes
from ..dual import Dual
from ..dualarray import DualArray
from ..errors import DualgpuError
from ..lanes import TILE_LANES, launch_tile
from ._local_array_types import literal_shape, scalar_dtype
from ._rebind import rebind
from ._translate import compile_function, device_py_func, function_source, is_cuda_module, unwrap
from .gpu_tiles import launch_tiles

__all__ = ["DualArguments", "GpuKernel", "compile_kernel", "marshal", "prepare_function"]

_DEVICE_CACHE = {}


def marshal(ty, val):
    """Return ``(type, value)`` numba.cuda's launcher understands for one kernel argument."""
    if isinstance(val, DualArray):
        return types.Tuple([ty.values_type, ty.partials_type]), (val.values, val.partials)
    if isinstance(val, Dual):
        return (
            types.Tuple([ty.dtype, ty.partials_type]),
            (float(val.value), tuple(float(p) for p in val.partials)),
        )
    return ty, val


class DualArguments:
    """numba.cuda dispatcher extension that marshals Dual and DualArray arguments."""

    def prepare_args(self, ty, val, stream=0, retr=None):
        return marshal(ty, val)


DUAL_ARGUMENTS = DualArguments()


# --- cuda.local.array in dual specialisations ---------------------------------------------

def _dg_local_array(shape, dtype, lanes):
    """``cuda.local.array(shape, dtype)``, a dual local array for floats when ``lanes`` > 0.

    Only callable inside CUDA kernels (the rewritten source of a dual specialisation).
    """
    raise DualgpuError("_dg_local_array is only usable inside kernels compiled for CUDA.")


@numba.cuda.extending.overload(_dg_local_array, prefer_literal=True)
def _ov_local_array(shape, dtype, lanes):
    from ..numba_arrays import make_dual_array

    if not isinstance(lanes, types.IntegerLiteral):
        raise TypingError("_dg_local_array: lanes must be a compile-time constant")
    constant = literal_shape(shape)
    element = scalar_dtype(dtype)
    if constant is None or element is None:
        raise TypingError(
            f"cuda.local.array(shape, dtype) in a dual kernel needs a constant int or tuple of "
            f"ints as shape and a numba type as dtype (e.g. cuda.local.array((3, 2), float64)); "
            f"got shape {shape} and dtype {dtype}."
        )
    n = lanes.literal_value
    namespace = {"cuda": numba.cuda, "make": make_dual_array, "SHAPE": constant,
                 "PSHAPE": (n,) + constant, "DT": element, "N": n}
    if n and isinstance(element, types.Float):
        body = "    return make(cuda.local.array(SHAPE, DT), cuda.local.array(PSHAPE, DT), N)\n"
    else:
        body = "    return cuda.local.array(SHAPE, DT)\n"
    exec("def impl(shape, dtype, lanes):\n" + body, namespace)
    return namespace["impl"]


class _LocalArrayRewriter(ast.NodeTransformer):
    """Turn ``cuda.local.array(shape, dtype)`` into ``_dg_local_array(shape, dtype, N)``."""

    def __init__(self, py_func, lanes):
        self.globals = py_func.__globals__
        self.lanes = lanes
        self.count = 0

    def _is_local_array(self, func):
        return (
            isinstance(func, ast.Attribute) and func.attr == "array"
            and isinstance(func.value, ast.Attribute) and func.value.attr == "local"
            and isinstance(func.value.value, ast.Name)
            and is_cuda_module(self.globals.get(func.value.value.id))
        )

    def visit_Call(self, node):
        self.generic_visit(node)
        if not self._is_local_array(node.func):
            return node
        arguments = dict(zip(("shape", "dtype"), node.args))
        arguments.update({kw.arg: kw.value for kw in node.keywords})
        if set(arguments) != {"shape", "dtype"}:
            raise DualgpuError(
                f"{ast.unparse(node)}: in a dual kernel write cuda.local.array(shape, dtype) "
                "with a constant shape and a numba dtype (no other arguments)."
            )
        self.count += 1
        return ast.Call(
            func=ast.Name("_dg_local_array", ast.Load()),
            args=[arguments["shape"], arguments["dtype"], ast.Constant(self.lanes)],
            keywords=[],
        )


def _uses_local_array(py_func):
    return "local" in py_func.__code__.co_names and any(
        is_cuda_module(py_func.__globals__.get(name)) for name in py_func.__code__.co_names
    )


def _dual_source_copy(py_func, lanes, replace):
    """A copy of ``py_func`` whose local arrays are dual with ``lanes`` lanes."""
    source = function_source(py_func, "kernel or device function", "cuda")
    rewriter = _LocalArrayRewriter(py_func, lanes)
    tree = rewriter.visit(source.tree)
    if not rewriter.count:
        return rebind(py_func, replace)
    new_globals = dict(py_func.__globals__)
    for name, value in list(new_globals.items()):
        new_globals[name] = replace(value) if not name.startswith("__") else value
    for name, cell in zip(py_func.__code__.co_freevars, py_func.__closure__ or ()):
        new_globals[name] = replace(cell.cell_contents)  # closure values become globals
    new_globals["_dg_local_array"] = _dg_local_array
    copy = compile_function(tree, new_globals, source.filename)
    copy.__wrapped__ = py_func
    return copy


def _replacer(lanes):
    """Global replacement for the plain specialisation (0) or the dual one with ``lanes``."""

    def replace(value):
        import numba.cuda

        if is_cuda_module(value):
            return numba.cuda
        if getattr(value, "__dualgpu_device__", False) is True:
            py_func = device_py_func(value)
            if py_func is not None:
                return _device(py_func, getattr(value, "options", {}), lanes)
        return value

    return replace


_replace = _replacer(0)


def _prepare(py_func, lanes):
    replace = _replacer(lanes)
    if lanes and _uses_local_array(py_func):
        return _dual_source_copy(py_func, lanes, replace)
    return rebind(py_func, replace)


def _device(py_func, options, lanes=0):
    import numba.cuda

    key = (py_func, lanes)
    if key not in _DEVICE_CACHE:
        _DEVICE_CACHE[key] = numba.cuda.jit(device=True, **options)(_prepare(py_func, lanes))
    return _DEVICE_CACHE[key]


def prepare_function(func, lanes=0):
    """The function numba.cuda compiles for ``func``: globals rebound as above.

    With ``lanes`` > 0, the copy for dual arguments with that many lanes (dual
    ``cuda.local.array`` scratch); 0 gives the copy for plain arguments.
    """
    return _prepare(unwrap(func) or func, int(lanes))


class GpuKernel:
    """A numba.cuda kernel that also accepts dual arguments."""

    def __init__(self, func, options=None):
        options = dict(options or {})
        options.pop("device", None)
        # the user's own extensions run first, then ours marshals any duals left
        options["extensions"] = [DUAL_ARGUMENTS] + [
            e for e in options.get("extensions") or () if e is not DUAL_ARGUMENTS
        ]
        self.py_func = unwrap(func) or func
        self.options = options
        self._dispatchers = {}
        self.dispatcher = self.dispatcher_for(0)

    def dispatcher_for(self, lanes):
        """The numba.cuda dispatcher for plain (0) or ``lanes``-lane dual arguments."""
        import numba.cuda

        if lanes not in self._dispatchers:
            self._dispatchers[lanes] = numba.cuda.jit(**self.options)(
                prepare_function(self.py_func, lanes)
            )
        return self._dispatchers[lanes]

    def launch(self, griddim, blockdim, stream, sharedmem, args):
        lanes = next((a.lanes for a in args if isinstance(a, (Dual, DualArray))), 0)
        tile = launch_tile(lanes, TILE_LANES["cuda"], active_tile_lanes()) if lanes else 0
        if tile == lanes:
            self.dispatcher_for(lanes)[griddim, blockdim, stream, sharedmem](*args)
            return
        # more lanes than one kernel holds: tiles of ``tile`` lanes (see gpu_tiles)
        launcher = self.dispatcher_for(tile)[griddim, blockdim, stream, sharedmem]
        launch_tiles(lambda views: launcher(*views), self.py_func, args, lanes // tile, tile,
                     stream)


def compile_kernel(func, **options):
    """Return a :class:`GpuKernel` for ``func``."""
    return GpuKernel(func, options)
