"""Traced runs (``capture="trace"``): later runs replay f's launches without its Python.

Every case runs f under a driver with ``capture="trace"`` and without capture
(``capture=False``) and checks the results bit for bit (values and partials), and the
derivatives against central finite differences, in float32 and float64 on the cpu
backend. :func:`dualgpu.porting.trace.statistics` shows whether runs were traced, checked
and replayed: a run that cannot be traced (host reads, a dual computed in Python, a result
computed on the host) runs f as captured loops do, and a trace whose check differs is
dropped.
"""
import logging
import math
import os

import numpy as np
import pytest

import dualgpu
from dualgpu.core import lanes
from dualgpu.porting import trace

import kernels_capture as K
from kernels_capture import EPS, TOL, same_bits, u0


#: seeds of the random loops (DUALGPU_TEST_CASES=all: eight)
LOOP_SEEDS = range(8) if os.environ.get("DUALGPU_TEST_CASES", "").strip().lower() == "all" \
    else (5,)


@pytest.fixture(autouse=True)
def cpu():
    with dualgpu.using_backend("cpu"):
        yield


def counts():
    return trace.statistics()


def grew(before, name):
    return counts()[name] - before[name]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_traced_jvp_equals_the_runs_and_differences(dtype):
    x = u0(dtype=dtype)

    def f(rr):
        return K.run_heat(x, rr)

    before = counts()
    for r in (0.2, 0.2, 0.2, 0.2, 0.15, 0.25):  # record, trace, check, then replays
        got = dualgpu.jvp(f, (dtype(r),), (1.0,), capture="trace")
        assert same_bits(got, dualgpu.jvp(f, (dtype(r),), (1.0,), capture=False))
    assert (grew(before, "traced"), grew(before, "checked")) == (1, 1)
    # (record, where the kinds of launch are new), trace, check, then replays
    assert grew(before, "replayed") in (3, 4)
    h = EPS[dtype]
    fd = (K.run_heat(x, dtype(0.25 + h)).astype(np.float64)
          - K.run_heat(x, dtype(0.25 - h)).astype(np.float64)) / (2 * h)
    np.testing.assert_allclose(got[1], fd, **TOL[dtype])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_traced_jacobian_replays_its_later_runs(dtype, monkeypatch):
    # an L2 cache that holds one tile of lanes: the Jacobian takes one run of f per tile
    x = u0(64, dtype)
    unit = lanes.driver_tiles(x.size, "cpu")[0]
    monkeypatch.setattr(lanes, "l2_cache_bytes",
                        lambda: lanes.TOUCHED_ARRAYS * x.nbytes * (1 + unit))
    before = counts()
    got = dualgpu.jacobian(lambda v: K.run_heat(v, 0.2), x, capture="trace", progress=False)
    reference = dualgpu.jacobian(lambda v: K.run_heat(v, 0.2), x, capture=False,
                                 progress=False)
    assert same_bits(got, reference)
    runs = -(-x.size // unit)
    # (record, where the kinds of launch are new), trace, check, then replays
    assert grew(before, "replayed") in (runs - 3, runs - 2)
    h = EPS[dtype]
    fd = np.stack([(K.run_heat(x + h * e, 0.2).astype(np.float64)
                    - K.run_heat(x - h * e, 0.2).astype(np.float64)) / (2 * h)
                   for e in np.eye(x.size, dtype=dtype)], axis=1)
    np.testing.assert_allclose(got, fd, **TOL[dtype])


def _derived_dual(x, r):
    return K.run_heat(x, r * 0.5)  # a Dual computed in Python: its partials follow the seeds


def _host_result(x, r):
    return K.run_heat(x, r) * 2.0  # a result computed on the host


def _copied_derived_array(x, r):
    u = dualgpu.cuda.to_device(dualgpu.cuda.to_device(x).copy_to_host() * r)
    out = dualgpu.cuda.device_array_like(u)
    for _ in range(4):
        K.heat_step[1, 32](u, out, r)
        u, out = out, u
    return u.copy_to_host()


@pytest.mark.parametrize("run, why", [
    (K.run_adaptive, "copy_to_host"), (K.run_branching, "host code read"),
    (_derived_dual, "dual scalar that is not an argument"), (_host_result, "a result"),
    (_copied_derived_array, "copy_to_host")])
def test_runs_that_cannot_be_traced_run_f(run, why, caplog):
    x = u0()

    def f(rr):
        return run(x, rr)

    before = counts()
    with caplog.at_level(logging.INFO, logger="dualgpu.capture"):
        for r in (0.2, 0.2, 0.2, 0.2, 0.3):
            got = dualgpu.jvp(f, (r,), (1.0,), capture="trace")
            assert same_bits(got, dualgpu.jvp(f, (r,), (1.0,), capture=False))
    assert grew(before, "traced") == grew(before, "replayed") == 0
    notes = [r.getMessage() for r in caplog.records if "capture='trace'" in r.getMessage()]
    assert len(notes) == 1 and why in notes[0], notes


def test_a_trace_whose_check_differs_is_dropped(caplog):
    # host random numbers break the contract (f's Python must do the same thing each run):
    # the run after the trace is both replayed and run, they differ, and f runs from then on
    x = u0()
    traced, plain = np.random.default_rng(3), np.random.default_rng(3)

    def f(rr):
        return K.run_random(x, rr, traced)

    def g(rr):
        return K.run_random(x, rr, plain)

    before = counts()
    with caplog.at_level(logging.INFO, logger="dualgpu.capture"):
        for _ in range(6):
            got = dualgpu.jvp(f, (0.2,), (1.0,), capture="trace")
            assert same_bits(got, dualgpu.jvp(g, (0.2,), (1.0,), capture=False))
    assert (grew(before, "traced"), grew(before, "failed_checks")) == (1, 1)
    assert grew(before, "replayed") == 0
    assert any("replay differed from the run" in r.getMessage() for r in caplog.records)


def test_number_arguments_are_part_of_the_kind_and_closures_are_read_again():
    x = u0()

    def f(rr, steps):
        return K.run_heat(x, rr, steps=steps)

    for steps in (20, 20, 20, 20, 7, 7, 7, 7, 20):
        got = dualgpu.jvp(f, (0.2, steps), (1.0, None), capture="trace")
        assert same_bits(got, dualgpu.jvp(f, (0.2, steps), (1.0, None), capture=False))
    before = counts()
    x[:] = x[::-1]  # f copies x from its closure: a replay reads it again
    got = dualgpu.jvp(f, (0.2, 20), (1.0, None), capture="trace")
    assert grew(before, "replayed") == 1
    assert same_bits(got, dualgpu.jvp(f, (0.2, 20), (1.0, None), capture=False))


def test_a_zero_dimensional_array_argument_is_a_number_of_the_kind():
    # `0.1 if scheme > 0.5 else 0.01` on np.array(0.0) then np.array(1.0): the second replayed
    # the first's trace (found by an unseen round); a 0-d array is a number, by its value
    x = u0()

    def f(rr, scheme):
        return K.run_heat(x, rr, steps=20 if scheme > 0.5 else 10)

    for scheme in (0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0):
        got = dualgpu.jvp(f, (0.2, np.array(scheme)), (1.0, None), capture="trace")
        assert same_bits(got, dualgpu.jvp(f, (0.2, np.array(scheme)), (1.0, None),
                                          capture=False))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_time_dependent_numbers_replay_as_traced(dtype):
    # run_forced makes its output with device_array and launches with a float and an int
    # per step, computed from t0 (a number argument: its value is part of the kind)
    x = u0(dtype=dtype)

    def f(rr, t0):
        return K.run_forced(x, rr, 20, t0)

    before = counts()
    for t0 in (0.0, 0.0, 0.0, 0.0, 0.7, 0.7, 0.7, 0.7, 0.0):
        got = dualgpu.jvp(f, (dtype(0.2), t0), (1.0, None), capture="trace")
        assert same_bits(got, dualgpu.jvp(f, (dtype(0.2), t0), (1.0, None), capture=False))
    # t0 = 0: (record, if its kinds of launch are new), trace, check, replay(s); 0.7 (its
    # launches known): trace, check, replay x2; 0 again: replay
    assert grew(before, "replayed") in (4, 5)


def test_trace_off_the_cpu_backend_runs_as_written():
    x = u0()
    with dualgpu.using_backend("cudasim"):
        got = dualgpu.jvp(lambda rr: K.run_heat(x, rr, steps=2), (0.2,), (1.0,),
                          capture="trace")
    with dualgpu.using_backend("cpu"):
        want = dualgpu.jvp(lambda rr: K.run_heat(x, rr, steps=2), (0.2,), (1.0,),
                           capture=False)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12)


