"""Jacobian chunks on Dask: a 2-worker LocalCluster of threads for most tests, and one cluster
of worker processes (pinned like GPU workers) for shipping, worker loss and pinning.

Skipped when Dask's distributed scheduler is not installed (it is the optional extra
``distributed``); the executor path itself is always tested in test_executors.py.
"""
import os
import time

import numpy as np
import pytest

distributed = pytest.importorskip(
    "distributed", reason="Dask is an optional extra: pip install -e '.[distributed]'")

import dualgpu  # noqa: E402
from dualgpu.distributed import ChunkExecutor, gpu_worker_specs  # noqa: E402

import simulations.heat1d as heat  # noqa: E402
import simulations.nbody as nbody  # noqa: E402
from autodiff.test_executors import (  # noqa: E402
    CountedSimulation, fails_on_late_directions, nbody_positions, stores_a_dual_into_numpy,
    unpickled_by,
)

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def cpu_backend():
    with dualgpu.using_backend("cpu"):
        yield


@pytest.fixture(scope="module")
def client():
    with dualgpu.distributed.local_cluster(2, processes=False) as client:
        yield client
    assert client.status == "closed" and client.cluster.status.name == "closed"


def test_jacobian_on_dask_is_bit_identical_to_local(client):
    pos, vel, masses = nbody.default_initial_state(10)
    local = dualgpu.jacobian(nbody_positions, masses, pos, vel, chunk_size=3)
    remote = dualgpu.jacobian(nbody_positions, masses, pos, vel, chunk_size=3, executor=client)
    np.testing.assert_array_equal(local, remote)
    assert remote.shape == (10, 3, 10)
    # nothing is left behind on the workers: the plan is forgotten and the chunks released
    from dualgpu.autodiff import distributed as module

    assert not any(client.run(lambda: len(module._PLANS)).values())
    deadline = time.monotonic() + 10
    while any(client.run(lambda dask_worker: len(dask_worker.data)).values()):
        assert time.monotonic() < deadline, "the workers still hold chunks"
        time.sleep(0.05)


def test_jvp_batch_and_sparse_on_dask(client, rng):
    u0 = heat.default_initial_state(20)
    batch = rng.standard_normal((5, 20))
    f = lambda u: heat.simulate(u, 4)  # noqa: E731  (cloudpickled by value)
    local = dualgpu.jvp_batch(f, (u0,), (batch,), chunk_size=2)
    remote = dualgpu.jvp_batch(f, (u0,), (batch,), chunk_size=2, executor=client)
    np.testing.assert_array_equal(local[1], remote[1])
    sparse_local = dualgpu.jacobian(f, u0, sparsity="detect", chunk_size=3)
    sparse_remote = dualgpu.jacobian(f, u0, sparsity=sparse_local.coloring, chunk_size=3,
                                     executor=ChunkExecutor(client, retries=0))
    np.testing.assert_array_equal(sparse_local.toarray(), sparse_remote.toarray())


def test_failing_chunk_on_dask_names_its_directions(client):
    with pytest.raises(dualgpu.DualgpuError,
                       match=r"chunk 2 \(directions 4 to 5: argument 0\[4\] to argument 0\[5\]\)"
                             r".*ValueError: simulation blew up"):
        dualgpu.jacobian(fails_on_late_directions, np.ones(8), chunk_size=2,
                         executor=ChunkExecutor(client, retries=1))
    with pytest.raises(dualgpu.DualgpuError, match=r"chunk 0 .*float\(Dual\)"):
        dualgpu.jacobian(stores_a_dual_into_numpy, np.ones(2), executor=client)


def test_gpu_worker_specs_pin_one_device_per_worker():
    specs = gpu_worker_specs([0, 3])
    envs = [spec["options"]["env"] for spec in specs.values()]
    assert envs == [{"CUDA_VISIBLE_DEVICES": "0", "DUALGPU_WORKER_BACKEND": "cuda"},
                    {"CUDA_VISIBLE_DEVICES": "3", "DUALGPU_WORKER_BACKEND": "cuda"}]
    assert all(spec["options"]["nthreads"] == 1 for spec in specs.values())
    with pytest.raises(dualgpu.DualgpuError, match="distinct device ids"):
        gpu_worker_specs([1, 1])
    with pytest.raises(dualgpu.DualgpuError, match="one worker per GPU"):
        dualgpu.distributed.local_cluster(3, gpus=[0, 1])


def dies_once(masses, pos, vel, marker):
    """Kill the worker process the first time a chunk with direction 4 runs."""
    if np.any(masses.partials[:, 4]) and not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(1)
    return nbody_positions(masses, pos, vel)


@pytest.mark.slow
def test_worker_processes_pinned_shipped_once_and_a_lost_worker_is_replaced(tmp_path):
    """One cluster of two worker processes pinned like GPU workers (CUDA_VISIBLE_DEVICES),
    running the cpu backend here: bit-identical results, f unpickled once per worker, and a
    worker killed mid-run whose chunk is rescheduled."""
    pos, vel, masses = nbody.default_initial_state(8)
    log = str(tmp_path / "unpickled.txt")
    f = CountedSimulation(log)
    local = dualgpu.jacobian(f, masses, pos, vel, chunk_size=2)
    with dualgpu.distributed.local_cluster(gpus=[0, 1]) as client:
        pins = client.run(lambda: os.environ.get("CUDA_VISIBLE_DEVICES"))
        assert sorted(pins.values()) == ["0", "1"]
        on_cpu = ChunkExecutor(client, backend="cpu")
        remote = dualgpu.jacobian(f, masses, pos, vel, chunk_size=2, executor=on_cpu)
        np.testing.assert_array_equal(local, remote)
        counts = unpickled_by(log)
        assert len(counts) == 2 and all(n == 1 for n in counts.values()), counts  # 4 chunks
        marker = str(tmp_path / "died")
        survived = dualgpu.jacobian(dies_once, masses, pos, vel, marker, chunk_size=2,
                                    executor=on_cpu)
        assert os.path.exists(marker)  # a worker did die
        np.testing.assert_array_equal(local, survived)
