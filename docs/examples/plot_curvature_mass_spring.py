"""
Second order: the chain's energy against its quadratic model
============================================================

``scripts/curvature_mass_spring.py``: the gradient and Hessian of the chain's final
energy in the stiffness k and damping c (nested duals), and the simulation over a grid of
(k, c) against the linear and quadratic models they give.
"""

# %%
# ``curvature_mass_spring.main`` takes the script's command line as a list (``--help`` lists every
# option). It prints the table of sensitivities and saves its figures under ``out/curvature_mass_spring/``.
import curvature_mass_spring

curvature_mass_spring.main(["--nodes", "8", "--steps", "200", "--grid", "5", "--no-progress"])
