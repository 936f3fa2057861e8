"""Launch graphs: record a time loop's kernel launches once, replay them with one call.

``dualgpu.cuda.capture_graph()`` is dualgpu's form of ``torch.cuda.graph`` and Warp's
``wp.ScopedCapture``: the launches made in its block (plain or dual arguments alike) are
recorded, not run, and ``graph.launch()`` runs all of them, in order, on the arguments they
were recorded with::

    u = cuda.to_device(u0)                   # allocate before the capture
    u_new = cuda.device_array_like(u)
    with cuda.capture_graph() as graph:      # 100 steps, recorded once
        for _ in range(100):
            step[blocks, threads](u, u_new, r)
            u, u_new = u_new, u
    for _ in range(10):
        graph.launch()                       # 100 steps per call, no Python per step
    result = u.copy_to_host()

On the cuda backend the block is a CUDA stream capture (:mod:`dualgpu.backends.gpu.graph`)
and a replay is one ``cuGraphLaunch``. On ``cpu`` the first replays run the launches through
the captured loops' recorder, and once they ran as one checked table
(:mod:`dualgpu.porting.graph_program`: plain and dual launches of the kernels captured
loops take),
a replay is one call of that table's compiled program; otherwise, and on ``cudasim``, the
recorded launches run one after another through their launch plans. The meaning is the
same everywhere, so a program using graphs runs unchanged on every backend.

The contract is the one CUDA graphs have everywhere, and it is checked where it can be:

- *Frozen arguments.* Each launch replays with the arrays it was recorded with (their
  memory, whatever it then holds) and the numbers it was given; a :class:`~dualgpu.Dual`
  scalar is recorded by value (changing it later changes nothing). Python in the block
  runs once: a branch, a step count, a clock or a random draw are the recording's.
- *Nothing runs during the capture*, so host code in the block that reads a device array
  (``copy_to_host()`` included) sees the values from before it. Allocation (``to_device``,
  ``device_array``, ``device_array_like``: the graph would hold memory freed after the
  block) and host (numpy) array arguments (numba.cuda copies those at each launch) are
  refused in the block with an error saying how to move them out.
- *One capture at a time, on the thread that opened it*; a replay inside a capture is
  refused. Launches through dualgpu's kernels (``dualgpu.cuda.jit``) are recorded; a raw
  numba.cuda kernel is recorded on the cuda backend only when launched on
  ``graph.capture_stream``.

See the user guide's "Launch graphs" section (Jacobians page) and
``docs/dev/captured-loops.md``.
"""
import contextlib
import copy
import threading

import numpy as np

from dualgpu.backends.common import tiles
from dualgpu.backends.gpu import graph as gpu_graph
from dualgpu.core import hooks
from dualgpu.core.dual import Dual
from dualgpu.core.dualarray import DualArray
from dualgpu.core.selection import backend
from dualgpu.errors import DualgpuError
from dualgpu.porting import capture, graph_program

__all__ = ["capture_graph", "LaunchGraph", "ACTIVE", "refuse", "refuse_copy", "TRIES"]

#: the :class:`LaunchGraph` being recorded, or None (read at every launch: a module global)
ACTIVE = None

#: cpu backend: replays that try to become one compiled table before a graph keeps
#: replaying launch by launch (the first teaches each kind of launch its step)
TRIES = 3


def _host_array(value):
    return type(value) is np.ndarray


