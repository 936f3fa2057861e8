"""Lane tiles of a cpu-backend dual launch: how many lanes per tile, which arrays to restore.

A dual launch whose duals carry L lanes runs tiles of N lanes in one compiled
call (see :mod:`dualgpu.backends.cpu.launchers`). :class:`LaneTiles`, a base of
:class:`dualgpu.backends.cpu.kernel.CpuKernel`, decides:

- N: the driver's tile when it sets one; else the width the kernel's profile asks for
  (:mod:`dualgpu.backends.cpu.lane_model`: for a compute-bound kernel 32 lanes with AVX,
  AVX2 or AVX-512, 16 with SSE or NEON; 8 for a memory-bound one), the largest of
  :data:`dualgpu.core.lanes.TILE_CANDIDATES` up to it that divides L; else
  :func:`dualgpu.core.lanes.launch_tile`. Nothing is timed: the first launch is as fast
  as the next;
- which arrays to copy back between tiles: those the kernel reads and writes
  (:mod:`dualgpu.backends.common.access`), and those written that share memory with
  another argument; a kernel that may write an argument which cannot be
  snapshot (a tuple of arrays) runs all lanes in one tile.
"""
import numpy as np

from dualgpu.core._context import active_tile_lanes
from dualgpu.core.dual import Dual
from dualgpu.core.dualarray import DualArray
from dualgpu.errors import DualgpuError
from dualgpu.core.lanes import TILE_CANDIDATES, launch_tile
from dualgpu.backends.common import access as _access
from dualgpu.backends.cpu.lane_model import TILE_WIDTH, kernel_profile

__all__ = ["LaneTiles", "dual_kind", "values_of", "access_summary"]

#: The most lanes a compiled dual may have (dualgpu.compiled.types.MAX_LANES).
MAX_LANES = 64


class LaneTiles:
    """Tile choice and restores for a kernel (mixed into CpuKernel: uses its ``_costs``,
    ``_translation``, ``tile_lanes`` and ``name``)."""

    def _tiles(self, lanes, args, mask, base="flat"):
        """Return ``(tile lanes, number of tiles)`` for a dual launch of ``lanes`` lanes.

        The driver's tile when it sets one; else the width of the kernel's profile
        (:data:`dualgpu.backends.cpu.lane_model.TILE_WIDTH`): the largest of
        :data:`dualgpu.core.lanes.TILE_CANDIDATES` up to it that divides ``lanes``, else
        :func:`dualgpu.core.lanes.launch_tile`.
        """
        hint = active_tile_lanes()
        width = self.tile_lanes or TILE_WIDTH[kernel_profile(self._translation).kind]
        candidates = [t for t in TILE_CANDIDATES["cpu"] if lanes % t == 0 and t <= width]
        if self.tile_lanes or (hint and lanes % hint == 0) or not candidates or lanes <= width:
            tile = launch_tile(lanes, width, hint, MAX_LANES)
        else:
            tile = max(candidates)
        if tile < lanes and not self._tileable(args, mask):
            if lanes > MAX_LANES:
                raise DualgpuError(
                    f"kernel {self.name!r}: {lanes} lanes need lane tiles, but an argument that "
                    "is neither an array nor a number (a tuple or record of arrays?) may be "
                    "written by the kernel, so tiles could not be rerun from the same state. "
                    f"Use at most {MAX_LANES} lanes (chunk_size), or pass arrays directly."
                )
            tile = lanes
        return tile, lanes // tile

    def _tileable(self, args, mask):
        """False if an argument that cannot be snapshot (not an array or number) may be written."""
        return self._access_of(args, mask)[1]

    def _access_of(self, args, mask):
        """``(flags, tileable)`` for these arguments: (read, written) per parameter."""
        ndims = tuple(
            a.values.ndim if kind == "a" else a.ndim if isinstance(a, np.ndarray)
            else 0 if kind == "s" or np.isscalar(a) else None
            for a, kind in zip(args, mask)
        )
        key = (mask, ndims)
        found = self._access.get(key)
        if found is None:
            if self._summary is None:
                self._summary = access_summary(self._translation, set())
            flags = self._summary.resolve(ndims)
            tileable = all(not written or ndim is not None
                           for (_, written), ndim in zip(flags, ndims))
            found = self._access[key] = (flags, tileable)
        return found

    def _restore(self, args, mask):
        """Positions of the arrays to restore between lane tiles (read and written, or aliased)."""
        flags = self._access_of(args, mask)[0]
        arrays = [a.values if kind == "a" else a if isinstance(a, np.ndarray) else None
                  for a, kind in zip(args, mask)]
        restore = []
        for position, ((read, written), array) in enumerate(zip(flags, arrays)):
            if array is None or not written:
                continue
            if read or any(other is not None and k != position
                           and np.may_share_memory(array, other)
                           for k, other in enumerate(arrays)):
                restore.append(position)
        return tuple(restore)


def dual_kind(arg):
    """"a" for a DualArray, "s" for a Dual, "" for anything else."""
    if isinstance(arg, DualArray):
        return "a"
    if isinstance(arg, Dual):
        return "s"
    return ""


def values_of(arg):
    return arg.values if isinstance(arg, DualArray) else arg


def access_summary(translation, active):
    """The :class:`~dualgpu.backends.common.access.Summary` of a translation (device calls
    followed)."""
    summary = getattr(translation, "_access_summary", None)
    if summary is not None:
        return summary
    active.add(id(translation))

    def device(name):
        callee = translation.devices.get(name)
        if callee is None or id(callee) in active or callee.tree is None:
            return None
        return access_summary(callee, active)

    summary = _access.analyse(translation.tree, device)
    active.discard(id(translation))
    translation._access_summary = summary
    return summary
