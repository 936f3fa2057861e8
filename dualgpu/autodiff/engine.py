"""The engine of the forward-mode drivers: inputs, chunks of directions, runs of f, assembly.

The public drivers (:mod:`dualgpu.autodiff.api`: ``jvp``, ``jvp_batch``, ``jacfwd``,
``jacobian``), the sparse driver (:mod:`dualgpu.autodiff.sparse`) and the workers of an
executor (:mod:`dualgpu.distributed`) all run on this module; it imports none of
them. A *simulation function* ``f`` is ordinary Python that takes arrays and scalars, moves
arrays to the device with :mod:`dualgpu.cuda`, launches dualgpu kernels and returns host
results. The driver differentiates it without changes:

1. **seed** -- each differentiated array argument is passed to ``f`` as a host
   :class:`~dualgpu.DualArray` (a copy of the values, plus L seed lanes); each
   differentiated scalar as a :class:`~dualgpu.Dual`. Other float arrays stay
   plain: ``f``'s ``cuda.to_device`` turns them into zero-partial DualArrays,
   because ``f`` runs inside :func:`dualgpu.core._context.dual_allocation`.
2. **evaluate** -- one run of ``f`` per *batch* of L directions (see
   :func:`run_chunk`), by a *chunk runner*: :class:`LocalRunner` (a loop in this
   process, the default) or an executor's (:class:`dualgpu.autodiff.distributed.ExecutorRunner`);
3. **extract** -- the output partials of the batch are written straight into the
   result's final layout (:mod:`dualgpu.autodiff._results`): a dense Jacobian peaks at its own
   size. The result is allocated after the first run, when the output's shape is known,
   and refused with a clear error if it would not fit in the memory available;
4. repeat until every direction is done.

Every run of ``f`` gets fresh copies of every array reachable from its arguments
(positional, keyword, inside tuples, lists and dicts; :mod:`dualgpu.autodiff._protect`), so
an ``f`` that updates an argument in place changes neither the caller's data nor
the next run's. A non-finite derivative is refused with its source where it can
be told (:mod:`dualgpu.autodiff._non_finite`): non-finite inputs, a non-finite value, or an
infinite derivative factor.

Chunk size and batches
----------------------
Kernels run the lanes of a launch in *tiles* of N lanes. One run of f carries
L lanes, all directions when they fit the memory budget of
:func:`dualgpu.core.lanes.batch_lanes` (else as few runs as fit), so a Jacobian of n
directions costs about as many host steps as one run of f; on the cpu backend with
``chunk_size=None``, no more than keep the run's working set in the L2 cache
(:func:`dualgpu.core.lanes.cache_lanes`: 64 lanes for a 1000-cell stencil). The cpu backend
runs a launch's L / N tiles inside one compiled call, the GPU backend launches
once per tile. Runs for an executor's workers and derivatives nested in another
carry one tile each. ``chunk_size=None``: with many directions
(:data:`dualgpu.core.lanes.TUNE_MIN_DIRECTIONS`) L is a multiple of 16 or 32 and each
kernel takes the tile its profile asks for (compute-bound: 32 lanes with AVX, AVX2 or
AVX-512, 16 with SSE or NEON; memory-bound: 8; see
:mod:`dualgpu.backends.cpu.lane_model` and :data:`dualgpu.core.lanes.TILE_CANDIDATES`);
with few, N is the fewest tiles of at most :data:`dualgpu.core.lanes.TILE_LANES` lanes,
then the N that leaves the fewest padded lanes (ForwardDiff.jl's rule,
:func:`dualgpu.core.lanes.default_chunk_size`). A ``chunk_size`` sets N for every
kernel; any N from 1 to n and at most
:data:`dualgpu.compiled.types.MAX_LANES` works, more than the backend's measured
good range warns (:class:`dualgpu.core.lanes.ChunkSizeWarning`). Memory does not
grow with the number of time steps (forward mode). The last run reuses the
same L with zero-padded lanes, so kernels compile once per tile size.
"""
import numbers
import threading

import numpy as np

from dualgpu.autodiff import _non_finite
from dualgpu.autodiff._progress import progress_bar
from dualgpu.autodiff._protect import protect_call
from dualgpu.autodiff._results import JacobianBlocks
from dualgpu.compiled.types import MAX_LANES
from dualgpu.core import lanes as _lanes
from dualgpu.core import selection
from dualgpu.core._context import active_levels, dual_allocation
from dualgpu.core.dual import Dual
from dualgpu.core.dualarray import DualArray
from dualgpu.core.nested import MAX_GPU_DUAL_FLOATS, MAX_TAG, pack_output, seed, unpack
from dualgpu.core.object_arrays import from_object_array, is_object_array
from dualgpu.errors import DualgpuError
from dualgpu.host import buffers as host_buffers
from dualgpu.porting import trace

