"""The machine's limits, measured once per benchmark run: dgemm FLOP/s and copy bandwidth.

A benchmark case that knows its work (floating-point operations, or bytes it must move)
reports what it achieved against these: a compute-bound case (the dual N-body pair loop)
as GFLOP/s and a fraction of numpy's dgemm on the same threads, a memory-bound one (a
stencil JVP) as GB/s and a fraction of a large array copy. :mod:`benchmarks.run`
measures them in the parent process, prints them at the top of the report and passes
them to every case (environment variable :data:`ENV`).

Examples
--------
>>> limits = measure(size=64, copy_mb=1, repeats=1)
>>> sorted(limits)
['copy_gb_s', 'dgemm_gflop_s', 'dgemm_n', 'threads']
>>> fraction(5.0, 10.0)
0.5
"""
import json
import os
import statistics
import time

import numpy as np

__all__ = ["ENV", "measure", "limits", "fraction", "describe"]

#: Environment variable holding the parent's measurement (JSON) for the case processes.
ENV = "DUALGPU_BENCH_ROOFLINE"


def _median_time(fn, repeats):
    fn()  # warm-up (threads started, pages touched)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def measure(size=2000, copy_mb=256, repeats=5):
    """Measure dgemm GFLOP/s (``size`` x ``size`` float64, numpy's BLAS, all its threads)
    and copy bandwidth in GB/s (bytes read plus bytes written by ``np.copyto`` of
    ``copy_mb`` MB, far beyond the caches)."""
    rng = np.random.default_rng(0)
    a, b = rng.random((size, size)), rng.random((size, size))
    c = np.empty((size, size))
    seconds = _median_time(lambda: np.matmul(a, b, out=c), repeats)
    gflops = 2.0 * size ** 3 / seconds / 1e9
    n = copy_mb * 2 ** 20 // 8
    src, dst = np.ones(n), np.empty(n)
    seconds = _median_time(lambda: np.copyto(dst, src), repeats)
    copy = 2 * src.nbytes / seconds / 1e9
    return {"dgemm_gflop_s": gflops, "dgemm_n": size, "copy_gb_s": copy,
            "threads": _blas_threads()}


def _blas_threads():
    try:
        from threadpoolctl import threadpool_info

        return max((p.get("num_threads", 1) for p in threadpool_info()), default=1)
    except Exception:  # threadpoolctl missing: numpy's BLAS uses every CPU by default
        return os.cpu_count() or 1


def limits(profile="full"):
    """The run's limits: the parent's measurement if there is one, else measured here."""
    text = os.environ.get(ENV)
    if text:
        try:
            given = json.loads(text)
        except ValueError:
            given = None
        if not isinstance(given, dict) or not {"dgemm_gflop_s", "copy_gb_s"} <= set(given):
            raise ValueError(
                f"{ENV}={text!r}: expected the JSON object benchmarks.run passes to its case "
                "processes, with dgemm_gflop_s and copy_gb_s (as roofline.measure() returns). "
                f"Fix: unset {ENV} to measure here."
            )
        return given
    if profile == "tiny":
        return measure(size=256, copy_mb=16, repeats=1)
    return measure()


def fraction(achieved, limit):
    """``achieved / limit`` (None when either is unknown)."""
    if achieved is None or not limit:
        return None
    return achieved / limit


def describe(limits):
    """One line of the report's header."""
    return (f"Roofline of this machine: dgemm {limits['dgemm_gflop_s']:.1f} GFLOP/s "
            f"(n = {limits['dgemm_n']}, {limits['threads']} BLAS threads), copy "
            f"{limits['copy_gb_s']:.1f} GB/s (read + write)")
