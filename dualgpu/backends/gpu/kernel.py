"""The ``cuda`` backend: real numba.cuda kernels, with dual arguments marshalled in.

A kernel is compiled by numba.cuda from a copy of its function whose ``cuda``
refers to numba.cuda itself and whose dualgpu device functions are numba.cuda
device functions. The dispatcher gets one extension, :class:`DualArguments`,
which turns a DualArray into the tuple of its two arrays and a Dual into the
tuple of its value and lanes; numba's launcher flattens those tuples in the
order of the data model (see ``_numba_internals``). Plain arguments pass
through untouched, so a plain launch costs what numba.cuda's does.

A launch with dual arguments of N lanes uses a second dispatcher (one per N);
duals with more lanes than a tile (:func:`dualgpu.core.lanes.launch_tile`) run all
their tiles in one launch with a third grid dimension over the tiles when the
tiles cannot disturb one another (:mod:`dualgpu.backends.gpu.tile_grid`), else
as several launches of one tile each (:mod:`dualgpu.backends.common.tiles`).
If the kernel or a device function it calls uses ``cuda.local.array``,
``cuda.shared.array`` or a warp shuffle, that copy is compiled from rewritten
source in which each call becomes ``_dg_local_array(shape, dtype, N)``,
``_dg_shared_array(shape, dtype, N, site)`` or a dual-aware shuffle: float
scratch and tiles are then dual arrays (values and ``(N,) + shape`` partials, in
local or shared memory; see :mod:`dualgpu.backends.gpu.shared`); the shape must
be a compile-time constant, as numba.cuda requires anyway. A dual launch asks for
``(1 + N)`` times the dynamic shared memory given (rounded up to 8 bytes).
Grid-wide sync (``cuda.cg.this_grid()``) is numba's own: numba marks such a
kernel cooperative and launches it so.
"""
import ast

import numba.cuda.extending
from numba import types
from numba.core.errors import TypingError

from dualgpu.core._context import active_tile_lanes
from dualgpu.core.dual import Dual
from dualgpu.core.dualarray import DualArray
from dualgpu.errors import DualgpuError
from dualgpu.core.lanes import TILE_LANES, launch_tile
from dualgpu.backends.common.local_array_types import literal_shape, scalar_dtype
from dualgpu.backends.gpu.shared import (
    DUAL_DTYPES, SHUFFLE_FUNCTIONS, STATIC_SHARED_LIMIT, SharedSite,
    _dg_dynamic_shared, _dg_region_length, _dg_shared_array, check_static_shared,
    dynamic_request, shared_sites, site_shape_and_dtype,
)
from dualgpu.backends.gpu.dual_ops import (
    ATOMIC_FUNCTIONS, DUAL_OP_NAMES, dual_cbrt, dual_fma, dual_selp)
from dualgpu.backends.common.rebind import (
    SHUFFLES, frozen_values, global_names, rebind, uses_dual_scratch,
)
from dualgpu.backends.common.translate import (
    Namespace, compile_function, device_py_func, function_source, is_cuda_module, unwrap,
)
from dualgpu.backends.common.plans import compile_plan
from dualgpu.backends.gpu import tile_grid
from dualgpu.backends.common.tiles import launch_tiles, tile_views
from dualgpu.compiled.arrays import make_dual_array
from dualgpu.core.nested import lane_key, nested_local_array_error
from dualgpu.backends.cudasim.kernel import uses_grid_group

__all__ = ["DualArguments", "GpuKernel", "compile_kernel", "marshal", "prepare_function"]

_DEVICE_CACHE = {}
_PREPARING = set()  # (function, lanes) whose device copy is being made (recursion)


def marshal(ty, val):
    """Return ``(type, value)`` numba.cuda's launcher understands for one kernel argument."""
    if isinstance(val, DualArray):
        return _tuple_type(ty, "values_type"), (val.values, val.partials)
    if isinstance(val, Dual) and isinstance(val.value, Dual):
        # nested: numba's launcher calls this again on the inner duals of the tuple
        return _tuple_type(ty, "value_type"), (val.value, tuple(val.partials))
    if isinstance(val, Dual):
        return (
            _tuple_type(ty, "value_type" if val.tag else "dtype"),
            (float(val.value), tuple(float(p) for p in val.partials)),
        )
    return ty, val


#: (dual type, member) -> the Tuple type a dual argument is passed as: made once (building a
#: numba Tuple type at every launch cost about half of a dual launch's 100 us of Python)
_TUPLE_TYPES = {}


