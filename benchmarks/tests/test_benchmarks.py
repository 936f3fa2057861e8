"""The benchmark runner and the GPU check, end to end at tiny sizes (no timing assertions)."""
import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RUN = os.path.join(ROOT, "benchmarks", "run.py")
GPU_CHECK = os.path.join(ROOT, "benchmarks", "gpu_check.py")


def _python(*args, timeout=300):
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


#: the cases both run.py tests below check, run by one process (one interpreter start and one
#: import of dualgpu, numba and the peers instead of two)
TINY_CASES = ("overhead", "launch", "memory", "peers_pendulum", "jvp_primal", "coloring", "sass")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """``(process, results json)`` of ``run.py --tiny`` with every case of ``TINY_CASES``."""
    out = tmp_path_factory.mktemp("benchmarks") / "results.json"
    only = [arg for case in TINY_CASES for arg in ("--only", case)]
    proc = _python(RUN, "--tiny", *only, "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc, json.loads(out.read_text())


def test_run_tiny_writes_json_and_table(tiny_run):
    proc, data = tiny_run
    assert data["profile"] == "tiny"
    results = data["results"]
    assert set(results) == set(TINY_CASES)
    overhead = results["overhead"]
    assert [row["lanes"] for row in overhead["dual"]] == [1, 2]
    assert overhead["values_match"] is True
    assert results["launch"]["us_per_launch"] > 0
    assert len(results["memory"]["runs"]) == 2
    peers = {row["peer"]: row for row in results["peers_pendulum"]["peers"]}
    assert set(peers) == {"jax", "torch", "taichi", "numba-hand", "numpy-fd"}
    assert peers["numpy-fd"]["available"]
    if results["peers_pendulum"]["dualgpu"] is not None:
        # equal work: every installed peer agrees with dualgpu's Jacobian
        for row in peers.values():
            if "max_rel_diff_vs_dualgpu" in row:
                assert row["max_rel_diff_vs_dualgpu"] < 1e-5, row
    assert "Overhead: heat 1-D stencil" in proc.stdout
    assert "Jacobian, pendulum" in proc.stdout


def test_run_tiny_target_cases(tiny_run):
    proc, data = tiny_run
    results = data["results"]
    assert results["jvp_primal"]["values_match"] is True
    # dualgpu's tangent equals the hand-written JVP loop's (same arithmetic, same order)
    assert results["jvp_primal"]["tangent_rel_diff_vs_by_hand"] < 1e-12
    if "rows" in results["sass"]:  # ptxas found (the test extra)
        dual = [r for r in results["sass"]["rows"] if r["lanes"] and "error" not in r]
        assert dual and all(r["one_launch"]["registers"] > 0 for r in dual)
    coloring = {row["pattern"]: row for row in results["coloring"]["rows"]}
    assert coloring["periodic heat, 1000 cells, 100 steps"]["best"] == 250
    assert "Targets (this run, this machine):" in proc.stdout
    assert "jvp_primal.jvp_vs_primal" in proc.stdout
    assert "coloring.periodic_heat_colors" in proc.stdout


def test_format_table_reports_failed_cases():
    sys.path.insert(0, ROOT)
    from benchmarks.run import format_table

    text = format_table({"launch": {"error": "boom", "wall_s": 0.1}}, "tiny")
    assert "launch: FAILED: boom" in text


def test_gpu_check_without_gpu_exits_cleanly():
    from numba import cuda

    if cuda.is_available():
        pytest.skip("a GPU is present; the no-GPU path is not taken")
    proc = _python(GPU_CHECK, timeout=120)
    assert proc.returncode == 0
    assert "no usable NVIDIA GPU" in proc.stderr
    assert "Traceback" not in proc.stderr
    strict = _python(GPU_CHECK, "--strict", timeout=120)
    assert strict.returncode == 1


def test_gpu_check_self_test_runs_on_cpu():
    proc = _python(GPU_CHECK, "--self-test", "--only", "heat1d", timeout=200)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "heat1d" in proc.stdout and "GB/s" in proc.stdout and "OK" in proc.stdout
    assert "lanes per tile" in proc.stdout and "one launch vs per tile  0.0e+00" in proc.stdout
    assert "launch graph: heat" in proc.stdout and "bit for bit True" in proc.stdout


def test_host_objective_case_in_process():
    sys.path.insert(0, ROOT)
    from benchmarks.cases_host import case_host_objective
    from benchmarks.run import format_table

    result = case_host_objective("tiny")
    assert [row["name"] for row in result["rows"]] == [
        "energy", "misfit", "maximum", "centroid", "objective"]
    assert all(row["values_match"] and row["ratio"] > 0 for row in result["rows"])
    assert "host_objective" in result["targets"]
    text = format_table({"host_objective": result}, "tiny")
    assert "Host objectives: DualArray of 1,000 cells x 8 lanes" in text
    assert "target host_objective" in text


def test_simd_cases_in_process():
    # issue 22's cases at tiny sizes: the work they count and the checks they make, no timing
    sys.path.insert(0, ROOT)
    from benchmarks import cases_simd, roofline
    from benchmarks.run import format_table

    pair = cases_simd.case_pair_loop("tiny")
    # dualgpu's lanes-last dual pair loop and the hand-written tangent loop agree
    assert pair["tangent_rel_diff_vs_by_hand"] < 1e-12
    assert pair["dual"]["gflop_s"] > 0 and pair["dual"]["of_dgemm"] > 0
    plain = cases_simd.case_plain_vs_njit("tiny")
    assert [r["simulation"] for r in plain["rows"]] == ["heat1d", "gray_scott", "pendulums",
                                                        "nbody"]
    assert all(r["bitwise_equal"] for r in plain["rows"])  # the same loops, the same numbers
    limits = roofline.limits("tiny")
    text = format_table({"pair_loop": pair, "plain_vs_njit": plain}, "tiny", limits)
    assert "Roofline of this machine: dgemm" in text and "of dgemm" in text
    assert "pair_loop.pair_loop_of_dgemm" in text and "nbody_plain_over_njit" in text
