"""``cuda.popc``, ``cuda.ffs``, ``cuda.clz``, ``cuda.brev`` and ``cuda.cbrt`` on the cpu backend.

numba.cuda compiles them to LLVM's bit intrinsics and libdevice (``__nv_ffs``, ``__nv_brev``,
``__nv_cbrt``), with these types (``numba/cuda/cudadecl.py``, checked with ``compile_ptx``):
``popc`` and ``clz`` return their argument's integer type; ``ffs`` returns a uint32, the
1-based place of the lowest set bit (0 for 0); ``brev`` reverses the bits of a uint64, or the
low 32 of any other integer; ``cbrt`` takes and returns float32 or float64. The cpu backend's
rewrite turns them into ``_dg_<name>`` calls (:data:`FUNCTIONS`): the same LLVM intrinsics on
the CPU, and for ``cbrt`` of a dual libdevice's formula (:mod:`dualgpu.compiled.libdevice`),
so the warp-aggregated atomic (``leader = cuda.ffs(cuda.activemask()) - 1``,
``cuda.popc(...)``) and bit tricks run as on the GPU (they were refused, plain arrays too).

Examples
--------
>>> from numba import njit
>>> njit(lambda x: (cpu_popc(x), cpu_ffs(x), cpu_clz(x)))(12)
(2, 3, 60)
"""
from numba import types
from numba.core.errors import TypingError
from numba.extending import overload

from dualgpu.compiled.intrinsics import intrinsic
from dualgpu.compiled.libdevice import CPU_FUNCTIONS
from dualgpu.compiled.types import DualType

__all__ = ["FUNCTIONS", "cpu_popc", "cpu_ffs", "cpu_clz", "cpu_brev", "cpu_cbrt"]


def _integer(name, x):
    if isinstance(x, types.Boolean):
        return types.uint8
    if not isinstance(x, types.Integer):
        raise TypingError(f"cuda.{name} takes an integer; got {x}")
    return x


@intrinsic
def cpu_popc(typingctx, x):
    """``cuda.popc(x)``: the number of set bits, in ``x``'s type."""
    ty = _integer("popc", x)

    def codegen(context, builder, signature, args):
        value = context.cast(builder, args[0], x, ty)
        return builder.ctpop(value)

    return ty(x), codegen


@intrinsic
def cpu_clz(typingctx, x):
    """``cuda.clz(x)``: the number of leading zero bits of ``x``'s width (its width for 0)."""
    ty = _integer("clz", x)

    def codegen(context, builder, signature, args):
        value = context.cast(builder, args[0], x, ty)
        return builder.ctlz(value, context.get_constant(types.boolean, 0))

    return ty(x), codegen


@intrinsic
def cpu_ffs(typingctx, x):
    """``cuda.ffs(x)``: 1 + the place of the lowest set bit, 0 for 0, as a uint32."""
    ty = _integer("ffs", x)

    def codegen(context, builder, signature, args):
        value = context.cast(builder, args[0], x, ty)
        zero = value.type(0)
        trailing = builder.cttz(value, context.get_constant(types.boolean, 0))
        place = builder.add(trailing, value.type(1))
        found = builder.select(builder.icmp_unsigned("==", value, zero), zero, place)
        return context.cast(builder, found, ty, types.uint32)

    return types.uint32(x), codegen


@intrinsic
def cpu_brev(typingctx, x):
    """``cuda.brev(x)``: a uint64's 64 bits reversed, any other integer's low 32 (numba.cuda's
    typing picks ``brev(uint32)`` for an int64: PTX ``brev.b32``)."""
    ty = types.uint64 if _integer("brev", x) == types.uint64 else types.uint32

    def codegen(context, builder, signature, args):
        return builder.bitreverse(context.cast(builder, args[0], x, ty))

    return ty(x), codegen


def cpu_cbrt(x):
    """``cuda.cbrt(x)`` (only in code compiled by numba for the CPU)."""
    return x


@overload(cpu_cbrt, target="cpu")
def _ov_cpu_cbrt(x):
    dtype = x.dtype if isinstance(x, DualType) else x
    if isinstance(dtype, types.Integer):
        dtype = types.float64  # numba.cuda converts an integer to float64 here
    if not isinstance(dtype, types.Float):
        raise TypingError(f"cuda.cbrt takes a float32 or float64; got {x}")
    formula = CPU_FUNCTIONS["cbrtf" if dtype == types.float32 else "cbrt"]
    if isinstance(x, DualType):
        return lambda x: formula(x)
    return lambda x: formula(dtype(x))


#: ``cuda.<name>`` -> the function the cpu backend's rewrite calls instead
FUNCTIONS = {"popc": cpu_popc, "ffs": cpu_ffs, "clz": cpu_clz, "brev": cpu_brev,
             "cbrt": cpu_cbrt}
