"""Running one cpu-backend launch on several cores: helper threads that claim pieces of work.

A parallel launch is cut into *pieces* (a range of rows, blocks or lane tiles).
The calling thread and ``numba.get_num_threads() - 1`` helper threads all run
the same compiled launcher, which claims pieces from a shared counter (an
atomic add) until none are left; the caller then waits only for pieces a
helper has already started. So:

- work is balanced dynamically: a helper that the operating system does not
  schedule (another busy process on a 2-core machine) takes no piece, and the
  caller does its share instead of waiting for it (numba's ``prange`` splits
  statically, so one descheduled worker stalls the whole launch);
- small launches never wake a helper, and nothing is decided by a core
  count or by one reading of the machine's load: :class:`LaunchCost` keeps the
  measured serial and parallel cost per item of each launch shape (medians of
  the last few launches); a launch goes parallel when its serial estimate
  exceeds :data:`PARALLEL_MIN_SECONDS` and the parallel arm is measured faster,
  with hysteresis, and the arm not in use is re-tried at a bounded share of the
  time, so a choice made under noise never holds for a whole run.

Helpers are Python threads that call the numba dispatcher of a launcher
compiled with ``nogil=True``; they are started on first use and are daemons.
"""
import collections
import contextlib
import os
import statistics
import threading
import time

import numba
import numpy as np
from numba import njit, types
from numba.core import cgutils

from dualgpu.compiled.intrinsics import intrinsic

__all__ = [
    "PARALLEL_MIN_SECONDS", "PARALLEL_MIN_ITEMS", "PIECES_SERIAL_MIN_ITEMS", "ENABLED",
    "LaunchCost", "run_parallel", "compile_here", "available_threads", "launch_threads",
    "machine_busy",
    "thread_bound", "chunk_length",
    "control_array", "serial_launches", "claim", "finish", "CONTROL_SLOTS",
]

#: False: every launch runs serially (see :func:`serial_launches`).
ENABLED = True

#: True: every launch that may run in parallel does, whatever its cost (tests).
FORCE = False

#: A launch runs in parallel when its estimated serial time is at least this.
#: Waking a helper thread and joining it costs 20-60 us on a quiet 2-core
#: machine (measured); a piece a descheduled helper holds can cost a time slice.
PARALLEL_MIN_SECONDS = 300e-6

#: Launches of fewer items (CUDA threads times lane tiles) are never timed and
#: never run in parallel: the fast path for small kernels.
PARALLEL_MIN_ITEMS = 256

#: Launches of at least this many items that may run in parallel run their serial launches
#: with the "pieces" launcher as well (one thread claims every piece), so a kernel that
#: switches to parallel compiles one launcher, not two (a compile costs 0.2-2 s; claiming
#: pieces costs a few microseconds, against about 50 us of work at this size).
PIECES_SERIAL_MIN_ITEMS = 65536

#: Pieces per thread a parallel launch is cut into (dynamic balance vs claims).
PIECES_PER_THREAD = 8

#: Hysteresis: the arm not in use (serial or parallel) takes over only when its estimate
#: beats the arm in use by this factor.
MIN_SPEEDUP = 1.1

#: The arm not in use is tried again once the launches since its last try took this many
#: times its estimated cost: re-checks take at most about 1/EXPLORE_RATIO of the time
#: (twice that for parallel tries, whose first launch wakes the helpers), whatever the
#: launch size, and neither arm is left untried for long.
EXPLORE_RATIO = 32

#: A change of the machine's load against the arm in use re-tries the other arm at once,
#: provided the launches since its last try took this many times its estimated cost (a load
#: that flips every reading costs at most about 1/NUDGE_RATIO of the time in tries).
NUDGE_RATIO = 8

#: Launches remembered per arm; an arm's estimate is the median of them (a single slow
#: launch, a helper descheduled or woken from sleep, moves no estimate).
SAMPLES = 5

#: Slots of the control array: pieces claimed, pieces done, helper error flag, and the
#: number of pieces (written by the launcher, which works it out from the grid).
CONTROL_SLOTS = 4
_CLAIMED, _DONE, _ERROR, _PIECES = 0, 1, 2, 3


