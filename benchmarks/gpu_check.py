"""One-command check of dualgpu on an NVIDIA GPU (under 5 minutes).

Usage::

    python benchmarks/gpu_check.py            # needs numba.cuda.is_available()
    python benchmarks/gpu_check.py --self-test   # no GPU: runs the same logic on the cpu backend

For every simulation in ``simulations/`` it runs, on the ``cuda`` backend, the
plain simulation and a batch of 8 tangent directions through the driver
(``dualgpu.jvp_batch``), compares both with the ``cpu`` backend and
reports the dual/plain time ratio. It then runs 24 directions in tiles of 8
lanes and compares those tangents with the cpu backend too: on the GPU all three
tiles run in one launch over a third grid dimension where no array is both read
and written (``dualgpu.backends.gpu.tile_grid``), else as three launches with
those arrays restored between them (``dualgpu.backends.common.tiles``); the two
paths are also compared with each other, and the launches per path are counted. Then
the time per direction of 64 directions at tiles of 4, 8, 16 and 32 lanes, both paths
(what the GPU's default tile should be chosen from). It then times the 1-D heat stencil
(``benchmarks.harness.heat_step``) at N = 0 (plain), 1, 8, 16 lanes and
reports the achieved memory bandwidth: bytes moved per step are
``(1 + N) * n * itemsize * 2`` (read u, write u_new; neighbours hit in cache).
Last, the block-level kernels (shared tiles, dynamic shared memory, warp shuffles,
grid sync; ``benchmarks/gpu_block_checks.py``) run plain and dual against the cpu
backend (``--blocks`` runs only those).
Then a launch graph (``dualgpu.cuda.capture_graph``): the heat loop of 8 lanes recorded once
as a CUDA graph and replayed, against the same launches made one by one (bit for bit), and
the time per step of each.
Then second order: the Hessian of the mass-spring chain's energy with respect to
(k, c) by nested duals (``dualgpu.hessian``), compared with the cpu backend.

Without a GPU it prints why and exits with status 0 (``--strict``: status 1).
"""
import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

from dualgpu import cuda as dg_cuda  # noqa: E402

__all__ = ["main", "SIMULATIONS", "check_simulation", "check_second_order", "heat_bandwidth",
           "stencil_bytes", "device_limits", "pair_loop_rate", "check_graph"]

LANES = 8

#: name -> (module, build(size) -> (args tuple, index of the differentiated arg), kwargs)
SIMULATIONS = {
    "heat1d": ("simulations.heat1d", lambda m, s: ((m.default_initial_state(s * 64),), 0),
               {"n_steps": 100}),
    "heat2d": ("simulations.heat2d", lambda m, s: ((m.default_initial_state(s * 8 + 1),), 0),
               {"n_steps": 50}),
    "gray_scott": ("simulations.gray_scott", lambda m, s: (m.default_initial_state(s * 8), 0),
                   {"n_steps": 50}),
    "wave2d": ("simulations.wave2d", lambda m, s: (m.default_initial_state(s * 8 + 1), 0),
               {"n_steps": 50}),
    "mass_spring": ("simulations.mass_spring", lambda m, s: (m.default_initial_state(s * 2), 0),
                    {"n_steps": 50}),
    "nbody": ("simulations.nbody", lambda m, s: (m.default_initial_state(s * 16), 2),
              {"n_steps": 10}),
    "pendulums": ("simulations.pendulums", lambda m, s: (m.default_initial_state(s * 1024), 0),
                  {"n_steps": 100}),
}


def _flat(result):
    parts = result if isinstance(result, tuple) else (result,)
    return np.concatenate([np.asarray(p, dtype=np.float64).ravel() for p in parts])


def _rel(a, b):
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-300))


def _timed(fn):
    from dualgpu import cuda

    fn()  # compile + warm-up
    cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    cuda.synchronize()
    return out, time.perf_counter() - t0


