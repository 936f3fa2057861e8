"""The driver's allocation context.

While the driver runs a simulation function, every float array the function
creates through :mod:`dualgpu.cuda` becomes a DualArray with the driver's lane
count (zero partials). Outside the driver, allocation follows the argument.
"""
import contextlib
import threading

import numpy as np

__all__ = ["active_lanes", "lane_dtype", "dual_allocation"]

_STATE = threading.local()


def active_lanes():
    """The driver's lane count, or 0 outside the driver."""
    return getattr(_STATE, "lanes", 0)


def lane_dtype(value_dtype):
    """The partials dtype of arrays allocated now: uint64 while tracing sparsity, else the values'."""
    return np.dtype(np.uint64) if getattr(_STATE, "tracer", False) else np.dtype(value_dtype)


@contextlib.contextmanager
def dual_allocation(lanes, tracer=False):
    """Within the block, float allocations through dualgpu.cuda carry ``lanes`` lanes.

    With ``tracer=True`` the lanes are dependency bitsets (sparsity detection).
    """
    previous = active_lanes(), getattr(_STATE, "tracer", False)
    _STATE.lanes = int(lanes)
    _STATE.tracer = bool(tracer)
    try:
        yield
    finally:
        _STATE.lanes, _STATE.tracer = previous
