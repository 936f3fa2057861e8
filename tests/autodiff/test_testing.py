"""dualgpu.testing: the finite-difference checkers pass correct derivatives and catch wrong ones."""
import numpy as np
import pytest

import dualgpu
from dualgpu.testing import check_jacobian, check_jvp

import simulations.heat1d as heat


@pytest.fixture(autouse=True)
def cpu_backend():
    with dualgpu.using_backend("cpu"):
        yield


def rod(u0, alpha):
    """A short heat run: 16 cells, 10 steps."""
    return heat.simulate(u0, 10, alpha)


def rod_dropping_alpha(u0, alpha):
    """Wrong on purpose: takes alpha's value only, so d/d alpha is lost."""
    if isinstance(alpha, dualgpu.Dual):
        alpha = alpha.value
    return heat.simulate(u0, 10, alpha)


def rod_slightly_off(u0, alpha):
    """Wrong on purpose: every derivative 0.1 % too large."""
    out = heat.simulate(u0, 10, alpha)
    if isinstance(out, dualgpu.DualArray):
        out.partials *= 1.001
    return out


U0 = heat.default_initial_state(16)


def test_correct_derivatives_pass_float64():
    assert check_jvp(rod, (U0, 1.0)) < 1e-8
    assert check_jvp(rod, (U0, 1.0), argnums=1, seed=3) < 1e-8
    assert check_jacobian(rod, U0, 1.0, argnums=(0, 1), chunk_size=8) < 1e-8


def test_explicit_tangents():
    err = check_jvp(rod, (U0, 1.0), (np.linspace(-1.0, 1.0, 16), None))
    assert 0.0 <= err < 1e-8


def test_correct_derivatives_pass_float32():
    u0 = U0.astype(np.float32)
    err = check_jvp(rod, (u0, np.float32(1.0)))
    assert 0.0 < err < 1e-2


def test_dropped_partial_is_caught():
    with pytest.raises(AssertionError, match=r"forward mode .* vs finite difference"):
        check_jvp(rod_dropping_alpha, (U0, 1.0), argnums=1)
    with pytest.raises(AssertionError, match=r"output 0\[\d+\]"):
        check_jacobian(rod_dropping_alpha, U0, 1.0, argnums=(0, 1), chunk_size=8)


def test_small_error_is_caught_at_default_tolerance_and_passes_a_loose_one():
    with pytest.raises(AssertionError, match="relative 0.000999"):
        check_jvp(rod_slightly_off, (U0, 1.0))
    err = check_jvp(rod_slightly_off, (U0, 1.0), rtol=1e-2)
    assert 5e-4 < err < 2e-3


def test_float32_tolerance_still_catches_wrong_derivatives():
    with pytest.raises(AssertionError):
        check_jvp(rod_dropping_alpha, (U0.astype(np.float32), np.float32(1.0)), argnums=1)


def test_non_float_argnums_are_rejected():
    with pytest.raises(dualgpu.DualgpuError, match="argument 1 is an int"):
        check_jvp(heat.simulate, (U0, 10), argnums=1)
    with pytest.raises(dualgpu.DualgpuError, match="points at argument 5"):
        check_jacobian(rod, U0, 1.0, argnums=5)


def test_check_jacobian_takes_arguments_like_jacobian():
    assert check_jacobian(rod, U0, 1.0, argnums=1) < 1e-8
    with pytest.warns(DeprecationWarning, match=r"check_jacobian\(f, a, b, \.\.\., argnums"):
        assert check_jacobian(rod, (U0, 1.0), argnums=1) < 1e-8  # the former form still works
    with pytest.raises(dualgpu.DualgpuError, match=r"argument 0 is a tuple.*\*args"):
        check_jacobian(rod, (U0, 1.0), 1.0)
