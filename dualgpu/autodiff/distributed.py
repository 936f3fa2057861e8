"""Jacobian chunks on many workers: a Dask client or any ``concurrent.futures`` executor.

A dense Jacobian is one independent run of the simulation per chunk of
directions. Given ``executor=``, the driver (``jacobian``, ``jacfwd``,
``jvp_batch`` and sparse mode) submits each chunk as a task and assembles the
partials in direction order: the same chunks, lane count and padding as the
local run, so the result is bit-identical to it.

What travels, and how often
---------------------------
A :class:`ChunkPlan` holds ``f``, its arguments, the seeds and the lane count.
It is shipped once per worker, not once per chunk:

* a ``dask.distributed.Client``: the pickled plan is sent to every worker once
  (``client.run``), which keeps it in a small per-process cache keyed by a token;
  each task carries only the token. (A plan scattered with ``broadcast=True``
  would not do: Dask's active memory manager drops the extra replicas, so the
  plan would travel again and die with the worker that kept it.)
* a ``concurrent.futures.ThreadPoolExecutor``: the threads share the plan;
  nothing is copied (each thread gets its own seed buffers);
* any other executor (``ProcessPoolExecutor``...): the same per-process cache,
  filled on demand: a process that does not hold the plan says so, and that
  chunk alone is submitted again with the pickled plan (so a process receives
  it about once). A Dask worker that joins or restarts mid-run is served the
  same way. Functions travel with ``cloudpickle`` when it is installed (it comes
  with Dask), else with ``pickle`` (module-level functions only).

dualgpu kernels pickle by reference to their module when importable, else by
value (their compiled code stays behind; each worker compiles its own).

Backends and GPUs
-----------------
Each task runs on the submitting process's backend, unless the worker's
environment sets ``DUALGPU_WORKER_BACKEND`` or a :class:`ChunkExecutor` names
one. :func:`local_cluster` starts cpu-backend workers, or with ``gpus=`` one
worker per GPU, pinned to it by ``CUDA_VISIBLE_DEVICES``, on the ``cuda`` backend.

Failures
--------
With Dask, a task whose worker dies is rescheduled on another one (Dask's
``distributed.scheduler.allowed-failures``), and a task that raises is run
again up to ``retries`` times. A chunk that still fails raises a
:class:`~dualgpu.DualgpuError` naming its directions (argument and index range),
chained to the original exception; the other chunks are cancelled and nothing
is assembled from partial results. dualgpu's own errors (bad input, a dual
stored into a plain array) are deterministic and are not retried.
``concurrent.futures`` executors have no retries.

Examples
--------
>>> import numpy as np, dualgpu
>>> from concurrent.futures import ThreadPoolExecutor
>>> def identity(x):
...     return dualgpu.cuda.to_device(x).copy_to_host()
>>> with ThreadPoolExecutor(2) as pool:
...     J = dualgpu.jacobian(identity, np.ones(3), chunk_size=1, executor=pool)
>>> J.tolist()
[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
"""
from __future__ import annotations

from typing import Any

import collections
import contextlib
import functools
import os
import pickle
import sys
import threading
import traceback
import uuid
from concurrent.futures import Executor, ThreadPoolExecutor

from dualgpu.autodiff.engine import UserFunctionWrapper, _progress_bar, _run_chunk
from dualgpu.core.selection import _check, backend, using_backend
from dualgpu.errors import DualgpuError

__all__ = [
    "ChunkExecutor", "ChunkPlan", "ExecutorRunner", "chunk_runner", "local_cluster", "run_chunks",
    "DEFAULT_RETRIES", "WORKER_BACKEND_ENV",
]

#: Times Dask runs a failed chunk again before the failure is reported.
DEFAULT_RETRIES = 2
#: Environment variable that sets the backend of a worker's tasks.
WORKER_BACKEND_ENV = "DUALGPU_WORKER_BACKEND"
#: Plans a worker process keeps (the most recently used).
_CACHE_SIZE = 4

_INSTALL = 'pip install -e ".[distributed]" (or pip install "dask[distributed]")'


