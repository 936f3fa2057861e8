"""Sparse Jacobians: detection by the structural tracer, coloring, compressed recovery."""
import numpy as np
import pytest
import scipy.sparse as sp

import dualgpu
from dualgpu import DualgpuError, sparse
from dualgpu.autodiff.sparsity import banded_pattern
from simulations import heat1d, heat2d, mass_spring


@pytest.fixture(autouse=True)
def cpu_backend():
    with dualgpu.using_backend("cpu"):
        yield


def heat(steps):
    return lambda u: heat1d.simulate(u, n_steps=steps)


@pytest.mark.parametrize("steps,colors", [(1, 3), (5, 11), (20, 41)])
def test_heat_sparse_equals_dense_with_2T_plus_1_colors(steps, colors):
    u0 = heat1d.default_initial_state(80)
    J = sparse.sparse_jacobian(heat(steps), (u0,), sparsity="detect")
    assert J.coloring.n_colors == colors
    dense = dualgpu.jacobian(heat(steps), u0, progress=False)
    # colors vs tiles of directions: other lane counts per launch, so LLVM may contract
    # other products into FMAs; the entries agree to a few units in the last place
    np.testing.assert_allclose(J.toarray(), dense, rtol=1e-14, atol=1e-16)
    # the detected pattern is exactly the nonzero structure of the true Jacobian
    detected = sparse.detect_sparsity(heat(steps), (u0,))
    np.testing.assert_array_equal(detected.toarray(), dense != 0)


def test_user_pattern_and_coloring_reuse():
    u0 = heat1d.default_initial_state(60)
    pattern = banded_pattern(60, 1)
    J1 = sparse.sparse_jacobian(heat(1), (u0,), sparsity=pattern)
    J2 = sparse.sparse_jacobian(heat(1), (u0 * 2,), sparsity=J1.coloring)  # reused coloring
    assert isinstance(J1, sp.csr_matrix) and J1.coloring.n_colors == 3
    np.testing.assert_allclose(J2.toarray(), dualgpu.jacobian(heat(1), u0 * 2, progress=False))


def test_heat2d_five_point_stencil():
    u0 = heat2d.default_initial_state(9)
    f = lambda u: heat2d.simulate(u, n_steps=1)
    J = sparse.sparse_jacobian(f, (u0,), sparsity="detect", chunk_size=3)
    dense = np.asarray(dualgpu.jacobian(f, u0, progress=False)).reshape(u0.size, u0.size)
    np.testing.assert_allclose(J.toarray(), dense, rtol=0, atol=0)
    detected = sparse.detect_sparsity(f, (u0,))
    np.testing.assert_array_equal(detected.toarray(), dense != 0)
    assert J.coloring.n_colors <= 7


def test_mass_spring_chain():
    pos, vel, pinned = mass_spring.default_initial_state(8)
    f = lambda p: mass_spring.simulate(p, vel, pinned, n_steps=2)[0]
    J = sparse.sparse_jacobian(f, (pos,), sparsity="detect")
    dense = np.asarray(dualgpu.jacobian(f, pos, progress=False)).reshape(pos.size, pos.size)
    np.testing.assert_allclose(J.toarray(), dense, rtol=1e-14, atol=1e-14)
    assert J.coloring.n_colors < pos.size
    # the detected pattern is the true structure: a free node depends on the nodes at most
    # n_steps = 2 springs away (both coordinates); the pinned node keeps its own position.
    # It also holds entries that are structurally there but 0.0 at this straight chain.
    detected = sparse.detect_sparsity(f, (pos,)).toarray()
    node = np.arange(pos.size) // 2
    structure = np.abs(node[:, None] - node[None, :]) <= 2
    fixed = pinned.repeat(2).astype(bool)
    structure[fixed] = np.eye(pos.size, dtype=bool)[fixed]
    np.testing.assert_array_equal(detected, structure)
    assert not (dense != 0)[~detected].any()


