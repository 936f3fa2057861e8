"""
Pendulum ensemble: every member's sensitivity
=============================================

``scripts/pendulum_sensitivity.py``: damped, driven pendulums started at different
angles share four parameters. Four tangent lanes give every member's sensitivity to each of
them in one run of the ensemble.
"""

# %%
# ``pendulum_sensitivity.main`` takes the script's command line as a list (``--help`` lists every
# option). It prints the table of sensitivities and saves its figures under ``out/pendulum_sensitivity/``.
import pendulum_sensitivity

pendulum_sensitivity.main(["--members", "64", "--steps", "200", "--no-progress"])
