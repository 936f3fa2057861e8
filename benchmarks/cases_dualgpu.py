"""dualgpu's side of the benchmarks: kernels, reference loops and one function per case.

Every case function takes a profile name (``"full"``, ``"quick"`` or ``"tiny"``,
see :data:`benchmarks.harness.PROFILES`) and returns a JSON-serialisable dict;
:mod:`benchmarks.run` gathers :data:`CASES` with those of :mod:`benchmarks.cases_host` and
:mod:`benchmarks.cases_targets`, runs each case in its own process and prints the table. Times
are medians over ``repeats`` runs after one warm-up run; the first run (which compiles) is
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
tiled_nbody
    The tiled N-body kernel of ``tests/fixtures/block_kernels.py`` (a shared-memory tile
    of 8 bodies, two ``syncthreads`` per tile) vs its untiled twin on the cpu
    backend, plain and dual, interleaved run by run.
peers_heat, peers_nbody, peers_pendulum
    Jacobians of :mod:`benchmarks.peers.problems` with dualgpu's driver vs
    JAX ``jacfwd``, ``torch.func.jacfwd`` and NumPy finite differences.

Public names of dualgpu throughout, except where a case measures an internal on purpose: the
lane tiles the driver picks (``dualgpu.core.lanes``, reported beside the peer timings) and
the cpu backend's parallel-launch switch (through :mod:`benchmarks.harness`).
"""
import contextlib
import gc
import importlib
import math
import os
import resource
import sys
import time
import tracemalloc

import numpy as np

import dualgpu
from benchmarks.harness import (
    PROFILES, dual_heat_arrays, heat_initial, heat_jacobian, heat_njit_parallel,
    heat_njit_serial, heat_run, heat_simulate, interleaved, load_driver, measure,
    measure_side_by_side, nbody_jacobian, parallel_launches, pendulum_jacobian, rel_diff,
    serial_launches, target,
)
from benchmarks.harness import heat_step  # noqa: F401  (tests/test_tiles.py takes it from here)
from dualgpu import DualArray, cuda, sparse
from dualgpu.core.lanes import batch_lanes, tile_lanes  # internal: the driver's lane tiles

__all__ = ["CASES", "TARGETS", "tiny_kernel", "case_sparse"]

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
def tiny_kernel(a, x):
    """Add ``x`` to every element of ``a`` (launch-overhead probe)."""
    i = cuda.grid(1)
    if i < a.shape[0]:
        a[i] += x


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


# ---------------------------------------------------------------------------
# cases
# ---------------------------------------------------------------------------

def case_overhead(profile):
    """Dual vs plain heat stencil on the cpu backend, N lanes."""
    p = PROFILES[profile]
    n, steps, r = p["heat_n"], p["heat_steps"], 0.25
    u0 = heat_initial(n)
    modes = {}
    for mode in ("serial", "parallel"):
        rows = []
        guard = serial_launches() if mode == "serial" else contextlib.nullcontext()
        with dualgpu.using_backend("cpu"), guard:
            plain_u, plain_new = u0.copy(), np.zeros(n)
            _, plain = measure(lambda: heat_run(plain_u, plain_new, r, steps), p["repeats"])
            for lanes in p["lanes"]:
                du, dnew = dual_heat_arrays(u0, lanes)
                _, t = measure(lambda: heat_run(du, dnew, r, steps), p["repeats"])
                ratio = t["median_s"] / plain["median_s"]
                rows.append({"lanes": lanes, **t, "ratio": ratio, "per_direction": ratio / lanes,
                             "memory_bound_limit": 1 + lanes})
        modes[mode] = {"plain": plain, "dual": rows}
    plain, rows = modes["serial"]["plain"], modes["serial"]["dual"]
    # correctness spot check: the values of a dual run equal the plain run
    ok = None
    if steps <= 20:
        du, dnew = dual_heat_arrays(u0, 1)
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
    u0 = heat_initial(n)
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
                                        "note": "worse of serial-vs-serial and "
                                                "parallel-vs-parallel"}}}


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
    u0 = heat_initial(n)
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
        note = "dualgpu's driver missing: dualgpu side skipped"
    else:
        ours, t = timed.pop("dualgpu")
        if "error" in t:
            note, t = f"dualgpu failed: {t['error']}", None
    for row in rows:
        if row["peer"] in timed:
            result, timing = timed[row["peer"]]
            row.update(timing)
            if ours is not None and result is not None:
                row["max_rel_diff_vs_dualgpu"] = rel_diff(ours, result)
    if driver is not None:
        directions = setup[{"heat": "u0", "nbody": "masses", "pendulum": "params"}[problem]].size
        tile = tile_lanes(directions, "cpu")
        note = note or (f"dualgpu: driver.jacfwd, tiles of {tile} lanes, "
                        f"{batch_lanes(directions, tile, 0)} lanes per run of f")
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