def check_tiles(name, backend, size, directions=3 * LANES, tile=LANES):
    """Tangents of ``directions`` directions in tiles of ``tile`` lanes on ``backend`` vs cpu."""
    import importlib

    import dualgpu

    module_name, build, kwargs = SIMULATIONS[name]
    module = importlib.import_module(module_name)
    args, argnum = build(module, size)
    rng = np.random.default_rng(1)
    tangents = [None] * len(args)
    tangents[argnum] = rng.standard_normal((directions,) + np.shape(args[argnum]))

    from dualgpu.backends.gpu import tile_grid as gpu_tile_grid

    def run():
        return dualgpu.jvp_batch(lambda *a: module.simulate(*a, **kwargs), args, tangents,
                                chunk_size=tile, progress=False)[1]

    results = {}
    for which in ("cpu", backend):
        with dualgpu.using_backend(which):
            results[which] = _flat(run())
    before = dict(gpu_tile_grid.LAUNCHES)
    with dualgpu.using_backend(backend):
        run()
        launches = {k: gpu_tile_grid.LAUNCHES[k] - before[k] for k in before}
        gpu_tile_grid.ENABLED = False  # every tile its own launch
        try:
            per_tile = _flat(run())
        finally:
            gpu_tile_grid.ENABLED = True
    return {"simulation": name, "directions": directions, "tile": tile,
            "tangent_rel_diff": _rel(results[backend], results["cpu"]),
            "paths_rel_diff": _rel(results[backend], per_tile), "launches": launches}


def time_tiles(name, backend, size, directions=64, tiles=(4, 8, 16, 32)):
    """Seconds per direction of ``directions`` tangents at each lane tile, with the tiles in
    one launch and one launch per tile: the measurement ``dualgpu.core.lanes.TILE_LANES["cuda"]``
    and ``TILE_CANDIDATES["cuda"]`` should rest on (registers alone do not say it)."""
    import importlib
    import warnings

    import dualgpu
    from dualgpu.backends.gpu import tile_grid as gpu_tile_grid

    module_name, build, kwargs = SIMULATIONS[name]
    module = importlib.import_module(module_name)
    args, argnum = build(module, size)
    tangents = [None] * len(args)
    tangents[argnum] = np.random.default_rng(2).standard_normal(
        (directions,) + np.shape(args[argnum]))
    rows = []
    with dualgpu.using_backend(backend), warnings.catch_warnings():
        warnings.simplefilter("ignore", dualgpu.errors.ChunkSizeWarning)
        for tile in tiles:
            row = {"tile": tile}
            for path, enabled in (("one_launch", True), ("per_tile", False)):
                gpu_tile_grid.ENABLED = enabled
                try:
                    _, seconds = _timed(lambda: dualgpu.jvp_batch(
                        lambda *a: module.simulate(*a, **kwargs), args, tangents,
                        chunk_size=tile, progress=False))
                finally:
                    gpu_tile_grid.ENABLED = True
                row[path] = seconds / directions
            rows.append(row)
    return rows


def check_simulation(name, backend, size, lanes=LANES):
    """Run simulation ``name`` plain and dual on ``backend`` and on ``cpu``; return a dict."""
    import importlib

    import dualgpu

    module_name, build, kwargs = SIMULATIONS[name]
    module = importlib.import_module(module_name)
    args, argnum = build(module, size)
    rng = np.random.default_rng(0)
    tangents = [None] * len(args)
    tangents[argnum] = rng.standard_normal((lanes,) + np.shape(args[argnum]))

    def f(*a):
        return module.simulate(*a, **kwargs)

    def plain():
        return f(*args)

    def dual():
        return dualgpu.jvp_batch(f, args, tangents, chunk_size=lanes, progress=False)

    results = {}
    for which in ("cpu", backend):
        with dualgpu.using_backend(which):
            p_out, p_time = _timed(plain)
            (v_out, t_out), d_time = _timed(dual)
        results[which] = (_flat(p_out), _flat(v_out), _flat(t_out), p_time, d_time)
    ref, got = results["cpu"], results[backend]
    return {"simulation": name, "backend": backend, "lanes": lanes,
            "plain_rel_diff": _rel(got[0], ref[0]), "dual_values_rel_diff": _rel(got[1], ref[1]),
            "tangent_rel_diff": _rel(got[2], ref[2]), "plain_s": got[3], "dual_s": got[4],
            "dual_over_plain": got[4] / got[3]}


