"""Small kernels used by test_errors.py."""
from dualgpu import cuda


@cuda.jit
def axpy(x, y, a):
    i = cuda.grid(1)
    if i < x.size:
        y[i] = a * x[i] + y[i]
