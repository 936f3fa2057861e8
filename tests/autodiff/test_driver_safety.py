"""The driver's refusals say where the trouble is; its results fit and peak at their own size."""
import tracemalloc

import numpy as np
import pytest

import dualgpu
from dualgpu import DualgpuError
from dualgpu.autodiff.api import jacobian, jvp, jvp_batch

import kernels_edge_cases as K

N = 6
U = np.linspace(1.0, 2.0, N)
W = np.linspace(0.5, 1.5, N)


@pytest.fixture(autouse=True)
def cpu_backend():
    with dualgpu.using_backend("cpu"):
        yield


# --- non-finite derivatives: the message names the source ------------------------------------
def test_non_finite_differentiated_input_is_named():
    u = U.copy()
    u[3] = np.nan
    with pytest.raises(DualgpuError) as error:
        jacobian(K.root_times_simulation, u, W, chunk_size=3, progress=False)
    text = str(error.value)
    assert "inputs already contain non-finite values" in text
    assert "argument 0 (differentiated) has 1 non-finite entry, the first at [3] = nan" in text


def test_non_finite_fixed_argument_inside_a_tuple_is_named():
    w = W.copy()
    w[1] = np.inf

    def f(u, params):
        return K.root_times_simulation(u, params[0])

    with pytest.raises(DualgpuError, match=r"argument 1 \(not differentiated\)\[0\] has 1 "
                       r"non-finite entry, the first at \[1\] = inf"):
        jacobian(f, U, (w, 2.0), chunk_size=3, progress=False)


def test_non_finite_tangent_is_named():
    tangent = np.ones(N)
    tangent[2] = np.nan
    with pytest.raises(DualgpuError, match=r"the tangent of argument 0 has 1 non-finite"):
        jvp(K.root_times_simulation, (U, W), (tangent, None))


def test_non_finite_value_from_finite_inputs_blames_the_simulation():
    u = U.copy()
    u[4] = -1.0  # sqrt(-1): the value is nan, the inputs are finite
    with pytest.raises(DualgpuError) as error:
        jacobian(K.root_times_simulation, u, W, chunk_size=3, progress=False)
    text = str(error.value)
    assert "output value there is itself non-finite" in text and "(value nan)" in text
    assert "output 0[4]" in text


def test_infinite_factor_at_a_finite_value_suggests_nansafe_mode():
    u = U.copy()
    u[0] = 0.0  # sqrt at 0: value 0, derivative inf
    with pytest.raises(DualgpuError) as error:
        jacobian(K.root_times_simulation, u, W, chunk_size=3, progress=False)
    text = str(error.value)
    assert "inputs are all finite and so is the value" in text
    assert "DUALGPU_NANSAFE_MODE=1" in text and "argument 0[0]" in text


# --- size: refused before allocating, with the numbers and the fix; peak 1x --------------------
def test_a_jacobian_larger_than_memory_is_refused_before_allocation(monkeypatch):
    runs = []

    def f(u, w):
        runs.append(1)
        return K.root_times_simulation(u, w)

    monkeypatch.setattr(dualgpu.autodiff._results, "available_memory", lambda: 100)
    with pytest.raises(DualgpuError) as error:
        jacobian(f, U, W, chunk_size=2, progress=False)
    text = str(error.value)
    assert "the dense Jacobian (output shape (6,) x 6 input entries) needs 288 bytes" in text
    assert "more than the 100 bytes of memory available" in text
    assert "sparsity='detect'" in text and "argnums" in text and "jvp_batch" in text
    assert len(runs) == 1  # refused after the first run told the output's size, not later
    with pytest.raises(DualgpuError, match="tangents of 6 direction"):
        jvp_batch(f, (U, W), (np.eye(N), None), chunk_size=2)


def test_dense_jacobian_peaks_at_its_own_size(monkeypatch):
    # one tile per run of f: what is measured is the assembly of the result, not the lanes
    # one run of f carries (those are bounded by dualgpu.core.lanes.BATCH_BYTES)
    monkeypatch.setattr(dualgpu.core.lanes, "BATCH_BYTES", 1)
    n = 400
    u, w = np.linspace(1.0, 2.0, n), np.linspace(0.5, 1.5, n)
    jacobian(K.root_times_simulation, u[:8], w[:8], chunk_size=8, progress=False)  # compile
    tracemalloc.start()
    try:
        J = jacobian(K.root_times_simulation, u, w, chunk_size=8, progress=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    np.testing.assert_allclose(np.diag(J), w / (2 * np.sqrt(u)), rtol=1e-14)
    # the result is n * n * 8 = 1.28 MB; a transposed copy would double the peak
    assert peak < 1.25 * J.nbytes, f"peak {peak} bytes for a {J.nbytes}-byte Jacobian"


# --- bad inputs to the driver -------------------------------------------------------------------
def test_empty_arrays_and_complex_tangents_are_refused():
    with pytest.raises(DualgpuError, match=r"argument 0 is an empty array \(shape \(0,\): "
                       "nothing to differentiate\\)"):
        jacobian(K.root_times_simulation, np.zeros(0), np.zeros(0))
    with pytest.raises(DualgpuError,
                       match="tangent 0 is complex.*imaginary parts would be dropped"):
        jvp(K.root_times_simulation, (U, W), (U + 1j, None))


def test_zero_dimensional_arrays_are_scalars():
    J = jacobian(K.scaled_simulation, U, np.array(2.0), argnums=1, chunk_size=1, progress=False)
    assert J.shape == (N,)  # like a Python float: the 0-d input adds no axis
    np.testing.assert_array_equal(J, U)
