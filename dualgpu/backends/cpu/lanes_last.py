"""Lanes-last tiles: a compute-bound kernel's partials laid out so its lane loops are SIMD.

DualArrays keep their partials lane-major, ``(lanes, *shape)``: one lane's row is
contiguous, which GPU threads load coalesced and which the cpu backend's launch loop
vectorises across threads when each thread's work is straight-line (a stencil).
A kernel whose threads run a loop (an N-body pair loop, a per-thread time loop) is
not vectorised across threads; there the lanes of one element must be contiguous, so
that every dual operation of a tile becomes packed instructions over its lanes.

For such kernels (:func:`dualgpu.backends.cpu.lane_model.kernel_profile` says
"compute") a launch runs tile by tile. Before a tile, :class:`Buffers` copies the
tile's lanes of every dual array into a scratch array laid out lanes-last (Fortran
order of shape ``(lanes, *shape)``: numba knows its first axis has unit stride); the
launcher binds the scratch as it is (``LaunchSpec.lanes_last``); after the tile, the
lanes of the arrays the kernel writes are copied back. The copies cost
``O(lanes x size)`` per launch, against the kernel's ``O(lanes x size x loop)``.

Not used (the lane-major launch runs instead) when two dual arguments share memory
(scratch copies would break the aliasing the kernel sees), for sparsity tracers, and
for block-level kernels.

Examples
--------
>>> import numpy as np
>>> from dualgpu.core.dualarray import DualArray
>>> a = DualArray(np.zeros(3), np.arange(12.0).reshape(4, 3))
>>> buffers = Buffers([a, 2.0], ("a", ""), 2, [(True, True), (True, False)])
>>> buffers.load(1)
>>> buffers.scratch[0].flags.f_contiguous, buffers.scratch[0].tolist()
(True, [[6.0, 7.0, 8.0], [9.0, 10.0, 11.0]])
>>> buffers.scratch[0][:] = -1.0
>>> buffers.store(1)
>>> a.partials[:, 0].tolist()
[0.0, 3.0, -1.0, -1.0]
"""
import numpy as np

__all__ = ["usable", "Buffers"]


def usable(args, mask):
    """True if this launch may run lanes-last: float lanes, no two dual arrays sharing memory."""
    partials = [a.partials for a, kind in zip(args, mask) if kind == "a"]
    if not partials:
        return False
    for k, p in enumerate(partials):
        if not isinstance(p, np.ndarray) or p.dtype.kind != "f":
            return False
        if any(np.may_share_memory(p, q) for q in partials[k + 1:]):
            return False
    return True


class Buffers:
    """The lanes-last scratch of one launch: one Fortran array per dual array argument.

    ``flat`` is the launcher's argument list with each dual array's partials replaced
    by its scratch; :meth:`load` fills the scratch with a tile's lanes, :meth:`store`
    copies the lanes of the arrays the kernel writes (``flags``: (read, written) per
    argument) back.
    """

    def __init__(self, args, mask, tile, flags):
        self.tile = tile
        self.flat = []
        self.scratch = []
        self._pairs = []  # (partials, scratch, written)
        for arg, kind, (_, written) in zip(args, mask, flags):
            if kind == "a":
                scratch = np.empty((tile,) + arg.values.shape, arg.partials.dtype, order="F")
                self.flat += (arg.values, scratch)
                self.scratch.append(scratch)
                self._pairs.append((arg.partials, scratch, written))
            elif kind == "s":
                self.flat += (arg.value, arg.partials)
            else:
                self.flat.append(arg)

    def _lanes(self, partials, tile):
        return partials[tile * self.tile:(tile + 1) * self.tile]

    def load(self, tile):
        """Copy lanes ``tile * T .. (tile + 1) * T - 1`` of every dual array into its scratch."""
        for partials, scratch, _ in self._pairs:
            np.copyto(scratch, self._lanes(partials, tile))

    def store(self, tile):
        """Copy the scratch of every written dual array back into its lanes of tile ``tile``."""
        for partials, scratch, written in self._pairs:
            if written:
                np.copyto(self._lanes(partials, tile), scratch)
