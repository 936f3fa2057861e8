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

from dualgpu.errors import DualgpuError

__all__ = ["active_lanes", "active_levels", "active_tile_lanes", "lane_dtype", "dual_allocation"]

#: (levels, tracer, tile) of the innermost dual_allocation block: the lane counts of the
#: drivers running now (outermost first), whether lanes are dependency bitsets (sparsity
#: detection), and the lanes per kernel tile asked for (0: each backend chooses)
_STATE = contextvars.ContextVar("dualgpu_allocation", default=((), False, 0))


def active_lanes():
    """The driver's lane count, or 0 outside the driver."""
    levels = _STATE.get()[0]
    return levels[-1] if levels else 0


def active_levels():
    """The lane counts of the drivers running now, outermost first: ``()`` outside the driver.

    A driver called while another one runs f (a nested derivative) adds a level;
    the duals it seeds have the tag ``len(active_levels())`` of its call.
    """
    return _STATE.get()[0]


def active_tile_lanes():
    """Lanes per kernel tile the driver asks for (its chunk size), or 0 (the backend decides)."""
    return _STATE.get()[2]


def lane_dtype(value_dtype):
    """The partials dtype of arrays allocated now: uint64 while tracing sparsity (int64 for a
    global pattern), else the values'."""
    tracer = _STATE.get()[1]
    if tracer:
        return np.dtype(np.int64) if tracer == "global" else np.dtype(np.uint64)
    return np.dtype(value_dtype)


@contextlib.contextmanager
def dual_allocation(lanes, tracer=False, tile=0):
    """Within the block, float allocations through dualgpu.cuda carry ``lanes`` lanes.

    Inside another driver's block (a nested derivative) they carry both: the
    arrays are duals of the outer level's duals. With ``tracer=True`` the
    lanes are dependency bitsets (sparsity detection, never nested); with
    ``tracer="global"`` those of a global pattern (int64 lanes, see
    :func:`dualgpu.autodiff.sparse.detect_sparsity`, ``mode="global"``).
    ``tile`` (a divisor of ``lanes``) asks kernels to run the lanes in tiles of
    that many (0: each backend chooses).
    """
    levels, tracing, _ = _STATE.get()
    if levels and (tracer or tracing):
        raise DualgpuError(
            "sparsity detection cannot run inside another derivative (or contain one); detect "
            "the pattern outside, then pass it as sparsity=pattern."
        )
    tracer = "global" if tracer == "global" else bool(tracer)
    token = _STATE.set((levels + (int(lanes),), tracer, int(tile)))
    try:
        yield
    finally:
        _STATE.reset(token)
