"""Linear uncertainty propagation: output covariance ``J Σ Jᵀ`` from input covariances.

When the inputs ``p`` of a simulation are uncertain with covariance ``Σ`` (from
a fit, from measurement errors), the outputs ``y = f(p)`` have, to first
order, covariance ``J Σ Jᵀ`` with ``J = ∂y/∂p`` at the nominal inputs.
:func:`propagate` computes it from a Jacobian or straight from ``f`` (one
forward-mode Jacobian), and with ``diagonal=True`` only the output variances,
without ever forming the ``m x m`` matrix: what an error band needs for a
large output.

The approximation is good while ``f`` is close to linear over the spread of
the inputs (a few standard deviations); compare with a Monte Carlo run of
``f`` when in doubt.
"""
from __future__ import annotations

from typing import Any
from dualgpu.core.hints import ArgNums, ArrayLike, Function, Progress

import math

import numpy as np
import scipy.sparse as sp

from dualgpu.autodiff.api import jacobian
from dualgpu.errors import DualgpuError

__all__ = ["propagate", "MAX_COVARIANCE_BYTES"]

#: Largest output covariance (``m x m`` float64) :func:`propagate` builds; ask for
#: ``diagonal=True`` beyond it.
MAX_COVARIANCE_BYTES = 2 ** 30


def _covariance(cov, n):
    """Return ``(kind, array)``: ``("variances", (n,))`` or ``("matrix", (n, n))`` in float64."""
    try:
        cov = np.asarray(cov, dtype=np.float64)
    except (TypeError, ValueError):
        raise DualgpuError(
            f"propagate: cov must be an array of real numbers; got {type(cov).__name__}."
        ) from None
    if cov.ndim == 0 and n == 1:
        cov = cov.reshape(1)
    if cov.shape == (n,):
        kind = "variances"
        diagonal = cov
    elif cov.shape == (n, n):
        kind = "matrix"
        diagonal = np.diag(cov)
        scale = float(np.max(np.abs(cov), initial=0.0))
        if not np.allclose(cov, cov.T, rtol=0, atol=1e-10 * scale):
            i, j = np.unravel_index(int(np.argmax(np.abs(cov - cov.T))), cov.shape)
            raise DualgpuError(
                f"propagate: cov is not symmetric: cov[{i}, {j}] = {float(cov[i, j])!r} but "
                f"cov[{j}, {i}] = {float(cov[j, i])!r}. Expected a covariance matrix. Fix: pass "
                "(cov + cov.T) / 2 if the difference is rounding."
            )
    else:
        raise DualgpuError(
            f"propagate: cov has shape {cov.shape}; expected ({n}, {n}) (a covariance matrix "
            f"of the {n} differentiated input entries, flattened in C order and in argnums "
            f"order) or ({n},) (their variances: independent inputs)."
        )
    if not np.all(np.isfinite(cov)):
        raise DualgpuError("propagate: cov holds NaN or infinite entries; expected finite ones.")
    if np.any(diagonal < 0):
        k = int(np.argmin(diagonal))
        raise DualgpuError(
            f"propagate: variance {k} of cov is negative ({float(diagonal[k])!r}); expected "
            "variances >= 0 (standard deviations squared)."
        )
    if kind == "matrix":
        _check_semidefinite(cov)
    return kind, cov


#: Eigenvalues of cov down to -PSD_TOLERANCE * (largest eigenvalue) count as rounding.
PSD_TOLERANCE = 1e-10


