"""The driver's allocation context.

While the driver runs a simulation function, every float array the function
creates through :mod:`dualgpu.cuda` becomes a DualArray with the driver's lane
count (zero partials). Outside the driver, allocation follows the argument.
"""
import contextlib
import threading

__all__ = ["active_lanes", "dual_allocation"]

_STATE = threading.local()


def active_lanes():
    """The driver's lane count, or 0 outside the driver."""
    return getattr(_STATE, "lanes", 0)


@contextlib.contextmanager
def dual_allocation(lanes):
    """Within the block, float allocations through dualgpu.cuda carry ``lanes`` lanes."""
    previous = active_lanes()
    _STATE.lanes = int(lanes)
    try:
        yield
    finally:
        _STATE.lanes = previous
