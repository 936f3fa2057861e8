"""Global sensitivity from exact derivatives: DGSM, bounds on total Sobol indices, maps.

Over the whole plausible range of the parameters (a SALib problem dictionary),
:func:`dgsm` differentiates the model exactly at ``n`` low-discrepancy samples
(for an ensemble model, all samples in one dual run) and returns the
derivative-based global sensitivity measures of Sobol' & Kucherenko (2009):
``nu_i = E[(df/dx_i)^2]``, Morris-like ``mu`` and ``mu*``, and the upper
bound ``C_i nu_i / Var(f)`` on each total Sobol index, with bootstrap
intervals, per output entry for field outputs (sensitivity maps).

Parameters are described by a SALib problem dictionary (:func:`check_problem`,
:class:`Problem`), sampled by :func:`sample`, differentiated at the samples by
:func:`model_gradients`; :func:`dgsm` and :func:`analyze` give the measures as a
:class:`DGSMResult`, :func:`poincare_constant` the constants of the bound,
:func:`dualgpu.plot.dgsm_bars` and :func:`dualgpu.plot.dgsm_maps` the figures (matplotlib
imported on use) and :func:`salib_sobol` SALib's Sobol indices as a cross-check (the
``sensitivity`` extra).

Examples
--------
>>> from dualgpu import sensitivity
>>> problem = {"names": ["a", "b"], "bounds": [[0, 1], [0, 1]]}
>>> r = sensitivity.dgsm(lambda x: 3 * x[0] + x[1], problem, 16, seed=0)
>>> r.ranking()
['a', 'b']
"""
from dualgpu.sensitivity import problem as _problem
from dualgpu.sensitivity.gradients import model_gradients
from dualgpu.sensitivity.measures import analyze, dgsm
from dualgpu.sensitivity.poincare import poincare_constant
from dualgpu.sensitivity.problem import Problem, check_problem
from dualgpu.sensitivity.result import DGSMResult
from dualgpu.sensitivity.salib import salib_sobol
from dualgpu.sensitivity.sampling import sample

__all__ = ["dgsm", "analyze", "sample", "model_gradients", "poincare_constant",
           "check_problem", "Problem", "DISTRIBUTIONS", "DGSMResult", "salib_sobol",
           "dgsm_bars", "dgsm_maps"]

DISTRIBUTIONS = _problem.DISTRIBUTIONS
"""The distributions a problem's ``dists`` may name, each with what its ``bounds`` hold.

A dict from SALib's name to a description: ``"unif"`` (``[lo, hi]``), ``"norm"``
(``[mean, sd]``), ``"lognorm"`` (``[mean, sd]`` of ``ln x``) and ``"triang"``
(``[start, end, peak]``, the peak as a fraction of ``end - start``; SALib's older
``[end, peak]`` means ``start = 0``), with SALib's meaning of ``bounds`` for each (see
:func:`dualgpu.sensitivity.check_problem`). These are the laws with a Poincaré constant here
(:func:`poincare_constant`); SALib's ``logunif``, ``truncnorm`` and ``weibull`` are refused
by :func:`check_problem`. The same dict as ``dualgpu.sensitivity.problem.DISTRIBUTIONS``.

Examples
--------
>>> from dualgpu.sensitivity import DISTRIBUTIONS
>>> sorted(DISTRIBUTIONS)
['lognorm', 'norm', 'triang', 'unif']
>>> DISTRIBUTIONS["norm"]
'[mean, standard deviation > 0]'
"""


def __getattr__(name):
    # matplotlib is imported only when plotting is asked for
    if name in ("dgsm_bars", "dgsm_maps", "plots"):
        import dualgpu.sensitivity.plots as plots

        return plots if name == "plots" else getattr(plots, name)
    raise AttributeError(f"module 'dualgpu.sensitivity' has no attribute {name!r}")
