"""Sparse Jacobians: sparsity detection by a structural tracer, and compressed forward mode.

Physics Jacobians are sparse: one explicit stencil step couples a cell to its
neighbours, T steps to a band of width 2T+1. Compressed forward mode needs one
lane per *color* of a column coloring (:mod:`dualgpu.autodiff.coloring`) instead of one
per input, so a 1-D three-point stencil step costs 3 lanes whatever the grid.

Detection (``sparsity="detect"``) runs the simulation on the cpu backend with a
*structural tracer*: a dual whose lanes are 64-bit dependency sets combined by
OR in every operation (each rule whose derivative is not identically zero
propagates the dependencies of its dual arguments). It sees only the branches
the run takes (a *local* pattern): a dependency behind a branch not taken at
this input is not detected. A coloring made from a local pattern remembers
that, and reused at another input it is checked by a probe lane and a rounding gauge
(:mod:`dualgpu.autodiff.reuse`): refused, never silently wrong, where the pattern
no longer holds. ``sparsity="detect-global"`` gives a pattern that holds at
every input (int64 tracer lanes; a branch on a traced value is refused), whose
coloring is reused without a check. See ``docs/user/sparse-reuse.md``.

Shapes
------
A sparse Jacobian is a ``scipy.sparse.csr_matrix`` of shape ``(output.size,
input.size)``: rows are the output's elements and columns the input's, both in
C order (``np.ravel``). The dense driver returns ``output.shape + input.shape``
instead. :func:`to_dense` turns the first into the second in one call.
"""
from __future__ import annotations

from typing import Any, Sequence
from dualgpu.core.hints import Executor, Function, Progress, SparseMatrix, Sparsity

import math
import sys
import time

import numpy as np
import scipy.sparse as sp

from dualgpu.core._context import dual_allocation
from dualgpu.autodiff._progress import progress_bar, wants_progress
from dualgpu.autodiff._protect import protect
from dualgpu.core.selection import backend, using_backend
from dualgpu.autodiff._results import DirectionMajor
from dualgpu.autodiff.distributed import chunk_runner
from dualgpu.autodiff.engine import _Input, _unpack, dense_jacobian, push_forward
from dualgpu.autodiff.coloring import Coloring, color_columns
from dualgpu.core.dual import DECISIONS, check_dtype
from dualgpu.core.dualarray import DualArray
from dualgpu.errors import DualgpuError
from dualgpu.core.lanes import LIVE_ARRAYS, batch_lanes, check_chunk_size, driver_tiles
from dualgpu.compiled.types import MAX_LANES
from dualgpu.core.traced_branch import GLOBAL_BRANCH_MESSAGE
from dualgpu.autodiff.reuse import check_probe, probe_lanes, tolerance_of
from dualgpu.autodiff.sparsity import as_pattern
from dualgpu.porting.kernel import Kernel

__all__ = ["detect_sparsity", "sparse_jacobian", "to_dense", "BITS_PER_LANE"]

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


