"""What the benchmark cases share: problem sizes, the heat kernels, timing and targets.

:data:`PROFILES` holds the problem sizes per profile (``"full"``, ``"quick"``, ``"tiny"``);
the heat stencil comes as a dualgpu kernel (:func:`heat_step`, :func:`heat_run`,
:func:`heat_simulate`) and as hand-written ``@njit`` loops; :func:`measure`,
:func:`measure_side_by_side` and :func:`interleaved` time one or several implementations;
:func:`target` makes a MET/MISSED verdict. The case modules (:mod:`benchmarks.cases_dualgpu`,
:mod:`benchmarks.cases_host`, :mod:`benchmarks.cases_targets`) import from here and
:mod:`benchmarks.run` gathers their ``CASES``.

The cpu backend's parallel-launch switch (``dualgpu.backends.cpu.parallel``) is an internal
that :func:`serial_launches` and :func:`parallel_launches` set on purpose: the benchmarks
measure launches with and without helper threads.
"""
import contextlib
import json
import statistics
import subprocess
import sys
import time

import numpy as np
from numba import njit, prange

import dualgpu
from dualgpu import DualArray, cuda
from dualgpu.backends.cpu import parallel as cpu_parallel  # internal: launches serial/parallel

__all__ = [
    "THREADS", "PROFILES", "heat_step", "heat_run", "heat_simulate", "heat_njit_serial",
    "heat_jvp_njit_serial", "heat_njit_parallel", "heat_initial", "dual_heat_arrays",
    "heat_jacobian", "nbody_jacobian", "pendulum_jacobian", "load_driver", "serial_launches",
    "parallel_launches", "measure", "measure_side_by_side", "interleaved", "rel_diff", "target",
    "run_json_script", "SETTLE_S",
]

THREADS = 256


#: Problem sizes per profile.
PROFILES = {
    "full": {
        "repeats": 5, "heat_n": 1_000_000, "heat_steps": 100, "lanes": (1, 2, 4, 8, 16),
        "launches": 1000, "memory_steps": (100, 1000), "memory_n": 100_000,
        "peer_heat": {"n": 1000, "steps": 100}, "peer_nbody": {"nb": 1024, "steps": 10},
        "peer_pendulum": {"m": 100_000, "steps": 1000}, "peer_budget_s": 120.0,
        # about 20 minutes per call each at nb=1024 (measured at nb=256, cost ~ nb^3):
        # they run in peers_nbody_small instead
        "peer_skip": {"nbody": ("torch", "numpy-fd")},
        "peer_nbody_small": {"nb": 256, "steps": 10},
        "tiled_n": 2048, "tiled_lanes": 8,
    },
    "quick": {
        "repeats": 3, "heat_n": 1_000_000, "heat_steps": 10, "lanes": (1, 2, 4, 8, 16),
        "launches": 1000, "memory_steps": (100, 1000), "memory_n": 10_000,
        "peer_heat": {"n": 200, "steps": 100}, "peer_nbody": {"nb": 64, "steps": 5},
        "peer_pendulum": {"m": 10_000, "steps": 100}, "peer_budget_s": 10.0,
        "peer_nbody_small": {"nb": 32, "steps": 5},
        "tiled_n": 1024, "tiled_lanes": 8,
    },
    "tiny": {
        "repeats": 1, "heat_n": 1000, "heat_steps": 3, "lanes": (1, 2),
        "launches": 20, "memory_steps": (5, 10), "memory_n": 100,
        "peer_heat": {"n": 10, "steps": 3}, "peer_nbody": {"nb": 4, "steps": 2},
        "peer_pendulum": {"m": 20, "steps": 5}, "peer_budget_s": 2.0,
        "peer_nbody_small": {"nb": 3, "steps": 2},
        "tiled_n": 48, "tiled_lanes": 2,
    },
}


@cuda.jit
def heat_step(u, u_new, r):
    """One explicit heat step; ghost cells outside ``[0, n)`` are held at 0 (as in peers)."""
    i = cuda.grid(1)
    n = u.shape[0]
    if i < n:
        left = u[i - 1] if i > 0 else 0.0
        right = u[i + 1] if i < n - 1 else 0.0
        u_new[i] = u[i] + r * (left - 2.0 * u[i] + right)


def heat_run(u, u_new, r, steps):
    """``steps`` launches of :func:`heat_step` (returns the final buffer)."""
    n = u.shape[0]
    blocks = (n + THREADS - 1) // THREADS
    for _ in range(steps):
        heat_step[blocks, THREADS](u, u_new, r)
        u, u_new = u_new, u
    return u


def heat_simulate(u0, r, steps):
    """The peers' heat problem written with dualgpu.cuda (differentiable through the driver)."""
    u = cuda.to_device(u0)
    u_new = cuda.device_array_like(u)
    return heat_run(u, u_new, r, steps).copy_to_host()


