"""Captured time loops: a run of f defers its launches and replays them from compiled code.

Under a driver (:func:`dualgpu.jvp`, :func:`dualgpu.jacobian`, ...), on the cpu backend,
each run of f is *recorded* (:func:`recording`): the dual arrays that f allocates
(:func:`~dualgpu.porting.memory.to_device`, ``device_array``, ``device_array_like``)
become *captured buffers*, and a launch whose arguments are captured buffers, numbers
and dual scalars is not run when f's host code issues it but appended to a table. The
table runs, in order, from one compiled function (:mod:`dualgpu.backends.cpu.replay`)
when anything needs the buffers' data: host code reading one of them, a launch that
cannot be deferred, f returning. The steps of a time loop then cost one row of a table
in Python instead of a launch.

Why this is safe (what the replay can and cannot see)
------------------------------------------------------
f's host code runs on every run, unlike a replayed CUDA graph or a ``jax.jit`` trace:
a different ``n_steps``, a branch on Python state, a time- or random-dependent scalar, a
scalar computed from the arguments all issue their launches and their numbers as
written, and the table holds each launch's own numbers. What deferring hides is the
buffers' data until the table runs, so every way to that data runs the table first:

- a captured buffer's ``values``, ``partials`` or any method that reads them (indexing,
  ufuncs, ``copy_to_device``, numba typing) *escapes* it: the pending launches run, the
  buffer becomes a plain DualArray for the rest of the run, and launches that use it
  run at once (as without capture). ``copy_to_host()`` and the metadata (``shape``,
  ``dtype``, ``lanes``...) run the table without escaping;
- a launch with any other argument (a host array, a plain device array, a buffer not
  allocated in this run, a tuple...) runs the table, then itself, at once;
- a dual scalar passed to deferred launches is checked at each launch to be the same
  value and partials objects, and its partials are read-only until the table ran (an
  in-place write raises numpy's read-only error);
- the first launch of each kind runs at once (it compiles and checks the kernel, and
  errors point at the user's line); later ones are deferred.

Each compiled table (a *program*: the kinds of launch and of buffers) is checked at its
first use: it runs on copies of the buffers and the launches run as without capture on
the buffers themselves; any difference in a bit of a value or partial and the program
is never used again (the run keeps the uncaptured results).

Modes (:func:`mode`, the drivers' ``capture=`` option): ``"auto"`` (default) captures
the runs of an f once its uncaptured runs in this process launched
:data:`AUTO_LAUNCHES` kernels (a program compiles and is checked in about 0.2 s, what
that many launches cost through launch plans: capture never costs more than twice what
it could save) or took :data:`AUTO_SECONDS` after the first, and where a launch cannot
be deferred, runs it as written with one note per f and reason (logger
``dualgpu.capture``, level INFO); ``True`` captures from the first run and raises
:class:`~dualgpu.errors.UnsupportedFeatureError` naming the launch and the reason where
it cannot; ``False`` never captures.
``"trace"`` captures from the first run as "auto" does where it can, and lets
:mod:`dualgpu.porting.trace` replay later runs of the same f without calling it.
"""
import contextlib
import contextvars
import functools
import logging
import time

import numpy as np

from dualgpu import rules
from dualgpu.backends.common.plans import entry_point
from dualgpu.core._context import active_tile_lanes
from dualgpu.core.dual import Dual
from dualgpu.core.dualarray import DualArray
from dualgpu.core.selection import backend
from dualgpu.errors import DualgpuError, UnsupportedFeatureError
from dualgpu.host.buffers import caller_line
from dualgpu.porting import capture_tables as _tables
from dualgpu.porting.captured_duals import captured_duals

__all__ = ["ENABLED", "AUTO_LAUNCHES", "AUTO_SECONDS", "CapturedArray", "recording", "mode",
           "current", "adopt", "members", "statistics", "run_launch", "escape_copy"]

#: False: no run is captured (for comparisons; see the tests and benchmarks)
ENABLED = True