__all__ = [
    "Chunk", "LocalRunner", "UserFunctionWrapper", "MAX_DRIVER_DEPTH", "PROGRESS_MIN_CHUNKS",
    "check_depth", "dense_jacobian", "plan_chunks", "run_chunk", "push_forward",
]

#: With ``progress=None`` a tqdm bar is shown on an interactive terminal or in a notebook
#: when there are more chunks than this (see :mod:`dualgpu.autodiff._progress`).
PROGRESS_MIN_CHUNKS = 4
#: Largest number of array dimensions a differentiated argument may have.
_MAX_NDIM = 3

# ---------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------
class _Input:
    """One differentiated argument: where its directions sit and how it is seeded."""

    __slots__ = ("position", "kind", "value", "shape", "size", "dtype", "offset",
                 "values_buffer", "lanes_buffer", "weak", "zeroed")

    def __init__(self, position, kind, value, dtype, offset, weak=False):
        self.weak = weak  # a Python float: seeded as a weak Dual (NEP 50 promotion)
        self.position = position
        self.kind = kind  # "array" or "scalar"
        self.value = value  # private copy (array) or numpy scalar
        self.shape = tuple(np.shape(value)) if kind == "array" else ()
        self.size = int(np.prod(self.shape)) if kind == "array" else 1
        self.dtype = dtype
        self.offset = offset
        self.values_buffer = None
        self.lanes_buffer = None
        self.zeroed = False  # lanes_buffer is all zero (just allocated)

    def __getstate__(self):
        # shipped to workers without the seed buffers (each worker allocates its own)
        state = {name: getattr(self, name) for name in self.__slots__}
        state["values_buffer"] = state["lanes_buffer"] = None
        state["zeroed"] = False
        return None, state

    def fresh(self):
        """Return a copy of this input without buffers (one per thread that runs chunks)."""
        other = object.__new__(_Input)
        for name, value in self.__getstate__()[1].items():
            setattr(other, name, value)
        return other

    def allocate(self, lanes):
        """Make the reused seed buffers for ``lanes`` lanes."""
        self.lanes_buffer = np.zeros((lanes, self.size), self.dtype)
        self.zeroed = True
        if self.kind == "array":
            self.values_buffer = np.empty(self.shape, self.dtype)

    def argument(self):
        """The argument passed to ``f`` for the current contents of the lane buffer."""
        levels = active_levels()
        if levels:  # inside another driver's f: duals of duals (see dualgpu.core.nested)
            lanes = self.lanes_buffer.shape[0]
            seeds = self.lanes_buffer[:, 0] if self.kind == "scalar" else \
                self.lanes_buffer.reshape((lanes,) + self.shape)
            return seed(self.value, seeds, levels, self.dtype)
        if self.kind == "scalar":
            return Dual(self.value, self.lanes_buffer[:, 0], dtype=self.dtype, weak=self.weak)
        # fresh values every chunk: f may have written into the previous one
        np.copyto(self.values_buffer, self.value)
        lanes = self.lanes_buffer.shape[0]
        return DualArray(self.values_buffer, self.lanes_buffer.reshape((lanes,) + self.shape))

    def where(self, flat):
        """Describe direction ``flat`` of this input for messages."""
        if self.kind == "scalar":
            return f"argument {self.position} (scalar)"
        index = ", ".join(map(str, np.unravel_index(flat, self.shape)))
        return f"argument {self.position}[{index}]"


def _is_python_float(arg):
    """A Python float (not a numpy float64, which numpy's promotion treats as strong)."""
    return isinstance(arg, float) and not isinstance(arg, np.floating)


def _classify(arg):
    """Return ``(kind, value, dtype)`` for a float argument, or ``(None, reason, None)``."""
    if isinstance(arg, (bool, np.bool_)):
        return None, "a bool", None
    if isinstance(arg, DualArray) or isinstance(arg, Dual):
        if active_levels() and arg.tag < len(active_levels()):
            # a dual of an enclosing driver, differentiated again here (second order)
            if isinstance(arg, Dual):
                return "scalar", arg, np.dtype(arg.dtype)
            if arg.ndim > _MAX_NDIM:
                return None, f"a DualArray of {arg.ndim} dimensions {arg.shape}", None
            return "array", arg.copy_to_host() if arg.is_device else arg.copy(), np.dtype(
                arg.dtype)
        return None, f"a {type(arg).__name__} (the driver seeds its own)", None
    if isinstance(arg, float):
        return "scalar", np.float64(arg), np.dtype(np.float64)
    if isinstance(arg, np.floating):
        if arg.dtype not in (np.float32, np.float64):
            return None, f"a numpy {arg.dtype} scalar", None
        return "scalar", arg, arg.dtype
    if isinstance(arg, np.ndarray):
        if arg.dtype not in (np.float32, np.float64):
            return None, f"an array of dtype {arg.dtype}", None
        if arg.ndim == 0:
            return "scalar", arg.dtype.type(arg[()]), arg.dtype
        if arg.ndim > _MAX_NDIM:
            return None, f"an array of {arg.ndim} dimensions {arg.shape}", None
        if arg.size == 0:
            return None, f"an empty array (shape {arg.shape}: nothing to differentiate)", None
        return "array", np.array(arg, copy=True, order="C"), arg.dtype
    if hasattr(arg, "copy_to_host"):
        return None, f"a device array ({type(arg).__name__})", None
    if isinstance(arg, numbers.Integral):
        return None, f"an int ({arg!r})", None
    return None, f"{type(arg).__name__}", None


