"""
Heat rod: diffusivity, end temperatures and initial state
=========================================================

``scripts/heat_sensitivity.py``: a 1-D rod diffuses a hot spot with its ends held at fixed
temperatures. One pass with three tangent lanes gives the derivative of every cell's final
temperature with respect to the diffusivity and the two end temperatures; chunks of lanes
give the Jacobian of the final field with respect to the initial one.
"""

# %%
# ``heat_sensitivity.main`` takes the script's command line as a list (``--help`` lists every
# option). It prints the table of sensitivities and saves its figures under ``out/heat_sensitivity/``.
import heat_sensitivity

heat_sensitivity.main(["--cells", "41", "--steps", "200", "--no-progress"])
