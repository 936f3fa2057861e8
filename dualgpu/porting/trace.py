"""Traced runs of f (``capture="trace"``): later runs replay f's launches without its Python.

Captured time loops (:mod:`dualgpu.porting.capture`) run f's host code on every run and
defer its launches; what remains per step is that host code (about 1 us). Under
``capture="trace"`` a driver goes one step further, as ``jax.jit``, PyTorch's CUDA graphs
and Warp's ``capture_launch`` do: once a run of f with arguments of some kinds has been
*traced*, later runs with arguments of the same kinds do not call f at all. They allocate
the buffers f allocated (copying the new arguments where f copied its arguments), run
the same compiled table of launches with the new arguments' dual scalars, and return
copies of the buffers f returned.

The contract (JAX's): f's Python does the same thing for arguments of the same kinds.
Numbers f computes in Python are frozen at the trace: the launches' numbers, step counts,
anything f computes from the *values* of its array arguments, the clock or random draws.
Number arguments (``dt``, ``n_steps``) are part of the kinds (another value: another
trace), and arrays f copies from its closure are read again at every replay. Where f's
Python decides from the value of a dual (``int(1.0 / dt)``, ``if a > 1.0:``, counted by
:data:`dualgpu.core.dual.DECISIONS`), its traces are kept per the values of its array and
dual arguments (:class:`_ByValue`), as ``jax.jit`` would need ``static_argnums``.

What is traced, and checked: a run whose every launch was deferred into one table (no
launch ran at once, no host read of a buffer's data before the end), whose buffers were
made by ``cuda.to_device`` of an argument or of a plain numpy array, ``device_array`` or
``device_array_like``, whose dual scalars in the table are f's own arguments (a Dual
computed in Python, such as ``alpha * dt``, is not traced: its partials depend on the
seeds), and whose result is a ``copy_to_host()`` of a buffer, or a tuple or list of them.
The run after the trace is both replayed and run, and the two compared bit for bit (values
and partials); only a trace that passed is used from then on. Anything else runs f as
``capture=True`` does (silently: a trace is an optimisation, never a requirement).

Traces are kept per f (the function object: a new lambda is a new f) and kinds of
arguments, at most :data:`MAX_TRACES`; defining a rule forgets them.
"""
import logging
import types
import weakref

import numpy as np
from numba._dispatcher import compute_fingerprint as _fingerprint

from dualgpu import rules
from dualgpu.backends.common.plans import entry_point
from dualgpu.core._context import active_levels, active_lanes, active_tile_lanes, lane_dtype
from dualgpu.core.dual import DECISIONS as Dual_DECISIONS
from dualgpu.core.dual import Dual
from dualgpu.core.dualarray import DualArray
from dualgpu.core.selection import backend
from dualgpu.host import buffers as host_buffers
from dualgpu.porting import capture
from dualgpu.porting import capture_tables
from dualgpu.porting import memory

__all__ = ["run", "statistics", "MAX_TRACES", "TRIES"]

#: traces kept (beyond it, all are forgotten and made again)
MAX_TRACES = 256

#: runs of f that may try to make a trace for one kind of arguments before it gives up
TRIES = 3

_TRACES = {}  # key -> Trace (checked or not), an int (tries so far), or False (gave up)
_NOTED = weakref.WeakKeyDictionary()  # f -> the notes it got
_LOG = logging.getLogger("dualgpu.capture")
_STATS = {"traced": 0, "checked": 0, "failed_checks": 0, "replayed": 0}
_NUMBER_TYPES = (bool, int, float, np.bool_, np.int8, np.int16, np.int32, np.int64,
                 np.uint8, np.uint16, np.uint32, np.uint64, np.float32, np.float64)


_FLOAT_TYPES = (float, np.float32, np.float64)
_COMPLEX_TYPES = (complex, np.complex64, np.complex128)


class _ByValue:
    """The entry of a key whose runs took Python decisions from the values of f's arguments
    (``int(1.0 / dt)``, ``if a > 1.0``; see :data:`dualgpu.core.dual.DECISIONS`): its
    traces are kept per those values (:func:`_values`), as ``jax.jit`` keeps one per static
    argument."""


def _values(args):
    """The values of f's array and dual arguments, as a key (number arguments are in the
    kinds already)."""
    found = []
    for a in args:
        if type(a) is DualArray:
            found.append(np.ascontiguousarray(capture.members(a)[0]).tobytes())
        elif type(a) is Dual:
            found.append(float(a.value).hex())
        elif type(a) is np.ndarray:
            found.append(np.ascontiguousarray(a).tobytes())
    return tuple(found)


