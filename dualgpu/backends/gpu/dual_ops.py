"""``cuda.fma``, ``cuda.selp`` and ``cuda.atomic.*`` in the GPU backend's dual specialisations.

numba.cuda types these for plain numbers and arrays only. The rewritten source of a dual
specialisation (see :mod:`dualgpu.backends.gpu.kernel`) calls these in their place; with plain
arguments each calls numba.cuda's own, so nothing changes for plain values:

* ``_dg_fma(a, b, c)``: the value is ``cuda.fma`` of the values (one rounding, bit for bit
  the plain kernel's), the partials those of ``a * b + c``;
* ``_dg_selp(cond, a, b)``: value and partials of the operand chosen;
* ``_dg_cbrt(x)``: the value is ``cuda.cbrt`` of the value, the partials those of libdevice's
  cbrt formula (:mod:`dualgpu.compiled.libdevice`);
* ``_dg_atomic_add`` / ``_dg_atomic_sub`` on a dual array: one atomic per member (the value,
  then each lane of the partials). Sums commute member by member, so the result is exact
  whatever the order of the threads. The old value such an atomic returns is refused when the
  kernel uses it: value and lanes are added by separate atomics, so the old lanes may come
  from another interleaving of the threads than the old value;
* the other atomics on a dual array (``max``, ``min``, ``nanmax``, ``nanmin``, ``exch``,
  ``cas``) are refused with the workaround: they would have to move a value and its lanes
  together, which a GPU cannot do in one atomic. The cpu and cudasim backends run them.

The last argument of each rewritten atomic, a literal, says whether the call's result is
discarded (the call is a statement of its own).
"""
import numba.cuda
import numba.cuda.extending
from numba import types
from numba.core.errors import TypingError

from dualgpu.errors import DualgpuError, UnsupportedFeatureError
from dualgpu.compiled.arrays import DualArrayType
from dualgpu.compiled.libdevice import CPU_FUNCTIONS
from dualgpu.compiled.types import DualType, make_dual

__all__ = ["ATOMIC_FUNCTIONS", "DUAL_OP_NAMES", "dual_cbrt", "dual_fma", "dual_selp"]

#: numba.cuda names whose calls the dual source rewrite replaces here
DUAL_OP_NAMES = frozenset(("fma", "selp", "cbrt", "atomic"))

#: atomics with a dual version on the GPU (one atomic per member)
_SUMS = ("add", "sub")

#: atomics that cannot move a value and its lanes together on a GPU
_REFUSED = ("max", "min", "nanmax", "nanmin", "exch", "cas", "compare_and_swap")


def _stub(name):
    def stub(*args):
        raise DualgpuError(f"{name} is only usable inside kernels compiled for CUDA.")

    stub.__name__ = name
    return stub


def _value(x):
    return "{0}.value" if isinstance(x, DualType) else "{0}"


# --- fma and selp -------------------------------------------------------------------------

dual_fma = _stub("_dg_fma")


@numba.cuda.extending.overload(dual_fma)
def _ov_fma(a, b, c):
    if not any(isinstance(x, DualType) for x in (a, b, c)):
        return lambda a, b, c: numba.cuda.fma(a, b, c)
    dtype = _result_dtype(a, b, c)
    values = ", ".join(_value(x).format(n) for x, n in zip((a, b, c), "abc"))
    src = ("def impl(a, b, c):\n"
           "    lanes = (a * b + c).partials\n"
           f"    return make(DT(cuda.fma({values})), lanes)\n")
    namespace = {"cuda": numba.cuda, "make": make_dual, "DT": dtype}
    exec(compile(src, "<dualgpu cuda.fma of duals>", "exec"), namespace)
    return namespace["impl"]


def _result_dtype(*tys):
    """The dtype of ``a * b + c`` on these operands: float32 only when every float is float32."""
    floats = [t.dtype if isinstance(t, DualType) else t for t in tys]
    if all(f == types.float32 for f in floats):
        return types.float32
    return types.float64


dual_selp = _stub("_dg_selp")


@numba.cuda.extending.overload(dual_selp)
def _ov_selp(cond, a, b):
    if not isinstance(a, DualType) and not isinstance(b, DualType):
        return lambda cond, a, b: numba.cuda.selp(cond, a, b)

    def impl(cond, a, b):
        return a if cond else b

    return impl


