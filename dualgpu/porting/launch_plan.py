"""Launch plans: what a repeated launch of a :class:`~dualgpu.porting.kernel.Kernel` keeps.

``kernel[griddim, blockdim]`` returns a :class:`Configured` launcher. Its first launch with
given kinds of arguments runs the full launch path (checks, host buffers, captured duals,
tuple arguments, the backend's choice of loop shape, lane tiles and launcher), then asks the
kernel for a *plan*: everything that depends only on the kernel, the kinds of the
arguments, the launch configuration, the lanes and the backend, decided once. A later
launch with the same kinds finds the plan by a cheap :func:`signature` and only binds its
arguments and calls compiled code.

What a plan is keyed by (a plan is never reused where one of them differs):

- per argument, numba's own type fingerprint (``numba._dispatcher.compute_fingerprint``:
  the kind of scalar, or an array's dtype, ndim, layout and writability); for a DualArray
  those of its values and partials, its lanes and tag; for a Dual the type of its value,
  its partials' fingerprint, its lanes, tag and weak flag; a Python int also by whether it
  fits an int64 (numba types a larger one as uint64);
- the active backend, whether a driver's host-buffer registry is active, and the driver's
  tile of lanes (:func:`dualgpu.core._context.active_tile_lanes`).

Arguments of other kinds (nested or device-resident duals, tuples holding duals, object
arrays, lists, user classes) have no signature: such launches always take the full path.
What may change between launches with the same signature is checked by the plan at each
launch (the kernel's captured duals, array lengths against the grid, arrays that share
memory, the backend's own state); where it no longer holds, the plan steps aside and the
full path runs (and plans again).

Examples
--------
>>> import numpy as np
>>> signature((np.zeros(3), 1.0, 2)) == (signature((np.ones(3), 5.0, 7)))
True
>>> signature((np.zeros(3, np.float32),)) == signature((np.zeros(3),))
False
"""
import functools
import linecache
import math
from threading import get_ident

import numpy as np
from numba._dispatcher import compute_fingerprint as _fingerprint

from dualgpu.core._context import active_tile_lanes
from dualgpu.core.dual import Dual
from dualgpu.core.dualarray import DualArray
from dualgpu.core.selection import backend
from dualgpu.host.buffers import active
from dualgpu.porting import graphs as _graphs
from dualgpu.porting import tuple_arguments
from dualgpu.porting.capture import current as _capturing
from dualgpu.porting.capture import memo_key as _memo_key
from dualgpu.porting.capture import run_launch as _run_captured
from dualgpu.porting.captured_duals import captured_duals

__all__ = ["signature", "plan_key", "make_plan", "Configured", "configured",
           "configured_class", "MAX_PLANS", "ENABLED", "register_device_arrays"]

#: False: every launch takes the full path (for comparisons; see the tests and benchmarks).
ENABLED = True

#: Plans kept per configured launcher (beyond it, new kinds of arguments run unplanned).
MAX_PLANS = 64

_INT64 = (-(2 ** 63), 2 ** 63)


def _int(value):
    return b"i" if _INT64[0] <= value < _INT64[1] else b"I"


def _dual_array(array):
    partials = array.partials
    try:
        return (_fingerprint((array.values, partials)), len(partials), array.tag)
    except NotImplementedError:  # device members (nested duals raise again: no signature)
        return (_device(array.values), _device(partials), partials.shape[0], array.tag)


def _device(array):
    """A numba.cuda device array's kind: its numba type (cached on the array)."""
    return array._numba_type_


def _dual(dual):
    partials = dual.partials
    value = type(dual.value)
    if value is Dual:
        raise TypeError("nested dual")
    return ("s", value, _fingerprint(partials), partials.size, dual.tag, dual.weak)


_KINDS = {int: _int, DualArray: _dual_array, Dual: _dual}


def register_device_arrays():
    """Give numba.cuda's device arrays a signature (called when the cuda backend loads:
    importing numba.cuda is left to it)."""
    from numba.cuda.cudadrv.devicearray import DeviceNDArray

    _KINDS[DeviceNDArray] = _device


