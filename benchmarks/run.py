"""Run dualgpu's benchmarks side by side and print a table; optionally write JSON.

Usage::

    python benchmarks/run.py                 # full sizes (tens of minutes on 2 cores)
    python benchmarks/run.py --quick         # reduced sizes, about 2 minutes
    python benchmarks/run.py --tiny          # smoke test, seconds of compute
    python benchmarks/run.py --only overhead --out results.json

Each case runs in its own Python process (fresh JIT caches, an empty dualgpu
compile cache, its own peak memory), one after the other; a case that fails or
times out is reported and the others still run. The table ends with every
target's verdict (MET/MISSED) for this run on this machine. Case definitions:
``benchmarks/cases_dualgpu.py``, ``cases_host.py`` and ``cases_targets.py``, gathered here
(:func:`all_cases`); sizes and the timing helpers they share: ``benchmarks/harness.py``.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

__all__ = ["main", "all_cases", "run_case", "run_cases", "format_table", "target_summary"]

CASE_ORDER = ("overhead", "cpu_vs_njit", "launch", "memory", "sparse", "tiled_nbody", "peers_heat",
              "peers_nbody", "peers_nbody_small", "peers_pendulum", "host_objective", "jvp_primal",
              "cold_start", "parallel_load", "lanes", "coloring", "sass", "pair_loop", "first_call",
              "plain_vs_njit", "launch_plans", "nbody_fresh", "heat_cache_lanes",
              "captured_loops")

#: Seconds one case may run, per profile.
CASE_TIMEOUT = {"full": 3600, "quick": 600, "tiny": 300}


def all_cases():
    """Return ``{case name: function(profile) -> dict}`` of every case module.

    Imported on call, in the child process that runs one case: the case modules import
    dualgpu and compile kernels, which the parent process (the table) never needs.
    """
    from benchmarks import (
        cases_cache_lanes, cases_capture, cases_dualgpu, cases_host, cases_launch, cases_simd,
        cases_targets,
    )

    return {**cases_dualgpu.CASES, **cases_host.CASES, **cases_targets.CASES, **cases_simd.CASES,
            **cases_launch.CASES, **cases_cache_lanes.CASES, **cases_capture.CASES}


def run_case(name, profile):
    """Run case ``name`` at ``profile`` in this process and return its dict."""
    from benchmarks.harness import PROFILES

    found = all_cases()
    if name not in found:
        raise KeyError(f"unknown case {name!r}; expected one of {sorted(found)}.")
    if profile not in PROFILES:
        raise KeyError(f"unknown profile {profile!r}; expected one of {sorted(PROFILES)}.")
    return found[name](profile)


def _child(case, profile, out):
    result = run_case(case, profile)
    with open(out, "w") as fh:
        json.dump(result, fh)


def run_cases(cases, profile, timeout=None, echo=True):
    """Run ``cases`` (names) at ``profile`` each in a subprocess; return ``{case: result}``.

    A failed case maps to ``{"error": message}``.
    """
    results = {}
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    timeout = timeout or CASE_TIMEOUT[profile]
    for case in cases:
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "result.json")
            # a fresh compile cache per case: first calls include compiling, as in a new project
            env["DUALGPU_CACHE_DIR"] = os.path.join(tmp, "cache")
            cmd = [sys.executable, os.path.abspath(__file__), "--child", case,
                   "--profile", profile, "--child-out", out]
            t0 = time.perf_counter()
            if echo:
                print(f"[{case}] running ...", file=sys.stderr, flush=True)
            try:
                proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                                      timeout=timeout)
            except subprocess.TimeoutExpired:
                results[case] = {"error": f"timed out after {timeout} s"}
                continue
            wall = time.perf_counter() - t0
            notes = [line for line in proc.stderr.splitlines() if line.startswith("note:")]
            if proc.returncode != 0 or not os.path.exists(out):
                tail = "\n".join(proc.stderr.strip().splitlines()[-6:])
                results[case] = {"error": f"exit code {proc.returncode}: {tail}"}
            else:
                with open(out) as fh:
                    results[case] = json.load(fh)
            results[case]["wall_s"] = wall
            if notes:
                results[case]["notes"] = sorted(set(notes))
            if echo:
                print(f"[{case}] done in {wall:.1f} s", file=sys.stderr, flush=True)
    return results


# ---------------------------------------------------------------------------
# table
# ---------------------------------------------------------------------------

def _ms(seconds):
    return "-" if seconds is None else f"{1e3 * seconds:10.2f} ms"


def _target_lines(result):
    lines = []
    for name, t in (result.get("targets") or {}).items():
        sign = t.get("direction") or (">=" if name == "jacobian_vs_jax" else "<=")
        mark = "MET" if t["met"] else "MISSED"
        lines.append(f"  target {name}: {t['value']:.2f} ({sign} {t['target']}) {mark}")
    return lines


def target_summary(results):
    """Every target of every case, one line each: the run's MET/MISSED verdicts."""
    lines = []
    for case, result in results.items():
        for name, t in (result.get("targets") or {}).items():
            sign = t.get("direction") or (">=" if name == "jacobian_vs_jax" else "<=")
            lines.append(f"  {'MET   ' if t['met'] else 'MISSED'} {case}.{name}: "
                         f"{t['value']:.3g} ({sign} {t['target']})")
    return lines


