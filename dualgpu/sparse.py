"""Sparse Jacobians: sparsity detection, column coloring and compressed forward mode.

Detect which entries of a Jacobian can be non-zero (:func:`detect_sparsity`, or build the
pattern with :func:`banded_pattern`, :func:`stencil_pattern_2d`, :func:`as_pattern`), group
the columns that share no row into colors (:func:`color_columns`), and get the whole
Jacobian from one lane per color (:func:`sparse_jacobian`).
``dualgpu.jacobian(f, x, sparsity=...)`` calls :func:`sparse_jacobian`.

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
