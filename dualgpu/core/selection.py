"""Which backend runs kernels: ``cuda`` (a real GPU), ``cpu`` (compiled CPU) or ``cudasim``.

Selection order, first match wins:

1. :func:`using_backend` -- **context-local** (a :mod:`contextvars` variable):
   it affects only the thread or asyncio task that entered the block, so
   another thread's ``with using_backend("cudasim")`` never changes this
   thread's backend;
2. inside a thread of the CUDA simulator (a kernel running on ``cudasim``),
   ``cudasim``;
3. :func:`set_backend` -- process-wide, seen by every thread;
4. the ``DUALGPU_BACKEND`` environment variable;
5. ``cuda`` where ``numba.cuda.is_available()``, the simulator where numba's
   simulator is enabled (``NUMBA_ENABLE_CUDASIM=1``), else ``cpu`` (worked out
   once per process).

Threads you start yourself begin with a fresh context: they see
:func:`set_backend`'s choice (or the default), not an enclosing
``using_backend`` block of the thread that started them. Enter
``using_backend`` inside the thread, or run it with
``contextvars.copy_context().run(...)``, to carry the choice over.
"""
from __future__ import annotations

from typing import Iterator

import contextlib
import contextvars
import functools
import os
import sys
import threading

from dualgpu.errors import DualgpuError

__all__ = ["BACKENDS", "backend", "set_backend", "using_backend", "register_simulated_thread"]

BACKENDS = ("cuda", "cpu", "cudasim")
#: set_backend's process-wide choice (None: environment variable or default)
_CHOSEN = None
#: using_backend's context-local choice (None: fall back to _CHOSEN)
_LOCAL: contextvars.ContextVar[str | None] = contextvars.ContextVar("dualgpu_backend",
                                                                   default=None)

_NO_GPU = (
    "backend 'cuda' needs an NVIDIA GPU and driver, and numba.cuda.is_available() is False "
    "here. Use 'cpu' (compiled CPU) or 'cudasim' (the CUDA simulator)"
)


def _check(name, where="backend"):
    if not isinstance(name, str) or name.strip().lower() not in BACKENDS:
        raise DualgpuError(
            f"unknown {where} {name!r}; expected one of {BACKENDS} (set with "
            "dualgpu.set_backend(name) or the DUALGPU_BACKEND environment variable)."
        )
    return name.strip().lower()


@functools.lru_cache(maxsize=None)
def _gpu_available():
    from numba import cuda

    try:
        return bool(cuda.is_available())
    except Exception:  # a broken driver install is no GPU
        return False


#: numba-cuda's own setting for its low-occupancy warning, before dualgpu changed it
_USER_OCCUPANCY_WARNINGS = None


def _occupancy_warnings_for(name):
    """numba-cuda warns when a launch configuration has fewer than 128 blocks ("Grid size 1
    will likely result in GPU under-utilization"): advice about a GPU. dualgpu silences it while
    its active backend is "cpu" or "cudasim" (a small grid is right there) and gives the user's
    setting back under "cuda"; the process-wide setting follows the latest choice."""
    global _USER_OCCUPANCY_WARNINGS
    config = sys.modules.get("numba.cuda.core.config")
    if config is None or not hasattr(config, "CUDA_LOW_OCCUPANCY_WARNINGS"):
        return
    if _USER_OCCUPANCY_WARNINGS is None:
        _USER_OCCUPANCY_WARNINGS = config.CUDA_LOW_OCCUPANCY_WARNINGS
    config.CUDA_LOW_OCCUPANCY_WARNINGS = _USER_OCCUPANCY_WARNINGS if name == "cuda" else 0


def _check_gpu(name, how):
    if name == "cuda" and not _gpu_available():
        raise DualgpuError(f"{_NO_GPU}; {how}.")
    return name


@functools.lru_cache(maxsize=None)
def _default():
    from numba.core import config

    name = "cudasim" if config.ENABLE_CUDASIM else "cuda" if _gpu_available() else "cpu"
    _occupancy_warnings_for(name)
    return name


#: Thread classes that run the CUDA threads of a simulated kernel: the backends that simulate
#: threads add theirs at import (:func:`register_simulated_thread`), so core names none of them.
_SIMULATED_THREADS: list[type] = []


