"""Eager signatures of ported kernels: ``@cuda.jit("void(float32[:], float32)")``.

numba.cuda compiles such a kernel for the declared types only, and a launch converts
its scalar arguments to them: a Python float given to a ``float32`` parameter is a
float32 in the kernel, so the kernel computes in float32. dualgpu compiles per argument
types at launch (a dual specialisation needs dual types), so it applies the declaration
to the arguments instead, on every backend, before the launch:

* a scalar is cast to the declared type: floats (and Duals, keeping their partials) to
  the declared float, numbers to the declared integer, anything to a declared bool;
* an array must have the declared dtype and number of dimensions (a DualArray: its
  values), and be C-contiguous where the signature says ``[::1]``. numba.cuda passes a
  mismatched array through (its bytes are then read as the declared dtype) or, with
  several signatures, refuses it; here it is refused with the fix.

Several signatures (a list) select the first that the arguments fit.
"""
import numbers

import numpy as np
from numba import types
from numba.core import sigutils

from dualgpu.core.dual import Dual
from dualgpu.core.dualarray import DualArray
from dualgpu.errors import DualgpuError

__all__ = ["parse_signatures", "apply_signature"]


def parse_signatures(sig):
    """Return the argument types of each signature in ``sig`` (a string, Signature or list)."""
    sigs = sig if isinstance(sig, list) else [sig]
    parsed = []
    for one in sigs:
        argtypes, _ = sigutils.normalize_signature(one)
        parsed.append(tuple(argtypes))
    return parsed


def _describe(value):
    if isinstance(value, DualArray):
        return f"a DualArray of {value.dtype} with {len(value.shape)} dimension(s)"
    if hasattr(value, "dtype") and hasattr(value, "shape") and np.ndim(value) >= 1:
        return f"an array of {np.dtype(value.dtype)} with {len(value.shape)} dimension(s)"
    if isinstance(value, Dual):
        return f"a Dual ({value.dtype})"
    return f"{type(value).__name__} {value!r}"


def _is_array(value):
    return isinstance(value, DualArray) or (hasattr(value, "shape") and hasattr(value, "dtype")
                                            and np.ndim(value) >= 1)


def _c_contiguous(value):
    if isinstance(value, DualArray):
        value = value.values
    flags = getattr(value, "flags", None)
    if flags is not None:
        return bool(flags["C_CONTIGUOUS"] if not hasattr(flags, "c_contiguous")
                    else flags.c_contiguous)
    return getattr(value, "is_c_contiguous", lambda: True)()


def _array_problem(ty, value):
    """Why ``value`` does not fit array type ``ty`` (None if it does)."""
    if not _is_array(value):
        return "an array"
    dtype = np.dtype(value.dtype)
    if dtype != np.dtype(str(ty.dtype)) or len(value.shape) != ty.ndim:
        return "array"
    if ty.layout == "C" and not _c_contiguous(value):
        return "C-contiguous"
    return None


def _scalar(ty, value):
    """``value`` converted to scalar type ``ty``; raises TypeError/ValueError if it cannot be."""
    if _is_array(value):
        raise TypeError("an array")
    if isinstance(ty, types.Float):
        dtype = np.dtype(str(ty))
        if isinstance(value, Dual):
            return value if value.dtype == dtype else value.astype(dtype)
        if isinstance(value, (numbers.Real, np.floating, np.integer, np.bool_)):
            return dtype.type(value)
        raise TypeError("a float")
    if isinstance(ty, types.Integer):
        if (isinstance(value, (numbers.Integral, np.integer, np.bool_))
                and not isinstance(value, Dual)):
            return np.dtype(str(ty)).type(value)
        raise TypeError("an integer")
    if isinstance(ty, types.Boolean):
        if isinstance(value, Dual):
            raise TypeError("a bool")
        return bool(value)
    return value  # a type dualgpu does not convert (records, tuples...): as given


def _fit(argtypes, args):
    """``(converted args, None)`` when ``args`` fit ``argtypes``, else ``(None, (i, why))``."""
    out = []
    for i, (ty, value) in enumerate(zip(argtypes, args)):
        if isinstance(ty, types.Array):
            why = _array_problem(ty, value)
            if why is not None:
                return None, (i, why)
            out.append(value)
            continue
        try:
            out.append(_scalar(ty, value))
        except (TypeError, ValueError, OverflowError):
            return None, (i, "scalar")
    return out, None


def _fix(ty, value, why):
    if why == "C-contiguous":
        return ("pass a C-contiguous array (np.ascontiguousarray(x) on the host, or a copy), "
                f"or declare the parameter as {ty.dtype}[{', '.join([':'] * ty.ndim)}]")
    if isinstance(ty, types.Array):
        if (_is_array(value) and np.dtype(value.dtype).kind in "iub"
                and ty.dtype in types.real_domain):
            return (f"make the data {ty.dtype} before it reaches the kernel "
                    f"(np.asarray(x, dtype=np.{ty.dtype}) on the host; an integer initial state "
                    "such as np.arange(n) or np.zeros(n, int) is the usual cause)")
        return f"pass a {ty.dtype} array with {ty.ndim} dimension(s) (x.astype(np.{ty.dtype}))"
    return f"pass a {ty} (or change the signature)"


def apply_signature(name, params, signatures, args):
    """Return ``args`` converted to the first signature they fit, as numba.cuda converts them.

    Raises
    ------
    DualgpuError
        If the arguments fit none of the kernel's declared signatures: names the argument,
        what was declared, what came and the fix.
    """
    first_problem = None
    for argtypes in signatures:
        if len(argtypes) != len(args):
            continue
        converted, problem = _fit(argtypes, args)
        if converted is not None:
            return converted
        first_problem = first_problem or (argtypes, problem)
    declared = " or ".join("(" + ", ".join(str(t) for t in sig) + ")" for sig in signatures)
    if first_problem is None:
        raise DualgpuError(
            f"kernel {name} was declared with the signature {declared}, which takes a different "
            f"number of arguments than the {len(args)} given."
        )
    argtypes, (i, why) = first_problem
    ty, value = argtypes[i], args[i]
    expected = f"{ty} (C-contiguous)" if why == "C-contiguous" else str(ty)
    return _raise(name, declared, params[i] if i < len(params) else f"#{i}", expected, value,
                  _fix(ty, value, why))


def _raise(name, declared, param, expected, value, fix):
    raise DualgpuError(
        f"kernel {name} was declared with the signature {declared}: argument {param} must be "
        f"{expected}; got {_describe(value)}. numba.cuda would read such an argument's bytes as "
        f"the declared type (one signature) or refuse it (several). Fix: {fix}."
    )
