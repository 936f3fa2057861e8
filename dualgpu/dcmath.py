"""A dual-aware stand-in for the ``cmath`` module.

Every function of ``cmath`` is here; those with a complex rule (the complex entries of the
rule table, ``dualgpu.complex_rules``) propagate partials of real and complex duals. Kernels run by
the simulator backend get it in place of ``cmath`` (ported with the import line alone).

Examples
--------
>>> from dualgpu import Dual, dcmath
>>> z = dcmath.exp(1j * Dual(0.0, [1.0]))
>>> complex(z.partials[0])
1j
"""
from dualgpu.core import dcmath as _impl

globals().update({n: getattr(_impl, n) for n in dir(_impl) if not n.startswith("_")})
#: every function of cmath (the constants pi, e, tau, inf, nan, infj and nanj are cmath's)
__all__ = sorted(n for n in dir(_impl)
                 if not n.startswith("_") and n != "RULED" and callable(getattr(_impl, n)))


def __getattr__(name):
    return getattr(_impl, name)
