"""Bootstrap confidence intervals of the DGSM measures, by resampling the samples.

Each resample draws ``n`` of the ``n`` samples with replacement; a measure's
interval is the percentile interval of its ``B`` resampled values. All
measures are means over samples (and a variance), so a resample is a matrix
product of the counts with the per-sample quantities: no model runs. Field
outputs are processed in column blocks so that memory stays bounded.

The samples come from a scrambled low-discrepancy design, whose estimates are
usually more accurate than independent draws; the bootstrap treats them as
independent, so its intervals are on the safe (wide) side.
"""
import warnings

import numpy as np

__all__ = ["bootstrap_intervals"]

_BLOCK_BYTES = 64 * 2 ** 20  # working memory per block of output columns
_BLAS_MIN = 2 * 10 ** 7  # products smaller than this many multiply-adds skip BLAS


def _resampled_means(counts, values):
    """``counts @ values / n``. Small products avoid BLAS, whose threads cost more than they
    save there (and much more on a loaded machine)."""
    n = counts.shape[1]
    if counts.shape[0] * values.size < _BLAS_MIN:
        return np.einsum("bn,nk->bk", counts, values) / n
    return counts @ values / n


def bootstrap_intervals(G, W, Y, C, resamples, conf_level, seed):
    """Return ``(intervals, aggregate)`` of nu, mu, mu_star and the total-index bound.

    Parameters
    ----------
    G, W : ndarray, shape (n, p, m)
        Derivatives and the derivatives the bound uses (lognormal columns
        weighted, see :func:`dualgpu.sensitivity.poincare_constant`).
    Y : ndarray, shape (n, m)
        Outputs.
    C : ndarray, shape (p,)
        Poincaré constants.
    resamples : int
    conf_level : float
    seed : int or numpy.random.Generator or None

    Returns
    -------
    intervals : dict of str to ndarray, shape (2, p, m)
        Lower and upper ends for ``"nu"``, ``"mu"``, ``"mu_star"`` and
        ``"total_upper"``.
    aggregate : ndarray, shape (2, p)
        Interval of the variance-weighted bound over all outputs,
        ``C_i sum_c nu_ic / sum_c Var_c``.
    """
    n, p, m = G.shape
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n, size=(resamples, n)) + n * np.arange(resamples)[:, None]
    counts = np.bincount(draws.ravel(), minlength=resamples * n).reshape(resamples, n)
    counts = counts.astype(np.float64)
    q = [(1 - conf_level) / 2 * 100, (1 + conf_level) / 2 * 100]
    out = {k: np.empty((2, p, m)) for k in ("nu", "mu", "mu_star", "total_upper")}
    agg_w2 = np.zeros((resamples, p))
    agg_var = np.zeros(resamples)
    per_column = resamples * (4 * p + 2) * 8
    block = max(1, _BLOCK_BYTES // per_column)
    with np.errstate(divide="ignore", invalid="ignore"):
        for a in range(0, m, block):
            b = min(m, a + block)
            g = G[:, :, a:b].reshape(n, -1)
            w = W[:, :, a:b].reshape(n, -1)
            y = Y[:, a:b] - Y[:, a:b].mean(axis=0)  # centred: no cancellation in E[y²] - E[y]²
            k = g.shape[1]
            means = _resampled_means(  # one product for all six per-sample quantities
                counts, np.concatenate([g * g, g, np.abs(g), w * w, y, y * y], axis=1))
            nu, mu, mu_star, w2 = (means[:, j * k:(j + 1) * k] for j in range(4))
            w2 = w2.reshape(resamples, p, b - a)
            mean, mean_sq = means[:, 4 * k:4 * k + (b - a)], means[:, 4 * k + (b - a):]
            var = (mean_sq - mean * mean) * (n / (n - 1))
            var = np.maximum(var, 0.0)
            bound = C[None, :, None] * w2 / var[:, None, :]
            bound[np.broadcast_to(var[:, None, :] <= 0, bound.shape)] = np.nan
            for key, values in (("nu", nu), ("mu", mu), ("mu_star", mu_star)):
                out[key][:, :, a:b] = np.percentile(values, q, axis=0).reshape(2, p, b - a)
            if np.isnan(bound).any():  # cells where the output does not vary: NaN stays NaN
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)
                    out["total_upper"][:, :, a:b] = np.nanpercentile(bound, q, axis=0)
            else:
                out["total_upper"][:, :, a:b] = np.percentile(bound, q, axis=0)
            agg_w2 += w2.sum(axis=2)
            agg_var += var.sum(axis=1)
        aggregate = C[None, :] * agg_w2 / agg_var[:, None]
    aggregate = np.percentile(aggregate, q, axis=0)
    return out, aggregate
