"""Time to a stable parameter ranking: dualgpu DGSM vs SALib's Sobol indices (issue 24).

The model is the one of ``scripts/global_sensitivity_pendulum.py``: six uncertain parameters
of a driven pendulum, the final angle after 6 s (600 RK4 steps; ``--time``), one pendulum per
parameter sample. A ranking is *stable* when the confidence intervals of the top ``--top``
parameters (and of the next one) do not overlap. Each method doubles its sample size until that
holds:

* dualgpu DGSM: the dualgpu kernel on the cpu backend, all samples' exact gradients in one
  dual run (6 lanes), bound on the total Sobol index with bootstrap intervals (1000
  resamples); sizes 32, 64, ...;
* SALib Sobol: Saltelli's design (``N (p + 2)`` runs), the same model written in plain numba
  (``@njit(parallel=True)``), SALib's analysis with its default bootstrap (100 resamples);
  sizes N = 128, 256, ....

Both are timed warm (compiled before the first round; the compile times are printed
apart), rounds alternate between the two methods, and the medians are compared: the time of
the whole doubling search (what a user pays who does not know the size in advance) and of
the final size alone. Target: at least 10x fewer seconds for DGSM (printed MET/MISSED).

    python3 benchmarks/dgsm_vs_sobol.py              # 5 rounds
    python3 benchmarks/dgsm_vs_sobol.py --rounds 2
    python3 benchmarks/dgsm_vs_sobol.py --time 3    # nearly tied leaders: a harder case
"""
import argparse
import os
import statistics
import sys
import time

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [_ROOT, os.path.join(_ROOT, "scripts")]

import numpy as np  # noqa: E402

import dualgpu  # noqa: E402
from scripts import global_sensitivity_pendulum as gsp  # noqa: E402

TARGET = 10.0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--top", type=int, default=3)
    parser.add_argument("--time", type=float, default=6.0,
                        help="simulated time [s]; at 3 s the two leaders are nearly tied")
    parser.add_argument("--sobol-max", type=int, default=16384)
    opts = parser.parse_args(argv)
    args = gsp.build_parser().parse_args(["--top", str(opts.top), "--no-progress", "--time",
                                          str(opts.time), "--sobol-max", str(opts.sobol_max)])
    dualgpu.set_backend("cpu")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"({os.cpu_count()} cores)")
    t0 = time.perf_counter()
    dualgpu.sensitivity.dgsm(gsp.final_angle_dual(args), gsp.PROBLEM, 32, seed=0,
                             batched=True, resamples=50)
    compile_dual = time.perf_counter() - t0
    t0 = time.perf_counter()
    gsp.final_angle_numba(args)(np.tile([0.4, 0.4, 0.7, 1.0, 0.6, 0.0], (4, 1)))
    compile_numba = time.perf_counter() - t0
    print(f"compile (not in the timings): dualgpu dual kernel {compile_dual:.1f} s, "
          f"numba {compile_numba:.1f} s")
    dgsm_total, dgsm_last, sobol_total, sobol_last = [], [], [], []
    for _ in range(opts.rounds):
        n, r, last, total = gsp.dgsm_until_stable(args, limit=16384)
        dgsm_total.append(total)
        dgsm_last.append(last)
        N, Si, last, total = gsp.sobol_until_stable(args)
        sobol_total.append(total)
        sobol_last.append(last)
    p = len(gsp.PARAMETERS)
    if n is None or N is None:
        print(f"no stable ranking within the limits (DGSM n = {n}, Sobol N = {N}): MISSED")
        return None
    print(f"stable ranking (top {opts.top} separated): DGSM at n = {n} samples ({n} model "
          f"runs, 1 dual run of {p} lanes); SALib Sobol at N = {N} ({N * (p + 2)} model runs)")
    print(f"  DGSM bound ranking: {gsp._ranking(gsp.PARAMETERS, r.total_upper)}")
    print(f"  Sobol ST ranking:   {gsp._ranking(gsp.PARAMETERS, Si['ST'])}")
    rows = [("whole doubling search", dgsm_total, sobol_total),
            ("final size alone", dgsm_last, sobol_last)]
    print(f"{'median of ' + str(opts.rounds) + ' rounds':<24}{'DGSM [s]':>10}{'Sobol [s]':>11}"
          f"{'ratio':>8}")
    for name, d, s in rows:
        ratio = statistics.median(s) / statistics.median(d)
        print(f"{name:<24}{statistics.median(d):>10.3f}{statistics.median(s):>11.3f}"
              f"{ratio:>7.1f}x")
    # where the time goes: the model runs alone at the final sizes
    from SALib.sample import sobol as saltelli

    X_dgsm = dualgpu.sensitivity.sample(gsp.PROBLEM, n, seed=0)
    salib_problem = dualgpu.sensitivity.check_problem(gsp.PROBLEM).as_dict()
    X_sobol = saltelli.sample(salib_problem, N, calc_second_order=False, seed=0)
    dual, plain = [], []
    for _ in range(opts.rounds):
        t0 = time.perf_counter()
        dualgpu.sensitivity.model_gradients(gsp.final_angle_dual(args), X_dgsm, batched=True)
        dual.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        gsp.final_angle_numba(args)(X_sobol)
        plain.append(time.perf_counter() - t0)
    print(f"{'model runs alone':<24}{statistics.median(dual):>10.3f}"
          f"{statistics.median(plain):>11.3f}"
          f"{statistics.median(plain) / statistics.median(dual):>7.1f}x   (DGSM: {n} samples "
          f"with {p} lanes; Sobol: {N * (p + 2)} plain numba runs; the rest is sampling and "
          "analysis)")
    ratio = statistics.median(sobol_total) / statistics.median(dgsm_total)
    verdict = "MET" if ratio >= TARGET else "MISSED"
    print(f"target >= {TARGET:g}x fewer seconds to a stable ranking: {ratio:.1f}x {verdict}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return ratio


if __name__ == "__main__":
    main()
