"""What runs between regions: barrier checks, block votes, warp shuffles, votes and matches.

Each function works on a *team* of ``n`` threads (one block, or every block of
the grid) laid out block after block, ``bs`` threads per block, thread ``t``
of a block being ``tx + bdx * (ty + bdy * tz)``; warps are 32 consecutive
threads of a block. ``part[t]`` says whether thread ``t`` executes the
operation (it is alive and inside the branches and loop iterations around
it), ``alive[t]`` whether it has not returned. Threads deposit their operands
before the operation (``xm``: mask, ``xa``: predicate or lane argument,
``xv``: a slot row with the value) and read their result after it (``res``,
or the source row ``src`` of a shuffle).

A violation of CUDA's rules writes a code and details into ``err`` and returns
1; the launcher turns that into an error naming the construct, line and block:

- ``DIVERGENT``: a block (or grid) barrier reached by some but not all of the
  live threads of the block (grid);
- ``MASK_SELF``: a lane calls a warp function with a mask that leaves itself out;
- ``MASK_ABSENT``: a live lane named in the mask does not make the call;
- ``SOURCE_INACTIVE``: a shuffle reads a lane that does not take part (exited,
  outside the block, or elsewhere in the code): undefined on a GPU.

This module also holds the typing stand-ins of the markers
(``typing_stubs``), used once per build to learn the kernel's variable types.
"""
import numpy as np
from numba import njit, types
from numba.core.errors import TypingError
from numba.extending import overload

from dualgpu.backends.cpu import COMPILED_CODE_ONLY
from dualgpu.compiled.types import DualType

#: helpers called from compiled block code only
_compiled_only = njit(**COMPILED_CODE_ONLY)

__all__ = [
    "DIVERGENT", "MASK_SELF", "MASK_ABSENT", "SOURCE_INACTIVE", "VOTE_KINDS", "WARP_OPS",
    "check_sync", "vote_block", "warp_op", "to_i32", "lanemask_lt", "value_of", "typing_stubs",
]

DIVERGENT, MASK_SELF, MASK_ABSENT, SOURCE_INACTIVE = 1, 2, 3, 4

#: syncthreads_count / _and / _or
VOTE_KINDS = {"sync_count": 0, "sync_and": 1, "sync_or": 2}
#: warp operations
WARP_OPS = {
    "syncwarp": 0, "shfl_idx": 1, "shfl_up": 2, "shfl_down": 3, "shfl_xor": 4, "all": 5,
    "any": 6, "eq": 7, "ballot": 8, "match_any": 9, "match_all": 10, "activemask": 11,
}
_WARP = 32
_FULL = (1 << 32) - 1


@_compiled_only
def _fail(err, code, site, t, a, b):
    err[0] = code
    err[1] = site
    err[2] = t
    err[3] = a
    err[4] = b


@_compiled_only
def check_sync(part, alive, n, bs, gridwide, err, site):
    """Return 0 if each block (or the grid) has all or none of its live threads in ``part``."""
    size = n if gridwide else bs
    for g0 in range(0, n, size):
        reached = 0
        live = 0
        missing = -1
        for t in range(g0, min(n, g0 + size)):
            if alive[t]:
                live += 1
                if part[t]:
                    reached += 1
                elif missing < 0:
                    missing = t
        if reached != 0 and reached != live:
            err[0] = DIVERGENT
            err[1] = site
            err[2] = missing
            err[3] = reached
            err[4] = live
            return 1
    return 0


@_compiled_only
def vote_block(kind, part, alive, xa, res, n, bs, err, site):
    """Return 0 after syncthreads_count (kind 0), _and (1) or _or (2) over each block's ``part``.

    Each participating thread's result goes to ``res``; 1 (and ``err``) if a
    block's barrier is divergent.
    """
    if check_sync(part, alive, n, bs, False, err, site):
        return 1
    for b0 in range(0, n, bs):
        count = 0
        reached = 0
        for t in range(b0, b0 + bs):
            if part[t]:
                reached += 1
                if xa[t] != 0:
                    count += 1
        if kind == 0:
            value = count
        elif kind == 1:
            value = 1 if count == reached else 0
        else:
            value = 1 if count > 0 else 0
        for t in range(b0, b0 + bs):
            if part[t]:
                res[t] = value
    return 0


