"""The cpu backend's parallel launches: the serial/parallel choice from measured costs, pieces."""
import time

import numpy as np
import pytest

from dualgpu.backends.cpu import parallel as cpu_parallel
from dualgpu.backends.cpu.parallel import LaunchCost, chunk_length


_MACHINE_BUSY = cpu_parallel.machine_busy  # the real one (the fixture below replaces it)


@pytest.fixture(autouse=True)
def quiet_machine(monkeypatch):
    """The choice's load hint says quiet unless a test says otherwise (the real reading
    depends on what else runs)."""
    monkeypatch.setattr(cpu_parallel, "machine_busy", lambda: False)


def _measured(serial_seconds, items, launches=3):
    cost = LaunchCost()
    for _ in range(launches):
        cost.record_serial(serial_seconds, items)
    return cost


def test_small_or_unmeasured_launches_stay_serial():
    assert not LaunchCost().parallel(10**9)  # nothing measured yet
    cost = _measured(1e-6, 100)  # 10 ns per item
    assert not cost.parallel(1000)  # 10 us: below PARALLEL_MIN_SECONDS
    assert cost.parallel(10**6)  # 10 ms: worth trying


def test_the_first_serial_launch_is_not_counted():
    cost = LaunchCost()
    cost.record_serial(5.0, 10)  # compiling
    cost.record_serial(1e-6, 10)
    assert list(cost.serial) == [1e-7]


def test_the_first_parallel_launch_is_not_counted():
    cost = _measured(1e-3, 1000)
    cost.record_parallel(1.0, 1000)  # starting the helper threads
    assert not cost.parallel_samples
    cost.record_parallel(4e-4, 1000)
    assert list(cost.parallel_samples) == [4e-4 / 1000]


def test_compute_bound_launches_are_presumed_parallel():
    cost = LaunchCost()
    assert cost.parallel(cpu_parallel.PARALLEL_MIN_ITEMS, presume=True)
    assert not cost.parallel(cpu_parallel.PARALLEL_MIN_ITEMS - 1, presume=True)
    assert not LaunchCost().parallel(10 ** 6)  # not presumed: measured serially first


def _simulate(cost, seconds, launches, items=1000, presume=False, busy=None):
    """Drive ``cost`` as a kernel's launches do: ``seconds(k, parallel)`` is what launch k
    takes on that arm, ``busy(k)`` the load hint (default quiet). Returns the arm (True:
    parallel) each launch took."""
    arms = []
    for k in range(launches):
        cpu_parallel.machine_busy = (lambda: busy(k)) if busy else (lambda: False)
        parallel = cost.parallel(items, presume=presume)
        (cost.record_parallel if parallel else cost.record_serial)(seconds(k, parallel), items)
        arms.append(parallel)
    return arms


def test_one_slow_launch_moves_no_estimate():
    # the old means let one 10x launch (a helper descheduled) outweigh seven good ones
    cost = _measured(1e-3, 1000)
    slow = {10}
    arms = _simulate(cost, lambda k, par: (5e-3 if k in slow else 5e-4) if par else 1e-3, 40)
    assert cost.in_parallel
    assert all(arms[5:])  # parallel throughout, the slow launch included


def test_the_arm_in_use_is_kept_within_the_hysteresis():
    cost = _measured(1e-3, 1000)
    # parallel barely faster (5%): it is tried and measured, but serial stays in use
    arms = _simulate(cost, lambda k, par: 0.95e-3 if par else 1e-3, 400)
    assert cost.estimate(True) == pytest.approx(0.95e-6)
    assert not cost.in_parallel
    assert sum(arms[100:]) <= 2 * len(arms[100:]) // cpu_parallel.EXPLORE_RATIO + 2
    cost = _measured(1e-3, 1000)
    arms = _simulate(cost, lambda k, par: 0.8e-3 if par else 1e-3, 400)
    assert cost.in_parallel  # 20% faster: parallel, but for serial re-tries
    assert len(arms[10:]) - sum(arms[10:]) <= len(arms) // cpu_parallel.EXPLORE_RATIO + 1
    # in parallel, serial 5% faster: tried, not taken
    arms = _simulate(cost, lambda k, par: 0.8e-3 if par else 0.76e-3, 400)
    assert cost.in_parallel
    assert cost.estimate(False) == pytest.approx(0.76e-6)


