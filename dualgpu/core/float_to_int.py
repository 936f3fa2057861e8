"""``math.floor``/``ceil``/``trunc`` as numba.cuda compiles them, on every backend.

numba types ``math.floor(x)`` of a float as an int64. On the GPU the conversion
is PTX's ``cvt.rzi.s64.f64`` (``.f32``), which saturates: NaN gives 0, ``+inf``
and values at or above 2**63 give ``2**63 - 1``, ``-inf`` and values below
-2**63 give ``-2**63``. numba's CPU target converts with ``fptosi`` (x86 gives
``-2**63`` for all of those), and Python's ``math.floor`` raises on inf and
NaN. The cpu backend calls :func:`floor_i64` (``ceil_i64``, ``trunc_i64``) in
place of ``math.floor`` in kernels, and the simulator's ``math`` returns
:func:`saturate_i64` of the rounded value, so all three agree with the GPU.
Duals round their value (the derivative of a step function is zero).

Examples
--------
>>> import math
>>> from dualgpu.core.float_to_int import saturate_i64
>>> saturate_i64(math.inf), saturate_i64(-math.inf), saturate_i64(math.nan)
(9223372036854775807, -9223372036854775808, 0)
>>> saturate_i64(-2.0)
-2
"""
import math

import numpy as np
from numba import types
from numba.extending import overload, register_jitable

from dualgpu.core.dual import Dual, primal_value
from dualgpu.core.traced_branch import (is_global_tracer, refuse_traced_branch,
                                        refuse_traced_python)

__all__ = ["INT64_MAX", "INT64_MIN", "saturate_i64", "floor_i64", "ceil_i64", "trunc_i64"]

INT64_MAX = 2 ** 63 - 1
INT64_MIN = -2 ** 63
_TWO_63 = 9223372036854775808.0  # 2**63, exact in float32 and float64


def saturate_i64(rounded):
    """Return the int64 that PTX's ``cvt.rzi.s64`` gives for the float ``rounded``.

    Parameters
    ----------
    rounded : float
        A float with an integral value (or inf/NaN).

    Returns
    -------
    int
        0 for NaN; ``rounded`` clamped to ``[INT64_MIN, INT64_MAX]`` otherwise.

    Examples
    --------
    >>> saturate_i64(1e300)
    9223372036854775807
    """
    rounded = float(rounded)
    if rounded != rounded:
        return 0
    if rounded >= _TWO_63:
        return INT64_MAX
    if rounded < -_TWO_63:
        return INT64_MIN
    return int(rounded)


@register_jitable
def _saturate(rounded):
    if rounded != rounded:
        return np.int64(0)
    if rounded >= _TWO_63:
        return np.int64(INT64_MAX)
    if rounded < -_TWO_63:
        return np.int64(INT64_MIN)
    return np.int64(rounded)


def _python(rounding):
    def convert(x):
        if isinstance(x, Dual):
            refuse_traced_python(x.partials)  # a global sparsity tracer: traced_branch
        value = primal_value(x) if isinstance(x, Dual) else x  # a dual's innermost value
        if isinstance(value, (int, np.integer)):
            return int(value)
        return saturate_i64(rounding(float(value)))

    return convert


floor_i64 = _python(np.floor)
floor_i64.__name__ = "floor_i64"
floor_i64.__doc__ = "``math.floor(x)`` as numba.cuda compiles it (saturating int64; see module)."
ceil_i64 = _python(np.ceil)
ceil_i64.__name__ = "ceil_i64"
ceil_i64.__doc__ = "``math.ceil(x)`` as numba.cuda compiles it (saturating int64; see module)."
trunc_i64 = _python(np.trunc)
trunc_i64.__name__ = "trunc_i64"
trunc_i64.__doc__ = "``math.trunc(x)`` as numba.cuda compiles it (saturating int64; see module)."


def _register(function, rounding):
    @overload(function, target="cpu", jit_options={"inline": "always"})
    def _ov(x):
        if isinstance(x, types.Integer):
            return lambda x: np.int64(x)
        if isinstance(x, types.Float):
            return lambda x: _saturate(rounding(x))
        if isinstance(x, types.Boolean):
            return lambda x: np.int64(x)
        if is_global_tracer(x):  # a global sparsity tracer: an index from the input
            def refuse(x):
                refuse_traced_branch(x.partials)
                return function(x.value)
            return refuse
        # a dual (first order, tagged or nested): round its value
        return lambda x: function(x.value)


_register(floor_i64, np.floor)
_register(ceil_i64, np.ceil)
_register(trunc_i64, np.trunc)

#: math function -> the saturating version the cpu backend calls in kernels
REPLACEMENTS = {math.floor: floor_i64, math.ceil: ceil_i64, math.trunc: trunc_i64}
