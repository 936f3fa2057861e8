"""Shared memory and warp shuffles of duals in the GPU backend's dual specialisations.

The rewritten source of a dual specialisation (see :mod:`dualgpu.backends.gpu.kernel`)
calls these in place of numba.cuda's:

* ``_dg_shared_array(shape, dtype, N, site)`` for ``cuda.shared.array(shape, dtype)``
  of float32/float64 (a tile of another dtype is left as it is). A float array becomes a
  dual shared array: values and lane-major partials ``(N,) + shape``, two ``.shared``
  allocations. numba allocates one ``.shared``
  variable per *lowering* of ``cuda.shared.array``; an overload implementation is
  lowered once per signature, so ``site`` (a string literal unique to the call site)
  gives every call site its own signature, hence its own allocations. Dynamic shared
  memory (``shape`` 0) is one extern buffer, rewritten to
  ``_dg_dynamic_shared(cuda.shared.array(0, dtype), N)``: the launch asks for ``(1 + N)`` regions of
  the user's byte count (rounded up to 8), the values take the first region and lane k
  the region ``k + 1`` (every dynamic array of a dual launch sees the first region
  only, whatever its dtype, so arrays that the user placed side by side stay apart);
* ``_dg_shfl_sync`` and its ``_up``/``_down``/``_xor`` siblings: a dual shuffles its
  value and each lane.

:func:`shared_sites` reads the shapes and dtypes of the call sites from the source
where they are constants, so that a kernel whose dual tiles no longer fit the 48 KB
of static shared memory a block may have is refused before it is compiled, with the
tiles, their sizes at N lanes and the largest ``chunk_size`` that fits.
"""
import ast
import math

import numba.cuda
import numba.cuda.extending
import numpy as np
from numba import types
from numba.core.errors import TypingError

from dualgpu.errors import DualgpuError
from dualgpu.compiled.types import DualType, make_dual
from dualgpu.backends.common.local_array_types import literal_shape, scalar_dtype
from dualgpu.backends.common.rebind import SHUFFLES
from dualgpu.backends.common.translate import UNRESOLVED
from dualgpu.compiled.arrays import make_dual_array
from dualgpu.compiled.intrinsics import intrinsic
from dualgpu.backends.cudasim.casts import as_dtype

__all__ = [
    "STATIC_SHARED_LIMIT", "SharedSite", "DUAL_DTYPES", "check_static_shared",
    "dynamic_request", "shared_sites",
]

#: Bytes of static shared memory one block may have (every CUDA GPU since Fermi).
STATIC_SHARED_LIMIT = 48 * 1024

#: dtypes of the tiles that hold duals in a dual specialisation
DUAL_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))



