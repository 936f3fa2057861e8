"""``cuda.fma`` on the cpu backend: one rounding, as on the GPU, for plain numbers and duals.

The cpu backend's rewrite turns ``cuda.fma(a, b, c)`` into ``_dg_fma(a, b, c)``. With plain
operands it is LLVM's ``llvm.fma`` (a fused multiply-add: ``a * b + c`` rounded once, what the
GPU's ``fma.rn`` computes, bit for bit); with duals the value is that fused value and the
partials are those of ``a * b + c``, as in the GPU backend's dual specialisations
(:mod:`dualgpu.backends.gpu.dual_ops`).

Examples
--------
>>> from numba import njit
>>> a, b, c = 1.0 + 2.0 ** -30, 1.0 - 2.0 ** -30, -1.0
>>> njit(lambda a, b, c: cpu_fma(a, b, c))(a, b, c) == -(2.0 ** -60)   # exact; a*b+c gives 0
True
"""
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.extending import overload

from dualgpu.compiled.intrinsics import intrinsic
from dualgpu.compiled.types import DualType, make_dual

__all__ = ["cpu_fma"]


def cpu_fma(a, b, c):
    """``a * b + c`` rounded once (only in code compiled by numba for the CPU)."""
    return a * b + c


@intrinsic
def _fused(typingctx, a, b, c):
    if not (isinstance(a, types.Float) and a == b == c):
        raise TypingError(f"_fused: three floats of one type expected; got {a}, {b}, {c}")

    def codegen(context, builder, signature, args):
        lltype = context.get_value_type(a)
        fnty = ir.FunctionType(lltype, [lltype] * 3)
        fn = cgutils.get_or_insert_function(
            builder.module, fnty, f"llvm.fma.{lltype.intrinsic_name}")
        return builder.call(fn, args)

    return a(a, b, c), codegen


def _result_dtype(*tys):
    """The dtype of ``a * b + c`` as ``cuda.fma`` types it: float32 when every operand is."""
    floats = [t.dtype if isinstance(t, DualType) else t for t in tys]
    return types.float32 if all(f == types.float32 for f in floats) else types.float64


def _is_operand(t):
    return isinstance(t, (DualType, types.Float, types.Integer, types.Boolean))


@overload(cpu_fma, target="cpu")
def _ov_cpu_fma(a, b, c):
    if not all(_is_operand(t) for t in (a, b, c)):
        return None
    dtype = _result_dtype(a, b, c)
    if not any(isinstance(t, DualType) for t in (a, b, c)):
        return lambda a, b, c: _fused(dtype(a), dtype(b), dtype(c))
    values = ", ".join(f"DT({n}.value)" if isinstance(t, DualType) else f"DT({n})"
                       for t, n in zip((a, b, c), "abc"))
    source = ("def impl(a, b, c):\n"
              "    lanes = (a * b + c).partials\n"
              f"    return make(fused({values}), lanes)\n")
    namespace = {"make": make_dual, "fused": _fused, "DT": dtype}
    exec(compile(source, "<dualgpu cuda.fma of duals, cpu>", "exec"), namespace)
    return namespace["impl"]