def statistics():
    """Counts since the process started: traces made, checked, failed, runs replayed."""
    return dict(_STATS)


def _layout(a):
    return "C" if a.flags.c_contiguous else "F" if a.flags.f_contiguous else "A"


def _kind(a):
    """The kind of one argument of f in a trace's key, or None (no trace for it)."""
    t = type(a)
    if t is DualArray:
        values, partials = capture.members(a)
        if a.tag or not isinstance(values, np.ndarray) or not isinstance(partials, np.ndarray):
            return None
        return ("A", _fingerprint(values), values.shape, _fingerprint(partials), partials.shape)
    if t is Dual:
        if a.tag or not isinstance(a.partials, np.ndarray) or type(a.value) is Dual:
            return None
        return ("D", type(a.value), _fingerprint(a.partials), a.partials.shape, a.weak)
    if t is np.ndarray:
        if a.dtype.kind not in "biuf":
            return None
        # a 0-d array is a number (`c = 0.1 if scheme > 0.5 else 0.01`): its value too
        return ("a", _fingerprint(a), a.shape) + ((a.tobytes(),) if a.ndim == 0 else ())
    if t in _NUMBER_TYPES:  # a number argument: its value is part of the kind (-0.0 is not
        # 0.0: atan2, copysign and 1 / x tell them apart; a NaN matches nothing)
        return ("n", t, float(a).hex() if t in _FLOAT_TYPES else a)
    if t in _COMPLEX_TYPES:  # (its two parts, as floats)
        return ("n", t, float(a.real).hex(), float(a.imag).hex())
    if a is None:
        return ("none",)
    return None


def _key(f, args, kwargs):
    if kwargs or len(active_levels()) > 1:
        return None
    kinds = []
    for a in args:
        kind = _kind(a)
        if kind is None:
            return None
        kinds.append(kind)
    try:
        hash(f)
    except TypeError:
        return None
    return (f, tuple(kinds), active_lanes(), active_tile_lanes(),
            host_buffers.active() is None)


class TraceLog:
    """What a traced run records besides its table (the recorder calls it)."""

    def __init__(self):
        self.why = None  # why the run cannot be traced (the first reason), or None
        self.allocs = []  # (buffer, source) in the order f made them
        self.copies = {}  # id(copy_to_host result) -> (result, group, index)
        self.tables = 0  # tables run (launches deferred then run)
        self.table = None  # what the one table ran: see ran()

    def untraceable(self, why):
        if self.why is None:
            self.why = why

    def copied(self, copy, info):
        if info is None or self.tables != 1:
            self.untraceable("a copy_to_host() before the launches (or of a former buffer)")
            return
        kind, index = info
        self.copies[id(copy)] = (copy, kind[:-1], index)

    def ran(self, recorder, program_key, codes, table):
        """The recorder runs its table (before the numbers' tables are cleared)."""
        duals = {kind: (list(values), list(objects))
                 for kind, (values, _, objects) in recorder.dual_groups.items()}
        numbers = {kind: list(found) for kind, found in recorder.numbers.items()}
        self.table = (program_key, codes, table, list(recorder.floats), list(recorder.ints),
                      numbers, duals)


