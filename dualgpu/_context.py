"""The driver's allocation context.

While the driver runs a simulation function, every float array the function
creates through :mod:`dualgpu.cuda` becomes a DualArray with the driver's lane
count (zero partials). Outside the driver, allocation follows the argument.
"""
import contextlib
import threading

import numpy as np

__all__ = ["active_lanes", "active_levels", "active_tile_lanes", "lane_dtype", "dual_allocation"]

_STATE = threading.local()


def active_lanes():
    """The driver's lane count, or 0 outside the driver."""
    levels = getattr(_STATE, "levels", ())
    return levels[-1] if levels else 0


def active_levels():
    """The lane counts of the drivers running now, outermost first: ``()`` outside the driver.

    A driver called while another one runs f (a nested derivative) adds a level;
    the duals it seeds have the tag ``len(active_levels())`` of its call.
    """
    return getattr(_STATE, "levels", ())


def active_tile_lanes():
    """Lanes per kernel tile the driver asks for (its chunk size), or 0 (the backend decides)."""
    return getattr(_STATE, "tile", 0)


def lane_dtype(value_dtype):
    """The partials dtype of arrays allocated now: uint64 while tracing sparsity, else the values'."""
    return np.dtype(np.uint64) if getattr(_STATE, "tracer", False) else np.dtype(value_dtype)


@contextlib.contextmanager
def dual_allocation(lanes, tracer=False, tile=0):
    """Within the block, float allocations through dualgpu.cuda carry ``lanes`` lanes.

    Inside another driver's block (a nested derivative) they carry both: the
    arrays are duals of the outer level's duals. With ``tracer=True`` the
    lanes are dependency bitsets (sparsity detection, never nested).
    ``tile`` (a divisor of ``lanes``) asks kernels to run the lanes in tiles of
    that many (0: each backend chooses).
    """
    previous = active_levels(), getattr(_STATE, "tracer", False), active_tile_lanes()
    if previous[0] and (tracer or previous[1]):
        from .errors import DualgpuError

        raise DualgpuError(
            "sparsity detection cannot run inside another derivative (or contain one); detect "
            "the pattern outside, then pass it as sparsity=pattern."
        )
    _STATE.levels = previous[0] + (int(lanes),)
    _STATE.tracer = bool(tracer)
    _STATE.tile = int(tile)
    try:
        yield
    finally:
        _STATE.levels, _STATE.tracer, _STATE.tile = previous