#: Drivers that may run nested: a derivative inside another (second order, e.g. hessian).
MAX_DRIVER_DEPTH = 2


def check_depth(fname):
    """Refuse a driver started while ``MAX_DRIVER_DEPTH`` others run (a third derivative)."""
    depth = len(active_levels())
    if depth >= MAX_DRIVER_DEPTH:
        raise DualgpuError(
            f"{fname}: called while {depth} derivatives run around it, this is a derivative "
            f"of order {depth + 1} (e.g. jacobian of hessian, jacfwd(jacfwd(jacfwd(f))), or "
            f"ensemble_jacobian inside hessian). dualgpu nests derivatives to second order "
            f"({MAX_DRIVER_DEPTH} drivers): its nested duals, their kernels and its host numpy "
            "support two levels. Fix: take the third derivative by central differences of "
            "the second, e.g. (dualgpu.hessian(f, x + h * e_k) - dualgpu.hessian(f, x - h * "
            "e_k)) / (2 * h) for each input direction e_k."
        )


def _normalize_argnums(argnums, nargs, fname):
    single = isinstance(argnums, (numbers.Integral,)) and not isinstance(argnums, bool)
    items = (argnums,) if single else argnums
    try:
        items = tuple(items)
    except TypeError:
        items = None
    if not items or any(isinstance(a, bool) or not isinstance(a, numbers.Integral) for a in items):
        raise DualgpuError(
            f"{fname}: argnums must be an int or a non-empty tuple of ints (positions of the "
            f"arguments to differentiate); got {argnums!r}. Fix: e.g. argnums=0 or argnums=(0, 2)."
        )
    positions = []
    for a in items:
        if not -nargs <= a < nargs:
            raise DualgpuError(
                f"{fname}: argnums={argnums!r} points at argument {a}, but f was called with "
                f"{nargs} positional argument(s) (valid: 0..{nargs - 1} or negative from the "
                "end). Fix: pass the argument positionally or change argnums."
            )
        positions.append(int(a) % nargs)
    if len(set(positions)) != len(positions):
        raise DualgpuError(f"{fname}: argnums={argnums!r} names an argument twice.")
    return single, positions


def _classify_complex(arg, p, fname):
    """``(kind, value, dtype)`` of a complex argument for ``holomorphic=True``, or an error."""
    if isinstance(arg, (complex, np.complexfloating)) and not isinstance(arg, np.ndarray):
        value = np.complex128(arg) if isinstance(arg, complex) else arg
        return "scalar", value, value.dtype
    if isinstance(arg, np.ndarray) and arg.dtype.kind == "c" and 1 <= arg.ndim <= _MAX_NDIM \
            and arg.size:
        return "array", np.array(arg, copy=True, order="C"), arg.dtype
    what = f"dtype {np.asarray(arg).dtype}" if hasattr(arg, "dtype") or isinstance(
        arg, (int, float)) else type(arg).__name__
    raise DualgpuError(
        f"{fname}(holomorphic=True): argument {p} is {what}; holomorphic differentiation takes "
        f"complex arguments (complex64/complex128 arrays of 1 to {_MAX_NDIM} dimensions, or "
        "complex scalars), as JAX's does. Fix: pass x.astype(np.complex128), or leave "
        "holomorphic out for a real argument.")


def _complex_input(arg):
    """True for a complex number or array (not a dual; a ragged list is not one)."""
    if isinstance(arg, (Dual, DualArray)):
        return False
    if isinstance(arg, (complex, np.complexfloating, np.ndarray)):
        return np.iscomplexobj(arg)
    try:
        return np.iscomplexobj(np.asarray(arg))
    except (ValueError, TypeError):  # a list of arrays of several shapes
        return False