def case_peers_heat(profile):
    """Heat dense Jacobian w.r.t. the initial state."""
    return _peer_case(profile, "heat", "heat_jacobian", heat_jacobian)


def case_peers_nbody(profile):
    """N-body Jacobian of final positions w.r.t. masses."""
    return _peer_case(profile, "nbody", "nbody_mass_jacobian", nbody_jacobian)


def case_peers_pendulum(profile):
    """Pendulum ensemble Jacobian of final angles w.r.t. (gamma, A, omega)."""
    return _peer_case(profile, "pendulum", "pendulum_param_jacobian", pendulum_jacobian)


def _heat_one_step(u0):
    return heat_simulate(u0, 0.25, 1)


def case_sparse(profile):
    """One-step Jacobian of the heat stencil by coloring vs one JVP with the same lanes."""
    p = PROFILES[profile]
    n = p["heat_n"]
    u0 = heat_initial(n)
    driver = load_driver()
    # detection is meant for up to ~1e5 inputs: time it there, give the 1e6 pattern
    n_detect = min(n, 100_000)
    t0 = time.perf_counter()
    detected = sparse.detect_sparsity(_heat_one_step, (heat_initial(n_detect),))
    detect_s = time.perf_counter() - t0
    detect_ok = bool((detected != sparse.banded_pattern(n_detect, 1)).nnz == 0)
    pattern = sparse.banded_pattern(n, 1)
    t0 = time.perf_counter()
    coloring = sparse.color_columns(pattern)
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
    dense_equivalent_s = (math.ceil(n / dense_lanes) * t_jvp["median_s"]
                          * (1 + dense_lanes) / (1 + lanes))
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
    return _peer_case(profile, "nbody", "nbody_mass_jacobian", nbody_jacobian,
                      size_key="peer_nbody_small")


def _block_kernels():
    """tests/fixtures/block_kernels.py: the block-level kernels of issue 11 (the tiled N-body)."""
    tests = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests",
                         "fixtures")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    return importlib.import_module("block_kernels")


def case_tiled_nbody(profile):
    """Tiled (shared memory, two syncthreads per tile) vs untiled N-body accelerations, cpu
    backend."""
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
            guard = serial_launches() if mode == "serial" else parallel_launches()
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
        same = rel_diff(get(acc["tiled"]), get(acc["untiled"]))
        rows.append({"kind": kind, "lanes": lanes, **modes, "max_rel_diff": same})
        ratio = modes["serial"]["ratio"]
        targets[f"tiled_vs_untiled_{kind}"] = {
            "value": ratio, "target": TARGETS["tiled_vs_untiled"],
            "met": ratio <= TARGETS["tiled_vs_untiled"]}
    return {"n": n, "tile": bk.TILE, "rows": rows, "targets": targets,
            "note": "targets judged on serial launches; parallel: blocks on the cpu backend's "
                    "helper threads"}


#: case name -> function(profile) -> dict (run.py adds those of cases_host and cases_targets)
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
}

