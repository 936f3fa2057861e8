"""Sparse Jacobians: sparsity detection, column coloring and compressed forward mode.

The public names of :mod:`dualgpu.autodiff.sparse`, :mod:`dualgpu.autodiff.coloring` and
:mod:`dualgpu.autodiff.sparsity`. ``dualgpu.jacobian(f, x, sparsity=...)`` calls
:func:`sparse_jacobian`.

Examples
--------
>>> import numpy as np
>>> from dualgpu.sparse import banded_pattern, color_columns
>>> color_columns(banded_pattern(6, 1)).n_colors
3
"""
from dualgpu.autodiff.coloring import Coloring, check_coloring, color_columns
from dualgpu.autodiff.sparse import detect_sparsity, sparse_jacobian, to_dense
from dualgpu.autodiff.sparsity import as_pattern, banded_pattern, stencil_pattern_2d

__all__ = [
    "sparse_jacobian", "detect_sparsity", "to_dense",
    "Coloring", "color_columns", "check_coloring", "as_pattern", "banded_pattern",
    "stencil_pattern_2d",
]
