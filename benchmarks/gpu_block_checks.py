"""Real-launch checks of block-level kernels (shared tiles, barriers, warps, grid sync), for
gpu_check.

Each case runs a host function of ``tests/fixtures/block_kernels.py`` or
``tests/fixtures/block_kernels_extra.py`` plain and with ``LANES`` tangent directions
(``dualgpu.jvp_batch``) on the backend under test, and the same on a reference
backend (``cpu``; ``cudasim`` where the cpu backend cannot run the kernel), and reports
the largest relative differences. On a GPU this is the first real launch of dual shared
tiles, dynamic shared memory carved into (1 + N) regions (one case needs more than 48 KB
and so the per-kernel opt-in), dual warp shuffles and a cooperative grid-sync launch.

Not yet run on a GPU by this project.
"""
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for path in (ROOT, os.path.join(ROOT, "tests", "fixtures")):
    if path not in sys.path:
        sys.path.insert(0, path)

__all__ = ["BLOCK_CASES", "check_block_case", "run_block_checks"]

LANES = 8


def _cases():
    import block_kernels as B
    import block_kernels_extra as X

    pos, vel, mass = B.nbody_initial_state(40)
    u2 = B.heat2d_initial_state(20, 27)
    u1 = np.sin(np.linspace(0.0, 3.0, 61)) + 0.2
    big_vel = np.cos(np.arange(3000.0)).reshape(1000, 3)
    return {
        # name: (function, args, index of the differentiated argument)
        "nbody tiled": (lambda p, m: B.simulate_nbody(p, vel, m, n_steps=3), (pos, mass), 0),
        "energy reduction": (B.kinetic_energy, (vel, mass), 0),
        "energy dynamic": (B.kinetic_energy_dynamic, (vel, mass), 1),
        # 1024 threads x 8 bytes = 8 KB of values: 72 KB at 8 lanes, past the 48 KB default
        "energy dynamic >48KB": (lambda v, m: B.kinetic_energy_dynamic(v, m, tpb=1024),
                                 (big_vel, np.ones(1000)), 0),
        "warp shuffle": (B.sum_of_squares_warp, (u1,), 0),
        "warp butterfly": (X.warp_norms, (u1, 1.5), 0),
        "halo stencil": (lambda u, r: B.simulate_heat2d(u, r, 3), (u2, 0.2), 0),
        "halo stencil f32": (lambda u, r: B.simulate_heat2d(u, r, 3, kernel="halo_f32"),
                             (u2.astype(np.float32), np.float32(0.2)), 0),
        "laplace grid sync": (lambda d, k: B.simulate_laplace(d, k, timesteps=20),
                              (B.laplace_initial_state(1001), 0.25), 1),
        "syncthreads loop": (B.smooth_blocks, (u1, 4, 0.8), 0),
        "device fn sync": (B.neighbour_average, (u1,), 0),
        "casts f32": (X.simulate_casts, (u1.astype(np.float32), np.float32(0.7)), 0),
        "buffers to=": (X.relax_with_buffers, (u1, 0.6), 0),
    }


BLOCK_CASES = None


def _flat(result):
    parts = result if isinstance(result, tuple) else (result,)
    return np.concatenate([np.asarray(p, dtype=np.float64).ravel() for p in parts])


def _rel(a, b):
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-300))


def _run(f, args, argnum, backend, lanes):
    import dualgpu

    rng = np.random.default_rng(0)
    tangents = [None] * len(args)
    tangents[argnum] = rng.standard_normal((lanes,) + np.shape(args[argnum]))
    with dualgpu.using_backend(backend):
        plain = _flat(f(*args))
        values, tangent = dualgpu.jvp_batch(f, args, tangents, chunk_size=lanes, progress=False)
    return plain, _flat(values), _flat(tangent)


def check_block_case(name, backend, references=("cpu", "cudasim"), lanes=LANES):
    """Run case ``name`` on ``backend`` and on the first reference that can run it."""
    from dualgpu import DualgpuError

    global BLOCK_CASES
    if BLOCK_CASES is None:
        BLOCK_CASES = _cases()
    f, args, argnum = BLOCK_CASES[name]
    got = _run(f, args, argnum, backend, lanes)
    refused = []
    for reference in references:
        if reference == backend:
            continue
        try:
            ref = _run(f, args, argnum, reference, lanes)
        except DualgpuError as exc:
            refused.append(f"{reference}: {str(exc).splitlines()[0][:80]}")
            continue
        return {"case": name, "reference": reference, "plain": _rel(got[0], ref[0]),
                "values": _rel(got[1], ref[1]), "tangents": _rel(got[2], ref[2])}
    return {"case": name, "reference": None, "refused": "; ".join(refused)}


def run_block_checks(backend, tolerance=1e-6, out=print):
    """Print one line per case; return the number of failures."""
    global BLOCK_CASES
    if BLOCK_CASES is None:
        BLOCK_CASES = _cases()
    out(f"\nblock-level kernels on {backend} (N = {LANES}) vs a reference backend")
    out(f"{'case':22s} {'reference':>9s} {'plain diff':>10s} {'value diff':>10s} "
        f"{'tangent diff':>12s}")
    failures = 0
    for name in BLOCK_CASES:
        try:
            r = check_block_case(name, backend)
        except Exception as exc:
            failures += 1
            out(f"{name:22s} FAILED: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
            continue
        if r["reference"] is None:
            out(f"{name:22s} no reference backend could run it ({r['refused']})")
            continue
        tol = 1e-4 if "f32" in name else tolerance
        bad = max(r["plain"], r["values"], r["tangents"]) > tol
        failures += bad
        out(f"{name:22s} {r['reference']:>9s} {r['plain']:10.1e} {r['values']:10.1e} "
            f"{r['tangents']:12.1e}{'  MISMATCH' if bad else ''}")
    return failures
