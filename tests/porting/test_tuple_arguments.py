"""Kernels given tuples that hold duals: ``kernel[g, b]((u, v), out, (a, b))`` under the driver.

The cpu and GPU backends run such a launch as a generated kernel taking the tuples' members
one by one (``dualgpu.porting.tuple_arguments``), so lane tiles work: a Jacobian of more directions
than a compiled dual holds (64) used to be refused on the cpu backend. Derivatives are
compared with central differences and with the cudasim backend, which runs tuples as they are.
"""
import numba.cuda
import numpy as np
import pytest
from numba import types as nbtypes

import dualgpu
import kernels_tuple_args as K
from dualgpu import cuda
from dualgpu.backends.gpu import kernel as gpu
from dualgpu.compiled.arrays import dual_array_type
from dualgpu.compiled.types import dual_type
from dualgpu.testing import check_jacobian
from dualgpu.porting.kernel import flat_kernel
from dualgpu.porting.tuple_arguments import structure

N = 150  # 150 + 150 + 1 directions: more than the 64 lanes of one compiled dual


def mixed(u, v, c):
    out = cuda.device_array_like(u)
    K.mix[(u.shape[0] + 31) // 32, 32]((cuda.to_device(u), cuda.to_device(v)), out,
                                       (c, 2.0 * c))
    return out.copy_to_host()


def relaxed(u, w, rate):
    state = (cuda.to_device(u), cuda.to_device(w))
    for _ in range(3):
        K.relax[(u.shape[0] + 31) // 32, 32](state, rate)
    return state[1].copy_to_host()


def nested(a, b, s):
    out = cuda.device_array_like(a)
    K.nested[(a.shape[0] + 31) // 32, 32](((cuda.to_device(a), cuda.to_device(b)), s), out)
    return out.copy_to_host()


def _inputs(dtype, n=N):
    x = np.linspace(0.1, 1.0, n).astype(dtype)
    return x, np.cos(x).astype(dtype)


@pytest.mark.parametrize("f", [mixed, relaxed, nested])
def test_many_directions_through_tuples_equal_cudasim_and_differences(f):
    u, v = _inputs(np.float64)
    jacobians = {}
    for backend in ("cpu", "cudasim"):
        with dualgpu.using_backend(backend):
            jacobians[backend] = dualgpu.jacobian(f, u, v, 0.3, argnums=(0, 1, 2),
                                                  progress=False)
    for got, want in zip(jacobians["cpu"], jacobians["cudasim"]):
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)
    with dualgpu.using_backend("cpu"):
        check_jacobian(f, u[:20], v[:20], 0.3, argnums=(0, 1, 2))


def test_float32_tuples(rng):
    u, v = _inputs(np.float32, 80)
    with dualgpu.using_backend("cpu"):
        check_jacobian(relaxed, u, v, np.float32(0.3), argnums=(0, 1))
        out = relaxed(u, v, np.float32(0.3))
    assert out.dtype == np.float32


def test_plain_tuples_launch_the_kernel_itself():
    u, v = _inputs(np.float64, 10)
    with dualgpu.using_backend("cpu"):
        plain = mixed(u, v, 0.3)
    np.testing.assert_allclose(plain, 0.3 * u * v + 0.6, rtol=1e-15)
    fresh = dualgpu.jit(K.mix.py_func)
    with dualgpu.using_backend("cpu"):
        out = np.zeros(10)
        fresh[1, 32]((u, v), out, (0.3, 0.6))
    assert fresh._flat_kernels == {}
    np.testing.assert_array_equal(out, plain)


def test_flat_kernel_compiles_to_ptx(offline_ptx):
    from dualgpu import Dual

    a = dualgpu.dual_array(np.ones(4), np.ones((8, 4)))
    args = ((a, a), a, (Dual(0.3, np.ones(8)), Dual(0.6, np.ones(8))))
    shape = structure(args)
    flat = flat_kernel(K.mix, shape)
    dispatcher = gpu.compile_kernel(flat.py_func).dispatcher_for(8)
    array, scalar = dual_array_type(nbtypes.float64, 1, 8), dual_type(nbtypes.float64, 8)
    ptx, _ = numba.cuda.compile_ptx(dispatcher.py_func, (array, array, array, scalar, scalar),
                                    cc=offline_ptx)
    assert ".entry" in ptx and "call" not in ptx.split(".entry", 1)[1]