#: under "auto", f's runs are captured once its uncaptured runs launched this many kernels
#: in all (about 0.1 s of launch path; compiling and checking a program takes about 0.2 s)
AUTO_LAUNCHES = 20_000

#: ... or once its uncaptured runs after the first (which compiles f's kernels) took this
#: many seconds in all: few but heavy launches (a Jacobian's runs, whose tables run lane
#: tile by lane tile, on several cores, once captured). Compiling and checking a program
#: costs about as much (0.2-0.6 s measured on 2 cores), so, as for AUTO_LAUNCHES, capture
#: never costs more than about twice what f's uncaptured runs took (a ski-rental rule).
AUTO_SECONDS = 0.5

#: captured buffers per run (beyond it, new arrays stay plain)
MAX_BUFFERS = 64

_MODE = contextvars.ContextVar("dualgpu_capture_mode", default="auto")
_CURRENT = contextvars.ContextVar("dualgpu_capture_recorder", default=None)
_RAW_VALUES = DualArray.values.__get__
_RAW_PARTIALS = DualArray.partials.__get__
_STEPS = {}  # (configured launcher, kinds, tile lanes) -> Step, or why launches run at once
_PROGRAMS = {}  # program key -> replay function, or False: its check failed
_ENTRIES = {}  # (program key, buffer tuples' lengths) -> the program's compiled entry point
_LAUNCHES = {}  # f's code -> [launches, seconds after the first run, runs] uncaptured ("auto")
_NOTED = set()
_STATS = {"deferred": 0, "replayed_programs": 0, "checked_programs": 0, "failed_checks": 0}
_LOG = logging.getLogger("dualgpu.capture")
_INT64 = (-(2 ** 63), 2 ** 63)
#: other scalar types a deferred launch takes, by their table's kind (numba types each
#: table's elements as it types the scalar)
_NUMBERS = {t: ("n", np.dtype(t).str) for t in (
    bool, np.bool_, np.float32, np.int32, np.int16, np.int8, np.uint8, np.uint16,
    np.uint32, np.uint64, complex, np.complex64, np.complex128)}


def statistics():
    """Counts since the process started: launches deferred, programs replayed, checked,
    and checks failed (a dict; for tests and benchmarks)."""
    return dict(_STATS)


@functools.lru_cache(maxsize=None)
def memo_key(count):
    """``key(launcher, args)``: ``(launcher, id(args[0]), ...)``, unrolled for ``count``
    arguments (a step builds it inline: ``launch_plan.configured_class``); ValueError else."""
    names = "".join(f"a{k}, " for k in range(count))
    source = (f"def key(s, args):\n    [{names}] = args\n"
              f"    return (s, {''.join(f'id(a{k}), ' for k in range(count))})\n")
    namespace = {}
    exec(source, namespace)  # noqa: S102 - a fixed template, numbers only
    return namespace["key"]


#: ``current()``: the active :class:`_Recorder`, or None (asked at every launch: the bare get)
current = _CURRENT.get


@contextlib.contextmanager
def mode(value):
    """Capture runs of f under drivers in this block with ``value``: "auto", "trace"
    (:mod:`dualgpu.porting.trace`), True or False."""
    if not (value is True or value is False
            or (isinstance(value, str) and value in ("auto", "trace"))):
        raise DualgpuError(f"capture must be 'auto', 'trace', True or False; got {value!r}.")
    token = _MODE.set(value)
    try:
        yield
    finally:
        _MODE.reset(token)


