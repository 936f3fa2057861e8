"""The GPU launch path: dual arguments are flattened into the kernel's PTX parameters.

``dualgpu.backends.gpu.kernel.marshal`` turns a DualArray into the tuple (values, partials)
and a Dual into (value, partials tuple); numba's launcher flattens tuples in data-model
order, an array into meminfo, parent, nitems, itemsize, data, shape..., strides...
(5 + 2*ndim parameters), a float into 1 and a UniTuple of n floats into n. The count
must equal the ``.entry`` parameter list of the compiled kernel, or a real launch would
pass garbage. Checked offline (no GPU) with ``compile_ptx`` for sm_90.
"""
import re

import numba
import numba.cuda
import numpy as np
import pytest

import kernels_ported as K
from dualgpu import Dual, DualArray, cuda
from dualgpu.backends.gpu import kernel as gpu

pytestmark = pytest.mark.compile


@cuda.jit
def _mixed(a1, a2, a3, s, plain, f, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = a1[i] * s + a2[i, 0] + a3[i, 0, 0] + plain[i] * f


def _flat_count(ty, val):
    """Parameters numba's launcher passes for one argument after ``marshal``."""
    ty, val = gpu.marshal(ty, val)
    if isinstance(ty, types_Array()):
        return 5 + 2 * ty.ndim
    if isinstance(ty, numba.types.BaseTuple):
        return sum(_flat_count(t, v) for t, v in zip(ty.types, val))
    return 1


def types_Array():
    return numba.types.Array


def _entry_params(ptx):
    entry = re.search(r"\.entry\s+\S+\s*\((.*?)\)", ptx, re.S)
    assert entry, "no .entry in the PTX"
    return len(re.findall(r"\.param\b", entry.group(1)))


def _arguments(dtype, lanes, dual_out, rng):
    def dual(shape):
        return DualArray(rng.random(shape).astype(dtype),
                         rng.random((lanes,) + shape).astype(dtype))

    n = 4
    out = dual((n,)) if dual_out else np.zeros(n, dtype)
    return [dual((n,)), dual((n, 2)), dual((n, 2, 2)),
            Dual(dtype(0.5), rng.random(lanes).astype(dtype)), rng.random(n).astype(dtype),
            dtype(1.5), out]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("lanes", [1, 4, 8])
def test_flattened_arguments_match_ptx_entry(offline_ptx, dtype, lanes, rng):
    args = _arguments(dtype, lanes, True, rng)
    argtypes = tuple(numba.typeof(a) for a in args)
    expected = sum(_flat_count(t, a) for t, a in zip(argtypes, args))
    ndims = (1, 2, 3)
    by_hand = (sum(2 * (5 + 2 * d) + 2 for d in ndims)  # values + partials arrays
               + (1 + lanes) + (5 + 2) + 1 + (5 + 2 + 5 + 4))
    assert expected == by_hand
    ptx, _ = numba.cuda.compile_ptx(gpu.prepare_function(_mixed.py_func, lanes), argtypes,
                                    cc=offline_ptx)
    assert _entry_params(ptx) == expected


def test_marshal_leaves_plain_arguments_alone(rng):
    a = rng.random(3)
    ty = numba.typeof(a)
    assert gpu.marshal(ty, a) == (ty, a)
    assert gpu.marshal(numba.float64, 2.0) == (numba.float64, 2.0)
    d = Dual(1.0, [2.0, 3.0])
    ty, val = gpu.marshal(numba.typeof(d), d)
    assert val == (1.0, (2.0, 3.0)) and len(ty.types) == 2


# --- every ported kernel's dual specialisation compiles for the GPU -------------------------

def _dual_signatures(lanes):
    from dualgpu.compiled.arrays import dual_array_type
    from dualgpu.compiled.types import dual_type

    f64, f32 = numba.float64, numba.float32

    def A(ndim, dt=f64):
        return dual_array_type(dt, ndim, lanes)

    def D(dt=f64):
        return dual_type(dt, lanes)

    return {
        "stencil_1d": (A(1), A(1), D(), D(), f64),
        "stencil_2d": (A(2), A(2), D(), f64),
        "nbody_accel": (A(2), A(1), D(), A(2)),
        "smooth_with_lib": (A(1), A(1), D(), f64),
        "grid_stride_scale": (A(1), A(1), D()),
        "stencil_1d_f32": (A(1, f32), A(1, f32), D(f32)),
        "local_scratch": (A(1), A(1), D()),
        "early_return": (A(1), A(1), D()),
    }


@pytest.mark.parametrize("name", list(_dual_signatures(1)))
def test_ported_kernels_dual_specialisation_compiles(offline_ptx, name):
    lanes = 4
    signature = _dual_signatures(lanes)[name]
    kernel = getattr(K, name)
    ptx, _ = numba.cuda.compile_ptx(gpu.prepare_function(kernel.py_func, lanes), signature,
                                    cc=offline_ptx)
    expected = sum(
        5 * 2 + 2 * (t.ndim * 2 + 1) if hasattr(t, "values_type")
        else (1 + lanes if hasattr(t, "n") else 1)
        for t in signature
    )
    assert _entry_params(ptx) == expected
    if name == "stencil_1d_f32":
        body = ptx.split(".entry", 1)[1]
        assert "st.global.f32" in body and "st.global.f64" not in body


def test_local_array_with_a_dynamic_shape_is_a_clear_error(offline_ptx):
    from numba.core.errors import TypingError

    @cuda.jit
    def dynamic(x, out):
        tmp = cuda.local.array(x.shape[0], numba.float64)
        tmp[0] = x[0]
        out[0] = tmp[0]

    from dualgpu.compiled.arrays import dual_array_type

    t = dual_array_type(numba.float64, 1, 2)
    with pytest.raises(TypingError, match="constant int or tuple"):
        numba.cuda.compile_ptx(gpu.prepare_function(dynamic.py_func, 2), (t, t), cc=offline_ptx)
