"""How many lanes a kernel computes at once (a *tile*) and how many one run of f carries.

Two numbers set the cost of a forward-mode Jacobian of n directions:

- the **tile** (``chunk_size``): lanes per compiled kernel. Each dual holds a
  value and ``tile`` partials in registers; more lanes amortise the value
  computation, too many spill registers. The default per backend is
  :data:`TILE_LANES` (measured, see :data:`MEASURED`); :func:`check_chunk_size`
  warns when a user asks for more than the measured good range.
- the **batch**: lanes of the DualArrays during one run of f, a multiple of the
  tile. The cpu backend runs every tile of a launch inside one compiled call,
  the GPU backend one tile per launch; so a Jacobian of n directions costs
  about one run of f (host code, launches) instead of ``n / tile``.
  :func:`batch_lanes` picks the batch from a memory budget
  (:data:`BATCH_BYTES`).

Examples
--------
>>> tile_lanes(1000, "cpu"), tile_lanes(3, "cpu")
(8, 3)
>>> driver_tiles(1000, "cpu"), driver_tiles(100, "cpu"), driver_tiles(12, "cpu")
((32, 0), (16, 0), (6, 6))
>>> batch_lanes(1000, 8, bytes_per_lane=64_000)
1000
>>> batch_lanes(1000, 8, bytes_per_lane=64_000, budget=16 * 2**20)
256

A memory-bound stencil streams every lane of every array it touches at each step;
once launches cost microseconds, runs of f whose working set stays in the L2 cache
are faster than one run of all lanes (:func:`cache_lanes`, on by default when the user
leaves ``chunk_size`` to the driver):

>>> cache_lanes(1000, 32, input_bytes=8000, cache_bytes=2**20)  # heat, 1000 cells, 1 MiB
64
>>> cache_lanes(1000, 32, input_bytes=8 * 10**6, cache_bytes=2**20) is None  # too big
True
"""
import functools
import glob
import os
import warnings

from dualgpu.core._paths import PACKAGE_DIR
from dualgpu.errors import ChunkSizeWarning, DualgpuError

__all__ = [
    "MAX_LANES", "DEFAULT_CHUNK_LIMIT", "default_chunk_size", "TILE_LANES", "TILE_CANDIDATES",
    "TUNE_MIN_DIRECTIONS", "GOOD_TILE_LANES", "MEASURED",
    "BATCH_BYTES", "LIVE_ARRAYS", "ChunkSizeWarning", "tile_lanes", "driver_tiles",
    "batch_lanes", "check_chunk_size", "launch_tile", "FIT_CACHE", "TOUCHED_ARRAYS",
    "L2_FALLBACK_BYTES",
    "l2_cache_bytes", "cache_lanes",
]

#: The most lanes a compiled dual may have (a soft limit for register use); the compiled floor
#: and the backends read it from here.
MAX_LANES = 64

#: Largest N :func:`default_chunk_size` picks unless given a limit (the
#: driver's limit is the backend's :data:`TILE_LANES`).
DEFAULT_CHUNK_LIMIT = 8

#: Default lanes per tile for each backend (0: no tiling, all lanes at once).
TILE_LANES = {"cpu": 8, "cuda": 8, "cudasim": 0}

#: Tile sizes a cpu-backend kernel chooses among when the driver leaves the choice to it:
#: the largest that divides the launch's lanes and fits the kernel's profile (for a
#: compute-bound kernel 32 lanes with AVX, AVX2 or AVX-512; 8 for a memory-bound one; see
#: :mod:`dualgpu.backends.cpu.lane_model`). Measured on 2 cores: the dual heat Jacobian is
#: fastest at 4-8 lanes, the N-body pair loop (lanes-last tiles, packed FMA) at 32, with
#: AVX-512 and with AVX2 (8 lanes cost 1.4-1.6x as much per lane with AVX2).
TILE_CANDIDATES = {"cpu": (8, 16, 32), "cuda": (8,), "cudasim": ()}

#: With fewer directions the driver picks the tile itself; from this many on, runs carry
#: a multiple of the largest candidate ``c`` with ``n >= TUNE_MIN_DIRECTIONS * c / 16``
#: (64 directions: 16 lanes, 128: 32), so padding wastes at most a quarter of the lanes.
TUNE_MIN_DIRECTIONS = 64

#: Above this many lanes per tile a backend is measured to get slower per lane.
GOOD_TILE_LANES = {"cpu": 32, "cuda": 16, "cudasim": 64}

