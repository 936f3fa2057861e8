"""The one check of every reuse of a sparsity structure at an input it was not seen at.

Four drivers trust a structure that one run cannot confirm:

* :func:`dualgpu.autodiff.sparse.sparse_jacobian` with a coloring of a pattern detected at
  another input (``sparsity="detect"`` traces the branches one input takes; a state-dependent
  branch that goes the other way adds entries the pattern lacks);
* :func:`dualgpu.interop.to_jax` with ``sparsity="detect"``, whose pattern is detected once
  per input signature and reused at every later input (through ``sparse_jacobian``);
* :func:`dualgpu.autodiff.ensemble.ensemble_jacobian` and ``dgsm(..., batched=True)``, which
  seed component ``k`` of every member in one lane: a coloring whose pattern says that
  members do not interact.

Compressed recovery adds an entry the structure lacks into an entry that shares its lane:
wrong numbers *inside* the structure, with no error. So each of them seeds two more lanes
(:func:`probe_lanes`):

* the **probe**, a direction ``v`` with a pseudo-random value per column. The run gives the
  true ``J @ v``; the recovered Jacobian gives ``J_rec @ v``. An entry ``J[i, j]`` outside the
  structure changes row ``i`` by ``J[i, j] * (v[k] - v[j])``, where ``k`` is the column whose
  entry would absorb it (or by ``-J[i, j] * v[j]`` where none would);
* the **rounding gauge**, a direction ``w`` that is constant on each lane's columns
  (``w[j] = beta[lane of j]``). Its run is ``sum_c beta[c] * lane_c`` in exact arithmetic
  *whatever the structure*, so how far it is from that sum measures the run's own rounding
  of such a combination of lanes. Long or chaotic runs round far more than a few eps (1000
  steps of the pendulum ensemble: 100-200 eps), and a fixed tolerance would refuse them.

The guarantee, in numbers
-------------------------
Row ``i`` is compared to ``tolerance * s_i``, ``s_i = sum_j |J_rec[i, j] v[j]| + |(J v)_i|``,
where ``tolerance = max(64 eps, 8 * g)`` (:data:`KAPPA`, :data:`SAFETY`) and ``g`` the largest
relative disagreement of the gauge over all rows: 64 eps is 7.6e-6 in float32 and 1.4e-14 in
float64, and a run that rounds within 8 eps keeps it. That is the rounding the check must
tolerate, not a square root of it: with ``sqrt(eps)`` (3.4e-4 in float32) a missing coupling of
1e-4 of the diagonal passed in every row and was added into entries of that size, which came
out 100% wrong (64 eps refuses it). A missing entry ``delta`` is reported when
``|delta (v_k - v_j)| > tolerance * s_i``. The probe values are fixed pseudo-random numbers in
[1, 2): ``|v_k - v_j| >= 0.01`` for 99% of column pairs, so a miss above
``100 * tolerance * s_i`` (7.6e-4 of the row's scale in float32, 1.4e-12 in float64, at the
64 eps floor) is reported except for 1% of the (column, absorbing column) pairs. No probe can
see a miss below the run's own rounding; the error says how large both were, and
``probe_tolerance=`` sets the tolerance instead, knowingly.
"""
import numpy as np

from dualgpu.errors import DualgpuError

__all__ = ["KAPPA", "SAFETY", "probe_vector", "probe_lanes", "gauge_weights", "rounding_of",
           "tolerance_of", "check_rows", "check_probe", "check_members"]

_SEED = 0x5EED

#: Floor of the reuse check's tolerance, in units of the dtype's machine epsilon.
KAPPA = 64
#: The tolerance is at least this many times the rounding the gauge lane measures.
SAFETY = 8


def probe_vector(n, dtype, shape=None):
    """Return the probe direction: ``n`` distinct values in [1, 2), the same on every call.

    Parameters
    ----------
    n : int
        Number of probed columns.
    dtype : numpy dtype
        The input's dtype (float32 or float64).
    shape : tuple of int, optional
        Shape of the result (default ``(n,)``).

    Returns
    -------
    ndarray

    Examples
    --------
    >>> import numpy as np
    >>> v = probe_vector(4, np.float32)
    >>> v.dtype, bool(np.all((v >= 1) & (v < 2))), bool(np.all(v == probe_vector(4, np.float32)))
    (dtype('float32'), True, True)
    """
    v = np.random.default_rng(_SEED).uniform(1.0, 2.0, n).astype(dtype)
    return v if shape is None else v.reshape(shape)


