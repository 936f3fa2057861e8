"""The heat_cache_lanes benchmark case (issue 41 point 3) runs and its Jacobians agree.

The timings are not checked (never a timed test); the agreement of the cache-fitted,
single-run and traced Jacobians with the hand-written numba one, and the table lines, are.
"""
from benchmarks import run
from benchmarks.cases_cache_lanes import case_heat_cache_lanes, format_heat_cache_lanes


def test_heat_cache_lanes_case_tiny():
    result = case_heat_cache_lanes("tiny")
    assert set(result["max_rel_diff_vs_hand"]) == {"cache_fitted", "one_run", "traced"}
    assert max(result["max_rel_diff_vs_hand"].values()) < 1e-12
    assert set(result["targets"]) == {"heat_jacobian_vs_hand_numba",
                                      "heat_jacobian_traced_vs_hand_numba"}
    lines = format_heat_cache_lanes(result)
    assert lines[0].startswith("Heat 40 cells x 5 steps, dense Jacobian")
    assert "heat_cache_lanes" in run.CASE_ORDER
    assert "heat_cache_lanes" in run.all_cases()
