"""dgsm_maps puts measures with units (mu, nu, mu*) on one colour scale per parameter.

The mean derivative of a parameter in metres and of one in seconds have different units: one
shared colour scale would compare numbers that cannot be compared (and hide the smaller one).
The dimensionless bound on the total Sobol index keeps one shared scale.
"""
import numpy as np

from dualgpu.plot import dgsm_maps
from dualgpu.sensitivity import dgsm

PROBLEM = {"names": ["big", "small"], "bounds": [[0, 1], [0, 1]]}
T = np.linspace(0.0, 1.0, 5)


def _result():
    # d/d big = 1000 t, d/d small = t**2: three orders of magnitude apart
    return dgsm(lambda X: 1000.0 * X[:, :1] * T + X[:, 1:] * T**2, PROBLEM, 32, seed=0,
                batched=True, units={"big": "m", "small": "s"})


def test_mean_derivative_has_a_scale_and_unit_per_parameter():
    fig, axes = dgsm_maps(_result(), measure="mu", axis=T)
    assert [ax.get_title() for ax in axes] == ["big [m]", "small [s]"]
    vmax = [ax.collections[0].norm.vmax for ax in axes]
    assert np.isclose(vmax[0], 1000.0) and np.isclose(vmax[1], 1.0)
    assert all(ax.collections[0].norm.vmin == -ax.collections[0].norm.vmax for ax in axes)


def test_the_dimensionless_bound_keeps_one_shared_scale():
    fig, axes = dgsm_maps(_result(), axis=T)
    assert len(axes) == 1 and len(axes[0].collections) == 1
