"""dualgpu's side of the benchmarks: kernels, reference loops and one function per case.

Every case function takes a profile name (``"full"``, ``"quick"`` or ``"tiny"``,
see :data:`PROFILES`) and returns a JSON-serialisable dict; :mod:`benchmarks.run`
runs each case in its own process and prints the table. Times are medians over
``repeats`` runs after one warm-up run; the first run (which compiles) is
reported separately as ``compile_s``.

Cases
-----
overhead
    1-D heat stencil on the cpu backend: plain kernel vs DualArray with N lanes.
cpu_vs_njit
    The plain stencil kernel on the cpu backend vs the same loop in ``@njit``
    (serial) and ``@njit(parallel=True)`` (prange).
launch
    Cost of one launch of a cached tiny kernel on the cpu backend.
memory
    Peak memory of heat under the driver's ``jvp`` for two step counts.
sparse
    One-step Jacobian of the 1-D heat stencil by sparsity detection, coloring
    and compressed seeding, vs one JVP with the same lane count.
host_objective
    Host post-processing (energy, misfit norm, maximum, centroid) on a 1e6-cell DualArray
    with 8 lanes vs the same numpy operations on plain arrays of 9e6 elements
    (:mod:`benchmarks.cases_host`).
tiled_nbody
    The tiled N-body kernel of ``tests/fixtures/block_kernels.py`` (a shared-memory tile
    of 8 bodies, two ``syncthreads`` per tile) vs its untiled twin on the cpu
    backend, plain and dual, interleaved run by run.
peers_heat, peers_nbody, peers_pendulum
    Jacobians of :mod:`benchmarks.peers.problems` with dualgpu's driver vs
    JAX ``jacfwd``, ``torch.func.jacfwd`` and NumPy finite differences.
"""
import contextlib
import gc
import importlib
import math
import os
import resource
import statistics
import sys
import time
import tracemalloc

import numpy as np
from numba import njit, prange

import dualgpu
from dualgpu import cuda
from dualgpu.core.dualarray import DualArray

