"""The driver's allocation context.

While the driver runs a simulation function, every float array the function
creates through :mod:`dualgpu.cuda` becomes a DualArray with the driver's lane
count (zero partials). Outside the driver, allocation follows the argument.
"""
import contextlib
import threading

import numpy as np

__all__ = ["active_lanes", "active_tile_lanes", "lane_dtype", "dual_allocation"]

_STATE = threading.local()


def active_lanes():
    """The driver's lane count, or 0 outside the driver."""
    return getattr(_STATE, "lanes", 0)


def active_tile_lanes():
    """Lanes per kernel tile the driver asks for (its chunk size), or 0 (the backend decides)."""
    return getattr(_STATE, "tile", 0)


def lane_dtype(value_dtype):
    """The partials dtype of arrays allocated now: uint64 while tracing sparsity, else the values'."""
    return np.dtype(np.uint64) if getattr(_STATE, "tracer", False) else np.dtype(value_dtype)


@contextlib.contextmanager
def dual_allocation(lanes, tracer=False, tile=0):
    """Within the block, float allocations through dualgpu.cuda carry ``lanes`` lanes.

    With ``tracer=True`` the lanes are dependency bitsets (sparsity detection).
    ``tile`` (a divisor of ``lanes``) asks kernels to run the lanes in tiles of
    that many (0: each backend chooses).
    """
    previous = active_lanes(), getattr(_STATE, "tracer", False), active_tile_lanes()
    _STATE.lanes = int(lanes)
    _STATE.tracer = bool(tracer)
    _STATE.tile = int(tile)
    try:
        yield
    finally:
        _STATE.lanes, _STATE.tracer, _STATE.tile = previous
