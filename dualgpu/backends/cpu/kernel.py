"""The compiled CPU backend: run an unchanged numba.cuda kernel with numba on the CPU.

How it works
------------
The kernel's Python source is rewritten (see :mod:`dualgpu.backends.common.translate`)
into a *thread function*: ``cuda.grid``, ``cuda.gridsize``, ``cuda.threadIdx.x``,
``cuda.blockIdx.y`` ... become expressions in fifteen extra parameters (global
index, thread index, block index, block size, grid size; x/y/z each). A
generated *launcher* with the kernel's own parameter names, compiled with
``numba.njit``, runs the thread function once per CUDA thread:

- kernels that only use ``cuda.grid``/``cuda.gridsize`` get "flat" launchers
  that loop over the global index directly, innermost over the axis that the
  kernel's last array index uses (``i, j = cuda.grid(2)``; ``u[i, j]``: y), so
  LLVM can vectorise the loop;
- 1-D kernels that start with a bounds guard (``i = cuda.grid(1)``,
  ``n = u.shape[0]``, then ``if i < n: <body>`` or ``if i >= n: return``)
  get "bounded" launchers: the bound is computed once per launch and the
  thread function, without the guard, runs for ``min(threads, n)`` indices.
  A guard inside the loop made LLVM emit masked vector loads and stores, up
  to 2.5x slower at some relative buffer alignments. Only integer bounds made
  of parameters and array sizes qualify (see :func:`_find_guard`);
- kernels that read ``threadIdx``/``blockIdx``/``laneid`` loop over blocks,
  then over the threads of each block;
- launches whose measured cost is large enough run on several cores
  (:mod:`dualgpu.backends.cpu.parallel`); kernels with atomics always run
  serially, so their results are exact. No launcher divides per thread;
- a dual launch with more lanes than the kernel's tile size (the driver
  seeds many directions at once) runs the lane tiles inside one compiled call
  (:mod:`dualgpu.backends.cpu.launchers`).

The thread function is compiled without numba's reference counting (NRT) and
marked for LLVM to inline into the launcher's loop; a kernel that turns out to
allocate is recompiled with NRT once. Device functions (numba.cuda ones with
``device=True``, or objects flagged ``__dualgpu_device__``) are translated the
same way, cached per function object, and inlined. ``cuda.local.array``
becomes ``_dg_local_array(shape, dtype, _dg_lanes)``: a stack array in plain
runs, a DualArray (``dualgpu.compiled.arrays.empty_dual_array``) for float scratch
in dual runs. Arguments are passed to the launcher unchanged, so duals work
wherever numba can type them; the lane count is read from the arguments'
``.lanes`` and each lane count gets its own compiled translation.

Kernels that need the threads of a block to cooperate (``cuda.shared.array``,
``cuda.syncthreads`` and its ``_count/_and/_or`` forms, ``cuda.syncwarp``, the
warp shuffles, votes and matches, ``cuda.cg.this_grid().sync()``), directly or
in a device function they call, take another path: :mod:`dualgpu.backends.cpu.blocks`
cuts them at every barrier into regions that loop over the threads of a block
(of the grid for grid sync), inlining the device functions that synchronise.
Here the rewriter only turns those calls into markers and :meth:`CpuKernel.launch`
hands such kernels to a :class:`~dualgpu.backends.cpu.blocks.launch.BlockLauncher`.
Constant memory other than ``cuda.const.array_like(host_array)`` is refused by
:func:`compile_kernel` with a message that says so.

Examples
--------
A kernel's source must live in a file; here one of the example simulations:

>>> import numpy as np
>>> from dualgpu.backends.cpu.kernel import compile_kernel
>>> from simulations.heat1d import step_periodic
>>> k = compile_kernel(step_periodic)
>>> u, u_new = np.arange(8.0), np.zeros(8)
>>> k.launch(1, 8, (u, u_new, 0.25))
>>> u_new[:3].tolist()
[2.0, 1.0, 2.0]
"""
import ast
import copy
import time

import numba
import numpy as np
from numba import njit, types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.extending import intrinsic, overload
from numba.np import numpy_support
from numba.np.arrayobj import populate_array

from dualgpu.core import float_to_int as _float_to_int
from dualgpu.core import int_power as _int_power
from dualgpu.errors import DualgpuError
from dualgpu.core._context import active_tile_lanes
from dualgpu.core.lanes import TILE_LANES, launch_tile
from dualgpu.backends.cpu import llvm as _llvm
from dualgpu.backends.common import translate as _translate
from dualgpu.backends.cpu import cache as cpu_cache
from dualgpu.backends.cpu import parallel as cpu_parallel
from dualgpu.backends.cpu.fused import cpu_fma
from dualgpu.backends.common.local_array_types import literal_shape, scalar_dtype
from dualgpu.backends.common.translate import CudaRewriter, Namespace, dotted
from dualgpu.backends.cpu.blocks import markers as _block_markers
from dualgpu.backends.cpu.blocks import runtime as _blocks_runtime
from dualgpu.backends.cpu.launchers import CONTEXT, LaunchSpec, flatten, make_launcher
from dualgpu.backends.cpu.tiles import LaneTiles, dual_kind, values_of
from dualgpu.backends.common.tiles import launch_tiles

__all__ = ["CpuKernel", "compile_kernel", "BACKEND", "DEFAULT_TILE_LANES"]

BACKEND = "cpu"

_llvm.tune()  # let LLVM vectorise loops over many lane rows (see _llvm)

#: Lanes per tile of a dual launch when neither the driver nor the kernel says
#: otherwise (see :attr:`CpuKernel.tile_lanes` and :mod:`dualgpu.core.lanes`).
DEFAULT_TILE_LANES = TILE_LANES[BACKEND]

#: CUDA's limit on the number of threads in one block.
MAX_THREADS_PER_BLOCK = 1024

WARP_SIZE = 32

_INDEX_PREFIX = {
    "threadIdx": "_dg_t", "blockIdx": "_dg_b", "blockDim": "_dg_bd", "gridDim": "_dg_gd",
}
_AXES = ("x", "y", "z")

#: Features used in a form this backend does not run: rejected with their name.
UNSUPPORTED = {
    "const": "constant memory (other than cuda.const.array_like(host_array))",
    "cg": "cooperative groups (other than cuda.cg.this_grid() and grid.sync())",
}

ATOMIC_OPS = (
    "add", "sub", "max", "min", "nanmax", "nanmin", "and_", "or_", "xor",
    "exch", "inc", "dec", "cas", "compare_and_swap",
)

_FENCES = ("threadfence", "threadfence_block", "threadfence_system")


def _fix_hint(feature):
    return (
        f"Run this kernel on the 'cuda' backend (a GPU) or the 'cudasim' backend (the CUDA "
        f"simulator), or rewrite it without {feature}."
    )


# ---------------------------------------------------------------------------
# Runtime helpers that the rewritten source calls
# ---------------------------------------------------------------------------
def _dg_local_array(shape, dtype, lanes):
    """Return scratch like ``cuda.local.array`` (a DualArray when lanes > 0 and dtype is float).

    ``lanes`` must be a compile-time constant: 0 for a plain run; N for a dual
    run, where float scratch becomes a dual array with N partials (from
    ``dualgpu.compiled.arrays.empty_dual_array``; integer scratch stays plain).
    In compiled code plain scratch lives on the stack, as on a GPU, so it needs
    a compile-time constant shape (numba.cuda requires one too).
    """
    if isinstance(dtype, types.Type):
        dtype = numpy_support.as_dtype(dtype)
    dtype = np.dtype(dtype)
    if lanes and dtype.kind == "f":
        return _empty_dual_array()(shape, dtype, lanes)
    return np.empty(shape, dtype)


