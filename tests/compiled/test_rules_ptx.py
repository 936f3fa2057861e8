"""Real CUDA code generation, checked offline by compiling kernels to PTX (no GPU needed)."""
import functools
import math
import os

import pytest
from numba import cuda, types

from dualgpu.compiled.arrays import dual_array_type
from dualgpu.compiled.types import dual_type

from rule_harness import BINARY_CASES, UNARY_CASES, build_function, case_id, kernel_source

pytestmark = pytest.mark.compile

KINDS = [("d",), ("d", "d"), ("d", "n"), ("n", "d")]
FLOATS = {"float32": types.float32, "float64": types.float64}


def arg_type(kind, dtype, lanes):
    return dual_array_type(dtype, 1, lanes) if kind == "d" else types.Array(dtype, 1, "C")


def cases_for(kinds):
    return UNARY_CASES if len(kinds) == 1 else BINARY_CASES


def compile_rules(cases, kinds, dtype, lanes, cc):
    """PTX of one kernel applying every case in ``cases`` to operands of ``kinds``."""
    dt = FLOATS[dtype]
    fn = build_function(kernel_source(cases, kinds, cuda_kernel=True), {"math": math, "cuda": cuda})
    x = arg_type(kinds[0], dt, lanes)
    y = arg_type(kinds[1] if len(kinds) > 1 else "n", dt, lanes)
    ptx, _ = cuda.compile_ptx(fn, (x, y, dual_array_type(dt, 1, lanes)), cc=cc)
    return ptx


@functools.lru_cache(maxsize=None)
def all_rules_ptx(kinds, dtype, lanes, cc):
    """PTX of every rule of ``kinds`` in one kernel (one compile for all), or the error."""
    try:
        return compile_rules(cases_for(kinds), kinds, dtype, lanes, cc)
    except Exception as error:  # noqa: BLE001  (each rule's test then compiles it alone)
        return error


LANES = [1, 8]
#: DUALGPU_TEST_CASES=all compiles the whole dtype x lanes x kinds product (as test_rules.py)
FULL_PRODUCT = os.environ.get("DUALGPU_TEST_CASES", "").strip().lower() == "all"


def ptx_params():
    """(dtype, lanes, kinds, index): every rule case in both dtypes.

    One kernel per (dtype, lanes, kinds) holds every rule of ``kinds``, about a second of
    compilation each. By default the lane count is sampled as JAX's ``sample_product`` does:
    one per (dtype, kinds), alternating over LANES, so every rule compiles in both dtypes, each
    dtype meets both lane counts and each argument kinds meets both lane counts (in one dtype
    or the other). ``DUALGPU_TEST_CASES=all`` runs the full product.
    """
    params = []
    for d, dtype in enumerate(FLOATS):
        for k, kinds in enumerate(KINDS):
            for lanes in LANES:
                if not FULL_PRODUCT and lanes != LANES[(d + k) % len(LANES)]:
                    continue
                params += [pytest.param(dtype, lanes, kinds, i,
                                        id=f"{dtype}-{lanes}-{case_id(case, kinds)}")
                           for i, case in enumerate(cases_for(kinds))]
    return params


@pytest.mark.parametrize("dtype, lanes, kinds, index", ptx_params())
def test_rule_compiles_to_ptx(offline_ptx, dtype, lanes, kinds, index):
    ptx = all_rules_ptx(kinds, dtype, lanes, offline_ptx)
    if isinstance(ptx, Exception):  # the shared kernel failed: is it this rule?
        ptx = compile_rules([cases_for(kinds)[index]], kinds, dtype, lanes, offline_ptx)
    assert ".entry" in ptx


def stencil(u, un, a):
    i = cuda.grid(1)
    if i > 0 and i < u.size - 1:
        un[i] = u[i] + a * (u[i - 1] - u[i] - u[i] + u[i + 1])


def stencil_2d(u, un, a):
    i, j = cuda.grid(2)
    ny, nx = u.shape
    if 0 < i < ny - 1 and 0 < j < nx - 1:
        un[i, j] = u[i, j] + a * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]
                                  - 4 * u[i, j])


@functools.lru_cache(maxsize=None)
def _ptx(fn, ndim, dtype, lanes, scalar_dual):
    dt = FLOATS[dtype]
    arr = types.Array(dt, ndim, "C") if lanes == 0 else dual_array_type(dt, ndim, lanes)
    scalar = dual_type(dt, lanes) if scalar_dual else dt
    ptx, _ = cuda.compile_ptx(fn, (arr, arr, scalar), cc=(9, 0))
    return ptx


def _instructions(ptx):
    body = [line.strip() for line in ptx.splitlines()
            if line.strip() and not line.strip().startswith("//")]
    return body


@pytest.mark.parametrize("lanes", [1, 4, 8])
@pytest.mark.parametrize("dtype", list(FLOATS), ids=str)
@pytest.mark.parametrize("fn,ndim", [(stencil, 1), (stencil_2d, 2)], ids=["1d", "2d"])
def test_dual_stencil_ptx_is_lean(offline_ptx, fn, ndim, dtype, lanes):
    ptx = _ptx(fn, ndim, dtype, lanes, True)
    body = _instructions(ptx)
    calls = [line for line in body if line.startswith("call")]
    local = [line for line in body if "ld.local" in line or "st.local" in line]
    assert calls == [], f"call instructions in the dual stencil: {calls[:3]}"
    assert local == [], f"local-memory traffic in the dual stencil: {local[:3]}"


@pytest.mark.parametrize("fn,ndim", [(stencil, 1)], ids=["1d"])
def test_float32_dual_does_no_float64_arithmetic(offline_ptx, fn, ndim):
    plain = _ptx(fn, ndim, "float32", 0, False)
    dual = _ptx(fn, ndim, "float32", 8, True)
    assert ".f64" not in plain  # the plain kernel is pure float32 ...
    assert ".f64" not in dual  # ... and so is its dual version
    assert dual.count("fma.rn.f32") + dual.count("mul.f32") + dual.count("mul.rn.f32") > 8
