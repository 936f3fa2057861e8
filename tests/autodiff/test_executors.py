"""Chunks of a Jacobian on concurrent.futures executors (no Dask needed).

The distributed path must give the local result to the last bit (same chunks, lanes and
padding), ship f once per worker process, name the directions of a chunk that fails and
assemble nothing then. Dask itself is tested in test_dask.py.
"""
import multiprocessing
import os
import pickle
import sys
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import numpy as np
import pytest

import dualgpu
from dualgpu import cuda
from dualgpu.distributed import ChunkExecutor

import simulations.heat1d as heat
import simulations.nbody as nbody


@pytest.fixture(autouse=True)
def cpu_backend():
    with dualgpu.using_backend("cpu"):
        yield


@pytest.fixture(scope="module")
def threads():
    with ThreadPoolExecutor(2) as pool:
        yield pool


def heat_final(u0, alpha):
    return heat.simulate(u0, 5, alpha)


def nbody_positions(masses, pos, vel):
    return nbody.simulate(pos, vel, masses, 3)[0]


def test_threads_give_the_local_jacobian_bit_for_bit(threads):
    u0 = heat.default_initial_state(19)
    local = dualgpu.jacobian(heat_final, u0, 0.7, argnums=(0, 1), chunk_size=4)
    remote = dualgpu.jacobian(heat_final, u0, 0.7, argnums=(0, 1), chunk_size=4,
                              executor=threads)
    for a, b in zip(local, remote):
        np.testing.assert_array_equal(a, b)
    assert remote[0].shape == (19, 19) and np.abs(remote[0]).max() > 0.1


def test_threads_jvp_batch_jacfwd_and_sparse(threads, rng):
    u0 = heat.default_initial_state(24)
    batch = rng.standard_normal((7, 24))
    local = dualgpu.jvp_batch(heat_final, (u0, 1.0), (batch, None), chunk_size=3)
    remote = dualgpu.jvp_batch(heat_final, (u0, 1.0), (batch, None), chunk_size=3,
                               executor=threads)
    np.testing.assert_array_equal(local[0], remote[0])
    np.testing.assert_array_equal(local[1], remote[1])
    jac = dualgpu.jacfwd(heat.simulate, argnums=0, chunk_size=8, executor=threads)
    np.testing.assert_array_equal(jac(u0, n_steps=5), dualgpu.jacobian(
        lambda u: heat.simulate(u, n_steps=5), u0, chunk_size=8))
    step = lambda u: heat.simulate(u, n_steps=2)  # noqa: E731
    sparse_local = dualgpu.jacobian(step, u0, sparsity="detect", chunk_size=2)
    sparse_remote = dualgpu.jacobian(step, u0, sparsity=sparse_local.coloring, chunk_size=2,
                                     executor=threads)
    assert (sparse_local != sparse_remote).nnz == 0
    np.testing.assert_array_equal(sparse_local.toarray(), sparse_remote.toarray())


def fails_on_late_directions(x):
    # the directions of the chunk are in the seeds: raise for entries 4 and 5
    if np.any(x.partials[:, 4:6]):
        raise ValueError("simulation blew up")
    return cuda.to_device(x).copy_to_host()


def test_a_failing_chunk_names_its_directions_and_nothing_is_assembled(threads):
    with pytest.raises(dualgpu.DualgpuError,
                       match=r"chunk 2 \(directions 4 to 5: argument 0\[4\] to argument 0\[5\]\)"
                             r".*ValueError: simulation blew up") as info:
        dualgpu.jacobian(fails_on_late_directions, np.ones(8), chunk_size=2, executor=threads)
    assert isinstance(info.value.__cause__, ValueError)


def stores_a_dual_into_numpy(x):
    out = np.zeros(x.shape)
    out[0] = x[0]  # a Dual into a float array: dualgpu's own (deterministic) error
    return out


def test_dualgpu_errors_from_a_chunk_keep_their_message(threads):
    with pytest.raises(dualgpu.DualgpuError, match=r"chunk 0 \(directions 0 to 1.*float\(Dual\)"):
        dualgpu.jacobian(stores_a_dual_into_numpy, np.ones(2), executor=threads)