def test_a_choice_made_under_load_is_rechecked():
    """Issue 41: some fresh processes ran a whole N-body Jacobian on the serial arm. A busy
    machine at the start sends the kernel serial; once it is quiet, a re-try of the parallel
    arm finds it and the kernel goes back, within a bounded number of launches."""
    for presume in (False, True):
        cost = LaunchCost() if presume else _measured(4e-3, 1000)

        def seconds(k, par):
            busy = k < 200
            return (20e-3 if busy else 2e-3) if par else 4e-3

        arms = _simulate(cost, seconds, 600, presume=presume)
        # serial while parallel is 5x slower (a presumed kernel tries serial only after
        # 32x its parallel launches' estimate at twice their cost: 64 launches), but for
        # one re-try of parallel (a warm-up launch and a measured one)...
        assert sum(arms[100:200]) <= 2
        # ...and parallel again after a bounded number of launches (the first re-try after
        # 32x the stale parallel estimate: 160 serial launches), but for serial re-tries
        assert cost.in_parallel
        back = arms.index(True, 200)
        assert back < 200 + cpu_parallel.EXPLORE_RATIO * 5 + 10
        tail = arms[back + 5:]
        assert len(tail) - sum(tail) <= len(tail) // cpu_parallel.EXPLORE_RATIO + 1


def test_a_change_of_load_rechecks_the_arm_at_once():
    """The load reading is a hint, never the decision: a compute-bound kernel whose first
    launch finds the machine busy starts serial, and the launch after the machine turns
    quiet tries parallel (and keeps it, measured faster); a machine turning busy under a
    parallel kernel makes it try serial at once, and the slower parallel launches then
    hand over within three launches."""
    def busy(k):
        return 150 <= k < 300 or k < 100

    def seconds(k, par):
        return (20e-3 if busy(k) else 2e-3) if par else 4e-3

    cost = LaunchCost()
    arms = _simulate(cost, seconds, 450, presume=True, busy=busy)
    assert not arms[0] and sum(arms[:100]) <= 2  # busy: serial (one re-try of parallel)
    assert arms[100] and all(arms[102:150])  # quiet: parallel at once
    assert not arms[150]  # busy again: serial tried at once...
    assert sum(arms[155:300]) <= 2  # ...and in use once the parallel launches are slow
    assert arms[300] and len(arms[302:]) - sum(arms[302:]) <= 2  # quiet again: parallel


def test_a_flapping_load_costs_a_bounded_share():
    cost = LaunchCost()
    spent = {True: 0.0, False: 0.0}

    def seconds(k, par):  # parallel is faster; the load reading flips at every launch
        spent[par] += 2e-3 if par else 4e-3
        return 2e-3 if par else 4e-3

    _simulate(cost, seconds, 2000, presume=True, busy=lambda k: k % 2 == 1)
    assert cost.in_parallel
    assert spent[False] / (spent[True] + spent[False]) < 1.5 / cpu_parallel.NUDGE_RATIO


def test_retries_take_a_bounded_share_of_the_time():
    for serial_s, parallel_s in ((1e-3, 3e-3), (3e-3, 1e-3)):
        cost = _measured(serial_s, 1000)
        spent = {True: 0.0, False: 0.0}

        def seconds(k, par):
            spent[par] += parallel_s if par else serial_s
            return parallel_s if par else serial_s

        _simulate(cost, seconds, 3000)
        best = parallel_s < serial_s
        share = spent[not best] / (spent[True] + spent[False])
        assert 0 < share < 2.5 / cpu_parallel.EXPLORE_RATIO  # retried, rarely


