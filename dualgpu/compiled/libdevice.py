"""numba.cuda's libdevice functions (``cuda.libdevice.exp``, ``rsqrt``, ``fma``, ``fast_expf``...)
on duals, and off the GPU.

numba.cuda binds CUDA's libdevice for floats, on the GPU only. dualgpu writes its float
functions in ``math`` and arithmetic (:data:`FORMULAS`): on the cuda backend a dual reaching
one runs the formula, whose rules give the derivative (plain values keep libdevice's own
code); on the cpu backend (numba's CPU compiler) and in the simulator, where libdevice has no
code, plain values and duals alike run it (``fast_expf`` is then the exact ``exp``). A
function without a formula (integer bit tricks, Bessel functions, ``erfinv``...) refuses a
dual with its name and the fix.
"""
import math
import re

import numba.cuda.libdevice as _libdevice
import numba.cuda.libdevicefuncs as _libdevicefuncs
import numpy as np
from numba.core import types as _types
from numba.core.extending import register_jitable
from numba.cuda.extending import overload  # CUDA's registry: numba-cuda keeps core's
                                           # overloads of numba's own functions out

from dualgpu.errors import UnsupportedFeatureError
from dualgpu.compiled.types import DualType

__all__ = ["FORMULAS", "formula_functions", "CPU_FUNCTIONS"]


def _formulas():
    table = {}

    def add(names, arity, text):
        for name in names.split():
            if hasattr(_libdevice, name):
                table[name] = (arity, text)

    for base in ("acos acosh asin asinh atan atanh cos cosh erf erfc exp expm1 lgamma log "
                 "log10 log1p log2 sin sinh sqrt tan tanh fabs").split():
        add(f"{base} {base}f", 1, f"math.{base}(x)")
    for base in "exp log log2 log10 sin cos tan".split():  # (the exact function off the GPU)
        add(f"fast_{base}f", 1, f"math.{base}(x)")
    add("exp2 exp2f", 1, "2.0 ** x")
    add("exp10 exp10f fast_exp10f", 1, "10.0 ** x")
    add("tgamma tgammaf", 1, "math.gamma(x)")
    add("cbrt cbrtf", 1, "math.copysign(math.fabs(x) ** (1.0 / 3.0), x)")
    add("rcbrt rcbrtf", 1, "1.0 / math.copysign(math.fabs(x) ** (1.0 / 3.0), x)")
    add("rsqrt rsqrtf frsqrt_rn", 1, "1.0 / math.sqrt(x)")
    add("sinpi sinpif", 1, "math.sin(math.pi * x)")
    add("cospi cospif", 1, "math.cos(math.pi * x)")
    add("saturatef", 1, "min(max(x, 0.0), 1.0)")
    add("drcp_rd drcp_rn drcp_ru drcp_rz frcp_rd frcp_rn frcp_ru frcp_rz", 1, "1.0 / x")
    add("dsqrt_rd dsqrt_rn dsqrt_ru dsqrt_rz fsqrt_rd fsqrt_rn fsqrt_ru fsqrt_rz", 1,
        "math.sqrt(x)")
    add("sincos sincosf fast_sincosf", 1, "(math.sin(x), math.cos(x))")
    add("sincospi sincospif", 1, "(math.sin(math.pi * x), math.cos(math.pi * x))")
    for base in "atan2 hypot fmod remainder copysign".split():
        add(f"{base} {base}f", 2, f"math.{base}(x, y)")
    add("pow powf powi powif fast_powf", 2, "x ** y")
    add("fmin fminf", 2, "min(x, y)")
    add("fmax fmaxf", 2, "max(x, y)")
    add("fdim fdimf", 2, "max(x - y, 0.0)")
    add("fast_fdividef", 2, "x / y")
    for op, symbol in (("add", "+"), ("sub", "-"), ("mul", "*"), ("div", "/")):
        add(" ".join(f"{p}{op}_{r}" for p in "df" for r in ("rd", "rn", "ru", "rz")), 2,
            f"x {symbol} y")
    add("fma fmaf fma_rd fma_rn fma_ru fma_rz fmaf_rd fmaf_rn fmaf_ru fmaf_rz", 3,
        "x * y + z")
    # rounding to an integral float: the value alone (a dual's derivative is zero there)
    add("floor floorf", 1, "float(math.floor(x))")
    add("ceil ceilf", 1, "float(math.ceil(x))")
    add("trunc truncf", 1, "float(math.trunc(x))")
    add("rint rintf nearbyint nearbyintf", 1, "float(round(x))")  # (half to even)
    add("round roundf", 1,  # (half away from zero)
        "float(math.floor(x + 0.5)) if x >= 0 else -float(math.floor(0.5 - x))")
    add("ldexp ldexpf scalbn scalbnf", 2, "x * 2.0 ** y")
    add("normcdf normcdff", 1, "0.5 * math.erfc(-0.7071067811865476 * x)")
    add("erfcx erfcxf", 1, "math.exp(x * x) * math.erfc(x)")
    return table