def _check_semidefinite(cov):
    """Raise unless the symmetric ``cov`` is positive semi-definite, up to rounding.

    A Cholesky factorisation of ``cov`` shifted by the tolerance costs ``n**3 / 3`` and passes
    for every covariance; only when it fails are the eigenvalues computed, for the message.
    """
    n = cov.shape[0]
    scale = float(np.max(np.abs(np.diag(cov)), initial=0.0))  # >= largest |entry| of a PSD cov
    if n == 0 or scale == 0.0 and not np.any(cov):
        return
    shift = PSD_TOLERANCE * max(scale, float(np.max(np.abs(cov))))
    try:
        np.linalg.cholesky(cov + 2 * shift * np.eye(n))
        return
    except np.linalg.LinAlgError:
        pass
    eigenvalues = np.linalg.eigvalsh(cov)
    smallest, largest = float(eigenvalues[0]), float(eigenvalues[-1])
    if smallest >= -PSD_TOLERANCE * max(abs(largest), abs(smallest)):
        return  # the shifted Cholesky failed at the edge of the tolerance
    raise DualgpuError(
        f"propagate: cov is not positive semi-definite: its smallest eigenvalue is {smallest!r} "
        f"(largest {largest!r}), so some combinations of the outputs would get a negative "
        f"variance. Expected a covariance matrix (eigenvalues >= 0, down to "
        f"-{PSD_TOLERANCE:g} x the largest for rounding). Fix: check how cov was built (a "
        "correlation above 1, a sign error); if the negative eigenvalues are estimation noise, "
        "clip them: w, V = np.linalg.eigh(cov); cov = (V * np.clip(w, 0, None)) @ V.T."
    )


def _as_matrix(J, n, fname):
    """Return ``(J as (m, n) float64 matrix or sparse, output shape)`` for a given Jacobian."""
    if isinstance(J, (tuple, list)):
        raise DualgpuError(
            f"{fname}: got a {type(J).__name__} of Jacobians; expected one array. For several "
            "arguments pass f (and argnums) instead, or concatenate the blocks: "
            "np.concatenate([b.reshape(m, -1) for b in blocks], axis=1)."
        )
    if sp.issparse(J):
        if J.ndim != 2 or J.shape[1] != n:
            raise DualgpuError(
                f"{fname}: the sparse Jacobian has shape {J.shape}; expected (outputs, {n}) to "
                f"match cov's {n} inputs."
            )
        return sp.csr_matrix(J, dtype=np.float64), (J.shape[0],)
    J = np.asarray(J, dtype=np.float64)
    shape = J.shape
    for k in range(J.ndim + 1):  # the fewest trailing axes that hold the n inputs
        if math.prod(shape[J.ndim - k:]) == n:
            out_shape = shape[:J.ndim - k]
            return J.reshape(math.prod(out_shape), n), out_shape
    raise DualgpuError(
        f"{fname}: a Jacobian of shape {shape} does not end in axes holding the {n} inputs "
        f"that cov describes. Expected output.shape + input.shape (as dualgpu.jacobian "
        "returns) or (outputs, inputs)."
    )


def _jacobian_of(f, args, argnums, chunk_size, progress, fname):
    """Return ``(J as (m, n), output shape)`` from one forward-mode Jacobian of f."""
    single = isinstance(argnums, (int, np.integer)) and not isinstance(argnums, bool)
    jac = jacobian(f, *args, argnums=argnums, chunk_size=chunk_size, progress=progress)
    blocks = (jac,) if single else tuple(jac)
    if isinstance(blocks[0], tuple):  # JAX nesting: a tuple over f's outputs
        raise DualgpuError(
            f"{fname}: f returns a tuple of outputs; expected one array (or scalar). Fix: "
            "wrap f to return the output you need, e.g. lambda *a: f(*a)[0]."
        )
    positions = (argnums,) if single else tuple(argnums)
    out_ndim = np.ndim(blocks[0]) - np.ndim(args[positions[0]])
    out_shape = np.shape(blocks[0])[:out_ndim]
    m = math.prod(out_shape)
    matrix = np.concatenate([np.asarray(b, np.float64).reshape(m, -1) for b in blocks], axis=1)
    return matrix, out_shape


