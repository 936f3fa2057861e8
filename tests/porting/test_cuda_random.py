"""numba.cuda's random generators in kernels on every backend (``dualgpu.cuda.random``).

The states come from the seed as numba makes them; the draws are numba's own device functions
(compiled by the cpu backend, run as Python by cudasim), so both backends and a plain @njit
loop over the same draws agree, and derivatives through the fixed draws match differences.
"""
import warnings

import numba.cuda
import numpy as np
import pytest
from numba import njit, types

import dualgpu
import kernels_random as K
from dualgpu.backends.gpu import kernel as gpu
from dualgpu.cuda import random
from dualgpu.compiled.arrays import dual_array_type
from dualgpu.compiled.types import dual_type
from dualgpu.testing import check_jacobian


@njit
def _reference(x, states, mu, sigma, dt, steps):
    for _ in range(steps):
        for i in range(x.shape[0]):
            z = random.xoroshiro128p_normal_float64(states, i)
            x[i] += mu * x[i] * dt + sigma * x[i] * z * dt ** 0.5
    return x


# the simulator runs a step as 32 Python threads: fewer steps there
@pytest.mark.parametrize("backend, steps", [("cpu", 20), ("cudasim", 5)])
def test_draws_equal_numbas_and_derivatives_match_differences(backend, steps):
    states = np.empty(16, random.xoroshiro128p_dtype)
    random.init_xoroshiro128p_states(states, 7)
    expected = _reference(np.ones(16), states, 0.1, 0.2, 0.01, steps)

    def simulate(mu, sigma):
        return K.simulate(mu, sigma, steps=steps)

    with dualgpu.using_backend(backend):
        states_here = random.create_xoroshiro128p_states(16, seed=7)
        assert isinstance(states_here, np.ndarray)
        np.testing.assert_allclose(simulate(0.1, 0.2), expected, rtol=1e-14)
        check_jacobian(simulate, 0.1, 0.2, argnums=(0, 1))


def test_float32_uniform_draws_in_cudasim_wrap_silently():
    # numba's generators wrap uint64 arithmetic; run as Python they must not warn
    with dualgpu.using_backend("cudasim"), warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        states = random.create_xoroshiro128p_states(8, seed=3)
        x = dualgpu.dual_array(np.zeros(8, np.float32), np.ones((2, 8), np.float32))
        K.jitter[1, 8](x, states, np.float32(0.1))
    assert np.all(np.abs(x.values) <= 0.05) and np.all(x.partials == 1)


def test_import_paths():
    import dualgpu.cuda.random as by_module
    from dualgpu import cuda

    assert by_module is random is cuda.random


def test_dual_kernel_with_generator_states_compiles_to_ptx(offline_ptx):
    states = numba.typeof(np.empty(4, random.xoroshiro128p_dtype))
    x = dual_array_type(types.float64, 1, 8)
    mu = dual_type(types.float64, 8)
    ptx, _ = numba.cuda.compile_ptx(gpu.prepare_function(K.euler_maruyama.py_func, 8),
                                    (x, states, mu, mu, types.float64), cc=offline_ptx)
    assert ".entry" in ptx