# ---------------------------------------------------------------------------
# what a task runs
# ---------------------------------------------------------------------------
class ChunkPlan:
    """Everything a worker needs to run chunks of one Jacobian: f, arguments, seeds, lanes.

    Parameters
    ----------
    f, args, kwargs
        The simulation function and its arguments.
    inputs : list of dualgpu.autodiff.engine._Input
        The differentiated arguments (without seed buffers once pickled).
    fill : callable
        ``fill(inputs, start, count)`` writes the seeds of a chunk.
    lanes : int
        Lanes per run (the same for every chunk).
    tile : int
        Lanes per kernel tile (0: each kernel chooses; see :mod:`dualgpu.core.lanes`).
    fname : str
        The driver function, for messages.

    Examples
    --------
    The driver builds one plan per Jacobian and :func:`run_chunks` sends it to the workers;
    ``executor=`` is how users reach it:

    >>> from concurrent.futures import ThreadPoolExecutor
    >>> import numpy as np, dualgpu
    >>> def square(x):
    ...     return dualgpu.cuda.to_device(x).copy_to_host() ** 2
    >>> with ThreadPoolExecutor(2) as pool:
    ...     print(np.diag(dualgpu.jacobian(square, np.arange(3.0), executor=pool)).tolist())
    [0.0, 2.0, 4.0]
    """

    def __init__(self, f, args, kwargs, inputs, fill, lanes, fname, tile=0):
        self.f = f
        self.args = tuple(args)
        self.kwargs = dict(kwargs)
        self.inputs = [item.fresh() for item in inputs]
        self.fill = fill
        self.lanes = int(lanes)
        self.tile = int(tile)
        self.fname = fname
        self.backend = backend()
        self.token = uuid.uuid4().hex
        self._local = threading.local()

    def __getstate__(self):
        state = dict(self.__dict__)
        del state["_local"]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._local = threading.local()

    def _thread_inputs(self):
        inputs = getattr(self._local, "inputs", None)
        if inputs is None:
            inputs = [item.fresh() for item in self.inputs]
            for item in inputs:
                item.allocate(self.lanes)
            self._local.inputs = inputs
        return inputs

    def run(self, start, count, backend_name=None):
        """Run one chunk; return ``(is_tuple, [(values or None, partials[:count]), ...])``.

        Values come back for the first chunk only (the driver reads no others).
        A :class:`~dualgpu.DualgpuError` is returned as a :class:`_Failure` (it is
        deterministic: not worth a retry); any other exception propagates.
        """
        name = backend_name or os.environ.get(WORKER_BACKEND_ENV) or self.backend
        try:
            with _on_backend(name):
                is_tuple, unpacked = _run_chunk(
                    self.f, self.args, self.kwargs, self._thread_inputs(), self.lanes, start,
                    count, self.fill, self.fname, self.tile)
        except DualgpuError as exc:
            return _Failure(exc)
        trimmed = [(values if start == 0 else None, None if p is None else p[:count])
                   for values, p in unpacked]
        return is_tuple, trimmed


class _Failure:
    """A deterministic error raised by a chunk, sent back with its traceback text."""

    def __init__(self, exc):
        self.exception = exc
        self.traceback = "".join(traceback.format_exception(exc))


@contextlib.contextmanager
def _on_backend(name):
    if backend() == name:  # no switch: threads of one process share the choice
        yield
    else:
        with using_backend(name):
            yield


def _thread_task(plan, start, count, backend_name):
    return plan.run(start, count, backend_name)


class _NeedPlan:
    """A process pool's answer when it does not hold the plan yet."""


_PLANS: collections.OrderedDict[Any, Any] = collections.OrderedDict()
_PLANS_LOCK = threading.Lock()


def _install_plan(token, payload):
    """Keep the plan in this worker process (run on every Dask worker)."""
    with _PLANS_LOCK:
        if token not in _PLANS:
            _PLANS[token] = pickle.loads(payload)
            while len(_PLANS) > _CACHE_SIZE:
                _PLANS.popitem(last=False)
        _PLANS.move_to_end(token)


def _forget_plan(token):
    """Drop the plan from this worker process."""
    with _PLANS_LOCK:
        _PLANS.pop(token, None)


def _cached_task(token, payload, start, count, backend_name):
    """Run a chunk with the plan this process holds under ``token`` (loaded from ``payload``
    when given and missing); without either, say so: the driver sends the plan again."""
    with _PLANS_LOCK:
        plan = _PLANS.get(token)
    if plan is None:
        if payload is None:
            return _NeedPlan()
        _install_plan(token, payload)
        with _PLANS_LOCK:
            plan = _PLANS[token]
    return plan.run(start, count, backend_name)