def _make_inputs(args, positions, fname, holomorphic=False):
    check_depth(fname)
    inputs = []
    offset = 0
    for p in positions:
        if holomorphic:
            kind, value, dtype = _classify_complex(args[p], p, fname)
            inputs.append(_Input(p, kind, value, dtype, offset))
            offset += inputs[-1].size
            continue
        kind, value, dtype = _classify(args[p])
        if kind is None and _complex_input(args[p]):
            raise DualgpuError(
                f"{fname}: argument {p} is complex ({value}); dualgpu differentiates with "
                "respect to real inputs, as JAX does by default. Fix (JAX's convention for "
                "complex inputs): pass the real and imaginary parts as two real arguments, "
                "e.g. jacobian(lambda re, im: f(re + 1j * im), z.real, z.imag, argnums=(0, 1)); "
                "for a holomorphic f, df/dz is the block of the real part (and 1j times it the "
                "block of the imaginary part), or pass holomorphic=True. The outputs may be "
                "complex: their Jacobian is complex.")
        if kind is None and isinstance(args[p], (tuple, list)) and any(
                np.ndim(item) or isinstance(item, (tuple, list, Dual, DualArray))
                for item in args[p]):  # (a list of numbers: the message below, np.asarray)
            raise DualgpuError(
                f"{fname}: argument {p} is a {type(args[p]).__name__} of "
                f"{len(args[p])} holding arrays; f's arguments are passed one by one, as in "
                "JAX (dualgpu.jacobian(f, x, y, argnums=(0, 1)) differentiates f(x, y) with "
                "respect to x and y). Fix: unpack the tuple (f, *args), or pass one array "
                "(np.asarray(...)) if f takes one."
            )
        if kind is None:
            raise DualgpuError(
                f"{fname}: argument {p} is {value}; expected a float32/float64 array of 1 to "
                f"{_MAX_NDIM} dimensions or a float scalar (Python float, numpy float) to "
                "differentiate. Fix: remove it from argnums, or pass floats (e.g. "
                "np.asarray(x, dtype=np.float64), or 1.0 instead of 1)."
            )
        inputs.append(_Input(p, kind, value, dtype, offset, weak=_is_python_float(args[p])))
        offset += inputs[-1].size
    return inputs


class _Tiles(tuple):
    """``(unit, hint)`` (see :func:`_check_chunk_size`); ``fit_cache``: the driver chose
    them, so it also picks the lanes per run of f that fit the L2 cache (cpu backend)."""

    fit_cache = False


def _check_chunk_size(chunk_size, n, fname):
    """Return ``(unit, hint)``: runs of f carry a multiple of ``unit`` lanes, kernels use
    tiles of ``hint`` lanes (0: their own choice); the user's chunk_size is both (checked),
    and then runs of f carry as many lanes as memory allows (no cache fitting)."""
    name = selection.backend()
    if chunk_size is None:
        unit, hint = _lanes.driver_tiles(n, name)
        tiles = _Tiles((min(unit, MAX_LANES), min(hint, MAX_LANES)))
        tiles.fit_cache = name == "cpu"
        return tiles
    valid = isinstance(chunk_size, numbers.Integral) and not isinstance(chunk_size, bool)
    if not valid or not 1 <= chunk_size <= min(n, MAX_LANES):
        raise DualgpuError(
            f"{fname}: chunk_size={chunk_size!r}; expected an int from 1 to "
            f"{min(n, MAX_LANES)} (at most the {n} input direction(s) and at most "
            f"dualgpu.compiled.types.MAX_LANES={MAX_LANES} lanes). Fix: pass chunk_size=None "
            f"for the default ({min(_lanes.tile_lanes(n, name), MAX_LANES)} here) or a value in "
            "range."
        )
    _lanes.check_chunk_size(int(chunk_size), name, fname)
    return int(chunk_size), int(chunk_size)


# ---------------------------------------------------------------------------
# outputs
# ---------------------------------------------------------------------------
def _to_numpy(array):
    if hasattr(array, "copy_to_host") and not isinstance(array, np.ndarray):
        array = array.copy_to_host()
    return np.array(array, copy=True)  # HostArray -> plain ndarray


def _host_view(array):
    """``array`` on the host as a plain ndarray: a device array copied, a host array viewed.

    For partials that are stored in the result before f runs again (a local runner):
    each copy of a 10^6-cell JVP's tangent costs about 1% of the JVP.
    """
    if hasattr(array, "copy_to_host") and not isinstance(array, np.ndarray):
        return np.asarray(array.copy_to_host()).view(np.ndarray)
    return np.asarray(array).view(np.ndarray)


