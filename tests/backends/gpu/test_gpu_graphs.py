"""CUDA graphs of ``dualgpu.cuda.capture_graph`` (issue 41, point 2), checked offline: kernels
compile to PTX for real, the driver's launch is a stub that records what it receives
(:func:`benchmarks.gpu_launch_python.driver_stubs`), and ``cuda.core``'s device, stream,
graph builder and graph are recorders. What is checked is dualgpu's side: every launch of
the block reaches the driver once, during the capture, on the builder's stream, with the
arguments and configuration the same launch hands the driver outside a capture; a replay is
one graph launch ordered with the default stream, and no kernel launch; the builder is
closed on errors. That the driver then runs the graph is CUDA's part, and needs a GPU.
"""
import warnings

import numpy as np
import pytest

import dualgpu
from dualgpu import Dual, DualArray
from dualgpu.backends.gpu import graph as gpu_graph
from dualgpu.errors import DualgpuError
from dualgpu.porting import graphs

from benchmarks.gpu_launch_python import (LAUNCHES, STREAMS, FakeStream, device_array,
                                          driver_stubs)
import kernels_launch_plans as K

pytestmark = pytest.mark.compile


class FakeGraph:
    def __init__(self):
        self.launched, self.closed = [], False

    def launch(self, stream):
        self.launched.append(stream)

    def close(self):
        self.closed = True


class FakeBuilder:
    def __init__(self):
        self.stream = FakeStream("capture")
        self.calls = []
        self.is_building = False

    def begin_building(self, mode):
        self.calls.append(("begin", mode))
        self.is_building = True
        return self

    def end_building(self):
        self.calls.append("end")
        self.is_building = False
        return self

    def complete(self):
        self.calls.append("complete")
        self.graph = FakeGraph()
        return self.graph

    def close(self):
        self.calls.append("close")


class FakeCore(FakeStream):
    def create_graph_builder(self):
        self.builder = FakeBuilder()
        return self.builder


class FakeDevice:
    cores = []

    def create_stream(self):
        FakeDevice.cores.append(FakeCore("private"))
        return FakeDevice.cores[-1]


@pytest.fixture
def offline(monkeypatch):
    import cuda.core

    legacy = FakeStream("legacy")
    monkeypatch.setattr(cuda.core, "Device", FakeDevice)
    monkeypatch.setattr(gpu_graph, "_legacy", lambda: legacy)
    with warnings.catch_warnings(), driver_stubs(record=True), dualgpu.using_backend("cuda"):
        warnings.simplefilter("ignore")
        del LAUNCHES[:], STREAMS[:]
        yield legacy


def _args(lanes=2):
    return (DualArray(device_array((16,)), device_array((lanes, 16))),
            DualArray(device_array((16,)), device_array((lanes, 16))),
            Dual(0.25, np.arange(1.0, lanes + 1.0)))


def test_captured_launches_reach_the_driver_once_on_the_builders_stream(offline):
    u, u_new, r = _args()
    for a, b in ((u, u_new), (u_new, u), (u, u_new)):  # uncaptured: what the driver gets
        K.stencil[1, 16](a, b, r)
    expected, streams = LAUNCHES[:], STREAMS[:]
    del LAUNCHES[:], STREAMS[:]
    with dualgpu.cuda.capture_graph() as graph:
        for _ in range(3):
            K.stencil[1, 16](u, u_new, r)
            u, u_new = u_new, u
        r.partials[:] = 9.0  # recorded by value: the driver already has 1.0, 2.0
    core = FakeDevice.cores[-1]
    builder = core.builder
    assert LAUNCHES == expected
    assert [s[1:] for s in STREAMS] == [s[1:] for s in streams]
    assert all(s[0] is builder.stream for s in STREAMS)
    assert builder.calls == [("begin", "thread_local"), "end", "complete"]
    assert len(graph) == 3

    del LAUNCHES[:]
    graph.launch()
    graph.launch()
    assert LAUNCHES == []  # a replay launches no kernel through numba
    assert builder.graph.launched == [core, core]
    assert core.waits == [offline, offline] and offline.waits == [core, core]
    mine = FakeStream("mine")
    graph.launch(stream=mine)
    assert builder.graph.launched[-1] is mine
    graph.close()
    assert builder.graph.closed


def test_a_capture_on_the_users_stream_records_there(offline):
    mine = FakeCore("mine")
    u, u_new, r = _args(1)
    with dualgpu.cuda.capture_graph(stream=mine) as graph:
        assert graph.capture_stream is mine.builder.stream
        K.stencil[1, 16, mine](u, u_new, r)
        K.stencil[1, 16](u_new, u, r)
    assert [s[0] for s in STREAMS] == [mine.builder.stream] * 2
    assert graph.capture_stream == 0  # (the builder's stream while recording)
    graph.launch()
    assert mine.builder.graph.launched == [mine]


def test_an_error_in_the_block_closes_the_builder(offline):
    u, u_new, r = _args(1)
    with pytest.raises(DualgpuError, match="launched on stream .* which records one stream"):
        with dualgpu.cuda.capture_graph():
            K.stencil[1, 16](u, u_new, r)
            K.stencil[1, 16, FakeStream("other")](u, u_new, r)
    builder = FakeDevice.cores[-1].builder
    assert builder.calls == [("begin", "thread_local"), "end", "close"]
    assert graphs.ACTIVE is None
    with pytest.raises(ZeroDivisionError):
        with dualgpu.cuda.capture_graph() as graph:
            raise ZeroDivisionError
    with pytest.raises(DualgpuError, match="closed"):
        graph.launch()


def test_plain_arguments(offline):
    """Plain device arrays and a float (lanes beyond one tile slice the device arrays, which
    the fake arrays here cannot: that path is the launch path's own, captured as it runs)."""
    u, u_new = device_array((16,)), device_array((16,))
    K.stencil[1, 16](u, u_new, 0.25)
    K.double_into[1, 16](u, u_new)
    expected = LAUNCHES[:]
    del LAUNCHES[:], STREAMS[:]
    with dualgpu.cuda.capture_graph() as graph:
        K.stencil[1, 16](u, u_new, 0.25)
        K.double_into[1, 16](u, u_new)
    assert LAUNCHES == expected and len(graph) == 2
    assert all(s[0] is FakeDevice.cores[-1].builder.stream for s in STREAMS)


def test_snapshots_between_lane_tiles_live_as_long_as_the_graph(monkeypatch):
    """A launch of several lane tiles copies arrays it reads and writes into snapshots and
    back before each tile; in a capture those copies are graph nodes that read the
    snapshots at every replay, so the graph keeps them (``tiles.KEEP``)."""
    import numba.cuda

    from dualgpu.backends.common import tiles

    class Device:  # what snapshot() calls on a device array
        __cuda_array_interface__ = {}

        def copy_to_device(self, other, stream=0):
            self.source = other

    monkeypatch.setattr(numba.cuda, "device_array_like", lambda a, stream=0: Device())
    with dualgpu.using_backend("cpu"):
        with dualgpu.cuda.capture_graph() as graph:
            assert tiles.KEEP is graph.keep
            copy = tiles.snapshot(Device())
        assert tiles.KEEP is None
    assert graph.keep == [copy]
    graph.close()
    assert graph.keep is None
