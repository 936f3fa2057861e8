"""The captured_loops benchmark case (issue 41, point 2) runs, and captured, traced and
launch-graph runs equal uncaptured ones bit for bit. The timings are not checked (never a
timed test)."""
from benchmarks import run
from benchmarks.cases_capture import case_captured_loops, format_captured_loops


def test_captured_loops_case_tiny():
    result = case_captured_loops("tiny")
    assert result["captured_equals_uncaptured"] == {"jvp": True, "jacobian": True,
                                                    "plain": True}
    assert result["heat"]["captured_equals_uncaptured"]
    assert result["heat"]["traced_equals_uncaptured"]
    assert result["deferred_launches"] > 0  # the loops were captured
    assert result["heat"]["tangent_rel_diff"] < 1e-12  # against the hand-written loop
    assert set(result["targets"]) == {"captured_jvp_us_per_step",
                                      "captured_jacobian16_us_per_step",
                                      "captured_heat_jvp_vs_fused_njit",
                                      "traced_jvp_us_per_step", "traced_jacobian16_us_per_step",
                                      "traced_heat_jvp_vs_fused_njit", "graph_jvp_us_per_step",
                                      "graph_jacobian16_us_per_step",
                                      "graph_plain_us_per_step"}
    lines = format_captured_loops(result)
    assert lines[0].startswith("Captured loops (issue 41)")
    assert lines[1].split()[0] == "graph"
    assert "captured_loops" in run.CASE_ORDER