__all__ = [
    "PROFILES", "CASES", "TARGETS", "heat_step", "heat_njit_serial", "heat_njit_parallel",
    "heat_jvp_njit_serial",
    "tiny_kernel", "measure", "load_driver", "run_case", "case_sparse",
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

#: Speed targets (reported, never asserted).
TARGETS = {
    "dual_plain_N1": 2.2, "dual_plain_N8": 9.6, "cpu_vs_njit": 1.5, "jacobian_vs_jax": 5.0,
    "tiled_vs_untiled": 1.5,
}

#: Issue 13's targets against a peer: problem -> {target: (peer, bound on our time / the
#: peer's, direction)}. Taichi is optional: without it the N-body target is not measured.
PEER_TARGETS = {
    "heat": {"heat_vs_jax": ("jax", 1.0, "<=")},
    "nbody": {"nbody_vs_taichi": ("taichi", 0.5, "<=")},
    "pendulum": {"ensemble_vs_numba": ("numba-hand", 1.0, "<=")},
}


# ---------------------------------------------------------------------------
# kernels and reference loops
# ---------------------------------------------------------------------------

@cuda.jit
def heat_step(u, u_new, r):
    """One explicit heat step; ghost cells outside ``[0, n)`` are held at 0 (as in peers)."""
    i = cuda.grid(1)
    n = u.shape[0]
    if i < n:
        left = u[i - 1] if i > 0 else 0.0
        right = u[i + 1] if i < n - 1 else 0.0
        u_new[i] = u[i] + r * (left - 2.0 * u[i] + right)


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


@cuda.jit
def tiny_kernel(a, x):
    """Add ``x`` to every element of ``a`` (launch-overhead probe)."""
    i = cuda.grid(1)
    if i < a.shape[0]:
        a[i] += x


def serial_launches():
    """Within the block the cpu backend runs every launch serially (no helper threads)."""
    from dualgpu.backends.cpu import parallel as cpu_parallel

    return cpu_parallel.serial_launches()


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


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------

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


def load_driver():
    """Return ``dualgpu.autodiff.driver`` if it exists and has ``jacfwd`` and ``jvp``, else None."""
    try:
        driver = importlib.import_module("dualgpu.autodiff.driver")
    except ImportError as exc:
        print(f"note: dualgpu.autodiff.driver is not available ({exc}); driver cases are skipped.",
              file=sys.stderr)
        return None
    if not (hasattr(driver, "jacfwd") and hasattr(driver, "jvp")):
        print("note: dualgpu.autodiff.driver has no jacfwd/jvp yet; driver cases are skipped.",
              file=sys.stderr)
        return None
    return driver


def _dual_heat_arrays(u0, lanes):
    n = u0.shape[0]
    partials = np.zeros((lanes, n))
    for k in range(lanes):
        partials[k, (k * n) // lanes] = 1.0
    return DualArray(u0.copy(), partials), DualArray(np.zeros(n), np.zeros((lanes, n)))


def _heat_initial(n):
    x = (np.arange(n, dtype=np.float64) + 0.5) / n
    return np.sin(np.pi * x) + np.exp(-50.0 * (x - 0.3) ** 2)


def _rel_diff(ours, theirs):
    ours = np.asarray(ours, dtype=np.float64)
    theirs = np.asarray(theirs, dtype=np.float64).reshape(ours.shape)
    scale = max(float(np.max(np.abs(ours))), 1e-300)
    return float(np.max(np.abs(ours - theirs)) / scale)


# ---------------------------------------------------------------------------
# cases
# ---------------------------------------------------------------------------

def case_overhead(profile):
    """Dual vs plain heat stencil on the cpu backend, N lanes."""
    p = PROFILES[profile]
    n, steps, r = p["heat_n"], p["heat_steps"], 0.25
    u0 = _heat_initial(n)
    modes = {}
    for mode in ("serial", "parallel"):
        rows = []
        guard = serial_launches() if mode == "serial" else contextlib.nullcontext()
        with dualgpu.using_backend("cpu"), guard:
            plain_u, plain_new = u0.copy(), np.zeros(n)
            _, plain = measure(lambda: heat_run(plain_u, plain_new, r, steps), p["repeats"])
            for lanes in p["lanes"]:
                du, dnew = _dual_heat_arrays(u0, lanes)
                _, t = measure(lambda: heat_run(du, dnew, r, steps), p["repeats"])
                ratio = t["median_s"] / plain["median_s"]
                rows.append({"lanes": lanes, **t, "ratio": ratio, "per_direction": ratio / lanes,
                             "memory_bound_limit": 1 + lanes})
        modes[mode] = {"plain": plain, "dual": rows}
    plain, rows = modes["serial"]["plain"], modes["serial"]["dual"]
    # correctness spot check: the values of a dual run equal the plain run
    ok = None
    if steps <= 20:
        du, dnew = _dual_heat_arrays(u0, 1)
        with dualgpu.using_backend("cpu"):
            pu, pn = u0.copy(), np.zeros(n)
            ok = bool(np.allclose(heat_run(du, dnew, r, steps).values, heat_run(pu, pn, r, steps)))
    by_lanes = {row["lanes"]: row["ratio"] for row in rows}
    targets = {}
    if 1 in by_lanes:
        targets["dual_plain_N1"] = {"value": by_lanes[1], "target": TARGETS["dual_plain_N1"],
                                    "met": by_lanes[1] <= TARGETS["dual_plain_N1"]}
    if 8 in by_lanes:
        targets["dual_plain_N8"] = {"value": by_lanes[8], "target": TARGETS["dual_plain_N8"],
                                    "met": by_lanes[8] <= TARGETS["dual_plain_N8"]}
    return {"n": n, "steps": steps, "plain": plain, "dual": rows, "values_match": ok,
            "parallel": modes["parallel"], "targets": targets,
            "note": "targets judged on serial launches (prange timings swing with machine load)"}


def case_cpu_vs_njit(profile):
    """The plain kernel on the cpu backend vs hand-written @njit loops."""
    p = PROFILES[profile]
    n, steps, r = p["heat_n"], p["heat_steps"], 0.25
    u0 = _heat_initial(n)
    bufs = {name: (u0.copy(), np.zeros(n)) for name in ("kernel", "serial", "parallel")}
    with dualgpu.using_backend("cpu"):
        out_k, kernel = measure(lambda: heat_run(*bufs["kernel"], r, steps), p["repeats"])
        with serial_launches():
            _, kernel_serial = measure(lambda: heat_run(*bufs["kernel"], r, steps),
                                       p["repeats"])
    out_s, serial = measure(lambda: heat_njit_serial(*bufs["serial"], r, steps), p["repeats"])
    out_p, parallel = measure(lambda: heat_njit_parallel(*bufs["parallel"], r, steps),
                              p["repeats"])
    ratio_serial = kernel_serial["median_s"] / serial["median_s"]
    ratio_parallel = kernel["median_s"] / parallel["median_s"]
    best = max(ratio_serial, ratio_parallel)
    return {"n": n, "steps": steps, "cpu_backend": kernel, "cpu_backend_serial": kernel_serial,
            "njit_serial": serial,
            "njit_parallel": parallel, "ratio_vs_serial": ratio_serial,
            "ratio_vs_parallel": ratio_parallel,
            "targets": {"cpu_vs_njit": {"value": best, "target": TARGETS["cpu_vs_njit"],
                                        "met": best <= TARGETS["cpu_vs_njit"],
                                        "note": "worse of serial-vs-serial and parallel-vs-parallel"}}}


def case_launch(profile):
    """Microseconds per launch of a cached tiny kernel on the cpu backend."""
    p = PROFILES[profile]
    a = np.zeros(32)
    launches = p["launches"]

    def many():
        for _ in range(launches):
            tiny_kernel[1, 32](a, 1.0)

    with dualgpu.using_backend("cpu"):
        _, t = measure(many, p["repeats"])
    return {"launches": launches, "array": a.size, **t,
            "us_per_launch": 1e6 * t["median_s"] / launches}


def _peak_memory_child(n, steps, use_driver):
    """Peak traced memory (tracemalloc) of one heat jvp of ``steps`` steps."""
    u0 = _heat_initial(n)
    v = np.cos(np.arange(n) * 0.1)
    driver = load_driver() if use_driver else None
    with dualgpu.using_backend("cpu"):
        def once():
            if driver is not None:
                return driver.jvp(lambda u: heat_simulate(u, 0.25, steps), (u0,), (v,))
            du = DualArray(u0.copy(), v[None, :].copy())
            return heat_simulate(du, 0.25, steps)
        once()  # compile outside the trace
        gc.collect()
        tracemalloc.start()
        t0 = time.perf_counter()
        once()
        elapsed = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return {"steps": steps, "peak_traced_bytes": peak, "seconds": elapsed,
            "ru_maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}


def case_memory(profile):
    """Peak memory of heat jvp with few vs many steps (flat in steps expected)."""
    p = PROFILES[profile]
    driver = load_driver()
    via = "driver.jvp" if driver is not None else "DualArray seeded by hand (driver missing)"
    rows = [_peak_memory_child(p["memory_n"], steps, driver is not None)
            for steps in p["memory_steps"]]
    growth = rows[-1]["peak_traced_bytes"] / max(rows[0]["peak_traced_bytes"], 1)
    state_bytes = p["memory_n"] * 8 * 2
    return {"n": p["memory_n"], "via": via, "runs": rows, "peak_ratio": growth,
            "state_bytes_dual": state_bytes,
            "note": "peak traced (tracemalloc) bytes; ru_maxrss is the process high-water mark"}


# -- peers -------------------------------------------------------------------

def measure_side_by_side(fns, repeats, budget_s=None):
    """Time several implementations of one thing in turn (A B C A B C ...); return timings.

    ``fns`` maps a name to a zero-argument callable. Each is called once
    (``first_s``: compile included) and once more to warm up; then ``repeats``
    rounds call every implementation once, interleaved, so a change of machine
    load hits all of them alike. An implementation whose warm-up took longer
    than ``budget_s`` is not repeated (its warm-up stands in, ``single_run``);
    one whose first call took over twice the budget is not even warmed up
    (``includes_compile``). Returns ``{name: (result, timings)}``; a failing
    implementation maps to ``(None, {"error": message})``.
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
            t0 = time.perf_counter()
            entry[1] = entry[0]()
            entry[3].append(time.perf_counter() - t0)
    for name, (fn, result, first, times) in live.items():
        median = statistics.median(times)
        out[name] = (result, {"first_s": first, "median_s": median,
                              "compile_s": max(0.0, first - median), "runs": len(times),
                              "min_s": min(times), "times_s": times})
    return out


def target(value, bound, direction="<="):
    """A MET/MISSED target: ``value`` against ``bound`` (``direction`` "<=" or ">=")."""
    met = value <= bound if direction == "<=" else value >= bound
    return {"value": value, "target": bound, "direction": direction, "met": bool(met)}


def _peer_case(profile, problem, case, jacobian, size_key=None):
    from benchmarks import peers
    from benchmarks.peers import problems

    p = PROFILES[profile]
    size = p[size_key or f"peer_{problem}"]
    setup = getattr(problems, f"{problem}_setup")(**size)
    driver = load_driver()
    skip = () if size_key else p.get("peer_skip", {}).get(problem, ())
    fns, rows = {}, []
    if driver is not None:
        def ours():
            with dualgpu.using_backend("cpu"):
                return np.asarray(jacobian(driver, setup))
        fns["dualgpu"] = ours
    for name, module in peers.load_peers().items():
        if name in skip:
            rows.append({"peer": name, "available": True, "skipped": True,
                         "reason": "too slow at this size; see the reduced-size case"})
        elif not module.AVAILABLE:
            rows.append({"peer": name, "available": False, "reason": module.IMPORT_ERROR})
        elif case not in module.CASES:
            rows.append({"peer": name, "available": True, "skipped": True,
                         "reason": "this peer does not implement the case"})
        else:
            extra = {}
            if name == "jax" and case == "nbody_mass_jacobian" and setup["masses"].size > 128:
                extra["chunk_size"] = 32   # all lanes at once needs (nb, nb, nb, 3) doubles
            try:
                fns[name] = module.prepare(case, **setup, **extra)
            except Exception as exc:
                rows.append({"peer": name, "available": True,
                             "error": f"{type(exc).__name__}: {exc}"})
                continue
            rows.append({"peer": name, "available": True, "version": module.VERSION})
    timed = measure_side_by_side(fns, p["repeats"], p["peer_budget_s"])
    ours, t, note = None, None, None
    if driver is None:
        note = "dualgpu.autodiff.driver missing: dualgpu side skipped"
    else:
        ours, t = timed.pop("dualgpu")
        if "error" in t:
            note, t = f"dualgpu failed: {t['error']}", None
    for row in rows:
        if row["peer"] in timed:
            result, timing = timed[row["peer"]]
            row.update(timing)
            if ours is not None and result is not None:
                row["max_rel_diff_vs_dualgpu"] = _rel_diff(ours, result)
    if driver is not None:
        directions = setup[{"heat": "u0", "nbody": "masses", "pendulum": "params"}[problem]].size
        tile = dualgpu.core.lanes.tile_lanes(directions, "cpu")
        note = note or (f"dualgpu: driver.jacfwd, tiles of {tile} lanes, "
                        f"{dualgpu.core.lanes.batch_lanes(directions, tile, 0)} lanes per run of f")
    result = {"problem": problem, "size": size, "dualgpu": t, "peers": rows, "note": note,
              "targets": {}}
    times = {row["peer"]: row["median_s"] for row in rows if "median_s" in row}
    if t is not None:
        for name, (peer, bound, direction) in PEER_TARGETS.get(problem, {}).items():
            if peer in times:
                ratio = t["median_s"] / times[peer]
                result["targets"][name] = target(ratio, bound, direction)
        if "jax" in times and problem in ("heat", "nbody", "pendulum"):
            result["targets"]["jacobian_vs_jax"] = target(
                times["jax"] / t["median_s"], TARGETS["jacobian_vs_jax"], ">=")
    return result


def _heat_jacobian(driver, s, chunk_size=None):
    return driver.jacfwd(lambda u: heat_simulate(u, s["r"], s["steps"]), progress=False,
                         chunk_size=chunk_size)(s["u0"])


def _nbody_jacobian(driver, s, chunk_size=None):
    from simulations import nbody

    def final_positions(masses):
        return nbody.simulate(s["pos"], s["vel"], masses, n_steps=s["steps"], G=s["G"],
                              eps=s["eps"], dt=s["dt"])[0]
    jac = np.asarray(driver.jacfwd(final_positions, progress=False,
                                   chunk_size=chunk_size)(s["masses"]))
    return jac.reshape(-1, s["masses"].size)


def _pendulum_jacobian(driver, s, chunk_size=None):
    from simulations import pendulums

    def final_theta(params):
        return pendulums.simulate(s["theta0"], s["omega0"], n_steps=s["steps"], dt=s["dt"],
                                  damping=params[0], drive_amplitude=params[1],
                                  drive_frequency=params[2], g_over_l=1.0)[0]
    return driver.jacfwd(final_theta, progress=False, chunk_size=chunk_size)(s["params"])


def case_peers_heat(profile):
    """Heat dense Jacobian w.r.t. the initial state."""
    return _peer_case(profile, "heat", "heat_jacobian", _heat_jacobian)


def case_peers_nbody(profile):
    """N-body Jacobian of final positions w.r.t. masses."""
    return _peer_case(profile, "nbody", "nbody_mass_jacobian", _nbody_jacobian)


def case_peers_pendulum(profile):
    """Pendulum ensemble Jacobian of final angles w.r.t. (gamma, A, omega)."""
    return _peer_case(profile, "pendulum", "pendulum_param_jacobian", _pendulum_jacobian)


def _heat_one_step(u0):
    return heat_simulate(u0, 0.25, 1)


def case_sparse(profile):
    """One-step Jacobian of the heat stencil by coloring vs one JVP with the same lanes."""
    from dualgpu import sparse
    from dualgpu.autodiff.coloring import color_columns

    from dualgpu.autodiff.sparsity import banded_pattern

    p = PROFILES[profile]
    n = p["heat_n"]
    u0 = _heat_initial(n)
    driver = load_driver()
    # detection is meant for up to ~1e5 inputs: time it there, give the 1e6 pattern
    n_detect = min(n, 100_000)
    t0 = time.perf_counter()
    detected = sparse.detect_sparsity(_heat_one_step, (_heat_initial(n_detect),))
    detect_s = time.perf_counter() - t0
    detect_ok = bool((detected != banded_pattern(n_detect, 1)).nnz == 0)
    pattern = banded_pattern(n, 1)
    t0 = time.perf_counter()
    coloring = color_columns(pattern)
    coloring_s = time.perf_counter() - t0
    lanes = coloring.n_colors
    J, t_sparse = measure(
        lambda: sparse.sparse_jacobian(_heat_one_step, (u0,), sparsity=coloring, progress=False),
        p["repeats"])
    tangents = np.zeros((lanes, n))
    tangents[:, 0] = 1.0
    _, t_jvp = measure(
        lambda: driver.jvp_batch(_heat_one_step, (u0,), (tangents,), progress=False), p["repeats"])
    ratio = t_sparse["median_s"] / t_jvp["median_s"]
    dense_lanes = 8
    dense_equivalent_s = math.ceil(n / dense_lanes) * t_jvp["median_s"] * (1 + dense_lanes) / (1 + lanes)
    # check: interior rows of a one-step heat Jacobian are (r, 1 - 2r, r)
    row = J.getrow(n // 2).toarray().ravel()
    correct = bool(np.allclose(row[n // 2 - 1: n // 2 + 2], [0.25, 0.5, 0.25]) and J.nnz <= 3 * n)
    return {
        "n": n, "colors": lanes, "nnz": int(J.nnz), "detect_s": detect_s, "coloring_s": coloring_s,
        "detect_n": n_detect, "detected_pattern_correct": detect_ok,
        "sparse": t_sparse, "jvp": t_jvp, "ratio_vs_jvp": ratio, "values_correct": correct,
        "dense_equivalent_s": dense_equivalent_s,
        "targets": {"sparse_vs_jvp": {"value": ratio, "target": 4.0, "met": ratio <= 4.0}},
    }


def case_peers_nbody_small(profile):
    """N-body mass Jacobian at a reduced size where every peer runs in minutes."""
    return _peer_case(profile, "nbody", "nbody_mass_jacobian", _nbody_jacobian,
                      size_key="peer_nbody_small")


#: case name -> function(profile) -> dict
def _block_kernels():
    """tests/fixtures/block_kernels.py: the block-level kernels of issue 11 (the tiled N-body)."""
    tests = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests",
                         "fixtures")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    return importlib.import_module("block_kernels")


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


def case_tiled_nbody(profile):
    """Tiled (shared memory, two syncthreads per tile) vs untiled N-body accelerations, cpu backend."""
    p = PROFILES[profile]
    bk = _block_kernels()
    n = p["tiled_n"]
    pos, _, mass = bk.nbody_initial_state(n)
    blocks = (n + bk.TILE - 1) // bk.TILE
    rng = np.random.default_rng(0)
    rows, targets = [], {}
    for kind, lanes in (("plain", 0), ("dual", p["tiled_lanes"])):
        if lanes:
            d_pos = DualArray(pos, rng.standard_normal((lanes,) + pos.shape))
            d_mass = DualArray(mass, rng.standard_normal((lanes, n)))
            acc = {k: DualArray(np.zeros_like(pos), np.zeros((lanes,) + pos.shape))
                   for k in ("tiled", "untiled")}
        else:
            d_pos, d_mass = pos, mass
            acc = {k: np.zeros_like(pos) for k in ("tiled", "untiled")}
        modes = {}
        for mode in ("serial", "parallel"):
            guard = serial_launches() if mode == "serial" else _parallel_launches()
            with dualgpu.using_backend("cpu"), guard:
                t = interleaved(
                    lambda: bk.nbody_accel_tiled[blocks, bk.TILE](d_pos, d_mass, acc["tiled"], 1.0),
                    lambda: bk.nbody_accel_untiled[blocks, bk.TILE](d_pos, d_mass, acc["untiled"],
                                                                    1.0),
                    p["repeats"])
            modes[mode] = {"tiled_s": t["first_s"], "untiled_s": t["second_s"],
                           "ratio": t["ratio"], "compile_s": t["compile_s"], "runs": t["runs"]}
        get = (lambda a: np.concatenate([a.values.ravel(), a.partials.ravel()])) if lanes \
            else np.ravel
        same = _rel_diff(get(acc["tiled"]), get(acc["untiled"]))
        rows.append({"kind": kind, "lanes": lanes, **modes, "max_rel_diff": same})
        ratio = modes["serial"]["ratio"]
        targets[f"tiled_vs_untiled_{kind}"] = {
            "value": ratio, "target": TARGETS["tiled_vs_untiled"],
            "met": ratio <= TARGETS["tiled_vs_untiled"]}
    return {"n": n, "tile": bk.TILE, "rows": rows, "targets": targets,
            "note": "targets judged on serial launches; parallel: blocks on numba's threads"}


@contextlib.contextmanager
def _parallel_launches():
    """Within the block the cpu backend runs every launch in parallel (no measurement)."""
    from dualgpu.backends.cpu import parallel as cpu_parallel

    previous = cpu_parallel.FORCE
    cpu_parallel.FORCE = True
    try:
        yield
    finally:
        cpu_parallel.FORCE = previous


CASES = {
    "tiled_nbody": case_tiled_nbody,
    "sparse": case_sparse,
    "overhead": case_overhead,
    "cpu_vs_njit": case_cpu_vs_njit,
    "launch": case_launch,
    "memory": case_memory,
    "peers_heat": case_peers_heat,
    "peers_nbody": case_peers_nbody,
    "peers_nbody_small": case_peers_nbody_small,
    "peers_pendulum": case_peers_pendulum,
    "host_objective": lambda profile: _cases_host().case_host_objective(profile),
}


def _cases_host():
    from benchmarks import cases_host

    return cases_host


def _register_target_cases():
    from benchmarks import cases_targets

    CASES.update(cases_targets.CASES)


def run_case(name, profile):
    """Run case ``name`` at ``profile`` and return its dict (with the environment)."""
    if name not in CASES:
        _register_target_cases()
    if name not in CASES:
        raise KeyError(f"unknown case {name!r}; expected one of {sorted(CASES)}.")
    if profile not in PROFILES:
        raise KeyError(f"unknown profile {profile!r}; expected one of {sorted(PROFILES)}.")
    return CASES[name](profile)
