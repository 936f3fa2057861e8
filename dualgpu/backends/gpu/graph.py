"""CUDA graphs of recorded launches, through numba-cuda's driver layer (``cuda.core``).

:func:`dualgpu.porting.graphs.capture_graph` records kernel launches on the cuda backend by
*stream capture*, as ``torch.cuda.graph`` and Warp's ``capture_begin`` do: a private stream
(or the user's) becomes a ``cuda.core`` ``GraphBuilder``; every launch in the block goes
through numba.cuda's dispatcher with that builder's stream (numba-cuda 0.30 takes it as a
launch stream, ``driver._to_core_stream``), so the driver records a kernel node, with the
arguments numba marshalled, instead of running it; :func:`end` instantiates the graph.
:func:`launch` then runs every recorded launch with one driver call.

Ordering with the legacy default stream (where dualgpu's copies and unstreamed launches
go): a replay on the private stream first waits for the default stream's work and then
makes the default stream wait for the graph, so host code that copies results back with
``copy_to_host()`` reads them after the graph ran, with no host synchronisation.

Nothing here is run on a GPU by the test suite (CI has none): the tests replace
:func:`begin`'s ``cuda.core`` objects with recorders and the driver's launch with a stub
(``benchmarks/gpu_launch_python.py``), and check what reaches the driver.
"""

__all__ = ["begin", "end", "abort", "launch", "capture_stream"]


def begin(stream=0):
    """``(stream, builder)``: a ``cuda.core`` stream (``stream``, or a new non-blocking one)
    and a graph builder capturing it (mode ``thread_local``: other threads' launches and
    allocations are not caught up in the capture)."""
    from cuda.core import Device
    from numba.cuda.cudadrv import driver

    core = driver._to_core_stream(stream) if stream else Device().create_stream()
    builder = core.create_graph_builder()
    builder.begin_building("thread_local")
    return core, builder


def capture_stream(builder):
    """The stream launches must name to be recorded by ``builder``."""
    return builder.stream


def end(builder):
    """Stop capturing; the executable graph of what ``builder`` recorded."""
    builder.end_building()
    return builder.complete()


def abort(builder):
    """Stop capturing after an error; nothing is kept."""
    try:
        if builder.is_building:
            builder.end_building()
    finally:
        builder.close()


def _legacy():
    from cuda.core import Stream

    return Stream.from_handle(0)


def launch(graph, core, stream=0):
    """Run ``graph``: on ``stream`` when one is given, else on its private stream ``core``
    ordered after, and before, the legacy default stream's work."""
    from numba.cuda.cudadrv import driver

    if stream:
        graph.launch(driver._to_core_stream(stream))
        return
    legacy = _legacy()
    core.wait(legacy)
    graph.launch(core)
    legacy.wait(core)
