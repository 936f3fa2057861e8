"""Small kernels used by test_errors.py."""
import cmath
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


@cuda.jit
def phase_shift(psi, out, v, dt):
    # complex wave function times exp(-i v dt): complex arithmetic with a (dual) parameter
    i = cuda.grid(1)
    if i < psi.shape[0]:
        out[i] = psi[i] * cmath.exp(-1j * v * dt)
