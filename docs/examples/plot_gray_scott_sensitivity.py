"""
Gray-Scott pattern: feed and kill rates
=======================================

``scripts/gray_scott_sensitivity.py``: a reaction-diffusion pattern grows on a periodic
grid. Two tangent lanes give where the final concentrations depend on the feed rate F and
the kill rate k.
"""

# %%
# ``gray_scott_sensitivity.main`` takes the script's command line as a list (``--help`` lists every
# option). It prints the table of sensitivities and saves its figures under ``out/gray_scott_sensitivity/``.
import gray_scott_sensitivity

gray_scott_sensitivity.main(["--cells", "24", "--steps", "200", "--no-progress"])