class Trace:
    """A traced run of f: what a replay allocates, runs and returns."""

    def __init__(self, allocs, sizes, table, duals, result, program):
        self.allocs = allocs  # (group, index, source) in order
        self.sizes = sizes  # group -> how many buffers
        (self.program_key, self.codes, self.table, self.floats, self.ints, self.numbers,
         _) = table
        self.program = program  # its compiled program (defining a rule forgets traces)
        self.duals = duals  # dual kind -> argument positions
        self.result = result  # ("buffer", group, index) | ("tuple"|"list", [...])
        self.checked = False
        self.entry = None  # the program's compiled entry point (its inputs' types are fixed)
        self.lean = None  # after a replay that applied: its allocations and inputs, kept
        leaves = _leaves(result)
        self.once = {leaf for leaf in leaves if leaves.count(leaf) == 1}  # returned as they
        # are (a replay's buffers are its own); a buffer returned twice is copied

    def replay(self, args):
        """f's result for ``args`` from the trace, or None (it does not apply)."""
        lean = self.lean
        if lean is not None:
            made = lean.allocate(args)
            if made is not None:
                return self._run(lean.inputs(made, args), made)
        made = {}
        for group, index, source in self.allocs:
            array = self._allocate(source, args, made)
            if type(array) is not DualArray:
                return None
            values, partials = capture.members(array)
            if capture._kind(values, partials)[0] != group:
                return None
            made[(group, index)] = (values, partials)
        groups = {group: [made[(group, k)] for k in range(size)]
                  for group, size in self.sizes.items()}
        dual_groups = {}
        for kind, positions in self.duals.items():
            duals = [args[k] for k in positions]
            dual_groups[kind] = ([d.value for d in duals], [d.partials for d in duals], duals)
        state = types.SimpleNamespace(groups=groups, floats=self.floats, ints=self.ints,
                                      numbers=self.numbers, dual_groups=dual_groups)
        inputs = capture._Recorder._inputs(state, self.codes, self.table, self.program_key)
        if self.lean is None:
            self.lean = _Lean.of(self, state, made, args)
        return self._run(inputs, made)

    def _run(self, inputs, made):
        # the tuples' lengths are part of the inputs' types (a tile-by-tile program's private
        # values: as many as the threads allow, which numba.set_num_threads changes)
        lengths = tuple(len(x) for x in inputs if type(x) is tuple)
        if self.entry is None or self.entry[0] != lengths:
            self.entry = (lengths, entry_point(self.program, inputs) or self.program)
        capture.run_program(self.entry[1], inputs, self.program_key, self.codes)
        return _built(self.result, made, self.once)

    @staticmethod
    def _allocate(source, args, made):
        what = source[0]
        if what == "device_array":
            return memory._device_array(*source[1:])
        ref = source[1]
        if ref[0] == "arg":
            obj = args[ref[1]]
        elif ref[0] == "buffer":
            obj = DualArray(*made[ref[1:]])
        else:
            obj = ref[1]
        return memory._to_device(obj) if what == "to_device" else memory._device_array_like(obj)


class _Lean:
    """A trace's replay after its first: what it allocates and the program's inputs, with
    every type already known (the trace's key fixes its arguments' kinds and the lanes).

    Each buffer is allocated as the first replay's was (the backend's zeroed, staggered host
    arrays, :func:`dualgpu.porting.memory._host_zeros`) and checked against its shapes and
    dtypes; the program's fixed inputs (codes, rows, number tables) are built once
    (:class:`dualgpu.porting.capture_tables.Inputs`). Where a source no longer fits (an array
    of f's closure reshaped, a non-contiguous argument), :meth:`allocate` gives None and the
    replay takes the general path.
    """

    __slots__ = ("makers", "layout", "slots", "duals")

    @classmethod
    def of(cls, trace, state, made, args):
        """The lean replay of ``trace`` after a first replay that made ``made``, or None (a
        buffer source it does not know)."""
        makers = []
        for group, index, source in trace.allocs:
            values, partials = made[(group, index)]
            maker = _maker(source, args, values, partials)
            if maker is None:
                return None
            makers.append(((group, index), maker))
        lean = cls()
        lean.makers = makers
        lean.layout = capture_tables.Inputs(trace.codes, trace.table, trace.program_key,
                                            state.floats, state.ints, state.numbers)
        if lean.layout.plain_kinds:
            return None
        lean.slots = {group: [(group, k) for k in range(size)]
                      for group, size in trace.sizes.items()}
        lean.duals = trace.duals
        return lean

    def allocate(self, args):
        made = {}
        for slot, maker in self.makers:
            members = maker(args, made)
            if members is None:
                return None
            made[slot] = members
        return made

    def inputs(self, made, args):
        """The program's inputs, as :func:`dualgpu.porting.capture_tables.inputs` gives them."""
        groups = {group: [made[slot] for slot in slots] for group, slots in self.slots.items()}
        dual_groups = {}
        for kind, positions in self.duals.items():
            duals = [args[k] for k in positions]
            dual_groups[kind] = ([d.value for d in duals], [d.partials for d in duals], duals)
        return self.layout.build(groups, dual_groups)