#: libdevice function name -> (number of arguments, its formula in ``math`` and arithmetic)
FORMULAS = _formulas()


def _single(name):
    """True for a float32 function of libdevice (``rsqrtf``, ``saturatef``, ``frcp_rn``)."""
    found = _libdevicefuncs.functions.get(f"__nv_{name}")
    return found is not None and any(a.ty == _types.float32 for a in found[1])


_LITERAL = re.compile(r"(?<![\w.])(\d+\.\d+|math\.pi)")


def _in_float32(text):
    """A formula of float64 literals written for float32 arguments: its constants float32
    (numba types ``1.0`` as float64, and ``1.0 / math.sqrt(x)`` of a float32 dual was a
    float64 dual whose type spread through the kernel), ``float(...)`` float32."""
    text = _LITERAL.sub(r"_f32(\1)", text.replace("(1.0 / 3.0)", "_THIRD"))
    return text.replace("_THIRD", "_f32(1.0 / 3.0)").replace("float(", "_f32(")


def formula_functions(math_module):
    """``{name: function}``: the formulas as Python functions whose ``math`` is
    ``math_module`` (the dual-aware :mod:`dualgpu.dmath` for the simulator); those of
    float32 functions compute in float32, as libdevice's do."""
    functions = {}
    for name, (arity, text) in FORMULAS.items():
        params = ", ".join("xyz"[:arity])
        namespace = {"math": math_module, "_f32": np.float32}
        if _single(name):
            text = _in_float32(text)
        exec(f"def {name}({params}):\n    return {text}\n", namespace)  # noqa: S102
        functions[name] = namespace[name]
    return functions


#: the formulas compiled by numba (the cpu backend's kernels, and duals on the GPU)
CPU_FUNCTIONS = {name: register_jitable(fn) for name, fn in formula_functions(math).items()}


def _math_name(name):
    """``expf`` -> ``exp`` (the float32 twin), ``erf`` -> ``erf``."""
    return name[:-1] if name.endswith("f") and hasattr(_libdevice, name[:-1]) else name


def _message(name):
    twin = _math_name(name)
    instead = (f"Call math.{twin}(x) instead (numba.cuda lowers math functions to the same "
               "libdevice calls, float32 to the f-suffixed ones)" if hasattr(math, twin) else
               f"math has no {twin} either: write it with math and arithmetic, add a rule "
               "for it to UNARY_RULES or BINARY_RULES in dualgpu/rules.py")
    return (f"cuda.libdevice.{name} cannot take a Dual: dualgpu has no formula for it in math. "
            f"{instead}, or call it on the value (x.value) if no derivative is needed.")


def _register(name, fn):
    implementation = CPU_FUNCTIONS.get(name)

    def refuse(*args):
        if any(isinstance(a, DualType) for a in args):
            raise UnsupportedFeatureError(_message(name))
        return None

    def formula(*args):
        return implementation if any(isinstance(a, DualType) for a in args) else None

    if implementation is None:
        overload(fn)(refuse)
        return
    # numba matches a typer's parameters with the implementation's: the formula's own
    arity = FORMULAS[name][0]
    typer = (lambda x: formula(x), lambda x, y: formula(x, y),
             lambda x, y, z: formula(x, y, z))[arity - 1]
    overload(fn)(typer)


for _name in dir(_libdevice):
    _fn = getattr(_libdevice, _name)
    if (not _name.startswith("_") and callable(_fn)
            and getattr(_fn, "__module__", "") == _libdevice.__name__):
        _register(_name, _fn)
