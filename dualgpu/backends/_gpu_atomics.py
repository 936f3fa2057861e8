"""``cuda.atomic.*`` in the GPU backend's dual specialisations.

The rewritten source of a dual specialisation (see :mod:`dualgpu.backends.gpu`) calls
``_dg_atomic_<op>(...)`` in place of ``cuda.atomic.<op>(...)``. On a plain array each is
numba.cuda's own atomic. On a DualArray:

* ``add`` and ``sub`` are linear, so the value and each lane of the partials are added
  atomically, each on its own: every lane's total is exact whatever order the threads
  come in (the force accumulation of mass-spring and N-body kernels, particle deposits).
  The old dual they return is read lane by lane: exact unless another thread updates
  the same element between the lanes (the value alone is always numba's);
* ``max``, ``min``, ``nanmax``, ``nanmin``, ``exch``, ``cas`` must move the partials
  together with the value that wins, which separate atomics per lane cannot do: refused
  when compiling, naming the operation and what to do instead (the ``cpu`` and
  ``cudasim`` backends run them exactly);
* the integer operations (``inc``, ``dec``, ``and_``, ``or_``, ``xor``) never see duals:
  a dual array holds floats.

A dual added into a plain array is refused as a store of a dual into it is.
"""
import numba.cuda
import numba.cuda.extending
from numba import types
from numba.core.errors import TypingError

from ..errors import DualgpuError
from ..numba_arrays import DualArrayType
from ..numba_types import DualType, make_dual

__all__ = ["ATOMIC_FUNCTIONS", "LINEAR_ATOMICS"]

#: atomics of a dual array whose partials add like the value (run lane by lane)
LINEAR_ATOMICS = ("add", "sub")

#: the atomics numba.cuda has, with their argument names
_SIGNATURES = {
    "add": "ary, idx, val", "sub": "ary, idx, val", "max": "ary, idx, val",
    "min": "ary, idx, val", "nanmax": "ary, idx, val", "nanmin": "ary, idx, val",
    "and_": "ary, idx, val", "or_": "ary, idx, val", "xor": "ary, idx, val",
    "exch": "ary, idx, val", "inc": "ary, idx, val", "dec": "ary, idx, val",
    "cas": "ary, idx, old, val", "compare_and_swap": "ary, old, val",
}


def _lane_index(idx, lane):
    """Source of the partials' index of lane ``lane`` for the value's index ``idx``."""
    if isinstance(idx, types.BaseTuple):
        return f"({lane}," + "".join(f" idx[{d}]," for d in range(len(idx))) + ")"
    return f"({lane}, idx)"


def _refusal(name, ary):
    return TypingError(
        f"cuda.atomic.{name} on a dual array ({ary}) is not supported on the cuda backend: "
        "the partials must move together with the value that wins, which per-lane atomics "
        "cannot do. cuda.atomic.add and cuda.atomic.sub of duals are supported (they are "
        f"linear). Run this kernel on the 'cpu' or 'cudasim' backend, where atomic.{name} of "
        "duals is exact, or write the reduction without the atomic (one thread per output, "
        "or a shared-memory reduction)."
    )


def _plain_refusal(name, ary, val):
    return TypingError(
        f"cuda.atomic.{name}: a Dual ({val}) is stored into a plain {ary.dtype} array "
        "by the atomic: its partials would be dropped. Allocate that array as a DualArray "
        "(dualgpu.cuda.device_array / device_array_like under the driver)."
    )


def _linear_impl(name, ary, idx, val):
    """The implementation of atomic ``name`` (add or sub) on a dual array, per lane count.

    A plain number adds to the value only (its partials are zero); the old partials are
    then read, not updated.
    """
    if isinstance(val, DualType):
        lanes = [f"cuda.atomic.{name}(p, {_lane_index(idx, k)}, d.partials[{k}])"
                 for k in range(ary.n)]
    else:
        lanes = [f"p[{_lane_index(idx, k)}]" for k in range(ary.n)]
    src = (
        "def impl(ary, idx, val):\n"
        "    p = ary.partials\n"
        "    d = as_dual(val)\n"
        f"    old = cuda.atomic.{name}(ary.values, idx, d.value)\n"
        f"    return make(old, ({', '.join(lanes)},))\n"
    )
    namespace = {"cuda": numba.cuda, "make": make_dual, "as_dual": _as_dual(ary.n, ary.dtype)}
    exec(compile(src, f"<dualgpu atomic.{name} {ary}>", "exec"), namespace)
    return namespace["impl"]


_AS_DUAL_CACHE = {}


def _as_dual(n, dtype):
    """A function usable in CUDA kernels: ``v`` itself for a dual of ``n`` lanes, a dual of
    zero partials for a number."""
    key = (n, dtype)
    if key in _AS_DUAL_CACHE:
        return _AS_DUAL_CACHE[key]

    def as_dual(v):
        raise DualgpuError("as_dual is only usable inside kernels compiled for CUDA.")

    @numba.cuda.extending.overload(as_dual)
    def overload(v):
        if isinstance(v, DualType):
            if v.n != n:
                raise TypingError(
                    f"cuda.atomic: a dual with {v.n} lanes added into a dual array with {n} "
                    "lanes; every dual in one computation must have the same lane count."
                )
            return lambda v: v
        if isinstance(v, (types.Float, types.Integer, types.Boolean)):
            src = (f"def impl(v):\n    z = dtype(0)\n"
                   f"    return make(dtype(v), ({'z, ' * n}))\n")
            ns = {"make": make_dual, "dtype": dtype}
            exec(compile(src, f"<dualgpu atomic operand {dtype} lanes={n}>", "exec"), ns)
            return ns["impl"]
        return None

    _AS_DUAL_CACHE[key] = as_dual
    return as_dual


def _make_atomic(name):
    params = _SIGNATURES[name]
    namespace = {"DualgpuError": DualgpuError}
    exec(f"def stub({params}):\n    raise DualgpuError('_dg_atomic_{name} is only usable "
         "inside kernels compiled for CUDA.')\n", namespace)
    stub = namespace["stub"]
    stub.__name__ = f"_dg_atomic_{name}"
    cache = {}

    exec(f"def plain({params}):\n    return cuda.atomic.{name}({params})\n",
         ns := {"cuda": numba.cuda})
    plain = ns["plain"]

    def overload(*args):
        ary = args[0]
        values = args[1:]
        if not isinstance(ary, DualArrayType):
            if isinstance(ary, types.Array) and any(isinstance(v, DualType) for v in values):
                raise _plain_refusal(name, ary, next(v for v in values if isinstance(v, DualType)))
            return plain
        if name not in LINEAR_ATOMICS:
            raise _refusal(name, ary)
        key = (ary, args[1], isinstance(args[2], DualType))
        if key not in cache:
            cache[key] = _linear_impl(name, ary, args[1], args[2])
        return cache[key]

    exec(f"def typed({params}):\n    return overload({params})\n", ns := {"overload": overload})
    numba.cuda.extending.overload(stub)(ns["typed"])
    return stub


#: name -> the dual-aware atomic the rewritten source calls
ATOMIC_FUNCTIONS = {name: _make_atomic(name) for name in _SIGNATURES}
