"""The launch_plans benchmark case (issue 41) runs, and its planned runs equal unplanned ones.

The timings are not checked (never a timed test); the table line and the equality of the
results with and without launch plans, bit for bit, are.
"""
from benchmarks import run
from benchmarks.cases_launch import case_launch_plans, format_launch_plans


def test_launch_plans_case_tiny():
    result = case_launch_plans("tiny")
    assert result["planned_equals_unplanned"] == {"plain": True, "jvp": True, "jacobian": True}
    assert set(result["targets"]) == {"plain_us_per_launch", "jvp_us_per_launch",
                                      "jacobian16_us_per_launch", "heat_jvp_vs_fused_njit"}
    assert result["heat"]["tangent_rel_diff"] < 1e-12  # against the hand-written tangent loop
    lines = format_launch_plans(result)
    assert lines[0].startswith("Launch plans (issue 41)")
    assert "launch_plans" in run.CASE_ORDER


def test_nbody_fresh_case_tiny():
    from benchmarks.cases_launch import case_nbody_fresh, format_nbody_fresh

    result = case_nbody_fresh("tiny")
    assert len(result["runs"]) == 3
    assert all(run["tangent_rel_diff"] < 1e-10 for run in result["runs"])  # same tangents
    assert len(format_nbody_fresh(result)) == 4
