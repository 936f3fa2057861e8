"""propagate: J Σ Jᵀ against the analytic matrix, and against Monte Carlo runs of the simulation.

Monte Carlo samples are ensemble members of one run of the pendulum simulation (each member
one draw of the uncertain initial state), so 20 000 draws cost one simulation.
"""
import numpy as np
import pytest

import dualgpu
from dualgpu import DualgpuError, propagate, sparse
from dualgpu.autodiff import uncertainty
from simulations import heat1d, pendulums

HEAT_STEPS = 10
R = 0.4  # alpha dt / dx**2 with heat1d.simulate's defaults


@pytest.fixture(autouse=True)
def cpu_backend():
    with dualgpu.using_backend("cpu"):
        yield


def heat_final(u0):
    return heat1d.simulate(u0, HEAT_STEPS)


def heat_matrix(n):
    """The Jacobian of heat_final, exactly: the Dirichlet FTCS step matrix to the HEAT_STEPS."""
    a = np.zeros((n, n))
    i = np.arange(1, n - 1)
    a[i, i - 1] = R
    a[i, i] = 1.0 - 2.0 * R
    a[i, i + 1] = R
    return np.linalg.matrix_power(a, HEAT_STEPS)


def spd(n, seed=0):
    rng = np.random.default_rng(seed)
    L = rng.normal(size=(n, n))
    return 0.01 * (L @ L.T / n + np.eye(n))


def test_equals_the_analytic_J_sigma_Jt():
    n = 20
    u0 = heat1d.default_initial_state(n)
    A, sigma = heat_matrix(n), spd(n)
    expected = A @ sigma @ A.T
    full = propagate(heat_final, sigma, u0)
    assert full.shape == (n, n) and full.dtype == np.float64
    np.testing.assert_allclose(full, expected, rtol=1e-10, atol=1e-14)
    np.testing.assert_array_equal(full, full.T)
    variances = propagate(heat_final, sigma, u0, diagonal=True)
    np.testing.assert_allclose(variances, np.diag(expected), rtol=1e-10, atol=1e-16)
    # independent inputs: a vector of variances
    np.testing.assert_allclose(propagate(heat_final, np.diag(sigma), u0),
                               A @ np.diag(np.diag(sigma)) @ A.T, rtol=1e-10, atol=1e-16)
    # a Jacobian in hand: dense (output.shape + input.shape) and sparse give the same
    np.testing.assert_allclose(propagate(A, sigma), expected, rtol=1e-12, atol=1e-16)
    J = sparse.sparse_jacobian(heat_final, (u0,), progress=False)
    np.testing.assert_allclose(propagate(J, sigma), expected, rtol=1e-10, atol=1e-16)
    np.testing.assert_allclose(propagate(J, sigma, diagonal=True), np.diag(expected),
                               rtol=1e-10, atol=1e-16)
    np.testing.assert_allclose(propagate(J, np.diag(sigma), diagonal=True),
                               (A * A) @ np.diag(sigma), rtol=1e-10, atol=1e-16)
    # float32 simulation: the same to float32 precision
    full32 = propagate(heat_final, sigma, u0.astype(np.float32))
    np.testing.assert_allclose(full32, expected, rtol=1e-5, atol=1e-6 * np.max(expected))


def test_field_shaped_outputs_and_several_arguments():
    # output (n,), inputs: u0 (n,) and the two boundary values: n + 2 entries of cov
    n = 8
    u0 = heat1d.default_initial_state(n)

    def final(u0, left, right):
        return heat1d.simulate(u0, HEAT_STEPS, left=left, right=right)

    sigma = spd(n + 2, seed=1)
    J_u, J_l, J_r = dualgpu.jacobian(final, u0, 0.0, 0.0, argnums=(0, 1, 2), progress=False)
    J = np.concatenate([J_u, J_l[:, None], J_r[:, None]], axis=1)
    got = propagate(final, sigma, u0, 0.0, 0.0, argnums=(0, 1, 2))
    np.testing.assert_allclose(got, J @ sigma @ J.T, rtol=1e-10, atol=1e-16)
    # a Jacobian of a 2-D output: covariance of shape output.shape + output.shape
    J2 = np.arange(2 * 3 * 2, dtype=float).reshape(2, 3, 2)
    assert propagate(J2, np.eye(2)).shape == (2, 3, 2, 3)
    assert propagate(J2, np.eye(2), diagonal=True).shape == (2, 3)


def pendulum_angle(damping=0.5, g_over_l=1.0, amplitude=1.2, steps=200):
    def angle(theta0, omega0):
        return pendulums.simulate(theta0, omega0, n_steps=steps, damping=damping,
                                  g_over_l=g_over_l, drive_amplitude=amplitude)[0]
    return angle