def _unpack(result, lanes, fname, levels=(), views=False):
    """Return ``(is_tuple, [(values, partials or None), ...])`` of one run of f.

    Inside another driver's f (a nested derivative: ``levels``, the lane counts of the
    enclosing drivers, is not empty) values and partials are the duals of the enclosing
    drivers packed into a trailing axis (:func:`dualgpu.core.nested.pack`).
    ``views``: a DualArray's partials are viewed, not copied (see :func:`_host_view`); only
    for a caller that stores them before f runs again. Values are always copied: they are
    the caller's result.
    """
    is_tuple = isinstance(result, (tuple, list))
    items = list(result) if is_tuple else [result]
    unpacked = []
    for i, item in enumerate(items):
        packed = None
        if levels:
            packed = pack_output(item, levels, lanes)
        if packed is None and is_object_array(item):  # np.array([dual, dual]) as f's result
            item = from_object_array(item, f"{fname}: output {i} of f")
        if packed is not None:
            values, partials = packed
        elif isinstance(item, DualArray) and views:
            values, partials = _to_numpy(item.values), _host_view(item.partials)
        elif isinstance(item, DualArray):
            values, partials = _to_numpy(item.values), _to_numpy(item.partials)
        elif isinstance(item, Dual):
            values, partials = np.asarray(item.value), np.array(item.partials, copy=True)
        else:
            try:
                values = _to_numpy(item)
            except Exception:
                values = None
            if values is None or values.dtype.kind not in "biuf":
                raise DualgpuError(
                    f"{fname}: output {i} of f is {type(item).__name__}; expected a DualArray, "
                    "a Dual, a number or an array (or a tuple of them)."
                )
            partials = None
        if partials is not None and partials.shape[0] != lanes:
            raise DualgpuError(
                f"{fname}: output {i} of f has {partials.shape[0]} lanes; the driver seeded "
                f"{lanes}. Fix: let the driver allocate (dualgpu.cuda.to_device/device_array*) "
                "rather than building duals with a fixed lane count inside f."
            )
        unpacked.append((values, partials))
    if all(p is None for _, p in unpacked):
        got = ", ".join(f"{type(v).__name__} of shape {v.shape}" for v, _ in unpacked)
        raise DualgpuError(
            f"{fname}: the output of f does not depend on the seeded inputs through dual "
            f"arithmetic: expected a DualArray or a Dual (or a tuple holding one); got {got}. "
            "This happens when f converts to numpy or float (np.asarray(u), float(x), "
            "u.values, .value), or allocates with numba.cuda instead of dualgpu.cuda. Fix: "
            "keep the computation in dualgpu.cuda arrays and kernels and return "
            "u.copy_to_host()."
        )
    return is_tuple, unpacked


def _progress_bar(n_chunks, progress, desc):
    return progress_bar(n_chunks, progress, desc, unit="chunk", minimum=PROGRESS_MIN_CHUNKS)


class Chunk:
    """One run of f: directions ``start .. start + count - 1`` seeded in ``lanes`` lanes.

    ``tile`` is the lanes per kernel tile the driver asks for (a divisor of
    ``lanes``), or 0 when each kernel picks its own; lanes beyond ``count`` are
    zero. Made by :func:`plan_chunks`; run by :func:`run_chunk` (a chunk runner, local or
    an executor's, calls it once per chunk).
    """

    __slots__ = ("index", "start", "count", "lanes", "tile", "wide")

    def __init__(self, index, start, count, lanes, tile, wide=False):
        self.index, self.start, self.count, self.lanes, self.tile = index, start, count, lanes, tile
        self.wide = wide  # more lanes than one tile: a derivative nested in f must re-plan

    def __repr__(self):
        return (f"Chunk({self.index}: directions {self.start}..{self.start + self.count - 1}, "
                f"{self.lanes} lanes in tiles of {self.tile})")


def plan_chunks(n_directions, tiles, inputs, narrow=False):
    """Return the :class:`Chunk` list covering ``n_directions`` (see :mod:`dualgpu.core.lanes`).

    ``tiles`` is ``(unit, hint)`` from :func:`dualgpu.core.lanes.driver_tiles` (or
    the user's chunk size twice): every run carries a multiple of ``unit`` lanes,
    as many as the memory budget allows, or exactly ``unit`` when ``narrow``
    (chunks for an executor's workers, and derivatives nested in another). Where the
    driver chose the tiles on the cpu backend (``tiles.fit_cache``), no more lanes than
    keep a run's working set in the L2 cache (:func:`dualgpu.core.lanes.cache_lanes`).
    """
    unit, hint = tiles
    if narrow:
        lanes = unit
    else:
        input_bytes = sum(item.size * item.dtype.itemsize for item in inputs)
        lanes = _lanes.batch_lanes(n_directions, unit, _lanes.LIVE_ARRAYS * input_bytes)
        fit = _lanes.cache_lanes(n_directions, unit, input_bytes) if getattr(
            tiles, "fit_cache", False) else None
        if fit is not None:  # a memory-bound f then runs from the L2 cache
            lanes = min(lanes, fit)
    return [
        Chunk(k, start, min(lanes, n_directions - start), lanes, hint, lanes > unit)
        for k, start in enumerate(range(0, n_directions, lanes))
    ]


