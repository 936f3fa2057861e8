"""Launch graphs (``dualgpu.cuda.capture_graph``, issue 41 point 2) on the cpu and cudasim
backends: a replay computes what the same launches made one by one compute, bit for bit,
values and partials, float32 and float64, and its derivatives match central differences;
the capture's contract (frozen arguments, nothing runs in the block, no allocation or host
arrays in it, one capture at a time) holds or is refused with a clear error. The cuda
backend's CUDA graphs are checked offline in tests/backends/gpu/test_gpu_graphs.py.
"""
import threading

import numpy as np
import pytest

import dualgpu
from dualgpu import Dual, DualArray, cuda
from dualgpu.errors import DualgpuError
from dualgpu.porting import capture, graphs

import kernels_capture as K
import kernels_launch_plans as P
from kernels_capture import EPS, TOL, same_bits, u0


def _buffers(x, lanes, dtype):
    u = cuda.to_device(DualArray(x.astype(dtype), np.zeros((lanes, len(x)), dtype)))
    return u, cuda.device_array_like(u)


def _steps(u, u_new, r, steps):
    for _ in range(steps):
        K.heat_step[1, 16](u, u_new, r)
        u, u_new = u_new, u
    return u, u_new


def _direct(x, r, steps, lanes, dtype):
    u, u_new = _buffers(x, lanes, dtype)
    return _steps(u, u_new, r, steps)[0].copy_to_host()


def _replayed(x, r, steps, replays, lanes, dtype):
    u, u_new = _buffers(x, lanes, dtype)
    with cuda.capture_graph() as graph:
        u, u_new = _steps(u, u_new, r, steps)
    for _ in range(replays):
        graph.launch()
    return graph, u.copy_to_host()