def _empty_dual_array():
    try:
        from dualgpu.compiled.arrays import empty_dual_array
    except ImportError as exc:
        raise DualgpuError(
            "cuda.local.array in a dual run needs dualgpu.compiled.arrays.empty_dual_array, "
            f"which could not be imported ({exc})."
        ) from None
    return empty_dual_array


@intrinsic(prefer_literal=True)
def _dg_stack_array(typingctx, shape, dtype, lanes):
    """``cuda.local.array`` for plain runs: a C-ordered array on the caller's stack.

    Like CUDA's local memory it needs a compile-time constant shape and lives
    until the function returns; it has no meminfo, so it works without NRT.
    ``lanes`` is ignored (it is 0: this is bound as ``_dg_local_array`` only in
    plain builds).
    """
    dims = literal_shape(shape)
    element = scalar_dtype(dtype)
    if element is None:
        raise TypingError(
            f"cuda.local.array: dtype must be a numba or numpy scalar type; got {dtype}."
        )
    if dims is None or min(dims, default=1) < 0:
        raise TypingError(
            "cuda.local.array: the shape must be a compile-time constant int or tuple of ints "
            "(a literal, or a module-level or closure constant), as numba.cuda requires; got "
            f"{shape}."
        )
    array_type = types.Array(element, len(dims), "C")

    def codegen(context, builder, signature, args):
        data_type = context.get_data_type(element)
        itemsize = context.get_abi_sizeof(data_type)
        count = int(np.prod(dims)) if dims else 1
        size = context.get_constant(types.intp, max(count, 1))
        data = cgutils.alloca_once(builder, data_type, size=size)
        strides, step = [], itemsize
        for d in reversed(dims):
            strides.insert(0, step)
            step *= d
        array = context.make_array(array_type)(context, builder)
        intp = lambda v: context.get_constant(types.intp, v)  # noqa: E731
        populate_array(
            array, data=data, shape=[intp(d) for d in dims], strides=[intp(v) for v in strides],
            itemsize=intp(itemsize), meminfo=None,
        )
        return array._getvalue()

    return array_type(shape, dtype, lanes), codegen


def _local_array_lanes(dtype, lanes):
    """(lanes, True for a float element): the checks shared by the local-array overloads."""
    if not isinstance(lanes, types.IntegerLiteral):
        raise TypingError("_dg_local_array: lanes must be a compile-time integer constant")
    element = scalar_dtype(dtype)
    if element is None:
        raise TypingError(
            f"cuda.local.array: dtype must be a numba or numpy scalar type; got {dtype}."
        )
    return lanes.literal_value, isinstance(element, types.Float)


@overload(_dg_local_array, prefer_literal=True, jit_options={"inline": "always"})
def _ov_local_array(shape, dtype, lanes):
    n_lanes, is_float = _local_array_lanes(dtype, lanes)
    if n_lanes and is_float:
        empty_dual_array = _empty_dual_array()

        def dual_impl(shape, dtype, lanes):
            return empty_dual_array(shape, dtype, n_lanes)

        return dual_impl

    def plain_impl(shape, dtype, lanes):
        return np.empty(shape, dtype)

    return plain_impl


def _dg_tracer_local_array(shape, dtype, lanes):
    """``cuda.local.array`` in a sparsity-detection run: float scratch of tracer lanes.

    Bound as ``_dg_local_array`` when the launch's duals are structural tracers
    (uint64 dependency-bitset partials), so that the kernel can store tracers in
    its scratch as it stores tangent duals in a derivative run.
    """
    from dualgpu.core.dualarray import DualArray

    dtype = np.dtype(numpy_support.as_dtype(dtype) if isinstance(dtype, types.Type) else dtype)
    shape = (shape,) if np.ndim(shape) == 0 else tuple(shape)
    if lanes and dtype.kind == "f":
        return DualArray(np.empty(shape, dtype), np.zeros((lanes,) + shape, np.uint64))
    return np.empty(shape, dtype)


@overload(_dg_tracer_local_array, prefer_literal=True, jit_options={"inline": "always"})
def _ov_tracer_local_array(shape, dtype, lanes):
    n_lanes, is_float = _local_array_lanes(dtype, lanes)
    if n_lanes and is_float:
        from dualgpu.compiled.arrays import make_dual_array

        if isinstance(shape, types.Integer):
            def tracer_impl(shape, dtype, lanes):
                return make_dual_array(np.empty(shape, dtype),
                                       np.zeros((n_lanes, shape), np.uint64), n_lanes)
        else:
            def tracer_impl(shape, dtype, lanes):
                return make_dual_array(np.empty(shape, dtype),
                                       np.zeros((n_lanes,) + shape, np.uint64), n_lanes)

        return tracer_impl

    def plain_impl(shape, dtype, lanes):
        return np.empty(shape, dtype)

    return plain_impl


@njit
def _dg_atomic_add(ary, idx, val):
    old = ary[idx]
    ary[idx] = old + val
    return old


@njit
def _dg_atomic_sub(ary, idx, val):
    old = ary[idx]
    ary[idx] = old - val
    return old


@njit
def _dg_atomic_max(ary, idx, val):
    old = ary[idx]
    if val > old:
        ary[idx] = val
    return old


@njit
def _dg_atomic_min(ary, idx, val):
    old = ary[idx]
    if val < old:
        ary[idx] = val
    return old


@njit
def _dg_atomic_nanmax(ary, idx, val):
    old = ary[idx]
    if old != old or val > old:
        ary[idx] = val
    return old


@njit
def _dg_atomic_nanmin(ary, idx, val):
    old = ary[idx]
    if old != old or val < old:
        ary[idx] = val
    return old


@njit
def _dg_atomic_and_(ary, idx, val):
    old = ary[idx]
    ary[idx] = old & val
    return old


@njit
def _dg_atomic_or_(ary, idx, val):
    old = ary[idx]
    ary[idx] = old | val
    return old


@njit
def _dg_atomic_xor(ary, idx, val):
    old = ary[idx]
    ary[idx] = old ^ val
    return old


@njit
def _dg_atomic_exch(ary, idx, val):
    old = ary[idx]
    ary[idx] = val
    return old


@njit
def _dg_atomic_inc(ary, idx, val):
    old = ary[idx]
    ary[idx] = 0 if old >= val else old + 1
    return old


@njit
def _dg_atomic_dec(ary, idx, val):
    old = ary[idx]
    ary[idx] = val if (old == 0 or old > val) else old - 1
    return old


@njit
def _dg_atomic_cas(ary, idx, old, val):
    current = ary[idx]
    if current == old:
        ary[idx] = val
    return current


@njit
def _dg_atomic_compare_and_swap(ary, old, val):
    current = ary[0]
    if current == old:
        ary[0] = val
    return current


_RUNTIME = {"_dg_local_array": _dg_local_array, "_dg_lanemask_lt": _blocks_runtime.lanemask_lt,
            "_dg_fma": cpu_fma}
_RUNTIME.update({f"_dg_atomic_{op}": globals()[f"_dg_atomic_{op}"] for op in ATOMIC_OPS})
_RUNTIME.update({f"_dg_{f.__name__}": f for f in _float_to_int.REPLACEMENTS.values()})
_RUNTIME["_dg_power"] = _int_power.power
#: math.floor/ceil/trunc -> the runtime name of their saturating int64 version
_FLOAT_TO_INT = {m: f"_dg_{f.__name__}" for m, f in _float_to_int.REPLACEMENTS.items()}


