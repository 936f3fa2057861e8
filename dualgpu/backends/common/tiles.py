"""Lane tiles on the GPU backend: a dual launch with more lanes than the kernel's tile.

Under the driver DualArrays carry L lanes (many directions at once), while a GPU
kernel is compiled for a tile of N lanes (:data:`dualgpu.core.lanes.TILE_LANES`: 8,
where ptxas finds the dual N-body and mass-spring kernels spilling at 16). A
launch then runs its L / N tiles one after another on the launch's stream, each
on views of lanes ``t N .. (t + 1) N - 1`` of every dual argument (slices of the
lane-major partials: no copies). Every tile recomputes the values, so arrays the
kernel both reads and writes (:func:`dualgpu.backends.common.access.analyse_source`;
an array passed twice counts too) are copied back from a snapshot taken before
the first tile, device to device, before each later tile. That keeps in-place
kernels (``x[i] += dt * v[i]``), atomics and kernels reading what other threads
write exact, for any kernel, shared memory included.

When no array needs restoring, the GPU backend runs all tiles in one launch
instead, over a third grid dimension (:mod:`dualgpu.backends.gpu.tile_grid`);
this module is the path for everything else.
"""
import numpy as np

from dualgpu.core.dual import Dual
from dualgpu.core.dualarray import DualArray
from dualgpu.backends.common import access as _access

__all__ = ["tile_views", "restore_positions", "snapshot", "copy_into", "launch_tiles", "KEEP"]

#: a list while a launch graph is recorded (:mod:`dualgpu.porting.graphs`): device snapshots
#: taken between lane tiles are kept in it, alive as long as the graph that copies from them
KEEP = None


def tile_views(args, tile, lanes):
    """The arguments of lane tile ``tile`` (``lanes`` lanes each): views, no copies."""
    lo, hi = tile * lanes, (tile + 1) * lanes
    views = []
    for arg in args:
        if isinstance(arg, DualArray):
            views.append(DualArray(arg.values, arg.partials[lo:hi]))
        elif isinstance(arg, Dual):
            views.append(Dual(arg.value, np.asarray(arg.partials)[lo:hi], dtype=arg.dtype))
        else:
            views.append(arg)
    return views


def _values(arg):
    return arg.values if isinstance(arg, DualArray) else arg


def _is_array(value):
    return isinstance(value, np.ndarray) or hasattr(value, "__cuda_array_interface__")


def _span(array):
    """(first byte, last byte + 1) of an array's memory, host or device; None if unknown."""
    if isinstance(array, np.ndarray):
        pointer = array.__array_interface__["data"][0]
    else:
        interface = getattr(array, "__cuda_array_interface__", None)
        if interface is None:
            return None
        pointer = interface["data"][0]
    size = array.nbytes if hasattr(array, "nbytes") else 0
    return pointer, pointer + size


def _overlap(a, b):
    sa, sb = _span(a), _span(b)
    if sa is None or sb is None:
        return True  # cannot tell: assume they may
    if isinstance(a, np.ndarray) != isinstance(b, np.ndarray):
        return False  # host and device memory
    return sa[0] < sb[1] and sb[0] < sa[1]


def restore_positions(py_func, args):
    """Positions of the array arguments to restore between tiles (read and written, or aliased)."""
    summary = _access.analyse_source(py_func)
    arrays = [_values(a) if _is_array(_values(a)) else None for a in args]
    ndims = tuple(
        len(a.shape) if a is not None else (0 if isinstance(arg, (Dual, int, float, np.generic))
                                            else None)
        for a, arg in zip(arrays, args)
    )
    flags = summary.resolve(ndims) if summary is not None else [_access.BOTH] * len(args)
    restore = []
    for position, ((read, written), array) in enumerate(zip(flags, arrays)):
        if array is None or not written:
            continue
        aliased = any(other is not None and k != position and _overlap(array, other)
                      for k, other in enumerate(arrays))
        if read or aliased:
            restore.append(position)
    return restore


def snapshot(array, stream=0):
    """A copy of ``array`` on the same side (host or device)."""
    if isinstance(array, np.ndarray):
        return array.copy()
    from numba import cuda

    copy = cuda.device_array_like(array, stream=stream)
    copy.copy_to_device(array, stream=stream)
    if KEEP is not None:
        KEEP.append(copy)
    return copy


def copy_into(target, source, stream=0):
    """Copy ``source`` into ``target`` (same shape, same side)."""
    if isinstance(target, np.ndarray):
        np.copyto(target, source)
    else:
        target.copy_to_device(source, stream=stream)


def launch_tiles(launch_tile, py_func, args, tiles, lanes, stream=0):
    """Run ``launch_tile(views)`` for each of ``tiles`` lane tiles, restoring between them."""
    restore = restore_positions(py_func, args) if tiles > 1 else []
    saved = [(_values(args[p]), snapshot(_values(args[p]), stream)) for p in restore]
    for tile in range(tiles):
        if tile:
            for target, source in saved:
                copy_into(target, source, stream)
        launch_tile(tile_views(args, tile, lanes))