def monte_carlo(f, mean, sigma, draws, seed):
    """Sample covariance of f's output over draws of (theta0, omega0) ~ N(mean, sigma)."""
    rng = np.random.default_rng(seed)
    samples = rng.multivariate_normal(mean, sigma, size=draws)
    out = f(samples[:, 0].copy(), samples[:, 1].copy())
    return samples, out


def test_linear_problem_matches_monte_carlo_exactly_in_the_sample_covariance():
    # no gravity, no drive: theta'' = -damping theta' is linear in (theta0, omega0)
    f = pendulum_angle(g_over_l=0.0, amplitude=0.0)
    mean = np.array([0.3, -0.2])
    sigma = np.array([[0.04, 0.01], [0.01, 0.09]])
    variance = propagate(f, sigma, mean[:1], mean[1:], argnums=(0, 1), diagonal=True)[0]
    samples, out = monte_carlo(f, mean, sigma, 20000, seed=5)
    # sampling error of a variance from N draws: sqrt(2 / N) relative, about 1 %
    assert abs(np.var(out) / variance - 1) < 4 * np.sqrt(2 / 20000)
    # a linear map sends the sample covariance of the inputs to that of the outputs exactly
    J = np.concatenate(dualgpu.jacobian(f, mean[:1], mean[1:], argnums=(0, 1),
                                        progress=False), axis=1)
    sample_sigma = np.cov(samples.T, bias=True)
    np.testing.assert_allclose(np.var(out), (J @ sample_sigma @ J.T)[0, 0], rtol=1e-9)


def test_mildly_nonlinear_problem_matches_monte_carlo():
    f = pendulum_angle()  # the driven, damped pendulum: sin(theta), a drive
    mean = np.array([0.4, 0.1])
    sigma = np.array([[4e-4, -1e-4], [-1e-4, 9e-4]])  # 2-3 hundredths of a radian
    variance = propagate(f, sigma, mean[:1], mean[1:], argnums=(0, 1), diagonal=True)[0]
    _, out = monte_carlo(f, mean, sigma, 20000, seed=6)
    assert abs(np.var(out) / variance - 1) < 0.05
    # and far from linear the approximation is visibly off: the check can fail
    wide = 400 * sigma
    variance = propagate(f, wide, mean[:1], mean[1:], argnums=(0, 1), diagonal=True)[0]
    _, out = monte_carlo(f, mean, wide, 20000, seed=6)
    assert abs(np.var(out) / variance - 1) > 0.05


@pytest.mark.parametrize("cov, match", [
    (np.eye(3), r"shape \(4, 2\) does not end in axes holding the 3 inputs that cov"),
    (np.ones((2, 3)), r"cov has shape \(2, 3\); expected a square"),
    (np.array([[1.0, 0.5], [0.0, 1.0]]), r"not symmetric: cov\[0, 1\] = 0.5"),
    (np.array([1.0, -1.0]), "variance 1 of cov is negative"),
    (np.array([1.0, np.nan]), "NaN or infinite"),
    ("abc", "array of real numbers"),
])
def test_bad_covariances(cov, match):
    with pytest.raises(DualgpuError, match=match):
        propagate(np.ones((4, 2)), cov)


def test_other_errors(monkeypatch):
    with pytest.raises(DualgpuError, match="f returns a tuple of outputs"):
        propagate(lambda t, o: pendulums.simulate(t, o, n_steps=2), np.eye(1), np.ones(1),
                  np.zeros(1))
    with pytest.raises(DualgpuError, match=r"cov has shape \(3, 3\); expected \(8, 8\)"):
        propagate(heat_final, np.eye(3), heat1d.default_initial_state(8))
    with pytest.raises(DualgpuError, match="extra argument"):
        propagate(np.ones((4, 2)), np.eye(2), 1.0)
    with pytest.raises(DualgpuError, match="tuple of Jacobians"):
        propagate((np.ones((4, 2)), np.ones(4)), np.eye(3))
    with pytest.raises(DualgpuError, match=r"shape \(4, 3\) does not end in axes holding the 2"):
        propagate(np.ones((4, 3)), np.eye(2))
    monkeypatch.setattr(uncertainty, "MAX_COVARIANCE_BYTES", 8 * 100)
    with pytest.raises(DualgpuError, match=r"11 x 11.*diagonal=True"):
        propagate(np.ones((11, 2)), np.eye(2))
    assert propagate(np.ones((11, 2)), np.eye(2), diagonal=True).shape == (11,)
