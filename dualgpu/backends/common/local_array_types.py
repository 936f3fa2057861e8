"""Typing helpers shared by the backends' ``cuda.local.array`` implementations."""
from numba import types

__all__ = ["literal_shape", "scalar_dtype"]


def scalar_dtype(ty):
    """The element type named by a local array's dtype argument, or None."""
    if isinstance(ty, types.NumberClass):
        return ty.instance_type
    if isinstance(ty, types.DType):
        return ty.dtype
    if isinstance(ty, types.Number):  # a numba type object passed as a global
        return ty
    return None


def literal_shape(ty):
    """The shape as a tuple of ints if ``ty`` is a literal int or tuple of literal ints, else
    None."""
    if isinstance(ty, types.IntegerLiteral):
        return (ty.literal_value,)
    if isinstance(ty, types.BaseTuple) and all(isinstance(t, types.IntegerLiteral) for t in ty):
        return tuple(t.literal_value for t in ty)
    return None