@njit
def heat_njit_serial(u, u_new, r, steps):
    """``steps`` heat steps written directly as a serial loop (returns the final buffer)."""
    n = u.shape[0]
    for _ in range(steps):
        for i in range(n):
            left = u[i - 1] if i > 0 else 0.0
            right = u[i + 1] if i < n - 1 else 0.0
            u_new[i] = u[i] + r * (left - 2.0 * u[i] + right)
        u, u_new = u_new, u
    return u


@njit
def heat_jvp_njit_serial(u, du, u_new, du_new, r, steps):
    """The JVP of :func:`heat_njit_serial` written by hand: value and one tangent per cell,
    two arrays each (the least memory traffic a JVP can have). Returns the final buffers."""
    n = u.shape[0]
    for _ in range(steps):
        for i in range(n):
            left = u[i - 1] if i > 0 else 0.0
            right = u[i + 1] if i < n - 1 else 0.0
            dleft = du[i - 1] if i > 0 else 0.0
            dright = du[i + 1] if i < n - 1 else 0.0
            u_new[i] = u[i] + r * (left - 2.0 * u[i] + right)
            du_new[i] = du[i] + r * (dleft - 2.0 * du[i] + dright)
        u, u_new = u_new, u
        du, du_new = du_new, du
    return u, du


@njit(parallel=True)
def _heat_prange_step(u, u_new, r):
    n = u.shape[0]
    for i in prange(n):
        left = u[i - 1] if i > 0 else 0.0
        right = u[i + 1] if i < n - 1 else 0.0
        u_new[i] = u[i] + r * (left - 2.0 * u[i] + right)


def heat_njit_parallel(u, u_new, r, steps):
    """``steps`` heat steps with a ``prange`` loop, one compiled call per step."""
    for _ in range(steps):
        _heat_prange_step(u, u_new, r)
        u, u_new = u_new, u
    return u


def heat_initial(n):
    """The heat problem's initial state on ``n`` cells: a sine plus a bump at x = 0.3."""
    x = (np.arange(n, dtype=np.float64) + 0.5) / n
    return np.sin(np.pi * x) + np.exp(-50.0 * (x - 0.3) ** 2)