def signature(args):
    """The kinds of a launch's arguments as a hashable key, or None (no plan for these).

    Examples
    --------
    >>> signature((object(),)) is None  # a kind numba cannot type: no plan
    True
    """
    try:
        return tuple([_KINDS.get(type(a), _fingerprint)(a) for a in args])
    except Exception:  # noqa: BLE001 - any kind numba cannot fingerprint: no plan
        return None


def plan_key(args):
    """:func:`signature` with the context a plan depends on, or None."""
    kinds = signature(args)
    if kinds is None:
        return None
    return backend(), active() is None, active_tile_lanes(), kinds


def make_plan(kernel, name, griddim, blockdim, sharedmem, args):
    """A plan for launches like this one of ``kernel`` with ``args`` on backend ``name``,
    or None.

    Called after the launch ran the full path: None where a launch like it must take that
    path every time (the simulator, duals the kernel captures, tuples of duals, host
    arrays a driver may give partials, a backend without plans). The backend makes the
    plan, ``plan(args, stream)``, with the checks here in front (captured duals, enough
    threads for the arrays, as ``Kernel._check_coverage``): it launches and returns True,
    or returns False (having done nothing) where it does not hold for ``args``.
    """
    if name == "cudasim" or any(tuple_arguments.holds_duals(a) for a in args):
        return None
    watch = kernel._may_capture
    if watch and captured_duals(kernel):
        return None
    if active() is not None and any(
            type(a) is np.ndarray and a.dtype.kind in "fc" and 1 <= a.ndim <= 3 for a in args):
        return None  # the host-buffer registry looks at these at every launch
    make = getattr(kernel.compiled(name), "plan", None)
    if make is None:
        return None
    prologue = ""
    if "gridsize" not in kernel._source_names:  # grid-stride loops cover any size
        threads = math.prod(griddim) * math.prod(blockdim)
        checks = [f"len(args[{k}]{'.values' if isinstance(a, DualArray) else ''}) > "
                  f"{threads}" for k, a in enumerate(args) if getattr(a, "ndim", 0) >= 1]
        if checks:
            prologue += f"    if {' and '.join(checks)}:\n        return False\n"
    if watch:  # a captured global or closure cell that holds a Dual now: lifted
        prologue += "    if captured(porting_kernel):\n        return False\n"
    return make(griddim, blockdim, args, sharedmem, prologue=prologue,
                failed=functools.partial(kernel._launch_failed, name=name),
                namespace={"captured": captured_duals, "porting_kernel": kernel}) or None