@_compiled_only
def _rows_equal(xv, a, b):
    for k in range(xv.shape[1]):
        if xv[a, k] != xv[b, k]:
            return False
    return True


@_compiled_only
def warp_op(kind, part, alive, xm, xa, src, res, xv, n, bs, err, site):
    """Return 0 after warp operation ``kind`` (a WARP_OPS value) for the threads in ``part``.

    Results go to ``res`` (votes, matches, activemask) or ``src`` (the row a
    shuffle reads); 1 (and ``err``) on a mask or source-lane violation.
    """
    for b0 in range(0, n, bs):
        for w0 in range(b0, b0 + bs, _WARP):
            w1 = min(w0 + _WARP, b0 + bs)
            taking = 0
            live = 0
            true = 0
            for t in range(w0, w1):
                bit = 1 << (t - w0)
                if alive[t]:
                    live |= bit
                if part[t]:
                    taking |= bit
                    if xa[t] != 0:
                        true |= bit
            if taking == 0:
                continue
            for t in range(w0, w1):
                if not part[t]:
                    continue
                lane = t - w0
                if kind == 11:  # activemask: the lanes executing here
                    res[t] = taking
                    continue
                mask = xm[t] & _FULL
                if not (mask >> lane) & 1:
                    _fail(err, MASK_SELF, site, t, mask, lane)
                    return 1
                missing = mask & live & ~taking
                if missing:
                    other = 0
                    while not (missing >> other) & 1:
                        other += 1
                    _fail(err, MASK_ABSENT, site, t, w0 + other, mask)
                    return 1
                group = mask & taking
                if 1 <= kind <= 4:
                    b = xa[t] & 31
                    if kind == 1:
                        j = b
                    elif kind == 2:
                        j = lane - b
                        if j < 0:
                            j = lane
                    elif kind == 3:
                        j = lane + b
                        if j > 31:
                            j = lane
                    else:
                        j = lane ^ b
                    if not (taking >> j) & 1:
                        _fail(err, SOURCE_INACTIVE, site, t, w0 + j, j)
                        return 1
                    src[t] = w0 + j
                elif kind == 5:
                    res[t] = 1 if (group & ~true) == 0 else 0
                elif kind == 6:
                    res[t] = 1 if (group & true) != 0 else 0
                elif kind == 7:
                    res[t] = 1 if (group & true) == 0 or (group & true) == group else 0
                elif kind == 8:
                    res[t] = group & true
                elif kind == 9 or kind == 10:
                    same = 0
                    for u in range(w0, w1):
                        if (group >> (u - w0)) & 1 and _rows_equal(xv, t, u):
                            same |= 1 << (u - w0)
                    if kind == 9:
                        res[t] = same
                    else:
                        res[t] = group if same == group else 0
    return 0


@_compiled_only
def to_i32(value):
    """An unsigned 32-bit mask held in an int64 as numba.cuda's int32 result."""
    if value >= (1 << 31):
        value -= 1 << 32
    return np.int32(value)


@_compiled_only
def lanemask_lt(lane):
    """``cuda.lanemask_lt()``: the lanes below ``lane`` as a uint32 mask."""
    return np.uint32((1 << lane) - 1)


def value_of(x):
    """The value of a dual (what warp matches compare), or ``x`` itself."""
    return x


@overload(value_of)
def _value_of(x):
    if isinstance(x, DualType):
        return lambda x: x.value
    return lambda x: x