def _dumps(plan):
    try:
        import cloudpickle
    except ImportError:
        cloudpickle = None
    dumps = cloudpickle.dumps if cloudpickle is not None else pickle.dumps
    try:
        return dumps(plan)
    except Exception as exc:
        raise _unpicklable(plan, dumps, exc) from exc


def _user_function(f):
    """The user's function inside dualgpu's wrappers (jacfwd's, hessian's)."""
    while isinstance(f, UserFunctionWrapper):
        f = f.f
    return f


def _unpicklable(plan, dumps, exc):
    """The error for a plan that did not pickle, naming the part that does not."""
    f = _user_function(plan.f)
    parts = [(None, f)] + [(f"argument {i}", a) for i, a in enumerate(plan.args)] + [
        (f"keyword argument {k!r}", v) for k, v in plan.kwargs.items()]
    for what, value in parts:
        try:
            dumps(value)
        except Exception as error:
            detail = f"{type(error).__name__}: {error}"
            if what is None:
                name = getattr(f, "__qualname__", None) or type(f).__name__
                return DualgpuError(
                    f"{plan.fname}: f ({name}) could not be pickled for the executor's worker "
                    f"processes ({detail}). Define f at module level (plain pickle cannot send "
                    "lambdas or local functions), install cloudpickle (it comes with dask), or "
                    "use a ThreadPoolExecutor."
                )
            return DualgpuError(
                f"{plan.fname}: {what} of f ({type(value).__name__}) could not be pickled for "
                f"the executor's worker processes ({detail}). Pass arguments that pickle "
                "(arrays, numbers, module-level objects), or use a ThreadPoolExecutor."
            )
    return DualgpuError(
        f"{plan.fname}: f and its arguments pickle, but dualgpu's own chunk plan did not "
        f"({type(exc).__name__}: {exc}); this is a dualgpu bug, please report it. Meanwhile "
        "use a ThreadPoolExecutor."
    )


# ---------------------------------------------------------------------------
# executors
# ---------------------------------------------------------------------------
class ChunkExecutor:
    """An executor with options: ``jacobian(..., executor=ChunkExecutor(client, retries=5))``.

    Parameters
    ----------
    executor : dask.distributed.Client or concurrent.futures.Executor
    retries : int
        Dask only: times a chunk that raised is run again (a task on a worker
        that dies is rescheduled by Dask regardless).
    backend : {"cpu", "cuda", "cudasim"}, optional
        Backend of the tasks; default: the worker's ``DUALGPU_WORKER_BACKEND``,
        else the submitting process's backend.

    Raises
    ------
    DualgpuError
        For ``retries`` that is not an int >= 0 or a ``backend`` that is not known.

    Examples
    --------
    >>> from concurrent.futures import ThreadPoolExecutor
    >>> import numpy as np, dualgpu
    >>> from dualgpu.distributed import ChunkExecutor
    >>> def double(x):
    ...     return 2.0 * dualgpu.cuda.to_device(x).copy_to_host()
    >>> with ThreadPoolExecutor(2) as pool:
    ...     J = dualgpu.jacobian(double, np.ones(3), executor=ChunkExecutor(pool, retries=0))
    >>> J.tolist()
    [[2.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 2.0]]
    """

    def __init__(self, executor, *, retries=DEFAULT_RETRIES, backend=None):
        if isinstance(executor, ChunkExecutor):
            executor = executor.executor
        _kind(executor)
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise DualgpuError(f"ChunkExecutor: retries must be an int >= 0; got {retries!r}.")
        if backend is not None:
            _check(backend)
        self.executor = executor
        self.retries = retries
        self.backend = backend

    def __repr__(self):
        return (f"ChunkExecutor({self.executor!r}, retries={self.retries}, "
                f"backend={self.backend!r})")


def _is_dask_client(executor):
    module = sys.modules.get("distributed")
    return module is not None and isinstance(executor, module.Client)


def _kind(executor):
    if _is_dask_client(executor):
        return "dask"
    if isinstance(executor, ThreadPoolExecutor):
        return "threads"
    if isinstance(executor, Executor):
        return "pool"
    raise DualgpuError(
        f"executor={executor!r}: expected a dask.distributed.Client, a concurrent.futures."
        "Executor (ThreadPoolExecutor, ProcessPoolExecutor) or a dualgpu.autodiff.distributed."
        "ChunkExecutor. Fix: pass one of these, or executor=None to run the chunks here."
    )