class CapturedArray(DualArray):
    """A DualArray that f allocated in a recorded run: its data may be behind deferred
    launches. Reading its data runs them and makes it a plain DualArray again."""

    __slots__ = ()

    @property
    def values(self):
        _escape(self, "values")
        return _RAW_VALUES(self)

    @property
    def partials(self):
        _escape(self, "partials")
        return _RAW_PARTIALS(self)

    @property
    def lanes(self):
        return _RAW_PARTIALS(self).shape[0]

    @property
    def shape(self):
        return tuple(_RAW_VALUES(self).shape)

    @property
    def dtype(self):
        return _RAW_VALUES(self).dtype

    @property
    def ndim(self):
        return _RAW_VALUES(self).ndim

    @property
    def size(self):
        return _RAW_VALUES(self).size

    is_nested = False
    is_tracer = False
    is_device = False

    def __len__(self):
        return _RAW_VALUES(self).shape[0]

    def copy_to_device(self, ary, stream=0):
        """Run the pending launches, then copy (as :meth:`DualArray.copy_to_device`)."""
        _escape(self, "copy_to_device")
        return self.copy_to_device(ary, stream)

    def copy_to_host(self, ary=None, stream=0):
        """Run the pending launches, then copy (as :meth:`DualArray.copy_to_host`)."""
        if ary is not None:
            _escape(self, "copy_to_host(ary)")
            return self.copy_to_host(ary, stream)
        recorder = _owner(self)
        if recorder is not None:
            recorder.flush()
        copy = DualArray(np.array(_RAW_VALUES(self)), np.array(_RAW_PARTIALS(self)),
                         tag=self.tag)
        if recorder is not None and recorder.trace is not None:
            recorder.trace.copied(copy, recorder.buffers.get(id(self)))
        return copy


def members(array):
    """``(values, partials)`` of a DualArray without escaping a captured one."""
    return _RAW_VALUES(array), _RAW_PARTIALS(array)


def _owner(array):
    recorder = _CURRENT.get()
    if recorder is not None and id(array) in recorder.buffers:
        return recorder
    for recorder in _Recorder.open:  # another context (a thread) reads it
        if id(array) in recorder.buffers:
            return recorder
    return None


def escape_copy(array):
    """``cuda.to_device(x, to=array)`` into a captured buffer (a copy is not replayed)."""
    _escape(array, "copy_to_device")


def _escape(array, what):
    recorder = _owner(array)
    if recorder is not None:
        recorder.escape(array, what)
    array.__class__ = DualArray


def adopt(array, source=None):
    """``array`` as a captured buffer of the active recording, or ``array`` itself.

    ``source``: how f made it (for a traced run, :mod:`dualgpu.porting.trace`):
    ``("to_device", obj)``, ``("device_array", shape, dtype, strides, order)`` or
    ``("like", template)``.
    """
    recorder = _CURRENT.get()
    if recorder is None or not recorder.capturing:
        return array
    if type(array) is not DualArray:
        if recorder.trace is not None:
            recorder.trace.untraceable("f allocated an array that is not a dual array")
        return array
    return recorder.adopt(array, source)


_layout = _tables.layout
_kind = _tables.buffer_kind
_kinds_of = _tables.kinds_of