def test_capture_option_names_trace():
    with pytest.raises(dualgpu.DualgpuError, match="'auto', 'trace', True or False"):
        dualgpu.jvp(lambda rr: rr, (0.2,), (1.0,), capture="always")


@dualgpu.cuda.jit
def _decay(u, k, dt):
    i = dualgpu.cuda.grid(1)
    if i < u.shape[0]:
        u[i] = u[i] - dt * k * u[i] * u[i]


def _decay_to_one(u0, k, dt):
    # the step count and a branch come from the value of dt, a differentiated argument
    u = dualgpu.cuda.to_device(u0)
    for _ in range(int(1.0 / dt)):
        _decay[1, 16](u, k, dt)
    if dt > 0.08:
        _decay[1, 16](u, k, dt)
    return u.copy_to_host()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_python_decisions_on_dual_arguments_key_the_trace_by_their_values(dtype):
    # int(1 / dt) and `if dt > ...` read the value of a Dual argument: JAX would need
    # static_argnums; a trace is kept per value, never replayed for another (it was, stale)
    x = np.linspace(0.5, 1.0, 16).astype(dtype)
    tangents = (None, 0.0, 1.0)  # d/d(dt)
    before = counts()
    for dt in (0.1, 0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.05, 0.1):
        args = (x, dtype(1.0), dtype(dt))
        got = dualgpu.jvp(_decay_to_one, args, tangents, capture="trace")
        assert same_bits(got, dualgpu.jvp(_decay_to_one, args, tangents, capture=False))
    # 0.1: record, trace, check, replay; 0.05: trace, check, replay x2; 0.1 again: replay
    assert grew(before, "replayed") >= 4
    h = EPS[dtype]
    # the last run, dt = 0.1: 10 steps and the branch's one (steps held, as the run holds them)
    fd = (_decay_numpy(x, 0.1 + h, 11) - _decay_numpy(x, 0.1 - h, 11)) / (2 * h)
    np.testing.assert_allclose(got[1], fd, **TOL[dtype])
    # a Jacobian's runs (one value, new seeds) still replay
    for _ in range(4):
        jac = dualgpu.jacobian(_decay_to_one, x, dtype(1.0), dtype(0.1), argnums=0,
                               capture="trace", progress=False)
    assert same_bits(jac, dualgpu.jacobian(_decay_to_one, x, dtype(1.0), dtype(0.1), argnums=0,
                                           capture=False, progress=False))


