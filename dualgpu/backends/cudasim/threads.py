"""The threads of a simulated launch: block barriers, warp collectives and grid barriers.

numba's CUDA simulator runs one Python thread per CUDA thread, one block after
another, and has no warp collectives and no grid-wide barrier. This module runs
a launch the same way (one Python thread per CUDA thread) with a scheduler that
knows all three levels:

* a *group* is the set of threads that run together: one block, or the
  whole grid for a kernel that synchronises the grid (``cuda.cg.this_grid().sync()``);
* one thread of a group runs at a time, in thread order, until it returns or reaches a
  synchronisation point; then the next one runs. A launch is deterministic, as numba's
  simulator and the cpu backend are: atomics add in thread order, and two runs give the
  same bits (threads running at once summed a float atomic in a varying order);
* a thread that reaches a synchronisation point (``syncthreads``, a shuffle or vote,
  ``grid.sync()``) records what it waits for and sleeps;
* when every thread of the group is asleep or has returned, the scheduler resolves
  what can be resolved: warp collectives whose lanes have all arrived, blocks whose
  live threads all wait at a block barrier, and the grid barrier when every live
  thread waits there. Threads that returned early do not hold a barrier up (as on
  the GPU, where exited threads no longer count);
* if nothing can be resolved the kernel would hang on a GPU: every waiting thread
  is stopped and the launch fails with a message that says who waits where.

The collective operations themselves (what a shuffle returns) are computed by
functions passed in with each arrival; see :mod:`dualgpu.backends.cudasim.module`.
"""
import collections
import sys
import threading

import numpy as np

from dualgpu.core._paths import PACKAGE_DIR
from dualgpu.core.selection import register_simulated_thread
from dualgpu.errors import DualgpuError

__all__ = ["Aborted", "SimThread", "run_groups", "current_thread", "caller_frame", "WARP_SIZE"]

WARP_SIZE = 32
_PACKAGE_DIR = PACKAGE_DIR