#: What the limits above rest on (printed by the warning).
MEASURED = {
    "cpu": (
        "on the cpu backend (2-core AMD EPYC, AVX-512) a compute-bound kernel's lanes run as "
        "packed vector instructions: on one thread the dual N-body pair loop costs 1.5 ns per "
        "pair and lane at 32 lanes per tile, 2.7 ns at 16 (0.8 ns at 32 on 2 threads); beyond "
        "32 the lanes no longer fit the vector registers, and stencils gain nothing beyond 16"
    ),
    "cuda": (
        "ptxas for sm_90: the dual N-body kernel uses 232 registers at 8 lanes and spills "
        "864 bytes at 16; stencils stay under 90 registers at 16 lanes"
    ),
    "cudasim": "the CUDA simulator's Python duals take any lane count",
}

#: Memory one run of f may give to dual lanes (see :func:`batch_lanes`).
BATCH_BYTES = 256 * 2**20

#: Guess of how many arrays the size of the differentiated inputs f keeps alive.
LIVE_ARRAYS = 8


def default_chunk_size(n, limit=DEFAULT_CHUNK_LIMIT):
    """Return the default lane count N for ``n`` directions.

    The fewest chunks of at most ``limit`` lanes, spread evenly: ``n=200`` gives
    8 (25 chunks), ``n=9`` gives 5 (2 chunks, one padded lane), ``n=3`` gives 3.

    Parameters
    ----------
    n : int
        The number of directions (at least 1).
    limit : int, optional
        The most lanes per chunk (clipped to 1 .. :data:`MAX_LANES`).

    Returns
    -------
    int
        The lanes per chunk.

    Raises
    ------
    DualgpuError
        For fewer than one direction.

    Examples
    --------
    >>> default_chunk_size(200), default_chunk_size(9), default_chunk_size(3)
    (8, 5, 3)
    """
    n = int(n)
    if n < 1:
        raise DualgpuError(f"default_chunk_size: expected at least 1 direction; got {n}.")
    limit = max(1, min(int(limit), MAX_LANES))
    chunks = -(-n // limit)
    return -(-n // chunks)


def tile_lanes(n, backend, limit=None):
    """Return the lanes per tile for ``n`` directions on ``backend``.

    The fewest tiles of at most ``limit`` lanes (default :data:`TILE_LANES`),
    spread evenly so that the last tile wastes the fewest lanes.
    """
    limit = limit or TILE_LANES.get(backend) or 64
    return default_chunk_size(n, limit)


def driver_tiles(n, backend):
    """Return ``(unit, hint)`` for ``n`` directions: runs of f carry a multiple of ``unit``
    lanes; ``hint`` is the tile kernels must use (0: each kernel takes its own among
    :data:`TILE_CANDIDATES`, by its profile)."""
    candidates = TILE_CANDIDATES.get(backend) or ()
    fitting = [c for c in candidates if 16 * n >= TUNE_MIN_DIRECTIONS * c]
    if len(candidates) > 1 and n >= TUNE_MIN_DIRECTIONS and fitting:
        return max(fitting), 0
    tile = tile_lanes(n, backend)
    return tile, tile


def batch_lanes(n, tile, bytes_per_lane, budget=None):
    """Return the lanes of one run of f: a multiple of ``tile``, at least ``tile``.

    All ``n`` directions (rounded up to whole tiles) when they fit in
    ``budget`` bytes (default :data:`BATCH_BYTES`) at ``bytes_per_lane``;
    otherwise as many whole tiles as fit, spread evenly over the runs.
    """
    budget = BATCH_BYTES if budget is None else budget
    tiles = -(-int(n) // int(tile))
    fit = max(1, int(budget // max(bytes_per_lane * tile, 1)))
    runs = -(-tiles // fit)
    return -(-tiles // runs) * tile


#: False: runs of f carry as many lanes as :data:`BATCH_BYTES` allows, never fewer to fit
#: the cache (:func:`cache_lanes`; measured on the loaded 2-core VM, issue 41: the 1000-cell
#: heat Jacobian took 0.6-1.17x the time of one run of every lane, which can use both cores
#: where the cache-sized runs' launches, 30 us each, stay serial).
FIT_CACHE = True

#: Arrays the size of the differentiated inputs that one step of a memory-bound f touches
#: (a stencil reads one state and writes the next): the working set of a run of L lanes is
#: about ``TOUCHED_ARRAYS * input_bytes * (1 + L)``, values and partials (see
#: :func:`cache_lanes`).
TOUCHED_ARRAYS = 2

#: The L2 cache size assumed where it cannot be read (Linux sysfs): 1 MiB per core, the
#: size on the AMD EPYC VMs measured here (recent x86 cores have 1-2 MiB).
L2_FALLBACK_BYTES = 1 << 20

#: Where Linux describes the first CPU's caches (``level``, ``type``, ``size`` per index).
CACHE_SYSFS = "/sys/devices/system/cpu/cpu0/cache"


def _size_bytes(text):
    """``"1024K"`` -> 1048576 (sysfs cache sizes: K, M or G suffix, or bytes)."""
    text = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(text[:-1] if scale > 1 else text) * scale


@functools.lru_cache(maxsize=None)
def l2_cache_bytes(root=CACHE_SYSFS):
    """Return the L2 cache size of one core in bytes (:data:`L2_FALLBACK_BYTES` where
    ``root``, Linux's sysfs cache description, cannot be read)."""
    for index in sorted(glob.glob(os.path.join(root, "index*"))):
        try:
            with open(os.path.join(index, "level")) as fh:
                level = int(fh.read())
            with open(os.path.join(index, "type")) as fh:
                kind = fh.read().strip()
            with open(os.path.join(index, "size")) as fh:
                size = _size_bytes(fh.read())
        except (OSError, ValueError):
            continue
        if level == 2 and kind in ("Unified", "Data") and size > 0:
            return size
    return L2_FALLBACK_BYTES


def cache_lanes(n, unit, input_bytes, cache_bytes=None):
    """Return the lanes of one run of f that keep its working set in the L2 cache, or None.

    The working set of a run of L lanes is taken as ``TOUCHED_ARRAYS * input_bytes * (1 +
    L)`` (:data:`TOUCHED_ARRAYS`: values and L partials of each array f touches, arrays
    the size of the differentiated inputs). Returns the most lanes, a multiple of ``unit``,
    whose working set fits ``cache_bytes`` (default :func:`l2_cache_bytes`), spread
    evenly over the runs that ``n`` directions need; None when not even ``unit`` lanes
    fit (the runs stream from memory whatever their size: then the fewest runs are best)
    or :data:`FIT_CACHE` is False.

    Examples
    --------
    >>> cache_lanes(1000, 32, 8000, cache_bytes=2**20)   # 64 lanes fit (1 MiB): 16 runs
    64
    >>> cache_lanes(100, 32, 8000, cache_bytes=2**20)    # 4 tiles in 2 runs
    64
    >>> cache_lanes(1000, 8, 400, cache_bytes=2**20)     # everything fits: one run
    1000
    """
    if not FIT_CACHE:
        return None
    cache_bytes = l2_cache_bytes() if cache_bytes is None else int(cache_bytes)
    per_array = TOUCHED_ARRAYS * max(int(input_bytes), 1)
    tiles_fit = (cache_bytes // per_array - 1) // int(unit)
    if tiles_fit < 1:
        return None
    tiles = -(-int(n) // int(unit))
    runs = -(-tiles // tiles_fit)
    return -(-tiles // runs) * int(unit)


def launch_tile(lanes, preferred, hint=0, max_lanes=64):
    """Return the lanes per tile for a launch whose duals have ``lanes`` lanes.

    The driver's ``hint`` (its chunk size) when it divides ``lanes``; else
    ``lanes`` itself up to ``preferred``; else the largest divisor of ``lanes``
    not above ``preferred``, unless that is below half of it, when one tile of
    all lanes is used (if at most ``max_lanes``).

    Examples
    --------
    >>> launch_tile(1000, 8), launch_tile(20, 8), launch_tile(13, 8), launch_tile(12, 8, hint=3)
    (8, 5, 13, 3)
    """
    if hint and lanes % hint == 0:
        return hint
    if lanes <= preferred:
        return lanes
    tile = next(d for d in range(preferred, 0, -1) if lanes % d == 0)
    if 2 * tile < preferred and lanes <= max_lanes:
        return lanes
    return tile


def check_chunk_size(chunk_size, backend, fname):
    """Warn (:class:`ChunkSizeWarning`) if ``chunk_size`` exceeds the measured good range."""
    good = GOOD_TILE_LANES.get(backend)
    if good is not None and chunk_size > good:
        warnings.warn(
            f"{fname}: chunk_size={chunk_size} lanes per kernel is above the {good} measured to "
            f"be fast on the {backend!r} backend ({MEASURED[backend]}). Expect it to be slower "
            f"per direction; chunk_size=None picks {TILE_LANES.get(backend) or 'all'} there, and "
            "the driver still runs all directions in one pass when memory allows.",
            ChunkSizeWarning,
            stacklevel=_caller_level(),
        )


def _caller_level():
    """The ``stacklevel`` that points a warning at the first frame outside dualgpu."""
    import sys

    package = PACKAGE_DIR
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    return level
