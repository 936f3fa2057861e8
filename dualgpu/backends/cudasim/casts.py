"""Number casts that keep a dual's partials, for kernels run by the CUDA simulator.

In compiled code ``float32(x)``, ``numba.float32(x)``, ``np.float32(x)`` and
``cuda.float32(x)`` on a dual give a dual (:mod:`dualgpu.compiled.casts`). In plain
Python the same calls end in ``float(dual)``, which raises rather than drop the
partials. A dual launch on the simulator therefore runs the kernel with these
names bound to :class:`Cast` objects: called on a :class:`~dualgpu.Dual` they cast
it (a float type casts the value and every lane; an integer type acts on the value,
as ``int(d)`` does), called on anything else they are the original. The modules
``numpy`` and ``numba`` are seen through :class:`CastingModule`, which hands out
the same casts for their number types.
"""
import types as pytypes

import numpy as np

from dualgpu.core.dual import Dual
from dualgpu.errors import DualgpuError

__all__ = ["Cast", "CastingModule", "cast_for", "cast_dual", "as_dtype"]


def as_dtype(dtype):
    """The numpy dtype named by a numba type, numpy type, dtype, string or :class:`Cast`."""
    if isinstance(dtype, Cast):
        return dtype.dtype
    from numba.core import types

    if isinstance(dtype, types.Type):
        from numba.np import numpy_support

        return numpy_support.as_dtype(dtype)
    return np.dtype(dtype)


def cast_dual(d, dtype):
    """``d`` cast to ``dtype``: a Dual for float32/float64, the value alone for integers."""
    if dtype.kind == "f":
        if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise DualgpuError(
                f"{dtype.name}(dual): a dual is float32 or float64; cast to one of those "
                "(a cast to a smaller float would need its own rules)."
            )
        return Dual(dtype.type(d.value), d.partials.astype(dtype), dtype=dtype)
    if dtype.kind == "b":
        return bool(d.value)
    return dtype.type(d.value)


class Cast:
    """A number type that casts duals (see the module docstring).

    Parameters
    ----------
    original : numba number type or numpy scalar type
        What the name meant; every attribute and any call without a dual goes to it.
    """

    __slots__ = ("original", "dtype")

    def __init__(self, original):
        self.original = original
        self.dtype = as_dtype(original)

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and isinstance(args[0], Dual):
            return cast_dual(args[0], self.dtype)
        return self.original(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.original, name)

    def __getitem__(self, item):
        return self.original[item]

    def __repr__(self):
        return f"<dual-aware cast {self.original!r}>"


_CASTS = {}


def cast_for(value):
    """A :class:`Cast` for a numba number type or numpy number type, else None."""
    from numba.core import types

    if isinstance(value, types.Number) and not isinstance(value, types.Complex):
        key = value
    elif isinstance(value, type) and issubclass(value, (np.integer, np.floating)):
        key = value
    else:
        return None
    try:
        cast = _CASTS.get(key)
    except TypeError:
        return None
    if cast is None:
        cast = _CASTS[key] = Cast(value)
    return cast


class CastingModule(pytypes.ModuleType):
    """A module seen with its number types replaced by :class:`Cast` objects.

    ``extra`` maps names to values looked up first (a callable is called with no
    arguments each time: ``numba.cuda`` inside a launch is the launch's module).
    """

    def __init__(self, wrapped, casts=True, extra=None):
        super().__init__(wrapped.__name__, getattr(wrapped, "__doc__", None))
        self.__dict__["_wrapped"] = wrapped
        self.__dict__["_casts"] = casts
        self.__dict__["_extra"] = dict(extra or {})

    def __getattr__(self, name):
        extra = self.__dict__["_extra"]
        if name in extra:
            return extra[name]()
        value = getattr(self.__dict__["_wrapped"], name)
        if self.__dict__["_casts"]:
            cast = cast_for(value)
            if cast is not None:
                return cast
        return value

    def __repr__(self):
        return f"<module {self.__name__!r} seen by a simulated dual launch>"
