"""Primal values and result dtypes for the pure-Python dual, as the plain code has them.

The pure-Python :class:`~dualgpu.Dual` runs in two places, and in each its
value is the one the plain computation gives there:

**Inside a kernel on the CUDA simulator** the plain code is the compiled
kernel, so the dual follows numba's compiled code (which the cpu and cuda
backends run):

* the result dtype is numba's typing of the call: a float32 dual combined
  with a Python float or int gives float64; with an ``np.float32``, float32;
* ``math`` functions call the C math library through :mod:`ctypes`: ``sin``
  for float64 and ``sinf`` for float32, the functions numba's compiled code
  calls (numpy's own ``np.sin`` differs from them in the last bit for a few
  percent of inputs, and Python's ``math`` has no float32 functions);
* operators use numpy scalar arithmetic in the result dtype (IEEE; ``//`` and
  ``%`` follow the same algorithm as numba's); ``x ** n`` with an integer
  ``n`` multiplies by squaring, as numba does, and a float exponent calls the
  C ``pow``;
* ``min``/``max`` follow Python's (and numba's) rule: the first argument
  unless the second compares smaller/larger.

**On the host** (plain Python code such as a simulation's set-up, or host
post-processing) the plain code is numpy's scalar arithmetic, so operators
follow numpy's promotion (a float32 dual times a Python float stays float32)
and numpy's operators; ``math`` functions still call the C math library in
the dual's dtype (a float32 dual stays float32).

numpy ufuncs (``np.sin(d)``, ``np.minimum``) are numpy's own in both places,
so a dual's value matches the plain numpy call. (numba's compiled ufuncs are
not numpy's: ``np.minimum(-0.0, 0.0)`` is ``-0.0`` in numba and ``0.0`` in
numpy; ``np.floor_divide(inf, 1.0)`` is ``inf`` and ``nan``.)

Nothing here raises for a domain or range error: ``log(0)`` is ``-inf``,
``sqrt(-1)`` is ``nan``, ``x / 0.0`` is ``inf``, as in a kernel (numpy's error
model).
"""
import builtins
import ctypes
import ctypes.util
import functools
import math
import numbers
import operator

import numpy as np

from dualgpu.core.selection import _in_simulated_thread

__all__ = ["result_dtype", "numba_result_dtype", "primal", "numba_type_of", "in_kernel",
           "compiled_value"]

_FLOAT64 = np.dtype(np.float64)
_FLOAT32 = np.dtype(np.float32)

#: ``math`` functions taken from the C library, by arity.
_LIBM_FUNCTIONS = {
    1: ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh",
        "acosh", "atanh", "exp", "expm1", "log", "log1p", "log2", "log10", "sqrt", "fabs",
        "erf", "erfc", "lgamma", "gamma"),
    2: ("atan2", "hypot", "pow", "copysign", "fmod", "remainder"),
}


def _load_libm():
    for name in (ctypes.util.find_library("m"), "libm.so.6", "msvcrt", "ucrtbase"):
        if not name:
            continue
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


_LIBM = _load_libm()


def _c_function(name, nargs, c_type):
    fn = getattr(_LIBM, name, None) if _LIBM is not None else None
    if fn is None:
        return None
    fn = ctypes.CFUNCTYPE(c_type, *([c_type] * nargs))(ctypes.cast(fn, ctypes.c_void_p).value)
    return fn


#: the C library's names of ``math`` functions that differ (numba calls ``tgamma``)
_C_NAMES = {"gamma": "tgamma"}

#: Python's math where it raises at a pole, and what compiled code gives there
_POLES = {"lgamma": lambda x: math.inf,
          "gamma": lambda x: math.copysign(math.inf, x) if x == 0 else math.nan}


def _python_math(name):
    """Fallback without a C library: Python's math in float64, inf/nan instead of errors."""
    fn = getattr(math, name)

    def call(*args):
        with np.errstate(all="ignore"):
            try:
                return fn(*args)
            except (ValueError, ZeroDivisionError):
                if name in _POLES:
                    return _POLES[name](*args)
                return getattr(np, {"asin": "arcsin", "acos": "arccos", "atan2": "arctan2",
                                    "asinh": "arcsinh", "acosh": "arccosh",
                                    "atanh": "arctanh", "pow": "power"}.get(name, name),
                               lambda *a: math.nan)(*(np.float64(a) for a in args))
            except OverflowError:
                return math.inf

    return call


