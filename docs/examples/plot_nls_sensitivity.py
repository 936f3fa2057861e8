"""
Nonlinear Schrödinger pulse: nonlinearity, trap, width and chirp
================================================================

A chirped Gaussian pulse evolves under the 1-D nonlinear Schrödinger equation in a harmonic
trap, ``i dpsi/dt = -1/2 d2psi/dx2 + v0 x²/2 psi + g |psi|² psi``, by the split-step Fourier
method: the potential and the nonlinear phase as a numba.cuda kernel on the complex field,
the dispersion by ``np.fft`` between launches. Complex duals carry the derivatives through
both, so one pass with four tangent lanes gives the derivative of the final density at every
point with respect to the nonlinearity ``g``, the trap strength ``v0`` and the initial width
and chirp. Complex duals run compiled on the ``cpu`` backend (and on ``cudasim``; the kernel
compiles to PTX, but complex dual launches on a GPU are not enabled yet).
"""

# %%
# The kernel and the host loop
# ----------------------------
# An ordinary numba.cuda kernel on a complex array: half a step of the potential and the
# nonlinearity, exact pointwise. The only change for dualgpu is the import line. The
# dispersion step is exact in Fourier space, on the host (numba.cuda has no FFT); dualgpu
# transforms the values and every tangent lane in one batched ``np.fft`` call.
import cmath

import matplotlib.pyplot as plt
import numpy as np

import dualgpu
from dualgpu import cuda, plot  # was: from numba import cuda

dualgpu.set_backend("cpu")  # complex duals: compiled on the CPU (not yet launched on GPUs)


@cuda.jit
def nonlinear_half_step(psi, x, v0, g, half_dt):
    j = cuda.grid(1)
    if j < psi.shape[0]:
        z = psi[j]
        density = z.real * z.real + z.imag * z.imag
        phase = (0.5 * v0 * x[j] * x[j] + g * density) * half_dt
        psi[j] = z * cmath.exp(-1j * phase)


n, length, dt, n_steps = 64, 20.0, 0.01, 60
dx = length / n
x = (np.arange(n) - n // 2) * dx
k = 2.0 * np.pi * np.fft.fftfreq(n, d=dx)


def density(g, v0, width, chirp):
    """The final density |psi(x, T)|² of a chirped Gaussian pulse (Strang splitting)."""
    psi = (np.pi * width * width) ** -0.25 * np.exp(-x * x / (2.0 * width * width)
                                                    + 1j * chirp * x * x)
    kinetic = np.exp(-0.5j * k * k * dt)
    d_x = cuda.to_device(x)
    for _ in range(n_steps):
        d_psi = cuda.to_device(psi)
        nonlinear_half_step[1, n](d_psi, d_x, v0, g, 0.5 * dt)
        psi = np.fft.ifft(kinetic * np.fft.fft(d_psi.copy_to_host()))
        d_psi = cuda.to_device(psi)
        nonlinear_half_step[1, n](d_psi, d_x, v0, g, 0.5 * dt)
        psi = d_psi.copy_to_host()
    return np.abs(psi) ** 2


names = ("g", "v0", "width", "chirp")
values = (1.0, 0.5, 1.0, 0.2)

# %%
# Four derivatives in one pass
# ----------------------------
# ``argnums=(0, 1, 2, 3)``: one run of the simulation with four tangent lanes. The output is
# real (a density), so each derivative is a real field.
fields = dualgpu.jacobian(density, *values, argnums=(0, 1, 2, 3))
final = density(*values)
centre = n // 2  # x = 0
print(f"norm of the final pulse: {np.sum(final) * dx:.12f}")
for name, value, field in zip(names, values, fields):
    print(f"d|psi(0, T)|²/d{name} at {name} = {value:g}: {field[centre]:+.5f}")

# %%
# The derivative with respect to the nonlinearity, checked against central differences:
h = 1e-6
central = (density(values[0] + h, *values[1:]) - density(values[0] - h, *values[1:])) / (2 * h)
print("largest difference from central differences:", float(np.max(np.abs(fields[0] - central))))

# %%
# The initial and the final density.
fig, ax = plt.subplots(figsize=(7.5, 3.5), layout="constrained")
initial = np.abs((np.pi) ** -0.25 * np.exp(-x * x / 2.0 + 0.2j * x * x)) ** 2
ax.plot(x, initial, color="0.5", linestyle="--", label="|ψ(x, 0)|²")
ax.plot(x, final, label=f"|ψ(x, T)|², T = {n_steps * dt:g}")
ax.set_xlabel("position x")
ax.set_ylabel("density |ψ|²")
ax.legend()

# %%
# Where each parameter matters: the derivative of the final density at each position.
fig, axes = plt.subplots(4, 1, figsize=(7.5, 9), layout="constrained")
for ax, name, value, field in zip(axes, names, values, fields):
    plot.sensitivity_field(field, ax=ax, extent=(x[0], x[-1]), xlabel="position x",
                           colorbar_label=f"∂|ψ(x, T)|²/∂{name}",
                           title=f"{name} = {value:g}")

# %%
# Back to the default backend for what runs next.
dualgpu.set_backend(None)