def register_simulated_thread(thread_type):
    """Count threads of ``thread_type`` as simulated CUDA threads (the cudasim backend's own)."""
    if thread_type not in _SIMULATED_THREADS:
        _SIMULATED_THREADS.append(thread_type)


def _in_simulated_thread():
    """True in a thread that runs a CUDA thread of a simulated kernel (numba's or dualgpu's)."""
    if threading.get_ident() == threading.main_thread().ident:
        return False  # no simulator runs its CUDA threads there (a launch's fast path)
    current = threading.current_thread()
    # numba's own simulator threads, once numba.cuda.simulator is loaded (it is not a dependency
    # of dualgpu's import, so it is looked up rather than imported)
    numba_threads = getattr(sys.modules.get("numba.cuda.simulator.kernel"), "BlockThread", None)
    if numba_threads is not None and isinstance(current, numba_threads):
        return True
    return any(isinstance(current, t) for t in _SIMULATED_THREADS)


def backend() -> str:
    """Return the name of the active backend (``"cuda"``, ``"cpu"`` or ``"cudasim"``).

    The first that applies: :func:`using_backend`, a simulated thread, :func:`set_backend`,
    the ``DUALGPU_BACKEND`` environment variable, then ``cuda`` where a GPU is present and
    ``cpu`` otherwise.

    Returns
    -------
    str
        The name of the backend that launches run on now.

    Raises
    ------
    DualgpuError
        When ``DUALGPU_BACKEND`` names an unknown backend, or ``cuda`` on a
        machine without a GPU.

    Examples
    --------
    >>> import dualgpu
    >>> with dualgpu.using_backend("cpu"):
    ...     dualgpu.backend()
    'cpu'
    """
    local = _LOCAL.get()
    if local is not None:
        return local
    if _in_simulated_thread():
        return "cudasim"
    if _CHOSEN is not None:
        return _CHOSEN
    env = os.environ.get("DUALGPU_BACKEND")
    if env and env.strip():
        name = _check(env, "backend in DUALGPU_BACKEND")
        return _check_gpu(name, "change or unset the DUALGPU_BACKEND environment variable "
                                f"(it is {env!r})")
    return _default()


def set_backend(name: str | None) -> None:
    """Make ``name`` the active backend for the whole process; ``None`` returns to the default.

    Inside a :func:`using_backend` block it also changes that block's choice
    (until the block ends).

    Parameters
    ----------
    name : {"cuda", "cpu", "cudasim"} or None
        The backend; None returns to ``DUALGPU_BACKEND`` or the default (``cuda`` when
        numba.cuda finds a GPU, else ``cpu``).

    Raises
    ------
    DualgpuError
        For an unknown name, or ``"cuda"`` on a machine without a GPU.

    Examples
    --------
    >>> import dualgpu
    >>> dualgpu.set_backend("cpu")
    >>> dualgpu.backend()
    'cpu'
    >>> dualgpu.set_backend(None)
    """
    global _CHOSEN
    if name is not None:
        name = _check_gpu(_check(name), "choose another backend with dualgpu.set_backend")
    _CHOSEN = name
    if _LOCAL.get() is not None:
        _LOCAL.set(name)
    _occupancy_warnings_for(backend())


@contextlib.contextmanager
def using_backend(name: str) -> Iterator[str]:
    """Context manager: run the block with backend ``name`` in this thread or task only.

    The choice is context-local (:mod:`contextvars`): other threads and asyncio
    tasks keep theirs. The previous choice is restored when the block ends.

    Parameters
    ----------
    name : {"cuda", "cpu", "cudasim"}
        The backend for the block.

    Yields
    ------
    str
        The backend's name.

    Raises
    ------
    DualgpuError
        For an unknown name, or ``"cuda"`` on a machine without a GPU.

    Examples
    --------
    >>> import dualgpu
    >>> with dualgpu.using_backend("cudasim") as name:
    ...     print(name, dualgpu.backend())
    cudasim cudasim
    """
    name = _check_gpu(_check(name), "choose another backend in dualgpu.using_backend")
    token = _LOCAL.set(name)
    _occupancy_warnings_for(name)
    try:
        yield name
    finally:
        _LOCAL.reset(token)
        _occupancy_warnings_for(backend())