#: The runs of f in progress in this thread, outermost first: True for a run that
#: carries more lanes than one tile (a derivative nested inside needs narrow runs).
_RUNS = threading.local()


class _NarrowRuns(BaseException):
    """Raised by a driver nested in a wide run of another: the outer one must re-plan.

    A BaseException, so that an ``except Exception`` in f does not swallow it.
    """


def _run_chunk(f, args, kwargs, inputs, lanes, start, count, fill, fname, tile=0, wide=False,
               views=False):
    """Run f once on directions ``start .. start+count-1``, zero-padded to ``lanes`` lanes.

    ``fill(inputs, start, count)`` writes the tangents of those directions into the
    inputs' lane buffers (allocated for ``lanes``); the other lanes stay zero. Kernels
    run the lanes in tiles of ``tile`` (0: their own choice); ``wide``: the run carries
    more than one tile (see :func:`plan_chunks`). Returns ``(is_tuple,
    [(values, partials or None), ...])`` of f's outputs (see :func:`_unpack`). This is
    one task of the distributed driver (:mod:`dualgpu.distributed`). ``views``:
    the partials may be views of f's outputs (see :func:`_unpack`).
    """
    for item in inputs:
        if not item.zeroed:  # freshly allocated buffers are zero already
            item.lanes_buffer.fill(0)
        item.zeroed = False
    fill(inputs, start, count)
    seeded = {item.position for item in inputs}
    # copies of every array reachable from the arguments: f may write into them; neither
    # the caller nor the next chunk may see that
    call_args, call_kwargs = protect_call(
        [None if p in seeded else a for p, a in enumerate(args)], kwargs)
    call_args = list(call_args)
    for item in inputs:
        call_args[item.position] = item.argument()
    levels = active_levels()  # the enclosing drivers, if this one is nested
    runs = getattr(_RUNS, "wide", ())
    _RUNS.wide = runs + (wide,)
    try:
        with dual_allocation(lanes, tile=tile), host_buffers.scope() as buffers:
            # captured time loops, traced runs (cpu backend): dualgpu.porting.capture, trace
            result = trace.run(f, fname, call_args, call_kwargs)
            if buffers is not None:  # host numpy buffers that kernels wrote duals into
                result = buffers.resolve(result, fname)
    finally:
        _RUNS.wide = runs
    return _unpack(result, lanes, fname, levels, views)


def run_chunk(f, args, kwargs, inputs, chunk, fill, fname, views=False):
    """Run f once for ``chunk``; return ``(is_tuple, [(values, partials or None), ...])``.

    ``fill(inputs, start, count)`` writes the tangents of directions ``start ..
    start + count - 1`` into the inputs' lane buffers (allocated here for
    ``chunk.lanes`` lanes; the rest stays zero). Each output's partials have
    ``chunk.lanes`` lanes, of which the first ``chunk.count`` are directions.
    """
    for item in inputs:
        if item.lanes_buffer is None or item.lanes_buffer.shape[0] != chunk.lanes:
            item.allocate(chunk.lanes)
    return _run_chunk(f, args, kwargs, inputs, chunk.lanes, chunk.start, chunk.count, fill,
                      fname, chunk.tile, chunk.wide, views)


class _Assembly:
    """Checks each chunk's outputs and hands its partials to ``sink`` in direction order.

    ``sink`` (see :mod:`dualgpu.autodiff._results`) allocates the result after the first chunk,
    once it has checked that it fits, and receives each chunk's partials in their final
    layout. ``sources()`` names the non-finite inputs when a derivative is not finite.
    """

    def __init__(self, where, fname, sink, sources):
        self.where = where
        self.fname = fname
        self.sink = sink
        self.sources = sources
        self.is_tuple = self.values = self.layouts = None

    def add(self, start, count, chunk_tuple, unpacked):
        """Check one chunk's outputs against the first chunk's and store its ``count`` lanes."""
        fname = self.fname
        if self.values is None:
            self.is_tuple = chunk_tuple
            self.values = [v for v, _ in unpacked]
            self.layouts = [None if p is None else (p.shape[1:], p.dtype) for _, p in unpacked]
            self.sink.allocate(self.values, self.layouts, fname)
        elif chunk_tuple != self.is_tuple or len(unpacked) != len(self.values):
            raise DualgpuError(f"{fname}: f returned differently shaped outputs between runs.")
        for o, (_, p) in enumerate(unpacked):
            if p is None:
                continue
            if self.layouts[o] is None or p.shape[1:] != self.layouts[o][0]:
                raise DualgpuError(
                    f"{fname}: output {o} of f changed between runs; f must be deterministic."
                )
            used = p[:count]
            if not _all_finite(used):
                _raise_non_finite(used, o, start, self.values[o], self.where, fname,
                                  self.sources())
            self.sink.store(o, start, count, used)