class Configured:
    """``kernel[griddim, blockdim, stream, sharedmem]``: call it with the kernel's arguments.

    Keeps the plans of its launches (see the module docstring), at most :data:`MAX_PLANS`.
    Made by :func:`configured` for the kernel's number of arguments: its ``__call__`` looks
    up a captured loop's step with a key built inline (the step's Python is the loop's cost).
    """

    __slots__ = ("kernel", "griddim", "blockdim", "stream", "sharedmem", "plans", "memo_key")

    def __init__(self, kernel, griddim, blockdim, stream, sharedmem):
        self.kernel = kernel
        self.memo_key = _memo_key(len(kernel._params))  # (the recorder's key of a step)
        self.griddim = griddim
        self.blockdim = blockdim
        self.stream = stream
        self.sharedmem = sharedmem
        self.plans = {}

    def __call__(self, *args, **kwargs):  # (the class of each argument count has its own)
        call = configured_class(len(self.kernel._params)).__call__
        return call(self, *args, **kwargs)

    def __reduce__(self):  # (its class is made at run time: pickled as the kernel's launcher)
        return configured, (self.kernel, self.griddim, self.blockdim, self.stream,
                            self.sharedmem)

    def launch(self, args, kwargs):
        """Launch outside a captured loop: by a plan where one holds, else the full path."""
        kernel = self.kernel
        if kwargs or not ENABLED or active() is not None:
            # (kept host buffers: every launch substitutes them, which no plan does)
            return kernel.launch(self.griddim, self.blockdim, self.stream, self.sharedmem,
                                 *args, **kwargs)
        given = args
        if kernel.signatures:  # the full path converts them again (it takes ``given``)
            args = kernel.apply_signatures(args)
        try:  # signature(args), inline: this is every launch's path
            key = (backend(), True, active_tile_lanes(),  # (True: no kept buffers, above)
                   tuple([_KINDS.get(type(a), _fingerprint)(a) for a in args]))
        except Exception:  # noqa: BLE001 - a kind numba cannot fingerprint: no plan
            key = None
        else:
            plans = self.plans
            plan = plans.get(key)
            if plan:
                if plan(args, self.stream):
                    return None
                plans.pop(key, None)  # it no longer holds: the full path, then a new plan
            elif plan is not None or len(plans) >= MAX_PLANS:
                key = None
        kernel.launch(self.griddim, self.blockdim, self.stream, self.sharedmem, *given)
        if key is not None:
            try:
                plan = kernel.plan(key[0], self.griddim, self.blockdim, self.sharedmem, args)
            except Exception:  # noqa: BLE001 - the launch ran: launches like it stay unplanned
                plan = None
            self.plans[key] = plan or False
        return None

    def __repr__(self):
        return (f"<{self.kernel!r} launcher [{self.griddim}, {self.blockdim}, {self.stream}, "
                f"{self.sharedmem}]>")


#: ``Configured.__call__`` for kernels of ``{n}`` arguments: a captured loop's step looks
#: itself up in the recorder's memo with its key ``(launcher, id(arg0), ...)`` built inline
#: (a call of ``memo_key`` cost a third of the step's Python), else :meth:`Configured.launch`
_call_source = """
def __call__(self, *args, **kwargs):
    graph = _graphs.ACTIVE
    if graph is not None and graph.thread == get_ident():
        return graph.record(self, args, kwargs)  # capture_graph(): recorded
    recorder = _capturing()
    if recorder is not None and not kwargs:  # a recorded run of f (dualgpu.porting.capture)
        if recorder.capturing:
            # a captured loop's step: the same objects as a launch deferred since the
            # table ran (its Python per step, kept lean; the kernels' state is checked
            # when the table runs)
            if len(args) == {n}:
                [{names}] = args
                hit = recorder.memo.get((self, {ids}))
                if hit is not None:
                    for d, v, p in hit[1]:  # a dual scalar changed in place since
                        if d.value is not v or d.partials is not p:
                            break
                    else:  # (a kernel reading globals: none of them holds a dual now)
                        if hit[2] is None or not captured_duals(hit[2]):
                            recorder.log.append(hit[0])
                            return None
            found = recorder.launch(self, args)
            return None if found is None else _run_captured(self, recorder, found)
        recorder.launches += 1  # a run "auto" does not capture (yet): counted, run as is
    return self.launch(args, kwargs)
"""


@functools.lru_cache(maxsize=None)
def configured_class(count):
    """The :class:`Configured` class of kernels of ``count`` arguments."""
    names = "".join(f"a{k}, " for k in range(count))
    ids = "".join(f"id(a{k}), " for k in range(count))
    namespace = {"_graphs": _graphs, "get_ident": get_ident, "_capturing": _capturing,
                 "captured_duals": captured_duals, "_run_captured": _run_captured}
    source = _call_source.format(n=count, names=names, ids=ids)
    # a file name in the package: messages that name the user's line skip its frame
    filename = f"{__file__[:-3]}<Configured{count}.__call__>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - a fixed template
    return type(f"Configured{count}", (Configured,), {
        "__slots__": (), "__call__": namespace["__call__"], "__doc__": Configured.__doc__})


def configured(kernel, griddim, blockdim, stream, sharedmem):
    """``kernel[griddim, blockdim, stream, sharedmem]``: a :class:`Configured` launcher."""
    return configured_class(len(kernel._params))(kernel, griddim, blockdim, stream,
                                                 sharedmem)