def caller_frame():
    """The innermost frame outside dualgpu: the kernel (or device function) line that called
    a kernel-side function, however it was reached (``cuda.X``, ``numba.cuda.X``, ``X``)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
    return frame


class Aborted(BaseException):
    """Raised in a simulated thread whose launch has failed elsewhere (not an Exception,
    so that kernel code cannot catch it)."""


class Block:
    """Book-keeping of one block: its index, live thread count and shared memory."""

    def __init__(self, index, block_dim):
        self.index = index
        self.block_dim = block_dim
        self.size = int(np.prod(block_dim))
        self.live = self.size
        self.shared = {}  # call site -> array (see _sim_module)
        self.dynamic = None  # the dynamic shared-memory buffer, made on first use
        self.lock = threading.Lock()


class SimThread(threading.Thread):
    """One simulated CUDA thread (the attributes numba's simulator module reads are here)."""

    def __init__(self, target, args, group, block, thread_index):
        super().__init__(daemon=True)
        self._target_fn = target
        self._target_args = args
        self.group = group
        self.block = block
        from numba.cuda.simulator.kernelapi import Dim3

        self.blockIdx = Dim3(*block.index)
        self.threadIdx = Dim3(*thread_index)
        bx, by, _ = block.block_dim
        self.thread_id = thread_index[0] + bx * (thread_index[1] + by * thread_index[2])
        self.lane = self.thread_id % WARP_SIZE
        self.warp = self.thread_id // WARP_SIZE
        self.event = threading.Event()
        self.pending = None  # (kind, key, payload, where) while waiting
        self.result = None
        self.aborted = False
        self.exited = False
        self.exception = None
        self.order = 0  # its place in the group (the order threads run in)

    def run(self):
        exception = None
        self.event.wait()  # started threads wait for the go: starting many stays cheap
        self.event.clear()
        try:
            if self.aborted:
                raise Aborted()
            self._target_fn(*self._target_args)
        except Aborted:
            pass
        except BaseException as exc:  # reported by the launching thread
            exception = exc
        finally:
            self.group.exit(self, exception)

    def describe(self):
        return f"thread {tuple(self.threadIdx)} of block {tuple(self.blockIdx)}"


register_simulated_thread(SimThread)  # dualgpu.backend() is "cudasim" inside its threads


def current_thread():
    """The running :class:`SimThread` (raises if called outside a simulated launch)."""
    thread = threading.current_thread()
    if not isinstance(thread, SimThread):
        raise DualgpuError(
            "a CUDA kernel-side function (syncthreads, a shuffle, shared memory...) was "
            "called outside a kernel launch; call it from a kernel or device function."
        )
    return thread


def _where(frame):
    if frame is None:
        return "?"
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


class Group:
    """Threads that run at the same time, and the scheduler that releases them.

    ``kind`` of a wait is ``"warp"`` (a warp collective: ``key`` groups the lanes that
    take part together, ``payload`` is ``(mask, value, resolve)``), ``"block"``
    (``syncthreads`` and its reductions: ``payload`` is ``(predicate, resolve)``) or
    ``"grid"`` (``grid.sync()``).
    """

    def __init__(self, blocks, whole_grid):
        self.blocks = blocks
        self.whole_grid = whole_grid
        self.lock = threading.Lock()
        self.threads = []
        self.running = 0
        self.waiting = {}  # thread -> pending, in arrival order
        self.queue = collections.deque()  # threads to run, in order, after the running one
        self.failure = None

    # -- called by the simulated threads -------------------------------------------------
    def arrive(self, thread, kind, key, payload, frame):
        """Wait at a synchronisation point; return what the collective gives this thread."""
        with self.lock:
            if self.failure is not None:
                raise Aborted()
            thread.pending = (kind, key, payload, _where(frame))
            self.waiting[thread] = thread.pending
            self.running -= 1
            woken = self._hand_on()
        for other in woken:  # outside the lock: the woken threads may arrive again at once
            other.event.set()
        thread.event.wait()
        thread.event.clear()
        if thread.aborted:
            raise Aborted()
        result, thread.result = thread.result, None
        return result

    def exit(self, thread, exception):
        with self.lock:
            thread.exited = True
            thread.block.live -= 1
            self.running -= 1
            woken = ()
            if exception is not None and self.failure is None:
                thread.exception = exception
                woken = self._abort(exception)
            elif self.failure is None:
                woken = self._hand_on()
        for other in woken:
            other.event.set()

    def start(self):
        """Run the first thread (the others follow it in turn)."""
        with self.lock:
            self.queue.extend(self.threads)
            woken = self._hand_on()
        for thread in woken:
            thread.event.set()

    # -- resolution (lock held; the caller wakes the threads returned) ---------------------
    def _hand_on(self):
        """The thread to run next, the running one having stopped: the next in the queue;
        when every thread waits, the first of those the resolution releases (then the
        others, in thread order)."""
        if not self.queue and self.running == 0 and self.waiting:
            woken = self._resolve()
            if self.failure is not None:
                return woken
            self.queue.extend(sorted(woken, key=lambda t: t.order))
        return [self.queue.popleft()] if self.queue else []

    def _release(self, thread, result):
        del self.waiting[thread]
        thread.pending = None
        thread.result = result
        self.running += 1
        self._woken.append(thread)

    def _abort(self, failure):
        """Stop every waiting thread; return them (to be woken)."""
        self.failure = failure
        woken = list(self.waiting) + list(self.queue)
        for thread in woken:
            thread.aborted = True
        self.waiting.clear()
        self.queue.clear()
        return woken

    def _resolve(self):
        """Release what can be released; return the threads to wake."""
        self._woken = []
        try:
            released = self._resolve_warps() + self._resolve_blocks()
            if not released:
                released = self._resolve_grid()
            if not released:
                raise DualgpuError(self._deadlock_message())
        except DualgpuError as exc:
            return self._woken + self._abort(exc)
        return self._woken

    def _resolve_warps(self):
        by_warp = collections.defaultdict(list)
        for thread, (kind, key, payload, _) in self.waiting.items():
            if kind == "warp":
                by_warp[(thread.block, thread.warp, key)].append(thread)
        released = 0
        for (block, warp, key), lanes in by_warp.items():
            mask = lanes[0].pending[2][0]
            members = self._warp_members(block, warp)
            arrived = {t.lane for t in lanes}
            if mask is None:  # activemask(): whoever arrives together
                expected = arrived
            else:
                expected = {lane for lane, t in members.items()
                            if mask >> lane & 1 and not t.exited}
            outside = set() if mask is None else arrived - _lanes_of(mask)
            if outside:
                raise DualgpuError(
                    f"{_op(key)} at {lanes[0].pending[3]}: lane(s) {sorted(outside)} of warp "
                    f"{warp} in block {tuple(lanes[0].blockIdx)} called it with mask "
                    f"{mask:#010x}, which does not include them. A warp collective's mask "
                    "must name the calling lane; use cuda.activemask() or 0xFFFFFFFF."
                )
            if not expected <= arrived:
                continue  # lanes named in the mask are still to come (or wait elsewhere)
            resolve = lanes[0].pending[2][2]
            values = {t.lane: t.pending[2][1] for t in lanes}
            results = resolve(values, members, lanes[0].pending[3])
            for thread in lanes:
                self._release(thread, results[thread.lane])
            released += len(lanes)
        return released

    def _warp_members(self, block, warp):
        cache = getattr(block, "_warps", None)
        if cache is None:
            cache = collections.defaultdict(dict)
            for t in self.threads:
                if t.block is block:
                    cache[t.warp][t.lane] = t
            block._warps = cache
        return cache[warp]

    def _resolve_blocks(self):
        at_barrier = collections.defaultdict(list)
        for thread, (kind, _, _, _) in self.waiting.items():
            if kind == "block":
                at_barrier[thread.block].append(thread)
        released = 0
        for block, threads in at_barrier.items():
            if len(threads) != block.live:
                continue
            resolve = threads[0].pending[2][1]
            result = resolve([t.pending[2][0] for t in threads]) if resolve else None
            for thread in threads:
                self._release(thread, result)
            released += len(threads)
        return released

    def _resolve_grid(self):
        threads = [t for t, (kind, _, _, _) in self.waiting.items() if kind == "grid"]
        live = sum(block.live for block in self.blocks)
        if not threads or len(threads) != live:
            return 0
        if any(block.live == 0 for block in self.blocks):
            return 0  # a block that returned never arrives: the GPU would hang
        for thread in threads:
            self._release(thread, None)
        return len(threads)

    def _deadlock_message(self):
        places = collections.defaultdict(list)
        for thread, (kind, key, _, where) in self.waiting.items():
            places[(_op(key) if kind == "warp" else key, where)].append(thread)
        lines = []
        for (what, where), threads in list(places.items())[:6]:
            blocks = sorted({tuple(t.blockIdx) for t in threads})
            lines.append(
                f"  {len(threads)} thread(s) of block(s) {_short(blocks)} wait at {what} ({where})"
            )
        gone = [tuple(b.index) for b in self.blocks if b.live == 0]
        if gone and any(kind == "grid" for kind, _, _, _ in self.waiting.values()):
            lines.append(f"  block(s) {_short(gone)} returned without reaching grid.sync()")
        return (
            "the kernel would hang on a GPU: every running thread waits at a synchronisation "
            "point that cannot complete.\n" + "\n".join(lines) + "\n"
            "A barrier (cuda.syncthreads(), grid.sync()) must be reached by every thread of "
            "its block (grid) that has not returned, and a warp collective by every lane its "
            "mask names: move it out of the branch that only some threads take."
        )


def _lanes_of(mask):
    return {lane for lane in range(WARP_SIZE) if mask >> lane & 1}


def _op(key):
    return key[0] if isinstance(key, tuple) else key


def _short(items, limit=4):
    text = ", ".join(str(i) for i in items[:limit])
    return text + (f" ... ({len(items)} in all)" if len(items) > limit else "")


def run_groups(fn, args, grid_dim, block_dim, whole_grid):
    """Run ``fn(*args)`` once per CUDA thread of the launch.

    Blocks run one after another, each as one group, unless ``whole_grid`` is true:
    then every thread of the grid runs at the same time (grid-wide barriers work).
    The first exception raised by a simulated thread is re-raised here, with a note
    naming the thread.
    """
    block_points = list(np.ndindex(*grid_dim))
    if whole_grid:
        batches = [block_points]
    else:
        batches = [[b] for b in block_points]
    for batch in batches:
        blocks = [Block(b, block_dim) for b in batch]
        group = Group(blocks, whole_grid)
        for block in blocks:
            for point in np.ndindex(*block_dim):
                group.threads.append(SimThread(fn, args, group, block, point))
                group.threads[-1].order = len(group.threads) - 1
        group.running = len(group.threads)
        started = []
        try:
            for thread in group.threads:
                thread.start()
                started.append(thread)
        except RuntimeError as exc:  # can't start new thread: the started ones do not run
            group.failure = DualgpuError(
                f"the simulator could not start {len(group.threads)} threads at once ({exc}); "
                "use fewer threads (a grid-stride loop) or the 'cpu' or 'cuda' backend."
            )
            for thread in started:
                thread.aborted = True
        if group.failure is None:
            group.start()
        else:
            for thread in started:
                thread.event.set()
        for thread in started:
            thread.join()
        failure = group.failure
        if failure is not None:
            culprit = next((t for t in group.threads if t.exception is failure), None)
            if culprit is not None and hasattr(failure, "add_note"):
                failure.add_note(f"(raised in simulated CUDA {culprit.describe()})")
            raise failure
