"""Global sensitivity from exact derivatives: DGSM, bounds on total Sobol indices, maps.

Over the whole plausible range of the parameters (a SALib problem dictionary),
:func:`dgsm` differentiates the model exactly at ``n`` low-discrepancy samples
(for an ensemble model, all samples in one dual run) and returns the
derivative-based global sensitivity measures of Sobol' & Kucherenko (2009):
``nu_i = E[(df/dx_i)^2]``, Morris-like ``mu`` and ``mu*``, and the upper
bound ``C_i nu_i / Var(f)`` on each total Sobol index, with bootstrap
intervals, per output entry for field outputs (sensitivity maps).

Modules: :mod:`~.problem` (SALib problem dictionaries), :mod:`~.sampling`
(designs), :mod:`~.gradients` (derivatives at the samples), :mod:`~.poincare`
(the constants of the bound), :mod:`~.measures` (:func:`dgsm`,
:func:`analyze`), :mod:`~.bootstrap`, :mod:`~.result`, :mod:`~.plots`
(figures; matplotlib imported on use) and :mod:`~.salib` (SALib's Sobol
indices as a cross-check).

Examples
--------
>>> from dualgpu import sensitivity
>>> problem = {"names": ["a", "b"], "bounds": [[0, 1], [0, 1]]}
>>> r = sensitivity.dgsm(lambda x: 3 * x[0] + x[1], problem, 16, seed=0)
>>> r.ranking()
['a', 'b']
"""
from .gradients import model_gradients
from .measures import analyze, dgsm
from .poincare import poincare_constant
from .problem import DISTRIBUTIONS, Problem, check_problem
from .result import DGSMResult
from .salib import salib_sobol
from .sampling import sample

__all__ = ["dgsm", "analyze", "sample", "model_gradients", "poincare_constant",
           "check_problem", "Problem", "DISTRIBUTIONS", "DGSMResult", "salib_sobol",
           "dgsm_bars", "dgsm_maps"]


def __getattr__(name):
    # matplotlib is imported only when plotting is asked for
    if name in ("dgsm_bars", "dgsm_maps", "plots"):
        import importlib

        plots = importlib.import_module(".plots", __name__)
        return plots if name == "plots" else getattr(plots, name)
    raise AttributeError(f"module 'dualgpu.sensitivity' has no attribute {name!r}")
