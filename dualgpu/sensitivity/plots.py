"""Figures of a DGSM analysis: ranked bars with intervals, and sensitivity maps of fields.

:func:`dgsm_bars` and :func:`dgsm_maps` are drawn by :mod:`dualgpu.plot` (with all its
figures; matplotlib is imported with this module) and named here beside the analysis. They
are also ``dualgpu.sensitivity.dgsm_bars``, ``dualgpu.plot.dgsm_bars`` (and ``dgsm_maps``),
and a result's ``plot()`` and ``plot_maps()`` methods; save them with
:func:`dualgpu.plot.save`.

Examples
--------
>>> import numpy as np
>>> from dualgpu.sensitivity import dgsm, dgsm_bars
>>> problem = {"names": ["a", "b"], "bounds": [[0, 1], [0, 1]]}
>>> r = dgsm(lambda X: 3 * X[:, 0] - X[:, 1], problem, 64, seed=0, batched=True)
>>> fig, ax = dgsm_bars(r)
>>> [t.get_text() for t in ax.get_yticklabels()]
['a  (f rises)', 'b  (f falls)']
"""
from dualgpu.plot.dgsm import dgsm_bars, dgsm_maps

__all__ = ["dgsm_bars", "dgsm_maps"]
