"""The parts of complex host duals: ``np.real``, ``np.imag``, ``np.angle``.

numpy's ``real``, ``imag`` and ``angle`` are functions, not ufuncs; on duals they apply the
real-linear rules of :mod:`dualgpu.complex_rules` (``np.conj`` and ``np.abs`` are ufuncs:
:mod:`dualgpu.host.ufuncs`). Of a real dual, ``np.real`` is the dual itself, ``np.imag`` and
``np.angle`` are zeros (``angle`` of a negative number is pi) with zero partials.

Examples
--------
>>> import numpy as np, dualgpu
>>> u = dualgpu.dual_array([0.5, 1.0], np.eye(2))
>>> z = u * np.exp(1j * u)                      # u e^{iu}
>>> np.angle(z).partials.tolist()               # d arg / du = 1
[[1.0, 0.0], [0.0, 1.0]]
"""
import numpy as np

from dualgpu.host.operands import registrar, split, wrap
from dualgpu.host.ufuncs import complex_partials

__all__ = ["FUNCTIONS"]

#: numpy function -> implementation for duals.
FUNCTIONS = {}
implements = registrar(FUNCTIONS)


def _part(key, function, x, what):
    pair = split(x, what)
    values, partials = pair
    ans = np.asarray(function(values))
    if partials is None:
        return wrap(ans, None)
    if np.asarray(values).dtype.kind != "c":
        if key == "real":
            return x
        return wrap(ans, np.zeros((partials.shape[0],) + ans.shape, ans.dtype))
    return wrap(ans, complex_partials(key, [pair], [values], ans, partials.shape[0], what))


@implements(np.real)
def real(val):
    """The real part: ``Re(z)``, partials ``Re(dz)``."""
    return _part("real", np.real, val, "numpy.real")


@implements(np.imag)
def imag(val):
    """The imaginary part: ``Im(z)``, partials ``Im(dz)``."""
    return _part("imag", np.imag, val, "numpy.imag")


@implements(np.angle)
def angle(z, deg=False):
    """The argument of ``z`` (radians, or degrees with ``deg=True``): partials ``Im(dz / z)``.

    Zero partials at ``z = 0`` (see :mod:`dualgpu.complex_rules`).
    """
    result = _part("phase", np.angle, z, "numpy.angle")
    return np.multiply(result, 180 / np.pi) if deg else result
