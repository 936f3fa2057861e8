"""Benchmark cases for issue 22: the cpu backend at the hardware limit.

Each ``case_<name>(profile)`` returns a JSON-serialisable dict with ``targets``
(MET/MISSED in :mod:`benchmarks.run`); comparisons run side by side in one process
(:func:`benchmarks.harness.measure_side_by_side`), or in fresh processes one after the
other where the first call is what is measured.

pair_loop
    The dual N-body pair loop (``simulations.nbody.accelerations`` on DualArrays of 32
    lanes, lanes-last tiles): ns per pair and lane, GFLOP/s at
    :data:`~benchmarks.njit_references.PAIR_LANE_FLOPS` per pair and lane, and the
    fraction of the machine's dgemm (:mod:`benchmarks.roofline`); beside it the
    hand-written numba tangent loop (:func:`~benchmarks.njit_references.nbody_mass_tangents`).
first_call
    The N-body mass Jacobian in fresh processes: dualgpu's first call with an empty
    compile cache, its later call, its first call with the cache warm; Taichi's
    ``FwdMode`` first and later call (when Taichi is installed).
plain_vs_njit
    Plain runs (no duals) of the example simulations through the cpu backend vs the same
    loops written with ``@njit(parallel=True)`` (:mod:`benchmarks.njit_references`),
    results compared bit for bit.
"""
import os
import tempfile
import textwrap

import numpy as np

import dualgpu
from benchmarks import njit_references as ref
from benchmarks import roofline
from benchmarks.harness import PROFILES, SETTLE_S, measure_side_by_side, run_json_script, target
from dualgpu.core.dualarray import DualArray
from dualgpu.backends.cpu.kernel import compile_kernel  # internal: one kernel, timed alone

__all__ = ["CASES", "SIZES"]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: Sizes per profile.
SIZES = {
    "full": {"pair_n": 1024, "first_nb": 1024, "first_steps": 10, "heat": (1_000_000, 200),
             "gray_scott": (512, 100), "pendulums": (100_000, 1000), "nbody": (1024, 20)},
    "quick": {"pair_n": 384, "first_nb": 256, "first_steps": 10, "heat": (1_000_000, 50),
              "gray_scott": (256, 50), "pendulums": (100_000, 100), "nbody": (512, 10)},
    "tiny": {"pair_n": 16, "first_nb": 8, "first_steps": 2, "heat": (1000, 3),
             "gray_scott": (16, 3), "pendulums": (200, 5), "nbody": (8, 2)},
}

#: Issue 22's bounds.
PAIR_LOOP_OF_DGEMM = 0.30
FIRST_OVER_TAICHI_FIRST = 0.5
FIRST_OVER_LATER = 1.15
PLAIN_OVER_NJIT = 1.1
PAIR_LANES = 32


# ---------------------------------------------------------------------------
# the dual pair loop against dgemm
# ---------------------------------------------------------------------------

def case_pair_loop(profile):
    """Dual N-body accelerations, 32 lanes: ns per pair and lane, GFLOP/s, fraction of dgemm."""
    from simulations import nbody

    p, s = PROFILES[profile], SIZES[profile]
    n, lanes = s["pair_n"], PAIR_LANES
    limits = roofline.limits(profile)
    pos, _, mass = nbody.default_initial_state(n)
    rng = np.random.default_rng(1)
    dpos, dmass = rng.standard_normal((lanes, n, 3)), rng.standard_normal((lanes, n))
    dual_args = (DualArray(pos, dpos), DualArray(mass, dmass), 1.0, 0.05,
                 DualArray(np.zeros((n, 3)), np.zeros((lanes, n, 3))))
    kernel = compile_kernel(nbody.accelerations)
    blocks = (n + 127) // 128
    plain_acc = np.zeros((n, 3))
    # the hand-written loop's layout: (body, component, lane)
    hand = (pos, np.ascontiguousarray(dpos.transpose(1, 2, 0)), mass,
            np.ascontiguousarray(dmass.T), 1.0, 0.05, np.zeros((n, 3)), np.zeros((n, 3, lanes)))

    def dual():
        kernel[blocks, 128](*dual_args)
        return dual_args[4].partials

    timed = measure_side_by_side({
        "dual": dual,
        "by_hand": lambda: (ref.nbody_mass_tangents(*hand), hand[7])[1],
        "plain": lambda: (kernel[blocks, 128](pos, mass, 1.0, 0.05, plain_acc), plain_acc)[1],
    }, p["repeats"], settle_s=SETTLE_S)
    (ours, t_dual), (theirs, t_hand), (_, t_plain) = (
        timed[k] for k in ("dual", "by_hand", "plain"))
    work = n * (n - 1) * lanes
    flops = ref.PAIR_LANE_FLOPS * work
    rows = {}
    for name, t in (("dual", t_dual), ("by_hand", t_hand)):
        gflops = flops / t["median_s"] / 1e9
        rows[name] = {**t, "ns_per_pair_lane": 1e9 * t["median_s"] / work, "gflop_s": gflops,
                      "of_dgemm": roofline.fraction(gflops, limits["dgemm_gflop_s"])}
    theirs_lane_major = np.moveaxis(theirs, 2, 0)
    diff = float(np.max(np.abs(ours - theirs_lane_major)) / np.max(np.abs(theirs_lane_major)))
    return {"n": n, "lanes": lanes, "limits": limits, "dual": rows["dual"],
            "by_hand": rows["by_hand"], "plain": t_plain,
            "dual_over_by_hand": t_dual["median_s"] / t_hand["median_s"],
            "dual_over_plain_per_lane": t_dual["median_s"] / t_plain["median_s"] / lanes,
            "tangent_rel_diff_vs_by_hand": diff,
            "targets": {"pair_loop_of_dgemm": target(rows["dual"]["of_dgemm"],
                                                     PAIR_LOOP_OF_DGEMM, ">=")}}


