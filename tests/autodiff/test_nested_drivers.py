"""Drivers inside drivers (issue 25, unclear errors 4 and 7).

* ``ensemble_jacobian`` inside a first-order derivative failed when it assembled its
  result ("a DualArray cannot become a plain numpy array"); it now returns the
  per-member Jacobians carrying the outer derivative, checked against finite
  differences.
* A third nested driver (jacobian of hessian, jacfwd(jacfwd(jacfwd(f))), an
  ensemble_jacobian inside hessian) failed inside the driver's seeding with a
  message about host numpy; it is refused by name with the supported depth.
"""
import numpy as np
import pytest

import dualgpu
from dualgpu import DualgpuError
from simulations import pendulums

MEMBERS = 4
OMEGA0 = np.linspace(-0.3, 0.4, MEMBERS)


@pytest.fixture(autouse=True)
def cpu_backend():
    with dualgpu.using_backend("cpu"):
        yield


def run(theta0, damping):
    return pendulums.simulate(theta0, OMEGA0.astype(theta0.dtype), n_steps=4,
                              damping=damping, g_over_l=1.1)


def members_jacobian(damping, theta0):
    return dualgpu.ensemble_jacobian(run, theta0, damping, argnums=0)


def theta(dtype):
    return pendulums.default_initial_state(MEMBERS)[0].astype(dtype)


@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-6), (np.float32, 2e-2)])
def test_ensemble_jacobian_inside_jacobian_of_a_shared_parameter(dtype, rtol):
    th = theta(dtype)
    d = dtype(0.5)
    J = dualgpu.jacobian(members_jacobian, d, th)
    assert J.shape == (MEMBERS, 2, 1)
    h = 1e-5 if dtype == np.float64 else 1e-2
    fd = (members_jacobian(dtype(d + h), th) - members_jacobian(dtype(d - h), th)) / (2 * h)
    np.testing.assert_allclose(J, fd, rtol=rtol, atol=rtol * np.abs(fd).max())


def test_ensemble_jacobian_inside_jacobian_of_its_own_input():
    th = theta(np.float64)
    J = dualgpu.jacobian(lambda t: members_jacobian(0.5, t), th)
    assert J.shape == (MEMBERS, 2, 1, MEMBERS)
    h = 1e-5
    fd = np.stack([(members_jacobian(0.5, th + h * e) - members_jacobian(0.5, th - h * e))
                   / (2 * h) for e in np.eye(MEMBERS)], axis=-1)
    np.testing.assert_allclose(J, fd, rtol=1e-6, atol=1e-8)
    # members are independent: member i's Jacobian does not move with member j's input
    off = ~np.eye(MEMBERS, dtype=bool)
    assert np.all(np.moveaxis(J, -1, 1)[off] == 0.0)


def cubic(x):
    return x[0] ** 3 * x[1]


THIRD_ORDER = {
    "jacfwd^3": lambda x: dualgpu.jacfwd(dualgpu.jacfwd(dualgpu.jacfwd(cubic)))(x),
    "jacobian of hessian": lambda x: dualgpu.jacobian(lambda y: dualgpu.hessian(cubic, y), x),
    "ensemble_jacobian inside hessian": lambda x: dualgpu.hessian(
        lambda t: members_jacobian(0.5, t).sum(), x),
}


@pytest.mark.parametrize("case", sorted(THIRD_ORDER))
def test_third_derivatives_are_refused_by_name(case):
    x = theta(np.float64)
    with pytest.raises(DualgpuError, match=r"order 3 .*second order \(2 drivers\).*Fix"):
        THIRD_ORDER[case](x)


def test_second_order_still_runs():
    x = np.array([0.7, 1.3])
    H = dualgpu.hessian(cubic, x)
    np.testing.assert_allclose(H, [[6 * 0.7 * 1.3, 3 * 0.7 ** 2], [3 * 0.7 ** 2, 0.0]],
                               rtol=1e-12)