# ---------------------------------------------------------------------------
# Source rewriting
# ---------------------------------------------------------------------------
def _name(identifier):
    return ast.Name(id=identifier, ctx=ast.Load())


def _global_index(axis):
    """``blockIdx.a * blockDim.a + threadIdx.a``: the launcher passes it as ``_dg_g<a>``."""
    return _name(f"_dg_g{axis}")


def _grid_size(axis):
    return ast.BinOp(left=_name(f"_dg_bd{axis}"), op=ast.Mult(), right=_name(f"_dg_gd{axis}"))


def _lane_id():
    """``(tx + bdx * (ty + bdy * tz)) % 32``: the linear thread index in the block, mod warp."""
    linear = ast.BinOp(
        left=_name("_dg_tx"),
        op=ast.Add(),
        right=ast.BinOp(
            left=_name("_dg_bdx"),
            op=ast.Mult(),
            right=ast.BinOp(
                left=_name("_dg_ty"),
                op=ast.Add(),
                right=ast.BinOp(left=_name("_dg_bdy"), op=ast.Mult(), right=_name("_dg_tz")),
            ),
        ),
    )
    return ast.BinOp(left=linear, op=ast.Mod(), right=ast.Constant(WARP_SIZE))


class _CpuRewriter(CudaRewriter):
    """Rewrites cuda references into the thread-function form described in the module doc."""

    def __init__(self, namespace, where, kernel_name):
        super().__init__(namespace, where)
        self.kernel_name = kernel_name
        self.uses_context = False
        self.uses_block_index = False
        self.uses_atomics = False
        self.uses_local_array = False
        self.block_level = False  # shared memory, barriers, warp intrinsics (see .blocks)
        self.devices = {}  # bound name -> _Translation

    def visit_Call(self, node):
        # math.floor/ceil/trunc convert to int64 as PTX does (saturating, NaN -> 0)
        if isinstance(node.func, (ast.Name, ast.Attribute)):
            try:
                replacement = _FLOAT_TO_INT.get(self.namespace.value(node.func))
            except TypeError:  # an unhashable global
                replacement = None
            if replacement is not None:
                node.func = ast.copy_location(_name(replacement), node.func)
        return super().visit_Call(node)

    def visit_BinOp(self, node):
        # float ** int at zero: inf as numba.cuda and numpy give (numba's CPU raises)
        node = self.generic_visit(node)
        # (a constant exponent >= 0 keeps numba's unrolled products: it cannot divide)
        if isinstance(node.op, ast.Pow) and not (
                isinstance(node.right, ast.Constant) and not isinstance(node.right.value, bool)
                and isinstance(node.right.value, (int, float)) and node.right.value >= 0):
            return ast.copy_location(
                ast.Call(func=_name("_dg_power"), args=[node.left, node.right], keywords=[]),
                node)
        return node

    # -- errors ----------------------------------------------------------------
    def _unsupported(self, path, node):
        feature = UNSUPPORTED.get(path[0]) if path else None
        if feature is not None:
            return DualgpuError(
                f"{self.where} uses {feature} ('{dotted(node)}'), which the {BACKEND} backend "
                f"does not support. {_fix_hint(feature)}"
            )
        what = "cuda." + ".".join(path) if path else "the cuda module itself"
        written = dotted(node)
        spelled = "" if written == what else f" ('{written}')"
        return DualgpuError(
            f"{self.where} uses {what}{spelled}, which the {BACKEND} backend does not know. "
            "It supports cuda.grid, cuda.gridsize, cuda.threadIdx/blockIdx/blockDim/gridDim "
            ".x/.y/.z, cuda.laneid, cuda.warpsize, cuda.local.array, cuda.shared.array, "
            "cuda.const.array_like, cuda.atomic.*, cuda.syncthreads(_count/_and/_or), "
            "cuda.syncwarp, cuda.shfl_*_sync, cuda.all/any/eq/ballot_sync, "
            "cuda.match_any/all_sync, cuda.activemask, cuda.lanemask_lt, cuda.cg.this_grid() "
            "with grid.sync(), cuda.threadfence*, cuda.fma, cuda.selp, numba types and device "
            "functions. Run this kernel on the 'cuda' or 'cudasim' backend, or rewrite that line "
            "with these."
        )

    # -- values ----------------------------------------------------------------
    def cuda_value(self, path, node):
        if len(path) == 2 and path[0] in _INDEX_PREFIX and path[1] in _AXES:
            self.uses_context = True
            self.uses_block_index |= path[0] in ("threadIdx", "blockIdx")
            return _name(_INDEX_PREFIX[path[0]] + path[1])
        if path == ("warpsize",):
            return ast.Constant(WARP_SIZE)
        if path == ("laneid",):
            self.uses_context = True
            self.uses_block_index = True
            return _lane_id()
        value = self.namespace.cuda_value(path)
        if isinstance(value, types.Type):  # cuda.float32 and other numba types
            return self.bind(value, "type")
        if path and path[0] in UNSUPPORTED:
            raise self._unsupported(path, node)
        if path in _block_markers.BLOCK_CALLS:
            raise DualgpuError(
                f"{self.where}, line {getattr(node, 'lineno', '?')}: '{dotted(node)}' is used "
                f"without being called; the {BACKEND} backend runs cuda.{'.'.join(path)} only "
                "where it is called directly, e.g. cuda.syncthreads()."
            )
        if len(path) == 1 and path[0] in _INDEX_PREFIX:
            raise DualgpuError(
                f"{self.where} uses '{dotted(node)}' without .x, .y or .z; the {BACKEND} "
                f"backend needs the component written out, e.g. '{dotted(node)}.x'."
            )
        raise self._unsupported(path, node)

    # -- calls -----------------------------------------------------------------
    def _literal_ndim(self, path, node):
        if (
            len(node.args) == 1
            and not node.keywords
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value in (1, 2, 3)
        ):
            return node.args[0].value
        raise DualgpuError(
            f"{self.where}: '{dotted(node)}' needs a literal 1, 2 or 3 as its only argument "
            f"(as numba.cuda does), e.g. cuda.{path[0]}(1)."
        )

    def cuda_call(self, path, node):
        if path in _block_markers.BLOCK_CALLS:  # shared memory, barriers, warp intrinsics
            return _block_markers.block_call(self, path, node, _lane_id)
        if path in (("grid",), ("gridsize",)):
            ndim = self._literal_ndim(path, node)
            self.uses_context = True
            make = _global_index if path == ("grid",) else _grid_size
            parts = [make(axis) for axis in _AXES[:ndim]]
            return parts[0] if ndim == 1 else ast.Tuple(elts=parts, ctx=ast.Load())
        if path == ("local", "array"):
            return self._local_array(node)
        if path == ("const", "array_like") and len(node.args) == 1 and not node.keywords:
            # constant memory is a read-only copy of a host array, which the CPU reads directly
            return node.args[0]
        if len(path) == 2 and path[0] == "atomic":
            if path[1] not in ATOMIC_OPS:
                raise self._unsupported(path, node)
            self.uses_atomics = True
            return ast.Call(
                func=_name(f"_dg_atomic_{path[1]}"), args=node.args, keywords=node.keywords
            )
        if len(path) == 1 and path[0] in _FENCES:
            return ast.Constant(None)  # threads run one after another: fences are no-ops
        if path == ("fma",) and len(node.args) == 3 and not node.keywords:
            return ast.Call(func=_name("_dg_fma"), args=node.args, keywords=[])
        if path == ("selp",) and len(node.args) == 3 and not node.keywords:
            cond, a, b = node.args
            return ast.IfExp(test=cond, body=a, orelse=b)
        value = self.namespace.cuda_value(path)
        if isinstance(value, types.Type):  # cuda.float32(x): a cast
            return ast.Call(func=self.bind(value, "type"), args=node.args, keywords=node.keywords)
        raise self._unsupported(path, node.func)

    def _local_array(self, node):
        arguments = dict(zip(("shape", "dtype"), node.args))
        for kw in node.keywords:
            arguments[kw.arg] = kw.value
        if set(arguments) != {"shape", "dtype"} or len(node.args) > 2:
            raise DualgpuError(
                f"{self.where}: '{dotted(node)}' should be cuda.local.array(shape, dtype), "
                "with shape an int or tuple of ints and dtype a numba or numpy type."
            )
        self.uses_local_array = True
        return ast.Call(
            func=_name("_dg_local_array"),
            args=[arguments["shape"], arguments["dtype"], _name("_dg_lanes")],
            keywords=[],
        )

    # -- device functions ------------------------------------------------------
    def _device(self, py_func):
        translation = _device_translation(py_func, self.kernel_name)
        name = self.bind(translation, "device").id
        self.devices[name] = translation
        self.uses_atomics |= translation.uses_atomics
        self.uses_block_index |= translation.uses_block_index
        return name, translation

    def device_call(self, py_func, node):
        name, translation = self._device(py_func)
        if translation.block_level:
            # it synchronises or uses shared memory: inlined into the kernel (see .blocks)
            del self.devices[name]
            self.block_level = True
            self.uses_context = True
            site = _block_markers.Site("inline", getattr(node, "lineno", 0), dotted(node),
                                       self.where)
            site.device = translation
            call = _block_markers.marker("inline", node.args, site, node)
            call.keywords = list(node.keywords)
            return call
        keywords = list(node.keywords)
        if translation.uses_context:
            self.uses_context = True
            keywords += [ast.keyword(arg=c, value=_name(c)) for c in CONTEXT]
        return ast.Call(func=_name(name), args=node.args, keywords=keywords)

    def device_value(self, py_func, node):
        name, translation = self._device(py_func)
        if translation.block_level:
            raise DualgpuError(
                f"{self.where}, line {getattr(node, 'lineno', '?')} passes the device function "
                f"{py_func.__qualname__!r} around as a value; it synchronises (or uses shared "
                f"memory), so the {BACKEND} backend inlines it and needs it called directly."
            )
        if translation.uses_context:
            raise DualgpuError(
                f"{self.where} passes the device function {py_func.__qualname__!r} around as a "
                f"value; the {BACKEND} backend only supports calling it directly, because it "
                "reads the thread index."
            )
        return _name(name)


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


