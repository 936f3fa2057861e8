"""dualgpu's own helper threads against numba's threading layers, fresh processes (issue 41).

One launch of the dual N-body accelerations (``simulations.nbody.accelerations``, 384
bodies, 32 lanes, mass and position tangents: the pair loop of the N-body mass Jacobian)
on the cpu backend, run five ways in one process, interleaved:

* ``home``: as dualgpu runs it (its serial/parallel choice, its helper threads);
* ``home_2``: dualgpu's helper threads, both cores whatever the load;
* ``prange_static`` / ``prange_dynamic``: the same compiled pieces (the launcher dualgpu
  generates, its claim loop replaced by ``numba.prange``, compiled with ``parallel=True``),
  under numba's threading layer of the process, with numba's default static split and
  with ``numba.set_parallel_chunksize(1)`` (one piece at a time: OpenMP's dynamic schedule,
  TBB's work stealing of single pieces);
* ``hand_serial`` / ``hand_prange``: the hand-written tangent loop of
  ``/work/shared/reference/nbody_tangent_loop.py`` (scalar chain-rule coefficients once per
  pair, then a stride-1 lane loop), serial and ``prange``.

Each threading layer (``omp``, ``workqueue``, ``tbb`` where it imports) runs in
``--processes`` fresh processes; every process prints the system load (``/proc/loadavg``)
before and after. Medians per process, and the worst process per way. On a machine that
other processes load, a timing under a load above the core count is only indicative.

    python3 benchmarks/threading_layers.py
    python3 benchmarks/threading_layers.py --tbb-python /tmp/tbbvenv/bin/python

TBB comes from the ``tbb`` wheel (``pip install tbb`` in a virtual environment made with
``--system-site-packages``); its libraries sit in the environment's ``lib`` folder, added
to ``LD_LIBRARY_PATH`` for that child.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WAYS = ("home", "home_2", "prange_static", "prange_dynamic", "hand_serial", "hand_prange")

#: The claim loop of a "pieces" launcher, as :mod:`dualgpu.backends.cpu.launchers` writes it.
_CLAIM = ("    while True:\n        _dg_piece = _dg_claim(_dg_ctl, 1)\n"
          "        if _dg_piece >= _dg_pieces:\n            break\n")


def _loadavg():
    with open("/proc/loadavg") as fh:
        return fh.read().strip()


def _prange_launcher(kernel, spec, count):
    """A ``numba.prange`` loop over the pieces of ``spec``'s "pieces" launcher.

    Each iteration calls a launcher compiled exactly as dualgpu compiles the pieces
    launcher (same thread function, options and LLVM vectoriser settings), its claim loop
    replaced by a loop over one given piece; ``count`` is the launcher's argument count.
    Returns ``run(*arguments)``.
    """
    import numba
    from numba import njit

    from dualgpu.backends.common import translate
    from dualgpu.backends.cpu import launchers

    thread, nrt = kernel._thread(spec)
    guard = kernel._translation.guard if spec.base == "bounded" else None
    source = launchers.launcher_source(spec, kernel.params, guard.bound if guard else "",
                                       kernel._translation.inner_axis,
                                       guard.assume if guard else "")
    if _CLAIM not in source or "_dg_ctl):" not in source:
        raise RuntimeError("the pieces launcher's claim loop changed; update _CLAIM")
    source = source.replace(_CLAIM, "    for _dg_piece in range(_dg_p0, _dg_p1):\n")
    source = source.replace("_dg_ctl):", "_dg_ctl, _dg_p0, _dg_p1):", 1)
    namespace = {"_dg_thread": thread, "_dg_claim": launchers.claim,
                 "_dg_finish": launchers.finish, "_dg_assume": launchers._assume,
                 "_dg_restore": launchers._restore,
                 "_dg_dual_array": launchers.make_dual_array, "_dg_dual": launchers.make_dual}
    function = translate.compile_source(source, namespace, "_dg_launch", "one-piece launcher")
    one = njit(fastmath=kernel.fastmath, error_model="numpy", _nrt=nrt, nogil=True,
               no_cfunc_wrapper=True)(function)
    names = ", ".join(f"a{k}" for k in range(count))
    drive_source = (f"def drive({names}, pieces):\n"
                    f"    for p in prange(pieces):\n"
                    f"        one({names}, p, p + 1)\n")
    scope = {"one": one, "prange": numba.prange}
    exec(drive_source, scope)
    drive = njit(parallel=True)(scope["drive"])

    def run(*arguments):
        control = arguments[-1]
        one(*arguments, 0, 0)  # writes the number of pieces into control[3]
        drive(*arguments, control[3])
    return run


def child(n, lanes, repeats):
    """One fresh process: time every way; print one JSON line."""
    sys.path[:0] = [ROOT]
    load_before = _loadavg()
    import numba
    import numpy as np

    from dualgpu.backends.cpu import kernel as cpu_kernel
    from dualgpu.backends.cpu import parallel as cpu_parallel
    from dualgpu.backends.cpu.kernel import compile_kernel
    from dualgpu.core.dualarray import DualArray
    from benchmarks.njit_references import nbody_tangent_loop
    from simulations import nbody

    pos, _, mass = nbody.default_initial_state(n)
    rng = np.random.default_rng(1)
    dpos, dmass = rng.standard_normal((lanes, n, 3)), rng.standard_normal((lanes, n))
    out = DualArray(np.zeros((n, 3)), np.zeros((lanes, n, 3)))
    args = (DualArray(pos, dpos), DualArray(mass, dmass), 1.0, 0.05, out)
    kernel = compile_kernel(nbody.accelerations)
    blocks = (n + 127) // 128

    real_run, real_threads = cpu_parallel.run_parallel, cpu_parallel.available_threads
    state = {"way": "home", "arms": {"serial": 0, "parallel": 0}}
    pranges = {}

    def run_parallel(launcher, arguments, control, threads):
        way = state["way"]
        if way.startswith("prange"):
            spec = next(s for s, fn in kernel._launchers.items() if fn is launcher)
            fast = pranges.get(spec)
            if fast is None:
                fast = pranges[spec] = _prange_launcher(kernel, spec, len(arguments))
            numba.set_parallel_chunksize(1 if way == "prange_dynamic" else 0)
            fast(*arguments)
            numba.set_parallel_chunksize(0)
            return 0.0
        if way == "home":
            state["arms"]["parallel" if threads > 1 else "serial"] += 1
        return real_run(launcher, arguments, control, threads)

    def threads_for(way):
        def available():
            if state["way"] == "home":
                return real_threads()
            return 2
        return available

    cpu_kernel.cpu_parallel.run_parallel = run_parallel
    cpu_kernel.cpu_parallel.available_threads = threads_for(None)

    hand = (pos, mass, np.ascontiguousarray(dpos.transpose(1, 2, 0)),
            np.ascontiguousarray(dmass.T), 1.0, 0.05 ** 2, np.zeros((n, 3)),
            np.zeros((n, 3, lanes)))
    serial, parallel = nbody_tangent_loop(False), nbody_tangent_loop(True)

    def dual(way):
        def go():
            state["way"] = way
            cpu_parallel.FORCE = way != "home"  # the others run on 2 threads throughout
            try:
                kernel[blocks, 128](*args)
            finally:
                cpu_parallel.FORCE = False
        return go

    fns = {w: dual(w) for w in WAYS[:4]}
    fns["hand_serial"] = lambda: serial(*hand)
    fns["hand_prange"] = lambda: parallel(*hand)
    tangents = {}
    for way, fn in fns.items():
        fn()
        fn()
        tangents[way] = (out.partials.copy() if way in WAYS[:4]
                         else np.moveaxis(hand[7], 2, 0).copy())
    reference = tangents["hand_serial"]
    scale = float(np.max(np.abs(reference)))
    diff = {w: float(np.max(np.abs(t - reference)) / scale) for w, t in tangents.items()}
    state["arms"] = {"serial": 0, "parallel": 0}
    times = {w: [] for w in fns}
    for _ in range(repeats):
        for way, fn in fns.items():
            time.sleep(0.05)  # numba's pool threads spin a little after a parallel region
            start = time.perf_counter()
            fn()
            times[way].append(time.perf_counter() - start)
    print(json.dumps({
        "layer": numba.threading_layer(), "median_s": {w: statistics.median(t)
                                                       for w, t in times.items()},
        "home_arms": state["arms"], "max_rel_diff_vs_hand": diff,
        "load_before": load_before, "load_after": _loadavg()}))


def run(layers, processes, n, lanes, repeats, tbb_python):
    """Run ``processes`` fresh children per threading layer; return their results."""
    results = []
    for k in range(processes):
        for layer in layers:
            python, env = sys.executable, dict(os.environ, NUMBA_THREADING_LAYER=layer)
            env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
            if layer == "tbb":
                if not tbb_python:
                    continue
                python = tbb_python
                lib = os.path.join(os.path.dirname(os.path.dirname(tbb_python)), "lib")
                env["LD_LIBRARY_PATH"] = lib + os.pathsep + env.get("LD_LIBRARY_PATH", "")
            proc = subprocess.run(
                [python, os.path.abspath(__file__), "--child", str(n), str(lanes),
                 str(repeats)], env=env, cwd=ROOT, capture_output=True, text=True, timeout=900)
            if proc.returncode != 0:
                results.append({"layer": layer, "error": proc.stderr.strip()[-1500:]})
            else:
                results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            print(format_run(k + 1, results[-1]), flush=True)
    return results


def format_run(k, r):
    """One process's line."""
    if "error" in r:
        return f"process {k} {r['layer']}: FAILED {r['error']}"
    t = r["median_s"]
    ways = "  ".join(f"{w} {1e3 * t[w]:.2f}" for w in WAYS)
    return (f"process {k} {r['layer']:9s} ms: {ways}  | home arms {r['home_arms']} | "
            f"worst rel diff {max(r['max_rel_diff_vs_hand'].values()):.1e} | "
            f"load {r['load_before'].split()[0]} -> {r['load_after'].split()[0]}")


