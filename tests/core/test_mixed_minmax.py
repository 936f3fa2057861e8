"""max/min of float32 duals and float64 numbers at second order (issue 25, unclear error 8).

A float32 second-order kernel calling ``max(v, lo)`` with ``v`` a float32 (nested) dual
and ``lo`` a float64 failed with numba's "No implementation of function max": the
nested rule compared the answer (float64) with the float32 operand bit for bit. The
mixed max/min now differentiate as on plain floats; checked against the analytic
Hessian and central differences of the first-order gradient, cpu and cudasim.
"""
import numpy as np
import pytest

import dualgpu

import kernels_mixed_minmax as km

U = np.array([0.3, 0.9, 1.7, 0.1])


def run(u):
    out = dualgpu.cuda.device_array_like(u)
    km.clipped_energy[1, u.shape[0]](dualgpu.cuda.to_device(u), out)
    return out.copy_to_host()


def total(u):
    return run(u).sum()


def analytic(u):
    """d2/du2 of the kernel's output per cell (u > 0: piecewise polynomial)."""
    a2 = np.where(u * u >= 0.25, 2.0, 0.0)          # max(u^2, 0.25)
    b = np.minimum(0.25, 3.0 * u)
    b1 = np.where(3.0 * u < 0.25, 3.0, 0.0)
    a1 = np.where(u * u >= 0.25, 2.0 * u, 0.0)
    c2 = np.where((u * u >= 0.5) & (u * u >= u), 2.0, 0.0)   # max(u^2, 0.5, u)
    return np.diag(a2 * b + 2.0 * a1 * b1 + c2)


@pytest.mark.parametrize("backend, dtype", [("cpu", np.float32), ("cpu", np.float64),
                                            ("cudasim", np.float32)])
def test_second_order_mixed_precision_max_min(backend, dtype):
    u = U.astype(dtype)
    tol = 2e-3 if dtype == np.float32 else 1e-8
    with dualgpu.using_backend(backend):
        H = dualgpu.hessian(total, u)
        np.testing.assert_allclose(H, analytic(U), rtol=tol, atol=tol)
        if backend == "cpu":  # (the simulator runs the same rules: analytic check only)
            h = dtype(1e-3)
            fd = np.stack([(dualgpu.jacobian(total, u + h * e)
                            - dualgpu.jacobian(total, u - h * e)) / (2 * h)
                           for e in np.eye(4, dtype=dtype)], axis=-1)
            np.testing.assert_allclose(H, fd, rtol=tol, atol=tol)


def test_nested_mixed_max_compiles_to_ptx(offline_ptx):
    from numba import cuda as numba_cuda
    from numba import types

    from dualgpu.compiled.nested import tagged_type
    from dualgpu.compiled.types import dual_type

    def both(x, lo):
        return max(x, lo) + min(lo, x, 2.0)

    nested = tagged_type(dual_type(types.float32, 2), 2, 1)
    ptx, _ = numba_cuda.compile_ptx(both, (nested, types.float64), device=True,
                                    cc=offline_ptx)
    assert ".func" in ptx