class _Translation:
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
        self.uses_atomics = False
        self.uses_context = False
        self.uses_block_index = False
        self.lanes_dependent = False
        self.block_level = False
        self.devices = {}
        self._built = {}
        if role != "kernel":
            _DEVICE_TRANSLATIONS.set(py_func, self)
        rewriter = _CpuRewriter(self.namespace, self.where, kernel_name)
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
        self.inner_axis = _inner_axis(tree)
        self.guard = None
        if (
            role == "kernel" and not self.uses_atomics and not self.uses_block_index
            and self.inner_axis == "x" and not self.block_level
        ):
            self.guard = _find_guard(tree, self.params, self.namespace)
        self.namespace.values.update(_RUNTIME)

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
        ``tracer``: the lanes are sparsity tracers (float scratch gets uint64 lanes).
        """
        lanes = lanes if self.lanes_dependent else 0
        values = dict(self.namespace.values)
        values["_dg_lanes"] = lanes
        if not lanes:  # plain scratch on the stack: no allocation, no NRT needed
            values["_dg_local_array"] = _dg_stack_array
        elif tracer:
            values["_dg_local_array"] = _dg_tracer_local_array
        tree = self.guard.tree if unguarded else self.tree
        return _translate.compile_function(tree, values, self.filename), values

    def build(self, lanes, fastmath, unguarded=False, tracer=False, **options):
        """Return the njit dispatcher of this function for ``lanes`` (cached).

        ``tracer``: a sparsity-detection build (tracer lanes in local scratch).
        """
        tracer = bool(tracer and lanes and self.lanes_dependent)
        key = (
            lanes if self.lanes_dependent else 0, fastmath, unguarded, tracer,
            tuple(sorted(options.items())),
        )
        dispatcher = self._built.get(key)
        if dispatcher is None:
            function, values = self.function(lanes, unguarded, tracer)
            if self.role != "kernel" and not self.recursive:
                # Inlined in numba's IR, a device function is compiled with the
                # thread function's options (no NRT: no reference counting).
                options.setdefault("inline", "always")
            dispatcher = njit(fastmath=fastmath, error_model="numpy", **options)(function)
            self._built[key] = dispatcher
            for name, device in self.devices.items():
                values[name] = device.build(lanes, fastmath, tracer=tracer)
        return dispatcher


_DEVICE_TRANSLATIONS = _translate.FunctionCache()


def _calls_sync(tree):
    """True if ``tree`` calls a method ``.sync()`` without arguments (a grid group's)."""
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "sync"
        and not n.args and not n.keywords
        for n in ast.walk(tree)
    )


def _device_translation(py_func, kernel_name):
    translation = _DEVICE_TRANSLATIONS.get(py_func)
    if translation is not None and translation.tree is None:
        translation.recursive = True  # referenced while its own body is being rewritten
        return translation
    if translation is None or (translation._built == {} and translation.stale()):
        translation = _Translation(py_func, "device function", kernel_name)
    return translation


# ---------------------------------------------------------------------------
# Hoisting a 1-D kernel's bounds guard out of the launch loop
# ---------------------------------------------------------------------------
#: Context names a kernel may use and still get a bounded launcher.
_GUARD_CONTEXT = frozenset({"_dg_gx", "_dg_gdx", "_dg_bdx"})
_INT_OPS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)
_PURE_OPS = _INT_OPS + (ast.Div, ast.Pow)
_ARRAY_SIZES = ("size", "ndim")


class _NotHoistable(Exception):
    """Raised inside the guard analysis: the kernel keeps the ordinary launchers."""


class _Guard:
    """A hoistable bounds guard at the top of a 1-D kernel (see :func:`_find_guard`).

    Attributes
    ----------
    tree : ast.FunctionDef
        The thread function without the guard (for threads below the bound).
    bound : str
        Launcher source lines that set ``_dg_m`` to the number of leading
        global indices that pass the guard, clamped to ``[0, _dg_gdx * _dg_bdx]``.
    int_params, array_params : tuple of int
        Positions of the arguments the bound reads as integers / as array sizes;
        :meth:`applies` checks them at each launch.
    """

    def __init__(self, tree, bound, int_params, array_params):
        self.tree = tree
        self.bound = bound
        self.int_params = int_params
        self.array_params = array_params

    def applies(self, args):
        """True if the launch arguments make the bound an exact integer."""
        for k in self.int_params:
            a = args[k]
            if isinstance(a, bool) or not isinstance(a, (int, np.integer)):
                return False
            if isinstance(a, np.uint64) or (type(a) is int and not -(2**63) <= a < 2**63):
                return False
        for k in self.array_params:
            a = args[k]
            if not isinstance(a, np.ndarray) and not _is_dual_array(a):
                return False
        return True


