"""
Global sensitivity of a driven pendulum (DGSM)
==============================================

``scripts/global_sensitivity_pendulum.py``: six uncertain parameters of a damped, driven
pendulum, sampled over their ranges. Exact derivatives at every sample (one dual run of the
ensemble) give the derivative-based global sensitivity measures, their bootstrap intervals
and the upper bounds on the total Sobol indices, with SALib's Sobol indices drawn beside
them; the maps show the measures along the trajectory.
"""

# %%
# ``global_sensitivity_pendulum.main`` takes the script's command line as a list;
# ``--quick`` uses few samples (the full run: ``python3 scripts/global_sensitivity_pendulum.py``).
# Figures go to ``out/global_sensitivity_pendulum/``.
import global_sensitivity_pendulum

global_sensitivity_pendulum.main(["--quick"])