def dynamic_request(sharedmem, lanes):
    """Bytes of dynamic shared memory a dual launch asks for: (1 + N) aligned regions."""
    sharedmem = int(sharedmem)
    if not sharedmem or not lanes:
        return sharedmem
    return (1 + int(lanes)) * (-(-sharedmem // 8) * 8)


# --- the shared array -----------------------------------------------------------------------

def _dg_shared_array(shape, dtype, lanes, site):
    """``cuda.shared.array(shape, dtype)`` of a dual specialisation (kernels compiled for CUDA
    only)."""
    raise DualgpuError("_dg_shared_array is only usable inside kernels compiled for CUDA.")


@intrinsic
def _lane_regions(typingctx, buffer, count, lanes):
    """The (lanes, count) C-contiguous view of ``buffer`` that starts at element ``count``."""
    if not isinstance(lanes, types.IntegerLiteral) or not isinstance(buffer, types.Array):
        raise TypingError("_lane_regions(buffer, count, lanes): lanes must be a constant")
    ret = types.Array(buffer.dtype, 2, "C")
    n = lanes.literal_value

    def codegen(context, builder, sig, args):
        flat = context.make_array(sig.args[0])(context, builder, args[0])
        count = context.cast(builder, args[1], sig.args[1], types.intp)
        itemsize = context.get_constant(types.intp, context.get_abi_sizeof(
            context.get_data_type(buffer.dtype)))
        view = context.make_array(ret)(context, builder)
        context.populate_array(
            view,
            data=builder.gep(flat.data, [count]),
            shape=[context.get_constant(types.intp, n), count],
            strides=[builder.mul(count, itemsize), itemsize],
            itemsize=itemsize,
            meminfo=None,
        )
        return view._getvalue()

    return ret(buffer, count, lanes), codegen


def _site_text(site):
    return site.literal_value.split("|", 1)[-1]


@numba.cuda.extending.overload(_dg_shared_array, prefer_literal=True)
def _ov_shared_array(shape, dtype, lanes, site):
    if not isinstance(lanes, types.IntegerLiteral) or not isinstance(site, types.StringLiteral):
        raise TypingError("_dg_shared_array: lanes and site must be compile-time constants")
    constant = literal_shape(shape)
    element = scalar_dtype(dtype)
    where = _site_text(site)
    if constant is None or element is None:
        raise TypingError(
            f"{where}: cuda.shared.array(shape, dtype) in a dual kernel needs a constant int or "
            f"tuple of ints as shape and a numba type as dtype (e.g. cuda.shared.array((16, 4), "
            f"float64)); got shape {shape} and dtype {dtype}."
        )
    n = lanes.literal_value
    dual = element in (types.float32, types.float64)  # a float16 tile cannot hold duals
    namespace = {"cuda": numba.cuda, "make": make_dual_array, "regions": _lane_regions,
                 "SHAPE": constant, "PSHAPE": (n,) + constant, "DT": element, "N": n}
    if not dual:
        raise TypingError(
            f"{where}: a {element} shared array in a dual kernel: write its dtype as a "
            "constant the source names (a numba type such as int32), so that it stays a "
            "plain array."
        )
    if constant == (0,):
        body = ("    buffer = cuda.shared.array(0, DT)\n"
                "    count = buffer.shape[0] // (N + 1)\n"
                "    return make(buffer[:count], regions(buffer, count, N), N)\n")
    else:
        size = (1 + n) * math.prod(constant) * np.dtype(str(element)).itemsize
        if size > STATIC_SHARED_LIMIT:
            raise TypingError(_too_big_message([(where, constant, element, size)], n, size))
        body = "    return make(cuda.shared.array(SHAPE, DT), cuda.shared.array(PSHAPE, DT), N)\n"
    exec("def impl(shape, dtype, lanes, site):\n" + body, namespace)
    return namespace["impl"]


def _dg_dynamic_shared(buffer, lanes):
    """The part of a dynamic shared array a dual launch gives the kernel (CUDA only)."""
    raise DualgpuError("_dg_dynamic_shared is only usable inside kernels compiled for CUDA.")


@numba.cuda.extending.overload(_dg_dynamic_shared, prefer_literal=True)
def _ov_dynamic_shared(buffer, lanes):
    if not isinstance(lanes, types.IntegerLiteral) or not isinstance(buffer, types.Array):
        raise TypingError("_dg_dynamic_shared(buffer, lanes): lanes must be a constant")
    n = lanes.literal_value
    if buffer.dtype not in (types.float32, types.float64):
        raise TypingError(
            f"a dynamic {buffer.dtype} shared array in a dual kernel: write its dtype as a "
            "constant the source names (a numba type such as int32), so that it stays plain."
        )

    def impl(buffer, lanes):
        count = buffer.shape[0] // (n + 1)
        return make_dual_array(buffer[:count], _lane_regions(buffer, count, n), n)

    return impl


def _dg_region_length(buffer, lanes):
    """Elements of a dynamic shared array in the first of the (1 + N) regions (CUDA only)."""
    raise DualgpuError("_dg_region_length is only usable inside kernels compiled for CUDA.")


@numba.cuda.extending.overload(_dg_region_length, prefer_literal=True)
def _ov_region_length(buffer, lanes):
    if not isinstance(lanes, types.IntegerLiteral):
        raise TypingError("_dg_region_length(buffer, lanes): lanes must be a constant")
    n = lanes.literal_value
    return lambda buffer, lanes: buffer.shape[0] // (n + 1)


# --- shuffles -------------------------------------------------------------------------------

def _make_shuffle(name):
    public = getattr(numba.cuda, name)

    def stub(mask, value, b):
        raise DualgpuError(f"_dg_{name} is only usable inside kernels compiled for CUDA.")

    stub.__name__ = f"_dg_{name}"
    cache = {}

    @numba.cuda.extending.overload(stub)
    def overload(mask, value, b):
        if not isinstance(value, DualType):
            return lambda mask, value, b: public(mask, value, b)
        if value.n not in cache:
            lanes = ", ".join(f"shuffle(mask, q[{k}], b)" for k in range(value.n))
            src = ("def impl(mask, value, b):\n    q = value.partials\n"
                   f"    return make(shuffle(mask, value.value, b), ({lanes},))\n")
            ns = {"shuffle": public, "make": make_dual}
            exec(compile(src, f"<dualgpu {name} lanes={value.n}>", "exec"), ns)
            cache[value.n] = ns["impl"]
        return cache[value.n]

    return stub


#: name -> the dual-aware shuffle the rewritten source calls
SHUFFLE_FUNCTIONS = {name: _make_shuffle(name) for name in SHUFFLES}


# --- static sizes, read from the source -----------------------------------------------------

class SharedSite:
    """One ``cuda.shared.array`` call in a kernel or device function's source.

    ``shape`` and ``dtype`` (numpy) are None where the source does not make them constants.
    """

    def __init__(self, label, text, shape, dtype):
        self.label = label
        self.text = text
        self.shape = shape
        self.dtype = dtype

    @property
    def dynamic(self):
        return self.shape == (0,)

    def bytes(self, lanes):
        """Bytes per block with ``lanes`` lanes (None if unknown, 0 if dynamic)."""
        if self.shape is None or self.dtype is None:
            return None
        if self.dynamic:
            return 0
        plain = math.prod(self.shape) * self.dtype.itemsize
        return plain * (1 + lanes) if self.dtype.kind == "f" else plain


class _NotConstant(Exception):
    pass


_OPERATORS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
              ast.Mult: lambda a, b: a * b, ast.FloorDiv: lambda a, b: a // b,
              ast.Mod: lambda a, b: a % b, ast.Pow: lambda a, b: a ** b}


def _constant(node, namespace):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Tuple):
        return tuple(_constant(e, namespace) for e in node.elts)
    if isinstance(node, (ast.Name, ast.Attribute)):
        value = namespace.value(node)
        if value is UNRESOLVED:
            raise _NotConstant()
        return value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_constant(node.left, namespace),
                                         _constant(node.right, namespace))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_constant(node.operand, namespace)
    raise _NotConstant()