def check_second_order(backend, nodes=16, steps=200):
    """The Hessian of the mass-spring energy in (k, c) on ``backend`` and on ``cpu``: a dict."""
    import dualgpu
    from simulations import mass_spring

    positions, velocities, pinned = mass_spring.default_initial_state(nodes)

    def energy(params):
        pos, vel = mass_spring.simulate(positions * 1.3, velocities, pinned, n_steps=steps,
                                        k=params[0], c=params[1])
        return mass_spring.energy(pos, vel, k=params[0])

    p = np.array([1000.0, 0.1])
    results = {}
    for which in ("cpu", backend):
        with dualgpu.using_backend(which):
            dualgpu.hessian(energy, p)  # compile
            t0 = time.perf_counter()
            results[which] = (dualgpu.hessian(energy, p), time.perf_counter() - t0)
    (ref, _), (got, seconds) = results["cpu"], results[backend]
    return {"backend": backend, "rel_diff": _rel(got, ref), "seconds": seconds,
            "symmetry": abs(got[0, 1] - got[1, 0]) / np.abs(got).max()}


def stencil_bytes(n, lanes, itemsize=8):
    """Bytes one heat step moves at minimum: read and write (1 + lanes) arrays of n."""
    return (1 + lanes) * n * itemsize * 2


def heat_bandwidth(backend, n, steps, lanes_list=(0, 1, 8, 16)):
    """Time the heat stencil at each lane count on ``backend``; return rows with GB/s."""
    import dualgpu
    from dualgpu import DualArray, cuda

    from benchmarks.harness import heat_run

    rows = []
    u0 = np.sin(np.linspace(0.0, np.pi, n))
    with dualgpu.using_backend(backend):
        for lanes in lanes_list:
            if lanes == 0:
                u, u_new = cuda.to_device(u0), cuda.to_device(np.zeros(n))
            else:
                u = cuda.to_device(DualArray(u0.copy(), np.ones((lanes, n))))
                u_new = cuda.to_device(DualArray(np.zeros(n), np.zeros((lanes, n))))
            heat_run(u, u_new, 0.25, 2)  # compile
            cuda.synchronize()
            t0 = time.perf_counter()
            heat_run(u, u_new, 0.25, steps)
            cuda.synchronize()
            seconds = (time.perf_counter() - t0) / steps
            rows.append({"lanes": lanes, "n": n, "s_per_step": seconds,
                         "GB_per_s": stencil_bytes(n, lanes) / seconds / 1e9})
    plain = rows[0]["s_per_step"]
    for row in rows:
        row["over_plain"] = row["s_per_step"] / plain
    return rows


def check_graph(backend, n, steps, lanes=LANES, replays=5):
    """The heat loop (``steps`` launches, ``lanes`` lanes) as a launch graph on ``backend``:
    replayed ``replays`` times against the launches made as many times, bit for bit; seconds
    per step of each (the graph's first replays, which compile or instantiate, untimed)."""
    import dualgpu
    from dualgpu import DualArray, cuda

    from benchmarks.harness import heat_run

    u0 = np.sin(np.linspace(0.0, np.pi, n))
    seeds = np.cos(np.arange(lanes)[:, None] * np.linspace(0.0, 1.0, n))

    def buffers():
        return (cuda.to_device(DualArray(u0.copy(), seeds.copy())),
                cuda.to_device(DualArray(np.zeros(n), np.zeros((lanes, n)))))

    with dualgpu.using_backend(backend):
        u, u_new = buffers()
        heat_run(u, u_new, 0.25, 2)  # compile
        u, u_new = buffers()
        cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(replays):
            heat_run(u, u_new, 0.25, steps)
        cuda.synchronize()
        launches = (time.perf_counter() - t0) / (replays * steps)
        want = u.copy_to_host() if steps % 2 == 0 else u_new.copy_to_host()

        g_u, g_new = buffers()
        with cuda.capture_graph() as graph:
            heat_run(g_u, g_new, 0.25, steps)
        for _ in range(2):  # instantiate / teach and check the table (cpu), then reset
            graph.launch()
        cuda.synchronize()
        fresh = buffers()
        for target, source in zip((g_u, g_new), fresh):
            cuda.to_device(source.copy_to_host(), to=target)
        cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(replays):
            graph.launch()
        cuda.synchronize()
        replayed = (time.perf_counter() - t0) / (replays * steps)
        got = g_u.copy_to_host() if steps % 2 == 0 else g_new.copy_to_host()
    same = bool(np.array_equal(got.values, want.values)
                and np.array_equal(got.partials, want.partials))
    return {"same_bits": same, "launches_s_per_step": launches, "graph_s_per_step": replayed,
            "launches": len(graph)}


