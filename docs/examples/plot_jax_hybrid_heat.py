"""
JAX and a numba.cuda simulation: recover a diffusivity field
============================================================

``scripts/jax_hybrid_heat.py``: the heat simulation stays numba.cuda code; a small JAX MLP
gives its diffusivity alpha(x). ``dualgpu.interop.to_jax`` makes the simulation a
differentiable JAX function, so ``jax.grad`` of a least-squares loss on noisy final
temperatures drives an Adam optimiser. The gradient is compared once with central
differences. The figures show the recovered field against the truth and the loss curve.
"""

# %%
# ``jax_hybrid_heat.main`` takes the script's command line as a list; here a shorter fit than
# the script's default (``python3 scripts/jax_hybrid_heat.py``: 150 iterations, 4 experiments).
# Figures go to ``out/jax_hybrid_heat/``.
import jax_hybrid_heat

jax_hybrid_heat.main(["--iterations", "60", "--experiments", "3"])
