"""propagate refuses a covariance that is not positive semi-definite (it gave negative output
variances: NaN error bars), naming the smallest eigenvalue; rounding-level negatives pass."""
import numpy as np
import pytest

from dualgpu import DualgpuError, propagate

# symmetric, positive diagonal, but eigenvalues 3 and -1: not a covariance
INDEFINITE = np.array([[1.0, 2.0], [2.0, 1.0]])
J = np.array([[1.0, -1.0]])


def test_indefinite_covariance_is_refused_with_its_smallest_eigenvalue():
    # today: J cov J^T = 1 + 1 - 4 = -2, a negative variance
    with pytest.raises(DualgpuError,
                       match=r"not positive semi-definite.*smallest eigenvalue is -1\.0"):
        propagate(J, INDEFINITE)
    with pytest.raises(DualgpuError, match=r"not positive semi-definite"):
        propagate(J, INDEFINITE, diagonal=True)


def test_rounding_level_negative_eigenvalues_pass():
    v = np.array([[1.0], [1.0]]) / np.sqrt(2)
    cov = v @ v.T  # rank 1: eigenvalues 1 and 0 (0 may come out as -1e-17)
    cov = cov - 1e-14 * np.eye(2)  # a rounding-sized negative eigenvalue
    out = propagate(np.eye(2), cov)
    np.testing.assert_allclose(out, cov)
    caller = INDEFINITE.copy()
    with pytest.raises(DualgpuError):
        propagate(J, caller)
    np.testing.assert_array_equal(caller, INDEFINITE)  # never mutated
