"""Which backend runs kernels: ``cuda`` (a real GPU), ``cpu`` (compiled CPU) or ``cudasim``.

Selection order: :func:`set_backend`, else the ``DUALGPU_BACKEND`` environment
variable, else ``cuda`` where ``numba.cuda.is_available()``, the simulator where
numba's simulator is enabled (``NUMBA_ENABLE_CUDASIM=1``), else ``cpu``. The
default is worked out once per process.
"""
import contextlib
import functools
import os

from .errors import DualgpuError

__all__ = ["BACKENDS", "backend", "set_backend", "using_backend"]

BACKENDS = ("cuda", "cpu", "cudasim")
_CHOSEN = None


def _check(name):
    if name not in BACKENDS:
        raise DualgpuError(
            f"unknown backend {name!r}; expected one of {BACKENDS} (set with "
            "dualgpu.set_backend(name) or the DUALGPU_BACKEND environment variable)."
        )
    return name


@functools.lru_cache(maxsize=None)
def _default():
    from numba.core import config

    if config.ENABLE_CUDASIM:
        return "cudasim"
    from numba import cuda

    try:
        if cuda.is_available():
            return "cuda"
    except Exception:  # a broken driver install is no GPU
        pass
    return "cpu"


def backend():
    """Return the name of the active backend (``"cuda"``, ``"cpu"`` or ``"cudasim"``)."""
    if _CHOSEN is not None:
        return _CHOSEN
    env = os.environ.get("DUALGPU_BACKEND")
    if env:
        return _check(env.strip().lower())
    return _default()


def set_backend(name):
    """Make ``name`` the active backend; ``None`` returns to the default choice."""
    global _CHOSEN
    if name is None:
        _CHOSEN = None
        return
    name = _check(name)
    if name == "cuda":
        from numba import cuda

        if not cuda.is_available():
            raise DualgpuError(
                "backend 'cuda' needs an NVIDIA GPU and driver, and numba.cuda.is_available() "
                "is False here. Use 'cpu' (compiled CPU) or 'cudasim' (the CUDA simulator)."
            )
    _CHOSEN = name


@contextlib.contextmanager
def using_backend(name):
    """Context manager: run the block with backend ``name``, then restore the previous choice."""
    global _CHOSEN
    previous = _CHOSEN
    set_backend(name)
    try:
        yield name
    finally:
        _CHOSEN = previous