def _is_dual_array(value):
    from dualgpu.core.dualarray import DualArray

    return isinstance(value, DualArray)


class _BoundBuilder:
    """Checks expressions before the guard and rewrites them for the launcher.

    Names in the bound may be kernel parameters, locals assigned earlier in the
    kernel's prefix (renamed ``_dg_p_<name>`` in the launcher), module-level
    Python ints (inlined) and the builtins len/min/max. Nothing that reads
    array elements, calls other functions or uses the thread index qualifies.
    """

    def __init__(self, params, namespace, index):
        self.params = params
        self.namespace = namespace
        self.index = index
        self.kinds = {}  # prefix local -> "int" or "pure"
        self.int_params = set()
        self.array_params = set()

    def _builtin(self, name):
        import builtins

        return (
            name not in self.namespace.locals
            and self.namespace.values.get(name, getattr(builtins, name)) is getattr(builtins, name)
        )

    def _array(self, node):
        """``node`` as an array parameter (sizes of arrays never change in a launch)."""
        if isinstance(node, ast.Name) and node.id in self.params and node.id not in self.kinds:
            return ast.Name(id=node.id, ctx=ast.Load()), {node.id}
        raise _NotHoistable

    def expr(self, node, need_int):
        """Return ``(rewritten node, is_int, int params, array params)`` or raise _NotHoistable."""
        ints, arrays = set(), set()

        def walk(n):
            if isinstance(n, ast.Constant):
                if isinstance(n.value, bool) or not isinstance(n.value, (int, float)):
                    raise _NotHoistable
                return ast.Constant(n.value), isinstance(n.value, int)
            if isinstance(n, ast.Name):
                name = n.id
                if name == self.index or name.startswith("_dg_"):
                    raise _NotHoistable
                if name in self.kinds:
                    return ast.Name(id="_dg_p_" + name, ctx=ast.Load()), self.kinds[name] == "int"
                if name in self.params:
                    ints.add(name)
                    return ast.Name(id=name, ctx=ast.Load()), True
                if name in self.namespace.locals:
                    raise _NotHoistable  # a local not yet assigned here
                value = self.namespace.values.get(name)
                if type(value) is int and -(2**62) < value < 2**62:
                    return ast.Constant(value), True
                raise _NotHoistable
            if isinstance(n, ast.Attribute) and n.attr in _ARRAY_SIZES:
                base, names = self._array(n.value)
                arrays.update(names)
                return ast.Attribute(value=base, attr=n.attr, ctx=ast.Load()), True
            if isinstance(n, ast.Subscript):
                shape = n.value
                index = n.slice
                if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub):
                    index = index.operand
                    sign = -1
                else:
                    sign = 1
                if (
                    isinstance(shape, ast.Attribute) and shape.attr == "shape"
                    and isinstance(index, ast.Constant) and type(index.value) is int
                ):
                    base, names = self._array(shape.value)
                    arrays.update(names)
                    return ast.Subscript(
                        value=ast.Attribute(value=base, attr="shape", ctx=ast.Load()),
                        slice=ast.Constant(sign * index.value), ctx=ast.Load(),
                    ), True
                raise _NotHoistable
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and not n.keywords:
                name = n.func.id
                if name == "len" and len(n.args) == 1 and self._builtin("len"):
                    base, names = self._array(n.args[0])
                    arrays.update(names)
                    return ast.Call(func=ast.Name(id="len", ctx=ast.Load()), args=[base],
                                    keywords=[]), True
                if name in ("min", "max") and len(n.args) >= 2 and self._builtin(name):
                    parts = [walk(a) for a in n.args]
                    return ast.Call(func=ast.Name(id=name, ctx=ast.Load()),
                                    args=[p[0] for p in parts], keywords=[]), all(
                        p[1] for p in parts)
                raise _NotHoistable
            if isinstance(n, ast.BinOp) and isinstance(n.op, _PURE_OPS):
                (left, li), (right, ri) = walk(n.left), walk(n.right)
                return ast.BinOp(left=left, op=n.op, right=right), (
                    li and ri and isinstance(n.op, _INT_OPS))
            if isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.USub, ast.UAdd)):
                operand, is_int = walk(n.operand)
                return ast.UnaryOp(op=n.op, operand=operand), is_int
            raise _NotHoistable

        rewritten, is_int = walk(node)
        if need_int and not is_int:
            raise _NotHoistable
        return rewritten, is_int, ints, arrays


def _is_index(node, index):
    return isinstance(node, ast.Name) and node.id == index


def _keep_condition(test, index):
    """For a guard test on ``index``: return (bound expr, strict) meaning "keep iff
    index < bound" (strict) or "index <= bound"; None if it is not of that form."""
    negate = False
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        negate = not negate
        test = test.operand
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    left, op, right = test.left, test.ops[0], test.comparators[0]
    flipped = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE}
    if _is_index(right, index) and not _is_index(left, index) and type(op) in flipped:
        left, right, op = right, left, flipped[type(op)]()
    if not _is_index(left, index):
        return None
    if negate:  # not (i < e) == i >= e (integers)
        opposite = {ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.LtE: ast.Gt, ast.Gt: ast.LtE}
        if type(op) not in opposite:
            return None
        op = opposite[type(op)]()
    return right, type(op)


def _find_guard(tree, params, namespace):
    """Return a :class:`_Guard` for a rewritten kernel ``tree``, or None.

    Recognised (``i`` the name given ``cuda.grid(1)``, the prefix being
    assignments of pure size expressions such as ``n = u.shape[0]``)::

        i = cuda.grid(1); <prefix>; if i < EXPR: <body>          (last statement)
        i = cuda.grid(1); <prefix>; if i >= EXPR: return; <body>

    (also ``EXPR > i``, ``i <= EXPR``, ``not i < EXPR`` ...), where EXPR is an
    integer built from parameters, array sizes and the prefix. Anything else
    (or a kernel reading other thread indices) returns None.
    """
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id in CONTEXT}
    if not used <= _GUARD_CONTEXT:
        return None
    body = list(tree.body)
    start = 0
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        start = 1  # docstring
    builder = _BoundBuilder(params, namespace, None)
    prefix = []  # (target, rewritten value, is_int, int params, array params), in order
    for pos in range(start, len(body)):
        stmt = body[pos]
        if (
            isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
        ):
            target = stmt.targets[0].id
            if target == builder.index or target.startswith("_dg_"):
                return None
            if builder.index is None and _is_index(stmt.value, "_dg_gx"):
                if target in params or target in builder.kinds:
                    return None
                builder.index = target
                continue
            try:
                value, is_int, ints, arrays = builder.expr(stmt.value, need_int=False)
            except _NotHoistable:
                return None
            builder.kinds[target] = "int" if is_int else "pure"
            prefix.append((target, value, is_int, ints, arrays))
            continue
        if builder.index is None or not isinstance(stmt, ast.If):
            return None
        keep = _keep_condition(stmt.test, builder.index)
        if keep is None:
            return None
        bound, op = keep
        if op in (ast.Lt, ast.LtE):  # keep iff i < / <= EXPR: the body is the if's body
            if stmt.orelse or pos != len(body) - 1:
                return None
            rest = stmt.body
        else:  # exit iff i >= / > EXPR: the if must be a bare return
            if stmt.orelse or len(stmt.body) != 1 or not isinstance(stmt.body[0], ast.Return):
                return None
            value = stmt.body[0].value
            if value is not None and not (isinstance(value, ast.Constant) and value.value is None):
                return None
            rest = body[pos + 1:]
        strict = op in (ast.Lt, ast.GtE)
        return _make_guard(tree, body[:pos] + rest, builder, prefix, bound, strict, params)
    return None