def _tuple_type(ty, first):
    found = _TUPLE_TYPES.get((ty, first))
    if found is None:
        found = _TUPLE_TYPES[(ty, first)] = types.Tuple([getattr(ty, first), ty.partials_type])
    return found


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


class _DualSourceRewriter(ast.NodeTransformer):
    """Rewrite the block-level calls of a dual specialisation's source.

    ``cuda.local.array(shape, dtype)`` -> ``_dg_local_array(shape, dtype, N)``,
    ``cuda.shared.array(shape, dtype)`` -> ``_dg_shared_array(shape, dtype, N, site)``
    and ``cuda.shfl_*_sync(...)`` -> the dual-aware shuffles, however ``cuda`` is
    spelled (``cuda.``, ``numba.cuda.``, ``from numba.cuda import shared``).
    """

    def __init__(self, py_func, tree, filename, lanes):
        self.namespace = Namespace(py_func, tree)
        self.where = f"{py_func.__qualname__} ({filename}"
        self.lanes = lanes
        self.count = 0
        self.sites = []

    def _arguments(self, node, what):
        arguments = dict(zip(("shape", "dtype"), node.args))
        arguments.update({kw.arg: kw.value for kw in node.keywords})
        if set(arguments) != {"shape", "dtype"}:
            raise DualgpuError(
                f"{ast.unparse(node)} (line {node.lineno}): in a dual kernel write "
                f"cuda.{what}.array(shape, dtype) with a constant shape and a numba dtype "
                "(no other arguments)."
            )
        return arguments

    def visit_Expr(self, node):
        # an atomic whose result is discarded: its dual version needs no old value
        if isinstance(node.value, ast.Call):
            node.value._dg_discarded = True
        return self.generic_visit(node)

    def visit_Call(self, node):
        discarded = getattr(node, "_dg_discarded", False)
        self.generic_visit(node)
        path = self.namespace.cuda_path(node.func)
        if path in (("fma",), ("selp",), ("cbrt",)):
            self.count += 1
            return ast.Call(ast.Name(f"_dg_{path[0]}", ast.Load()), node.args, node.keywords)
        if path is not None and len(path) == 2 and path[0] == "atomic" and not node.keywords:
            if path[1] in ATOMIC_FUNCTIONS:
                self.count += 1
                return ast.Call(ast.Name(f"_dg_atomic_{path[1]}", ast.Load()),
                                node.args + [ast.Constant(discarded)], [])
        if path == ("local", "array"):
            arguments = self._arguments(node, "local")
            shape, dtype = site_shape_and_dtype(arguments["shape"], arguments["dtype"],
                                                self.namespace)
            if dtype is not None and dtype not in DUAL_DTYPES:
                return node  # integer scratch stays plain
            self.count += 1
            return ast.Call(ast.Name("_dg_local_array", ast.Load()),
                            [_shape_node(shape, arguments["shape"]), arguments["dtype"],
                             ast.Constant(self.lanes)], [])
        if path == ("shared", "array"):
            arguments = self._arguments(node, "shared")
            text = ast.unparse(node)
            label = f"`{text}` at {self.where} line {node.lineno})"
            site = f"{node.lineno}:{node.col_offset}|{label}"
            shape, dtype = site_shape_and_dtype(arguments["shape"], arguments["dtype"],
                                                self.namespace)
            self.sites.append(SharedSite(label, text, shape, dtype))
            if shape == (0,):
                self.count += 1
                if dtype is not None and dtype not in DUAL_DTYPES:  # buffer[:first region]
                    length = ast.Call(ast.Name("_dg_region_length", ast.Load()),
                                      [node, ast.Constant(self.lanes)], [])
                    return ast.Subscript(node, ast.Slice(upper=length), ast.Load())
                return ast.Call(ast.Name("_dg_dynamic_shared", ast.Load()),
                                [node, ast.Constant(self.lanes)], [])
            if dtype is not None and dtype not in DUAL_DTYPES:
                return node  # an integer (or float16) tile stays plain
            self.count += 1
            return ast.Call(ast.Name("_dg_shared_array", ast.Load()),
                            [_shape_node(shape, arguments["shape"]), arguments["dtype"],
                             ast.Constant(self.lanes), ast.Constant(site)], [])
        if path is not None and len(path) == 1 and path[0] in SHUFFLES:
            self.count += 1
            return ast.Call(ast.Name(f"_dg_{path[0]}", ast.Load()), node.args, node.keywords)
        return node


