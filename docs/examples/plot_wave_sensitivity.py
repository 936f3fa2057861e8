"""
Damped wave on a membrane: wave speed and damping
=================================================

``scripts/wave_sensitivity.py``: a Gaussian bump spreads on a clamped square membrane.
Two tangent lanes give where the final displacement depends on the wave speed and on the
damping.
"""

# %%
# ``wave_sensitivity.main`` takes the script's command line as a list (``--help`` lists every
# option). It prints the table of sensitivities and saves its figures under ``out/wave_sensitivity/``.
import wave_sensitivity

wave_sensitivity.main(["--cells", "17", "--steps", "50", "--no-progress"])
