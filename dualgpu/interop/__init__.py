"""Bridges from dualgpu simulations to other frameworks.

:func:`to_jax` wraps a simulation function (any function :func:`dualgpu.jacobian` accepts)
into a differentiable JAX function; see :mod:`dualgpu.interop.jax`. JAX is imported only
when :func:`to_jax` is called, so ``import dualgpu`` never needs it.
"""

__all__ = ["to_jax", "JaxBridgeCostWarning"]


def to_jax(f, **options):
    """Wrap a simulation function as a differentiable JAX function (see :func:`dualgpu.interop.jax.to_jax`).

    Examples
    --------
    >>> import numpy as np, dualgpu
    >>> from dualgpu.interop import to_jax
    >>> def double(x):
    ...     return 2.0 * dualgpu.cuda.to_device(x).copy_to_host()
    >>> g = to_jax(double)
    >>> callable(g)
    True
    """
    from .jax import to_jax as _to_jax

    return _to_jax(f, **options)


def __getattr__(name):
    if name == "JaxBridgeCostWarning":
        from .jax import JaxBridgeCostWarning

        return JaxBridgeCostWarning
    raise AttributeError(f"module 'dualgpu.interop' has no attribute {name!r}")