def _decay_numpy(x, dt, steps):
    u = x.astype(np.float64)
    for _ in range(steps):
        u = u - dt * u * u
    return u


@dualgpu.cuda.jit
def _angle(u, x):
    i = dualgpu.cuda.grid(1)
    if i < u.shape[0]:
        u[i] = u[i] * math.atan2(0.0, x)  # 0 for x = +0.0, pi for x = -0.0


def test_negative_zero_is_another_number_argument():
    def f(u0, x):
        u = dualgpu.cuda.to_device(u0)
        _angle[1, 16](u, x)
        return u.copy_to_host()

    ones = np.ones(16)
    for x in (0.0, 0.0, 0.0, 0.0, -0.0):
        got = dualgpu.jvp(f, (ones, x), (ones, None), capture="trace")
        assert same_bits(got, dualgpu.jvp(f, (ones, x), (ones, None), capture=False))
    np.testing.assert_allclose(got[1], math.pi)


@dualgpu.cuda.jit
def _inject(u, u_new, source, q):
    i = dualgpu.cuda.grid(1)
    if i < u.shape[0]:
        u_new[i] = 0.9 * u[i] + (q if i == source else 0.0)


@pytest.mark.parametrize("where", ["argmax", "astype"])
def test_indices_taken_from_a_dual_arrays_values_key_the_trace_too(where):
    # np.argmax (and the other answers about the values) or astype(int) of a differentiated
    # array: the source cell follows the input's hottest cell in every run
    def f(u0, q):
        if where == "argmax":
            source = int(np.argmax(u0))
        else:
            source = int((4.0 * u0).astype(np.int64).sum())
        u = dualgpu.cuda.to_device(u0)
        u_new = dualgpu.cuda.device_array_like(u)
        for _ in range(5):
            _inject[1, 16](u, u_new, source, q)
            u, u_new = u_new, u
        return u.copy_to_host()

    first, second = np.zeros(16), np.zeros(16)
    first[3] = second[2] = second[9] = 1.0
    for x in (first, first, first, first, second, first):
        got = dualgpu.jvp(f, (x, 1.0), (np.ones(16), 1.0), capture="trace")
        assert same_bits(got, dualgpu.jvp(f, (x, 1.0), (np.ones(16), 1.0), capture=False))