def _chunk_error(plan, k, start, count, where, exc, remote_traceback=None):
    last = start + count - 1
    span = where(start) if count == 1 else f"{where(start)} to {where(last)}"
    text = f"{type(exc).__name__}: {exc}"
    if remote_traceback:
        text += f"\n--- traceback on the worker ---\n{remote_traceback.rstrip()}"
    return DualgpuError(
        f"{plan.fname}: chunk {k} (directions {start} to {last}: {span}) failed on a worker; "
        f"no result was assembled. {text}"
    )


def run_chunks(executor, plan, chunks, where, progress):
    """Run ``plan`` on every ``(start, count)`` of ``chunks`` with ``executor``.

    Parameters
    ----------
    executor : dask.distributed.Client, concurrent.futures.Executor or ChunkExecutor
        Where the chunks run.
    plan : ChunkPlan
        What each chunk runs.
    chunks : list of (int, int)
        The first direction and the number of directions of each chunk.
    where : str
        Describes the differentiated arguments, for messages.
    progress : bool or None
        As in :func:`dualgpu.jacobian`.

    Returns
    -------
    list
        The chunk results in the order of ``chunks``, once all have succeeded.

    Raises
    ------
    DualgpuError
        Naming the directions of the first chunk that failed (after its retries).

    Examples
    --------
    The driver calls it for ``executor=``:

    >>> from concurrent.futures import ThreadPoolExecutor
    >>> import numpy as np, dualgpu
    >>> def negate(x):
    ...     return 3.0 - dualgpu.cuda.to_device(x).copy_to_host()
    >>> with ThreadPoolExecutor(2) as pool:
    ...     print(np.diag(dualgpu.jacobian(negate, np.ones(2), executor=pool)).tolist())
    [-1.0, -1.0]
    """
    options = executor if isinstance(executor, ChunkExecutor) else ChunkExecutor(executor)
    kind = _kind(options.executor)
    bar = _progress_bar(len(chunks), progress, plan.fname)
    try:
        if kind == "dask":
            return _run_dask(options, plan, chunks, where, bar)
        return _run_futures(options, kind, plan, chunks, where, bar)
    finally:
        if bar is not None:
            bar.close()


class ExecutorRunner:
    """The chunk runner of ``executor=``: the chunks run as tasks on the executor's workers.

    The engine (:func:`dualgpu.autodiff.engine.push_forward`) calls it as it calls its
    :class:`~dualgpu.autodiff.engine.LocalRunner`: it builds one :class:`ChunkPlan`, runs
    every chunk with :func:`run_chunks` and hands the results to the assembly in chunk
    order. ``local`` is False: each run carries one tile.

    Parameters
    ----------
    executor : dask.distributed.Client, concurrent.futures.Executor or ChunkExecutor
        Where the chunks run.

    Examples
    --------
    >>> from concurrent.futures import ThreadPoolExecutor
    >>> with ThreadPoolExecutor(1) as pool:
    ...     print(chunk_runner(pool).local, chunk_runner(None))
    False None
    """

    local = False

    def __init__(self, executor):
        self.executor = executor

    def __call__(self, f, args, kwargs, inputs, chunks, fill, where, progress, fname, assembly):
        plan = ChunkPlan(f, args, kwargs, inputs, fill, chunks[0].lanes, fname, chunks[0].tile)
        spans = [(chunk.start, chunk.count) for chunk in chunks]
        for (start, count), result in zip(spans, run_chunks(self.executor, plan, spans, where,
                                                            progress)):
            assembly.add(start, count, *result)

    def __repr__(self):
        return f"ExecutorRunner({self.executor!r})"


def chunk_runner(executor):
    """The chunk runner for a driver's ``executor=``: None (the engine's local loop) for None,
    else an :class:`ExecutorRunner`."""
    return None if executor is None else ExecutorRunner(executor)


def _checked(plan, k, start, count, where, result):
    if isinstance(result, _Failure):
        raise _chunk_error(plan, k, start, count, where, result.exception,
                           result.traceback) from result.exception
    return result


