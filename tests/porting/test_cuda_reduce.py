"""``@cuda.reduce`` (numba.cuda's documentation example) on cpu and cudasim, plain and dual.

Plain runs failed off the GPU with ``CudaSupportError``: ``dualgpu.cuda`` forwarded the name to
numba.cuda, whose ``Reduce`` asks the driver for a device. A reduction of a DualArray must return
a Dual whose partials are the derivatives of the reduced value (checked against central
differences).
"""
import math

import numpy as np
import pytest

import dualgpu
from dualgpu import cuda
from dualgpu.porting import reduction

BACKENDS = ["cpu", "cudasim"]
DTYPES = [np.float32, np.float64]
RTOL = {np.float32: 2e-3, np.float64: 1e-7}
STEP = {np.float32: 1e-2, np.float64: 1e-6}


@cuda.reduce
def sum_reduce(a, b):
    return a + b


@cuda.reduce
def max_reduce(a, b):
    return max(a, b)


@cuda.reduce
def prod_reduce(a, b):
    return a * b


@cuda.reduce
def hypot_reduce(a, b):
    return math.hypot(a, b)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_documentation_example_plain(backend, dtype):
    a = np.arange(1, 301).astype(dtype)  # more elements than numba's 128-thread blocks
    with dualgpu.using_backend(backend):
        got = sum_reduce(a)
        assert got == a.sum() and np.asarray(got).dtype == dtype
        assert sum_reduce(a, init=10) == a.sum() + 10
        assert sum_reduce(cuda.to_device(a)) == a.sum()  # a device array
        assert sum_reduce(a, size=5) == 15
        assert max_reduce(-a) == 0  # numba.cuda combines init (0 by default) too
        assert max_reduce(-a, init=-1e9) == -1
        assert sum_reduce(a[:0], init=3) == 3  # an empty array gives init
        res = cuda.device_array(1, dtype=dtype)
        assert sum_reduce(a, res=res) is None
        assert res.copy_to_host()[0] == a.sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_dimensional_arrays_are_refused_as_numba_does(backend):
    with dualgpu.using_backend(backend):
        with pytest.raises(TypeError, match=r"1-D.*ravel"):
            sum_reduce(np.ones((2, 2)))


def _simulate(u, reducer, init):
    """A host step then a reduction of a device array, as simulations write it."""
    d = cuda.to_device(u * u + 0.5 * u)
    return reducer(d, init=init)


def _central(f, u, h):
    out = []
    for k in range(u.size):
        e = np.zeros_like(u)
        e[k] = h
        out.append((float(f(u + e)) - float(f(u - e))) / (2 * h))
    return np.array(out)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reducer, init", [(sum_reduce, 0.0), (prod_reduce, 2.0),
                                           (max_reduce, 0.0), (hypot_reduce, 1.0)])
def test_reduction_of_a_dual_array_returns_its_derivative(backend, dtype, reducer, init):
    u = np.linspace(0.3, 1.4, 7).astype(dtype)
    u[3] = dtype(1.9)  # a clear maximum
    with dualgpu.using_backend(backend):
        result = _simulate(dualgpu.dual_array(u, np.eye(7, dtype=dtype)), reducer, init)
        assert isinstance(result, dualgpu.Dual)
        fd = _central(lambda v: _simulate(v.astype(np.float64), reducer, init),
                      u.astype(np.float64), STEP[dtype])
        jac = dualgpu.jacobian(lambda v: _simulate(v, reducer, init), u)
    np.testing.assert_allclose(np.asarray(result.partials, np.float64), fd, rtol=RTOL[dtype],
                               atol=RTOL[dtype] * np.abs(fd).max())
    np.testing.assert_allclose(np.asarray(jac, np.float64).reshape(-1), fd, rtol=RTOL[dtype],
                               atol=RTOL[dtype] * np.abs(fd).max())


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_dual_init_carries_its_partials(backend):
    u = np.linspace(0.1, 0.9, 5)
    with dualgpu.using_backend(backend):
        def total(scale):
            return sum_reduce(cuda.to_device(u), init=scale * scale)

        d = dualgpu.jacobian(total, 1.5)
        plain = sum_reduce(u, init=dualgpu.Dual(2.0, [1.0, 3.0]))
    assert float(np.asarray(d)) == pytest.approx(3.0)  # d(sum + s^2)/ds at s = 1.5
    assert float(plain.value) == pytest.approx(u.sum() + 2.0)
    assert list(plain.partials) == [1.0, 3.0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_gpus_strided_fold_of_dual_arrays(backend):
    """The GPU's first pass (each thread folds every step-th element) on cpu and cudasim."""
    fold_strided, fold_with_init = reduction._fold_kernels(hypot_reduce._functor)
    x = np.linspace(-1.0, 2.0, 11)
    with dualgpu.using_backend(backend):
        d = dualgpu.dual_array(x, np.vstack([np.ones(11), x]))
        partial = cuda.device_array_like(d[:4])
        fold_strided[2, 2](d, partial, 11)
        out = cuda.device_array_like(d[:1])
        fold_with_init[1, 1](partial, out, 0.0, 4)
        total = out.copy_to_host()[0]
    norm = math.sqrt(float(np.sum(x * x)))
    assert float(total.value) == pytest.approx(norm)
    np.testing.assert_allclose(np.asarray(total.partials), [x.sum() / norm, (x * x).sum() / norm])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dual_reduction_kernels_compile_to_ptx(offline_ptx, dtype):
    """The GPU's dual path (both folds, hypot through a device function) compiles to PTX."""
    from numba import cuda as numba_cuda
    from numba import types

    from dualgpu.backends.gpu import kernel as gpu
    from dualgpu.compiled.types import dual_array_type, dual_type

    lanes = 4
    value = types.float32 if dtype == np.float32 else types.float64
    array, scalar = dual_array_type(value, 1, lanes), dual_type(value, lanes)
    fold_strided, fold_with_init = reduction._fold_kernels(hypot_reduce._functor)
    for kernel, signature in ((fold_strided, (array, array, types.int64)),
                              (fold_with_init, (array, array, scalar, types.int64))):
        ptx, _ = numba_cuda.compile_ptx(gpu.prepare_function(kernel.py_func, lanes), signature,
                                        cc=offline_ptx)
        assert ".entry" in ptx and "sqrt" in ptx


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_plain_reduction_under_the_driver_stays_plain(backend):
    """Host code may take float() of a reduction of constants while the driver runs."""
    weights = np.linspace(1.0, 2.0, 5)

    def f(u):
        norm = float(sum_reduce(weights))  # a host array of constants: a plain number
        return sum_reduce(cuda.to_device(u * weights)) / norm

    u = np.linspace(0.1, 0.5, 5)
    with dualgpu.using_backend(backend):
        jac = np.asarray(dualgpu.jacobian(f, u), np.float64).reshape(-1)
    np.testing.assert_allclose(jac, weights / weights.sum(), rtol=1e-12)
