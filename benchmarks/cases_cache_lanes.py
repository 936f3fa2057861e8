"""Benchmark case of issue 41 point 3: lanes per run of f that fit the L2 cache.

heat_cache_lanes
    The dense Jacobian of the 1-D heat problem (:mod:`benchmarks.peers.problems`, 1000
    cells, 100 steps) on the cpu backend, side by side in one process: dualgpu as it runs
    by default (runs of f whose working set fits one core's L2,
    :func:`dualgpu.core.lanes.cache_lanes`), dualgpu with every lane in one run (the
    choice before: the L2 size set to 1 TiB), dualgpu traced (``capture="trace"``: after
    the first runs its tables replay lane tile by lane tile, on helper threads where
    that pays), and the hand-written numba peer
    (``benchmarks/peers/numba_cases.py``: each direction's tangent row stepped, ``prange``
    over directions). Target: the default within 1.5x of the hand-written loop. The
    machine's load (``/proc/loadavg``) is printed before and after: on a 2-core machine
    shared with other work, a run at a load above 2 is only indicative.
"""
import numpy as np

import dualgpu
from benchmarks.cases_launch import _load
from benchmarks.harness import heat_jacobian, measure_side_by_side, rel_diff, target
from dualgpu.core import lanes as _lanes

__all__ = ["CASES", "HEAT_JACOBIAN_VS_HAND", "case_heat_cache_lanes",
           "format_heat_cache_lanes"]

#: issue 41: the heat 10^3 dense Jacobian within this factor of hand-written numba
HEAT_JACOBIAN_VS_HAND = 1.5

_SIZES = {"full": (1000, 100, 9), "quick": (1000, 100, 5), "tiny": (40, 5, 1)}


def case_heat_cache_lanes(profile):
    """Heat 10^3 x 100 dense Jacobian: cache-fitted runs, one run, hand-written numba."""
    from benchmarks.peers import numba_cases, problems

    n, steps, repeats = _SIZES[profile]
    setup = problems.heat_setup(n=n, steps=steps)
    hand = numba_cases.prepare("heat_jacobian", **setup)
    unit = _lanes.driver_tiles(n, "cpu")[0]
    chosen = _lanes.cache_lanes(n, unit, setup["u0"].nbytes)

    def dualgpu_with(cache_bytes, capture="auto"):
        def run():
            real = _lanes.l2_cache_bytes
            if cache_bytes is not None:
                _lanes.l2_cache_bytes = lambda: cache_bytes
            try:
                with dualgpu.using_backend("cpu"):
                    return np.asarray(heat_jacobian(dualgpu, setup, capture=capture))
            finally:
                _lanes.l2_cache_bytes = real
        return run

    load_before = _load()
    timed = measure_side_by_side({"cache_fitted": dualgpu_with(None),
                                  "one_run": dualgpu_with(1 << 40),
                                  "traced": dualgpu_with(None, "trace"),
                                  "hand_numba": hand}, repeats)
    load_after = _load()
    reference = timed["hand_numba"][0]
    t = {name: timing["median_s"] for name, (_, timing) in timed.items()}
    diff = {name: rel_diff(result, reference) for name, (result, _) in timed.items()
            if name != "hand_numba"}
    ratio = t["cache_fitted"] / t["hand_numba"]
    traced = t["traced"] / t["hand_numba"]
    return {"n": n, "steps": steps, "l2_bytes": _lanes.l2_cache_bytes(), "unit": unit,
            "lanes_per_run": chosen, "median_s": t, "ratio_vs_hand": ratio,
            "traced_vs_hand": traced,
            "one_run_over_fitted": t["one_run"] / t["cache_fitted"],
            "max_rel_diff_vs_hand": diff, "loadavg_before": load_before,
            "loadavg_after": load_after,
            "targets": {"heat_jacobian_vs_hand_numba": target(ratio, HEAT_JACOBIAN_VS_HAND),
                        "heat_jacobian_traced_vs_hand_numba":
                            target(traced, HEAT_JACOBIAN_VS_HAND)}}


def format_heat_cache_lanes(r):
    """The table lines of :func:`case_heat_cache_lanes`."""
    t = r["median_s"]
    return [f"Heat {r['n']} cells x {r['steps']} steps, dense Jacobian, cpu backend (L2 "
            f"{r['l2_bytes'] // 1024} KiB, runs of {r['lanes_per_run']} lanes):",
            f"  cache-fitted runs {1e3 * t['cache_fitted']:.1f} ms, one run of every lane "
            f"{1e3 * t['one_run']:.1f} ms ({r['one_run_over_fitted']:.2f}x), hand-written "
            f"numba {1e3 * t['hand_numba']:.1f} ms: {r['ratio_vs_hand']:.2f}x; traced "
            f"(capture='trace': tables tile by tile, on helper threads) {1e3 * t['traced']:.1f}"
            f" ms: {r['traced_vs_hand']:.2f}x; agree to "
            f"{max(r['max_rel_diff_vs_hand'].values()):.1e}",
            f"  loadavg before {r['loadavg_before']} / after {r['loadavg_after']}"]


CASES = {"heat_cache_lanes": case_heat_cache_lanes}