class LaunchGraph:
    """Launches recorded by :func:`capture_graph`; ``launch()`` replays them.

    Made by :func:`capture_graph`, not by hand.

    Parameters
    ----------
    stream : stream, optional
        Where replays run by default on the cuda backend (0: the capture's private stream,
        ordered with the default stream).

    Examples
    --------
    >>> from dualgpu import cuda
    >>> with cuda.capture_graph() as graph:
    ...     pass
    >>> len(graph), graph.recording
    (0, False)
    """

    def __init__(self, stream=0):
        self.backend = backend()
        self.stream = stream  # where replays run by default (0: the capture's own stream)
        self.launches = []  # (configured launcher, arguments): kept alive for the graph
        self.keep = []  # device buffers the recorded launches use beyond their arguments
        self.thread = threading.get_ident()
        self._core = self._builder = self._graph = None
        self.recording = True
        self.program = None  # cpu: the compiled table that replays it (graph_program)
        self.tries = 0
        self.why = None  # cpu: why its replays run launch by launch (after TRIES), or None

    def __len__(self):
        return 0 if self.launches is None else len(self.launches)

    def __repr__(self):
        state = "recording" if self.recording else "closed" if self._closed() else "ready"
        return f"<LaunchGraph of {len(self)} launches on {self.backend}, {state}>"

    @property
    def capture_stream(self):
        """While recording on the cuda backend, the stream launches must name to be
        recorded (a raw numba.cuda kernel: ``kernel[g, b, graph.capture_stream](...)``);
        0 elsewhere."""
        if self.recording and self._builder is not None:
            return gpu_graph.capture_stream(self._builder)
        return 0

    def _closed(self):
        return self.launches is None

    def record(self, configured, args, kwargs):
        """Record ``configured(*args)`` (called by the launcher while the capture is open)."""
        name = configured.kernel.__name__
        if kwargs:
            raise DualgpuError(
                f"kernel {name} got keyword arguments inside capture_graph(); kernels take "
                "their arguments positionally. Fix: pass them in the kernel's order.")
        for position, arg in enumerate(args):
            # (a captured buffer's members: reading arg.values would be a host read of it)
            host = _host_array(arg) or (isinstance(arg, DualArray)
                                        and _host_array(capture.members(arg)[0]))
            if host:
                raise DualgpuError(
                    f"argument {position} of kernel {name} inside capture_graph() is a host "
                    f"(numpy) array of shape {arg.shape}; numba.cuda copies host arrays to "
                    "the device at each launch, which a graph cannot replay. Fix: copy it "
                    "once before the capture, d = dualgpu.cuda.to_device(a), and launch "
                    "with d.")
        args = tuple(copy.deepcopy(a) if isinstance(a, Dual) else a for a in args)
        stream = configured.stream  # refused on every backend: the program runs on each
        if stream and stream is not self.stream and stream is not self.capture_stream:
            raise DualgpuError(
                f"kernel {name} was launched on stream {stream!r} inside "
                "capture_graph(), which records one stream. Fix: launch without a "
                "stream, or open the capture on yours: capture_graph(stream=...).")
        if self.backend == "cuda":
            configured.kernel.launch(configured.griddim, configured.blockdim,
                                     self.capture_stream, configured.sharedmem, *args)
        self.launches.append((configured, args))

    def launch(self, stream=0):
        """Run the recorded launches, in order (one CUDA graph launch on the cuda backend,
        ordered with the default stream's work; on ``stream`` where one is given)."""
        if self.recording:
            raise DualgpuError("graph.launch() inside its own capture_graph() block; launch "
                               "it after the block.")
        if self._closed():
            raise DualgpuError("this graph was closed (graph.close()); capture a new one.")
        if ACTIVE is not None:
            raise DualgpuError(
                "graph.launch() inside another capture_graph() block: graphs are not "
                "nested. Fix: launch it before or after that block.")
        if backend() != self.backend:
            raise DualgpuError(
                f"this graph was recorded on the {self.backend} backend and the active one "
                f"is {backend()}; launch it under dualgpu.using_backend({self.backend!r}).")
        if self.backend == "cuda":
            gpu_graph.launch(self._graph, self._core, stream or self.stream)
            return
        if self.backend == "cpu" and capture.ENABLED and capture.current() is None:
            program = self.program
            if program is not None and program.holds():
                program.run()
                return
            if self.tries < TRIES:  # replay through a recorder until it is one table
                self.tries += 1
                self.program, self.why = graph_program.record(self.launches)
                if self.program is not None or self.why is None:
                    # forgotten later (a rule defined), or not checked yet (all its partials
                    # were zero): TRIES tries again
                    self.tries = 0
                return
        for configured, args in self.launches:
            configured(*args)

    def close(self):
        """Free the graph and let go of its arrays."""
        graph, self._graph, self.launches, self.keep = self._graph, None, None, None
        if graph is not None and hasattr(graph, "close"):
            graph.close()


def refuse(what, fix):
    """Raise the error for ``what`` (an allocation, a ufunc, a reduction) inside a capture
    opened on this thread."""
    if ACTIVE is not None and ACTIVE.thread == threading.get_ident():
        raise DualgpuError(
            f"{what} inside capture_graph(), which records kernel launches only (nothing "
            f"runs during a capture). Fix: {fix}")


def refuse_copy(what):
    """Refuse a copy into a device array inside a capture (nothing runs there)."""
    refuse(what, "copy before the capture_graph() block, or between replays (a graph "
           "replays kernel launches only: a copy in the block would run once, now, not at "
           "each replay).")


hooks.install(device_copy=refuse_copy)


@contextlib.contextmanager
def capture_graph(stream=0):
    """Record the kernel launches of the ``with`` block into a graph, replayed by its
    ``launch()``.

    The launches are recorded, not run; each replay runs them in order on the arrays and
    numbers they were recorded with (the user guide's "Launch graphs" section states the
    contract).

    Parameters
    ----------
    stream : stream, optional
        cuda backend: the stream to capture on, and where replays run by default. The
        default, 0, captures on a private non-blocking stream and orders each replay with
        the default stream's work.

    Yields
    ------
    LaunchGraph
        The graph; it holds its launches once the block ends.

    Raises
    ------
    DualgpuError
        For a capture opened inside another one. In the block: an allocation, a ufunc or
        reduction, a host (numpy) array argument, keyword arguments, or (cuda) a launch on
        another stream.

    Examples
    --------
    >>> import numpy as np
    >>> from dualgpu import Dual, cuda, dual_array
    >>> @cuda.jit
    ... def decay(u, rate):
    ...     i = cuda.grid(1)
    ...     if i < u.shape[0]:
    ...         u[i] = u[i] * (1.0 - rate)
    >>> u = cuda.to_device(dual_array(np.ones(4), lanes=1))
    >>> with cuda.capture_graph() as graph:
    ...     for _ in range(10):
    ...         decay[1, 4](u, Dual(0.1, [1.0]))
    >>> graph.launch()                       # 10 steps
    >>> graph.launch()                       # 10 more
    >>> out = u.copy_to_host()
    >>> bool(np.allclose(out.values, 0.9 ** 20))
    True
    >>> bool(np.allclose(out.partials[0], -20 * 0.9 ** 19))
    True
    """
    global ACTIVE
    if ACTIVE is not None:
        raise DualgpuError("capture_graph() inside another capture_graph() block: one "
                           "capture at a time. Fix: close the first block before opening "
                           "another.")
    graph = LaunchGraph(stream)
    if graph.backend == "cuda":
        graph._core, graph._builder = gpu_graph.begin(stream)
    ACTIVE, tiles.KEEP = graph, graph.keep
    try:
        yield graph
    except BaseException:
        if graph._builder is not None:
            gpu_graph.abort(graph._builder)
        graph.launches = None
        raise
    else:
        if graph._builder is not None:
            graph._graph = gpu_graph.end(graph._builder)
    finally:
        ACTIVE, tiles.KEEP = None, None
        graph.recording = False