def propagate(f_or_jacobian: Function | ArrayLike, cov: ArrayLike, *args: Any,
              argnums: ArgNums = 0, diagonal: bool = False, chunk_size: int | None = None,
              progress: Progress = None) -> Any:
    """Return the output covariance ``J Σ Jᵀ`` (or, with ``diagonal=True``, the variances).

    Linear (first-order) propagation of the input covariance ``Σ`` through
    ``f``: ``J`` is the Jacobian of f's output with respect to the inputs in
    ``argnums``, at ``args``.

    Parameters
    ----------
    f_or_jacobian : callable, ndarray or scipy.sparse matrix
        The simulation function ``f`` (one forward-mode Jacobian is computed
        with :func:`dualgpu.jacobian` at ``args``), or a Jacobian already in
        hand: ``output.shape + input.shape`` as the driver returns it, or
        ``(outputs, inputs)``, dense or sparse.
    cov : array_like
        The inputs' covariance: ``(n, n)``, or ``(n,)`` variances of
        independent inputs, where ``n`` is the number of differentiated input
        entries (each argument flattened in C order, arguments in ``argnums``
        order). A scalar for one scalar input.
    *args
        f's positional arguments (only with a function).
    argnums : int or tuple of int
        The uncertain arguments (only with a function).
    diagonal : bool
        Return only the output variances, ``diag(J Σ Jᵀ)``, computed row by row
        without the ``m x m`` matrix (memory ``m x n``).
    chunk_size, progress
        Passed to :func:`dualgpu.jacobian`.

    Returns
    -------
    ndarray, float64
        ``output.shape + output.shape`` (the covariance of the output entries),
        or ``output.shape`` with ``diagonal=True``. Given a Jacobian, the output
        shape is what precedes its input axes (``(m,)`` for a matrix).

    Raises
    ------
    DualgpuError
        For a covariance of the wrong shape, not symmetric, not positive
        semi-definite (the message gives the smallest eigenvalue) or with negative
        variances; for a function with several outputs; and for a full
        covariance above ``MAX_COVARIANCE_BYTES`` (use ``diagonal=True``).

    Examples
    --------
    >>> import numpy as np
    >>> J = np.array([[1.0, 2.0], [0.0, 3.0]])
    >>> propagate(J, [[0.04, 0.0], [0.0, 0.01]]).tolist()
    [[0.08, 0.06], [0.06, 0.09]]
    >>> propagate(J, [0.04, 0.01], diagonal=True).tolist()      # variances only
    [0.08, 0.09]
    """
    fname = "propagate"
    if callable(f_or_jacobian) and not sp.issparse(f_or_jacobian):
        J, out_shape = _jacobian_of(f_or_jacobian, args, argnums, chunk_size, progress, fname)
        n = J.shape[1]
    else:
        if args:
            raise DualgpuError(
                f"{fname}: got a Jacobian and {len(args)} extra argument(s); arguments are for "
                "a function. Pass propagate(J, cov) or propagate(f, cov, *args, argnums=...)."
            )
        cov_shape = np.shape(cov)
        if len(cov_shape) > 2 or len(cov_shape) == 2 and cov_shape[0] != cov_shape[1]:
            raise DualgpuError(
                f"{fname}: cov has shape {cov_shape}; expected a square (n, n) covariance "
                "matrix or (n,) variances, n being the number of inputs (columns of J)."
            )
        n = cov_shape[-1] if cov_shape else 1
        J, out_shape = _as_matrix(f_or_jacobian, n, fname)
    kind, cov = _covariance(cov, n)
    m = J.shape[0]
    if diagonal:
        if kind == "variances":
            squared = J.multiply(J) if sp.issparse(J) else J * J
            variances = squared @ cov
        else:
            spread = J @ cov  # (m, n): a row of J times Σ
            variances = (np.asarray(J.multiply(spread).sum(axis=1)).ravel() if sp.issparse(J)
                         else np.einsum("ij,ij->i", J, spread))
        return np.asarray(variances, np.float64).reshape(out_shape)
    if 8 * m * m > MAX_COVARIANCE_BYTES:
        raise DualgpuError(
            f"{fname}: the output covariance would be {m} x {m} ({8 * m * m / 2**30:.1f} GiB), "
            f"above MAX_COVARIANCE_BYTES = {MAX_COVARIANCE_BYTES / 2**30:.1f} GiB. Fix: pass "
            "diagonal=True for the variances (error bars), or a slice of the output."
        )
    if kind == "variances":
        spread = J.multiply(cov[None, :]) if sp.issparse(J) else J * cov
    else:
        spread = J @ cov
    spread = spread.toarray() if sp.issparse(spread) else np.asarray(spread)
    full = np.asarray(J @ spread.T) if sp.issparse(J) else spread @ J.T
    full = 0.5 * (full + full.T)  # exactly symmetric
    return full.reshape(tuple(out_shape) + tuple(out_shape))