# ---------------------------------------------------------------------------
# atomics on an int64 control array (compiled code)
# ---------------------------------------------------------------------------
@intrinsic
def _fetch_add(typingctx, array, index, value):
    """Atomically add ``value`` to ``array[index]`` (int64) and return the old value."""
    if not (isinstance(array, types.Array) and array.dtype == types.int64):
        return None
    sig = types.int64(array, index, value)

    def codegen(context, builder, signature, args):
        ary = context.make_array(array)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, array, ary, [args[1]])
        delta = context.cast(builder, args[2], signature.args[2], types.int64)
        return builder.atomic_rmw("add", ptr, delta, "seq_cst")

    return sig, codegen


@njit(inline="always")
def claim(control, count):
    """Claim ``count`` pieces: return the index of the first (>= the total when none are left)."""
    return _fetch_add(control, 0, count)


@njit(inline="always")
def finish(control, count):
    """Mark ``count`` claimed pieces as done."""
    _fetch_add(control, 1, count)


@njit(nogil=True, cache=True)
def _done(control):
    return _fetch_add(control, 1, 0)


@njit(nogil=True, cache=True)
def _spin_until_changed(signal, seen, spins):
    """Spin (no GIL held) until ``signal[0] != seen``; False after ``spins`` tries."""
    for _ in range(spins):
        if _fetch_add(signal, 0, 0) != seen:
            return True
    return False


#: How long a helper thread spins, without the GIL, for the next job before it blocks
#: (atomic reads, about 7 ns each on the 2-core VM: 1.4 ms): a helper woken from a blocked wait
#: joins a launch 0.1-1 ms late (measured: a 1.8 ms Gray-Scott step then took anywhere
#: from 1.1 to 2.0 ms in parallel), one still spinning joins within microseconds.
SPINS = 200_000


def _cpus():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def thread_bound():
    """The most threads a launch may use: numba's thread setting (``NUMBA_NUM_THREADS``,
    ``numba.set_num_threads``) and the CPUs this process may run on."""
    return max(1, min(numba.get_num_threads(), _cpus()))


def available_threads():
    """Return how many threads a parallel launch may use now.

    :func:`thread_bound` bounds it; so do the other processes running right now
    (Linux: ``/proc/loadavg``, read at most every :data:`LOAD_CHECK_SECONDS`): a
    core another process keeps busy cannot run a helper, and a helper the system
    deschedules holds up every join (measured: a 10^6-cell stencil launch beside a
    busy process took 7.5x longer with a helper than without). Block-level launches,
    which measure no costs, go by it; see :func:`launch_threads` for the others.
    """
    threads = thread_bound()
    if threads > 1:
        threads = max(1, min(threads, _cpus() - _others_running()))
    return threads


def machine_busy():
    """True when other processes keep a core busy (one reading of :func:`_others_running`,
    not confirmed by a second: the first launch of a process has no earlier one) on a
    machine where a launch may use several threads. A hint to :class:`LaunchCost` (its
    first arm, and when to re-check), never a decision; read at most every
    :data:`LOAD_CHECK_SECONDS` (a reading costs 20-130 us on a loaded 2-core machine,
    where a launch this decides takes 0.3 ms or more)."""
    now = time.monotonic()
    if now - _BUSY[0] > LOAD_CHECK_SECONDS:
        busy = False
        if thread_bound() > 1:
            _others_running()
            busy = _LOAD[2] > 0  # this reading, unconfirmed
        _BUSY[0], _BUSY[1] = now, busy
    return _BUSY[1]


_BUSY = [-1e9, False]  # time of the last reading, its answer


def launch_threads():
    """Threads for a launch whose measured costs (:class:`LaunchCost`) chose parallel.

    Every thread :func:`thread_bound` allows on a machine of 2 (the measured costs, not
    one reading of the load, decide serial or parallel: on 2 cores any other running
    thread, an instant of another process, sent launches serial, whole N-body Jacobians
    among them: issue 41); on a larger machine :func:`available_threads`, at least 2.
    """
    bound = thread_bound()
    if bound <= 2:
        return bound
    return max(2, available_threads())


#: How long a reading that found no other process running is reused.
LOAD_CHECK_SECONDS = 0.05
_LOAD = [0.0, 0, 0]  # time of the last reading, the answer, the last raw reading


