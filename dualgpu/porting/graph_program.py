"""A launch graph's launches as one compiled table on the cpu backend.

A :class:`~dualgpu.porting.graphs.LaunchGraph` replays the same launches on the same arrays
with the same numbers every time, so on the cpu backend its replay can be the captured
loops' compiled program (:mod:`dualgpu.porting.capture`) with inputs built once:

1. :func:`record` replays the graph's launches through a recorder (as a driver's captured
   run does: the first launch of each kind runs at once and teaches its step; later ones
   are deferred into the table, whose program is compiled and checked bit for bit against
   the launch path at first use). The graph's dual arrays take part through aliases (new
   DualArray objects over the same memory), so the caller's objects never change class.
2. Once a replay ran as one table with a checked program, :class:`Program` keeps that
   table's inputs (its codes, rows, buffers, numbers and dual scalars: all fixed by the
   recording) and each later replay is one call of the compiled entry point, after copying
   the buffers' values into the snapshots a tile-by-tile program starts each tile from.

Plain arrays are table arguments here (``recorder.plain``): no host code runs between a
replay's launches. Where a replay cannot be one table (a kernel the recorder runs at once,
such as a compute-bound or block-level one; a failed check), the graph keeps replaying
launch by launch.
"""
import numpy as np

from dualgpu.backends.common.plans import entry_point
from dualgpu.core.dualarray import DualArray
from dualgpu.porting import capture

__all__ = ["Program", "record"]


class _Log:
    """What the recorder reports about the replay (the interface of a traced run's log)."""

    def __init__(self):
        self.why = None
        self.allocs = []
        self.tables = 0
        self.ran_with = None

    def untraceable(self, why):
        if self.why is None:
            self.why = why

    def copied(self, copy, info):
        self.untraceable("a copy to the host")

    def ran(self, recorder, program_key, codes, table):
        self.ran_with = (program_key, codes, recorder._inputs(codes, table, program_key))


class Program:
    """One compiled call that runs a graph's launches (see the module docstring)."""

    def __init__(self, program_key, codes, inputs):
        self.program_key, self.codes, self.inputs = program_key, codes, inputs
        self.program = capture._PROGRAMS[program_key]
        self.steps = [key[-1] for key in program_key]
        self.entry = entry_point(self.program, inputs) or self.program
        self.runs = 0
        groups = len(capture._kinds_of(program_key)[0])
        self.refresh = []  # (snapshot, values): copied before each run of a tile-by-tile one
        if self.steps[0].outer(self.steps):
            snapshots = inputs[-1 - 2 * groups:-1 - groups]
            for g in range(groups):
                self.refresh += list(zip(snapshots[g], inputs[2 + 2 * g]))
            self.control = inputs[-1]
        else:
            self.control = None

    def holds(self):
        """True while the program and its kernels are as they were compiled."""
        return (capture._PROGRAMS.get(self.program_key) is self.program
                and all(step.holds() for step in self.steps))

    def run(self):
        self.runs += 1
        for snapshot, values in self.refresh:
            snapshot[...] = values
        if self.control is not None:
            self.control[:] = 0
        capture.run_program(self.entry, self.inputs, self.program_key, self.codes)


def _alias(arg, aliases):
    if (type(arg) is DualArray and not arg.tag and type(arg.values) is not DualArray
            and isinstance(arg.values, np.ndarray)):
        return capture._plain(arg, aliases)  # a new DualArray over its members, once per id
    return arg


def record(launches):
    """Run ``launches`` (``(configured launcher, args)`` pairs) through a recorder; the
    :class:`Program` that replays them from now on, or None (not yet, or never: the reason
    as the second item)."""
    aliases = {}
    calls = [(configured, tuple(_alias(a, aliases) for a in args))
             for configured, args in launches]
    log = _Log()
    recorder = capture._Recorder("capture_graph", explicit=False, capturing=True)
    recorder.trace = log
    recorder.plain = {}  # no host code runs between a replay's launches: plain arrays too
    for alias in aliases.values():
        recorder.adopt(alias)
    token = capture._CURRENT.set(recorder)
    capture._Recorder.open.append(recorder)
    try:
        for configured, args in calls:
            configured(*args)
    finally:
        capture._CURRENT.reset(token)
        capture._Recorder.open.remove(recorder)
        recorder.close()
    if log.why is not None:
        return None, log.why
    if log.tables != 1 or log.ran_with is None:
        return None, "its launches ran in several tables"
    program_key, codes, inputs = log.ran_with
    if program_key not in capture._PROGRAMS:  # not checked yet: its partials were all zero
        return None, None
    if not capture._PROGRAMS[program_key]:
        return None, "its table has no checked program"
    return Program(program_key, codes, inputs), None