def _maker(source, args, values, partials):
    """A function ``(args, made) -> (values, partials)`` allocating a buffer as the first
    replay did (``values``, ``partials``: what it made), or None."""
    vshape, vdtype, pshape, pdtype = values.shape, values.dtype, partials.shape, partials.dtype
    if not (values.flags.c_contiguous and partials.flags.c_contiguous):
        return None
    what = source[0]
    if what in ("device_array", "like"):
        # the kinds of f's arguments and buffers are the trace's; an array of f's closure is
        # read again (its shape may have changed)
        template = source[1][1] if what == "like" and source[1][0] == "object" else None

        def zeros(args, made):
            if lane_dtype(vdtype) != pdtype or template is not None and (
                    template.shape != vshape or template.dtype != vdtype):
                return None  # (sparsity tracers' lanes, a reshaped closure array: another kind)
            return (memory._host_zeros(vshape, vdtype), memory._host_zeros(pshape, pdtype))
        return zeros
    if what != "to_device":
        return None
    ref = source[1]
    if ref[0] not in ("arg", "object"):
        return None
    position, constant = (ref[1], None) if ref[0] == "arg" else (None, ref[1])

    def copied(args, made):
        obj = args[position] if constant is None else constant
        t = type(obj)
        if t is np.ndarray:
            if (obj.shape != vshape or obj.dtype != vdtype or not obj.flags.c_contiguous
                    or lane_dtype(vdtype) != pdtype or host_buffers.kept_source(obj) is not obj):
                return None
            copy = memory._host_zeros(vshape, vdtype, np.empty)
            copy[...] = obj
            return copy, memory._host_zeros(pshape, pdtype)
        if t is DualArray and not obj.tag:
            v, p = capture.members(obj)
            if (type(v) is not np.ndarray or type(p) is not np.ndarray or v.shape != vshape
                    or v.dtype != vdtype or p.shape != pshape or p.dtype != pdtype
                    or not (v.flags.c_contiguous and p.flags.c_contiguous)):
                return None
            copy, copy_p = (memory._host_zeros(vshape, vdtype, np.empty),
                            memory._host_zeros(pshape, pdtype, np.empty))
            copy[...] = v
            copy_p[...] = p
            return copy, copy_p
        return None
    return copied


def _leaves(shape):
    if shape[0] == "buffer":
        return [shape[1:]]
    return [leaf for item in shape[1] for leaf in _leaves(item)]


def _built(shape, made, once):
    """f's result from the replay's buffers ``made`` (as copy_to_host() gives them)."""
    if shape[0] == "buffer":
        values, partials = made[shape[1:]]
        if shape[1:] in once:
            return DualArray(values, partials)
        return DualArray(np.array(values), np.array(partials))
    items = [_built(item, made, once) for item in shape[1]]
    return tuple(items) if shape[0] == "tuple" else items


def _trace_of(log, recorder, args, result):
    """The :class:`Trace` of a finished recorded run, or None (``log.why`` says why)."""
    if log.why is not None:
        return None
    if log.tables != 1 or log.table is None:
        log.untraceable("the launches ran in several tables (host code read buffers between)")
        return None
    if not capture._PROGRAMS.get(log.table[0]):
        log.untraceable("its table has no checked program")
        return None
    by_id = {id(a): k for k, a in enumerate(args)}
    allocs, buffers = [], {}  # id(buffer) -> (group, index)
    for array, source in log.allocs:
        info = recorder_buffer(recorder, array)
        if info is None:
            log.untraceable("a buffer f made was read by host code")
            return None
        buffers[id(array)] = info
        ref = None
        if source is None:
            log.untraceable("a buffer made without a known source")
            return None
        if source[0] == "device_array":
            allocs.append(info + (source,))
            continue
        obj = source[1]
        if id(obj) in by_id:
            ref = ("arg", by_id[id(obj)])
        elif id(obj) in buffers and source[0] == "like":
            ref = ("buffer",) + buffers[id(obj)]
        elif type(obj) is np.ndarray:
            ref = ("object", obj)  # read again at every replay (f's closure, a constant)
        else:
            log.untraceable("a buffer copied from an object that is not an argument of f "
                            "or a numpy array")
            return None
        allocs.append(info + ((source[0], ref),))
    duals = {}
    for kind, (values, objects) in log.table[6].items():
        positions = []
        for value, dual in zip(values, objects):
            k = by_id.get(id(dual))
            if k is None or dual.value is not value or k in positions:
                log.untraceable("a dual scalar that is not an argument of f (or changed)")
                return None
            positions.append(k)
        duals[kind] = positions
    shape = _result_shape(result, log.copies)
    if shape is None:
        log.untraceable("a result that is not copy_to_host() of buffers (or a tuple of them)")
        return None
    sizes = {}
    for group, index in buffers.values():
        sizes[group] = max(sizes.get(group, 0), index + 1)
    return Trace(allocs, sizes, log.table, duals, shape, capture._PROGRAMS[log.table[0]])


