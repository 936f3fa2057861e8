"""
Nonlinear Schrödinger pulse: nonlinearity, trap, width and chirp
================================================================

``scripts/nls_sensitivity.py``: a chirped Gaussian pulse evolves under the 1-D nonlinear
Schrödinger equation in a harmonic trap, by the split-step Fourier method: the potential and
the nonlinear phase as a numba.cuda kernel on the complex field, the dispersion by ``np.fft``
between launches. Complex duals carry the derivatives through both, so one pass with four
tangent lanes gives the derivative of the final density at every point with respect to the
nonlinearity, the trap strength and the initial width and chirp. Complex duals run on the
simulator backend.
"""

# %%
# ``nls_sensitivity.main`` takes the script's command line as a list (``--help`` lists every
# option). It prints the table of sensitivities and saves its figures under
# ``out/nls_sensitivity/``.
import nls_sensitivity

nls_sensitivity.main(["--points", "64", "--steps", "60", "--no-progress"])
