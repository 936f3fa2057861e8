"""Sparse Jacobians: sparsity detection by a structural tracer, and compressed forward mode.

Physics Jacobians are sparse: one explicit stencil step couples a cell to its
neighbours, T steps to a band of width 2T+1. Compressed forward mode needs one
lane per *color* of a column coloring (:mod:`dualgpu.coloring`) instead of one
per input, so a 1-D three-point stencil step costs 3 lanes whatever the grid.

Detection (``sparsity="detect"``) runs the simulation on the cpu backend with a
*structural tracer*: a dual whose lanes are 64-bit dependency sets combined by
OR in every operation (each rule whose derivative is not identically zero
propagates the dependencies of its dual arguments). It sees only the branches
the run takes: a dependency behind a branch not taken at this input is not
detected — pass ``validate=True`` on a small problem, or give the pattern
yourself, when branches depend on the state.
"""
import math

import numpy as np
import scipy.sparse as sp

from ._context import dual_allocation
from ._protect import protect
from .backend import using_backend
from .driver import _progress_bar, _unpack, jacobian
from .coloring import Coloring, color_columns
from .dual import check_dtype
from .dualarray import DualArray
from .errors import DualgpuError
from .numba_types import MAX_LANES
from .sparsity import as_pattern

__all__ = ["detect_sparsity", "sparse_jacobian", "BITS_PER_LANE"]

#: Inputs traced per lane: a lane is one 64-bit dependency set.
BITS_PER_LANE = 64
_DEFAULT_TRACER_LANES = 16


def _input_array(args, argnum, what):
    if not 0 <= argnum < len(args):
        raise DualgpuError(
            f"{what}: argnum {argnum} is out of range for a function called with {len(args)} "
            "arguments."
        )
    arg = args[argnum]
    if isinstance(arg, DualArray) or not hasattr(arg, "shape") or np.ndim(arg) == 0:
        raise DualgpuError(
            f"{what}: argument {argnum} must be a float array (1-D to 3-D); got "
            f"{type(arg).__name__}. Sparse Jacobians are taken with respect to one array input; "
            "use dualgpu.jacobian for scalar parameters."
        )
    array = np.asarray(arg)
    check_dtype(array.dtype, f"{what}: argument {argnum}")
    return array


def _fresh_arguments(args, argnum, seeded):
    """f's arguments for one run: copies of every array in them (f may write into its
    arguments), with ``seeded`` at ``argnum``."""
    call = list(protect(tuple(None if p == argnum else a for p, a in enumerate(args))))
    call[argnum] = seeded
    return call


def _single_output(result, lanes, what):
    """The (values, partials) host arrays of f's one array output."""
    is_tuple, outputs = _unpack(result, lanes, what)
    if len(outputs) != 1 or outputs[0][1] is None or outputs[0][0].ndim == 0:
        raise DualgpuError(
            f"{what}: the function must return one array computed from the seeded input "
            f"through dualgpu kernels; it returned {len(outputs)} output(s). Sparse Jacobians "
            "support a single array output: wrap f to return the one you need."
        )
    return outputs[0]