def _others_running():
    """Processes and threads running now besides this process's (0 where it cannot be read).

    ``/proc/loadavg`` counts every running thread, this process's too: its own helper
    threads (still spinning after a launch, see :data:`SPINS`) must not make it think
    the machine is busy. The machine counts as busy only when two readings in a row say
    so: a kernel thread or a short-lived process seen once used to send every launch of
    the next :data:`LOAD_CHECK_SECONDS` serial (measured: 20-45 of 200 pendulum-ensemble
    launches, 15% of the run). A reading that saw others running is not reused, so a
    machine that stays busy is confirmed at the next launch.
    """
    now = time.monotonic()
    if now - _LOAD[0] > LOAD_CHECK_SECONDS or _LOAD[2] > 0:
        try:
            with open("/proc/loadavg") as fh:
                running = int(fh.read().split()[3].split("/")[0])
        except (OSError, ValueError, IndexError):
            running = 1
        reading = max(0, running - _own_running())
        _LOAD[0], _LOAD[1], _LOAD[2] = now, min(reading, _LOAD[2]), reading
    return _LOAD[1]


def _own_running():
    """Threads of this process running now: the caller, helpers spinning, and any other
    thread of the process (numba's own OpenMP threads spin for about 10 ms after a
    ``prange`` loop: counted as another process, one reading sent every launch of the next
    50 ms serial). Linux: the states in ``/proc/self/task``; elsewhere, or in a process
    with more than :data:`OWN_THREADS_READ_MAX` threads, the caller and active helpers."""
    estimate = 1 + _HELPERS.active
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return estimate
    if len(tasks) > OWN_THREADS_READ_MAX:
        return estimate
    running = 0
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:  # the thread ended
            continue
        end = stat.rfind(b")")
        if stat[end + 2:end + 3] == b"R":
            running += 1
    return max(running, 1)


#: Above this many threads in the process, :func:`_own_running` estimates instead of reading
#: every thread's state (about 5 us each).
OWN_THREADS_READ_MAX = 64


# ---------------------------------------------------------------------------
# helper threads
# ---------------------------------------------------------------------------
class _Helpers:
    """Daemon threads that run the posted job (a launcher and its arguments) when woken."""

    def __init__(self):
        self._condition = threading.Condition()
        self._job = None
        self._generation = 0
        self._signal = np.zeros(1, np.int64)  # the generation, for helpers spinning natively
        self._threads = []
        self._lock = threading.Lock()
        self.active = 0  # helpers spinning or running a job (not blocked)

    def ensure(self, count):
        with self._lock:
            while len(self._threads) < count:
                thread = threading.Thread(
                    target=self._serve, name=f"dualgpu-cpu-helper-{len(self._threads)}",
                    daemon=True,
                )
                with self._condition:
                    self.active += 1
                self._threads.append(thread)
                thread.start()

    def post(self, job):
        with self._condition:
            self._job = job
            self._generation += 1
            self._signal[0] = self._generation
            self._condition.notify_all()

    def clear(self):
        """Forget the job (its arrays), without waking anyone: a late helper then skips it."""
        with self._condition:
            self._job = None

    def _serve(self):
        seen = 0
        while True:
            _spin_until_changed(self._signal, seen, SPINS)  # a hot start for the next launch
            with self._condition:
                if self._generation == seen:
                    self.active -= 1
                    while self._generation == seen:
                        self._condition.wait()
                    self.active += 1
                seen = self._generation
                job = self._job
            if job is not None:  # None: finished (and forgotten) before this helper woke
                _run_job(*job)
            job = None  # hold no arrays while waiting


def _run_job(launcher, args, control, errors):
    try:
        launcher(*args)
    except BaseException as exc:  # reported by the caller of the launch
        errors.append(exc)
        control[_ERROR] = 1


_HELPERS = _Helpers()


def compile_here(launcher, args):
    """Compile ``launcher`` for ``args`` on this thread, before helper threads may call it
    (a helper that found it uncompiled would compile it too, under numba's lock)."""
    launcher.compile(tuple(launcher.typeof_pyval(a) for a in args))


