"""Model values and exact gradients at many parameter samples, in as few dual runs as possible.

Two forms of model:

* **point** (``batched=False``): ``f(x)`` takes one parameter vector, shape
  ``(p,)``, and returns a scalar or an array, as :func:`dualgpu.jacobian`
  takes it. Each sample costs one run of ``f`` with ``p`` tangent lanes
  (:func:`dualgpu.jvp_batch`): ``n`` runs for ``n`` samples.
* **batched** (``batched=True``): ``f(X)`` takes all samples at once, shape
  ``(n, p)``, and returns one output per sample along axis 0 (an ensemble:
  a thread per sample). Lane ``k`` seeds parameter ``k`` of *every* sample
  (as :func:`dualgpu.ensemble_jacobian` does), so all ``n x p`` derivatives
  come from **one** run with ``p`` lanes. This is much faster whenever ``f``
  is vectorised (a kernel launch over samples, numpy over the rows): one
  launch instead of ``n`` launches, and the per-launch costs (transfers,
  dispatch, lane packing) are paid once. It assumes that the samples do not
  interact: output row ``s`` may depend only on ``X[s]``. Each run seeds two more
  lanes, the probe and rounding gauge of :mod:`dualgpu.autodiff.reuse` (the check of
  every reused sparsity structure), and raises where samples interact instead of
  returning wrong gradients.

A derivative that is not finite at some samples is not averaged away: the
samples are found (in the batched form by splitting the batch in halves until
the failing samples stand alone, so the good samples keep their exact
derivatives) and reported by index.
"""
from __future__ import annotations

from typing import Any, Callable
import numpy.typing as npt
import numpy as np

from dualgpu import jvp_batch
from dualgpu.autodiff.reuse import check_members, probe_lanes
from dualgpu.errors import DualgpuError

__all__ = ["model_gradients"]

_NON_FINITE = "non-finite derivative"


def _is_non_finite(error):
    return _NON_FINITE in str(error)


def _single(outputs, where):
    if isinstance(outputs, tuple):
        raise DualgpuError(
            f"dgsm: f returned a tuple of {len(outputs)} outputs {where}; expected one array "
            "(or scalar). Fix: wrap f to return the output you study, e.g. "
            "lambda x: f(x)[0], or stack the outputs into one array.")
    return outputs


def _point(f, X, chunk_size, executor):
    n, p = X.shape
    eye = np.eye(p, dtype=X.dtype)
    Y = G = None
    bad = []
    shape = None
    for s in range(n):
        try:
            out, tan = jvp_batch(f, (X[s],), (eye,), chunk_size=chunk_size, progress=False,
                                 executor=executor)
        except DualgpuError as error:
            if not _is_non_finite(error):
                raise
            bad.append(s)
            continue
        out = np.asarray(_single(out, f"at sample {s}"))
        if shape is None:
            shape, first = out.shape, s
            Y = np.full((n,) + shape, np.nan)
            G = np.full((n, p) + shape, np.nan)
        elif out.shape != shape:
            raise DualgpuError(
                f"dgsm: the model's output changed shape between samples: sample {first} gave "
                f"shape {shape}, sample {s} (x = {X[s].tolist()}) gives {out.shape}. Expected "
                "the same output shape at every sample. Fix: make the output's shape independent "
                "of the parameters (e.g. a fixed grid and a fixed number of saved steps).")
        Y[s] = out
        G[s] = np.asarray(tan, dtype=np.float64)
    if Y is None:
        raise DualgpuError(
            f"dgsm: the derivatives are non-finite at all {n} samples; nothing to analyse. "
            "Fix: check the model at one sample with dualgpu.jacobian, whose error says where "
            "the non-finite value comes from.")
    return Y, G, bad