class _Recorder:
    """One recorded run of f (see the module docstring)."""

    open = []  # recorders of runs in progress (for a buffer read in another context)

    def __init__(self, name, explicit, capturing):
        self.name = name
        self.explicit = explicit
        self.capturing = capturing
        self.tile = active_tile_lanes()
        self.buffers = {}  # id(buffer) -> (kind, index in its group)
        self.groups = {}  # group -> [(values, partials)]
        self.owned = []
        self.duals = {}  # id(dual) -> (kind, index, value, partials)
        self.dual_groups = {}  # dual kind -> ([values], [partials copies])
        self.locked = []  # dual partials made read-only until the table ran
        self.floats, self.ints = [], []
        self.numbers = {}  # ("n", dtype) -> numbers of other scalar types (bools, float32...)
        self.memo = {}  # (launcher, ids of a launch's objects) -> (entry, duals, watch)
        self.entries = []  # entry -> (code, row): a kind of launch (its code) and its
        # arguments' indices in groups and tables
        self.log = []  # per deferred launch, in order: its entry
        self.codes = {}  # launch key -> code
        self.keys = []  # code -> launch key
        self.steps = []  # code -> Step
        self.launches = 0  # launches of an uncaptured run (Configured.__call__ counts them)
        self.escaped = {}  # id(former buffer) -> how host code read it
        self.trace = None  # what a traced run records besides (dualgpu.porting.trace)
        # plain numpy arrays as table arguments: only where no host code runs between the
        # launches and the table (launch graphs' replays, dualgpu.porting.graph_program):
        # id(array) -> (kind, index), and group -> [arrays]; None: such launches run at once
        self.plain = None
        self.plain_groups = {}

    # -- buffers ---------------------------------------------------------------------
    def adopt(self, array, source=None):
        values, partials = _RAW_VALUES(array), _RAW_PARTIALS(array)
        if (array.tag or len(self.owned) >= MAX_BUFFERS or type(values) is DualArray
                or not isinstance(values, np.ndarray) or values.dtype.kind not in "fc"
                or partials.dtype != values.dtype):
            if self.trace is not None:
                self.trace.untraceable("f allocated a dual array that is not captured")
            return array
        if self.trace is not None:
            self.trace.allocs.append((array, source))
        group, kind = _kind(values, partials)
        members_list = self.groups.setdefault(group, [])
        self.buffers[id(array)] = (kind, len(members_list))
        members_list.append((values, partials))
        self.owned.append(array)
        array.__class__ = CapturedArray
        return array

    def escape(self, array, what):
        copied = what == "copy_to_device"
        if self.trace is not None:
            self.trace.untraceable(f"host code {'copied into' if copied else 'read'} a buffer")
        self.flush()
        self.buffers.pop(id(array), None)
        where = caller_line()
        at = f" at {where[0]}:{where[1]} ({where[2]})" if where else ""
        self.escaped[id(array)] = (
            f"host code wrote with copy_to_device{at} (a copy from the host is not replayed: "
            "make the buffer from the data instead, d = cuda.to_device(x), which is captured)"
            if copied else f"host code read its {what}{at}")

    # -- launches --------------------------------------------------------------------
    def launch(self, configured, args):
        """None: deferred. Else ``(args, learn)``: run them now (pending launches ran),
        then call :meth:`learn` with ``learn`` if it is not None.

        The caller (``Configured.__call__``) first looks in :attr:`memo` for the same objects
        as a launch deferred since the table ran, and appends that launch's entry to
        :attr:`log` itself (a captured loop's Python per step); this is the rest."""
        kinds, row = [], []
        buffers = self.buffers
        floats, ints = self.floats, self.ints
        arrays = 0
        for a in args:
            t = type(a)
            if t is CapturedArray:
                info = buffers.get(id(a))
                if info is None:  # another run's buffer (another thread's)
                    return self._now(configured, args, "a buffer of another run of f")
                arrays += 1
            elif t is float or t is np.float64:
                info = ("f", len(floats))
                floats.append(a)
            elif (t is int or t is np.int64) and _INT64[0] <= a < _INT64[1]:
                info = ("i", len(ints))
                ints.append(a)
            elif t in _NUMBERS:
                kind = _NUMBERS[t]
                table = self.numbers.setdefault(kind, [])
                info = (kind, len(table))
                table.append(a)
            elif t is Dual:
                info = self.duals.get(id(a))
                if info is None or info[2] is not a.value or info[3] is not a.partials:
                    info = self._dual(a)
                    if info is None:
                        return self._now(configured, args, "a dual scalar argument that is "
                                         "nested, tagged or not a float")
            elif self.plain is not None and isinstance(a, np.ndarray) and (
                    a.dtype.kind in "biufc"):
                info = self.plain.get(id(a))
                if info is None:
                    info = self._plain_array(a)
                arrays += 1
            else:
                return self._now(configured, args, self._why(a))
            kinds.append(info[0])
            row.append(info[1])
        if not arrays:
            return self._now(configured, args, None)
        key = (configured, tuple(kinds), self.tile)
        code = self.codes.get(key)
        if code is None:
            step = _STEPS.get(key)
            if step is None or (type(step) is not str and not step.holds()):
                return self._now(configured, args, None, key)
            if type(step) is str:  # the kernel's own reason: no argument would change it
                return self._now(configured, args, step, fix=_KERNEL_FIX)
        else:
            step = self.steps[code]
            if not step.holds():  # the kernel recompiled since: make the step again
                del self.codes[key]
                return self._now(configured, args, None, key)
        # (refusals before the launch gets a code: a code in the table is a kind of launch
        # its program takes, with the kinds of its arguments' groups)
        if step.watch is not None and captured_duals(step.watch):
            return self._now(configured, args, "a kernel that reads a global or closure cell "
                             "holding a dual", fix="pass the dual to the kernel as an "
                             "argument (a global's value is not a launch's input).")
        if arrays > 1 and step.distinct and len({id(a) for a in args if type(a) is CapturedArray}
                                                ) != sum(type(a) is CapturedArray for a in args):
            return self._now(configured, args, "one buffer passed as two arguments to a "
                             "launch of several lane tiles", fix=_ALIAS_FIX)
        if code is None:
            code = self.codes[key] = len(self.keys)
            self.keys.append(key)
            self.steps.append(step)
        entry = len(self.entries)
        self.entries.append((code, tuple(row)))
        self.log.append(entry)
        # the memo's objects stay alive until the table runs (and the memo is cleared):
        # buffers and duals in ``owned``, numbers in their tables
        duals = tuple((a, a.value, a.partials) for a in args if type(a) is Dual)
        self.memo[configured.memo_key(configured, args)] = (entry, duals, step.watch)
        return None

    def _plain_array(self, array):
        kind = ("p", array.dtype.str, array.ndim, _layout(array), array.flags.writeable,
                array.shape)
        members = self.plain_groups.setdefault(kind[:-1], [])
        info = self.plain[id(array)] = (kind, len(members))
        members.append(array)
        self.owned.append(array)  # alive while the memo holds its id
        return info

    def _why(self, a):
        if isinstance(a, DualArray):
            escaped = self.escaped.get(id(a))
            if escaped:
                return f"a dual array argument whose data {escaped}"
            return ("a dual array that f did not allocate in this run with cuda.to_device, "
                    "device_array or device_array_like (an argument of f, one built on the "
                    f"host such as np.stack of duals, or one of more than {MAX_BUFFERS})")
        if isinstance(a, np.ndarray):
            return f"a {type(a).__name__} argument (plain arrays are read by host code " \
                   "unseen; only dual arrays f allocates are captured)"
        if type(a).__name__ == "ComplexDual":
            return ("a complex dual scalar (its launches are not captured: pass its real and "
                    "imaginary parts as two real dual scalars, or the number in a one-element "
                    "complex array made with cuda.to_device, to capture them)")
        return f"an argument of type {type(a).__name__}"

    def _dual(self, dual):
        value, partials = dual.value, dual.partials
        if (dual.tag or not isinstance(partials, np.ndarray) or partials.ndim != 1
                or partials.dtype.kind != "f" or type(value) not in (
                    float, np.float64, np.float32)):
            return None
        dtype = np.dtype(type(value)) if type(value) is not float else np.dtype(np.float64)
        kind = ("s", dtype.str, partials.dtype.str, partials.shape[0])
        table = self.dual_groups.setdefault(kind, ([], [], []))
        info = (kind, len(table[0]), value, partials)
        table[0].append(value)
        table[1].append(np.array(partials))
        table[2].append(dual)
        if partials.flags.writeable:
            partials.flags.writeable = False
            self.locked.append(partials)
        self.duals[id(dual)] = info
        self.owned.append(dual)
        return info

    def _now(self, configured, args, reason, learn=None, fix=None):
        if self.trace is not None:
            self.trace.untraceable(reason or "a launch ran at once (its first of its kind)")
        self.flush()
        if reason is not None:
            self.note(configured, reason, fix)
        plain = []
        for a in args:
            if type(a) is CapturedArray:
                if id(a) in self.buffers:
                    a = _plain(a)
                else:  # another run's: its table runs first, and it becomes plain
                    _escape(a, "values")
            plain.append(a)
        return tuple(plain), learn

    def learn(self, key, configured, args):
        """Make the step of launches like ``configured(*args)`` (which just ran)."""
        kernel = configured.kernel
        if kernel.signatures:
            step = "a kernel with explicit signatures"
        elif kernel._may_capture and captured_duals(kernel):
            step = "a kernel that reads a global or closure cell holding a dual"
        elif configured.sharedmem:
            step = "dynamic shared memory"
        else:
            try:
                step, why = kernel.compiled("cpu").replay_step(
                    configured.griddim, configured.blockdim, args)
            except Exception as exc:  # noqa: BLE001 - the launch ran: launches like it run
                step, why = None, f"no replay ({type(exc).__name__}: {exc})"  # at once
            if step is not None and kernel._may_capture:
                step.watch = kernel  # its globals are looked at again at every launch
            step = step or why
        if len(_STEPS) > 4096:
            _STEPS.clear()
        _STEPS[key] = step

    def note(self, configured, reason, fix=None):
        name = getattr(configured.kernel, "__name__", repr(configured.kernel))
        where = caller_line()
        at = f" at {where[0]}:{where[1]}" if where else ""
        message = (f"{self.name}: the launch of kernel {name!r}{at} could not be captured: "
                   f"{reason}; it ran at once, as without capture")
        if self.explicit:
            raise UnsupportedFeatureError(
                message + ". capture=True asks for every launch of f after the first of its "
                "kind to be captured. Fix: " + (fix or _ARGUMENTS_FIX))
        key = (self.name, name, reason)
        if key not in _NOTED:
            _NOTED.add(key)
            _LOG.info(message)

    # -- running the table -----------------------------------------------------------
    def flush(self):
        """Run the pending launches (compiled, or as written where that is not checked)."""
        log = self.log
        if not log:
            return
        entries = self.entries
        self.log, self.entries = [], []
        self._unlock()  # no host code runs until the table ran
        try:
            self._run(log, entries)
        finally:
            self.memo.clear()
            self.floats.clear()
            self.ints.clear()
            for table in self.numbers.values():
                table.clear()
            self.duals.clear()
            for table in self.dual_groups.values():
                for column in table:
                    column.clear()

    def _unlock(self):
        for partials in self.locked:
            partials.flags.writeable = True
        self.locked.clear()

    def _run(self, log, entries):
        if self.trace is not None:
            self.trace.tables += 1
        if not all(step.holds() for step in self.steps):  # a kernel recompiled since (rare):
            if self.trace is not None:
                self.trace.untraceable("a kernel recompiled during the run")
            self._eager(log, entries)  # the launch path; the next launches make new steps
            self.codes.clear()
            self.keys.clear()
            self.steps.clear()
            return
        codes = np.array([code for code, _ in entries], np.int64)
        program_key = tuple(self.keys[code] + (self.steps[code],)
                            for code in range(int(codes.max()) + 1))
        program = _PROGRAMS.get(program_key)
        if program is False:
            if self.trace is not None:
                self.trace.untraceable("its table runs on the launch path")
            self._eager(log, entries)
            return
        index = np.array(log, np.int64)
        codes, table = codes[index], self._table(entries)[index]
        if self.trace is not None:
            self.trace.ran(self, program_key, codes, table)
        inputs = self._inputs(codes, table, program_key)
        if program is None:
            self._check(log, entries, program_key, inputs)
            return
        _STATS["replayed_programs"] += 1
        _STATS["deferred"] += len(log)
        # its compiled entry point: the program key and the buffer tuples' lengths fix every
        # input's numba type (the dispatcher would type the tuples again: tens of us)
        key = (program_key, tuple(len(x) for x in inputs if type(x) is tuple))
        entry = _ENTRIES.get(key)
        if entry is None:
            if len(_ENTRIES) > 1024:
                _ENTRIES.clear()
            entry = _ENTRIES[key] = entry_point(program, inputs) or program
        run_program(entry, inputs, program_key, codes)

    _table = staticmethod(_tables.table)
    _ops = staticmethod(_tables.ops)

    def _inputs(self, codes, table, program_key):
        """The program's inputs for this table (``capture_tables.inputs``)."""
        return _tables.inputs(self, codes, table, program_key)

    def _check(self, log, entries, program_key, inputs):
        """Compile the program, run it on copies, run the launches as written, compare
        (on a table whose partials are all zero, not yet: the launches run as written)."""
        if not _tables.seeded(inputs, program_key):
            self._eager(log, entries)
            return
        _STATS["checked_programs"] += 1
        ops, counts = self._ops(program_key)
        try:
            steps = [self.steps[c] for c in range(len(program_key))]
            program = steps[0].compile(steps, ops, counts)
            copies = [tuple(a.copy() for a in x) if type(x) is tuple else x
                      for x in inputs]
            program(*copies)
        except Exception as exc:  # noqa: BLE001 - a program that fails is not used
            _PROGRAMS[program_key] = False
            _STATS["failed_checks"] += 1
            self._eager(log, entries)
            self.note(self.keys[entries[log[0]][0]][0],
                      f"its compiled replay failed ({type(exc).__name__}: {exc})", _KERNEL_FIX)
            return
        self._eager(log, entries)
        same = all(_bits(a, b) for x, y in zip(inputs, copies) if type(x) is tuple
                   for a, b in zip(x, y))
        if same:
            _PROGRAMS[program_key] = program
            _STATS["deferred"] += len(log)
            return
        _PROGRAMS[program_key] = False
        _STATS["failed_checks"] += 1
        self.note(self.keys[entries[log[0]][0]][0], "its compiled replay differed from the "
                  "launches in some bit of a value or partial", _KERNEL_FIX)

    def _eager(self, log, entries):
        """Run the pending launches one by one on the launch path (as without capture)."""
        plain = {}
        token = _CURRENT.set(None)
        try:
            for code, row in map(entries.__getitem__, log):
                configured, kinds, _ = self.keys[code]
                configured(*[self._argument(kind, index, plain)
                             for kind, index in zip(kinds, row)])
        finally:
            _CURRENT.reset(token)

    def _argument(self, kind, index, plain):
        """The argument a table entry stands for (a buffer as a plain DualArray)."""
        what = kind[0]
        if what == "f":
            return self.floats[index]
        if what == "i":
            return self.ints[index]
        if what == "n":
            return self.numbers[kind][index]
        if what == "p":
            return self.plain_groups[kind[:-1]][index]
        if what == "s":  # the dual as it was at that launch (f may have changed it since)
            values, partials, duals = self.dual_groups[kind]
            found = plain.get((kind, index))
            if found is None:
                found = plain[(kind, index)] = _as_recorded(duals[index], values[index],
                                                            partials[index])
            return found
        found = plain.get((kind, index))
        if found is None:
            values, partials = self.groups[kind[:-1]][index]
            found = plain[(kind, index)] = DualArray(values, partials)
        return found

    def close(self):
        """Run what is pending; every captured buffer becomes a plain DualArray."""
        try:
            self.flush()
        finally:
            self._unlock()
            for array in self.owned:
                if type(array) is CapturedArray:
                    array.__class__ = DualArray
            self.owned.clear()
            self.buffers.clear()