def run_parallel(launcher, args, control, threads):
    """Run ``launcher(*args)`` on this thread and ``threads - 1`` helpers; return when all is done.

    ``control`` (see :func:`control_array`) is among ``args``: the launcher
    writes the number of pieces into it and claims pieces until none are left.
    Returns the seconds this thread spent waiting for helpers after its own work.
    """
    errors = []
    if threads > 1:
        _HELPERS.ensure(threads - 1)
        _HELPERS.post((launcher, args, control, errors))
    launcher(*args)
    pieces = control[_PIECES]
    waited = 0.0
    if _done(control) < pieces:
        start = time.perf_counter()
        spins = 0
        while _done(control) < pieces:
            if control[_ERROR]:
                break
            spins += 1
            if spins > 64:
                os.sched_yield() if hasattr(os, "sched_yield") else time.sleep(0)
        waited = time.perf_counter() - start
    if threads > 1:
        _HELPERS.clear()  # do not keep the launch's arrays alive
    if errors:
        raise errors[0]
    return waited


# ---------------------------------------------------------------------------
# deciding serial or parallel from measured costs
# ---------------------------------------------------------------------------
class LaunchCost:
    """Measured costs of one compiled launch shape, and the serial/parallel choice they drive.

    Each arm (serial, parallel) keeps its last :data:`SAMPLES` launches as
    seconds per item (one CUDA thread of one lane tile); its estimate is their
    median. The first serial launch (it compiles) and the first parallel launch
    (it starts the helper threads) are not samples, nor a parallel launch right
    after serial ones (it wakes a helper that went to sleep; the next launch runs
    in parallel again to measure).

    A launch runs serially while fewer than :data:`PARALLEL_MIN_ITEMS` items or
    an estimated serial time under :data:`PARALLEL_MIN_SECONDS`. Otherwise:

    - the arm in use is kept until the other arm's estimate beats it by
      :data:`MIN_SPEEDUP` (hysteresis: two near-equal arms do not flap);
    - the arm not in use is tried again once the launches since its last try took
      :data:`EXPLORE_RATIO` times its estimated cost, so a choice made under noise
      (another process busy for a while, a helper descheduled) is re-checked at a
      bounded cost and never kept for a whole run on stale samples: a try replaces
      the samples of that arm (they may date from another load). A try that was
      itself noisy costs a few launches: the arm it put in use is measured at every
      launch, and its median hands back after three slow ones;
    - ``presume`` (a compute-bound kernel, see :meth:`parallel`) starts in the
      parallel arm without serial launches to measure; others start serial and try
      parallel once two serial launches say it may pay.
    """

    __slots__ = ("serial", "parallel_samples", "in_parallel", "since_other", "_first",
                 "_first_parallel", "_last_serial", "_again", "_trying", "_busy", "counts")

    def __init__(self):
        self.serial = collections.deque(maxlen=SAMPLES)  # seconds per item
        self.parallel_samples = collections.deque(maxlen=SAMPLES)
        self.in_parallel = None  # the arm in use: None until decided
        self.since_other = 0.0  # seconds of launches since the arm not in use was tried
        self._first = True
        self._first_parallel = True
        self._last_serial = False  # the last launch ran serially
        self._again = None  # the arm of the next launch (the last was not measured), or None
        self._trying = False  # the current launch tries the arm not in use
        self._busy = False  # the machine's load at the last decision
        self.counts = [0, 0]  # launches run serially, in parallel (for reports)

    def estimate(self, parallel):
        """Median seconds per item of the ``parallel`` (or serial) arm; None if unmeasured."""
        samples = self.parallel_samples if parallel else self.serial
        return statistics.median(samples) if samples else None

    def parallel(self, items, presume=False):
        """True if a launch of ``items`` should run in parallel.

        ``presume``: the kernel is compute-bound (its threads loop), so a launch of
        :data:`PARALLEL_MIN_ITEMS` or more starts in parallel (serially if other
        processes keep the machine busy then), without serial launches to measure
        first; the measured arms decide from then on, as for any kernel. When the
        machine's load changes (:func:`machine_busy`) against the arm in use (busy in
        parallel, quiet in serial), the other arm is re-tried at once (at most once per
        :data:`NUDGE_RATIO` times its cost).
        """
        if FORCE:
            return True
        if items < PARALLEL_MIN_ITEMS:  # (launch plans run these serially unmeasured)
            return False
        serial = self.serial
        if presume:
            if serial and min(serial) * items < PARALLEL_MIN_SECONDS:
                return False
        elif (not serial or min(serial) * items < PARALLEL_MIN_SECONDS
              or (self.in_parallel is None and len(serial) < 2)):
            return False
        if self._again is not None:
            again, self._again = self._again, None
            return again
        busy = machine_busy()
        if self.in_parallel is None:  # the first eligible launch: run (or try) parallel
            self.in_parallel = presume and not busy
            self._busy = busy
            self._trying = not self.in_parallel and not presume
            return self.in_parallel or not presume
        arm = self.in_parallel
        mine, other = self.estimate(arm), self.estimate(not arm)
        if mine is None:  # the arm in use is not measured yet
            return arm
        if other is None:  # never measured: as if it cost what this arm does
            other_cost = (mine or 0.0) * items
        else:
            if other * MIN_SPEEDUP < mine:  # the other arm wins
                self.in_parallel = arm = not arm
                self.since_other = 0.0
                return arm
            other_cost = other * items
        if busy != self._busy:
            self._busy = busy
            if busy == arm and self.since_other >= NUDGE_RATIO * other_cost:
                # the load changed against the arm in use: re-check now
                self._trying = True
                return not arm
        if self.since_other >= EXPLORE_RATIO * other_cost:
            self._trying = True
            return not arm
        return arm

    def _spent(self, seconds, parallel):
        """Account a measured launch; True if it is a try of the arm not in use."""
        if self._trying:  # a try of the other arm: the arm in use is re-checked from now
            self._trying = False
            self.since_other = 0.0
            return True
        if parallel == self.in_parallel or self.in_parallel is None:
            self.since_other += seconds
        return False

    def record_serial(self, seconds, items):
        self._last_serial = True
        self.counts[0] += 1
        if self._first:  # the first serial launch compiles
            self._first = False
            if self._trying:  # a try of the serial arm: measure the next launch
                self._again = False
            return
        tried = self._spent(seconds, False)
        if items > 0:
            if tried:  # the samples from before the last try are stale (the load changed)
                self.serial.clear()
            self.serial.append(seconds / items)

    def record_parallel(self, seconds, items):
        after_serial, self._last_serial = self._last_serial, False
        self.counts[1] += 1
        if self._first_parallel:  # the first parallel launch starts the helper threads
            self._first_parallel = False
            if self.in_parallel is not None:
                self._again = True
            return
        if after_serial and (self.serial or not self._first):
            # helpers idle since the last parallel launch went to sleep, and waking one
            # costs 0.1-5 ms on a VM: measured as a sample, it made every try of the
            # parallel arm lose, so a memory-bound kernel stayed serial at 0.85 ms per
            # launch against 0.45-0.6 ms in parallel. The next launch measures instead
            # (still the same try, when it is one).
            self._again = True
            return
        tried = self._spent(seconds, True)
        if items > 0:
            if tried:
                self.parallel_samples.clear()
            self.parallel_samples.append(seconds / items)


