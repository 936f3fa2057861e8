"""A probe lane that checks a reused *local* sparsity pattern at a new input.

``sparsity="detect"`` traces the branches one input takes: a state-dependent branch
(``if u[i] > 0: flux from the left else from the right``) that goes the other way at
another input adds Jacobian entries the pattern lacks, and compressed recovery then adds
them into entries that share their color -- wrong numbers *inside* the pattern, with no
error. So a coloring made from a detected pattern remembers that it is local
(:attr:`dualgpu.autodiff.coloring.Coloring.local`), and :func:`dualgpu.sparse.sparse_jacobian`
seeds one more lane when it reuses one: a random direction ``v``. The run gives the
true ``J @ v``; the recovered Jacobian gives ``J_rec @ v``. They agree to rounding iff
the pattern holds at this input (up to entries below the tolerance, ``sqrt(eps)`` of
the row's scale): an entry ``J[i, j]`` outside the pattern changes row ``i`` of
``J_rec @ v`` by ``J[i, j] * (v[k] - v[j])`` (or ``-J[i, j] * v[j]``), nonzero for
almost every ``v``.
"""
import numpy as np

from dualgpu.errors import DualgpuError

__all__ = ["probe_vector", "check_probe"]

_SEED = 0x5EED


def probe_vector(n, dtype):
    """Return the probe direction: ``n`` distinct values in [1, 2), the same on every call.

    Parameters
    ----------
    n : int
        Number of inputs (columns of the Jacobian).
    dtype : numpy dtype
        The input's dtype (float32 or float64).

    Returns
    -------
    ndarray, shape ``(n,)``

    Examples
    --------
    >>> import numpy as np
    >>> v = probe_vector(4, np.float32)
    >>> v.dtype, bool(np.all((v >= 1) & (v < 2))), bool(np.all(v == probe_vector(4, np.float32)))
    (dtype('float32'), True, True)
    """
    return np.random.default_rng(_SEED).uniform(1.0, 2.0, n).astype(dtype)


def check_probe(J, probe, Jv, where):
    """Raise when the recovered ``J`` disagrees with the run's ``Jv`` along ``probe``.

    Parameters
    ----------
    J : scipy.sparse matrix, shape ``(m, n)``
        The Jacobian recovered from the compressed lanes.
    probe : ndarray, shape ``(n,)``
        The probe direction (:func:`probe_vector`).
    Jv : ndarray, ``m`` elements
        The run's own derivative along ``probe``.
    where : str
        The caller's name, for the message.

    Raises
    ------
    DualgpuError
        Where some output differs by more than ``sqrt(eps)`` of its scale.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> v = probe_vector(2, np.float64)
    >>> full = np.array([[1.0, 2.0], [0.0, 3.0]])
    >>> check_probe(sp.csr_matrix(full), v, full @ v, "example")  # agrees: no error
    >>> check_probe(sp.csr_matrix(np.diag([1.0, 3.0])), v, full @ v, "example")
    Traceback (most recent call last):
    ...
    dualgpu.errors.DualgpuError: example: the coloring was made from a sparsity pattern detected at another input, ...
    """
    Jv = np.asarray(Jv, dtype=np.float64).ravel()
    v = probe.astype(np.float64)
    recovered = np.asarray(J.astype(np.float64) @ v).ravel()
    scale = np.asarray(abs(J.astype(np.float64)) @ np.abs(v)).ravel() + np.abs(Jv)
    finite = np.isfinite(recovered) & np.isfinite(Jv) & np.isfinite(scale)
    tolerance = np.sqrt(np.finfo(J.dtype if J.dtype.kind == "f" else np.float64).eps)
    bad = finite & (np.abs(recovered - Jv) > tolerance * scale)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise DualgpuError(
            f"{where}: the coloring was made from a sparsity pattern detected at another input, "
            f"and at this input the Jacobian has entries outside that pattern (a branch that "
            f"depends on the state goes the other way here), so compressed recovery would "
            f"return wrong entries: {int(bad.sum())} output(s) disagree with a probe J @ v, "
            f"first output {i} ({recovered[i]!r} recovered, {Jv[i]!r} true). Fix: detect the "
            f"pattern at this input (sparsity='detect'), or use one that holds at every input: "
            f"sparsity='detect-global' (for kernels that choose with min/max rather than an "
            f"`if` on the state), the union (`p1 + p2`) of patterns detected at inputs that "
            f"take each side of the branch, or a banded_pattern / stencil_pattern_2d."
        )