# ---------------------------------------------------------------------------
# first call vs later call vs Taichi, fresh processes
# ---------------------------------------------------------------------------

_FIRST_SCRIPT = textwrap.dedent("""
    import json, sys, time
    sys.path[:0] = [{root!r}]
    import numpy as np
    from benchmarks.peers import problems
    setup = problems.nbody_setup(nb={nb}, steps={steps})
    start = time.perf_counter()
    if {who!r} == "dualgpu":
        import dualgpu
        from benchmarks.harness import nbody_jacobian
        dualgpu.set_backend("cpu")
        run = lambda: nbody_jacobian(dualgpu, setup)
    else:
        from benchmarks.peers import taichi_cases
        run = taichi_cases.prepare("nbody_mass_jacobian", **setup)
    ready = time.perf_counter()
    first = np.asarray(run())
    t_first = time.perf_counter()
    later = np.asarray(run())
    t_later = time.perf_counter()
    print(json.dumps({{"import_s": ready - start, "first_s": t_first - ready,
                      "later_s": t_later - t_first, "checksum": float(np.abs(first).sum()),
                      "repeatable": bool(np.array_equal(first, later))}}))
""")


def _fresh(who, nb, steps, cache):
    env = dict(os.environ, DUALGPU_CACHE_DIR=cache)
    code = _FIRST_SCRIPT.format(root=ROOT, nb=nb, steps=steps, who=who)
    try:
        return run_json_script(code, env, ROOT, timeout=3000)
    except RuntimeError as exc:
        return {"error": (str(exc).splitlines() or ["failed"])[-1][:300]}


def case_first_call(profile):
    """N-body mass Jacobian: first and later call in fresh processes, dualgpu and Taichi."""
    from benchmarks.peers import taichi_cases

    s = SIZES[profile]
    nb, steps = s["first_nb"], s["first_steps"]
    with tempfile.TemporaryDirectory() as cache:
        empty = _fresh("dualgpu", nb, steps, cache)
        warm = _fresh("dualgpu", nb, steps, cache)
    taichi = (_fresh("taichi", nb, steps, cache) if taichi_cases.AVAILABLE
              else {"error": f"not installed ({taichi_cases.IMPORT_ERROR})"})
    result = {"nb": nb, "steps": steps, "empty_cache": empty, "warm_cache": warm,
              "taichi": taichi, "taichi_version": getattr(taichi_cases, "VERSION", None),
              "targets": {}}
    if "error" not in empty:
        result["targets"]["first_over_later"] = target(empty["first_s"] / empty["later_s"],
                                                       FIRST_OVER_LATER)
        if "error" not in taichi:
            result["targets"]["first_over_taichi_first"] = target(
                empty["first_s"] / taichi["first_s"], FIRST_OVER_TAICHI_FIRST)
            result["checksum_rel_diff"] = abs(empty["checksum"] - taichi["checksum"]) / abs(
                taichi["checksum"])
    return result


# ---------------------------------------------------------------------------
# plain runs vs @njit(parallel=True)
# ---------------------------------------------------------------------------

def _plain_problems(s):
    from simulations import gray_scott, heat1d, nbody, pendulums

    n, steps = s["heat"]
    u0 = np.sin(np.linspace(0, np.pi, n))
    yield ("heat1d", lambda: heat1d.simulate(u0, n_steps=steps),
           lambda: ref.heat1d_njit(u0, steps), {"n": n, "steps": steps})
    n, steps = s["gray_scott"]
    gu, gv = gray_scott.default_initial_state(n)
    yield ("gray_scott", lambda: gray_scott.simulate(gu, gv, n_steps=steps),
           lambda: ref.gray_scott_njit(gu, gv, steps), {"n": n, "steps": steps})
    m, steps = s["pendulums"]
    th, om = pendulums.default_initial_state(m)
    yield ("pendulums", lambda: pendulums.simulate(th, om, n_steps=steps),
           lambda: ref.pendulums_njit(th, om, steps), {"members": m, "steps": steps})
    nb, steps = s["nbody"]
    pos, vel, mass = nbody.default_initial_state(nb)
    yield ("nbody", lambda: nbody.simulate(pos, vel, mass, n_steps=steps),
           lambda: ref.nbody_njit(pos, vel, mass, steps), {"bodies": nb, "steps": steps})


def _same(a, b):
    a = a if isinstance(a, tuple) else (a,)
    b = b if isinstance(b, tuple) else (b,)
    return all(np.array_equal(x, y) for x, y in zip(a, b))


def case_plain_vs_njit(profile):
    """Plain simulation runs: cpu backend vs the same loops with ``@njit(parallel=True)``."""
    p, s = PROFILES[profile], SIZES[profile]
    rows, targets = [], {}
    with dualgpu.using_backend("cpu"):
        for name, ours, theirs, size in _plain_problems(s):
            timed = measure_side_by_side({"dualgpu": ours, "njit": theirs}, p["repeats"],
                                         settle_s=SETTLE_S)
            (a, t_ours), (b, t_njit) = timed["dualgpu"], timed["njit"]
            ratio = t_ours["median_s"] / t_njit["median_s"]
            rows.append({"simulation": name, "size": size, "dualgpu": t_ours, "njit": t_njit,
                         "ratio": ratio, "bitwise_equal": _same(a, b)})
            targets[f"{name}_plain_over_njit"] = target(ratio, PLAIN_OVER_NJIT)
    return {"rows": rows, "targets": targets}


CASES = {"pair_loop": case_pair_loop, "first_call": case_first_call,
         "plain_vs_njit": case_plain_vs_njit}