@functools.lru_cache(maxsize=None)
def _libm(name, dtype):
    """The C math function ``name`` for ``dtype`` (``sinf`` for float32), as a Python callable."""
    nargs = 1 if name in _LIBM_FUNCTIONS[1] else 2 if name in _LIBM_FUNCTIONS[2] else None
    if nargs is None:  # a math function with a rule from dualgpu.rules.define: Python's
        return _python_math(name)
    c_name = _C_NAMES.get(name, name)
    if dtype == _FLOAT32:
        fn = _c_function(c_name + "f", nargs, ctypes.c_float)
    else:
        fn = _c_function(c_name, nargs, ctypes.c_double)
    return fn or _python_math(name)


# ---------------------------------------------------------------------------
# result dtype: numba's typing of the call
# ---------------------------------------------------------------------------
def numba_type_of(value):
    """The numba type compiled code gives the operand ``value`` (a Dual: its value dtype)."""
    from numba import types, typeof

    dtype = getattr(value, "dtype", None)
    if hasattr(value, "partials"):  # a Dual
        return types.float32 if dtype == _FLOAT32 else types.float64
    if isinstance(value, (bool, np.bool_)):
        return types.boolean
    if isinstance(value, numbers.Integral) and not isinstance(value, np.integer):
        return types.int64
    if isinstance(value, float) and not isinstance(value, np.floating):
        return types.float64
    return typeof(value)


#: (fn, argument types) -> result dtype; filled under numba's compiler lock (below)
_TYPED_RESULTS = {}


def clear_typing_cache():
    """Forget every resolved result dtype (tests use it to start from a cold cache)."""
    _TYPED_RESULTS.clear()


def _typed_result(fn, arg_types):
    """numba's result dtype of ``fn(*arg_types)``: resolved once per key, by one thread at a time.

    The CUDA simulator runs one Python thread per CUDA thread, so a block's threads all
    miss a cold key together. numba's ``typing_context.refresh()`` advances generators
    shared by the process, and two threads inside it at once raise ``ValueError:
    generator already executing``; numba's own compiler refreshes under its global
    compiler lock, so the first resolution of a key takes that same lock (checked again
    inside: the threads that waited find the answer there).
    """
    key = (fn, arg_types)
    found = _TYPED_RESULTS.get(key)
    if found is not None:
        return found
    from numba.core.compiler_lock import global_compiler_lock

    with global_compiler_lock:
        found = _TYPED_RESULTS.get(key)
        if found is None:
            found = _TYPED_RESULTS[key] = _resolve_result(fn, arg_types)
    return found


def _resolve_result(fn, arg_types):
    from numba import types
    from numba.core.registry import cpu_target

    context = cpu_target.typing_context
    context.refresh()  # a context not yet refreshed misses templates (float32 ** int64)
    try:
        sig = context.resolve_function_type(fn, arg_types, {})
    except Exception:
        sig = None
    if sig is not None and sig.return_type in (types.float32, types.float64):
        return np.dtype(str(sig.return_type))
    # no float typing (e.g. integer-only arguments): numpy promotion, at least float32
    dtypes = [np.dtype(str(t)) if not isinstance(t, types.Boolean) else np.dtype(np.int64)
              for t in arg_types]
    result = np.result_type(*dtypes)
    return _FLOAT32 if result == _FLOAT32 else _FLOAT64


def _numpy_result(args):
    """numpy's promotion (NEP 50: Python scalars are weak), at least float32."""
    # a weak dual (a seeded Python float) promotes as a Python float does: weakly
    operands = [(0.0 if getattr(a, "weak", False) else a.dtype) if hasattr(a, "partials") else a
                for a in args]
    result = np.result_type(*operands)
    if result.kind != "f":
        result = np.result_type(result, np.float64) if result.kind in "iu" else _FLOAT64
    return result


def in_kernel():
    """True inside a kernel run by the CUDA simulator (one of its threads)."""
    return _in_simulated_thread()