def detect_sparsity(f: Function, args: Sequence[Any], argnum: int = 0, *,
                    lanes: int | None = None, progress: Progress = None,
                    mode: str = "local") -> Any:
    """Return the boolean CSR sparsity pattern of ``f``'s output w.r.t. ``args[argnum]``.

    ``f`` runs on the cpu backend with the structural tracer, ``64 * lanes``
    inputs per run (``lanes`` defaults to at most 16). Rows are the output's
    C-order elements, columns the input's. The pattern holds every entry the
    run's operations can make nonzero, including some that happen to be 0.0
    at this input. ``progress`` is as in :func:`dualgpu.jacobian`.

    ``mode="local"`` (default) follows the branches this input takes: a
    dependency behind a branch another input takes is missed (a coloring made
    from it is checked when reused, see :func:`sparse_jacobian`).
    ``mode="global"`` gives a pattern that holds at *every* input, as
    SparseConnectivityTracer.jl's global detector does: ``min``, ``max``,
    ``abs``... already count both operands, and a kernel that branches on a
    value that depends on the input (``if u[i] > 0``, ``int(u[i])``) is refused
    with a :class:`~dualgpu.DualgpuError` (write the branch with ``min``/``max``, or use
    the local pattern).

    Parameters
    ----------
    f : callable
        The simulation function; it must return one array.
    args : tuple
        Arguments of ``f``.
    argnum : int, optional
        The argument whose dependencies are traced (default 0).
    lanes : int, optional
        Tracer lanes per run, 1 to 64 (each traces 64 inputs).
    progress : bool, optional
        As in :func:`dualgpu.jacobian`.
    mode : {"local", "global"}, optional
        ``"local"`` (default): the branches this input takes; ``"global"``: a
        pattern that holds at every input.

    Returns
    -------
    scipy.sparse.csr_matrix of bool
        Shape ``(output.size, input.size)``.

    Raises
    ------
    DualgpuError
        For ``lanes`` out of range, or an output not computed from the traced input.

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
    if mode not in ("local", "global"):
        raise DualgpuError(f"detect_sparsity: mode must be 'local' or 'global'; got {mode!r}.")
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
    starts = range(0, n, BITS_PER_LANE * per_run)
    bar = progress_bar(len(starts), progress, "detect sparsity", unit="run", minimum=4)
    with using_backend("cpu"):
        for start in starts:
            seeds[...] = 0
            stop = min(n, start + BITS_PER_LANE * per_run)
            j = np.arange(start, stop)
            seeds[(j - start) // BITS_PER_LANE, j] = bits[(j - start) % BITS_PER_LANE]
            lanes_seeds = seeds.reshape((per_run,) + x.shape).copy()
            if mode == "global":  # the same bits in int64 lanes: the global tracer's type
                lanes_seeds = lanes_seeds.view(np.int64)
            traced = DualArray(np.array(x, copy=True), lanes_seeds)
            call = _fresh_arguments(args, argnum, traced)
            with dual_allocation(per_run, tracer=True if mode == "local" else "global"):
                partials = _traced_output(f, call, per_run, mode)
            if partials.dtype != lanes_seeds.dtype:
                raise DualgpuError("detect_sparsity: the output does not carry tracer lanes.")
            lanes_bits = np.ascontiguousarray(partials.reshape(per_run, -1)).view(np.uint64)
            m = lanes_bits.shape[1]
            # unpack only the nonzero 64-bit words: column = start + 64 * lane + bit
            lane, row = np.nonzero(lanes_bits)
            words = lanes_bits[lane, row]
            bits_set = np.unpackbits(words.view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")
            which, bit = np.nonzero(bits_set)
            rows.append(row[which])
            cols.append(start + BITS_PER_LANE * lane[which] + bit)
            if bar is not None:
                bar.update()
    if bar is not None:
        bar.close()
    rows = np.concatenate(rows)
    cols = np.concatenate(cols)
    data = np.ones(rows.size, dtype=bool)
    return sp.csr_matrix((data, (rows, cols)), shape=(m, n), dtype=bool)


def _traced_output(f, call, per_run, mode):
    """The tracer lanes of f's output; a global tracer's refusal of a branch, named; and, for
    a global pattern, a refusal of Python decisions f's host code took from the traced values
    (``np.argmax``, ``np.digitize``, ``astype(int)``: :data:`dualgpu.core.dual.DECISIONS`)."""
    decisions = DECISIONS[0]
    try:
        found = _single_output(f(*call), per_run, "detect_sparsity")[1]
    except ValueError as error:
        if mode != "global" or GLOBAL_BRANCH_MESSAGE not in str(error):
            raise
        kernel = _raising_kernel(error.__traceback__)
        raise DualgpuError(
            f"detect_sparsity(mode='global'): {kernel} branches on a value that depends on the "
            "input (a comparison such as `if u[i] > 0`, or an integer made from it: int(), "
            "round(), math.floor/ceil/trunc, an integer cast, int of `//`), so no pattern from "
            "one run holds at every input. Fix: write the branch without a "
            "comparison where you can (min/max/abs count both sides: e.g. "
            "`max(c, 0) * (u[i] - u[i-1]) + min(c, 0) * (u[i+1] - u[i])`), or use the local "
            "pattern (sparsity='detect'), which sparse_jacobian checks when it is reused at "
            "another input, or pass a pattern that holds everywhere (banded_pattern...)."
        ) from None
    if mode == "global" and DECISIONS[0] != decisions:
        raise DualgpuError(
            "detect_sparsity(mode='global'): f's host code took a decision from the values of "
            "the traced input (np.argmax/argsort/searchsorted/digitize, a comparison, int(), "
            "round() or astype(int) of a value that depends on it), so the pattern of this "
            "run need not hold at another input, and a global pattern is trusted at every "
            "input without a check. Fix: use the local pattern (sparsity='detect'), which "
            "sparse_jacobian checks with a probe lane when it is reused at another input, or "
            "pass a pattern that holds everywhere."
        )
    return found


def _raising_kernel(traceback):
    """``"kernel 'name'"`` for the innermost dualgpu kernel launch in ``traceback``."""
    found = "a kernel"
    while traceback is not None:
        candidate = traceback.tb_frame.f_locals.get("self")
        if isinstance(candidate, Kernel):
            found = f"kernel {candidate.__name__!r}"
        traceback = traceback.tb_next
    return found


def sparse_jacobian(f: Function, args: Sequence[Any], argnum: int = 0, *,
                    sparsity: Sparsity = "detect", chunk_size: int | None = None,
                    validate: bool = False, progress: Progress = None,
                    executor: Executor = None,
                    probe_tolerance: float | None = None) -> SparseMatrix:
    """Return the Jacobian of ``f`` w.r.t. ``args[argnum]`` as a ``scipy.sparse.csr_matrix``.

    Parameters
    ----------
    f : callable
        The simulation function; it must return one array.
    args : tuple
        Arguments of ``f``; ``args[argnum]`` is a float array (1-D to 3-D).
    argnum : int, optional
        The differentiated argument (default 0).
    sparsity : "detect", "detect-global", array-like, scipy.sparse matrix or Coloring
        The pattern (rows: output elements in C order, columns: input
        elements), ``"detect"`` to find it with the structural tracer at this
        input (local), ``"detect-global"`` for a pattern that holds at every
        input (see :func:`detect_sparsity`), or a
        :class:`~dualgpu.sparse.Coloring` from an earlier call. A coloring
        of a local pattern reused at another input costs two more lanes, a
        probe direction ``v`` and a rounding gauge: where ``J @ v`` from the run
        and from the recovered Jacobian disagree beyond the run's rounding (a
        state-dependent branch went the other way), it raises a
        :class:`~dualgpu.DualgpuError` instead of returning wrong entries. A given pattern
        or a global one is trusted as is.
    chunk_size : int, optional
        Lanes per kernel tile; default: chosen per backend from the
        number of colors (each kernel picks its fastest tile when there are many).
        One run of f seeds all colors (many tiles) when they fit the backend's
        memory budget.
    validate : bool or "detect"
        ``True`` compares with the dense Jacobian (small problems only);
        ``"detect"`` checks that the given pattern contains the detected one.
        Either raises if the pattern misses an entry.
    progress : bool, optional
        As in :func:`dualgpu.jacobian` (None: only on an interactive terminal
        or in a notebook). When shown, a line on stderr also gives the time
        taken by detection and coloring and the number of colors.
    executor : dask.distributed.Client or concurrent.futures.Executor, optional
        Run the chunks of colors as tasks on its workers (:mod:`dualgpu.distributed`).
    probe_tolerance : float, optional
        The relative tolerance of the probe of a reused local coloring (default: 64 eps of
        the dtype, or 8 times the rounding the gauge lane measures where that is more; see the
        user guide's sparse-reuse page for what it guarantees). Larger values
        let entries outside the pattern up to that fraction of a row's scale be added into
        other entries.

    Returns
    -------
    scipy.sparse.csr_matrix
        Shape ``(output.size, input.size)``, with the pattern's structure, and
        these attributes:

        ``coloring``
            the :class:`~dualgpu.sparse.Coloring` used (pass it as
            ``sparsity=`` to skip detection and coloring next time);
        ``output_shape``, ``input_shape``
            the shapes of f's output and of the input, for :func:`to_dense`;
        ``timings``
            seconds spent: ``{"detect": ..., "color": ..., "evaluate": ...}``
            (0.0 for a step that was skipped).

    Raises
    ------
    DualgpuError
        For a ``sparsity`` that is not understood or does not fit the input and output
        sizes, a ``chunk_size`` out of range, a function whose output does not come from
        the seeded input, or (with ``validate``) a pattern that misses an entry.

    Examples
    --------
    >>> import dualgpu
    >>> from simulations import heat1d
    >>> u0 = heat1d.default_initial_state(50)
    >>> J = sparse_jacobian(lambda u: heat1d.simulate(u, n_steps=2), (u0,), progress=False)
    >>> J.shape, J.coloring.n_colors, sorted(J.timings)
    ((50, 50), 5, ['color', 'detect', 'evaluate'])
    """
    args = tuple(args)
    x = _input_array(args, argnum, "sparse_jacobian")
    tolerance_of(x.dtype, probe_tolerance)  # a bad tolerance is refused before any run
    n = x.size
    timings = {"detect": 0.0, "color": 0.0, "evaluate": 0.0}
    detected = False
    if isinstance(sparsity, Coloring):
        coloring = sparsity
        pattern = coloring.pattern
    else:
        if isinstance(sparsity, str):
            if sparsity not in ("detect", "detect-global"):
                raise DualgpuError(
                    f"sparsity must be 'detect', 'detect-global', a pattern or a Coloring; got "
                    f"{sparsity!r}."
                )
            clock = time.perf_counter()
            pattern = detect_sparsity(f, args, argnum, progress=progress,
                                      mode="global" if sparsity == "detect-global" else "local")
            timings["detect"] = time.perf_counter() - clock
            detected = sparsity == "detect"  # a global pattern holds at every input
        else:
            pattern = as_pattern(sparsity)
        clock = time.perf_counter()
        coloring = color_columns(pattern, grid=x.shape if x.ndim > 1 else None)
        coloring.local = detected  # detected at this input: it holds the branches taken here
        timings["color"] = time.perf_counter() - clock
    if pattern.shape[1] != n:
        raise DualgpuError(
            f"sparsity pattern has {pattern.shape[1]} columns but argument {argnum} has {n} "
            f"elements (shape {x.shape}); the pattern must be (outputs, {n})."
        )
    if validate == "detect":
        detected = detect_sparsity(f, args, argnum, progress=progress)
        _check_contains(pattern, detected, "the detected pattern")
    n_colors = coloring.n_colors
    # a local pattern reused at another input: two more lanes, the probe and the rounding
    # gauge of dualgpu.autodiff.reuse
    probe = (np.stack(probe_lanes(n, x.dtype, coloring.colors))
             if coloring.local and not detected else None)
    n_directions = n_colors + (0 if probe is None else 2)
    unit, tile = (chunk_size, chunk_size) if chunk_size else driver_tiles(max(n_directions, 1),
                                                                          backend())
    if not 1 <= unit <= MAX_LANES or unit > max(n_colors, 1) and chunk_size:
        raise DualgpuError(
            f"chunk_size must be between 1 and the number of colors ({n_colors}); got {unit}."
        )
    if chunk_size:
        check_chunk_size(int(chunk_size), backend(), "sparse_jacobian")
    lanes = unit if executor is not None else batch_lanes(max(n_directions, 1), unit,
                                                          LIVE_ARRAYS * x.nbytes)
    n_chunks = -(-n_directions // lanes)
    if wants_progress(progress):
        _report(sys.stderr, sparsity, pattern, n_colors, timings, n_chunks, lanes)
    clock = time.perf_counter()
    item = _Input(argnum, "array", np.array(x, copy=True, order="C"), x.dtype, 0)
    sink = DirectionMajor(n_directions)
    _, values = push_forward(
        f, args, {}, [item], n_directions, (unit, tile), _ColorSeeds(coloring, probe),
        lambda c: f"color {c}", progress, "sparse_jacobian", sink, chunk_runner(executor))
    if len(values) != 1 or sink.layouts[0] is None or values[0].ndim == 0:
        raise DualgpuError(
            f"sparse_jacobian: the function must return one array computed from the seeded "
            f"input through dualgpu kernels; it returned {len(values)} output(s). Sparse "
            "Jacobians support a single array output: wrap f to return the one you need."
        )
    compressed = sink.result(0).reshape(n_directions, -1)
    m = compressed.shape[1]
    if pattern.shape[0] != m:
        raise DualgpuError(
            f"sparsity pattern has {pattern.shape[0]} rows but the function has {m} "
            f"outputs (shape {values[0].shape}); the pattern must be ({m}, {n})."
        )
    output_shape = values[0].shape
    J = coloring.recover(compressed[:n_colors], lanes_first=True)
    if probe is not None:
        check_probe(J, probe[0], compressed[n_colors], "sparse_jacobian", probe_tolerance,
                    compressed[:n_colors], compressed[n_colors + 1])
    timings["evaluate"] = time.perf_counter() - clock
    if validate is True:
        dense = np.asarray(dense_jacobian(f, args, {}, argnum, None, False, "jacobian"))
        dense = dense.reshape(-1, n)
        missing = (dense != 0) & ~pattern.toarray()
        if missing.any():
            i, j = np.argwhere(missing)[0]
            raise DualgpuError(
                f"the sparsity pattern misses {int(missing.sum())} entries the function has, "
                f"first at (output {i}, input {j}) where the dense Jacobian is {dense[i, j]!r}. "
                "Use sparsity='detect' or add those entries to the pattern."
            )
    J.coloring = coloring
    J.output_shape = tuple(output_shape)
    J.input_shape = tuple(x.shape)
    J.timings = timings
    return J


def _report(stream, sparsity, pattern, n_colors, timings, n_chunks, lanes):
    """Write one line saying how the pattern and the coloring were found, and how long it took."""
    m, n = pattern.shape
    if isinstance(sparsity, Coloring):
        how = f"reused coloring: {n_colors} colors"
    else:
        found = (f"pattern detected in {timings['detect']:.3g} s"
                 if isinstance(sparsity, str) else "pattern given")
        how = f"{found}; {n_colors} colors in {timings['color']:.3g} s"
    stream.write(f"sparse jacobian: {m} x {n}, {pattern.nnz} nonzeros; {how}; "
                 f"{n_chunks} run(s) of {lanes} lanes\n")
    stream.flush()


def to_dense(J: Any, output_shape: tuple[int, ...] | None = None,
             input_shape: tuple[int, ...] | None = None) -> np.ndarray:
    """Return a sparse Jacobian as a dense array of shape ``output_shape + input_shape``.

    That is the shape :func:`dualgpu.jacobian` gives without ``sparsity``, so
    dense and sparse results can be used alike.

    Parameters
    ----------
    J : scipy.sparse matrix or ndarray, shape ``(output.size, input.size)``
        A result of :func:`sparse_jacobian` (or ``jacobian(..., sparsity=...)``)
        or any matrix with rows and columns in C order.
    output_shape, input_shape : tuple of int, optional
        Default to ``J.output_shape`` and ``J.input_shape``, which the sparse
        driver attaches to its results.

    Returns
    -------
    ndarray
        Shape ``output_shape + input_shape``.

    Raises
    ------
    DualgpuError
        When J is not 2-D, the shapes are missing (not a result of the sparse driver and
        not given), or they do not match J's size.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> J = sp.csr_matrix(np.arange(24.0).reshape(6, 4))
    >>> to_dense(J, (2, 3), (4,)).shape
    (2, 3, 4)
    """
    shapes = []
    for name, given in (("output_shape", output_shape), ("input_shape", input_shape)):
        shape = getattr(J, name, None) if given is None else given
        if shape is None:
            raise DualgpuError(
                f"to_dense: {name} is needed; J has no {name} attribute (only results of "
                f"dualgpu.autodiff.sparse.sparse_jacobian carry one). Fix: pass {name}=..., e.g. "
                "the shape of f's output or of the input."
            )
        shapes.append(tuple(int(size) for size in np.atleast_1d(shape)))
    output_shape, input_shape = shapes
    if np.ndim(J) != 2 and not sp.issparse(J):
        raise DualgpuError(
            f"to_dense: J must be a 2-D matrix (outputs x inputs); got shape {np.shape(J)}."
        )
    m, n = J.shape
    if math.prod(output_shape) != m or math.prod(input_shape) != n:
        raise DualgpuError(
            f"to_dense: J is {m} x {n} (outputs x inputs), but output_shape {output_shape} "
            f"holds {math.prod(output_shape)} elements and input_shape {input_shape} holds "
            f"{math.prod(input_shape)}. Fix: pass the shapes of f's output and of the input."
        )
    dense = J.toarray() if sp.issparse(J) else np.asarray(J)
    return dense.reshape(output_shape + input_shape)


class _ColorSeeds:
    """Seeds of compressed forward mode: lane c is the indicator of the columns of color c."""

    def __init__(self, coloring, probe=None):
        self.coloring = coloring
        self.probe = probe  # directions n_colors and n_colors + 1, when given (reuse)

    def __call__(self, inputs, start, count):
        item = inputs[0]
        lanes = item.lanes_buffer.shape[0]
        seeds = self.coloring.seed_chunk(start, start + lanes, item.dtype)
        if self.probe is not None:
            for which, direction in enumerate(self.probe):
                k = self.coloring.n_colors + which - start
                if 0 <= k < count:
                    seeds[k] = direction
        item.lanes_buffer[...] = seeds.reshape(item.lanes_buffer.shape)


def _check_contains(pattern, detected, what):
    extra = detected.astype(bool) > pattern.astype(bool)
    if extra.nnz:
        i, j = extra.nonzero()
        raise DualgpuError(
            f"the sparsity pattern misses {extra.nnz} entries of {what}, first at "
            f"(output {i[0]}, input {j[0]}). Use sparsity='detect' or add those entries."
        )