def _prefix_names(node):
    return {n.id[len("_dg_p_"):] for n in ast.walk(node)
            if isinstance(n, ast.Name) and n.id.startswith("_dg_p_")}


def _make_guard(tree, new_body, builder, prefix, bound, strict, params):
    """Build the :class:`_Guard` once the pattern matched (None if EXPR does not qualify)."""
    try:
        expr, _, ints, arrays = builder.expr(bound, need_int=True)
    except _NotHoistable:
        return None
    # the prefix lines EXPR depends on (latest assignment first), and what they read
    needed = _prefix_names(expr)
    lines = []
    for target, value, is_int, p_ints, p_arrays in reversed(prefix):
        if target not in needed:
            continue
        if not is_int:
            return None
        needed.discard(target)
        needed |= _prefix_names(value)
        lines.insert(0, f"    _dg_p_{target} = {ast.unparse(value)}\n")
        ints |= p_ints
        arrays |= p_arrays
    total = "_dg_gdx * _dg_bdx"
    source = "".join(lines) + f"    _dg_m = {total} * 0 + ({ast.unparse(expr)})\n"
    if strict:  # threads 0 .. EXPR - 1 pass
        source += f"    if _dg_m > {total}:\n        _dg_m = {total} * 1\n"
    else:  # threads 0 .. EXPR pass
        source += (
            f"    if _dg_m >= {total}:\n        _dg_m = {total} * 1\n"
            "    else:\n        _dg_m = _dg_m + 1\n"
        )
    source += "    if _dg_m < 0:\n        _dg_m = _dg_m * 0\n"
    unguarded = copy.deepcopy(tree)
    unguarded.body = copy.deepcopy(new_body) or [ast.Pass()]
    positions = {p: k for k, p in enumerate(params)}
    return _Guard(
        unguarded, source, tuple(sorted(positions[p] for p in ints)),
        tuple(sorted(positions[p] for p in arrays)),
    )


# ---------------------------------------------------------------------------
# numba internals (numba 0.68): the one place this module reaches into them
# ---------------------------------------------------------------------------
def _llvm_inline_every_overload(dispatcher):
    """Ask LLVM to inline every compiled overload of ``dispatcher`` into its callers.

    LLVM inlines a small thread function into the launcher's loop by itself,
    but not a large one (a kernel with many array arguments, or any dual
    kernel): a call per CUDA thread then costs 5-10 ns and blocks
    vectorisation. Each new overload's linkable LLVM module gets the
    ``alwaysinline`` attribute before any launcher links it in. If numba's
    internals change, this does nothing (launches stay correct, only slower);
    tests/test_backend_cpu.py checks that it still works.
    """
    original = dispatcher.add_overload

    def add_overload(cres, *args, **kwargs):
        try:
            module = cres.library._get_module_for_linking()
            function = module.get_function(cres.fndesc.llvm_func_name)
            if "noinline" not in str(function.attributes):
                function.add_function_attribute("alwaysinline")
        except Exception:  # pragma: no cover - only with other numba versions
            pass
        return original(cres, *args, **kwargs)

    try:
        dispatcher.add_overload = add_overload
    except AttributeError:  # pragma: no cover - only with other numba versions
        pass


# ---------------------------------------------------------------------------
# Launchers (their sources: cpu_launchers; running them on several cores: cpu_parallel)
# ---------------------------------------------------------------------------
def _inner_axis(tree):
    """Return the launch axis ("x", "y" or "z") to put in the innermost loop.

    Thread order does not matter to a valid kernel, but on a CPU it decides
    whether neighbouring iterations touch neighbouring memory. numba.cuda
    kernels often write ``i, j = cuda.grid(2)`` and index ``u[i, j]``: the
    last index, contiguous in a C-ordered array, is then the y axis. This
    counts, over subscripts with several indices, which axis variable the last
    index uses, and picks the most frequent (x when none or tied).
    """
    axis_of = {f"_dg_g{a}": a for a in _AXES}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
            if isinstance(target, ast.Name) and isinstance(value, ast.Name) and value.id in axis_of:
                axis_of[target.id] = axis_of[value.id]
            elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
                for t, v in zip(target.elts, value.elts):
                    if isinstance(t, ast.Name) and isinstance(v, ast.Name) and v.id in axis_of:
                        axis_of[t.id] = axis_of[v.id]
    votes = dict.fromkeys(_AXES, 0)
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple) and node.slice.elts:
            names = [n.id for n in ast.walk(node.slice.elts[-1]) if isinstance(n, ast.Name)]
            used = {axis_of[n] for n in names if n in axis_of}
            for axis in used:
                votes[axis] += 1
    best = max(_AXES, key=lambda a: (votes[a], a == "x"))
    return best if votes[best] > votes["x"] else "x"


def _dim3(value, what, kernel):
    if type(value) is int and value > 0:
        return value, 1, 1
    if type(value) is tuple and 1 <= len(value) <= 3 and all(
        type(v) is int and v > 0 for v in value
    ):
        return value + (1,) * (3 - len(value))
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        dims = (int(value),)
    elif isinstance(value, (tuple, list)) and all(
        isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value
    ):
        dims = tuple(int(v) for v in value)
    else:
        dims = None
    if dims is None or not 1 <= len(dims) <= 3 or min(dims) < 1:
        raise DualgpuError(
            f"kernel {kernel!r}: {what} must be a positive int or a tuple of 1 to 3 positive "
            f"ints (x, y, z); got {value!r}. Example: kernel[(n + 255) // 256, 256](...)."
        )
    return dims + (1,) * (3 - len(dims))


#: What numba says when code compiled without NRT allocates an array.
_NRT_MESSAGES = ("NRT required", "Only accept returning of array passed into the function")


def _needs_nrt(exc):
    text = str(exc)
    return any(m in text for m in _NRT_MESSAGES)


def _register_dual_types():
    """Import the numba typing of Dual/DualArray, so the launcher can take them."""
    try:
        from dualgpu.compiled import arrays as numba_arrays
        from dualgpu.compiled import types as numba_types  # noqa: F401  (registers typeof)
    except ImportError:  # not written yet: numba will say it cannot type the argument
        pass


def _tracer_launch(args):
    """True when the launch's duals are sparsity tracers (uint64 dependency-bitset lanes)."""
    from dualgpu.core.dual import Dual
    from dualgpu.core.dualarray import DualArray

    for arg in args:
        if isinstance(arg, (Dual, DualArray)):
            return np.asarray(arg.partials).dtype == np.uint64
    return False


def _lanes_of(args, kernel):
    """The launch's lane count (first order), or its lane structure with nested duals."""
    from dualgpu.core.nested import lane_key

    return lane_key(args, f"kernel {kernel!r}")


#: Block-level launches run their blocks on several cores from this many threads up (and
#: when cores are free, see cpu_parallel.available_threads). Measured on 2 cores (tiled
#: N-body, blocks of 8 threads): 2048 bodies gained nothing (0.96-0.97x), small launches
#: lost up to 23x to waking the workers.
BLOCKS_PARALLEL_MIN_ITEMS = 1 << 16


