"""Checks shared by the lane-tile tests: a launch with L lanes against the same kernel run on
each N-lane slice of its arguments (``test_tiles.py``, ``test_gpu_tile_grid.py``)."""
import numpy as np

from dualgpu import Dual
from dualgpu.core.dualarray import DualArray


def lane_slice(arg, start, stop, memo):
    """A copy of ``arg`` with lanes ``start:stop`` (an array passed twice stays one array)."""
    if id(arg) not in memo:
        if isinstance(arg, DualArray):
            memo[id(arg)] = DualArray(arg.values.copy(), arg.partials[start:stop].copy())
        elif isinstance(arg, Dual):
            memo[id(arg)] = Dual(arg.value, np.asarray(arg.partials)[start:stop], dtype=arg.dtype)
        elif isinstance(arg, np.ndarray):
            memo[id(arg)] = arg.copy()
        else:
            memo[id(arg)] = arg
    return memo[id(arg)]


def assert_slice_equal(got_args, sliced_args, start, stop):
    """Values and plain arrays equal bitwise; lanes ``start:stop`` of ``got`` equal the slice's."""
    for got, want in zip(got_args, sliced_args):
        if isinstance(got, DualArray):
            np.testing.assert_array_equal(got.values, want.values)
            np.testing.assert_array_equal(got.partials[start:stop], want.partials)
        elif isinstance(got, np.ndarray):
            np.testing.assert_array_equal(got, want)