def recorder_buffer(recorder, array):
    """``(group, index)`` of a captured buffer of ``recorder``, or None."""
    info = recorder.buffers.get(id(array))
    return None if info is None else (info[0][:-1], info[1])


def _result_shape(result, copies):
    if type(result) is DualArray:
        found = copies.get(id(result))
        return None if found is None or found[0] is not result else ("buffer",) + found[1:]
    if type(result) in (tuple, list) and result:
        items = [_result_shape(item, copies) for item in result]
        if any(item is None for item in items):
            return None
        return ("tuple" if type(result) is tuple else "list", items)
    return None


def _same(a, b):
    if type(a) is DualArray:
        return type(b) is DualArray and all(
            capture._bits(x, y) for x, y in zip(capture.members(a), capture.members(b)))
    return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))


def run(f, name, args, kwargs):
    """``f(*args, **kwargs)`` for a driver's run (named ``name``): recorded as the capture
    mode says (:func:`dualgpu.porting.capture.recording`), or under ``capture="trace"``
    replayed from a checked trace (see the module docstring)."""
    key = None
    if (capture._MODE.get() == "trace" and capture.ENABLED and backend() == "cpu"
            and capture.current() is None):
        key = _key(f, args, kwargs)
    found = None if key is None else _TRACES.get(key)
    if type(found) is _ByValue:
        key = (_ByValue, key, _values(args))
        found = _TRACES.get(key)
    if isinstance(found, Trace) and found.checked:
        result = found.replay(args)
        if result is not None:
            _STATS["replayed"] += 1
            return result
        found = _TRACES[key] = False  # it no longer applies: f runs from now on
    check = found.replay(args) if isinstance(found, Trace) else None
    with capture.recording(f, name) as recorder:
        log = None
        if recorder is not None and key is not None and (found is None or type(found) is int):
            log = recorder.trace = TraceLog()
        decisions = Dual_DECISIONS[0]
        # (the values as f got them: f may write into its arguments)
        values = _values(args) if (key is not None and key[0] is not _ByValue
                                   and found is not False) else None
        result = f(*args, **kwargs)
        if values is not None and Dual_DECISIONS[0] != decisions:
            # f decided something from its arguments' values: from now on its traces are
            # kept per those values (this run's trace, if any, under its own)
            _remember(key, _ByValue())
            key = (_ByValue, key, values)
            found = None
        if log is not None:  # (before the recording closes: its buffers are still known)
            if recorder.log:
                log.untraceable("launches after the last copy_to_host()")
            trace = _trace_of(log, recorder, args, result)
            if trace is not None:
                _STATS["traced"] += 1
                _remember(key, trace)
            else:
                tries = (found or 0) + 1
                _remember(key, tries if tries < TRIES else False)
                if tries >= TRIES:
                    _note(name, f, f"its runs cannot be traced: {log.why}")
    if isinstance(found, Trace):  # the run after the trace: replayed and run, compared
        _STATS["checked"] += 1
        if check is not None and _same(check, result):
            found.checked = True
        else:
            _STATS["failed_checks"] += 1
            _TRACES[key] = False
            _note(name, f, "its trace's replay differed from the run in some bit (f's Python "
                  "does not do the same for arguments of the same kinds)")
    return result


def _note(name, f, what):
    """One INFO note per function and reason on the logger ``dualgpu.capture``: f runs as
    captured loops do from now on."""
    label = getattr(f, "__qualname__", repr(f))
    mark = what
    try:
        noted = _NOTED.setdefault(f, set())
    except TypeError:  # no weak reference to f: once per name
        noted, mark = _NOTED.setdefault(_note, set()), (label, what)
    if mark not in noted:
        noted.add(mark)
        _LOG.info("%s: capture='trace': %s %s; f runs as written (captured).", name, label,
                  what)


def _remember(key, value):
    if len(_TRACES) >= MAX_TRACES:
        _TRACES.clear()
    _TRACES[key] = value


def _rules_changed(new, old):
    _TRACES.clear()


rules.subscribe(_rules_changed)
