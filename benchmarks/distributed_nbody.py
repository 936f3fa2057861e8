"""The N-body mass Jacobian on a Dask LocalCluster against the single-process run.

Usage::

    python benchmarks/distributed_nbody.py                  # 256 bodies, 10 steps, 2 workers
    python benchmarks/distributed_nbody.py --bodies 512 --workers 4 --out result.json
    python benchmarks/distributed_nbody.py --tiny           # smoke test (seconds)

Both runs use the cpu backend, the same chunk size and the same chunks; the result
of the cluster is checked to be bit-identical to the local one. Times are medians
after a warm-up run (the warm-up compiles the kernels, in each worker too, and is
reported separately); local and cluster runs alternate, so that both see the same
load on a shared machine. Two numbers come out:

* ``speedup``: single-process time / cluster time for the whole Jacobian;
* ``overhead per chunk``: the cost of sending a chunk to a worker and its partials
  back, measured with the same driver on a problem so small (4 bodies, 1 step)
  that the simulation costs next to nothing: (cluster time - local time) / chunks.

On a machine with fewer cores than workers + 1 (the client and the scheduler also
run), the workers compete with each other and with the client for the cores: the
speedup there measures contention as much as Dask.
"""
import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

import dualgpu  # noqa: E402
from simulations import nbody  # noqa: E402


def final_positions(masses, pos, vel, steps):
    return nbody.simulate(pos, vel, masses, steps)[0]


def measure(bodies, steps, chunk_size, workers, repeats):
    """Return a dict of timings (seconds) and checks for one configuration."""
    dualgpu.set_backend("cpu")
    pos, vel, masses = nbody.default_initial_state(bodies)
    n_chunks = -(-bodies // chunk_size)

    def local():
        return dualgpu.jacobian(final_positions, masses, pos, vel, steps,
                                chunk_size=chunk_size, progress=False)

    tiny_pos, tiny_vel, tiny_masses = nbody.default_initial_state(4)
    tiny_chunks = 4  # one lane per chunk

    def tiny(executor=None):
        return dualgpu.jacobian(final_positions, tiny_masses, tiny_pos, tiny_vel, 1,
                                chunk_size=1, progress=False, executor=executor)

    t0 = time.perf_counter()
    reference = local()
    local_first = time.perf_counter() - t0
    tiny()

    t0 = time.perf_counter()
    with dualgpu.distributed.local_cluster(workers) as client:
        startup = time.perf_counter() - t0

        def remote():
            return dualgpu.jacobian(final_positions, masses, pos, vel, steps,
                                    chunk_size=chunk_size, progress=False, executor=client)

        t0 = time.perf_counter()
        first = remote()
        cluster_first = time.perf_counter() - t0
        tiny(client)
        # side by side: local and cluster runs alternate, so both see the same machine load
        times = {"local": [], "cluster": [], "tiny_local": [], "tiny_cluster": []}
        for _ in range(repeats):
            for name, fn in (("local", local), ("cluster", remote), ("tiny_local", tiny),
                             ("tiny_cluster", lambda: tiny(client))):
                t0 = time.perf_counter()
                out = fn()
                times[name].append(time.perf_counter() - t0)
                if name == "cluster":
                    result = out
    local_time, cluster_time = (statistics.median(times[k]) for k in ("local", "cluster"))
    tiny_local, tiny_cluster = (statistics.median(times[k]) for k in ("tiny_local",
                                                                       "tiny_cluster"))
    identical = bool(np.array_equal(reference, result) and np.array_equal(reference, first))
    return {
        "bodies": bodies, "steps": steps, "chunk_size": chunk_size, "chunks": n_chunks,
        "workers": workers, "cores": os.cpu_count(), "repeats": repeats,
        "local_s": local_time, "local_first_s": local_first,
        "cluster_s": cluster_time, "cluster_first_s": cluster_first,
        "cluster_startup_s": startup,
        "speedup": local_time / cluster_time,
        "overhead_per_chunk_s": (tiny_cluster - tiny_local) / tiny_chunks,
        "bit_identical": identical,
    }


def format_result(r):
    return "\n".join([
        f"N-body mass Jacobian: {r['bodies']} bodies, {r['steps']} steps, chunk_size "
        f"{r['chunk_size']} ({r['chunks']} chunks); cpu backend, {r['cores']} cores",
        f"  single process        {r['local_s']:8.3f} s   (first run, compile included: "
        f"{r['local_first_s']:.2f} s)",
        f"  LocalCluster x{r['workers']}       {r['cluster_s']:8.3f} s   (first run: "
        f"{r['cluster_first_s']:.2f} s; cluster start {r['cluster_startup_s']:.2f} s)",
        f"  speedup               {r['speedup']:8.2f} x",
        f"  overhead per chunk    {1e3 * r['overhead_per_chunk_s']:8.1f} ms",
        f"  bit-identical         {r['bit_identical']}",
    ])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bodies", type=int, default=256)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--chunk-size", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tiny", action="store_true", help="16 bodies, 2 steps, 1 repeat")
    parser.add_argument("--out", help="write the result as JSON")
    args = parser.parse_args(argv)
    if args.tiny:
        args.bodies, args.steps, args.repeats = 16, 2, 1
    result = measure(args.bodies, args.steps, args.chunk_size, args.workers, args.repeats)
    print(format_result(result))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(result, fh, indent=2)
    return 0 if result["bit_identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
