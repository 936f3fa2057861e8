"""Floor 5, autodiff: the drivers that seed lanes, run a simulation and assemble derivatives.

``driver`` (jvp, jacfwd, jacobian), ``sparse``/``coloring``/``sparsity`` (compressed Jacobians),
``hessian``, ``ensemble``, ``uncertainty``, ``distributed`` (chunks on many workers) and
``fd_error`` (the finite-difference checkers' second opinion).
"""
