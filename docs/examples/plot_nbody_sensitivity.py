"""
N-body cluster: how each mass moves each body
=============================================

``scripts/nbody_sensitivity.py``: a random cluster evolves by leapfrog. One pass seeds a
lane per mass plus one for G and one for the softening length, and gives the derivative of
every final position with respect to each.
"""

# %%
# ``nbody_sensitivity.main`` takes the script's command line as a list (``--help`` lists every
# option). It prints the table of sensitivities and saves its figures under ``out/nbody_sensitivity/``.
import nbody_sensitivity

nbody_sensitivity.main(["--bodies", "16", "--steps", "50", "--no-progress"])
