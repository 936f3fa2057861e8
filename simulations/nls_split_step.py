"""One-dimensional nonlinear Schrödinger equation, split-step Fourier method.

Physics
-------
A wave function ``psi(x, t)`` (a Bose-Einstein condensate in the Gross-Pitaevskii picture, or
a light pulse's envelope in a fibre) obeys, in dimensionless units,

    i dpsi/dt = -1/2 d2psi/dx2 + v0 * x**2 / 2 * psi + g * |psi|**2 * psi,

with ``v0`` the strength of a harmonic trap and ``g`` the nonlinearity (``g > 0`` repulsive or
defocusing, ``g < 0`` attractive or focusing). The norm ``sum |psi|**2 dx`` is conserved.

Discretisation
--------------
``n`` points ``x_j`` spaced ``dx`` on a periodic box of length ``n dx`` centred at 0. Each step
of ``dt`` is a Strang splitting:

1. half a step of the potential and the nonlinearity, exact pointwise: ``psi *= exp(-i (v0
   x**2/2 + g |psi|**2) dt/2)`` (a numba.cuda kernel, one thread per point, on the complex
   field);
2. a full step of the dispersion, exact in Fourier space: ``psi = ifft(exp(-i k**2 dt/2)
   fft(psi))`` (``np.fft`` on the host: numba.cuda has no FFT);
3. the first half step again.

The scheme is second order in ``dt`` and conserves the norm up to rounding.

Initial state
-------------
A chirped Gaussian pulse of width ``width`` and chirp ``chirp``, normalised to 1:
``psi0(x) = (pi width**2)**(-1/4) exp(-x**2 / (2 width**2) + i chirp x**2)``.

Every parameter (``g``, ``v0``, ``width``, ``chirp``) may be a dual number: the kernel runs
on complex duals (compiled on the cpu backend, or on the simulator) and the FFTs transform the
partials with the values (:mod:`dualgpu.host.fft`). The kernel compiles to PTX with complex
duals, but complex dual launches on a GPU (the cuda backend) are not enabled yet; there the
plain simulation runs.
"""
import cmath

import numpy as np

from dualgpu import cuda

__all__ = ["THREADS_PER_BLOCK", "grid", "initial_state", "nonlinear_half_step", "simulate",
           "norm"]

THREADS_PER_BLOCK = 64
"""Threads per block of the 1-D launches."""


@cuda.jit
def nonlinear_half_step(psi, x, v0, g, half_dt):
    """``psi[j] *= exp(-i (v0 x_j**2 / 2 + g |psi[j]|**2) half_dt)``, in place."""
    j = cuda.grid(1)
    if j < psi.shape[0]:
        z = psi[j]
        density = z.real * z.real + z.imag * z.imag
        phase = (0.5 * v0 * x[j] * x[j] + g * density) * half_dt
        psi[j] = z * cmath.exp(-1j * phase)


def grid(n=64, length=20.0):
    """Return ``(x, dx, k)``: the points, their spacing and the FFT's angular wavenumbers.

    Parameters
    ----------
    n : int
        Number of points (a power of two suits the FFT).
    length : float
        Length of the periodic box, centred at 0.
    """
    dx = length / n
    x = (np.arange(n) - n // 2) * dx
    k = 2.0 * np.pi * np.fft.fftfreq(n, d=dx)
    return x, dx, k


def initial_state(x, width=1.0, chirp=0.0):
    """Return the normalised chirped Gaussian ``psi0`` on the points ``x`` (complex).

    ``width`` and ``chirp`` may be duals: the answer is then a complex DualArray.
    """
    amplitude = (np.pi * width * width) ** -0.25
    return amplitude * np.exp(-x * x / (2.0 * width * width) + 1j * chirp * x * x)


def simulate(psi0, *, g, v0, dt, n_steps, x, k):
    """Advance ``psi0`` by ``n_steps`` split steps of ``dt``; return ``psi`` on the host.

    Parameters
    ----------
    psi0 : array or DualArray, complex, shape (n,)
        The initial wave function (not modified).
    g, v0 : float or Dual
        The nonlinearity and the trap strength.
    dt : float
        The time step.
    n_steps : int
        Number of steps.
    x, k : ndarray
        The points and the angular wavenumbers (:func:`grid`).

    Returns
    -------
    ndarray or DualArray
        The final wave function (complex, on the host).
    """
    n = x.shape[0]
    blocks = (n + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK
    kinetic = np.exp(-0.5j * k * k * dt)  # the dispersion's exact step in Fourier space
    d_x = cuda.to_device(x)
    psi = psi0
    for _ in range(n_steps):
        d_psi = cuda.to_device(psi)
        nonlinear_half_step[blocks, THREADS_PER_BLOCK](d_psi, d_x, v0, g, 0.5 * dt)
        psi = np.fft.ifft(kinetic * np.fft.fft(d_psi.copy_to_host()))
        d_psi = cuda.to_device(psi)
        nonlinear_half_step[blocks, THREADS_PER_BLOCK](d_psi, d_x, v0, g, 0.5 * dt)
        psi = d_psi.copy_to_host()
    return psi


def norm(psi, dx):
    """Return ``sum |psi|**2 dx``, conserved by the equation and the scheme."""
    return np.sum(np.abs(psi) ** 2) * dx
