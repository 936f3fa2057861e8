"""
Calibrating pendulums, with error bars
======================================

``scripts/calibrate_pendulum.py``: fits the damping, drive amplitude and g/L of an
ensemble of pendulums to noisy observed angles with ``scipy.optimize.least_squares``, once
with ``jac=dualgpu.jacfwd(...)`` and once with finite differences, then propagates the
fitted parameters' covariance to an error band of the prediction with
``dualgpu.propagate``.
"""

# %%
# ``calibrate_pendulum.main`` takes the script's command line as a list (``--help`` lists every
# option). It prints the table of sensitivities and saves its figures under ``out/calibrate_pendulum/``.
import calibrate_pendulum

calibrate_pendulum.main(["--members", "4", "--steps", "300", "--no-progress"])
