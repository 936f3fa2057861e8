"""Sparsity detection through kernels with scratch memory (issue 25, crash 1).

``sparsity="detect"`` used to fail with a numba TypingError on kernels that
store into ``cuda.shared.array`` (static or dynamic) or ``cuda.local.array``:
the scratch was allocated with tangent lanes while detection stores tracers.
The detected pattern must equal the dense Jacobian's nonzeros here (no
entry of these Jacobians is zero by accident at the chosen inputs).
"""
import numpy as np
import pytest

import dualgpu
from dualgpu.sparse import detect_sparsity

import kernels_scratch_detect as ks

CASES = {
    "shared stencil": (ks.smooth, 16, np.float64),
    "dynamic shared reduction": (ks.block_sums, 20, np.float64),
    "local scratch": (ks.window, 12, np.float64),
    "local scratch float32": (ks.window, 8, np.float32),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_detected_pattern_is_dense_nonzeros(case):
    f, n, dtype = CASES[case]
    u = np.random.default_rng(3).uniform(0.5, 1.5, n).astype(dtype)
    with dualgpu.using_backend("cpu"):
        dense = dualgpu.jacobian(f, u)
    pattern = detect_sparsity(f, (u,))
    np.testing.assert_array_equal(pattern.toarray(), dense.reshape(pattern.shape) != 0)
    if case == "shared stencil":  # the compressed Jacobian on the detected pattern
        sparse = dualgpu.jacobian(f, u, sparsity="detect")
        np.testing.assert_allclose(sparse.toarray(), dense.reshape(pattern.shape), rtol=1e-12)


def test_tracer_scratch_does_not_leak_into_derivative_runs():
    """The same kernel differentiates correctly after a detection run (separate builds)."""
    u = np.linspace(0.5, 1.5, 12)
    detect_sparsity(ks.window, (u,))
    with dualgpu.using_backend("cpu"):
        dense = dualgpu.jacobian(ks.window, u)
    h = 1e-6
    fd = np.stack([(ks.window(u + h * e) - ks.window(u - h * e)) / (2 * h)
                   for e in np.eye(12)], axis=1)
    np.testing.assert_allclose(dense, fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("case", sorted(CASES))
def test_global_pattern_through_scratch_memory(case):
    """mode="global" through shared and local scratch (issue 43: numba's setitem TypingError
    on the cpu backend; the scratch was given local tracer lanes only)."""
    f, n, dtype = CASES[case]
    u = np.random.default_rng(3).uniform(0.5, 1.5, n).astype(dtype)
    local = detect_sparsity(f, (u,))
    glob = detect_sparsity(f, (u,), mode="global")
    np.testing.assert_array_equal(glob.toarray(), local.toarray())