class UserFunctionWrapper:
    """Base of dualgpu's callables that wrap a user's function ``f`` (``jacfwd``'s
    :class:`~dualgpu.autodiff.api.JacobianOf`): an executor that cannot pickle one names
    the user's function inside (its ``f``) in the message."""

    f = None


class LocalRunner:
    """The default chunk runner: the chunks one after another in this thread, with a bar.

    A *chunk runner* is called as ``runner(f, args, kwargs, inputs, chunks, fill, where,
    progress, fname, assembly)``; it runs every chunk (:func:`run_chunk`) and hands each
    result to ``assembly.add(start, count, is_tuple, unpacked)`` in chunk order. Its
    ``local`` attribute is False for a runner that sends the chunks to other workers
    (:class:`dualgpu.autodiff.distributed.ExecutorRunner`): each run then carries one tile,
    and a derivative nested inside another's f refuses it.

    Examples
    --------
    >>> LocalRunner().local
    True
    """

    local = True

    def __call__(self, f, args, kwargs, inputs, chunks, fill, where, progress, fname, assembly):
        bar = _progress_bar(len(chunks), progress, fname)
        try:
            for chunk in chunks:
                # views: the partials are stored before the next run can overwrite them
                result = run_chunk(f, args, kwargs, inputs, chunk, fill, fname, views=True)
                assembly.add(chunk.start, chunk.count, *result)
                if bar is not None:
                    bar.update(1)
        finally:
            if bar is not None:
                bar.close()

    def __repr__(self):
        return "LocalRunner()"


_LOCAL = LocalRunner()


def push_forward(f, args, kwargs, inputs, n_directions, tiles, fill, where, progress, fname,
                 sink, runner=None, tangents=()):
    """Run f once per chunk of directions (see :func:`plan_chunks` and :func:`run_chunk`).

    ``fill(inputs, start, count)`` writes the tangents of directions ``start .. start+count-1``
    into the inputs' lane buffers (the rest stays zero). ``sink`` (see
    :mod:`dualgpu.autodiff._results`) receives the partials of all directions in their final
    layout. Returns ``is_tuple`` and the output values. ``runner`` runs the chunks
    (:class:`LocalRunner` by default; an executor's runs them as tasks on its workers,
    :mod:`dualgpu.distributed`), and they are assembled in the same order.
    ``tangents``: the jvp tangents, for messages.
    """
    runner = _LOCAL if runner is None else runner
    seeded = {item.position for item in inputs}

    def sources():
        positional = [a if item is None else item.value
                      for item, a in zip(_by_position(inputs, len(args)), args)]
        return _non_finite.non_finite_inputs(positional, kwargs, seeded, tangents)

    assembly = _Assembly(where, fname, sink, sources)
    levels = active_levels()
    if levels:
        if getattr(_RUNS, "wide", ())[-1:] == (True,):
            raise _NarrowRuns()
        _check_nested(levels, tiles[0], runner, fname)
    narrow = bool(levels) or not runner.local
    try:
        runner(f, args, kwargs, inputs, plan_chunks(n_directions, tiles, inputs, narrow), fill,
               where, progress, fname, assembly)
        return assembly.is_tuple, assembly.values
    except _NarrowRuns:
        if narrow:
            raise
    # a derivative nested in f needs runs of one tile: start again with those
    assembly = _Assembly(where, fname, sink, sources)
    runner(f, args, kwargs, inputs, plan_chunks(n_directions, tiles, inputs, True), fill, where,
           progress, fname, assembly)
    return assembly.is_tuple, assembly.values


def _check_nested(levels, lanes, runner, fname):
    """A driver called inside another one's f: refuse what nesting does not support."""
    if not runner.local:
        raise DualgpuError(
            f"{fname}: executor= inside another derivative (this driver runs inside another "
            "driver's f) is not supported; give the executor to the outermost driver."
        )
    if len(levels) >= MAX_TAG:
        raise DualgpuError(f"{fname}: derivatives nested more than {MAX_TAG} deep.")
    floats = int(np.prod([1 + n for n in levels + (lanes,)]))
    if selection.backend() == "cuda" and floats > MAX_GPU_DUAL_FLOATS:
        sizes = " x ".join(f"(1 + {n})" for n in levels + (lanes,))
        raise DualgpuError(
            f"{fname}: a nested dual here holds {sizes} = {floats} floats, more than "
            f"dualgpu.core.nested.MAX_GPU_DUAL_FLOATS = {MAX_GPU_DUAL_FLOATS} that fit a GPU "
            "thread's registers with a few duals live at once. Fix: smaller chunk sizes for "
            "the two derivatives (chunk_size=4 gives 25 floats), or raise that limit if you "
            "have measured that your kernel does not spill."
        )


