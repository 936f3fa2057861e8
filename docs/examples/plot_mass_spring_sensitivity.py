"""
Swinging chain: stiffness, damping, rest length and gravity
===========================================================

``scripts/mass_spring_sensitivity.py``: a chain of masses and springs pinned at one end
falls and swings. Four tangent lanes give every node's sensitivity to the four parameters.
"""

# %%
# ``mass_spring_sensitivity.main`` takes the script's command line as a list (``--help`` lists every
# option). It prints the table of sensitivities and saves its figures under ``out/mass_spring_sensitivity/``.
import mass_spring_sensitivity

mass_spring_sensitivity.main(["--nodes", "12", "--steps", "500", "--no-progress"])