class _Batched:
    def __init__(self, f, X, chunk_size, executor, progress):
        self.f, self.X = f, X
        self.chunk_size, self.executor, self.progress = chunk_size, executor, progress
        self.shape = None
        self.runs = 0
        self.Y = self.G = None

    def run(self, idx):
        """Return ``(Y, G)`` for the samples ``idx``, or raise a non-finite DualgpuError."""
        X = np.ascontiguousarray(self.X[idx])
        m, p = X.shape
        probed = m > 1  # two more lanes: the probe and gauge of dualgpu.autodiff.reuse
        T = np.zeros((p + 2 * probed, m, p), dtype=X.dtype)
        for k in range(p):
            T[k, :, k] = 1
        if probed:
            T[p:] = probe_lanes(m * p, X.dtype, np.tile(np.arange(p), m), (m, p))
        self.runs += 1
        out, tan = jvp_batch(self.f, (X,), (T,), chunk_size=self.chunk_size,
                             progress=self.progress, executor=self.executor)
        out = np.asarray(_single(out, "(batched form)"))
        if out.ndim == 0 or out.shape[0] != m:
            raise DualgpuError(
                f"dgsm: batched=True, but f returned shape {out.shape} for {m} samples of shape "
                f"{X.shape}; expected one output per sample along axis 0, shape ({m}, ...). "
                "Fix: return the per-sample outputs (not a reduction over samples), or use "
                "batched=False for a model of one parameter vector.")
        if self.shape is None:
            self.shape = out.shape[1:]
        elif out.shape[1:] != self.shape:
            raise DualgpuError(
                f"dgsm: the model's per-sample output changed shape between runs: "
                f"{self.shape} before, {out.shape[1:]} for samples {list(idx)[:8]}. Expected the "
                "same output shape at every sample.")
        tan = np.asarray(tan, dtype=np.float64)
        G = np.moveaxis(tan[:p], 0, 1)
        if probed:
            check_members(np.moveaxis(G.reshape(m, p, -1), 1, 2), T[p], tan[p].reshape(m, -1),
                          X.dtype, "dgsm (batched=True)", gauge=tan[p + 1].reshape(m, -1), fix=(
                              "make f compute each output row from its own sample only (no "
                              "coupling, mean or sort over samples), or use batched=False, "
                              "which runs f on one sample at a time."))
        return out, G

    def search(self, idx, bad):
        """Fill ``self.Y[idx]``, ``self.G[idx]``; samples whose derivatives are non-finite go
        to ``bad`` (found by splitting ``idx`` in halves until they stand alone)."""
        try:
            y, g = self.run(idx)
        except DualgpuError as error:
            if not _is_non_finite(error):
                raise
            self.progress = False
            if len(idx) == 1:
                bad.append(int(idx[0]))
                return
            half = len(idx) // 2
            self.search(idx[:half], bad)
            self.search(idx[half:], bad)
            return
        if self.Y is None:
            n, p = self.X.shape
            self.Y = np.full((n,) + self.shape, np.nan)
            self.G = np.full((n, p) + self.shape, np.nan)
        self.Y[idx] = y
        self.G[idx] = g


def _batched(f, X, chunk_size, executor, progress):
    runner = _Batched(f, X, chunk_size, executor, progress)
    bad = []
    runner.search(np.arange(X.shape[0]), bad)
    if runner.Y is None:
        raise DualgpuError(
            f"dgsm: the derivatives are non-finite at all {X.shape[0]} samples; nothing to "
            "analyse. Fix: check the model at one sample with dualgpu.jacobian, whose error "
            "says where the non-finite value comes from.")
    return runner.Y, runner.G, sorted(bad), runner.runs


def model_gradients(f: Callable[..., Any], X: npt.ArrayLike, *, batched: bool = False,
                    chunk_size: int | None = None, executor: Any = None,
                    progress: bool | None = None) -> tuple[np.ndarray, np.ndarray, Any, int]:
    """Return the model's values and gradients at every sample.

    Parameters
    ----------
    f : callable
        ``f(x)`` of one parameter vector (``batched=False``) or ``f(X)`` of all
        samples, returning one output per row (``batched=True``); see the
        module docstring.
    X : ndarray, shape (n, p)
        The samples, in the dtype the model computes in (float32 or float64).
    batched : bool
        Which form ``f`` has.
    chunk_size : int, optional
        Tangent lanes per run (default: all ``p``), as for
        :func:`dualgpu.jvp_batch`.
    executor : dask.distributed.Client or concurrent.futures.Executor, optional
        Runs the lane chunks on its workers (:func:`dualgpu.jvp_batch`).
    progress : bool, optional
        Progress bar of the batched run.

    Returns
    -------
    Y : ndarray, shape (n,) + output shape
        Values (NaN at the samples in ``bad``).
    G : ndarray, shape (n, p) + output shape, float64
        ``G[s, i]`` is ``df/dx_i`` at sample ``s`` (NaN at the samples in ``bad``).
    bad : list of int
        Samples whose derivatives are not finite.
    runs : int
        Runs of ``f`` with dual numbers.

    Raises
    ------
    DualgpuError
        For a model whose output shape changes between samples, a tuple
        output, a batched model without one output per sample, or
        derivatives that are non-finite at every sample.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1.0, 2.0], [3.0, 4.0]])
    >>> Y, G, bad, runs = model_gradients(lambda X: X[:, 0] * X[:, 1], X, batched=True)
    >>> G.tolist(), bad, runs
    ([[2.0, 1.0], [4.0, 3.0]], [], 1)
    """
    X = np.asarray(X)
    # numpy's warnings about inf/nan on the host would repeat for every split of the batch;
    # the samples with non-finite values are reported by index instead
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if batched:
            return _batched(f, X, chunk_size, executor, progress)
        Y, G, bad = _point(f, X, chunk_size, executor)
    return Y, G, bad, X.shape[0]
