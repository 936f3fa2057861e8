"""The cpu backend's source rewriter: ``cuda.*`` references become thread-function code.

:class:`CpuRewriter` turns ``cuda.grid``, ``cuda.threadIdx.x`` ... into the
launcher's context parameters (``_dg_gx``, ``_dg_tx`` ...), ``cuda.local.array``,
``cuda.atomic.*`` and friends into calls of :data:`~dualgpu.backends.cpu.intrinsics.RUNTIME`
names, block-level calls into markers (:mod:`dualgpu.backends.cpu.blocks.markers`),
and refuses what this backend cannot run with a message that names it.
"""
import ast
import copy

from numba import types

from dualgpu.errors import DualgpuError
from dualgpu.compiled.libdevice import CPU_FUNCTIONS as LIBDEVICE_FUNCTIONS
from dualgpu.backends.common.translate import CudaRewriter, dotted
from dualgpu.backends.cpu import BACKEND
from dualgpu.backends.cpu.blocks import markers as _block_markers
from dualgpu.backends.cpu.blocks.markers import WARP_SIZE
from dualgpu.backends.cpu.bits import FUNCTIONS as BIT_FUNCTIONS
from dualgpu.backends.cpu.intrinsics import ATOMIC_OPS, FLOAT_TO_INT
from dualgpu.backends.cpu.launchers import CONTEXT

__all__ = ["CpuRewriter", "AXES", "UNSUPPORTED"]

_INDEX_PREFIX = {
    "threadIdx": "_dg_t", "blockIdx": "_dg_b", "blockDim": "_dg_bd", "gridDim": "_dg_gd",
}
#: The launch axes, in order.
AXES = ("x", "y", "z")

#: Features used in a form this backend does not run: rejected with their name.
UNSUPPORTED = {
    "const": "constant memory (other than cuda.const.array_like(host_array))",
    "cg": "cooperative groups (other than cuda.cg.this_grid() and grid.sync())",
}

_FENCES = ("threadfence", "threadfence_block", "threadfence_system")


def _fix_hint(feature):
    return (
        f"Run this kernel on the 'cuda' backend (a GPU) or the 'cudasim' backend (the CUDA "
        f"simulator), or rewrite it without {feature}."
    )


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


