"""``dualgpu.testing`` on a simulation whose output shape changes with its inputs (issue 44).

An adaptive end (one more saved frame past a threshold) gave numpy's bare ``ValueError:
operands could not be broadcast together`` when a finite-difference step crossed it; the
checkers now name the shapes and the step, and the fix.
"""
import numpy as np
import pytest

import dualgpu
from dualgpu import cuda
from dualgpu.errors import DualgpuError
from dualgpu.testing import EPS, check_jacobian, check_jvp

BACKENDS = ["cpu", "cudasim"]
RATE = 0.7
#: the first step of check_jvp along the tangent 1.0 at RATE (eps relative to |x| / |t|)
H0 = EPS[np.dtype(np.float64)] * RATE


@cuda.jit
def _decay(u, rate, dt):
    i = cuda.grid(1)
    if i < u.shape[0]:
        u[i] = u[i] - dt * rate * u[i]


def _frames(rate, threshold, wrong=False):
    """Frames of a decay; one more frame when the rate passes ``threshold`` (an adaptive end)."""
    value = float(rate.value) if isinstance(rate, dualgpu.Dual) else float(rate)
    steps = 6 if value < threshold else 7
    d = cuda.to_device(np.ones(4))
    frames = []
    for _ in range(steps):
        _decay[1, 4](d, rate * 1.001 if wrong and isinstance(rate, dualgpu.Dual) else rate,
                     0.1)
        frames.append(d.copy_to_host())
    return np.stack(frames)


@pytest.mark.parametrize("backend", BACKENDS)
def test_shape_change_at_the_first_step_names_shapes_and_step(backend):
    with dualgpu.using_backend(backend):
        assert check_jvp(lambda r: _frames(r, RATE + 1e-3), (RATE,), (1.0,)) < 1e-6
        with pytest.raises(DualgpuError) as info:
            check_jvp(lambda r: _frames(r, RATE + 0.5 * H0), (RATE,), (1.0,))
    message = str(info.value)
    assert "(7, 4)" in message and "(6, 4)" in message
    assert f"h = {H0:.3g}" in message and "eps=" in message and "fixed shape" in message


@pytest.mark.parametrize("backend", BACKENDS)
def test_shape_change_at_a_larger_step_of_the_second_opinion(backend):
    """A wrong derivative makes the checker retry at larger steps, which cross the threshold."""
    with dualgpu.using_backend(backend):
        with pytest.raises(DualgpuError, match=r"f\(x \+ h t\) has shape\(s\) \(7, 4\)"):
            check_jvp(lambda r: _frames(r, RATE + 2.5 * H0, wrong=True), (RATE,), (1.0,))


def test_check_jacobian_names_the_shapes_too():
    with dualgpu.using_backend("cpu"):
        with pytest.raises(DualgpuError, match=r"output shapes change with its inputs"):
            check_jacobian(lambda r: _frames(r, RATE + 1e-12), RATE, eps=1e-3)