def _trace_of(f):
    found = [t for key, t in trace._TRACES.items()
             if isinstance(t, trace.Trace) and key[0] is f]
    assert len(found) == 1
    return found[0]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_later_replays_allocate_as_the_first_and_fall_back_where_a_source_changed(dtype):
    # the buffers of one run: a copy of the differentiated argument (a DualArray the driver
    # seeds), of an array of f's closure, an array like an argument, one like a closure
    # array and a device_array; replays after the first allocate them without the general
    # path (trace._Lean) and must give what the general path and capture=False give
    x, w = u0(24, dtype), u0(24, dtype)[::-1].copy()

    def f(v, rr):
        u = dualgpu.cuda.to_device(v)
        weights = dualgpu.cuda.to_device(w)
        scratch = dualgpu.cuda.device_array_like(v)
        like_w = dualgpu.cuda.device_array_like(w)
        out = dualgpu.cuda.device_array(v.shape, v.dtype)
        for _ in range(3):
            K.heat_step[1, 32](u, scratch, rr)
            K.heat_step[1, 32](scratch, u, rr)
        K.heat_step[1, 32](weights, like_w, rr)
        K.heat_step[1, 32](like_w, out, rr)
        return u.copy_to_host(), out.copy_to_host()

    def both(v, rr):
        got = dualgpu.jacobian(f, v, dtype(rr), argnums=(0, 1), capture="trace",
                               progress=False)
        assert same_bits(got, dualgpu.jacobian(f, v, dtype(rr), argnums=(0, 1),
                                               capture=False, progress=False))
        return got

    for rr in (0.2, 0.2, 0.2, 0.2):  # record, trace, check (the first replay), replay
        both(x, rr)
    t = _trace_of(f)
    assert t.lean is not None
    before = counts()
    got = both(x * dtype(1.5), 0.15)  # new values: the argument and the closure read again
    w[:] = w[::-1]
    both(x, 0.25)
    assert grew(before, "replayed") == 2
    # an array of f's closure reshaped in place: its lean copy does not fit, and the replay
    # goes the general way (which refuses it: another kind of buffer; f would run)
    lanes = t.allocs[0][0][-1]  # (the driver's lanes: its directions in whole tiles)
    seeded = (dualgpu.DualArray(x.copy(), np.zeros((lanes, 24), dtype)),
              dualgpu.Dual(dtype(0.2), np.zeros(lanes, dtype)))
    with dualgpu.core._context.dual_allocation(lanes):
        assert t.lean.allocate(seeded) is not None
        w.shape = (2, 12)
        assert t.lean.allocate(seeded) is None
        w.shape = (24,)
    # and the derivatives are right: d out / d v[3] and d out / d rr by central differences
    w[:] = w[::-1]  # (w as it was for got)
    h = EPS[dtype]
    e = np.eye(24, dtype=dtype)[3]
    for k, (dv, dr) in enumerate(((h * e, 0.0), (0.0 * e, h))):
        plus = f(x * dtype(1.5) + dv, dtype(0.15 + dr))
        minus = f(x * dtype(1.5) - dv, dtype(0.15 - dr))
        for o in range(2):
            fd = (plus[o].astype(np.float64) - minus[o].astype(np.float64)) / (2 * h)
            column = got[o][0][:, 3] if k == 0 else got[o][1]
            np.testing.assert_allclose(column, fd, **TOL[dtype])