def _run_futures(options, kind, plan, chunks, where, bar):
    from concurrent.futures import FIRST_COMPLETED, wait

    executor = options.executor
    payload = _dumps(plan) if kind == "pool" else None
    if kind == "threads":
        window = len(chunks)
    else:  # a few chunks in flight per process: a miss costs one resend, not one per chunk
        window = max(1, getattr(executor, "_max_workers", 0) or os.cpu_count() or 1)
    pending = {}
    results = [None] * len(chunks)
    queued = iter(range(len(chunks)))

    def submit(k, with_payload=False):
        start, count = chunks[k]
        if kind == "threads":
            future = executor.submit(_thread_task, plan, start, count, options.backend)
        else:
            future = executor.submit(_cached_task, plan.token,
                                     payload if with_payload else None, start, count,
                                     options.backend)
        pending[future] = k

    def submit_next():
        k = next(queued, None)
        if k is not None:
            submit(k)

    try:
        for _ in range(window):
            submit_next()
        while pending:
            done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            for future in done:
                k = pending.pop(future)
                start, count = chunks[k]
                try:
                    result = future.result()
                except Exception as exc:
                    raise _chunk_error(plan, k, start, count, where, exc) from exc
                if isinstance(result, _NeedPlan):
                    submit(k, with_payload=True)
                    continue
                results[k] = _checked(plan, k, start, count, where, result)
                if bar is not None:
                    bar.update(1)
                submit_next()
    except BaseException:
        for future in pending:
            future.cancel()
        raise
    return results


def _run_dask(options, plan, chunks, where, bar):
    from distributed import as_completed

    client = options.executor
    payload = _dumps(plan)
    # every worker now: once each (a worker that joins or restarts later asks for it)
    client.run(_install_plan, plan.token, payload)

    def submit(k, with_payload=False):
        start, count = chunks[k]
        future = client.submit(
            _cached_task, plan.token, payload if with_payload else None, start, count,
            options.backend, key=f"dualgpu-chunk-{plan.token}-{k}{'-plan' if with_payload else ''}",
            retries=options.retries, pure=False)
        index[future.key] = k
        return future

    index = {}
    futures = [submit(k) for k in range(len(chunks))]
    results = [None] * len(chunks)
    pending = as_completed(futures)
    try:
        for future in pending:
            k = index[future.key]
            start, count = chunks[k]
            if future.status == "cancelled":
                raise _chunk_error(plan, k, start, count, where, RuntimeError(
                    "the task was cancelled (the client lost the scheduler, or the cluster was "
                    "shut down)"))
            if future.status == "error":
                exc = future.exception()
                raise _chunk_error(plan, k, start, count, where, exc) from exc
            result = future.result()
            if isinstance(result, _NeedPlan):  # a worker that started after the plan was sent
                futures.append(submit(k, with_payload=True))
                pending.add(futures[-1])
                continue
            results[k] = _checked(plan, k, start, count, where, result)
            if bar is not None:
                bar.update(1)
    finally:
        client.cancel(futures)
        try:
            client.run(_forget_plan, plan.token)
        except Exception:  # the cluster is going away: nothing left to free
            pass
    return results


# ---------------------------------------------------------------------------
# an embedded cluster
# ---------------------------------------------------------------------------
def _require_distributed(what):
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise DualgpuError(
            f"{what} needs Dask's distributed scheduler, which is not installed. Install the "
            f"optional extra: {_INSTALL}. Without it, pass a concurrent.futures executor "
            "(ThreadPoolExecutor, ProcessPoolExecutor) as executor=."
        ) from None


@functools.lru_cache(maxsize=None)
def _owning_client_class():
    from distributed import Client

    class LocalClusterClient(Client):
        """A Dask client that shuts its own cluster down when it closes."""

        def close(self, *args, **kwargs):
            try:
                return super().close(*args, **kwargs)
            finally:
                cluster = getattr(self, "cluster", None)
                if cluster is not None and getattr(cluster, "status", None) is not None:
                    cluster.close()

    return LocalClusterClient


def _gpu_ids(gpus):
    if gpus is True:
        from numba import cuda

        try:
            count = len(cuda.gpus) if cuda.is_available() else 0
        except Exception:
            count = 0
        if not count:
            raise DualgpuError(
                "local_cluster(gpus=True): numba.cuda finds no GPU here. Pass gpus=None for "
                "cpu-backend workers, or an explicit list of device ids."
            )
        return list(range(count))
    if isinstance(gpus, int) and not isinstance(gpus, bool):
        gpus = list(range(gpus))
    try:
        ids = [int(g) for g in gpus]
    except (TypeError, ValueError):
        ids = None
    if not ids or len(set(ids)) != len(ids) or min(ids) < 0:
        raise DualgpuError(
            f"local_cluster: gpus={gpus!r}; expected True (every GPU numba.cuda sees), a "
            "positive count, or a list of distinct device ids such as [0, 1]."
        )
    return ids