@pytest.mark.parametrize("name", ["cpu", "cudasim"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_replayed_graph_is_the_launches_bit_for_bit_and_its_derivative_is_right(name, dtype):
    x = u0(12, dtype)
    lanes = 2
    r = Dual(dtype(0.2), np.array([1.0, 0.5], dtype))
    with dualgpu.using_backend(name):
        graph, replayed = _replayed(x, r, steps=4, replays=3, lanes=lanes, dtype=dtype)
        direct = _direct(x, r, steps=12, lanes=lanes, dtype=dtype)
    assert len(graph) == 4 and "ready" in repr(graph)
    assert same_bits(replayed.values, direct.values)
    assert same_bits(replayed.partials, direct.partials)

    def plain(rr):  # the 12 steps in float64 numpy
        u = x.astype(np.float64)
        for _ in range(12):
            left, right = np.r_[0.0, u[:-1]], np.r_[u[1:], 0.0]
            u = u + rr * (left - 2.0 * u + right)
        return u

    eps = EPS[dtype]
    fd = (plain(0.2 + eps) - plain(0.2 - eps)) / (2 * eps)
    np.testing.assert_allclose(replayed.partials[0], fd, **TOL[dtype])
    np.testing.assert_allclose(replayed.partials[1], 0.5 * fd, **TOL[dtype])


def test_more_lanes_than_a_tile_and_a_kernel_that_reads_what_it_writes():
    """20 lanes (several tiles on the cpu backend) and ``a += x``, replayed twice."""
    a0 = DualArray(np.linspace(1.0, 2.0, 16), np.ones((20, 16)))
    x = Dual(0.5, np.arange(20.0))
    with dualgpu.using_backend("cpu"):
        a = cuda.to_device(a0)
        with cuda.capture_graph() as graph:
            P.add_in_place[1, 16](a, x)
            P.add_in_place[1, 16](a, x)
        graph.launch()
        graph.launch()
        got = a.copy_to_host()
    np.testing.assert_array_equal(got.values, a0.values + 2.0)
    np.testing.assert_array_equal(got.partials, a0.partials + 4.0 * np.arange(20.0)[:, None])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("lanes", [1, 20])
def test_on_the_cpu_backend_replays_become_one_compiled_table(dtype, lanes):
    """After a replay that teaches each kind of launch its step, the graph's launches run as
    one compiled table (checked against the launch path at its first use): replays 3 to 6
    are that program, bit for bit the launches one by one, one lane tile or several."""
    x = u0(16, dtype)
    r = Dual(dtype(0.2), np.linspace(1.0, 2.0, lanes).astype(dtype))
    with dualgpu.using_backend("cpu"):
        u, u_new = _buffers(x, lanes, dtype)
        with cuda.capture_graph() as graph:
            u, u_new = _steps(u, u_new, r, 6)
            P.add_in_place[1, 16](u, r)
        for replay in range(6):
            graph.launch()
            assert (graph.program is not None) == (replay >= 1), graph.why
        assert graph.program.runs == 4  # replays 3 to 6
        got = u.copy_to_host()
        v, v_new = _buffers(x, lanes, dtype)
        for _ in range(6):
            v, v_new = _steps(v, v_new, r, 6)
            P.add_in_place[1, 16](v, r)
        want = v.copy_to_host()
    assert same_bits(got.values, want.values) and same_bits(got.partials, want.partials)


def test_a_graph_seeded_after_its_first_replays_still_becomes_one_table():
    """Replays on partials that are all zero cannot check a table (every order of the lane
    arithmetic gives zero there): they run launch by launch without using up the graph's
    tries, and the first replays after the seeds arrive make it one table."""
    x = u0(16)
    with dualgpu.using_backend("cpu"):
        u, u_new = _buffers(x, 3, np.float64)
        with cuda.capture_graph() as graph:
            u, u_new = _steps(u, u_new, 0.2, 4)
        for _ in range(5):  # more than TRIES replays of zero partials
            graph.launch()
        assert graph.program is None and graph.why is None
        seeded = DualArray(x, np.eye(3, 16))
        cuda.to_device(seeded, to=u)
        for _ in range(3):
            graph.launch()
        assert graph.program is not None, graph.why
        got = u.copy_to_host()
        v, v_new = _buffers(x, 3, np.float64)
        cuda.to_device(seeded, to=v)
        for _ in range(3):
            v, v_new = _steps(v, v_new, 0.2, 4)
        want = v.copy_to_host()
    assert same_bits(got.values, want.values) and same_bits(got.partials, want.partials)
    assert np.abs(got.partials).max() > 0


def test_plain_arrays_replay_as_one_compiled_table_too():
    """Plain device arrays (no derivative) are table arguments of a graph's replay (no host
    code can touch them between its launches): a plain loop, and dual launches of several
    lane tiles reading a plain array of weights, run as one program, bit for bit."""
    x = u0(12)
    weights = np.linspace(0.5, 1.5, 12)
    r = Dual(0.2, np.linspace(1.0, 2.0, 20))
    with dualgpu.using_backend("cpu"):
        u, u_new = cuda.to_device(x), cuda.device_array(12)
        v, v_new = _buffers(x, 20, np.float64)
        w = cuda.to_device(weights)
        with cuda.capture_graph() as plain:
            _steps(u, u_new, 0.2, 4)
        with cuda.capture_graph() as mixed:
            for _ in range(2):
                K.weighted_step[1, 16](v, v_new, w, r)
                K.weighted_step[1, 16](v_new, v, w, r)
        for _ in range(4):
            plain.launch()
            mixed.launch()
        assert plain.program is not None and plain.program.runs == 2, plain.why
        assert mixed.program is not None and mixed.program.runs == 2, mixed.why
        a, b = cuda.to_device(x), cuda.device_array(12)
        c, d = _buffers(x, 20, np.float64)
        for _ in range(4):
            _steps(a, b, 0.2, 4)
            for _ in range(2):
                K.weighted_step[1, 16](c, d, w, r)
                K.weighted_step[1, 16](d, c, w, r)
        assert same_bits(u.copy_to_host(), a.copy_to_host())
        got, want = v.copy_to_host(), c.copy_to_host()
    assert same_bits(got.values, want.values) and same_bits(got.partials, want.partials)
    assert same_bits(w.copy_to_host(), weights)


def test_nothing_runs_in_the_block_and_arguments_are_frozen():
    with dualgpu.using_backend("cpu"):
        x = u0(12)
        r = Dual(0.2, [1.0])
        u, u_new = _buffers(x, 1, np.float64)
        with cuda.capture_graph() as graph:
            K.heat_step[1, 16](u, u_new, r)
            assert same_bits(u_new.copy_to_host().values, np.zeros(12))  # not run yet
        r.partials[0] = 7.0  # a Dual is recorded by value
        graph.launch()
        once = _direct(x, Dual(0.2, [1.0]), 1, 1, np.float64)
        assert same_bits(u_new.copy_to_host().partials, once.partials)
        u.values[:] = 0.0  # arrays are recorded by reference: a replay reads what they hold
        u.partials[:] = 0.0
        graph.launch()
        assert same_bits(u_new.copy_to_host().values, np.zeros(12))


@pytest.mark.parametrize("mode", ["auto", True, "trace"])
def test_a_graph_inside_a_driver_run_differentiates(mode):
    """f records 2 steps and replays them 5 times under ``dualgpu.jvp``: the 10 steps'
    derivative, as f without a graph gives it and as central differences say, in every
    capture mode (capture=True refused f's graph: its record read a captured buffer)."""
    x = u0(12)

    def run(rr, graph):
        u = cuda.to_device(x)
        u_new = cuda.device_array_like(u)
        if not graph:
            return _steps(u, u_new, rr, 10)[0].copy_to_host()
        with cuda.capture_graph() as recorded:
            u, u_new = _steps(u, u_new, rr, 2)
        for _ in range(5):
            recorded.launch()
        return u.copy_to_host()

    with dualgpu.using_backend("cpu"):
        def with_graph(rr):  # one function object: "trace" replays its later runs
            return run(rr, True)
        for _ in range(4 if mode == "trace" else 1):
            value, tangent = dualgpu.jvp(with_graph, (0.2,), (1.0,), capture=mode)
        value0, tangent0 = dualgpu.jvp(lambda rr: run(rr, False), (0.2,), (1.0,))
        fd = (np.asarray(run(0.2 + 1e-6, False)) - np.asarray(run(0.2 - 1e-6, False))) / 2e-6
    assert same_bits(value, value0) and same_bits(tangent, tangent0)
    np.testing.assert_allclose(np.asarray(tangent), fd, **TOL[np.float64])
    assert np.abs(np.asarray(tangent)).max() > 0.1


_DUAL = []  # a dual device array and a stream, made by the test before its capture


@pytest.mark.parametrize("make, match", [
    (lambda u: cuda.to_device(np.zeros(3)), r"cuda.to_device\(\) inside capture_graph"),
    (lambda u: cuda.device_array(3), r"cuda.device_array\(\) inside capture_graph"),
    (lambda u: cuda.device_array_like(u), r"device_array_like\(\) inside capture_graph"),
    (lambda u: K.heat_step[1, 16](np.zeros(12), u, 0.2), r"argument 0 of kernel heat_step .*"
                                                          r"host \(numpy\) array.*to_device"),
    (lambda u: K.heat_step[1, 16](DualArray(np.zeros(12), np.zeros((1, 12))), u, 0.2),
     r"host \(numpy\) array"),
    (lambda u: cuda.capture_graph().__enter__(), "one capture at a time"),
    # a copy in the block would run once, at the capture, not at each replay
    (lambda u: u.copy_to_device(np.ones(12)), r"copy_to_device\(\) inside capture_graph"),
    (lambda u: cuda.to_device(dualgpu.dual_array(np.zeros(12), lanes=1)).__class__,
     r"cuda.to_device\(\) inside capture_graph"),
    (lambda u: _DUAL[0].copy_to_device(np.ones(12)),
     r"DualArray.copy_to_device\(\) inside capture_graph"),
    (lambda u: K.heat_step[1, 16, _DUAL[1]](u, u, 0.2), r"launched on stream .* records one"),
    (lambda u: cuda.reduce(lambda a, b: a + b)(u), r"a reduction .* inside capture_graph"),
    (lambda u: cuda.vectorize(["float64(float64)"])(lambda x: 2.0 * x)(u),
     r"the ufunc <lambda>\(\) inside capture_graph\(\), which records kernel launches only"),
])
@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
def test_what_a_capture_cannot_hold_is_refused(make, match, backend):
    # (the simulator's device arrays copied into the capture: once, silently; unseen round)
    with dualgpu.using_backend(backend):
        u = cuda.device_array(12)
        _DUAL[:] = [cuda.to_device(dualgpu.dual_array(np.zeros(12), lanes=1)), cuda.stream()]
        with pytest.raises(DualgpuError, match=match):
            with cuda.capture_graph():
                make(u)
        assert graphs.ACTIVE is None  # the failed block closed its capture
        cuda.device_array(3)  # and allocation works again


def test_misuse_of_a_graph_is_refused():
    with dualgpu.using_backend("cpu"):
        u, u_new = cuda.device_array(12), cuda.device_array(12)
        with cuda.capture_graph() as graph:
            K.heat_step[1, 16](u, u_new, 0.2)
            with pytest.raises(DualgpuError, match="inside its own capture_graph"):
                graph.launch()
        with cuda.capture_graph():
            with pytest.raises(DualgpuError, match="inside another capture_graph"):
                graph.launch()
    with dualgpu.using_backend("cudasim"):
        with pytest.raises(DualgpuError, match="recorded on the cpu backend"):
            graph.launch()
    graph.close()
    assert len(graph) == 0 and "closed" in repr(graph)
    with pytest.raises(DualgpuError, match="closed"):
        graph.launch()


def test_other_threads_launch_as_usual_during_a_capture():
    with dualgpu.using_backend("cpu"):
        x = u0(12)
        u, u_new = cuda.to_device(x), cuda.device_array(12)
        other = {}

        def work():
            with dualgpu.using_backend("cpu"):
                a, b = cuda.to_device(x), cuda.device_array(12)
                K.heat_step[1, 16](a, b, 0.2)
                other["b"] = b.copy_to_host()

        with cuda.capture_graph() as graph:
            K.heat_step[1, 16](u, u_new, 0.2)
            thread = threading.Thread(target=work)
            thread.start()
            thread.join()
        assert len(graph) == 1
        graph.launch()
        assert same_bits(other["b"], u_new.copy_to_host())


def test_a_program_forgotten_since_is_recorded_again():
    """Defining a rule forgets compiled programs (capture._rules_changed): the graph notices
    and records its table again, with the same results."""
    x = u0(12)
    r = Dual(0.2, [1.0, 2.0])
    with dualgpu.using_backend("cpu"):
        u, u_new = _buffers(x, 2, np.float64)
        with cuda.capture_graph() as graph:
            _steps(u, u_new, r, 2)
        graph.launch()
        graph.launch()
        first = graph.program
        assert first is not None and first.holds()
        capture._rules_changed(None, None)
        assert not first.holds()
        graph.launch()  # recorded again (its steps are learned again: launch by launch)
        graph.launch()
        assert graph.program is not None and graph.program is not first
        graph.launch()
        got = u.copy_to_host()
    want = _direct(x, r, 10, 2, np.float64)
    assert same_bits(got.values, want.values) and same_bits(got.partials, want.partials)