def test_compute_bound_launches_start_parallel():
    cost = LaunchCost()
    assert cost.parallel(1000, presume=True)
    cost.record_parallel(1.0, 1000)  # starting the helpers: not a sample
    assert cost.parallel(1000, presume=True)
    short = _measured(0.5 * cpu_parallel.PARALLEL_MIN_SECONDS, 1000)
    assert not short.parallel(1000, presume=True)  # measured too short for a helper


def test_force_and_serial_launches(monkeypatch):
    monkeypatch.setattr(cpu_parallel, "FORCE", True)
    assert LaunchCost().parallel(1)
    with cpu_parallel.serial_launches():
        assert not cpu_parallel.ENABLED
    assert cpu_parallel.ENABLED


@pytest.mark.parametrize("base, griddim, blockdim, inner, tiles, expected", [
    ("flat", (4000, 1, 1), (256, 1, 1), "x", 1, 64000),        # one row of 1,024,000: 16 pieces
    ("flat", (10, 10, 1), (16, 16, 1), "y", 1, 160),            # 160 rows: whole rows
    ("bounded", (8, 1, 1), (128, 1, 1), "x", 125, 1024),        # many tiles: whole rows
    ("blocks", (100, 1, 1), (64, 1, 1), "x", 1, 7),             # 100 blocks in 16 pieces
])
def test_chunk_length(base, griddim, blockdim, inner, tiles, expected):
    assert chunk_length(base, griddim, blockdim, inner, tiles, threads=2) == expected


def test_helper_errors_reach_the_caller():
    import threading

    caller = threading.current_thread()

    def launcher(control):
        control[3] = 2  # two pieces: the caller does one, the helper fails on the other
        if threading.current_thread() is caller:
            control[1] += 1
            return
        raise RuntimeError("a helper failed")

    control = cpu_parallel.control_array()
    with pytest.raises(RuntimeError, match="a helper failed"):
        cpu_parallel.run_parallel(launcher, (control,), control, threads=2)
    assert control[2] == 1