def _overhead(r):
    lines = [f"Overhead: heat 1-D stencil, n = {r['n']:,}, {r['steps']} steps, cpu backend, "
             "serial launches",
             f"  plain kernel      {_ms(r['plain']['median_s'])}  "
             f"(compile {r['plain']['compile_s']:.2f} s)",
             "  lanes   dual time      dual/plain  per direction  memory-bound limit  compile"]
    for row in r["dual"]:
        lines.append(f"  {row['lanes']:5d} {_ms(row['median_s'])}  {row['ratio']:10.2f}x "
                     f"{row['per_direction']:12.2f}x {row['memory_bound_limit']:17d}x "
                     f"{row['compile_s']:7.2f} s")
    par = r.get("parallel")
    if par:
        lines.append(f"  parallel (prange) launches: plain {_ms(par['plain']['median_s'])}; "
                     "dual/plain "
                     + ", ".join(f"N={row['lanes']} {row['ratio']:.2f}x" for row in par["dual"]))
    if r.get("note"):
        lines.append(f"  note: {r['note']}")
    if r.get("values_match") is not None:
        lines.append(f"  dual values equal plain values: {r['values_match']}")
    return lines + _target_lines(r)


def _cpu_vs_njit(r):
    return [f"cpu backend vs hand-written @njit: heat n = {r['n']:,}, {r['steps']} steps",
            f"  cpu backend, serial launcher    {_ms(r['cpu_backend_serial']['median_s'])}",
            f"  @njit serial                    {_ms(r['njit_serial']['median_s'])}  "
            f"ratio {r['ratio_vs_serial']:.2f}x",
            f"  cpu backend, prange launcher    {_ms(r['cpu_backend']['median_s'])}  "
            f"(compile {r['cpu_backend']['compile_s']:.2f} s)",
            f"  @njit(parallel=True)            {_ms(r['njit_parallel']['median_s'])}  "
            f"ratio {r['ratio_vs_parallel']:.2f}x",
            ] + _target_lines(r)


def _launch(r):
    return [f"Launch overhead (cached kernel, {r['array']} elements, {r['launches']} launches): "
            f"{r['us_per_launch']:.2f} us per launch "
            f"(first batch incl. compile {r['first_s']:.2f} s)"]


def _memory(r):
    lines = [f"Memory vs time steps: heat jvp, n = {r['n']:,}, via {r['via']}"]
    for row in r["runs"]:
        lines.append(f"  {row['steps']:5d} steps: "
                     f"peak traced {row['peak_traced_bytes'] / 1e6:8.2f} MB, "
                     f"ru_maxrss {row['ru_maxrss_kib'] / 1024:8.1f} MiB, {row['seconds']:.3f} s")
    lines.append(f"  peak ratio (many/few steps): {r['peak_ratio']:.2f}  "
                 f"(dual state u+u_new ~ {r['state_bytes_dual'] / 1e6:.2f} MB x 2)")
    return lines


def _peers(r):
    size = ", ".join(f"{k}={v:,}" for k, v in r["size"].items())
    lines = [f"Jacobian, {r['problem']} ({size})",
             "  implementation        median         first call   max rel diff vs dualgpu"]
    ours = r.get("dualgpu")
    if ours:
        lines.append(f"  {'dualgpu (cpu)':20s} {_ms(ours['median_s'])}  {ours['first_s']:9.2f} s")
    else:
        lines.append(f"  {'dualgpu (cpu)':20s} skipped: {r.get('note')}")
    for row in r["peers"]:
        if row.get("skipped"):
            lines.append(f"  {row['peer']:20s} skipped: {row.get('reason')}")
        elif not row.get("available"):
            lines.append(f"  {row['peer']:20s} not installed ({row.get('reason')})")
        elif "error" in row:
            lines.append(f"  {row['peer']:20s} failed: {row['error'][:100]}")
        else:
            diff = row.get("max_rel_diff_vs_dualgpu")
            diff = "-" if diff is None else f"{diff:.2e}"
            single = "  (single run: over budget)" if row.get("single_run") else ""
            if row.get("includes_compile"):
                single = "  (single run, compile included: over budget)"
            lines.append(f"  {row['peer'] + ' ' + str(row.get('version')):20s} "
                         f"{_ms(row['median_s'])}  "
                         f"{row['first_s']:9.2f} s   {diff}{single}")
    return lines + _target_lines(r)


