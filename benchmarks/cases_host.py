"""Host objectives on a DualArray vs the same numpy operations on plain arrays.

A simulation's result is post-processed on the host (an energy, a misfit, a maximum,
a centroid). On a DualArray of n cells and N lanes, numpy's protocols run each operation
on the values (n) and on the lane-major partials (N x n): about the work of the same
operation on a plain array of (1 + N) n elements. The case times both and reports the
ratio; the target is 2x (issue 12).
"""
import statistics
import time

import numpy as np

from benchmarks.harness import PROFILES
from dualgpu import DualArray

__all__ = ["HOST_SIZES", "HOST_LANES", "OBJECTIVES", "TARGET", "CASES", "case_host_objective"]

#: cells per profile
HOST_SIZES = {"full": 1_000_000, "quick": 1_000_000, "tiny": 1000}
HOST_LANES = 8
#: dual time / plain time at (1 + N) times the cells
TARGET = 2.0


def _energy(u, w, data, x):
    return np.sum(w * u ** 2)


def _misfit(u, w, data, x):
    return np.linalg.norm(u - data)


def _maximum(u, w, data, x):
    return u.max()


def _centroid(u, w, data, x):
    return np.sum(x * u) / np.sum(u)


def _objective(u, w, data, x):
    return np.sum(w * u ** 2) + np.linalg.norm(u - data) + u.max()


#: name -> host post-processing; "objective" is the one judged against the target
OBJECTIVES = {"energy": _energy, "misfit": _misfit, "maximum": _maximum,
              "centroid": _centroid, "objective": _objective}


def _inputs(n, rng):
    return (rng.uniform(0.5, 1.5, n), rng.uniform(0.0, 1.0, n), rng.uniform(0.5, 1.5, n),
            np.linspace(0.0, 1.0, n))


def _interleaved(dual, plain, repeats):
    """Median wall and CPU seconds of ``dual()`` and ``plain()``, run alternately."""
    dual(), plain()  # warm-up
    wall = {"dual": [], "plain": []}
    cpu = {"dual": [], "plain": []}
    for _ in range(repeats):
        for key, fn in (("dual", dual), ("plain", plain)):
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            wall[key].append(time.perf_counter() - t0)
            cpu[key].append(time.process_time() - c0)
    med = statistics.median
    return ({k: med(v) for k, v in wall.items()}, {k: med(v) for k, v in cpu.items()})


def case_host_objective(profile):
    """Host objectives on a DualArray (n cells, 8 lanes) vs plain arrays of 9 n elements."""
    repeats = 2 * PROFILES[profile]["repeats"] + 1
    n, lanes = HOST_SIZES[profile], HOST_LANES
    rng = np.random.default_rng(12)
    values, w, data, x = _inputs(n, rng)
    u = DualArray(values, rng.standard_normal((lanes, n)))
    plain = _inputs((1 + lanes) * n, rng)
    rows = []
    for name, objective in OBJECTIVES.items():
        wall, cpu = _interleaved(lambda: objective(u, w, data, x), lambda: objective(*plain),
                                 repeats)
        result, expected = objective(u, w, data, x), objective(values, w, data, x)
        rows.append({"name": name, "dual_s": wall["dual"], "plain_s": wall["plain"],
                     "ratio": wall["dual"] / wall["plain"],
                     "cpu_ratio": cpu["dual"] / cpu["plain"], "runs": repeats,
                     "values_match": bool(np.asarray(result.value) == np.asarray(expected))})
    ratio = rows[-1]["ratio"]
    return {"n": n, "lanes": lanes, "plain_elements": (1 + lanes) * n, "rows": rows,
            "targets": {"host_objective": {"value": ratio, "target": TARGET,
                                           "met": ratio <= TARGET}},
            "note": "objective = np.sum(w * u**2) + np.linalg.norm(u - data) + u.max(); "
                    "medians of runs alternating dual and plain; cpu = process time"}


#: case name -> function(profile) -> dict
CASES = {"host_objective": case_host_objective}
