"""Second derivatives by forward over forward: ``hvp`` and ``hessian``.

Both nest the driver (:func:`dualgpu.jacfwd`): the inner derivative runs inside
the outer one's f, so its seeds are duals whose values are the outer duals
(tagged so that the two never mix, see :func:`dualgpu.hessian`), and the kernels
run on duals of duals compiled from the same rule table. ``jacfwd(jacfwd(f))``
works the same way.

Cost, for n differentiated inputs and the default chunk size N (at most 8):
``hvp`` runs f ceil(n / N) times with duals of (1 + 1)(1 + N) floats;
``hessian`` runs it ceil(n / N)^2 times with (1 + N)(1 + N) floats.
"""
from __future__ import annotations

from typing import Any, Sequence
from dualgpu.core.hints import ArgNums, ArrayLike, Executor, Function, Progress

import numpy as np

from dualgpu.autodiff.api import jacfwd, jacobian, jvp
from dualgpu.errors import DualgpuError

__all__ = ["hvp", "hessian"]


def _positions(primals, tangents, fname):
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise DualgpuError(
            f"{fname}: got {len(primals)} primals and {len(tangents)} tangents; expected one "
            "tangent per primal (None for arguments not differentiated)."
        )
    positions = tuple(p for p, t in enumerate(tangents) if t is not None)
    if not positions:
        raise DualgpuError(f"{fname}: every tangent is None; give at least one direction v.")
    return primals, tangents, positions


def hvp(f: Function, primals: Sequence[ArrayLike], tangents: Sequence[ArrayLike], *,
        chunk_size: int | None = None) -> tuple[Any, Any]:
    """Return the Hessian-vector product ``H v`` of a scalar-valued ``f`` at ``primals``.

    Forward over forward: one outer lane along ``v`` over the gradient of f,
    computed chunk by chunk by the inner driver.

    Parameters
    ----------
    f : callable
        A simulation function (see :func:`dualgpu.jacobian`) returning one scalar.
    primals : tuple
        f's positional arguments.
    tangents : tuple
        The direction v: per argument None (not differentiated) or an array
        shaped like it (a float for a scalar).
    chunk_size : int, optional
        Lanes of the inner (gradient) derivative; default
        the backend's default chunk size.

    Returns
    -------
    ndarray or float, or tuple of them
        ``H v`` shaped like the differentiated argument; a tuple over the
        arguments with a tangent when there are several. H is the Hessian with
        respect to all of them jointly.

    Examples
    --------
    >>> import numpy as np, dualgpu
    >>> def energy(x):  # sum of x**3 / 6: H = diag(x)
    ...     u = dualgpu.cuda.to_device(x).copy_to_host()
    ...     return sum(u[i] ** 3 for i in range(len(u))) / 6.0
    >>> dualgpu.hvp(energy, (np.array([1.0, 2.0]),), (np.array([1.0, 1.0]),)).tolist()
    [1.0, 2.0]
    """
    primals, tangents, positions = _positions(primals, tangents, "hvp")

    def gradient(*args):
        grads = jacobian(f, *args, argnums=positions, chunk_size=chunk_size, progress=False)
        for p, g in zip(positions, grads):
            if np.shape(g) != np.shape(args[p]):
                raise DualgpuError(
                    f"hvp needs a scalar-valued f; its derivative with respect to argument {p} "
                    f"has shape {np.shape(g)}, not the argument's {np.shape(args[p])}. Fix: "
                    "reduce the output to a scalar (e.g. an energy or a loss), or use "
                    "jacfwd(jacfwd(f)) for vector outputs."
                )
        return tuple(grads)

    _, products = jvp(gradient, primals, tangents)
    return products if len(positions) > 1 else products[0]


def hessian(f: Function, *args: Any, argnums: ArgNums = 0, chunk_size: int | None = None,
            progress: Progress = None, executor: Executor = None) -> Any:
    """Return the Hessian of ``f(*args)`` with respect to ``args[argnums]`` (forward over forward).

    Meant for small inputs: n inputs cost ``ceil(n / N)**2`` runs of f. Like
    ``jax.hessian``: the result has shape ``output.shape + input.shape +
    input.shape`` (``input.shape * 2`` for a scalar f), nested in tuples when f
    returns a tuple or argnums is a tuple.

    Parameters
    ----------
    f : callable
        A simulation function (see :func:`dualgpu.jacobian`).
    *args
        f's positional arguments.
    argnums : int or tuple of int
        The arguments to differentiate (float arrays or scalars).
    chunk_size : int, optional
        Lanes of each of the two derivatives; default
        the backend's default chunk size.
    progress : bool, optional
        A progress bar over the outer chunks.
    executor : dask.distributed.Client or concurrent.futures.Executor, optional
        Run the outer chunks as tasks on its workers (:mod:`dualgpu.distributed`);
        each task runs the inner derivative in full.

    Returns
    -------
    numpy.ndarray or tuple
        Shape ``output.shape + input.shape + input.shape``; tuples as f's outputs and argnums.

    Examples
    --------
    >>> import numpy as np, dualgpu
    >>> def energy(x):  # x0**2 x1: H = [[2 x1, 2 x0], [2 x0, 0]]
    ...     u = dualgpu.cuda.to_device(x).copy_to_host()
    ...     return u[0] * u[0] * u[1]
    >>> dualgpu.hessian(energy, np.array([1.0, 3.0])).tolist()
    [[6.0, 2.0], [2.0, 0.0]]
    """
    inner = jacfwd(f, argnums, chunk_size=chunk_size, progress=False)
    return jacfwd(inner, argnums, chunk_size=chunk_size, progress=progress,
                  executor=executor)(*args)