def _jvp_primal(r):
    roof = r.get("roofline")
    roof = [f"  roofline: dualgpu jvp moves {roof['jvp_gb_s']:.1f} GB/s (values and tangent, read "
            f"and written once per step), {100 * roof['of_copy']:.0f}% of the copy bandwidth"
            ] if roof else []
    return roof + [f"JVP vs primal: heat 1-D, n = {r['n']:,}, {r['steps']} steps, cpu backend",
            f"  primal {_ms(r['primal']['median_s'])}   jvp {_ms(r['jvp']['median_s'])}   "
            f"ratio {r['ratio']:.2f}x   values equal: {r['values_match']}",
            f"  by hand (@njit, value + tangent arrays): primal {_ms(r['njit_primal']['median_s'])}"
            f"   jvp {_ms(r['njit_jvp']['median_s'])}   ratio {r['by_hand_ratio']:.2f}x "
            "(the memory-traffic floor)",
            f"  dualgpu jvp / hand-written jvp {r['jvp_over_by_hand_jvp']:.2f}x   "
            "tangents agree to "
            f"{r['tangent_rel_diff_vs_by_hand']:.1e}"] + _target_lines(r)


def _cold_start(r):
    cold, warm, ref = r["cold"], r["warm"], r["numba_cache_true"]
    return [f"Start-up in a fresh process (N-body, {r['nbody']} bodies: plain run, then a dual "
            "Jacobian)",
            f"  empty cache: import {cold['import_s']:.2f} s, first plain run "
            f"{cold['plain_first_s']:.2f} s, first Jacobian {cold['dual_first_s']:.2f} s",
            f"  warm cache:  import {warm['import_s']:.2f} s, first plain run "
            f"{warm['plain_first_s']:.2f} s, first Jacobian {warm['dual_first_s']:.2f} s",
            f"  numba cache=True reference (fresh process, warm cache): first call "
            f"{ref['first_call_s']:.2f} s (import {ref['import_s']:.2f} s)"] + _target_lines(r)


def _parallel_load(r):
    lines = [f"Parallel launches on vs off ({r['cpus']} CPUs; ratio = on / off)",
             f"  {'workload':20s} {'quiet on':>10s} {'off':>10s} {'ratio':>6s}   "
             f"{'busy on':>10s} {'off':>10s} {'ratio':>6s}"]
    for q, b in zip(r["quiet"], r["loaded"]):
        lines.append(f"  {q['workload']:20s} {q['on_s']:10.4f} {q['off_s']:10.4f} "
                     f"{q['ratio']:6.2f}   {b['on_s']:10.4f} {b['off_s']:10.4f} {b['ratio']:6.2f}")
    return lines + _target_lines(r)


def _lanes(r):
    lines = [f"Lanes per tile (cpu backend; default {r['default_tile']}): time per direction",
             f"  {'problem':8s} {'tile':>5s} {'us/direction':>13s} {'compile':>8s}"]
    for row in r["rows"]:
        if "error" in row:
            lines.append(f"  {row['problem']:8s} {row['tile']:5d} failed: {row['error'][:80]}")
            continue
        lines.append(f"  {row['problem']:8s} {row['tile']:5d} {row['per_direction_us']:13.1f} "
                     f"{row['compile_s']:7.1f}s")
    return lines


def _coloring(r):
    lines = ["Coloring: colors found vs the lower bound (most nonzeros in a row)",
             f"  {'pattern':40s} {'best':>5s} {'greedy':>7s} {'bound':>6s} {'time':>7s}"]
    for row in r["rows"]:
        lines.append(f"  {row['pattern']:40s} {row['best']:5d} {row['largest_first']:7d} "
                     f"{row['lower_bound']:6d} {row['seconds']:6.2f}s")
    if r.get("note"):
        lines.append(f"  note: {r['note']}")
    return lines + _target_lines(r)


