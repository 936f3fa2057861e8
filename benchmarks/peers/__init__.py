"""Peer implementations for dualgpu's benchmarks: JAX, PyTorch, Taichi, hand-written numba,
NumPy FD.

Modules
-------
problems
    Problem definitions: deterministic float64 data (``*_setup``) and NumPy
    reference simulations (``*_forward``) for heat 1-D, N-body and a pendulum
    ensemble, with the benchmark sizes.
numpy_fd, jax_cases, torch_cases, taichi_cases, numba_cases
    One module per peer, with the same interface: ``AVAILABLE``, ``VERSION``,
    ``NAME``, ``CASES`` (case name -> ``prepare_<case>``, the cases the peer
    implements), ``prepare(case, **kwargs)``, and one-call functions such as
    ``heat_jacobian``, ``heat_jvp``, ``nbody_mass_jacobian``,
    ``pendulum_param_jacobian`` returning NumPy arrays. A prepare function
    returns a zero-argument callable; its first call includes any compile.
    ``numba_cases`` (hand-written tangent equations, the "no AD overhead" bar)
    implements the heat and pendulum cases.

The JAX, PyTorch and Taichi modules are optional (the ``bench`` extra): a
missing peer sets ``AVAILABLE = False`` and ``IMPORT_ERROR`` instead of failing.
Importing ``jax_cases`` turns on JAX's float64 mode for the process, so
:func:`load_peers` imports the peers only when called.
"""
import importlib

from . import numpy_fd, problems

__all__ = ["PEER_MODULES", "load_peers", "peer_versions", "numpy_fd", "problems"]

#: Peer module names, in report order.
PEER_MODULES = ("jax_cases", "torch_cases", "taichi_cases", "numba_cases", "numpy_fd")


def load_peers():
    """Return ``{peer name: module}`` for every peer module, installed or not
    (see ``AVAILABLE``)."""
    modules = [importlib.import_module(f"{__name__}.{name}") for name in PEER_MODULES]
    return {module.NAME: module for module in modules}


def peer_versions():
    """Return ``{peer name: version string}``, or ``"not installed (reason)"`` for a missing
    peer."""
    return {
        name: module.VERSION if module.AVAILABLE else f"not installed ({module.IMPORT_ERROR})"
        for name, module in load_peers().items()
    }