def _run_plan(v, rr, plan):
    """A loop drawn by ``plan`` that a trace can hold: per step a kernel and its numbers,
    sometimes a fresh output buffer, the state copied back at the end."""
    u = dualgpu.cuda.to_device(v)
    u_new = dualgpu.cuda.device_array_like(u)
    n = v.shape[0]
    for kind, number, fresh in plan:
        if kind == 0:
            K.heat_step[1, 32](u, u_new, rr)
        else:
            K.forced_step[1, 32](u, u_new, rr, number, int(1000 * number) % n)
        u, u_new = u_new, u
        if fresh:
            u_new = dualgpu.cuda.device_array(v.shape, v.dtype)
    return u.copy_to_host()


@pytest.mark.parametrize("seed", LOOP_SEEDS)
def test_random_traceable_loops_replay_bit_for_bit(seed):
    """Property: for loops of any shape (kernels, numbers, fresh buffers, step count, lanes
    per run, dtype), every traced replay (the lean ones after the first included) equals the
    run without capture bit for bit, for the Jacobian w.r.t. the state and the JVP w.r.t. r."""
    rng = np.random.default_rng(seed)
    dtype = [np.float64, np.float32][seed % 2]
    n = int(rng.integers(5, 12))
    before = counts()
    for _ in range(2):
        plan = [(int(rng.integers(0, 2)), float(rng.uniform(0.5, 1.0)), bool(rng.random() < 0.2))
                for _ in range(int(rng.integers(3, 20)))]
        chunk = int(rng.choice([1, 2, 4, n]))

        def f(v, rr, plan=plan):
            return _run_plan(v, rr, plan)

        for scale in (1.0, 1.0, 1.0, 1.0, 0.5):  # record, trace, check, replay, new values
            x = u0(n, dtype) * dtype(scale)
            got = dualgpu.jacobian(f, x, dtype(0.2), chunk_size=chunk, capture="trace",
                                   progress=False)
            assert same_bits(got, dualgpu.jacobian(f, x, dtype(0.2), chunk_size=chunk,
                                                   capture=False, progress=False)), plan
            tangent = dualgpu.jvp(f, (x, dtype(0.2 * scale)), (None, 1.0), capture="trace")
            assert same_bits(tangent, dualgpu.jvp(f, (x, dtype(0.2 * scale)), (None, 1.0),
                                                  capture=False)), plan
    assert grew(before, "replayed") >= 8
    assert grew(before, "failed_checks") == 0


def test_a_complex_number_argument_of_f_is_traced_by_its_value():
    """A complex number among f's arguments left every run untraced, silently (found by an
    unseen port); it is part of the key by its two parts, as a real number is by its bits."""
    def f(g, c):
        return K.run_rotate_and_couple(g, c)

    before = counts()
    for c in (0.9 + 0.1j, 0.9 + 0.1j, 0.9 + 0.1j, 0.8 - 0.2j, 0.9 + 0.1j):
        expected = dualgpu.jvp(f, (0.1, c), (1.0, None), capture=False)
        got = dualgpu.jvp(f, (0.1, c), (1.0, None), capture="trace")
        assert same_bits(got[0], expected[0]) and same_bits(got[1], expected[1])
    assert grew(before, "traced") >= 1 and grew(before, "replayed") >= 1