#: Independent FMA chains per thread and iterations of the FP64 peak kernel.
PEAK_CHAINS, PEAK_ITERATIONS = 8, 512


@dg_cuda.jit
def fma_chains(out, a, b):
    """PEAK_CHAINS independent FMA chains of PEAK_ITERATIONS steps per thread."""
    i = dg_cuda.grid(1)
    x0 = i * 1e-9
    x1 = x0 + 1e-3
    x2 = x0 + 2e-3
    x3 = x0 + 3e-3
    x4 = x0 + 4e-3
    x5 = x0 + 5e-3
    x6 = x0 + 6e-3
    x7 = x0 + 7e-3
    for _ in range(PEAK_ITERATIONS):
        x0 = dg_cuda.fma(x0, a, b)
        x1 = dg_cuda.fma(x1, a, b)
        x2 = dg_cuda.fma(x2, a, b)
        x3 = dg_cuda.fma(x3, a, b)
        x4 = dg_cuda.fma(x4, a, b)
        x5 = dg_cuda.fma(x5, a, b)
        x6 = dg_cuda.fma(x6, a, b)
        x7 = dg_cuda.fma(x7, a, b)
    if i < out.shape[0]:
        out[i] = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7


def device_limits(backend, blocks, copy_bytes):
    """FP64 FMA GFLOP/s (``blocks`` x 256 threads of independent FMA chains) and the copy
    bandwidth in GB/s (device to device, ``copy_bytes``; read + write) on ``backend``."""
    import dualgpu
    from dualgpu import cuda

    with dualgpu.using_backend(backend):
        kernel = fma_chains
        out = cuda.device_array(blocks * 256)
        kernel[blocks, 256](out, 0.999999, 1e-7)  # compile
        cuda.synchronize()
        t0 = time.perf_counter()
        kernel[blocks, 256](out, 0.999999, 1e-7)
        cuda.synchronize()
        seconds = time.perf_counter() - t0
        flops = 2.0 * PEAK_CHAINS * PEAK_ITERATIONS * blocks * 256
        n = copy_bytes // 8
        src, dst = cuda.to_device(np.ones(n)), cuda.device_array(n)
        dst.copy_to_device(src)
        cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(5):
            dst.copy_to_device(src)
        cuda.synchronize()
        copy_seconds = (time.perf_counter() - t0) / 5
    return {"fp64_gflop_s": flops / seconds / 1e9, "copy_gb_s": 2 * n * 8 / copy_seconds / 1e9}