def _shape_node(shape, node):
    """The shape as a constant (numba types it as literals) when the source makes it one."""
    if shape is None:
        return node
    return ast.Constant(shape[0] if len(shape) == 1 and not isinstance(node, ast.Tuple) else shape)


#: True when the dual source copy may need rewriting (local/shared arrays, shuffles)
_needs_rewrite = uses_dual_scratch


def _needs_dual_rewrite(py_func):
    """True when a dual specialisation may need rewriting: scratch, shuffles, fma, selp, atomics."""
    return uses_dual_scratch(py_func) or bool(DUAL_OP_NAMES & global_names(py_func.__code__))


def _dual_source_copy(py_func, lanes, replace):
    """A copy of ``py_func`` whose local and shared arrays and shuffles are dual with ``lanes``."""
    source = function_source(py_func, "kernel or device function", "cuda")
    rewriter = _DualSourceRewriter(py_func, source.tree, source.filename, lanes)
    tree = rewriter.visit(source.tree)
    if not rewriter.count:
        return rebind(py_func, replace)
    frozen, cells = frozen_values(py_func)  # the values of the plain copy (numba's rule)
    new_globals = {**py_func.__globals__, **frozen}
    # the names it reads only, as rebind does (replacing every global of its module made a
    # device function that is rewritten too replace itself, and recurse without end)
    for name in global_names(py_func.__code__):
        if name in new_globals and not name.startswith("__"):
            new_globals[name] = replace(new_globals[name])
    for name, cell, value in zip(py_func.__code__.co_freevars, py_func.__closure__ or (), cells):
        # closure values become globals
        new_globals[name] = replace(cell.cell_contents if value is cell else value)
    new_globals["_dg_local_array"] = _dg_local_array
    new_globals["_dg_shared_array"] = _dg_shared_array
    new_globals["_dg_dynamic_shared"] = _dg_dynamic_shared
    new_globals["_dg_region_length"] = _dg_region_length
    new_globals.update({f"_dg_{name}": fn for name, fn in SHUFFLE_FUNCTIONS.items()})
    new_globals.update({f"_dg_atomic_{op}": fn for op, fn in ATOMIC_FUNCTIONS.items()})
    new_globals.update(_dg_fma=dual_fma, _dg_selp=dual_selp, _dg_cbrt=dual_cbrt)
    copy = compile_function(tree, new_globals, source.filename)
    copy.__wrapped__ = py_func
    copy.__dualgpu_shared__ = rewriter.sites
    return copy


def _replacer(lanes):
    """Global replacement for the plain specialisation (0) or the dual one with ``lanes``."""

    def replace(value):
        import numba.cuda

        if is_cuda_module(value):
            return numba.cuda
        if getattr(value, "__dualgpu_foreign__", False) is True:  # cuda.declare_device
            return value.declared
        if getattr(value, "__dualgpu_device__", False) is True:
            py_func = device_py_func(value)
            if py_func is not None:
                return _device(py_func, getattr(value, "options", {}), lanes)
        return value

    return replace


_replace = _replacer(0)


def _prepare(py_func, lanes):
    if isinstance(lanes, tuple) and _needs_rewrite(py_func):
        raise nested_local_array_error(f"{py_func.__qualname__!r}", "cuda")
    replace = _replacer(lanes)
    if lanes and not isinstance(lanes, tuple) and _needs_dual_rewrite(py_func):
        return _dual_source_copy(py_func, lanes, replace)
    return rebind(py_func, replace)


def _device(py_func, options, lanes=0):
    import numba.cuda

    key = (py_func, lanes)
    found = _DEVICE_CACHE.get(key)
    if found is None:
        if key in _PREPARING:
            raise DualgpuError(
                f"device function {py_func.__qualname__!r} calls itself (directly or through "
                "other device functions): the cuda backend compiles a copy of each device "
                "function for its kernel (plain or dual), which dualgpu cannot make for a "
                "recursive one. Fix: write the recursion as a loop.")
        _PREPARING.add(key)
        try:
            found = _DEVICE_CACHE[key] = numba.cuda.jit(device=True, **options)(
                _prepare(py_func, lanes))
        finally:
            _PREPARING.discard(key)
    return found


def _device_functions(py_func):
    """The dualgpu device functions ``py_func`` names (globals and closure)."""
    values = [py_func.__globals__.get(n) for n in global_names(py_func.__code__)]
    for cell in py_func.__closure__ or ():
        try:
            values.append(cell.cell_contents)
        except ValueError:
            pass
    found = []
    for value in values:
        if getattr(value, "__dualgpu_device__", False) is True:
            inner = device_py_func(value)
            if inner is not None:
                found.append(inner)
    return found