def test_bad_executor_and_options():
    with pytest.raises(dualgpu.DualgpuError, match="expected a dask.distributed.Client"):
        dualgpu.jacobian(heat_final, np.ones(4), 1.0, executor="threads")
    with pytest.raises(dualgpu.DualgpuError, match="retries must be an int"):
        ChunkExecutor(ThreadPoolExecutor(1), retries=-1)
    with pytest.raises(dualgpu.DualgpuError, match="unknown backend"):
        ChunkExecutor(ThreadPoolExecutor(1), backend="tpu")


def test_local_cluster_without_dask_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    with pytest.raises(dualgpu.DualgpuError, match=r'pip install -e "\.\[distributed\]"'):
        dualgpu.distributed.local_cluster(2)


# ---------------------------------------------------------------------------
# pickling kernels and the per-process shipping of f
# ---------------------------------------------------------------------------
def test_module_kernels_pickle_by_reference():
    assert pickle.loads(pickle.dumps(nbody.accelerations)) is nbody.accelerations
    assert pickle.loads(pickle.dumps(nbody.pair_acceleration)) is nbody.pair_acceleration


def test_local_kernels_pickle_by_value_without_compiled_code():
    cloudpickle = pytest.importorskip(
        "cloudpickle", reason="a local kernel travels by value with cloudpickle (comes with dask)")

    @cuda.jit
    def twice(a, out):
        i = cuda.grid(1)
        if i < a.shape[0]:
            out[i] = 2.0 * a[i]

    a = np.arange(4.0)
    out = np.zeros(4)
    twice[1, 4](a, out)
    assert twice._compiled
    copy = cloudpickle.loads(cloudpickle.dumps(twice))
    assert copy is not twice and copy._compiled == {}
    out2 = np.zeros(4)
    copy[1, 4](a, out2)  # the cpu backend reads the shipped function's source again
    np.testing.assert_array_equal(out, out2)


class CountedSimulation:
    """A picklable f that records, in a file, every process that unpickles it."""

    def __init__(self, log):
        self.log = log

    def __reduce__(self):
        return _unpickle_counted, (self.log,)

    def __call__(self, masses, pos, vel):
        return nbody_positions(masses, pos, vel)


def _unpickle_counted(log):
    with open(log, "a") as fh:
        fh.write(f"{os.getpid()}\n")
    return CountedSimulation(log)


def unpickled_by(log):
    """{pid: times f was unpickled there} from the log file."""
    counts = {}
    if os.path.exists(log):
        for line in open(log).read().split():
            counts[int(line)] = counts.get(int(line), 0) + 1
    return counts


@pytest.mark.slow
def test_process_pool_bit_identical_and_f_shipped_once_per_process(tmp_path):
    pos, vel, masses = nbody.default_initial_state(12)
    log = str(tmp_path / "unpickled.txt")
    f = CountedSimulation(log)
    local = dualgpu.jacobian(f, masses, pos, vel, chunk_size=2)
    assert unpickled_by(log) == {}
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(2, mp_context=context) as pool:
        remote = dualgpu.jacobian(f, masses, pos, vel, chunk_size=2, executor=pool)
        again = dualgpu.jacobian(f, masses, pos, vel, chunk_size=4, executor=pool)
    np.testing.assert_array_equal(local, remote)  # the same chunks: the same code, bit for bit
    # 4 lanes per chunk instead of 2: other tiles, so LLVM may contract other products into
    # FMAs; a few units in the last place
    np.testing.assert_allclose(again, local, rtol=1e-13, atol=1e-13 * np.abs(local).max())
    counts = unpickled_by(log)
    # 6 + 3 chunks, two Jacobians: each worker process unpickled f once per Jacobian at most
    assert 1 <= len(counts) <= 2 and os.getpid() not in counts
    assert all(n <= 2 for n in counts.values()), counts
    assert sum(counts.values()) < 9
