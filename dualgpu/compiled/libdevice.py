"""``cuda.libdevice.*`` given a dual: an error that names the function and the fix.

numba.cuda's libdevice functions (``cuda.libdevice.exp``...) are typed for floats only;
a dual reaching one failed with numba's candidate list. dualgpu's rules are written
for ``math``: numba.cuda lowers ``math.exp`` to the same libdevice function
(``__nv_exp``), so the fix is to call ``math`` (or to add a rule for a function ``math``
lacks).
"""
import numba.cuda.libdevice as _libdevice
from numba.cuda.extending import overload  # CUDA's registry: numba-cuda keeps core's
                                           # overloads of numba's own functions out

from dualgpu.errors import UnsupportedFeatureError
from dualgpu.compiled.types import DualType

__all__ = []


def _math_name(name):
    """``expf`` -> ``exp`` (the float32 twin), ``erf`` -> ``erf``."""
    return name[:-1] if name.endswith("f") and hasattr(_libdevice, name[:-1]) else name


def _message(name):
    return (
        f"cuda.libdevice.{name} cannot take a Dual: dualgpu's derivative rules are written for "
        f"math. Call math.{_math_name(name)}(x) instead where "
        "math has it (numba.cuda lowers math functions to the same libdevice calls, float32 "
        "to the f-suffixed ones); otherwise add a rule for it to UNARY_RULES or BINARY_RULES "
        "in dualgpu/rules.py, or call it on the value (x.value) if no derivative is needed.")


def _register(name, fn):
    def typer(*args):
        if any(isinstance(a, DualType) for a in args):
            raise UnsupportedFeatureError(_message(name))
        return None

    overload(fn)(typer)


for _name in dir(_libdevice):
    _fn = getattr(_libdevice, _name)
    if (not _name.startswith("_") and callable(_fn)
            and getattr(_fn, "__module__", "") == _libdevice.__name__):
        _register(_name, _fn)