class CpuRewriter(CudaRewriter):
    """Rewrites cuda references into the thread-function form of :mod:`dualgpu.backends.cpu`.

    Parameters
    ----------
    namespace : dualgpu.backends.common.translate.Namespace
        The function's globals and closure values.
    where : str
        The function, as error messages name it.
    kernel_name : str
        The kernel being compiled.
    translate_device : callable
        ``translate_device(py_func, kernel_name)`` returns the translation of a
        device function the code calls (see
        :func:`dualgpu.backends.cpu.translation.device_translation`).
    """

    def __init__(self, namespace, where, kernel_name, translate_device):
        super().__init__(namespace, where)
        self.kernel_name = kernel_name
        self.translate_device = translate_device
        self.uses_context = False
        self.uses_block_index = False
        self.uses_atomics = False
        self.uses_local_array = False
        self.block_level = False  # shared memory, barriers, warp intrinsics (see .blocks)
        self.devices = {}  # bound name -> Translation

    def visit_Call(self, node):
        # math.floor/ceil/trunc convert to int64 as PTX does (saturating, NaN -> 0)
        if isinstance(node.func, (ast.Name, ast.Attribute)):
            value = self.namespace.value(node.func)
            if getattr(value, "__dualgpu_foreign__", False) is True:  # cuda.declare_device
                error = value.refusal()
                raise type(error)(f"{error} ({self.where}, line {node.lineno})")
            try:
                replacement = FLOAT_TO_INT.get(value)
            except TypeError:  # an unhashable global
                replacement = None
            if replacement is not None:
                node.func = ast.copy_location(_name(replacement), node.func)
        return super().visit_Call(node)

    def visit_BinOp(self, node):
        # float ** int at zero: inf as numba.cuda and numpy give (numba's CPU raises)
        node = self.generic_visit(node)
        # integer a % b without a division where it is a (see .remainder: periodic indices)
        if isinstance(node.op, ast.Mod):
            return ast.copy_location(
                ast.Call(func=_name("_dg_mod"), args=[node.left, node.right], keywords=[]),
                node)
        # (a constant exponent >= 0 keeps numba's unrolled products: it cannot divide)
        if isinstance(node.op, ast.Pow) and not (
                isinstance(node.right, ast.Constant) and not isinstance(node.right.value, bool)
                and isinstance(node.right.value, (int, float)) and node.right.value >= 0):
            return ast.copy_location(
                ast.Call(func=_name("_dg_power"), args=[node.left, node.right], keywords=[]),
                node)
        return node

    def visit_AugAssign(self, node):
        # x %= n and x **= n compile as x % n and x ** n do (see visit_BinOp: no division
        # where none is needed, inf for 0.0 ** -1 as on GPUs), when the target can be read
        # again without a second side effect: a name, or a name indexed by names and literals
        node.target = self.visit(node.target)
        if isinstance(node.op, (ast.Mod, ast.Pow)) and _rereadable(node.target):
            load = _as_load(node.target)
            value = self.visit_BinOp(ast.copy_location(
                ast.BinOp(left=load, op=node.op, right=node.value), node))
            return ast.copy_location(ast.Assign(targets=[node.target], value=value), node)
        node.value = self.visit(node.value)
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
            "with grid.sync(), cuda.threadfence*, cuda.fma, cuda.selp, cuda.popc/ffs/clz/brev/"
            "cbrt, cuda.libdevice's float "
            "functions (exp, rsqrt, fma, sincos, fast_expf...), numba types and device "
            "functions. Run this kernel on the 'cuda' backend, or rewrite that line with these."
        )

    # -- values ----------------------------------------------------------------
    def cuda_value(self, path, node):
        if len(path) == 2 and path[0] in _INDEX_PREFIX and path[1] in AXES:
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
            parts = [make(axis) for axis in AXES[:ndim]]
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
        if len(path) == 2 and path[0] == "libdevice":
            if not hasattr(self.namespace.cuda_value(("libdevice",)), path[1]):
                raise DualgpuError(f"{self.where}: numba.cuda.libdevice has no function "
                                   f"'{path[1]}' ('{dotted(node.func)}'); check its name.")
            if path[1] in LIBDEVICE_FUNCTIONS:
                # libdevice has no CPU code: its formula in math (plain values and duals alike)
                return ast.Call(func=self.bind(LIBDEVICE_FUNCTIONS[path[1]], "libdevice"),
                                args=node.args, keywords=node.keywords)
        if len(path) == 1 and path[0] in BIT_FUNCTIONS and len(node.args) == 1 \
                and not node.keywords:  # popc, ffs, clz, brev, cbrt
            return ast.Call(func=_name(f"_dg_{path[0]}"), args=node.args, keywords=[])
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
        translation = self.translate_device(py_func, self.kernel_name)
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
        if any(isinstance(arg, ast.Starred) for arg in node.args):
            translation.star_called = True  # dev(*args): numba cannot inline such a call
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


def _pure(node):
    """True for an expression of names and literals only (evaluating it twice is harmless)."""
    if isinstance(node, (ast.Name, ast.Constant)):
        return True
    if isinstance(node, ast.Tuple):
        return all(_pure(e) for e in node.elts)
    if isinstance(node, ast.UnaryOp):
        return _pure(node.operand)
    if isinstance(node, ast.BinOp):
        return _pure(node.left) and _pure(node.right)
    return False


def _rereadable(target):
    """True for an assignment target that can be read back: ``x`` or ``a[i, j + 1]``."""
    if isinstance(target, ast.Name):
        return True
    return (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
            and _pure(target.slice))


def _as_load(target):
    """A copy of the target ``x`` / ``a[i]`` that reads it."""
    load = copy.deepcopy(target)
    for node in ast.walk(load):
        if hasattr(node, "ctx"):
            node.ctx = ast.Load()
    return load
