"""Captured tables run lane tile by lane tile (issue 41, point 3): the same bits, on any thread.

A table whose launches all run the same lane tiles replays tile by tile: each tile runs
the whole table on its lanes (so they stay in cache, as a hand-written loop over
directions keeps one direction), every tile after the first starting again from the
values the table started from; tiles run on helper threads, each on its own copy of the
values, when that pays. Each case compares a captured run with the uncaptured launches
bit for bit (values and partials) and with central differences, float32 and float64, on
the serial arm, the forced parallel arm, and the path where the helpers ran every tile.
"""
import numpy as np
import pytest

import dualgpu
from dualgpu import cuda
from dualgpu.backends.cpu import parallel, replay
from dualgpu.porting import capture, trace

import kernels_capture as K
from kernels_capture import EPS, TOL, same_bits


@pytest.fixture(autouse=True)
def cpu():
    with dualgpu.using_backend("cpu"):
        yield


@cuda.jit
def react(u, a, k):
    """In place (the array is read and written), a dual scalar and an int per step."""
    i = cuda.grid(1)
    if i < u.shape[0]:
        u[i] = u[i] - a * u[i] * u[i] + 0.001 * (k % 3)


@cuda.jit
def record(u, history, energy, k, weight):
    """Writes one row of a 2-D buffer (a second buffer group) from the state, and adds to
    a sum over steps (an atomic, every thread on one element)."""
    i = cuda.grid(1)
    if i < u.shape[0]:
        history[k % history.shape[0], i] = weight * u[i]
        cuda.atomic.add(energy, 0, u[i] * u[i])


def simulate(x, a):
    n = x.shape[0]
    u = cuda.to_device(x)
    v = cuda.device_array_like(u)
    history = cuda.device_array((3, n), dtype=x.dtype)
    energy = cuda.to_device(np.zeros(1, x.dtype))
    blocks = (n + 31) // 32
    for k in range(7):
        K.heat_step[blocks, 32](u, v, 0.2)
        react[blocks, 32](v, a, k)
        record[blocks, 32](v, history, energy, k, 0.5)
        u, v = v, u
    return u.copy_to_host(), history.copy_to_host(), energy.copy_to_host()


def packed(z):
    """The outputs as one vector, of the 24 states and the reaction rate as one vector."""
    return np.concatenate([out.reshape(-1) for out in simulate(z[:-1], z[-1])])


def start(dtype):
    x = (np.cos(np.arange(24) * 0.3) * 0.5 + 1.0).astype(dtype)
    return np.append(x, dtype(0.05)).astype(dtype)


def central(f, z, eps):
    columns = []
    for k in range(z.size):
        step = np.zeros(z.size, z.dtype)
        step[k] = eps
        with capture.mode(False):
            plus, minus = f(z + step), f(z - step)
        columns.append((plus.astype(np.float64) - minus.astype(np.float64))
                       / (2.0 * float(step[k])))
    return np.stack(columns, axis=-1)


def tile_runs():
    return dict(replay.STATS)


def batch(z, capture_mode):
    """f's outputs and their tangents along every input direction (values and partials)."""
    eye = np.eye(z.size, dtype=z.dtype)
    return dualgpu.jvp_batch(simulate, (z[:-1], z[-1]), (eye[:, :-1], eye[:, -1]), chunk_size=8,
                             capture=capture_mode)


def jacobians(z, runs=3):
    """The uncaptured run, then ``runs`` captured ones (the first is checked)."""
    return batch(z, False), [batch(z, True) for _ in range(runs)]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_tile_by_tile_replay_is_bit_for_bit_and_matches_differences(dtype):
    z = start(dtype)
    before = tile_runs()
    with parallel.serial_launches():
        reference, captured = jacobians(z)
    assert tile_runs()["serial"] > before["serial"]  # the tables ran tile by tile
    for run in captured:
        assert same_bits(run, reference)
    tangents = np.concatenate([t.reshape(z.size, -1) for t in reference[1]], axis=1)
    np.testing.assert_allclose(tangents.T, central(packed, z, EPS[dtype]), **TOL[dtype])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_tiles_on_helper_threads_give_the_same_bits(dtype, monkeypatch):
    if parallel.launch_threads() < 2:
        pytest.skip("one CPU: no helper thread to run tiles on")
    monkeypatch.setattr(parallel, "FORCE", True)
    z = start(dtype)
    before = tile_runs()
    reference, captured = jacobians(z)
    assert tile_runs()["parallel"] > before["parallel"]
    for run in captured:
        assert same_bits(run, reference)


def test_buffers_take_a_helpers_values_when_the_caller_ran_no_tile(monkeypatch):
    """Thread slot 0 (the buffers themselves) may find every tile claimed: the buffers then
    take the values of the slot that ran the last tile. Here the caller is slot 1."""
    made = replay.outer_inputs

    def caller_is_slot_1(values, tiles):
        inputs = made(values, tiles)
        inputs[-1][replay._SLOT] = 1
        return inputs

    z = start(np.float64)
    reference = batch(z, False)
    with parallel.serial_launches():
        batch(z, True)  # checked and kept
        monkeypatch.setattr(replay, "outer_inputs", caller_is_slot_1)
        before = tile_runs()
        captured = batch(z, True)
    assert tile_runs()["taken_from_a_helper"] > before["taken_from_a_helper"]
    assert same_bits(captured, reference)


class _Step:
    def __init__(self, tile, tiles, plain_arrays=False):
        self.tile = tile
        self.constants = (1, 1, 1, 32, 1, 1, 0, tiles) if tile else (1, 1, 1, 32, 1, 1)
        self.plain_arrays = plain_arrays


def test_only_tables_of_one_tiling_run_tile_by_tile():
    assert replay.tiles_outer([_Step(8, 3), _Step(8, 3)]) == 3
    assert replay.tiles_outer([_Step(8, 3), _Step(16, 3)]) == 0  # other lanes per tile
    assert replay.tiles_outer([_Step(8, 3), _Step(8, 2)]) == 0
    assert replay.tiles_outer([_Step(8, 1)]) == 0  # one tile: launches in turn
    assert replay.tiles_outer([_Step(8, 3), _Step(0, 0)]) == 0  # a plain launch
    assert replay.tiles_outer([_Step(8, 3), _Step(8, 3, True)]) == 0  # plain array arguments
    assert replay.tiles_outer([]) == 0


def test_a_traced_replay_follows_a_change_of_thread_slots(monkeypatch):
    """The private values' tuples are as long as the threads allow (numba.set_num_threads
    changes it): a traced replay compiles its entry for the new lengths, same bits."""
    z = start(np.float64)
    reference = batch(z, False)
    with parallel.serial_launches():
        runs = [batch(z, "trace") for _ in range(3)]  # record, check, replay
        replayed = trace.statistics()["replayed"]
        monkeypatch.setattr(parallel, "thread_bound", lambda: 3)
        runs += [batch(z, "trace") for _ in range(2)]
    assert trace.statistics()["replayed"] > replayed
    for run in runs:
        assert same_bits(run, reference)