def detect_sparsity(f, args, argnum=0, *, lanes=None):
    """Return the boolean CSR sparsity pattern of ``f``'s output w.r.t. ``args[argnum]``.

    ``f`` runs on the cpu backend with the structural tracer, ``64 * lanes``
    inputs per run. Rows are the output's C-order elements, columns the input's.

    Examples
    --------
    >>> import dualgpu
    >>> from simulations import heat1d
    >>> u0 = heat1d.default_initial_state(50)
    >>> pattern = dualgpu.sparse.detect_sparsity(
    ...     lambda u: heat1d.simulate(u, n_steps=1), (u0,))
    >>> pattern.shape, int(pattern[10].sum())
    ((50, 50), 3)
    """
    args = tuple(args)
    x = _input_array(args, argnum, "detect_sparsity")
    n = x.size
    per_run = lanes or min(_DEFAULT_TRACER_LANES, max(1, math.ceil(n / BITS_PER_LANE)))
    if not 1 <= per_run <= MAX_LANES:
        raise DualgpuError(f"detect_sparsity: lanes must be 1..{MAX_LANES}; got {per_run}.")
    bits = np.uint64(1) << np.arange(BITS_PER_LANE, dtype=np.uint64)
    seeds = np.zeros((per_run, n), np.uint64)
    rows, cols = [], []
    m = None
    with using_backend("cpu"):
        for start in range(0, n, BITS_PER_LANE * per_run):
            seeds[...] = 0
            stop = min(n, start + BITS_PER_LANE * per_run)
            j = np.arange(start, stop)
            seeds[(j - start) // BITS_PER_LANE, j] = bits[(j - start) % BITS_PER_LANE]
            traced = DualArray(np.array(x, copy=True), seeds.reshape((per_run,) + x.shape).copy())
            call = _fresh_arguments(args, argnum, traced)
            with dual_allocation(per_run, tracer=True):
                _, partials = _single_output(f(*call), per_run, "detect_sparsity")
            if partials.dtype != np.uint64:
                raise DualgpuError("detect_sparsity: the output does not carry tracer lanes.")
            lanes_bits = np.ascontiguousarray(partials.reshape(per_run, -1))
            m = lanes_bits.shape[1]
            # unpack only the nonzero 64-bit words: column = start + 64 * lane + bit
            lane, row = np.nonzero(lanes_bits)
            words = lanes_bits[lane, row]
            bits_set = np.unpackbits(words.view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")
            which, bit = np.nonzero(bits_set)
            rows.append(row[which])
            cols.append(start + BITS_PER_LANE * lane[which] + bit)
    rows = np.concatenate(rows)
    cols = np.concatenate(cols)
    data = np.ones(rows.size, dtype=bool)
    return sp.csr_matrix((data, (rows, cols)), shape=(m, n), dtype=bool)


def sparse_jacobian(f, args, argnum=0, *, sparsity="detect", chunk_size=None, validate=False,
                    progress=None):
    """Return the Jacobian of ``f`` w.r.t. ``args[argnum]`` as a ``scipy.sparse.csr_matrix``.

    Parameters
    ----------
    f : callable
        The simulation function; it must return one array.
    args : tuple
        Arguments of ``f``; ``args[argnum]`` is a float array (1-D to 3-D).
    sparsity : "detect", array-like, scipy.sparse matrix or Coloring
        The pattern (rows: output elements in C order, columns: input
        elements), ``"detect"`` to find it with the structural tracer, or a
        :class:`~dualgpu.coloring.Coloring` from an earlier call (reused as is).
    chunk_size : int, optional
        Lanes per run (colors seeded at once); default: all colors, at most 8.
    validate : bool or "detect"
        ``True`` compares with the dense Jacobian (small problems only);
        ``"detect"`` checks that the given pattern contains the detected one.
        Either raises if the pattern misses an entry.
    progress : bool, optional
        Show a tqdm progress bar over chunks.

    Returns
    -------
    scipy.sparse.csr_matrix
        Shape ``(output.size, input.size)``, with the pattern's structure. The
        coloring used is attached as the attribute ``coloring`` of the result.
    """
    args = tuple(args)
    x = _input_array(args, argnum, "sparse_jacobian")
    n = x.size
    if isinstance(sparsity, Coloring):
        coloring = sparsity
        pattern = coloring.pattern
    else:
        if isinstance(sparsity, str):
            if sparsity != "detect":
                raise DualgpuError(
                    f"sparsity must be 'detect', a pattern or a Coloring; got {sparsity!r}."
                )
            pattern = detect_sparsity(f, args, argnum)
        else:
            pattern = as_pattern(sparsity)
        coloring = color_columns(pattern)
    if pattern.shape[1] != n:
        raise DualgpuError(
            f"sparsity pattern has {pattern.shape[1]} columns but argument {argnum} has {n} "
            f"elements (shape {x.shape}); the pattern must be (outputs, {n})."
        )
    if validate == "detect":
        detected = detect_sparsity(f, args, argnum)
        _check_contains(pattern, detected, "the detected pattern")
    n_colors = coloring.n_colors
    lanes = chunk_size or min(n_colors, 8)
    if not 1 <= lanes <= MAX_LANES or lanes > max(n_colors, 1):
        raise DualgpuError(
            f"chunk_size must be between 1 and the number of colors ({n_colors}); got {lanes}."
        )
    starts = range(0, n_colors, lanes)
    bar = _progress_bar(len(starts), progress, "sparse jacobian")
    compressed = None
    for start in starts:
        seeds = coloring.seed_chunk(start, start + lanes, x.dtype, input_shape=x.shape)
        call = _fresh_arguments(args, argnum, DualArray(np.array(x, copy=True), seeds))
        with dual_allocation(lanes):
            values, partials = _single_output(f(*call), lanes, "sparse_jacobian")
        partials = partials.reshape(lanes, -1)
        if compressed is None:
            m = partials.shape[1]
            if pattern.shape[0] != m:
                raise DualgpuError(
                    f"sparsity pattern has {pattern.shape[0]} rows but the function has {m} "
                    f"outputs (shape {values.shape}); the pattern must be ({m}, {n})."
                )
            compressed = np.zeros((n_colors, m), partials.dtype)
        stop = min(n_colors, start + lanes)
        compressed[start:stop] = partials[: stop - start]
        if bar is not None:
            bar.update()
    if bar is not None:
        bar.close()
    J = coloring.recover(compressed, lanes_first=True)
    if validate is True:
        dense = np.asarray(jacobian(f, *args, argnums=argnum, progress=False)).reshape(-1, n)
        missing = (dense != 0) & ~pattern.toarray()
        if missing.any():
            i, j = np.argwhere(missing)[0]
            raise DualgpuError(
                f"the sparsity pattern misses {int(missing.sum())} entries the function has, "
                f"first at (output {i}, input {j}) where the dense Jacobian is {dense[i, j]!r}. "
                "Use sparsity='detect' or add those entries to the pattern."
            )
    J.coloring = coloring
    return J


def _check_contains(pattern, detected, what):
    extra = detected.astype(bool) > pattern.astype(bool)
    if extra.nnz:
        i, j = extra.nonzero()
        raise DualgpuError(
            f"the sparsity pattern misses {extra.nnz} entries of {what}, first at "
            f"(output {i[0]}, input {j[0]}). Use sparsity='detect' or add those entries."
        )