def _sass(r):
    if not r["rows"]:
        return [f"SASS: {r.get('note')}"]
    from benchmarks.sass import format_rows

    lines = format_rows(r["rows"]).splitlines()
    lines += [f"  FAILED {x['simulation']}.{x['kernel']} N={x['lanes']}: {x['error']}"
              for x in r["rows"] if "error" in x]
    return lines + _target_lines(r)


def _sparse(r):
    return [f"Sparse Jacobian: one heat step, n = {r['n']:,} cells, cpu backend",
            f"  detection (structural tracer, n = {r['detect_n']:,}) {r['detect_s']:.2f} s, "
            f"pattern correct: {r['detected_pattern_correct']}",
            f"  coloring {r['coloring_s']:.3f} s "
            f"-> {r['colors']} colors, {r['nnz']:,} nonzeros, "
            f"entries correct: {r['values_correct']}",
            f"  sparse Jacobian (coloring reused) {_ms(r['sparse']['median_s'])}",
            f"  one JVP with {r['colors']} lanes      {_ms(r['jvp']['median_s'])}  "
            f"ratio {r['ratio_vs_jvp']:.2f}x",
            f"  dense forward mode would need ~{r['dense_equivalent_s']:.0f} s "
            f"({r['n']:,} directions in chunks of 8)"] + _target_lines(r)


def _tiled_nbody(r):
    lines = [f"Tiled vs untiled N-body accelerations, n = {r['n']:,}, tile {r['tile']} bodies "
             "(shared memory, 2 syncthreads per tile), cpu backend"]
    for row in r["rows"]:
        name = "plain" if not row["lanes"] else f"dual N={row['lanes']}"
        for mode in ("serial", "parallel"):
            m = row[mode]
            lines.append(f"  {name:9s} {mode:8s} tiled {_ms(m['tiled_s'])}  untiled "
                         f"{_ms(m['untiled_s'])}  ratio {m['ratio']:.2f}x  "
                         f"(compile {m['compile_s'][0]:.1f} s / {m['compile_s'][1]:.1f} s)")
        lines.append(f"  {name:9s} tiled and untiled agree to {row['max_rel_diff']:.1e}")
    if r.get("note"):
        lines.append(f"  note: {r['note']}")
    return lines + _target_lines(r)


def _host_objective(r):
    lines = [f"Host objectives: DualArray of {r['n']:,} cells x {r['lanes']} lanes vs plain numpy "
             f"on {r['plain_elements']:,} elements",
             "  operation      dual          plain         dual/plain  (cpu time)  values = numpy"]
    for row in r["rows"]:
        lines.append(f"  {row['name']:12s} {_ms(row['dual_s'])} {_ms(row['plain_s'])}"
                     f"  {row['ratio']:9.2f}x  {row['cpu_ratio']:9.2f}x  {row['values_match']}")
    if r.get("note"):
        lines.append(f"  note: {r['note']}")
    return lines + _target_lines(r)


def _pair_loop(r):
    d, h = r["dual"], r["by_hand"]
    return [f"Dual N-body pair loop, n = {r['n']:,} bodies, {r['lanes']} lanes (cpu backend, "
            "lanes-last tiles)",
            f"  dualgpu   {_ms(d['median_s'])}  {d['ns_per_pair_lane']:.2f} ns per pair and lane, "
            f"{d['gflop_s']:.1f} GFLOP/s = {100 * d['of_dgemm']:.0f}% of dgemm",
            f"  by hand   {_ms(h['median_s'])}  {h['ns_per_pair_lane']:.2f} ns per pair and lane, "
            f"{h['gflop_s']:.1f} GFLOP/s = {100 * h['of_dgemm']:.0f}% of dgemm "
            "(@njit(parallel=True), lanes stride 1)",
            f"  dualgpu / by hand {r['dual_over_by_hand']:.2f}x; dual / plain per lane "
            f"{r['dual_over_plain_per_lane']:.2f}x; tangents agree to "
            f"{r['tangent_rel_diff_vs_by_hand']:.1e}"] + _target_lines(r)


def _first_call(r):
    lines = [f"N-body mass Jacobian, {r['nb']} bodies, {r['steps']} steps, fresh processes"]
    for label, key in (("dualgpu, empty cache", "empty_cache"),
                       ("dualgpu, warm cache", "warm_cache"),
                       (f"taichi {r.get('taichi_version')}", "taichi")):
        x = r[key]
        if "error" in x:
            lines.append(f"  {label:22s} {x['error']}")
        else:
            lines.append(f"  {label:22s} first {x['first_s']:8.2f} s   later {x['later_s']:8.2f} s"
                         f"   (import {x['import_s']:.2f} s)")
    if "checksum_rel_diff" in r:
        lines.append(f"  Jacobians agree (sum of |J|) to {r['checksum_rel_diff']:.1e}")
    return lines + _target_lines(r)