def dual_heat_arrays(u0, lanes):
    """``(u, u_new)`` as DualArrays with ``lanes`` lanes, lane k seeded at cell ``k n / lanes``."""
    n = u0.shape[0]
    partials = np.zeros((lanes, n))
    for k in range(lanes):
        partials[k, (k * n) // lanes] = 1.0
    return DualArray(u0.copy(), partials), DualArray(np.zeros(n), np.zeros((lanes, n)))


def heat_jacobian(driver, s, chunk_size=None, **options):
    """Jacobian of the heat problem ``s`` (:mod:`benchmarks.peers.problems`) w.r.t. its u0
    (``options``: more of ``jacfwd``'s, such as ``capture``)."""
    # one function object for every call (capture="trace" keeps its traces per function):
    # r and steps are arguments the Jacobian is not taken with respect to
    return driver.jacfwd(heat_simulate, progress=False, chunk_size=chunk_size,
                         **options)(s["u0"], s["r"], s["steps"])


def nbody_jacobian(driver, s, chunk_size=None):
    """Jacobian of the N-body problem's final positions (flattened) w.r.t. the masses."""
    from simulations import nbody

    def final_positions(masses):
        return nbody.simulate(s["pos"], s["vel"], masses, n_steps=s["steps"], G=s["G"],
                              eps=s["eps"], dt=s["dt"])[0]
    jac = np.asarray(driver.jacfwd(final_positions, progress=False,
                                   chunk_size=chunk_size)(s["masses"]))
    return jac.reshape(-1, s["masses"].size)


def pendulum_jacobian(driver, s, chunk_size=None):
    """Jacobian of the pendulum ensemble's final angles w.r.t. (damping, amplitude, frequency)."""
    from simulations import pendulums

    def final_theta(params):
        return pendulums.simulate(s["theta0"], s["omega0"], n_steps=s["steps"], dt=s["dt"],
                                  damping=params[0], drive_amplitude=params[1],
                                  drive_frequency=params[2], g_over_l=1.0)[0]
    return driver.jacfwd(final_theta, progress=False, chunk_size=chunk_size)(s["params"])


def load_driver():
    """Return the namespace of the driver's functions: :mod:`dualgpu` (``jacfwd``, ``jvp``...).

    The cases call ``driver.jacfwd`` and ``driver.jvp``; they used to run without a driver,
    which every dualgpu now has, so this never returns None any more.
    """
    return dualgpu


def serial_launches():
    """Within the block the cpu backend runs every launch serially (no helper threads)."""
    return cpu_parallel.serial_launches()


@contextlib.contextmanager
def parallel_launches():
    """Within the block the cpu backend runs every launch in parallel (no measurement)."""
    previous = cpu_parallel.FORCE
    cpu_parallel.FORCE = True
    try:
        yield
    finally:
        cpu_parallel.FORCE = previous


def measure(fn, repeats, budget_s=None):
    """Time ``fn()``: first call (compile + run), one warm-up, then median of ``repeats``.

    If the warm-up call took longer than ``budget_s``, no more calls are made and
    its time stands in for the median (flagged ``single_run``); if the first call
    took over twice the budget, it stands in (compile included) and nothing more runs.
    Returns ``(result of the last call, dict of timings)``.
    """
    t0 = time.perf_counter()
    result = fn()
    first = time.perf_counter() - t0
    if budget_s is not None and first > 2 * budget_s:
        return result, {"first_s": first, "median_s": first, "compile_s": 0.0, "runs": 1,
                        "single_run": True, "includes_compile": True}
    t0 = time.perf_counter()
    result = fn()  # warm-up
    warm = time.perf_counter() - t0
    if budget_s is not None and warm > budget_s:
        return result, {"first_s": first, "median_s": warm, "compile_s": max(0.0, first - warm),
                        "runs": 1, "single_run": True}
    times = []
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    median = statistics.median(times)
    return result, {"first_s": first, "median_s": median, "compile_s": max(0.0, first - median),
                    "runs": len(times), "min_s": min(times)}


#: Seconds to pause before each timed call when implementations use different thread pools:
#: numba's OpenMP threads keep spinning for a while after a ``prange`` loop, and a call
#: timed right after one (dualgpu's helper threads, on 2 cores) runs up to 1.7x slower.
SETTLE_S = 0.3


def run_json_script(code, env, cwd, timeout=1800):
    """Run ``python -c code`` in a fresh process; return the JSON of its last line of output.

    Raises RuntimeError with the end of its stderr when it fails.
    """
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip()[-2000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure_side_by_side(fns, repeats, budget_s=None, settle_s=0.0):
    """Time several implementations of one thing in turn (A B C A B C ...); return timings.

    ``fns`` maps a name to a zero-argument callable. Each is called once
    (``first_s``: compile included) and once more to warm up; then ``repeats``
    rounds call every implementation once, interleaved, so a change of machine
    load hits all of them alike. An implementation whose warm-up took longer
    than ``budget_s`` is not repeated (its warm-up stands in, ``single_run``);
    one whose first call took over twice the budget is not even warmed up
    (``includes_compile``). With ``settle_s``, every timed call is preceded by a
    pause that long (see :data:`SETTLE_S`). Returns ``{name: (result, timings)}``; a
    failing implementation maps to ``(None, {"error": message})``.
    """
    out = {}
    live = {}
    for name, fn in fns.items():
        try:
            t0 = time.perf_counter()
            result = fn()
            first = time.perf_counter() - t0
        except Exception as exc:  # a failing implementation is reported, not fatal
            out[name] = (None, {"error": f"{type(exc).__name__}: {exc}"})
            continue
        if budget_s is not None and first > 2 * budget_s:
            out[name] = (result, {"first_s": first, "median_s": first, "compile_s": 0.0,
                                  "runs": 1, "single_run": True, "includes_compile": True})
            continue
        t0 = time.perf_counter()
        result = fn()
        warm = time.perf_counter() - t0
        if budget_s is not None and warm > budget_s:
            out[name] = (result, {"first_s": first, "median_s": warm,
                                  "compile_s": max(0.0, first - warm), "runs": 1,
                                  "single_run": True})
            continue
        live[name] = [fn, result, first, []]
    for _ in range(max(1, repeats)):
        for name, entry in live.items():
            if settle_s:
                time.sleep(settle_s)
            t0 = time.perf_counter()
            entry[1] = entry[0]()
            entry[3].append(time.perf_counter() - t0)
    for name, (fn, result, first, times) in live.items():
        median = statistics.median(times)
        out[name] = (result, {"first_s": first, "median_s": median,
                              "compile_s": max(0.0, first - median), "runs": len(times),
                              "min_s": min(times), "times_s": times})
    return out


def interleaved(first, second, repeats):
    """Time ``first()`` and ``second()`` alternately: ``(first times, second times, ratios)``.

    Both are called once before timing (compile, warm-up). Alternating the runs
    makes their ratio robust to a machine whose load changes while it runs.
    """
    compile_s = []
    for fn in (first, second):
        t0 = time.perf_counter()
        fn()
        compile_s.append(time.perf_counter() - t0)
    a, b = [], []
    for _ in range(max(3, repeats)):
        for fn, out in ((first, a), (second, b)):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
    ratios = [x / y for x, y in zip(a, b)]
    return {"first_s": statistics.median(a), "second_s": statistics.median(b),
            "ratio": statistics.median(ratios), "compile_s": compile_s, "runs": len(a)}


def rel_diff(ours, theirs):
    """Largest ``|ours - theirs|`` relative to the largest ``|ours|``."""
    ours = np.asarray(ours, dtype=np.float64)
    theirs = np.asarray(theirs, dtype=np.float64).reshape(ours.shape)
    scale = max(float(np.max(np.abs(ours))), 1e-300)
    return float(np.max(np.abs(ours - theirs)) / scale)


def target(value, bound, direction="<="):
    """A MET/MISSED target: ``value`` against ``bound`` (``direction`` "<=" or ">=")."""
    met = value <= bound if direction == "<=" else value >= bound
    return {"value": value, "target": bound, "direction": direction, "met": bool(met)}