def test_threads_leave_out_cores_other_processes_keep_busy(monkeypatch):
    import numba

    monkeypatch.setattr(cpu_parallel.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setattr(numba, "get_num_threads", lambda: 4)
    monkeypatch.setattr(cpu_parallel, "_others_running", lambda: 0)
    assert cpu_parallel.available_threads() == 4
    monkeypatch.setattr(cpu_parallel, "_others_running", lambda: 3)
    assert cpu_parallel.available_threads() == 1
    # a launch whose measured costs chose parallel: one load reading does not send it serial
    assert cpu_parallel.launch_threads() == 2
    monkeypatch.setattr(numba, "get_num_threads", lambda: 1)  # NUMBA_NUM_THREADS=1: serial
    monkeypatch.setattr(cpu_parallel, "_others_running", lambda: 0)
    assert cpu_parallel.available_threads() == 1
    assert cpu_parallel.launch_threads() == 1  # within numba's setting


def test_running_processes_are_read_from_proc_loadavg():
    import os

    if not os.path.exists("/proc/loadavg"):
        pytest.skip("no /proc/loadavg (not Linux)")
    cpu_parallel._LOAD[0] = 0.0  # force a fresh reading
    assert cpu_parallel._others_running() >= 0


def test_one_busy_reading_is_not_enough(monkeypatch):
    # a process seen running once (a kernel thread, a short-lived command) must not send the
    # next launches serial; one that stays is confirmed at the next call, not 50 ms later
    import builtins
    import io

    readings = iter([5, 1, 1, 5, 5, 5, 1])  # running threads in /proc/loadavg, ours: 1
    real_open = builtins.open

    def fake_open(path, *args, **kwargs):
        if path == "/proc/loadavg":
            return io.StringIO(f"0.5 0.5 0.5 {next(readings)}/300 1234\n")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", fake_open)
    monkeypatch.setattr(cpu_parallel, "_own_running", lambda: 1)
    monkeypatch.setattr(cpu_parallel, "_LOAD", [-1e9, 0, 0])  # stale: read first
    monkeypatch.setattr(cpu_parallel, "LOAD_CHECK_SECONDS", -1.0)  # read at every call
    got = [cpu_parallel._others_running() for _ in range(7)]
    assert got == [0, 0, 0, 0, 4, 4, 0]
    monkeypatch.setattr(cpu_parallel, "LOAD_CHECK_SECONDS", 3600.0)
    monkeypatch.setattr(cpu_parallel, "_LOAD", [-1e9, 0, 0])  # stale: read first
    readings = iter([5, 5, 1])
    got = [cpu_parallel._others_running() for _ in range(4)]
    assert got == [0, 4, 0, 0]  # busy readings are re-read; an idle one is reused


def test_helpers_do_not_keep_a_launch_alive():
    import gc
    import weakref

    class Payload:
        pass

    payload = Payload()
    alive = weakref.ref(payload)

    def launcher(control, thing):
        control[3] = 0  # no pieces

    control = cpu_parallel.control_array()
    cpu_parallel.run_parallel(launcher, (control, payload), control, threads=2)
    del payload
    import time
    time.sleep(0.2)  # let a late helper wake, find nothing, and wait again
    gc.collect()
    assert alive() is None


def test_own_helper_threads_are_not_load(monkeypatch):
    # a helper still spinning after a launch is this process's, not another process: the
    # load check subtracts it, and it stops counting once it blocks again
    from dualgpu.backends.cpu.kernel import compile_kernel
    from simulations import heat1d

    monkeypatch.setattr(cpu_parallel, "FORCE", True)
    monkeypatch.setattr(cpu_parallel, "available_threads", lambda: 2)
    u, u_new = np.linspace(0.0, 1.0, 4096), np.zeros(4096)
    compile_kernel(heat1d.step_periodic)[16, 256](u, u_new, 0.25)
    helpers = cpu_parallel._HELPERS
    # the caller and a spinning helper run (other threads of the test process may too)
    assert cpu_parallel._own_running() >= 1 + helpers.active
    deadline = time.monotonic() + 5.0
    while helpers.active and time.monotonic() < deadline:
        time.sleep(0.01)
    assert helpers.active == 0  # spun out, then blocked: idle helpers burn no core
    np.testing.assert_allclose(u_new[1:-1], u[1:-1])  # a linear profile stays put


def test_large_serial_launches_use_the_pieces_launcher(monkeypatch):
    # one launcher per kernel: a large launch measured serially (one thread claims every
    # piece) and later run in parallel compiles only the "pieces" launcher
    from dualgpu.backends.common.translate import unwrap
    from dualgpu.backends.cpu import kernel as cpu
    import kernels_for_cpu_backend as kfc

    n = cpu_parallel.PIECES_SERIAL_MIN_ITEMS + 1000
    u = np.random.default_rng(1).random(n)
    kernel = cpu.CpuKernel(unwrap(kfc.heat_1d))
    monkeypatch.setattr(cpu_parallel, "thread_bound", lambda: 1)  # NUMBA_NUM_THREADS=1
    monkeypatch.setattr(cpu_parallel, "available_threads", lambda: 1)
    blocks = (n + 127) // 128
    got = np.zeros(n)
    for _ in range(3):
        kernel.launch(blocks, 128, (u, got, 0.2))
    assert {spec.mode for spec in kernel._launchers} == {"pieces"}
    (costs,) = kernel._costs.values()
    assert len(costs[n.bit_length()].serial) == 2  # measured serially
    expected = np.zeros(n)
    with cpu_parallel.serial_launches():
        reference = cpu.CpuKernel(unwrap(kfc.heat_1d))
        reference.launch(blocks, 128, (u, expected, 0.2))
    assert {spec.mode for spec in reference._launchers} == {"serial"}
    np.testing.assert_array_equal(got, expected)
    small = cpu.CpuKernel(unwrap(kfc.heat_1d))  # a small launch: the serial launcher
    small.launch(4, 128, (u[:500], np.zeros(500), 0.2))
    assert {spec.mode for spec in small._launchers} == {"serial"}


def test_a_parallel_try_after_serial_launches_is_a_warm_up():
    """The helper has gone to sleep during serial launches; waking it is not the parallel
    arm's cost: that launch's time is dropped and the next launch runs in parallel to
    measure (else every periodic try lost, and a kernel 1.5x faster in parallel stayed
    serial)."""
    items = 1000
    cost = _measured(1e-3, items)
    assert cost.parallel(items)
    cost.record_parallel(1.0, items)  # starting the helpers
    assert cost.parallel(items)
    cost.record_parallel(5e-4, items)
    cost.record_serial(1e-3, items)  # a serial try
    cost.record_parallel(9e-3, items)  # the helper woke from sleep: not a sample
    assert list(cost.parallel_samples) == [5e-4 / items]
    assert cost.parallel(items)  # measure again, warm
    cost.record_parallel(4e-4, items)
    assert list(cost.parallel_samples) == [5e-4 / items, 4e-4 / items]


def test_threads_of_this_process_are_not_other_processes():
    """A thread of this process that runs (numba's OpenMP threads spin after a prange loop)
    is not another process keeping a core busy."""
    import threading
    import time

    from numba import njit

    @njit(nogil=True)
    def spin(seconds_as_loops):
        x = 0.0
        for k in range(seconds_as_loops):
            x += k * 1e-9
        return x

    spin(10)
    thread = threading.Thread(target=spin, args=(5 * 10 ** 8,), daemon=True)
    thread.start()
    try:
        time.sleep(0.05)
        assert cpu_parallel._own_running() >= 2
    finally:
        thread.join()


def test_the_load_hint_takes_the_first_reading(monkeypatch):
    # the first launch of a process decides its arm from one reading (there is no earlier
    # one to confirm it: the two-readings rule made every first launch see a quiet machine)
    import builtins
    import io

    readings = iter([5, 1])  # running threads in /proc/loadavg, ours: 1
    real_open = builtins.open

    def fake_open(path, *args, **kwargs):
        if path == "/proc/loadavg":
            return io.StringIO(f"4.0 4.0 4.0 {next(readings)}/300 1234\n")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", fake_open)
    monkeypatch.setattr(cpu_parallel, "_own_running", lambda: 1)
    monkeypatch.setattr(cpu_parallel, "thread_bound", lambda: 2)
    monkeypatch.setattr(cpu_parallel, "_LOAD", [-1e9, 0, 0])
    monkeypatch.setattr(cpu_parallel, "_BUSY", [-1e9, False])
    monkeypatch.setattr(cpu_parallel, "LOAD_CHECK_SECONDS", -1.0)  # read at every call
    assert _MACHINE_BUSY() is True
    assert _MACHINE_BUSY() is False


def test_small_launches_do_not_send_large_ones_parallel(monkeypatch):
    """A kernel's small launches cost mostly their fixed overhead per item (a 16-cell launch:
    ~60 ns per item against ~0.4 ns at 10^4 cells). Their samples once set the estimate of
    its large launches too: a 10^4-cell heat JVP step judged 0.6 ms serially went parallel
    and stayed there, 4.7 ms per JVP instead of 0.86 ms. Costs are kept per size class."""
    import kernels_for_cpu_backend as kfc
    from dualgpu.backends.common.translate import unwrap
    from dualgpu.backends.cpu import kernel as cpu

    from dualgpu.core.dualarray import DualArray

    def dual(values):
        return DualArray(values, np.ones((1,) + values.shape))

    kernel = cpu.CpuKernel(unwrap(kfc.heat_1d))
    small, large = np.random.default_rng(2).random(16), np.random.default_rng(3).random(20_000)
    for _ in range(8):
        kernel.launch(1, 16, (dual(small), dual(np.zeros(16)), 0.2))
    for _ in range(8):
        kernel.launch((large.size + 127) // 128, 128, (dual(large), dual(np.zeros(large.size)),
                                                       0.2))
    (run,) = kernel._runs.values()
    assert run.cost(large.size).counts == [8, 0]  # every large launch serial
    assert run.cost(16) is not run.cost(large.size)
