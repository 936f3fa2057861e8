"""Floor 5, autodiff: the drivers that seed lanes, run a simulation and assemble derivatives.

``api`` (jvp, jvp_batch, jacfwd, jacobian) over ``engine`` (inputs, chunks of directions,
runs of f, assembly; chunk runners), ``sparse``/``coloring``/``sparsity`` (compressed
Jacobians), ``hessian``, ``ensemble``, ``uncertainty``, ``distributed`` (chunks on many
workers: a chunk runner for the engine) and ``fd_error`` (the finite-difference checkers'
second opinion). ``engine`` imports none of the others but the private helpers
(``_protect``, ``_results``, ``_non_finite``, ``_progress``).
"""

__all__ = []