def gpu_worker_specs(gpus):
    """Return the Dask worker specs of one worker per GPU: ``{name: spec}``.

    Each worker is a separate process (a ``Nanny``) with one thread, whose
    environment pins it to its device (``CUDA_VISIBLE_DEVICES``) and makes its
    tasks run on the ``cuda`` backend (``DUALGPU_WORKER_BACKEND``).
    """
    from distributed import Nanny

    return {
        f"gpu-{device}": {
            "cls": Nanny,
            "options": {
                "nthreads": 1,
                "env": {"CUDA_VISIBLE_DEVICES": str(device), WORKER_BACKEND_ENV: "cuda"},
            },
        }
        for device in _gpu_ids(gpus)
    }


def local_cluster(n_workers: int | None = None, *, gpus: Any = None,
                  threads_per_worker: int = 1, processes: bool = True,
                  **cluster_kwargs: Any) -> Any:
    """Return a Dask client of a new cluster on this machine; closing the client stops it.

    Parameters
    ----------
    n_workers : int, optional
        Worker processes; default one per CPU core (``os.cpu_count()``), or one
        per GPU with ``gpus``.
    gpus : True, int or list of int, optional
        One worker per GPU, each pinned to its device by ``CUDA_VISIBLE_DEVICES``
        and running the ``cuda`` backend: ``True`` for every GPU numba.cuda sees,
        a count, or device ids.
    threads_per_worker : int
        Threads per worker (cpu workers). One is right for kernels that already
        use the cores (the cpu backend's parallel launcher, a GPU).
    processes : bool
        Workers in separate processes (default) or threads of this one.
    **cluster_kwargs
        Passed to ``distributed.LocalCluster`` (or ``SpecCluster`` with
        ``gpus``); the dashboard takes a free port unless
        ``dashboard_address`` is given.

    Returns
    -------
    dask.distributed.Client
        Use it as ``executor=`` of the driver, and close it (or use ``with``)
        when done: that shuts the workers down.

    Raises
    ------
    DualgpuError
        When ``n_workers`` disagrees with the GPUs given, or GPU workers are asked for as
        threads (``processes=False``); ImportError names the extra to install when Dask
        is missing.

    Examples
    --------
    >>> import numpy as np, dualgpu
    >>> def identity(x):
    ...     return dualgpu.cuda.to_device(x).copy_to_host()
    >>> with dualgpu.distributed.local_cluster(2, processes=False) as client:  # doctest: +SKIP
    ...     J = dualgpu.jacobian(identity, np.ones(3), executor=client)
    """
    _require_distributed("dualgpu.distributed.local_cluster")
    cluster_kwargs.setdefault("dashboard_address", ":0")
    if gpus is not None:
        from distributed import Scheduler, SpecCluster

        specs = gpu_worker_specs(gpus)
        if n_workers is not None and n_workers != len(specs):
            raise DualgpuError(
                f"local_cluster: n_workers={n_workers} but gpus gives {len(specs)} devices; "
                "with gpus= there is one worker per GPU (leave n_workers out)."
            )
        if not processes:
            raise DualgpuError(
                "local_cluster(gpus=..., processes=False): GPU workers must be processes, "
                "each pinned to its device by CUDA_VISIBLE_DEVICES. Leave processes=True."
            )
        scheduler = {"cls": Scheduler,
                     "options": {"dashboard_address": cluster_kwargs.pop("dashboard_address")}}
        cluster = SpecCluster(workers=specs, scheduler=scheduler, **cluster_kwargs)
    else:
        from distributed import LocalCluster

        n_workers = n_workers or os.cpu_count() or 1
        cluster = LocalCluster(n_workers=n_workers, threads_per_worker=threads_per_worker,
                               processes=processes, **cluster_kwargs)
    expected = len(cluster.workers) if hasattr(cluster, "workers") else n_workers
    client = None
    try:
        client = _owning_client_class()(cluster)
        client.wait_for_workers(expected)  # every worker receives the broadcast plans
        return client
    except BaseException:
        if client is not None:
            client.close()
        cluster.close()
        raise