def probe_lanes(columns, dtype, lanes, shape=None):
    """Return the probe ``v`` and the rounding gauge ``w`` of columns colored ``lanes``.

    Parameters
    ----------
    columns : int
        Number of probed columns.
    dtype : numpy dtype
        The input's dtype.
    lanes : ndarray of int, ``columns`` elements
        The lane that seeds each column (a coloring's colors; the component index of an
        ensemble member's input).
    shape : tuple of int, optional
        Shape of each direction (default ``(columns,)``).

    Returns
    -------
    v, w : ndarray
        ``v``: :func:`probe_vector`; ``w[j] = beta[lanes[j]]`` with ``beta`` =
        :func:`gauge_weights`.

    Examples
    --------
    >>> import numpy as np
    >>> v, w = probe_lanes(4, np.float64, np.array([0, 1, 0, 1]))
    >>> bool(w[0] == w[2] and w[1] == w[3] and w[0] != w[1])
    True
    """
    lanes = np.asarray(lanes).ravel()
    beta = gauge_weights(int(lanes.max()) + 1 if lanes.size else 0, dtype)
    v = probe_vector(columns, dtype, shape)
    w = beta[lanes].astype(dtype)
    return v, (w if shape is None else w.reshape(shape))


def gauge_weights(count, dtype):
    """The weights ``beta`` of the rounding gauge: ``count`` values in [1, 2), fixed.

    Examples
    --------
    >>> import numpy as np
    >>> bool(np.all(gauge_weights(3, np.float32) == gauge_weights(3, np.float32)))
    True
    """
    return np.random.default_rng(_SEED + 1).uniform(1.0, 2.0, count).astype(dtype)


def rounding_of(combined, gauge, scale):
    """Return the largest relative disagreement of the gauge lane with its lane combination.

    Parameters
    ----------
    combined : ndarray
        ``sum_c beta[c] * lane_c`` per output row, from the run's lanes.
    gauge : ndarray
        The gauge lane of the run, per output row.
    scale : ndarray
        ``sum_c |beta[c] * lane_c|`` per output row.

    Returns
    -------
    float
        ``max_i |combined_i - gauge_i| / (scale_i + |gauge_i|)`` over finite rows (0.0 for none).
    """
    combined = np.asarray(combined, dtype=np.float64).ravel()
    gauge = np.asarray(gauge, dtype=np.float64).ravel()
    scale = np.asarray(scale, dtype=np.float64).ravel() + np.abs(gauge)
    ok = np.isfinite(combined) & np.isfinite(gauge) & np.isfinite(scale) & (scale > 0)
    if not ok.any():
        return 0.0
    return float(np.max(np.abs(combined[ok] - gauge[ok]) / scale[ok]))


def tolerance_of(dtype, tolerance=None):
    """Return the relative tolerance of the check: ``tolerance`` or ``KAPPA * eps(dtype)``.

    Examples
    --------
    >>> import numpy as np
    >>> float(tolerance_of(np.float32)), tolerance_of(np.float64, 1e-6)
    (7.62939453125e-06, 1e-06)
    """
    if tolerance is not None:
        tolerance = float(tolerance)
        if not 0 < tolerance < 1:
            raise DualgpuError(
                f"probe_tolerance must be a number in (0, 1) (relative to each row's scale); "
                f"got {tolerance!r}. Leave it at None for {KAPPA} eps of the dtype.")
        return tolerance
    dtype = np.dtype(dtype)
    return KAPPA * float(np.finfo(dtype if dtype.kind == "f" else np.float64).eps)


def check_rows(recovered, true, scale, dtype, *, where, what, fix, tolerance=None,
               rounding=0.0):
    """Raise when the recovered ``J_rec @ v`` and the run's ``J @ v`` disagree in some row.

    Parameters
    ----------
    recovered, true, scale : ndarray
        ``J_rec @ v``, the run's ``J @ v`` (the probe lane) and ``sum |J_rec v|``, one value
        per output row (any shape, compared elementwise).
    dtype : numpy dtype
        The dtype the lanes were computed in.
    where : str
        The caller, for the message.
    what : str
        What was reused, e.g. "the coloring was made from a sparsity pattern detected at
        another input".
    fix : str
        How to avoid the reuse.
    tolerance : float, optional
        Relative tolerance (default: ``max(KAPPA eps, SAFETY * rounding)``).
    rounding : float
        The run's rounding measured by the gauge lane (:func:`rounding_of`).

    Raises
    ------
    DualgpuError
        Where some row differs by more than ``tolerance`` of its scale.
    """
    recovered = np.asarray(recovered, dtype=np.float64).ravel()
    true = np.asarray(true, dtype=np.float64).ravel()
    scale = np.asarray(scale, dtype=np.float64).ravel() + np.abs(true)
    tol = tolerance_of(dtype, tolerance)
    if tolerance is None:
        tol = max(tol, SAFETY * rounding)
    finite = np.isfinite(recovered) & np.isfinite(true) & np.isfinite(scale)
    miss = np.where(finite, np.abs(recovered - true), 0.0)
    bad = miss > tol * scale
    if not bad.any():
        return
    i = int(np.flatnonzero(bad)[0])
    worst = float(np.max(miss[bad] / scale[bad]))
    raise DualgpuError(
        f"{where}: {what}, and at this input the Jacobian has entries outside that structure, "
        f"so recovery would add them into other entries and return wrong numbers with no "
        f"error: {int(bad.sum())} output(s) disagree with a probe J @ v, first output {i} "
        f"({recovered[i]!r} recovered, {true[i]!r} true); the largest disagreement is "
        f"{worst:.3g} of its row's scale (tolerance {tol:.3g}; the run's own rounding, "
        f"measured by a gauge lane: {rounding:.3g}). Fix: {fix} (If you know that rounding "
        f"alone reaches {worst:.3g}, pass a larger probe_tolerance= knowingly: entries outside "
        f"the structure up to that size of the row's scale can then be added into others.)"
    )


