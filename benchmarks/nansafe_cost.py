"""Cost of NaN-safe mode: the 1e6-cell heat stencil, dual vs dual NaN-safe, cpu backend.

NaN-safe mode is chosen at import (``DUALGPU_NANSAFE_MODE=1``), so each mode runs in
its own process; the two processes alternate, several rounds each, and the medians of
all rounds are compared (the machine's load drifts: alternating keeps it fair).

    python benchmarks/nansafe_cost.py                  # 1e6 cells, 20 steps, N = 1, 4, 8
    python benchmarks/nansafe_cost.py --n 100000 --steps 10 --rounds 2
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)


def child(n, steps, lanes, repeats):
    """In this process: seconds per step of the heat stencil, one list per lane count."""
    sys.path[:0] = [_ROOT, _HERE]
    import dualgpu
    from benchmarks.harness import (
        dual_heat_arrays, heat_initial, heat_run, measure, serial_launches,
    )

    u0 = heat_initial(n)
    times = {}
    with dualgpu.using_backend("cpu"), serial_launches():
        for count in lanes:
            du, dnew = dual_heat_arrays(u0, count)
            _, t = measure(lambda: heat_run(du, dnew, 0.25, steps), repeats)
            times[count] = t["median_s"] / steps
    return {"nansafe": dualgpu.nansafe.NANSAFE_MODE_ENABLED, "per_step_s": times}


def _run_child(nansafe, args):
    env = dict(os.environ, DUALGPU_NANSAFE_MODE="1" if nansafe else "0")
    command = [sys.executable, __file__, "--child", "--n", str(args.n), "--steps",
               str(args.steps), "--repeats", str(args.repeats), "--lanes",
               *map(str, args.lanes)]
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    assert result["nansafe"] == nansafe
    return {int(k): v for k, v in result["per_step_s"].items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--lanes", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.n, args.steps, args.lanes, args.repeats)))
        return
    runs = {False: [], True: []}
    for _ in range(args.rounds):
        for mode in (False, True):
            runs[mode].append(_run_child(mode, args))
    print(f"NaN-safe mode cost: heat stencil, n = {args.n:,}, cpu backend, serial launches, "
          f"median of {args.rounds} rounds x {args.repeats} runs")
    print("lanes N | dual ms/step | NaN-safe ms/step | NaN-safe / dual")
    for lanes in args.lanes:
        plain = statistics.median(r[lanes] for r in runs[False])
        safe = statistics.median(r[lanes] for r in runs[True])
        print(f"{lanes:7d} | {1e3 * plain:12.3f} | {1e3 * safe:16.3f} | {safe / plain:.2f}x")


if __name__ == "__main__":
    main()