def _launch_plans(r):
    from benchmarks.cases_launch import format_launch_plans

    return format_launch_plans(r) + _target_lines(r)


def _heat_cache_lanes(r):
    from benchmarks.cases_cache_lanes import format_heat_cache_lanes

    return format_heat_cache_lanes(r) + _target_lines(r)


def _captured_loops(r):
    from benchmarks.cases_capture import format_captured_loops

    return format_captured_loops(r) + _target_lines(r)


def _nbody_fresh(r):
    from benchmarks.cases_launch import format_nbody_fresh

    return format_nbody_fresh(r) + _target_lines(r)


def _plain_vs_njit(r):
    lines = ["Plain runs: cpu backend vs the same loops with @njit(parallel=True)",
             f"  {'simulation':12s} {'dualgpu':>13s} {'njit':>13s} {'ratio':>6s}  bitwise equal"]
    for row in r["rows"]:
        lines.append(f"  {row['simulation']:12s} {_ms(row['dualgpu']['median_s'])} "
                     f"{_ms(row['njit']['median_s'])} {row['ratio']:6.2f}  {row['bitwise_equal']}")
    return lines + _target_lines(r)


_FORMATTERS = {"pair_loop": _pair_loop, "first_call": _first_call,
               "plain_vs_njit": _plain_vs_njit, "tiled_nbody": _tiled_nbody, "sparse": _sparse,
               "overhead": _overhead, "cpu_vs_njit": _cpu_vs_njit, "launch": _launch,
               "memory": _memory, "peers_heat": _peers, "peers_nbody": _peers,
               "peers_nbody_small": _peers,
               "peers_pendulum": _peers, "host_objective": _host_objective,
               "jvp_primal": _jvp_primal, "cold_start": _cold_start,
               "parallel_load": _parallel_load, "lanes": _lanes, "coloring": _coloring,
               "sass": _sass, "launch_plans": _launch_plans,
               "nbody_fresh": _nbody_fresh, "heat_cache_lanes": _heat_cache_lanes,
               "captured_loops": _captured_loops}


def format_table(results, profile, limits=None):
    """Return the readable report of ``results`` (as made by :func:`run_cases`)."""
    lines = [f"dualgpu benchmarks, profile {profile!r}; "
             f"{platform.processor() or platform.machine()}, "
             f"{os.cpu_count()} CPUs, Python {platform.python_version()}"]
    if limits:
        from benchmarks.roofline import describe

        lines.append(describe(limits))
    lines.append("")
    for case, result in results.items():
        if "error" in result:
            lines.append(f"{case}: FAILED: {result['error']}")
        else:
            try:
                lines.extend(_FORMATTERS[case](result))
            except Exception as exc:  # never lose the JSON over a formatting slip
                lines.append(f"{case}: (could not format: {type(exc).__name__}: {exc})")
        for note in result.get("notes", ()):
            lines.append(f"  {note}")
        lines.append("")
    summary = target_summary({k: v for k, v in results.items() if "error" not in v})
    if summary:
        lines += ["Targets (this run, this machine):"] + summary
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="reduced sizes (~2 minutes)")
    size.add_argument("--tiny", action="store_true", help="smoke-test sizes (for tests)")
    parser.add_argument("--only", action="append", choices=CASE_ORDER, metavar="CASE",
                        help=f"run only this case (repeatable): {', '.join(CASE_ORDER)}")
    parser.add_argument("--out", help="write the results as JSON to this file")
    parser.add_argument("--timeout", type=float, help="seconds per case")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--profile", help=argparse.SUPPRESS)
    parser.add_argument("--child-out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child, args.profile, args.child_out)
        return 0
    profile = "tiny" if args.tiny else "quick" if args.quick else "full"
    cases = args.only or list(CASE_ORDER)
    from benchmarks import roofline

    limits = roofline.limits(profile)  # once, before any case: every case compares with it
    os.environ[roofline.ENV] = json.dumps(limits)
    results = run_cases(cases, profile, args.timeout)
    print(format_table(results, profile, limits))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"profile": profile, "python": platform.python_version(), "roofline": limits,
                       "cpus": os.cpu_count(), "results": results}, fh, indent=1)
        print(f"results written to {args.out}")
    return 1 if any("error" in r for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
