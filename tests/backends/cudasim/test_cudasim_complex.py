"""Complex kernels on the simulator backend: complex duals through the driver.

The kernels (tests/fixtures/kernels_complex.py) are numba.cuda kernels ported with the import
line alone. Jacobians against analytic values and central differences of plain launches.
"""
import numba
import numpy as np
import pytest

import dualgpu
from dualgpu import cuda
from complex_harness import (BINARY, CMATH, NUMPY, OPERATORS, UNARY, assert_tangent_close,
                             central_difference, draw)
from kernels_complex import complex_mix, orders_complex, phase_shift, rule_kernel

N = 6


def _phase(v, psi, dt):
    out = cuda.device_array_like(psi)
    phase_shift[1, 32](cuda.to_device(psi), out, cuda.to_device(v), dt)
    return out.copy_to_host()


@pytest.mark.parametrize("real, complex_", [(np.float32, np.complex64),
                                             (np.float64, np.complex128)])
def test_phase_shift_kernel_differentiates_on_cudasim(real, complex_):
    psi = np.exp(1j * np.linspace(0, 1, N)).astype(complex_)
    v = np.linspace(0.5, 1.0, N).astype(real)
    with dualgpu.using_backend("cudasim"):
        jac = dualgpu.jacobian(_phase, v, psi, 0.1, progress=False)
        plain = _phase(v, psi, 0.1)
    assert jac.dtype == complex_ and plain.dtype == complex_
    expected = np.diag(psi.astype(np.complex128) * -0.1j * np.exp(-0.1j * v.astype(np.float64)))
    tolerance = 1e-6 if real == np.float32 else 1e-14
    np.testing.assert_allclose(jac, expected, rtol=tolerance, atol=tolerance)


def _mix(a, b):
    out = cuda.device_array(a.shape, np.complex128)
    density = cuda.device_array(a.shape, np.float64)
    complex_mix[1, 32](cuda.to_device(a), cuda.to_device(b), out, density)
    return out.copy_to_host(), density.copy_to_host()


def test_complex_builtins_and_cmath_in_a_kernel_against_central_differences():
    rng = np.random.default_rng(4)
    a, b = rng.uniform(0.3, 1.5, N), rng.uniform(-1.0, 1.0, N)
    with dualgpu.using_backend("cudasim"):
        (jac_out_a, jac_out_b), (jac_den_a, jac_den_b) = dualgpu.jacobian(
            _mix, a, b, argnums=(0, 1), progress=False)
        h = 1e-6
        for k in range(N):
            e = np.eye(N)[k] * h
            for arg, jac_out, jac_den in ((0, jac_out_a, jac_den_a), (1, jac_out_b, jac_den_b)):
                plus = _mix(a + e, b) if arg == 0 else _mix(a, b + e)
                minus = _mix(a - e, b) if arg == 0 else _mix(a, b - e)
                np.testing.assert_allclose(jac_out[:, k], (plus[0] - minus[0]) / (2 * h),
                                           rtol=1e-6, atol=1e-7)
                np.testing.assert_allclose(jac_den[:, k], (plus[1] - minus[1]) / (2 * h),
                                           rtol=1e-6, atol=1e-7)
    assert jac_out_a.dtype == np.complex128 and jac_den_a.dtype == np.float64


def test_ordering_complex_duals_in_a_kernel_names_the_fix():
    z = dualgpu.dual_array(np.array([0.5 + 1j, 2j]), lanes=1)
    with dualgpu.using_backend("cudasim"):
        with pytest.raises(TypeError, match=r"orders complex numbers.*Fix: compare a real"):
            orders_complex[1, 32](z, dualgpu.dual_array(np.zeros(2, complex), lanes=1))


def test_a_complex_dual_stored_into_a_plain_array_names_the_fix():
    from kernels_for_errors import phase_shift as scalar_phase_shift

    psi = np.exp(1j * np.linspace(0, 1, 8))
    with dualgpu.using_backend("cudasim"):
        scalar_phase_shift[1, 32](psi, np.zeros(8, complex), 0.5, 0.1)  # plain: runs
        with pytest.raises(TypeError, match=r"storing a Dual into the numpy complex array out "
                           r"converts it with complex\(\).*Fix: allocate out"):
            scalar_phase_shift[1, 32](psi, np.zeros(8, complex), dualgpu.Dual(0.5, [1.0]), 0.1)