def pair_loop_rate(backend, n, lanes=LANES):
    """The dual N-body accelerations kernel at ``lanes`` lanes: GFLOP/s at
    :data:`~benchmarks.njit_references.PAIR_LANE_FLOPS` per pair and lane."""
    import dualgpu
    from benchmarks.njit_references import PAIR_LANE_FLOPS
    from dualgpu import DualArray, cuda
    from simulations import nbody

    pos, _, mass = nbody.default_initial_state(n)
    with dualgpu.using_backend(backend):
        args = (cuda.to_device(DualArray(pos, np.ones((lanes, n, 3)))),
                cuda.to_device(DualArray(mass, np.ones((lanes, n)))), 1.0, 0.05,
                cuda.to_device(DualArray(np.zeros((n, 3)), np.zeros((lanes, n, 3)))))
        blocks = (n + 127) // 128
        nbody.accelerations[blocks, 128](*args)
        cuda.synchronize()
        t0 = time.perf_counter()
        nbody.accelerations[blocks, 128](*args)
        cuda.synchronize()
        seconds = time.perf_counter() - t0
    return PAIR_LANE_FLOPS * n * (n - 1) * lanes / seconds / 1e9


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--self-test", action="store_true",
                        help="no GPU needed: run the checks with the cpu backend standing in "
                             "for cuda, at tiny sizes")
    parser.add_argument("--strict", action="store_true", help="exit 1 when no GPU is found")
    parser.add_argument("--only", action="append", choices=sorted(SIMULATIONS) + ["second_order"],
                        help="check only this simulation, or second_order (repeatable; skips the "
                             "block checks)")
    parser.add_argument("--blocks", action="store_true",
                        help="run only the block-level kernel checks "
                             "(benchmarks/gpu_block_checks.py)")
    args = parser.parse_args(argv)

    if args.self_test:
        backend, size, heat_n, heat_steps = "cpu", 1, 4096, 3
    else:
        from numba import cuda as numba_cuda

        if not numba_cuda.is_available():
            print("gpu_check: no usable NVIDIA GPU (numba.cuda.is_available() is False), so "
                  "nothing was checked. Run it on a machine with a GPU and a CUDA driver, or "
                  "use --self-test to exercise the script on the cpu backend.", file=sys.stderr)
            return 1 if args.strict else 0
        backend, size, heat_n, heat_steps = "cuda", 16, 1 << 24, 50
        print(f"device: {numba_cuda.get_current_device().name}")

    if args.blocks:
        from benchmarks.gpu_block_checks import run_block_checks

        failures = run_block_checks("cudasim" if args.self_test else backend)
        print(f"\n{'OK' if not failures else f'{failures} FAILURE(S)'}")
        return 1 if failures else 0

    failures = 0
    print(f"{'simulation':12s} {'plain diff':>10s} {'value diff':>10s} {'tangent diff':>12s} "
          f"{'plain s':>9s} {'dual s':>9s} {'dual/plain':>10s}  (N = {LANES}, vs cpu backend)")
    for name in [n for n in args.only or SIMULATIONS if n in SIMULATIONS]:
        try:
            r = check_simulation(name, backend, size)
        except Exception as exc:
            failures += 1
            print(f"{name:12s} FAILED: {type(exc).__name__}: {exc}")
            continue
        bad = max(r["plain_rel_diff"], r["dual_values_rel_diff"], r["tangent_rel_diff"]) > 1e-6
        failures += bad
        print(f"{name:12s} {r['plain_rel_diff']:10.1e} {r['dual_values_rel_diff']:10.1e} "
              f"{r['tangent_rel_diff']:12.1e} {r['plain_s']:9.4f} {r['dual_s']:9.4f} "
              f"{r['dual_over_plain']:10.2f}{'  MISMATCH' if bad else ''}")

    print(f"\n{3 * LANES} directions in tiles of {LANES} lanes: tangents vs the cpu backend, "
          "all tiles in one launch vs one launch per tile, and tiled launches per path")
    for name in args.only or SIMULATIONS:
        try:
            r = check_tiles(name, backend, size)
        except Exception as exc:
            failures += 1
            print(f"{name:12s} FAILED: {type(exc).__name__}: {exc}")
            continue
        bad = r["tangent_rel_diff"] > 1e-6 or r["paths_rel_diff"] > 1e-12
        failures += bad
        print(f"{name:12s} tangent diff {r['tangent_rel_diff']:10.1e}   one launch vs per tile "
              f"{r['paths_rel_diff']:8.1e}   launches: {r['launches']['one']} one, "
              f"{r['launches']['per_tile']} per tile{'  MISMATCH' if bad else ''}")

    print("\nlanes per tile: ms per direction (64 directions), all tiles in one launch / one "
          "launch per tile")
    for name in args.only or SIMULATIONS:
        try:
            rows = time_tiles(name, backend, size)
        except Exception as exc:
            failures += 1
            print(f"{name:12s} FAILED: {type(exc).__name__}: {exc}")
            continue
        print(f"{name:12s} " + "  ".join(
            f"{r['tile']:2d}: {1e3 * r['one_launch']:.3f}/{1e3 * r['per_tile']:.3f}" for r in rows))

    limits = None
    try:
        peak_blocks, copy_bytes = (4, 1 << 20) if args.self_test else (4096, 1 << 30)
        limits = device_limits(backend, peak_blocks, copy_bytes)
        print(f"\nroofline of the device: FP64 FMA {limits['fp64_gflop_s']:.1f} GFLOP/s, copy "
              f"{limits['copy_gb_s']:.1f} GB/s (read + write)")
        nb = 256 if args.self_test else 16384
        rate = pair_loop_rate(backend, nb)
        print(f"dual N-body pair loop, {nb} bodies, {LANES} lanes: {rate:.1f} GFLOP/s = "
              f"{100 * rate / limits['fp64_gflop_s']:.0f}% of FP64 peak")
    except Exception as exc:
        failures += 1
        print(f"roofline FAILED: {type(exc).__name__}: {exc}")
    print(f"\nheat stencil bandwidth, n = {heat_n:,}, float64, {heat_steps} steps, "
          f"{backend} backend")
    print(f"{'lanes':>5s} {'ms/step':>9s} {'GB/s':>8s} {'of copy':>8s} {'x plain':>8s} "
          f"{'limit 1+N':>9s}")
    try:
        for row in heat_bandwidth(backend, heat_n, heat_steps):
            share = f"{100 * row['GB_per_s'] / limits['copy_gb_s']:7.0f}%" if limits else "       -"
            print(f"{row['lanes']:5d} {1e3 * row['s_per_step']:9.3f} {row['GB_per_s']:8.1f} "
                  f"{share} {row['over_plain']:8.2f} {1 + row['lanes']:9d}")
    except Exception as exc:
        failures += 1
        print(f"FAILED: {type(exc).__name__}: {exc}")
    graph_n, graph_steps = (64, 20) if args.self_test else (1 << 16, 200)
    try:
        r = check_graph(backend, graph_n, graph_steps)
        failures += not r["same_bits"]
        print(f"\nlaunch graph: heat n = {graph_n:,}, {LANES} lanes, {r['launches']} launches "
              f"recorded: {1e6 * r['graph_s_per_step']:.2f} us per step replayed, "
              f"{1e6 * r['launches_s_per_step']:.2f} us launched one by one; bit for bit "
              f"{r['same_bits']}{'' if r['same_bits'] else '  MISMATCH'}")
    except Exception as exc:
        failures += 1
        print(f"\nlaunch graph FAILED: {type(exc).__name__}: {exc}")
    if not args.only or "second_order" in args.only:
        try:
            r = check_second_order(backend)
            bad = r["rel_diff"] > 1e-9 or r["symmetry"] > 1e-9
            failures += bad
            print(f"\nsecond order (mass-spring energy Hessian in (k, c), nested duals): "
                  f"diff vs cpu {r['rel_diff']:.1e}, asymmetry {r['symmetry']:.1e}, "
                  f"{r['seconds']:.3f} s{'  MISMATCH' if bad else ''}")
        except Exception as exc:
            failures += 1
            print(f"\nsecond order FAILED: {type(exc).__name__}: {exc}")
    if not args.only:  # shared tiles, warps, grid sync (the cudasim backend stands in when testing)
        from benchmarks.gpu_block_checks import run_block_checks

        failures += run_block_checks("cudasim" if args.self_test else backend)
    print(f"\n{'OK' if not failures else f'{failures} FAILURE(S)'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