def run_program(entry, inputs, program_key, codes):
    """Run a program's compiled ``entry`` on ``inputs`` (its steps' backend decides how)."""
    steps = [key[-1] for key in program_key]
    steps[0].run(entry, inputs, steps, codes, len(_kinds_of(program_key)[0]))


def run_launch(configured, recorder, found):
    """Run a launch that ``recorder.launch(configured, args)`` did not defer: ``found`` is
    what it returned, ``(args, learn)``."""
    args, learn = found
    token = _CURRENT.set(None)
    try:
        configured(*args)
    finally:
        _CURRENT.reset(token)
    if learn is not None:
        recorder.learn(learn, configured, args)
    return None


def _plain(array, cache=None):
    """A plain DualArray over a captured buffer's members (the launch path's argument)."""
    if cache is not None:
        found = cache.get(id(array))
        if found is not None:
            return found
    plain = DualArray(_RAW_VALUES(array), _RAW_PARTIALS(array), tag=array.tag)
    if cache is not None:
        cache[id(array)] = plain
    return plain


def _as_recorded(dual, value, partials):
    """A Dual holding ``value`` and ``partials`` (what ``dual`` held when a launch was
    deferred), with ``dual``'s flags, built as they are (no conversion)."""
    copy = Dual.__new__(Dual)
    copy.value, copy.partials, copy.tag, copy.weak = value, partials, dual.tag, dual.weak
    return copy