class CpuKernel(LaneTiles):
    """A numba.cuda kernel compiled for the CPU; launch with :meth:`launch`.

    Made by :func:`compile_kernel`. One launcher dispatcher is kept per
    :class:`~dualgpu.backends.cpu.launchers.LaunchSpec` (loop shape, serial or
    pieces, tile lanes, which arguments are duals, which arrays are restored
    between tiles), and numba keeps one specialisation per argument types, so
    repeated launches never recompile.

    Attributes
    ----------
    tile_lanes : int or None
        Lanes per tile of dual launches; None: the driver's chunk size, else
        the fastest of :data:`dualgpu.core.lanes.TILE_CANDIDATES` for this kernel
        (timed on its first launches), else :data:`DEFAULT_TILE_LANES`.
    """

    def __init__(self, py_func, fastmath=False):
        self.py_func = py_func
        self.name = py_func.__qualname__
        self.fastmath = bool(fastmath)
        self._translation = _Translation(py_func, "kernel", self.name)
        self.params = tuple(self._translation.params)
        self._plain_mask = ("",) * len(self.params)
        self._launchers = {}
        self._costs = {}  # serial LaunchSpec -> cpu_parallel.LaunchCost
        self._warm = set()  # "pieces" specs that have run once (compiled)
        self._nrt_lanes = set()  # tile lanes whose thread function needs numba's NRT
        self._summary = None
        self._access = {}  # (mask, ndims) -> (flags, tileable)
        self._specs = {}
        self._tile_choice = {}  # (base, mask, candidates) -> tile lanes measured fastest
        self.tile_lanes = None
        self.default_tile_lanes = DEFAULT_TILE_LANES
        self._blocks = None  # the block-level runner (.blocks.launch), made at first launch

    @property
    def uses_atomics(self):
        """True if the kernel (or a device function it calls) uses cuda.atomic: runs serially."""
        return self._translation.uses_atomics

    def _launcher(self, spec):
        """Return (building once) the launcher for ``spec``."""
        launcher = self._launchers.get(spec)
        if launcher is None:
            lanes = spec.lanes
            if lanes:
                _register_dual_types()
            # Without NRT the thread function does no reference counting, so LLVM
            # inlines it into the launcher's loop and can vectorise across threads
            # (reference-count calls per thread would block that and cost ~20 ns).
            # Plain local arrays live on the stack; dual ones need NRT.
            nrt = lanes in self._nrt_lanes or bool(lanes and self._translation.lanes_dependent)
            unguarded = spec.base == "bounded"
            tracer = spec.tracer
            if not nrt and cpu_cache.needs_nrt(self._thread_key(lanes, unguarded, False)):
                self._nrt_lanes.add(lanes)  # an earlier process found that it allocates
                nrt = True
            if nrt:
                # numba inlines it: reference counts then live in one function
                thread = self._translation.build(
                    lanes, self.fastmath, unguarded, tracer, _nrt=True, inline="always"
                )
            else:
                # a separate function that LLVM inlines (vectorises more loops than
                # numba's IR inlining does)
                thread = self._translation.build(
                    lanes, self.fastmath, unguarded, tracer, _nrt=False, inline="never"
                )
                _llvm_inline_every_overload(thread)
            bound = self._translation.guard.bound if unguarded else ""
            launcher = make_launcher(
                spec, self.params, bound, self._translation.inner_axis, thread, self.fastmath,
                nrt, f"cpu launcher of {self.name}",
                thread_key=self._thread_key(lanes, unguarded, nrt, tracer),
            )
            self._launchers[spec] = launcher
        return launcher

    def _thread_key(self, lanes, unguarded, nrt, tracer=False):
        """Fingerprint of the thread function for the disk cache (None: not cacheable)."""
        if not cpu_cache.enabled():
            return None
        options = {"fastmath": self.fastmath, "nrt": nrt}
        if tracer:
            options["tracer"] = True
        try:
            return cpu_cache.translation_key(self._translation, lanes, unguarded, options)
        except cpu_cache.Uncacheable:
            return None

    def _base(self, args):
        """The loop shape for these arguments: "blocks", "bounded" or "flat"."""
        if self._translation.uses_block_index:
            return "blocks"
        guard = self._translation.guard
        if guard is not None and guard.applies(args):
            return "bounded"
        return "flat"

    def launch(self, griddim, blockdim, args, sharedmem=0):
        """Run the kernel over a ``griddim`` x ``blockdim`` launch with ``args``.

        Parameters
        ----------
        griddim, blockdim : int or tuple of 1 to 3 ints
        args : tuple
            The kernel's arguments: numpy arrays, scalars, and dualgpu duals.
        sharedmem : int
            Bytes of dynamic shared memory per block (``cuda.shared.array(0, dtype)``).
        """
        g = _dim3(griddim, "griddim", self.name)
        b = _dim3(blockdim, "blockdim", self.name)
        if len(args) != len(self.params):
            raise DualgpuError(
                f"kernel {self.name!r} takes {len(self.params)} arguments "
                f"({', '.join(self.params)}); got {len(args)}."
            )
        if b[0] * b[1] * b[2] > MAX_THREADS_PER_BLOCK:
            raise DualgpuError(
                f"kernel {self.name!r}: blockdim {blockdim!r} has {b[0] * b[1] * b[2]} threads; "
                f"CUDA allows at most {MAX_THREADS_PER_BLOCK} per block (the {BACKEND} backend "
                "keeps that limit so the kernel also runs on a GPU). Use more blocks."
            )
        lanes = _lanes_of(args, self.name) if args else 0
        if isinstance(lanes, tuple) and (
            self._translation.lanes_dependent or self._translation.block_level
        ):
            from dualgpu.core.nested import nested_local_array_error

            raise nested_local_array_error(f"kernel {self.name!r}", BACKEND)
        if not self._launchers and self._blocks is None and self._translation.stale():
            # a global the kernel uses was defined after compile_kernel: look again
            self._translation = _Translation(self.py_func, "kernel", self.name)
            self._summary = None
        if self._translation.block_level:
            self._block_launch(g, b, sharedmem, args, lanes)
            return
        base = self._base(args)
        items = g[0] * b[0] * g[1] * b[1] * g[2] * b[2]
        try:
            if lanes and not isinstance(lanes, tuple):  # nested duals: passed as they are
                self._launch_dual(base, g, b, args, lanes, items)
                return
            spec = LaunchSpec(base, "serial", 0, self._plain_mask, ())
            if (items < cpu_parallel.PARALLEL_MIN_ITEMS and not cpu_parallel.FORCE) or (
                self._translation.uses_atomics
            ):
                launcher = self._launchers.get(spec)
                if launcher is None:
                    launcher = self._launcher(spec)
                launcher(*args, *g, *b)
                return
            self._run(spec, args, g, b, items, 1, ())
        except (numba.core.errors.NumbaError, TypeError) as exc:
            self._retry_or_explain(exc, lanes, base, args, g, b)

    def _launch_dual(self, base, g, b, args, lanes, items):
        """A launch with dual arguments of ``lanes`` lanes: tiles of :meth:`_tiles` lanes."""
        mask = tuple(dual_kind(a) for a in args)
        tile, tiles = self._tiles(lanes, args, mask, base)
        flat = flatten(args, mask)
        restore = self._restore(args, mask) if tiles > 1 else ()
        tracer = self._translation.lanes_dependent and _tracer_launch(args)
        spec = self._specs.get((base, tile, mask, restore, tracer))
        if spec is None:
            spec = self._specs[(base, tile, mask, restore, tracer)] = LaunchSpec(
                base, "serial", tile, mask, restore, tracer)
        self._run(spec, flat, g, b, items * tiles, tiles,
                  [np.array(values_of(args[p]), copy=True) for p in restore])

    def _run(self, spec, flat, g, b, items, tiles, snapshots):
        """Run the launcher of ``spec`` serially or on several cores, by its measured cost."""
        cost = self._costs.get(spec)
        if cost is None:
            cost = self._costs[spec] = cpu_parallel.LaunchCost()
        parallel = (
            cpu_parallel.ENABLED and not spec.restore and not self._translation.uses_atomics
            and cost.parallel(items)
        )
        if parallel:
            threads = cpu_parallel.available_threads()
            parallel = threads > 1
        dual = bool(spec.lanes)
        if parallel:
            pieces = spec._replace(mode="pieces")
            launcher = self._launcher(pieces)
            control = cpu_parallel.control_array()
            chunk = cpu_parallel.chunk_length(spec.base, g, b, self._translation.inner_axis,
                                              tiles, threads)
            arguments = (*flat, *g, *b, 0, tiles, chunk, control)
            if pieces not in self._warm:  # compile before helpers may call it
                launcher.compile(tuple(launcher.typeof_pyval(a) for a in arguments))
                self._warm.add(pieces)
            start = time.perf_counter()
            cpu_parallel.run_parallel(launcher, arguments, control, threads)
            cost.record_parallel(time.perf_counter() - start, items)
            return
        launcher = self._launchers.get(spec)
        if launcher is None:
            launcher = self._launcher(spec)
        start = time.perf_counter()
        if dual:
            launcher(*flat, *g, *b, 0, tiles, *snapshots)
        else:
            launcher(*flat, *g, *b)
        cost.record_serial(time.perf_counter() - start, items)

    def _block_launch(self, g, b, sharedmem, args, lanes):
        """Run a kernel with shared memory, barriers or warp intrinsics (see .blocks)."""
        if lanes:
            _register_dual_types()
        if self._blocks is None:
            from dualgpu.backends.cpu.blocks.launch import BlockLauncher

            self._blocks = BlockLauncher(self._translation, _RUNTIME, CONTEXT, self.fastmath)
        items = g[0] * b[0] * g[1] * b[1] * g[2] * b[2]
        parallel = cpu_parallel.ENABLED and not self._translation.uses_atomics and (
            cpu_parallel.FORCE or (
                items >= BLOCKS_PARALLEL_MIN_ITEMS and cpu_parallel.available_threads() > 1)
        )
        tile = launch_tile(lanes, self.tile_lanes or self.default_tile_lanes,
                           active_tile_lanes()) if lanes else 0
        try:
            if tile == lanes:
                self._blocks.launch(g, b, sharedmem, args, lanes, parallel)
            else:  # more lanes than a tile: one block-level launch per lane tile (as on a GPU)
                launch_tiles(lambda views: self._blocks.launch(g, b, sharedmem, views, tile,
                                                                parallel),
                             self.py_func, args, lanes // tile, tile)
        except (numba.core.errors.NumbaError, TypeError) as exc:
            self._retry_or_explain(exc, lanes, None, args, g, b)

    def _retry_or_explain(self, exc, lanes, base, args, g, b):
        """After a failed launch: recompile with NRT once if needed, or explain device arrays."""
        on_device = [p for p, a in zip(self.params, args) if _in_device_memory(a)]
        if on_device:
            verb = "is a device array" if len(on_device) == 1 else "are device arrays"
            raise DualgpuError(
                f"kernel {self.name!r}: the {BACKEND} backend runs on host arrays, but "
                f"{', '.join(on_device)} {verb}. Pass numpy arrays (dualgpu.cuda.to_device "
                "keeps host arrays on this backend), or call .copy_to_host() first."
            ) from exc
        if base is None:  # a block-level kernel: retried with NRT by its launcher
            raise exc
        tile = self._tiles(lanes, args, tuple(dual_kind(a) for a in args))[0] if lanes and not isinstance(lanes, tuple) else 0
        if tile in self._nrt_lanes or not _needs_nrt(exc):
            if base == "bounded" and isinstance(exc, numba.core.errors.NumbaError):
                # compiling the hoisted bound failed (before anything ran): fall
                # back to the ordinary launchers, which report any real error
                self._translation.guard = None
                self._forget(lambda spec: spec.base == "bounded")
                self.launch(g, b, args)
                return
            raise exc
        # something in the kernel allocates: compile again with NRT (once)
        cpu_cache.mark_needs_nrt(self._thread_key(tile, base == "bounded", False))
        self._nrt_lanes.add(tile)
        self._forget(lambda spec: spec.lanes == tile)
        self.launch(g, b, args)

    def _forget(self, which):
        for store in (self._launchers, self._costs):
            for spec in [s for s in store if which(s)]:
                del store[spec]
        self._warm = {s for s in self._warm if not which(s)}
        self._tile_choice.clear()

    def __getitem__(self, config):
        """``kernel[griddim, blockdim](*args)``, as with numba.cuda."""
        if not isinstance(config, tuple) or len(config) not in (2, 3, 4):
            raise DualgpuError(
                f"kernel {self.name!r}: launch as kernel[griddim, blockdim](*args); got "
                f"kernel[{config!r}]."
            )
        griddim, blockdim = config[0], config[1]
        sharedmem = config[3] if len(config) == 4 else 0

        def configured(*args):
            self.launch(griddim, blockdim, args, sharedmem)

        return configured

    def __repr__(self):
        return f"<CpuKernel {self.name}({', '.join(self.params)})>"


def compile_kernel(kernel, fastmath=False):
    """Return a :class:`CpuKernel` running ``kernel`` on the CPU.

    Parameters
    ----------
    kernel : function or numba.cuda dispatcher
        A numba.cuda kernel (decorated or not); its source must be in a file.
    fastmath : bool
        Passed to ``numba.njit``.

    Returns the same CpuKernel for the same function and ``fastmath``.

    Raises
    ------
    DualgpuError
        If the source is unavailable or the kernel uses a feature this backend
        cannot run (constant memory other than ``cuda.const.array_like``, a
        cuda function it does not know), naming the feature.
    """
    py_func = _translate.unwrap(kernel)
    if py_func is None:
        raise DualgpuError(
            f"compile_kernel expects a Python function or a numba.cuda kernel; got "
            f"{type(kernel).__name__}. Pass the function you decorate with @cuda.jit."
        )
    if _translate.device_py_func(kernel) is not None:
        raise DualgpuError(
            f"{py_func.__qualname__!r} is a device function (device=True), not a kernel; "
            "launch the kernel that calls it instead."
        )
    fastmath = bool(fastmath)
    compiled = _KERNELS.get(py_func)
    if compiled is None:
        compiled = {}
        _KERNELS.set(py_func, compiled)
    kernel = compiled.get(fastmath)
    if kernel is None:
        kernel = compiled[fastmath] = CpuKernel(py_func, fastmath=fastmath)
    return kernel


#: CpuKernel per Python function and fastmath flag: compiling a kernel twice
#: returns the same object, so its compiled launchers are reused.
_KERNELS = _translate.FunctionCache()


def _in_device_memory(arg):
    """True for numba.cuda device arrays (and DualArrays holding them), not host arrays."""
    from dualgpu.core.dualarray import DualArray

    if isinstance(arg, DualArray):
        return arg.is_device
    return hasattr(arg, "copy_to_host") and not isinstance(arg, np.ndarray)
