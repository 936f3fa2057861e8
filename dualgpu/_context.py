"""The driver's allocation context.

While the driver runs a simulation function, every float array the function
creates through :mod:`dualgpu.cuda` becomes a DualArray with the driver's lane
count (zero partials). Outside the driver, allocation follows the argument.

The state is context-local (:mod:`contextvars`), like the backend choice: a
driver running in one thread or asyncio task does not change allocation in
another.
"""
import contextlib
import contextvars

import numpy as np

__all__ = ["active_lanes", "lane_dtype", "dual_allocation"]

#: (lanes, tracer) of the innermost dual_allocation block; (0, False) outside one
_STATE = contextvars.ContextVar("dualgpu_allocation", default=(0, False))


def active_lanes():
    """The driver's lane count, or 0 outside the driver."""
    return _STATE.get()[0]


def lane_dtype(value_dtype):
    """The partials dtype of arrays allocated now: uint64 while tracing sparsity, else the values'."""
    return np.dtype(np.uint64) if _STATE.get()[1] else np.dtype(value_dtype)


@contextlib.contextmanager
def dual_allocation(lanes, tracer=False):
    """Within the block, float allocations through dualgpu.cuda carry ``lanes`` lanes.

    With ``tracer=True`` the lanes are dependency bitsets (sparsity detection).
    """
    token = _STATE.set((int(lanes), bool(tracer)))
    try:
        yield
    finally:
        _STATE.reset(token)
