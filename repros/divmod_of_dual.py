"""divmod(dual, float) in @njit: plain numba compiles divmod(float, float); a dual gets a
numba TypingError listing candidate signatures (no rule, and no MissingRuleError naming it)."""
from numba import njit
from dualgpu.core.dual import Dual


@njit
def f(a, b):
    q, r = divmod(a, b)
    return q + r


print("plain:", f(0.7, 0.3))
try:
    print("dual:", f(Dual(0.7, (1.0,)), 0.3))
except Exception as e:
    print("dual:", type(e).__name__, [l for l in str(e).splitlines() if "No implementation" in l][:1])
