"""Bridges from dualgpu simulations to other frameworks.

:func:`to_jax` wraps a simulation function (any function :func:`dualgpu.jacobian` accepts)
into a differentiable JAX function. JAX is imported only
when :func:`to_jax` is called, so ``import dualgpu`` never needs it.
"""
from __future__ import annotations

from typing import Any, Callable
from dualgpu.core.hints import Function

from dualgpu.interop.jax import JaxBridgeCostWarning
from dualgpu.interop.jax import to_jax as _to_jax

__all__ = ["to_jax", "JaxBridgeCostWarning"]


def to_jax(f: Function, **options: Any) -> Callable[..., Any]:
    """Wrap a simulation function as a differentiable JAX function.

    JAX is imported when the returned function is first called, not by ``import dualgpu``
    (nor by this call).

    Parameters
    ----------
    f : callable
        A simulation function of arrays and scalars that runs dualgpu kernels: any function
        :func:`dualgpu.jacobian` accepts. Positional arguments may be pytrees of arrays and
        scalars; keyword arguments are passed through and never differentiated.
    **options
        Keyword-only options of :func:`dualgpu.interop.to_jax`, all optional:
        ``argnums`` (int or tuple of int: the positional arguments JAX may differentiate;
        default all), ``result_shape_dtypes`` (pytree of ``jax.ShapeDtypeStruct``: ``f``'s
        outputs, needed only when ``g`` is first called under ``jax.jit`` or ``jax.vmap``),
        ``compute_dtype`` (numpy dtype the float inputs are cast to before ``f`` runs),
        ``sparsity`` (a pattern, a :class:`dualgpu.sparse.Coloring` or ``"detect"``: a colored
        sparse Jacobian), ``chunk_size`` (lanes per kernel tile), ``max_lanes`` (refuse a
        derivative needing more lanes; default ``DEFAULT_MAX_LANES`` = 16384, None: no
        limit) and ``warn_lanes`` (give a :class:`JaxBridgeCostWarning` above this many
        lanes; default ``DEFAULT_WARN_LANES`` = 1024, None: never).

    Returns
    -------
    callable
        ``g(*args, **kwargs)``, taking and returning JAX arrays (pytrees as ``f``), usable
        with ``jax.jit``, ``jax.vmap``, ``jax.jvp``, ``jax.jacfwd``, ``jax.grad``,
        ``jax.vjp``, ``jax.jacrev`` and ``jax.hessian``.

    Raises
    ------
    DualgpuError
        From :func:`dualgpu.interop.to_jax`: for an ``f`` that is not callable or an
        invalid option (``argnums`` not ints, ``max_lanes`` or ``warn_lanes`` not a positive
        int, a ``sparsity`` that is not a pattern, a Coloring or ``"detect"``,
        ``sparsity="detect"`` without one ``argnums``). Errors of the calls (a tracer
        reaching ``f``, a derivative beyond ``max_lanes``, ...) come from ``g``.
    TypeError
        For an option not listed above.

    Examples
    --------
    >>> import numpy as np, dualgpu
    >>> from dualgpu.interop import to_jax
    >>> def double(x):
    ...     return 2.0 * dualgpu.cuda.to_device(x).copy_to_host()
    >>> g = to_jax(double)
    >>> callable(g)
    True
    >>> import jax, jax.numpy as jnp
    >>> np.asarray(g(jnp.array([1.0, 2.0])))
    array([2., 4.], dtype=float32)
    >>> np.asarray(jax.jacfwd(to_jax(double, argnums=0))(jnp.array([1.0, 2.0])))
    array([[2., 0.],
           [0., 2.]], dtype=float32)
    """
    return _to_jax(f, **options)
