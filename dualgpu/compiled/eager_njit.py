"""Host ``@njit`` functions with eager signatures, called with duals: a dual specialisation.

numba compiles ``@njit("float64(float64)")`` for its signatures only and then refuses other
arguments with ``No matching definition``. As dualgpu does for eager ``cuda.jit`` signatures,
a call with a Dual or DualArray argument (plain, tagged, or inside a tuple) compiles one more
specialisation of the same Python function for the dual types; plain calls keep numba's
behaviour (the signatures, with their conversions). The touch point is numba's own callback
for a call that matches no signature of a dispatcher that may not compile
(``_DispatcherBase._search_new_conversions``): returning True makes numba's C dispatcher
resolve the call again, now against the new specialisation.
"""
from numba import types
from numba.core import dispatcher, errors

from dualgpu.compiled.types import (
    ComplexDualType, DualArrayType, DualType, TaggedDualArrayType, TaggedDualType,
)

__all__ = ["install", "holds_dual"]

_DUAL_TYPES = (DualType, DualArrayType, TaggedDualType, TaggedDualArrayType, ComplexDualType)
_original = dispatcher._DispatcherBase._search_new_conversions


def holds_dual(ty):
    """True if the numba type ``ty`` is a dual type or a tuple holding one."""
    if isinstance(ty, _DUAL_TYPES):
        return True
    if isinstance(ty, types.BaseTuple):
        return any(holds_dual(t) for t in ty)
    return False


def _search_new_conversions(self, *args, **kws):
    found = _original(self, *args, **kws)
    if found or kws or self._can_compile:
        return found
    try:
        argtypes = tuple(self.typeof_pyval(a) for a in args)
    except Exception:  # an argument numba cannot type: numba's own message follows
        return found
    if not any(holds_dual(t) for t in argtypes):
        return found
    self._can_compile = True  # one dual specialisation of the eagerly compiled function
    try:
        self.compile(argtypes)
    except errors.TypingError as exc:
        signatures = ", ".join(str(s) for s in self.nopython_signatures)
        raise errors.TypingError(
            f"{self.py_func.__qualname__} was compiled for its signature(s) {signatures} and "
            f"called with duals ({', '.join(map(str, argtypes))}); dualgpu compiles a dual "
            "version of it, which failed: numba's message follows. Fix: use operations that "
            "take duals in it, or call it with .value where no derivative must flow through "
            f"it.\n\n{exc}") from exc
    finally:
        self._can_compile = False
    return True


def install():
    """Make numba's dispatchers compile a dual specialisation for eager-signature functions."""
    dispatcher._DispatcherBase._search_new_conversions = _search_new_conversions