def test_pattern_errors():
    u0 = heat1d.default_initial_state(30)
    with pytest.raises(DualgpuError, match="pattern has 31 columns but argument 0 has 30 elements"):
        sparse.sparse_jacobian(heat(1), (u0,), sparsity=np.eye(30, 31, dtype=bool))
    with pytest.raises(DualgpuError, match="pattern has 29 rows but the function has 30 outputs"):
        sparse.sparse_jacobian(heat(1), (u0,), sparsity=np.eye(29, 30, dtype=bool))
    too_thin = banded_pattern(30, 0)  # misses the neighbours
    with pytest.raises(DualgpuError, match="misses .* entries the function has"):
        sparse.sparse_jacobian(heat(1), (u0,), sparsity=too_thin, validate=True)
    with pytest.raises(DualgpuError, match="misses .* entries of the detected pattern"):
        sparse.sparse_jacobian(heat(1), (u0,), sparsity=too_thin, validate="detect")
    with pytest.raises(DualgpuError, match="must be a float array"):
        sparse.sparse_jacobian(lambda a: a, (1.0,))


def test_driver_api_takes_sparsity():
    u0 = heat1d.default_initial_state(40)
    J = dualgpu.jacfwd(heat(5), sparsity="detect")(u0)
    assert sp.issparse(J) and J.coloring.n_colors == 11
    J2 = dualgpu.jacobian(heat(5), u0, sparsity=J.coloring, validate=True)
    np.testing.assert_array_equal(J.toarray(), J2.toarray())
    with pytest.raises(DualgpuError, match="sparse Jacobians take one array argument"):
        dualgpu.jacobian(lambda u, a: heat1d.simulate(u, n_steps=1, alpha=a), u0, 1.0,
                         argnums=(0, 1), sparsity="detect")


def test_to_dense_gives_the_dense_drivers_shape():
    u0 = heat2d.default_initial_state(6)
    f = lambda u: heat2d.simulate(u, n_steps=1)
    J = sparse.sparse_jacobian(f, (u0,), sparsity="detect", progress=False)
    assert J.shape == (36, 36) and J.output_shape == (6, 6) and J.input_shape == (6, 6)
    dense = dualgpu.jacobian(f, u0, progress=False)
    assert dense.shape == (6, 6, 6, 6)
    np.testing.assert_array_equal(sparse.to_dense(J), dense)
    np.testing.assert_array_equal(sparse.to_dense(J.toarray(), (6, 6), (36,)),
                                  dense.reshape(6, 6, 36))
    with pytest.raises(DualgpuError, match="J has no output_shape attribute.*pass output_shape"):
        sparse.to_dense(sp.csr_matrix(J))  # a plain matrix has no shapes attached
    with pytest.raises(DualgpuError, match=r"J is 36 x 36.*output_shape \(5, 6\) holds 30"):
        sparse.to_dense(J, (5, 6))


def test_timings_are_attached_and_reported_when_progress_is_shown(capsys):
    u0 = heat1d.default_initial_state(40)
    J = sparse.sparse_jacobian(heat(2), (u0,), sparsity="detect", progress=False)
    assert capsys.readouterr().err == ""
    assert set(J.timings) == {"detect", "color", "evaluate"}
    assert all(t > 0 for t in J.timings.values())
    sparse.sparse_jacobian(heat(2), (u0,), sparsity="detect", progress=True)
    err = capsys.readouterr().err
    assert "sparse jacobian: 40 x 40" in err
    assert "pattern detected in" in err and "5 colors in" in err
    J2 = sparse.sparse_jacobian(heat(2), (u0,), sparsity=J.coloring, progress=True)
    assert "reused coloring: 5 colors" in capsys.readouterr().err
    assert J2.timings["detect"] == 0.0 and J2.timings["color"] == 0.0
    sparse.sparse_jacobian(heat(2), (u0,), sparsity="detect")  # default: not a terminal here
    assert capsys.readouterr().err == ""