def result_dtype(fn, args):
    """The float dtype the plain code gives ``fn(*args)`` (Duals count as their dtype).

    numba's typing inside a simulated kernel, numpy's promotion on the host.

    Examples
    --------
    >>> import operator, numpy as np
    >>> from dualgpu import Dual
    >>> from dualgpu.core._primals import numba_result_dtype, result_dtype
    >>> d = Dual(np.float32(1.0), np.ones(1, np.float32))
    >>> (numba_result_dtype(operator.mul, (d, 2.0)),
    ...  numba_result_dtype(operator.mul, (d, np.float32(2))))
    (dtype('float64'), dtype('float32'))
    >>> result_dtype(operator.mul, (d, 2.0))  # on the host: numpy's promotion
    dtype('float32')
    """
    return numba_result_dtype(fn, args) if in_kernel() else _numpy_result(args)


def numba_result_dtype(fn, args):
    """The float dtype numba's compiled code gives ``fn(*args)`` (Duals count as their dtype)."""
    return _typed_result(fn, tuple(numba_type_of(a) for a in args))


# ---------------------------------------------------------------------------
# primal values
# ---------------------------------------------------------------------------
def _int_power(base, exponent, dtype):
    """numba's ``float ** int``: multiplication by squaring in ``dtype``."""
    exponent = int(exponent)
    invert = exponent < 0
    remaining = -exponent if invert else exponent
    if remaining > 0x10000:  # numba's cutoff: the generic algorithm (float64 pow)
        return dtype.type(_libm("pow", _FLOAT64)(float(base), float(exponent)))
    result, square = dtype.type(1), dtype.type(base)
    while remaining:
        if remaining & 1:
            result = result * square
        remaining >>= 1
        square = square * square
    return dtype.type(1) / result if invert else result


def _is_integer(value):
    return (isinstance(value, (numbers.Integral, np.integer))
            and not isinstance(value, (bool, np.bool_)))


def _power(dtype, base, exponent):
    if _is_integer(exponent):
        return _int_power(base, exponent, dtype)
    return dtype.type(_libm("pow", dtype)(float(dtype.type(base)), float(dtype.type(exponent))))


def _cast(dtype, values):
    return [dtype.type(v) for v in values]


def primal(fn):
    """Return ``compute(dtype, *values)``: ``fn`` of plain values as numba computes it in ``dtype``.

    ``fn`` is a ``math``/``operator``/``builtins`` callable or a numpy ufunc.
    """
    return _PRIMALS.get(fn) or _make_primal(fn)


@functools.lru_cache(maxsize=None)
def _make_primal(fn):
    if isinstance(fn, np.ufunc):
        def compute(dtype, *values):
            return dtype.type(fn(*_cast(dtype, values)))
    elif fn in (operator.pow, operator.ipow, builtins.pow):
        def compute(dtype, base, exponent):
            if in_kernel():
                return _power(dtype, base, exponent)
            return dtype.type(fn(dtype.type(base), exponent if _is_integer(exponent)
                                 else dtype.type(exponent)))
    elif getattr(math, getattr(fn, "__name__", ""), None) is fn:
        name = fn.__name__

        def compute(dtype, *values):
            return dtype.type(_libm(name, dtype)(*(float(v) for v in _cast(dtype, values))))
    else:  # operators and builtins on numpy scalars of the result dtype
        def compute(dtype, *values):
            return dtype.type(fn(*_cast(dtype, values)))
    return compute


#: numba multiplies by the constant in the value's dtype (a float32 stays float32 throughout)
_PRIMALS = {
    math.radians: lambda dtype, x: dtype.type(x) * dtype.type(math.pi / 180),
    math.degrees: lambda dtype, x: dtype.type(x) * dtype.type(180 / math.pi),
}


def compiled_value(fn, args):
    """``fn(*args)`` of plain numbers as numba's compiled code computes it (no exceptions).

    What ``math.log(x)`` gives inside a kernel: ``-inf`` at 0 where Python's ``math``
    raises, ``logf`` for a float32.
    """
    dtype = numba_result_dtype(fn, args)
    with np.errstate(all="ignore"):
        return primal(fn)(dtype, *args)
