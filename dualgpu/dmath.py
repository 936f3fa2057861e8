"""A dual-aware stand-in for the :mod:`math` module (public name of :mod:`dualgpu.dmath`).

Every function of :mod:`math` is here; those with a rule in :mod:`dualgpu.rules` propagate
partials. See :mod:`dualgpu.dmath` for how it works. Rules added with
:func:`dualgpu.rules.define` appear here too.

Examples
--------
>>> from dualgpu import Dual, dmath
>>> d = dmath.sin(Dual(0.0, [1.0]))
>>> float(d.value), float(d.partials[0])
(0.0, 1.0)
"""
from dualgpu import rules as _rules
from dualgpu.core import dmath as _impl


def _bind(new=None, old=None):
    # the names bound here too, so that ``from dualgpu.dmath import *`` gives them; again after
    # every dualgpu.rules.define (core.dmath, subscribed first, has rebuilt them by then)
    names = [n for n in dir(_impl) if not n.startswith("_")]
    globals().update({n: getattr(_impl, n) for n in names})
    # the functions (the constants pi, e, tau, inf and nan are math's, without a page)
    globals()["__all__"] = sorted(n for n in names if callable(getattr(_impl, n)))


__all__ = []  # every function of math, filled by _bind
_bind()
_rules.subscribe(_bind)


def __getattr__(name):
    return getattr(_impl, name)


def __dir__():
    return sorted(set(dir(_impl)) - {"_impl"})
