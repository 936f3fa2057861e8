"""Small kernels used by test_errors.py."""
import math

from dualgpu import cuda


@cuda.jit
def axpy(x, y, a):
    i = cuda.grid(1)
    if i < x.size:
        y[i] = a * x[i] + y[i]


@cuda.jit
def gamma_of(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = math.gamma(x[i])
