"""Device functions in their own module, written as numba.cuda code ported with one line.

``tests/kernels_ported.py`` calls these from its kernels: a kernel on every backend
must find device functions defined in another module.
"""
import math

from dualgpu import cuda

__all__ = ["pair_force", "weighted_sum3", "laplacian_1d"]


@cuda.jit(device=True)
def pair_force(dx, dy, strength, softening):
    """Return the (fx, fy) softened inverse-square force of one pair (a tuple)."""
    r2 = dx * dx + dy * dy + softening * softening
    inv = strength / (r2 * math.sqrt(r2))
    return dx * inv, dy * inv


@cuda.jit(device=True)
def weighted_sum3(u, i, w):
    """Return w*u[i-1] + u[i] + w*u[i+1] with a float accumulator that may become a dual."""
    acc = 0.0
    acc += w * u[i - 1]
    acc += u[i]
    acc += w * u[i + 1]
    return acc


@cuda.jit(device=True)
def laplacian_1d(u, i):
    """Second difference of u at i."""
    return u[i - 1] - 2.0 * u[i] + u[i + 1]