def site_shape_and_dtype(shape_node, dtype_node, namespace):
    """The shape (tuple of ints) and numpy dtype of a call, each None where not constant."""
    try:
        shape = _constant(shape_node, namespace)
        shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(s) for s in shape)
    except (_NotConstant, TypeError, ValueError):
        shape = None
    try:
        dtype = as_dtype(_constant(dtype_node, namespace))
    except Exception:  # anything that is not a constant dtype
        dtype = None
    return shape, dtype


def shared_sites(copy):
    """The :class:`SharedSite` list recorded on a prepared copy (empty if none)."""
    return list(getattr(copy, "__dualgpu_shared__", ()))


def _too_big_message(rows, lanes, total, plain=None, floats=None):
    listing = "; ".join(
        f"{where}: {'x'.join(str(s) for s in shape)} {np.dtype(str(dtype)).name} = {size} bytes"
        for where, shape, dtype, size in rows
    )
    if plain is not None and floats:
        fit = (STATIC_SHARED_LIMIT - plain) // floats
    else:
        per_lane = total // (1 + lanes)
        fit = STATIC_SHARED_LIMIT // per_lane - 1 if per_lane else lanes
    advice = (f"Use chunk_size={fit} or less (dualgpu.jacobian(..., chunk_size={fit}), "
              "jvp_batch likewise), or smaller tiles." if fit >= 1 else
              "Even one lane does not fit: use smaller tiles (fewer threads per block).")
    return (
        f"the shared arrays of this dual kernel need {total} bytes per block with {lanes} "
        f"lane(s) ({listing}), more than the {STATIC_SHARED_LIMIT} bytes (48 KB) of static "
        "shared memory a block may have: a float tile of a dual kernel holds its values and "
        f"{lanes} lane(s) of partials. " + advice
    )


def check_static_shared(name, sites, lanes):
    """Raise a clear error if the static shared arrays of a kernel exceed 48 KB at ``lanes``.

    ``sites`` are the kernel's :class:`SharedSite` objects and those of the device functions
    it calls; sites whose size is not a constant are left to the compile-time check.
    """
    known = [s for s in sites if s.bytes(lanes) is not None and not s.dynamic]
    total = sum(s.bytes(lanes) for s in known)
    if total <= STATIC_SHARED_LIMIT:
        return
    plain = sum(s.bytes(0) for s in known)
    floats = sum(s.bytes(0) for s in known if s.dtype.kind == "f")
    rows = [(s.label, s.shape, s.dtype, s.bytes(lanes)) for s in known]
    raise DualgpuError(f"kernel {name}: " + _too_big_message(rows, lanes, total, plain, floats))