_SPARSE_WHAT = "the coloring was made from a sparsity pattern detected at another input"
_SPARSE_FIX = (
    "detect the pattern at this input (sparsity='detect'), or use one that holds at every "
    "input: sparsity='detect-global' (for kernels that choose with min/max rather than an "
    "`if` on the state), the union (`p1 + p2`) of patterns detected at inputs that take each "
    "side of the branch, or a banded_pattern / stencil_pattern_2d.")


def check_probe(J, probe, Jv, where, tolerance=None, lanes=None, gauge=None):
    """Check a sparse Jacobian recovered with a reused coloring against the probe lane.

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
    tolerance : float, optional
        As in :func:`check_rows`.
    lanes : ndarray, shape ``(n_colors, m)``, optional
        The run's color lanes, for the rounding gauge.
    gauge : ndarray, ``m`` elements, optional
        The run's gauge lane (seeded with ``gauge_weights(n_colors)`` on each color).

    Raises
    ------
    DualgpuError
        Where some output differs by more than the tolerance of its scale.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> v = probe_vector(2, np.float64)
    >>> full = np.array([[1.0, 2.0], [0.0, 3.0]])
    >>> check_probe(sp.csr_matrix(full), v, full @ v, "example")  # agrees: no error
    >>> check_probe(sp.csr_matrix(np.diag([1.0, 3.0])), v, full @ v, "example")
    Traceback (most recent call last):
    ...
    dualgpu.errors.DualgpuError: example: the coloring was made from a sparsity pattern ...
    """
    J64 = J.astype(np.float64)
    v = probe.astype(np.float64)
    rounding = 0.0
    if gauge is not None:
        lanes = np.asarray(lanes, dtype=np.float64).reshape(len(lanes), -1)
        beta = gauge_weights(lanes.shape[0], J.dtype).astype(np.float64)
        rounding = rounding_of(beta @ lanes, gauge, beta @ np.abs(lanes))
    check_rows(J64 @ v, Jv, abs(J64) @ np.abs(v), J.dtype, where=where, what=_SPARSE_WHAT,
               fix=_SPARSE_FIX, tolerance=tolerance, rounding=rounding)


def check_members(G, probe, Jv, dtype, where, fix, tolerance=None, gauge=None):
    """Check per-member Jacobians (members seeded at once) against the probe lane.

    Parameters
    ----------
    G : ndarray, shape ``(members, outputs, inputs)``
        Each member's recovered Jacobian w.r.t. its own (batched) inputs.
    probe : ndarray, shape ``(members, inputs)``
        The probe direction: a value per member and input component.
    Jv : ndarray, shape ``(members, outputs)``
        The run's derivative along ``probe`` (seeded on every member's own inputs).
    dtype : numpy dtype
        The dtype of the lanes.
    where, fix : str
        The caller and the fix, for the message.
    tolerance : float, optional
        As in :func:`check_rows`.
    gauge : ndarray, shape ``(members, outputs)``, optional
        The run's gauge lane (input component ``k`` of every member seeded with
        ``gauge_weights(inputs)[k]``, see :func:`probe_lanes`).

    Raises
    ------
    DualgpuError
        Where a member's outputs depend on another member's inputs (beyond the tolerance).

    Examples
    --------
    >>> import numpy as np
    >>> G = np.array([[[2.0]], [[3.0]]])  # members 0 and 1, one output, one input each
    >>> v = probe_vector(2, np.float64, (2, 1))
    >>> check_members(G, v, (G[:, :, 0] * v), np.float64, "example", "-")  # independent
    >>> coupled = G[:, :, 0] * v + v[::-1]  # each output also sees the other member
    >>> check_members(G, v, coupled, np.float64, "example", "-")
    Traceback (most recent call last):
    ...
    dualgpu.errors.DualgpuError: example: the members were seeded at once, ...
    """
    G = np.asarray(G, dtype=np.float64)
    v = np.asarray(probe, dtype=np.float64)[:, None, :]
    rounding = 0.0
    if gauge is not None:
        beta = gauge_weights(G.shape[2], dtype).astype(np.float64)
        rounding = rounding_of(G @ beta, gauge, np.abs(G) @ beta)
    check_rows((G * v).sum(axis=2), Jv, np.abs(G * v).sum(axis=2), dtype, where=where,
               what="the members were seeded at once, assuming that no member's outputs "
                    "depend on another member's inputs", fix=fix, tolerance=tolerance,
               rounding=rounding)