# --- every complex rule in a simulated kernel ------------------------------------------------
FORMS = {**NUMPY, **{k: f for k, f in OPERATORS.items()}, **CMATH}  # the kernel's own form
RULES = UNARY + BINARY


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("key", RULES)
def test_complex_rule_in_a_simulated_kernel(key, dtype):
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(RULES.index(key))
    nargs = 2 if key in BINARY else 1
    drawn = [draw(key, i, "c", dtype, (4,), rng) for i in range(nargs)]
    operands = [dualgpu.DualArray(v, t[None].copy()) for v, t in drawn]
    plain = NUMPY[key](*[v for v, _ in drawn])
    out = dualgpu.dual_array(np.zeros(4, plain.dtype), lanes=1)
    with dualgpu.using_backend("cudasim"):
        rule_kernel(FORMS[key], nargs)[1, 4](*operands, out)
    expected = central_difference(NUMPY[key], [v for v, _ in drawn], [t for _, t in drawn])
    assert_tangent_close(out.partials[0], expected, dtype, f"{key} in a simulated kernel")


@pytest.mark.parametrize("real, complex_", [(np.float32, np.complex64),
                                             (np.float64, np.complex128)])
def test_phase_shift_kernel_differentiates_on_the_cpu_backend_as_on_cudasim(real, complex_):
    """The same ported kernel compiled (cpu backend): the Jacobian equals cudasim's."""
    psi = np.exp(1j * np.linspace(0, 1, N)).astype(complex_)
    v = np.linspace(0.5, 1.0, N).astype(real)
    jac = {}
    for backend in ("cpu", "cudasim"):
        with dualgpu.using_backend(backend):
            jac[backend] = dualgpu.jacobian(_phase, v, psi, 0.1, progress=False)
    assert jac["cpu"].dtype == complex_
    tolerance = 1e-6 if real == np.float32 else 1e-15
    np.testing.assert_allclose(jac["cpu"], jac["cudasim"], rtol=tolerance, atol=tolerance)


def test_complex_builtins_and_cmath_on_the_cpu_backend_match_cudasim():
    rng = np.random.default_rng(4)
    a, b = rng.uniform(0.3, 1.5, N), rng.uniform(-1.0, 1.0, N)
    jac = {}
    for backend in ("cpu", "cudasim"):
        with dualgpu.using_backend(backend):
            jac[backend] = dualgpu.jacobian(_mix, a, b, argnums=(0, 1), progress=False)
    for output in range(2):
        for arg in range(2):
            np.testing.assert_allclose(jac["cpu"][output][arg], jac["cudasim"][output][arg],
                                       rtol=1e-13, atol=1e-13)


def test_ordering_complex_duals_on_the_cpu_backend_names_the_fix():
    z = dualgpu.dual_array(np.array([0.5 + 1j, 2j]), lanes=1)
    with dualgpu.using_backend("cpu"):
        with pytest.raises(TypeError, match=r"orders complex numbers.*Fix: compare a real"):
            orders_complex[1, 32](z, dualgpu.dual_array(np.zeros(2, complex), lanes=1))


def test_holomorphic_jacobian_through_a_simulated_kernel():
    z = np.array([0.3 + 0.2j, 0.5 - 0.1j, 1.0 + 0.5j])

    def f(w):
        out = cuda.device_array_like(w)
        phase_shift[1, 32](cuda.to_device(w), out, cuda.to_device(np.ones(3)), 0.1)
        return out.copy_to_host()  # w * exp(-0.1i): df/dw = exp(-0.1i)

    with dualgpu.using_backend("cudasim"):
        jac = dualgpu.jacobian(f, z, holomorphic=True, progress=False)
    np.testing.assert_allclose(jac, np.eye(3) * np.exp(-0.1j), rtol=1e-15)


@dualgpu.cuda.jit
def _smooth_in_a_complex_tile(psi, out, g):
    sh = dualgpu.cuda.shared.array(16, dtype=numba.complex128)
    t = dualgpu.cuda.threadIdx.x
    n = psi.shape[0]
    if t < n:
        sh[t] = psi[t] * (1.0 + 1j * g)
    dualgpu.cuda.syncthreads()
    if t < n:
        out[t] = 0.5 * sh[t] + 0.25 * (sh[(t + 1) % n] + sh[(t - 1) % n])


def test_a_complex_shared_tile_gets_the_fix_a_kernel_can_take():
    """cudasim: a complex dual stored into a complex shared array (a documented limit) was
    refused with host code's fixes (pinned_array, np.stack), which a kernel cannot use."""
    def run(g):
        psi = dualgpu.cuda.to_device(np.exp(1j * np.linspace(0, 1, 8)))
        out = dualgpu.cuda.device_array_like(psi)
        _smooth_in_a_complex_tile[1, 8](psi, out, g)
        return out.copy_to_host()

    with dualgpu.using_backend("cudasim"), pytest.raises(
            TypeError, match=r"into sh, a shared or local array of a kernel the CUDA simulator "
                             r"runs.*Fix: pass sh to the kernel as an argument"):
        dualgpu.jacobian(run, 0.3)