def _bits(a, b):
    """True if two arrays hold the same bits."""
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and bool(
        np.array_equal(a.view(np.uint8), b.view(np.uint8)))


#: the fix an UnsupportedFeatureError of capture=True names for a launch's arguments
_ARGUMENTS_FIX = (
    "launch only with dual arrays that f allocates (cuda.to_device, cuda.device_array, "
    "cuda.device_array_like), numbers and dual scalars; read device data only after the loop "
    "(copy_to_host); or use capture='auto' (the default), which runs such launches as written.")
#: ... for one buffer passed twice to a launch of several lane tiles
_ALIAS_FIX = (
    "pass distinct buffers (the lane tiles of a launch run one after another, and a buffer "
    "passed twice could not be restored between them in the table); or use capture='auto' "
    "(the default), which runs such launches as written.")
#: ... and for the kernel itself (compute-bound, block-level, a replay that differed)
_KERNEL_FIX = (
    "nothing in f's host code: this kernel's launches run as written. Use capture='auto' "
    "(the default), which runs them so and captures the rest, or capture=False.")


def _key_of(f):
    code = getattr(f, "__code__", None)
    if code is not None:
        return code
    try:
        hash(f)
    except TypeError:
        return None
    return f


@contextlib.contextmanager
def recording(f, name):
    """Record one run of ``f`` (a driver's run, named ``name`` in notes and errors) as the
    active mode says (see the module docstring); yields the recorder, or None."""
    value = _MODE.get()
    if value is True and backend() != "cpu":
        raise UnsupportedFeatureError(
            f"{name}: capture=True replays launches on the cpu backend only; the active "
            f"backend is {backend()!r}. Fix: capture='auto' (runs f as written there) or "
            "dualgpu.set_backend('cpu').")
    outer = _CURRENT.get()
    if outer is not None:  # a driver inside f: its runs are not captured, nor is the outer
        outer.flush()  # run's table held while they run
        token = _CURRENT.set(None)
        try:
            yield None
        finally:
            _CURRENT.reset(token)
        return
    if value is False or not ENABLED or backend() != "cpu":
        yield None
        return
    explicit = value is True
    key = _key_of(f)
    so_far = _LAUNCHES.get(key) if key is not None else None
    capturing = explicit or value == "trace" or (
        so_far is not None and (so_far[0] >= AUTO_LAUNCHES or so_far[1] >= AUTO_SECONDS))
    started = time.perf_counter()
    recorder = _Recorder(name, explicit, capturing)
    token = _CURRENT.set(recorder)
    _Recorder.open.append(recorder)
    failed = False
    try:
        yield recorder
    except BaseException:
        failed = True
        raise
    finally:
        _CURRENT.reset(token)
        _Recorder.open.remove(recorder)
        try:
            recorder.close()  # f's pending launches run, as they would have without capture
        except Exception:
            if not failed:  # f's own error is the one to see
                raise
        finally:
            if key is not None and not capturing:
                if len(_LAUNCHES) > 1024:
                    _LAUNCHES.clear()
                so_far = _LAUNCHES.setdefault(key, [0, 0.0, 0])
                so_far[0] += recorder.launches
                if so_far[2] and recorder.launches:
                    so_far[1] += time.perf_counter() - started
                so_far[2] += 1


def _rules_changed(new, old):
    """A rule was defined: launchers made before may differ from the launch path's now."""
    _STEPS.clear()
    _PROGRAMS.clear()
    _ENTRIES.clear()


rules.subscribe(_rules_changed)