dual_cbrt = _stub("_dg_cbrt")


@numba.cuda.extending.overload(dual_cbrt)
def _ov_cbrt(x):
    if not isinstance(x, DualType):
        return lambda x: numba.cuda.cbrt(x)
    dtype = x.dtype
    formula = CPU_FUNCTIONS["cbrtf" if dtype == types.float32 else "cbrt"]

    def impl(x):
        return make_dual(dtype(numba.cuda.cbrt(x.value)), formula(x).partials)

    return impl


# --- atomics --------------------------------------------------------------------------------

def _dual_sum_atomic(op, ary, idx, val, discarded):
    if not isinstance(discarded, types.BooleanLiteral) or not discarded.literal_value:
        raise UnsupportedFeatureError(
            f"cuda.atomic.{op} on a dual array: the kernel uses the old value it returns, which "
            "the cuda backend cannot give for duals (the value and each lane are updated by "
            "separate atomics, so the old lanes may come from another order of the threads "
            f"than the old value). Call cuda.atomic.{op}(...) as a statement of its own (its "
            "result unused), or run this kernel on the cpu or cudasim backend."
        )
    n = ary.n
    lane_index = ("(k, {idx})" if isinstance(idx, types.Integer)
                  else "(k,) + {idx}").format(idx="idx")
    lines = ["def impl(ary, idx, val, discarded):",
             f"    cuda.atomic.{op}(ary.values, idx, {_value(val).format('val')})"]
    if isinstance(val, DualType):
        lines.append("    q = val.partials")
        for k in range(n):
            lines.append(f"    cuda.atomic.{op}(ary.partials, "
                         f"{lane_index.replace('k', str(k), 1)}, q[{k}])")
    src = "\n".join(lines) + "\n"
    namespace = {"cuda": numba.cuda}
    exec(compile(src, f"<dualgpu cuda.atomic.{op} lanes={n}>", "exec"), namespace)
    return namespace["impl"]


#: parameters after the array of each atomic numba.cuda has (the rewrite adds ``discarded``)
_PARAMETERS = {"cas": ("idx", "old", "val"), "compare_and_swap": ("old", "val")}


def _make_atomic(op):
    params = _PARAMETERS.get(op, ("idx", "val"))
    stub = _stub(f"_dg_atomic_{op}")

    def overload(ary, *args):
        *args, discarded = args
        if not isinstance(ary, DualArrayType):
            if any(isinstance(a, DualType) for a in args):
                raise TypingError(
                    f"cuda.atomic.{op} stores a dual into a plain array, which would drop its "
                    "partials. Allocate the array with dualgpu.cuda (to_device, device_array, "
                    "device_array_like) while the driver runs, or pass a DualArray."
                )
            return plain
        if op in _SUMS:
            return _dual_sum_atomic(op, ary, args[0], args[1], discarded)
        raise UnsupportedFeatureError(
            f"cuda.atomic.{op} on a dual array is not supported on the cuda backend: it would "
            "have to update a value and its partials in one atomic step, which a GPU cannot do "
            "(the cpu and cudasim backends run it). For a maximum or minimum, reduce in the "
            "block with max()/min() (a dual keeps the partials of the operand chosen), write "
            "one result per block, and combine the block results in a second kernel; "
            "cuda.atomic.add and sub on dual arrays are supported."
        )

    names = ", ".join(("ary",) + params)
    src = (f"def plain({names}, discarded):\n    return cuda.atomic.{op}({names})\n"
           f"def typed({names}, discarded):\n    return overload({names}, discarded)\n")
    namespace = {"cuda": numba.cuda, "overload": overload}
    exec(compile(src, f"<dualgpu cuda.atomic.{op}>", "exec"), namespace)
    plain = namespace["plain"]
    numba.cuda.extending.overload(stub, prefer_literal=True)(namespace["typed"])
    return stub


#: op name -> the function the rewritten source calls for ``cuda.atomic.<op>``
ATOMIC_FUNCTIONS = {op: _make_atomic(op) for op in _SUMS + _REFUSED + ("and_", "or_", "xor",
                                                                      "inc", "dec")}