# ---------------------------------------------------------------------------
# typing stand-ins: the result types numba.cuda gives each construct
# ---------------------------------------------------------------------------
_SHUFFLED = (types.int32, types.int64, types.float32, types.float64)


def _is_dual(ty):
    return isinstance(ty, DualType)


def _shuffled(value, what):
    value = types.unliteral(value)
    if value not in _SHUFFLED and not _is_dual(value):
        raise TypingError(
            f"{what}: numba.cuda exchanges 32- and 64-bit ints and floats (and, with dualgpu, "
            f"duals of them); got a value of type {value}. Convert it first, e.g. "
            "numba.int32(x) or float(x)."
        )


def _integer(value, what):
    if not isinstance(types.unliteral(value), (types.Integer, types.Boolean)):
        raise TypingError(f"{what}: expected an integer or boolean; got {value}.")


def _stub(name):
    def stub(*args):  # pragma: no cover - only its overload is ever compiled
        raise NotImplementedError(name)

    stub.__name__ = stub.__qualname__ = f"_dg_blk_{name}"
    return stub


def _stubs():
    stubs = {kind: _stub(kind) for kind in (
        "sync", "grid_sync", "syncwarp", "sync_count", "sync_and", "sync_or", "shfl_idx",
        "shfl_up", "shfl_down", "shfl_xor", "all", "any", "eq", "ballot", "match_any",
        "match_all", "activemask",
    )}

    @overload(stubs["sync"])
    def _sync():
        return lambda: None

    @overload(stubs["grid_sync"])
    def _grid_sync():
        return lambda: None

    @overload(stubs["syncwarp"])
    def _syncwarp(mask):
        _integer(mask, "cuda.syncwarp(mask)")
        return lambda mask: None

    def vote(kind):
        @overload(stubs[kind])
        def _vote(predicate):
            _integer(predicate, f"cuda.syncthreads_{kind[5:]}(predicate)")
            return lambda predicate: np.int32(0)

    def shuffle(kind):
        @overload(stubs[kind])
        def _shfl(mask, value, lane):
            _integer(mask, "the mask of a warp shuffle")
            _integer(lane, "the lane argument of a warp shuffle")
            _shuffled(value, "a warp shuffle")
            return lambda mask, value, lane: value

    def warp_vote(kind):
        @overload(stubs[kind])
        def _warp_vote(mask, predicate):
            _integer(mask, f"the mask of cuda.{kind}_sync")
            _integer(predicate, f"the predicate of cuda.{kind}_sync")
            return lambda mask, predicate: True

    for kind in ("sync_count", "sync_and", "sync_or"):
        vote(kind)
    for kind in ("shfl_idx", "shfl_up", "shfl_down", "shfl_xor"):
        shuffle(kind)
    for kind in ("all", "any", "eq"):
        warp_vote(kind)

    @overload(stubs["ballot"])
    def _ballot(mask, predicate):
        _integer(mask, "the mask of cuda.ballot_sync")
        _integer(predicate, "the predicate of cuda.ballot_sync")
        return lambda mask, predicate: np.int32(0)

    @overload(stubs["match_any"])
    def _match_any(mask, value):
        _integer(mask, "the mask of cuda.match_any_sync")
        _shuffled(value, "cuda.match_any_sync")
        return lambda mask, value: np.int32(0)

    @overload(stubs["match_all"])
    def _match_all(mask, value):
        _integer(mask, "the mask of cuda.match_all_sync")
        _shuffled(value, "cuda.match_all_sync")
        return lambda mask, value: (np.int32(0), True)

    @overload(stubs["activemask"])
    def _activemask():
        return lambda: np.uint32(0)

    return {f"_dg_blk_{kind}": stub for kind, stub in stubs.items()}


_TYPING_STUBS = None


def typing_stubs():
    """Globals binding each synchronising marker name to a typing stand-in."""
    global _TYPING_STUBS
    if _TYPING_STUBS is None:
        _TYPING_STUBS = _stubs()
    return _TYPING_STUBS
