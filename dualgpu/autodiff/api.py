"""Forward-mode drivers: ``jvp``, ``jvp_batch``, ``jacfwd`` and ``jacobian`` (JAX conventions).

A *simulation function* ``f`` is ordinary Python that takes arrays and scalars,
moves arrays to the device with :mod:`dualgpu.cuda`, launches dualgpu kernels
and returns host results. These drivers differentiate it without changes: they seed
the differentiated arguments as duals, run f once per batch of directions and assemble
the derivatives; :mod:`dualgpu.autodiff.engine` explains how (chunks, tiles, memory),
:mod:`dualgpu.sparse` takes compressed Jacobians (``sparsity=``) and
:mod:`dualgpu.distributed` runs the chunks on an executor's workers
(``executor=``). Lanes per tile: chosen per backend.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence
from dualgpu.core.hints import (
    ArgNums, ArrayLike, Executor, Function, JacobianResult, Progress, Sparsity,
)

import numpy as np

from dualgpu.autodiff._protect import protect
from dualgpu.autodiff._results import DirectionMajor
from dualgpu.autodiff.distributed import chunk_runner
from dualgpu.autodiff.engine import (
    _GivenSeeds, _Input, _check_chunk_size, _classify, _classify_complex, _is_python_float,
    _output_values,
    UserFunctionWrapper, _structured, check_depth, dense_jacobian, push_forward,
)
from dualgpu.autodiff.sparse import sparse_jacobian
from dualgpu.core._context import active_levels
from dualgpu.errors import DualgpuError
from dualgpu.porting.capture import mode as _capture_mode

__all__ = ["jvp", "jvp_batch", "jacfwd", "jacobian", "JacobianOf"]


# ---------------------------------------------------------------------------
# Jacobians
# ---------------------------------------------------------------------------
def jacobian(f: Function, *args: Any, argnums: ArgNums = 0, chunk_size: int | None = None,
             progress: Progress = None, sparsity: Sparsity = None, validate: bool = False,
             executor: Executor = None, holomorphic: bool = False,
             capture: bool | str = "auto") -> JacobianResult:
    """Return the Jacobian of ``f(*args)`` with respect to ``args[argnums]``.

    Parameters
    ----------
    f : callable
        The simulation function (see :func:`dualgpu.jacobian`). It returns a
        DualArray, a Dual, or a tuple of them (plain outputs count as constant).
    *args
        f's positional arguments.
    argnums : int or tuple of int
        Which arguments to differentiate: float32/float64 arrays of 1 to 3
        dimensions, or float scalars (Python float, numpy float).
    chunk_size : int, optional
        Lanes N per kernel tile, 1 to min(n, MAX_LANES) where n is the total
        number of input entries; default: chosen per backend. One
        run of f carries many tiles (all n directions when memory allows).
    progress : bool, optional
        tqdm progress bar. None (default) shows it only when standard error
        is an interactive terminal or in a notebook, and only above
        PROGRESS_MIN_CHUNKS chunks; True always; False never.
    sparsity : None, "detect", pattern or Coloring, optional
        Dense (None, the default) or sparse forward mode: a boolean pattern
        (array or scipy.sparse, rows = output elements, columns = input
        elements), ``"detect"`` to find it with the structural tracer, or a
        Coloring from an earlier result; see :mod:`dualgpu.sparse`. Sparse mode
        takes one array argnum and one array output, and returns a
        ``scipy.sparse.csr_matrix`` of shape ``(output.size, input.size)``
        (rows and columns in C order); :func:`dualgpu.sparse.to_dense` of it gives
        the dense shape ``output.shape + input.shape``.
    validate : bool or "detect"
        Sparse mode only: check that the pattern misses no entry (see
        :func:`dualgpu.sparse.sparse_jacobian`).
    executor : dask.distributed.Client or concurrent.futures.Executor, optional
        Run the chunks as tasks on its workers (see :mod:`dualgpu.distributed`);
        the result is bit-identical to the local run.
    holomorphic : bool
        As in JAX: the differentiated arguments are complex (complex64/complex128) and f is
        holomorphic in them; the result is the complex derivative ``df/dz`` (complex outputs
        required). Complex duals run on the host, the cpu and the cudasim backends. Default False:
        real arguments only (a complex one is refused with the fix: its real and imaginary
        parts as two real arguments).
    capture : "auto", "trace", True or False
        Captured time loops on the cpu backend (the user guide's *Jacobians* page): "auto"
        (default) defers the launches of f's loop on buffers f allocates and runs them from
        one compiled function, checked bit for bit at first use, once f's launches would
        have cost about as much as compiling it; True raises where a launch of f cannot be
        captured; False never captures. "trace" (opt-in, JAX's contract: f's Python does
        the same for arguments of the same kinds) replays later runs of the same f without
        calling it, once a trace was checked against a run.

    Returns
    -------
    ndarray or tuple
        Shape ``output.shape + input.shape``. JAX nesting: a tuple over
        outputs when f returns a tuple, each a tuple over argnums when argnums
        is a tuple.

    Examples
    --------
    >>> import numpy as np, dualgpu
    >>> from dualgpu import jacobian
    >>> def identity(x):
    ...     return dualgpu.cuda.to_device(x).copy_to_host()
    >>> jacobian(identity, np.ones(3)).tolist()
    [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    """
    with _capture_mode(capture):
        if sparsity is not None:
            _refuse_sparse_holomorphic(holomorphic, "jacobian")
            return _sparse(f, args, {}, argnums, chunk_size, progress, sparsity, validate,
                           executor)
        return dense_jacobian(f, args, {}, argnums, chunk_size, progress, "jacobian",
                              chunk_runner(executor), holomorphic=holomorphic)


def _refuse_sparse_holomorphic(holomorphic, fname):
    if holomorphic:
        raise DualgpuError(f"{fname}: holomorphic=True with sparsity= is not supported. Fix: "
                           "a dense Jacobian (sparsity=None), or real and imaginary parts as "
                           "two real arguments.")


def jacfwd(f: Function, argnums: ArgNums = 0, *, chunk_size: int | None = None,
           progress: Progress = None, sparsity: Sparsity = None, validate: bool = False,
           executor: Executor = None, holomorphic: bool = False,
           capture: bool | str = "auto") -> Callable[..., JacobianResult]:
    """Return a function computing the Jacobian of ``f`` (forward mode, like ``jax.jacfwd``).

    The returned function takes f's arguments (keyword arguments pass through
    to f undifferentiated) and returns what :func:`jacobian` returns.

    Parameters
    ----------
    f : callable
        The simulation: plain arrays and numbers in, arrays or numbers (or tuples of them) out.
    argnums, chunk_size, progress, sparsity, validate, executor, holomorphic, capture
        As for :func:`jacobian`.

    Returns
    -------
    callable
        ``jacobian_of_f(*args, **kwargs)``, which returns what :func:`jacobian` returns for
        those arguments.

    Examples
    --------
    >>> import numpy as np, dualgpu
    >>> from dualgpu import jacfwd
    >>> def identity(x):
    ...     return dualgpu.cuda.to_device(x).copy_to_host()
    >>> jacfwd(identity)(np.zeros((2, 3))).shape
    (2, 3, 2, 3)
    """

    return JacobianOf(f, argnums, chunk_size, progress, sparsity, validate, executor,
                      holomorphic, capture)


class JacobianOf(UserFunctionWrapper):
    """The function :func:`jacfwd` returns: f's Jacobian at the arguments it is called with.

    A module-level class (not a closure), so that it pickles whenever ``f`` does:
    ``hessian(f, x, executor=ProcessPoolExecutor())`` sends it to worker processes.

    Parameters
    ----------
    f : callable
    argnums, chunk_size, progress, sparsity, validate, executor, holomorphic
        As in :func:`jacfwd`.

    Examples
    --------
    >>> import pickle
    >>> import numpy as np
    >>> g = pickle.loads(pickle.dumps(JacobianOf(np.sin, 0)))
    >>> g.__name__
    'jacfwd_sin'
    """

    def __init__(self, f, argnums=0, chunk_size=None, progress=None, sparsity=None,
                 validate=False, executor=None, holomorphic=False, capture="auto"):
        self.f = f
        self.capture = capture
        self.holomorphic = holomorphic
        self.argnums = argnums
        self.chunk_size = chunk_size
        self.progress = progress
        self.sparsity = sparsity
        self.validate = validate
        self.executor = executor
        self.__name__ = f"jacfwd_{getattr(f, '__name__', 'f')}"
        self.__doc__ = f"Jacobian of {getattr(f, '__name__', 'f')} w.r.t. argnums={argnums}."

    def __call__(self, *args, **kwargs):
        holomorphic = getattr(self, "holomorphic", False)  # instances pickled before it
        with _capture_mode(getattr(self, "capture", "auto")):
            return self._jacobian(args, kwargs, holomorphic)

    def _jacobian(self, args, kwargs, holomorphic):
        if self.sparsity is not None:
            _refuse_sparse_holomorphic(holomorphic, "jacfwd")
            return _sparse(self.f, args, kwargs, self.argnums, self.chunk_size, self.progress,
                           self.sparsity, self.validate, self.executor)
        return dense_jacobian(self.f, args, kwargs, self.argnums, self.chunk_size,
                              self.progress, "jacfwd", chunk_runner(self.executor),
                              holomorphic=holomorphic)

    def __getstate__(self):
        state = dict(self.__dict__)
        state["executor"] = None  # an outer driver's executor stays with the caller
        return state

    def __repr__(self):
        return f"<dualgpu jacfwd of {getattr(self.f, '__name__', self.f)!r}>"


def _sparse(f, args, kwargs, argnums, chunk_size, progress, sparsity, validate, executor=None):
    if active_levels():
        raise DualgpuError(
            "sparse Jacobians cannot be taken inside another derivative (this driver runs "
            "inside another driver's f); use the dense driver for the inner derivative, or "
            "the sparse one outermost."
        )

    if not isinstance(argnums, (int, np.integer)) or isinstance(argnums, bool):
        raise DualgpuError(
            f"sparse Jacobians take one array argument; got argnums={argnums!r}. Pass a single "
            "int, and use the dense driver for the others."
        )
    # each run gets its own copies of the keyword arguments (sparse_jacobian copies the rest)
    call = (lambda *a: f(*a, **protect(kwargs))) if kwargs else f
    return sparse_jacobian(call, args, int(argnums), sparsity=sparsity, chunk_size=chunk_size,
                           validate=validate, progress=progress, executor=executor)


# ---------------------------------------------------------------------------
# Jacobian-vector products
# ---------------------------------------------------------------------------
def _tangent_inputs(primals, tangents, batch, fname):
    """Return the differentiated inputs and their tangents, shaped (B, size)."""
    check_depth(fname)
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise DualgpuError(
            f"{fname}: got {len(primals)} primals and {len(tangents)} tangents; expected one "
            "tangent per primal (None for arguments not differentiated)."
        )
    inputs, seeds = [], []
    offset = 0
    size_b = None
    for p, (x, t) in enumerate(zip(primals, tangents)):
        if t is None:
            continue
        kind, value, dtype = _classify(x)
        if kind is None and _complex_primal(x):  # as jax.jvp: a complex primal, complex duals
            kind, value, dtype = _classify_complex(x, p, fname)
        t = np.asarray(t)
        if t.dtype.kind == "c" and (dtype is None or dtype.kind != "c"):
            raise DualgpuError(
                f"{fname}: tangent {p} is complex (dtype {t.dtype}); the imaginary parts would be "
                "dropped. Expected real tangents. Fix: pass the real part, or run the real and "
                "imaginary parts as two directions (jvp_batch)."
            )
        if t.dtype.kind not in "biufc":
            raise DualgpuError(
                f"{fname}: tangent {p} is {type(t).__name__} of dtype {t.dtype}; expected real "
                "numbers shaped like the primal (or None)."
            )
        if kind is None:
            if t.dtype.kind in "biuf" and not np.any(t):
                continue  # zero tangent of an int/bool argument: not differentiated
            raise DualgpuError(
                f"{fname}: argument {p} is {value} and cannot carry a tangent; expected a "
                "float array or float scalar. Fix: pass None as its tangent."
            )
        shape = tuple(np.shape(value)) if kind == "array" else ()
        expected = ((batch,) if batch else ()) + shape
        b = t.shape[0] if batch and t.ndim >= 1 else None
        if batch and (t.ndim != len(shape) + 1 or tuple(t.shape[1:]) != shape):
            raise DualgpuError(
                f"{fname}: tangent {p} has shape {t.shape}; expected (B,) + {shape} (a leading "
                "batch axis over the primal's shape)."
            )
        if not batch and t.shape != shape:
            raise DualgpuError(
                f"{fname}: tangent {p} has shape {t.shape}; expected {expected}, the shape of "
                "its primal."
            )
        if batch:
            if size_b is None:
                size_b = b
            elif b != size_b:
                raise DualgpuError(
                    f"{fname}: tangents have different batch sizes {size_b} and {b}; all must "
                    "share the leading axis B."
                )
        item = _Input(p, kind, value, dtype, offset, weak=_is_python_float(x))
        inputs.append(item)
        seeds.append(np.asarray(t, dtype).reshape((size_b if batch else 1), item.size))
        offset += item.size
    if not inputs:
        raise DualgpuError(
            f"{fname}: every tangent is None (or zero for non-float arguments); expected at "
            "least one float argument with a tangent."
        )
    return inputs, seeds, (size_b if batch else 1)


def _complex_primal(x):
    return not hasattr(x, "partials") and np.iscomplexobj(x)  # not a Dual or DualArray


def jvp_batch(f: Function, primals: Sequence[ArrayLike], tangents: Sequence[ArrayLike], *,
              chunk_size: int | None = None, progress: Progress = None,
              executor: Executor = None, capture: bool | str = "auto") -> tuple[Any, Any]:
    """Return ``(outputs, output_tangents)`` for a batch of B tangent directions.

    Each tangent is None (argument not differentiated) or an array of shape
    ``(B,) + primal.shape`` (``(B,)`` for scalars). Kernels run the B
    directions in tiles of ``chunk_size`` lanes (default
    chosen per backend from B), many tiles per run of f;
    ``progress`` is as in :func:`jacobian`.
    ``executor`` (a Dask client or a ``concurrent.futures.Executor``) runs the
    chunks as tasks on its workers (see :mod:`dualgpu.distributed`).

    Parameters
    ----------
    f : callable
        The simulation.
    primals : tuple
        f's positional arguments.
    tangents : tuple
        One per primal: None, or an array of shape ``(B,) + primal.shape``.
    chunk_size : int, optional
        Lanes per kernel tile.
    progress : bool, optional
        As in :func:`jacobian`.
    executor : dask.distributed.Client or concurrent.futures.Executor, optional
        Runs the chunks as tasks on its workers.
    capture : "auto", "trace", True or False
        Captured time loops on the cpu backend (the user guide's *Jacobians* page): "auto"
        (default) defers the launches of f's loop on buffers f allocates and runs them from
        one compiled function, checked bit for bit at first use, once f's launches would
        have cost about as much as compiling it; True raises where a launch of f cannot be
        captured; False never captures. "trace" (opt-in, JAX's contract: f's Python does
        the same for arguments of the same kinds) replays later runs of the same f without
        calling it, once a trace was checked against a run.

    Returns
    -------
    outputs
        f's output values (plain numpy), same structure as f's result.
    output_tangents
        For each output, its tangents with a leading axis B.

    Raises
    ------
    DualgpuError
        When the tangents do not match the primals, the batch sizes differ, or a
        derivative is not finite.

    Examples
    --------
    >>> import numpy as np, dualgpu
    >>> def double(x):
    ...     return 2.0 * dualgpu.cuda.to_device(x).copy_to_host()
    >>> out, tangents = dualgpu.jvp_batch(double, (np.ones(3),), (np.eye(3)[:2],))
    >>> tangents.tolist()
    [[2.0, 0.0, 0.0], [0.0, 2.0, 0.0]]
    """
    fname = "jvp_batch"
    primals = tuple(primals)
    levels = active_levels()
    inputs, seeds, b = _tangent_inputs(primals, tangents, True, fname)
    tiles = _check_chunk_size(chunk_size, b, fname)

    def where(direction):
        return f"tangent direction {direction}"

    sink = DirectionMajor(b)
    with _capture_mode(capture):
        is_tuple, values = push_forward(
            f, primals, {}, inputs, b, tiles, _GivenSeeds(seeds), where, progress, fname, sink,
            chunk_runner(executor),
            tangents=[(item.position, seed) for item, seed in zip(inputs, seeds)])
    tangents_out = [_structured(sink.result(o), levels) for o in range(len(values))]
    outs = _output_values(values, is_tuple, levels)
    return outs, (tuple(tangents_out) if is_tuple else tangents_out[0])


def jvp(f: Function, primals: Sequence[ArrayLike],
        tangents: Sequence[ArrayLike], *, capture: bool | str = "auto") -> tuple[Any, Any]:
    """Return ``(outputs, output_tangents)``: f's outputs and their directional derivatives.

    Like ``jax.jvp``: ``primals`` is the tuple of f's positional arguments and
    ``tangents`` a tuple of the same length, each None (not differentiated) or
    shaped like its primal. One run of f with one lane. For many directions at
    once use :func:`jvp_batch`.

    Parameters
    ----------
    f : callable
        The simulation.
    primals : tuple
        f's positional arguments.
    tangents : tuple
        One per primal: None (not differentiated), a number for a scalar, or an array
        shaped like its primal. A complex primal (complex64/complex128) takes a complex (or
        real) tangent, as in ``jax.jvp``; it runs on complex duals (the host, the cpu and the
        cudasim backends), holomorphic f or not.
    capture : "auto", "trace", True or False
        Captured time loops on the cpu backend (the user guide's *Jacobians* page): "auto"
        (default) defers the launches of f's loop on buffers f allocates and runs them from
        one compiled function, checked bit for bit at first use, once f's launches would
        have cost about as much as compiling it; True raises where a launch of f cannot be
        captured; False never captures. "trace" (opt-in, JAX's contract: f's Python does
        the same for arguments of the same kinds) replays later runs of the same f without
        calling it, once a trace was checked against a run.

    Returns
    -------
    outputs
        f's output values (plain numpy), the same structure as f's result.
    output_tangents
        The directional derivative of each output, shaped like it.

    Raises
    ------
    DualgpuError
        When ``tangents`` does not match ``primals`` in length, shape or kind, or a
        derivative is not finite (the message names its source).

    Examples
    --------
    >>> import numpy as np, dualgpu
    >>> from dualgpu import jvp
    >>> def identity(x):
    ...     return dualgpu.cuda.to_device(x).copy_to_host()
    >>> out, tangent = jvp(identity, (np.ones(2),), (np.array([1.0, -1.0]),))
    >>> tangent.tolist()
    [1.0, -1.0]
    """
    fname = "jvp"
    primals, tangents = tuple(primals), tuple(tangents)
    levels = active_levels()
    inputs, seeds, _ = _tangent_inputs(primals, tangents, False, fname)

    sink = DirectionMajor(1)
    with _capture_mode(capture):
        is_tuple, values = push_forward(
            f, primals, {}, inputs, 1, (1, 1), _GivenSeeds(seeds), lambda d: "the tangent",
            False, fname, sink,
            tangents=[(item.position, seed) for item, seed in zip(inputs, seeds)])
    tangents_out = [sink.result(o)[0] for o in range(len(values))]
    if levels:
        tangents_out = [_structured(t, levels) for t in tangents_out]
    else:
        tangents_out = [t[()] if t.ndim == 0 else t for t in tangents_out]
    outs = _output_values(values, is_tuple, levels)
    return outs, (tuple(tangents_out) if is_tuple else tangents_out[0])