def summary(results):
    """Per layer and way: the median of the process medians, and the spread (worst/best)."""
    lines = []
    for layer in sorted({r["layer"] for r in results if "error" not in r}):
        runs = [r for r in results if r.get("layer") == layer and "error" not in r]
        lines.append(f"{layer} ({len(runs)} processes): way: median of medians ms "
                     "[best-worst], worst/best, worst / best hand")
        for way in WAYS:
            ms = [1e3 * r["median_s"][way] for r in runs]
            hand = [1e3 * min(r["median_s"]["hand_serial"], r["median_s"]["hand_prange"])
                    for r in runs]
            worst_ratio = max(m / h for m, h in zip(ms, hand))
            lines.append(f"  {way:15s} {statistics.median(ms):7.2f} [{min(ms):.2f}-{max(ms):.2f}]"
                         f"  {max(ms) / min(ms):.2f}  {worst_ratio:.2f}x")
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--child", nargs=3, type=int, help=argparse.SUPPRESS)
    parser.add_argument("--layers", default="omp,workqueue,tbb")
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--n", type=int, default=384)
    parser.add_argument("--lanes", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--tbb-python", help="a python whose environment has the tbb wheel")
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return
    print(f"load before: {_loadavg()}")
    results = run(args.layers.split(","), args.processes, args.n, args.lanes, args.repeats,
                  args.tbb_python)
    print("\n".join(summary(results)))
    print(f"load after: {_loadavg()}")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