class _UnitSeeds:
    """Seeds of a Jacobian: direction d is the unit vector of entry d of the inputs."""

    def __call__(self, inputs, start, count):
        for item in inputs:
            lo = max(start, item.offset)
            hi = min(start + count, item.offset + item.size)
            if lo < hi:
                k = np.arange(lo, hi)
                item.lanes_buffer[k - start, k - item.offset] = 1


class _GivenSeeds:
    """Seeds given by the caller: ``seeds[i]`` holds input i's tangents, one row per direction."""

    def __init__(self, seeds):
        self.seeds = seeds

    def __call__(self, inputs, start, count):
        for item, given in zip(inputs, self.seeds):
            item.lanes_buffer[:count] = given[start:start + count]


def _by_position(inputs, nargs):
    """The differentiated input at each argument position (None elsewhere)."""
    at = {item.position: item for item in inputs}
    return [at.get(p) for p in range(nargs)]


def _all_finite(array):
    """True if no entry of ``array`` is NaN or infinite.

    A finite sum has no such entry (NaN and infinities carry through a sum), and
    summing allocates nothing; only a sum that overflows, or a real non-finite entry,
    pays for the elementwise test.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        if np.isfinite(np.sum(array)):
            return True
    return bool(np.all(np.isfinite(array)))


def _raise_non_finite(used, output, start, values, where, fname, sources):
    bad = ~np.isfinite(used.reshape(used.shape[0], -1))
    lane = int(np.argmax(bad.any(axis=1)))
    flat = int(np.argmax(bad[lane]))
    shape = used.shape[1:]
    index = list(map(int, np.unravel_index(flat, shape))) if shape else ""
    value = used.reshape(used.shape[0], -1)[lane, flat]
    primal = np.asarray(values).reshape(-1)[flat]
    raise DualgpuError(_non_finite.message(fname, value, output, index, primal,
                                           where(start + lane), sources))


def _output_values(values, is_tuple, levels=()):
    if levels:
        out = [_structured(v, levels) for v in values]
    else:
        out = [v[()] if v.ndim == 0 else v for v in values]
    return tuple(out) if is_tuple else out[0]


def _structured(array, levels, axis=-1):
    """Inside a nested derivative: the packed duals of the enclosing drivers (along ``axis``)
    back as a Dual or DualArray (:func:`dualgpu.core.nested.unpack`); else ``array`` itself."""
    if not levels:
        return array
    return unpack(np.moveaxis(array, axis, -1), levels)


# ---------------------------------------------------------------------------
# the dense Jacobian (the API's jacobian and jacfwd; the sparse driver's validation)
# ---------------------------------------------------------------------------
def dense_jacobian(f, args, kwargs, argnums, chunk_size, progress, fname, runner=None,
                   holomorphic=False):
    """The dense Jacobian of ``f(*args, **kwargs)`` w.r.t. ``args[argnums]`` (see
    :func:`dualgpu.autodiff.api.jacobian`, which calls it); ``runner`` runs the chunks
    (:class:`LocalRunner` by default); ``holomorphic``: complex arguments, df/dz."""
    args = tuple(args)
    levels = active_levels()
    single, positions = _normalize_argnums(argnums, len(args), fname)
    inputs = _make_inputs(args, positions, fname, holomorphic)
    n = sum(item.size for item in inputs)
    tiles = _check_chunk_size(chunk_size, n, fname)

    def where(direction):
        for item in inputs:
            if item.offset <= direction < item.offset + item.size:
                return item.where(direction - item.offset)
        return f"direction {direction}"

    sink = JacobianBlocks(inputs)
    is_tuple, values = push_forward(
        f, args, kwargs, inputs, n, tiles, _UnitSeeds(), where, progress, fname, sink, runner)
    results = []
    for o, v in enumerate(values):
        if holomorphic and sink.result(o)[0].dtype.kind != "c":
            raise DualgpuError(
                f"{fname}(holomorphic=True): output {o} of f is real ({v.dtype}); a holomorphic "
                "function of complex arguments has complex outputs (JAX requires them too). "
                "Fix: return the complex quantity, or leave holomorphic out and differentiate "
                "the real and imaginary parts of the arguments as real arguments.")
        blocks = [_structured(block, levels, axis=v.ndim - 1) for block in sink.result(o)]
        results.append(blocks[0] if single else tuple(blocks))
    return tuple(results) if is_tuple else results[0]