def _all_shared_sites(py_func, copy, lanes, seen=None):
    """The shared-array sites of a prepared copy and of the device functions it calls."""
    seen = set() if seen is None else seen
    seen.add(py_func)
    sites = shared_sites(copy)
    for inner in _device_functions(py_func):
        device = _DEVICE_CACHE.get((inner, lanes))
        if inner not in seen and device is not None:
            sites += _all_shared_sites(inner, device.py_func, lanes, seen)
    return sites


def prepare_function(func, lanes=0):
    """The function numba.cuda compiles for ``func``: globals rebound as above.

    With ``lanes`` > 0, the copy for dual arguments with that many lanes (dual
    ``cuda.local.array`` scratch and ``cuda.shared.array`` tiles, dual shuffles); 0
    gives the copy for plain arguments.

    Raises
    ------
    DualgpuError
        If the dual tiles of the kernel and its device functions need more than the
        48 KB of static shared memory a block may have at ``lanes`` lanes.
    """
    py_func = unwrap(func) or func
    # a tuple: the lane structure of a launch with nested duals (dualgpu.core.nested.lane_key)
    lanes = lanes if isinstance(lanes, tuple) else int(lanes)
    copy = _prepare(py_func, lanes)
    if lanes and not isinstance(lanes, tuple):
        check_static_shared(py_func.__qualname__, _all_shared_sites(py_func, copy, lanes), lanes)
    return copy


def _compiled(dispatcher, args):
    """numba's compiled kernel for these arguments (compiled now if need be; GPU only)."""
    return dispatcher.compile(tuple(dispatcher.typeof_pyval(a) for a in args))


def _check_cooperative_grid(dispatcher, args, griddim, blockdim, sharedmem, name, lanes):
    """A grid-sync (cooperative) launch must have all its blocks resident at once (GPU only).

    A dual kernel uses more registers than the plain one, so fewer of its blocks fit on
    the GPU: refuse a grid that no longer does, saying how to fix it, rather than let the
    driver fail with CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE.
    """
    import math

    kernel = _compiled(dispatcher, args)
    limit = kernel.max_cooperative_grid_blocks(blockdim, sharedmem)
    blocks = math.prod(griddim)
    if blocks > limit:
        raise DualgpuError(
            f"kernel {name} synchronises its grid (cuda.cg.this_grid()), so all its blocks must "
            f"be resident at once; with {lanes} lane(s) this GPU holds at most {limit} blocks of "
            f"{math.prod(blockdim)} threads, and the launch has {blocks}. Use a smaller "
            "chunk_size (fewer lanes need fewer registers) or fewer blocks with a grid-stride "
            "loop."
        )


