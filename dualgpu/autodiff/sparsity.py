"""Sparsity patterns of Jacobians: checking them and building common ones.

A pattern is a boolean ``scipy.sparse.csr_matrix`` of shape ``(m, n)`` (``m``
outputs, ``n`` inputs) whose stored entries are the places where the Jacobian
may be nonzero. :func:`as_pattern` turns what users pass into that form;
:func:`banded_pattern` and :func:`stencil_pattern_2d` build the patterns of
1-D banded operators and of the 2-D five-point stencil. The builders fill the
index arrays in compiled loops, so patterns with millions of rows are cheap.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from numba import njit

from dualgpu.errors import DualgpuError

__all__ = ["as_pattern", "banded_pattern", "stencil_pattern_2d"]


def _describe_shape(shape):
    m, n = shape
    return f"{m} output{'s' if m != 1 else ''} and {n} input{'s' if n != 1 else ''}"


def as_pattern(pattern: Any, shape: tuple[int, ...] | None = None) -> Any:
    """Return ``pattern`` as a boolean CSR matrix with sorted, unique indices.

    Parameters
    ----------
    pattern : scipy.sparse matrix or array, or array_like of bool or numbers
        Where the Jacobian may be nonzero, shape ``(m, n)`` (outputs by inputs).
        For a scipy.sparse input every *stored* entry is structural, including
        stored zeros (as in ``scipy.optimize``): a Jacobian that happens to be
        zero at one point may be nonzero at the next. For a dense input the
        nonzero (``True``) entries are structural.
    shape : tuple of int, optional
        The expected ``(m, n)``; an error is raised when the pattern disagrees.

    Returns
    -------
    scipy.sparse.csr_matrix of bool, shape ``(m, n)``
        A new matrix (the input is never modified) whose stored entries are all
        ``True``, with sorted column indices and no duplicates.

    Raises
    ------
    DualgpuError
        If the pattern is not two-dimensional or its shape differs from ``shape``.

    Examples
    --------
    >>> import numpy as np
    >>> p = as_pattern(np.eye(3), shape=(3, 3))
    >>> p.nnz, p.dtype
    (3, dtype('bool'))
    """
    if sp.issparse(pattern):
        if pattern.ndim != 2:
            raise DualgpuError(
                f"pattern must be a 2-D (outputs x inputs) sparse matrix; got a "
                f"{pattern.ndim}-D one of shape {pattern.shape}. Reshape it to (m, n)."
            )
        csr = pattern if pattern.format == "csr" else pattern.tocsr()
        if csr.has_canonical_format:
            indices, indptr = csr.indices.copy(), csr.indptr.copy()
        else:
            csr = csr.copy()
            csr.sum_duplicates()
            indices, indptr = csr.indices, csr.indptr
        csr = sp.csr_matrix(
            (np.ones(indices.size, dtype=bool), indices, indptr), shape=csr.shape
        )
        csr.has_canonical_format = True
    else:
        try:
            dense = np.asarray(pattern)
        except Exception as error:  # pragma: no cover - numpy's message is kept
            raise DualgpuError(
                f"pattern must be a scipy.sparse matrix or a 2-D boolean array; got "
                f"{type(pattern).__name__} ({error}). Pass e.g. "
                f"scipy.sparse.csr_matrix(pattern) or a numpy array of 0/1."
            ) from error
        if dense.ndim != 2:
            raise DualgpuError(
                f"pattern must be a 2-D (outputs x inputs) array; got shape {dense.shape}. "
                f"Reshape it to (m, n), or pass a scipy.sparse matrix."
            )
        if dense.dtype == object or not (
            dense.dtype == bool or np.issubdtype(dense.dtype, np.number)
        ):
            raise DualgpuError(
                f"pattern must hold booleans or numbers; got dtype {dense.dtype}. "
                f"Pass a boolean array (True where the Jacobian may be nonzero)."
            )
        csr = sp.csr_matrix(dense != 0)
        csr.sort_indices()
    if shape is not None:
        expected = tuple(int(s) for s in shape)
        if tuple(csr.shape) != expected:
            raise DualgpuError(
                f"pattern has shape {tuple(csr.shape)} but the function has "
                f"{_describe_shape(expected)}; pass a pattern of shape {expected} "
                f"(rows are outputs, columns are inputs)."
            )
    return csr


def _index_dtype(n, nnz):
    return np.int32 if max(n, nnz) < np.iinfo(np.int32).max else np.int64


def _check_size(name, value, minimum=0):
    if isinstance(value, (bool, np.bool_)) or int(value) != value or value < minimum:
        raise DualgpuError(
            f"{name} must be an integer >= {minimum}; got {value!r}. "
            f"Pass e.g. {name}={max(minimum, 1)}."
        )
    return int(value)


@njit(cache=True)
def _band_counts(n, half_width, periodic, indptr):
    for i in range(n):
        if periodic:
            count = min(2 * half_width + 1, n)
        else:
            count = min(n - 1, i + half_width) - max(0, i - half_width) + 1
        indptr[i + 1] = indptr[i] + count


@njit(cache=True)
def _band_fill(n, half_width, periodic, indptr, indices):
    width = 2 * half_width + 1
    for i in range(n):
        start = indptr[i]
        if periodic and width >= n:
            for k in range(n):
                indices[start + k] = k
        elif periodic:
            # the columns i-T .. i+T taken modulo n, written in increasing order
            pos = start
            lo = i - half_width
            hi = i + half_width
            if lo < 0:
                for j in range(0, hi + 1):
                    indices[pos] = j
                    pos += 1
                for j in range(lo + n, n):
                    indices[pos] = j
                    pos += 1
            elif hi >= n:
                for j in range(0, hi - n + 1):
                    indices[pos] = j
                    pos += 1
                for j in range(lo, n):
                    indices[pos] = j
                    pos += 1
            else:
                for j in range(lo, hi + 1):
                    indices[pos] = j
                    pos += 1
        else:
            pos = start
            for j in range(max(0, i - half_width), min(n - 1, i + half_width) + 1):
                indices[pos] = j
                pos += 1


def banded_pattern(n: int, half_width: int, periodic: bool = False) -> Any:
    """Return the pattern of an ``n`` x ``n`` band: entry (i, j) where ``|i - j| <= half_width``.

    Parameters
    ----------
    n : int
        Number of rows and columns.
    half_width : int
        Number of neighbours on each side (1 for a 3-point stencil); the
        bandwidth is ``2 * half_width + 1``.
    periodic : bool, default False
        Wrap around: column indices are taken modulo ``n``.

    Returns
    -------
    scipy.sparse.csr_matrix of bool, shape ``(n, n)``

    Examples
    --------
    >>> banded_pattern(4, 1).toarray().astype(int)
    array([[1, 1, 0, 0],
           [1, 1, 1, 0],
           [0, 1, 1, 1],
           [0, 0, 1, 1]])
    """
    n = _check_size("n", n)
    half_width = _check_size("half_width", half_width)
    periodic = bool(periodic)
    dtype = _index_dtype(n, n * min(2 * half_width + 1, max(n, 1)))
    indptr = np.zeros(n + 1, dtype=dtype)
    _band_counts(n, half_width, periodic, indptr)
    indices = np.empty(int(indptr[-1]), dtype=dtype)
    _band_fill(n, half_width, periodic, indptr, indices)
    data = np.ones(indices.size, dtype=bool)
    return sp.csr_matrix((data, indices, indptr), shape=(n, n))


@njit(cache=True)
def _stencil_2d(ny, nx, periodic, indptr, indices):
    buffer = np.empty(5, dtype=np.int64)
    pos = 0
    for y in range(ny):
        for x in range(nx):
            count = 0
            for dy, dx in ((-1, 0), (0, -1), (0, 0), (0, 1), (1, 0)):
                yy = y + dy
                xx = x + dx
                if periodic:
                    yy %= ny
                    xx %= nx
                elif yy < 0 or yy >= ny or xx < 0 or xx >= nx:
                    continue
                buffer[count] = yy * nx + xx
                count += 1
            ordered = np.sort(buffer[:count])
            last = -1
            for k in range(count):
                if ordered[k] != last:
                    indices[pos] = ordered[k]
                    pos += 1
                    last = ordered[k]
            indptr[y * nx + x + 1] = pos
    return pos


def stencil_pattern_2d(ny: int, nx: int, periodic: bool = False) -> Any:
    """Return the pattern of the 5-point stencil on an ``ny`` x ``nx`` grid.

    Cell ``(y, x)`` has the flat index ``y * nx + x`` (C order, as
    ``array.ravel()``); its output depends on itself and on its four
    neighbours ``(y +- 1, x)`` and ``(y, x +- 1)``.

    Parameters
    ----------
    ny, nx : int
        Grid size.
    periodic : bool, default False
        Wrap around in both directions.

    Returns
    -------
    scipy.sparse.csr_matrix of bool, shape ``(ny * nx, ny * nx)``

    Examples
    --------
    >>> stencil_pattern_2d(3, 3).getrow(4).indices
    array([1, 3, 4, 5, 7], dtype=int32)
    """
    ny = _check_size("ny", ny)
    nx = _check_size("nx", nx)
    periodic = bool(periodic)
    n = ny * nx
    dtype = _index_dtype(n, 5 * n)
    indptr = np.zeros(n + 1, dtype=dtype)
    indices = np.empty(5 * n, dtype=dtype)
    nnz = _stencil_2d(ny, nx, periodic, indptr, indices)
    indices = indices[:nnz].copy()
    data = np.ones(nnz, dtype=bool)
    return sp.csr_matrix((data, indices, indptr), shape=(n, n))