def control_array():
    """A fresh control array for one parallel launch."""
    return np.zeros(CONTROL_SLOTS, np.int64)


def chunk_length(base, griddim, blockdim, inner, tiles, threads):
    """Units per piece of a "pieces" launcher (indices of a row, or blocks).

    About :data:`PIECES_PER_THREAD` pieces per thread in all; a piece never
    spans two rows or two lane tiles, and rows are cut at multiples of 64
    indices where they are long (aligned vector loops).
    """
    wanted = PIECES_PER_THREAD * threads
    per_tile = -(-wanted // max(tiles, 1))
    if base == "blocks":
        length, rows = griddim[0] * griddim[1] * griddim[2], 1
    else:
        axis = "xyz".index(inner)
        length = griddim[axis] * blockdim[axis]
        rows = 1
        for k in range(3):
            if k != axis:
                rows *= griddim[k] * blockdim[k]
    if rows >= per_tile:
        return length
    chunk = -(-length * rows // per_tile)
    if base != "blocks" and chunk > 256:
        chunk = -(-chunk // 64) * 64
    return max(1, min(chunk, length))


@contextlib.contextmanager
def serial_launches():
    """Within the block every cpu-backend launch runs serially (for measurements and tests)."""
    global ENABLED
    previous = ENABLED
    ENABLED = False
    try:
        yield
    finally:
        ENABLED = previous