def _allow_dynamic_shared(dispatcher, args, nbytes, name, lanes, asked):
    """Let a compiled kernel use ``nbytes`` (> 48 KB) of dynamic shared memory (GPU only).

    CUDA needs an opt-in per function above 48 KB; the dual launch asks (1 + N) times the
    user's bytes, so a launch that fitted plain may need it. Raises a clear error above
    what the device allows.
    """
    from numba.cuda.cudadrv import driver

    kernel = _compiled(dispatcher, args)
    cufunc = kernel._codelibrary.get_cufunc()
    device = cufunc.device
    limit = device.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN - cufunc.attrs.shared
    if nbytes > limit:
        fit = limit // (-(-asked // 8) * 8) - 1
        raise DualgpuError(
            f"kernel {name}: a dual launch with {lanes} lane(s) asks for {nbytes} bytes of "
            f"dynamic shared memory ({asked} bytes of values, once more per lane), more than "
            f"the {limit} bytes this device gives a block. Use chunk_size={max(fit, 1)} or "
            "less, or less dynamic shared memory per block."
        )
    attribute = driver.binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    driver.driver.cuKernelSetAttribute(attribute, nbytes, cufunc.handle, device.id)


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
        self._tile_dispatchers = {}
        self._grid_group = None
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
        lanes = lane_key(args, f"kernel {self.py_func.__qualname__!r}")
        if isinstance(lanes, tuple):  # nested duals: no tiles, no dual scratch
            if _needs_rewrite(self.py_func):
                raise nested_local_array_error(f"kernel {self.py_func.__qualname__!r}", "cuda")
            self.dispatcher_for(lanes)[griddim, blockdim, stream, sharedmem](*args)
            return
        tile = launch_tile(lanes, TILE_LANES["cuda"], active_tile_lanes()) if lanes else 0
        dispatcher = self.dispatcher_for(tile)
        probe = args if tile == lanes else tile_views(args, 0, tile)  # what one launch gets
        if tile and sharedmem:
            asked, sharedmem = sharedmem, dynamic_request(sharedmem, tile)
            if sharedmem > STATIC_SHARED_LIMIT:
                _allow_dynamic_shared(dispatcher, probe, sharedmem, self.py_func.__name__,
                                      tile, asked)
        if tile and self.grid_group:
            _check_cooperative_grid(dispatcher, probe, griddim, blockdim, sharedmem,
                                    self.py_func.__name__, tile)
        if tile == lanes:
            dispatcher[griddim, blockdim, stream, sharedmem](*args)
            return
        # more lanes than one kernel holds: tiles of ``tile`` lanes, all in one launch when
        # they cannot disturb one another (gpu_tile_grid), else one launch each (gpu_tiles)
        tiles = lanes // tile
        grid = tile_grid.plan(self, args, griddim, tiles, sharedmem, STATIC_SHARED_LIMIT)
        if grid is not None:
            wrapper = self.tiles_dispatcher(tile_grid.dual_mask(args), tile)
            wrapper[grid, blockdim, stream, sharedmem](*tile_grid.flat_arguments(args))
            tile_grid.LAUNCHES["one"] += 1
            return
        tile_grid.LAUNCHES["per_tile"] += 1
        launcher = dispatcher[griddim, blockdim, stream, sharedmem]
        launch_tiles(lambda views: launcher(*views), self.py_func, args, tiles, tile, stream)

    def plan(self, griddim, blockdim, args, sharedmem=0, prologue="", failed=None,
             namespace=None):
        """A launch plan (see :mod:`dualgpu.porting.launch_plan`) for launches like the last
        one, or None: ``plan(args, stream)`` calls the numba.cuda dispatcher chosen for
        these kinds of arguments directly (no lane count, tile or dispatcher lookup per
        launch; numba.cuda still types and marshals the arguments). Only for launches that
        run in one kernel launch with nothing to set up first: plain ones, and dual ones
        whose lanes fit one tile, without dynamic shared memory or a grid sync."""
        lanes = lane_key(args, f"kernel {self.py_func.__qualname__!r}")
        if isinstance(lanes, tuple):
            return None
        if lanes:
            tile = launch_tile(lanes, TILE_LANES["cuda"], active_tile_lanes())
            if tile != lanes or sharedmem or self.grid_group:
                return None
        namespace = dict(namespace or {})
        namespace["configured"] = self.dispatcher_for(lanes)[griddim, blockdim, 0, sharedmem]
        namespace["dispatcher"] = self.dispatcher_for(lanes)
        body = ("    if stream:\n"
                f"        dispatcher[{tuple(griddim)}, {tuple(blockdim)}, stream, {sharedmem}]"
                "(*args)\n"
                "    else:\n"
                "        configured(*args)\n")
        return compile_plan("", "", body, namespace, self.py_func.__qualname__, prologue,
                            failed)

    def tiles_dispatcher(self, mask, tile):
        """The numba.cuda kernel running every lane tile of a launch at once (gpu_tile_grid)."""
        import numba.cuda

        key = (mask, tile)
        if key not in self._tile_dispatchers:
            self.dispatcher_for(tile)  # checks the dual tiles' static shared memory
            body = _device(self.py_func, _device_options(self.options), tile)
            wrapper = tile_grid.tiles_kernel(body, mask, tile, numba.cuda,
                                             name=f"_dg_tiles_{self.py_func.__name__}")
            # compiled in memory: numba's cache=True needs a source file, the wrapper has none
            options = {k: v for k, v in self.options.items() if k != "cache"}
            self._tile_dispatchers[key] = numba.cuda.jit(**options)(wrapper)
        return self._tile_dispatchers[key]

    @property
    def grid_group(self):
        """True when the kernel (or a device function it calls) uses ``cuda.cg.this_grid()``."""
        if self._grid_group is None:
            self._grid_group = uses_grid_group(self.py_func)
        return self._grid_group


_DEVICE_OPTIONS = ("fastmath", "debug", "opt", "lineinfo")


def _device_options(options):
    """The options of a kernel that its body keeps when compiled as a device function."""
    return {k: v for k, v in options.items() if k in _DEVICE_OPTIONS}


def compile_kernel(func, **options):
    """Return a :class:`GpuKernel` for ``func``."""
    return GpuKernel(func, options)
