"""Example physics simulations written as ordinary numba.cuda code.

Each module holds ``@cuda.jit`` kernels, a host ``simulate(...)`` that runs many time steps and
returns the final state as host arrays, and a ``default_initial_state(...)`` helper:

* :mod:`simulations.heat1d` -- 1-D heat equation, explicit 3-point stencil, Dirichlet or
  periodic ends.
* :mod:`simulations.heat2d` -- 2-D heat equation, explicit 5-point stencil, Dirichlet edges.
* :mod:`simulations.wave2d` -- 2-D damped wave equation on a clamped membrane, leapfrog.
* :mod:`simulations.nbody` -- all-pairs softened gravity, kick-drift-kick leapfrog.
* :mod:`simulations.mass_spring` -- hanging chain of masses and damped springs, symplectic
  Euler.
* :mod:`simulations.pendulums` -- ensemble of damped driven pendulums, RK4.
* :mod:`simulations.gray_scott` -- Gray-Scott reaction-diffusion on a periodic grid.

Beside them: :mod:`simulations.heat1d_variable` (a rod with a conductivity field, for the JAX
bridge), :mod:`simulations.pendulum_samples` (the pendulum ensemble over sampled parameters, for
global sensitivity) and :mod:`simulations.kinetic_energy` (a block-level kernel: a shared-memory
reduction with barriers in a loop).

Every module was written with ``from numba import cuda`` and ported by changing that one line to
``from dualgpu import cuda``; physical parameters are kernel arguments, so the same kernels carry
derivatives. They run on a GPU, on the CPU (``DUALGPU_BACKEND=cpu``) and in numba's simulator.
"""
from . import gray_scott, heat1d, heat2d, mass_spring, nbody, pendulums, wave2d

__all__ = ["gray_scott", "heat1d", "heat2d", "mass_spring", "nbody", "pendulums", "wave2d"]
