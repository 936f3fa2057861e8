"""The forward-mode driver: Jacobians of real simulations, chunking, output structures, errors.

Runs on the ``cpu`` backend (one cpu-vs-cudasim comparison). Each distinct lane count N
compiles the kernels once (about 1 to 4 s on the cpu backend), so the tests share a few
N values. Chunk size n for the 200-cell heat problem is impossible (n > MAX_LANES = 64),
so "all directions in one chunk" runs on a 48-cell rod.
"""
import contextlib
import io
import math
import sys

import numpy as np
import pytest

import dualgpu
from dualgpu import cuda
from dualgpu.autodiff.api import jacfwd, jacobian, jvp, jvp_batch
from dualgpu.core.lanes import default_chunk_size
from dualgpu.compiled.types import MAX_LANES

import simulations.heat1d as heat
import simulations.nbody as nbody

HEAT_STEPS = 50
R = 0.4  # alpha * dt / dx**2 with simulate's defaults (alpha=1, dt=4e-5, dx=0.01)


@pytest.fixture(autouse=True)
def cpu_backend():
    with dualgpu.using_backend("cpu"):
        yield


def heat_final(u0, alpha=1.0):
    """Temperatures after HEAT_STEPS Dirichlet steps."""
    return heat.simulate(u0, HEAT_STEPS, alpha)


def step_matrix(n, r=R):
    """The FTCS Dirichlet step as a matrix: end rows zero (ends held at 0)."""
    a = np.zeros((n, n))
    i = np.arange(1, n - 1)
    a[i, i - 1] = r
    a[i, i] = 1.0 - 2.0 * r
    a[i, i + 1] = r
    return a


# ---------------------------------------------------------------------------
# heat 1-D
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("n, chunk_size", [
    (200, 1), (200, 7), (200, 64), (200, None),
    (48, 48),  # all directions in one chunk (n=200 exceeds MAX_LANES)
])
def test_heat_jacobian_is_step_matrix_power(n, chunk_size):
    u0 = heat.default_initial_state(n)
    kept = u0.copy()
    too_many = chunk_size is not None and chunk_size > dualgpu.core.lanes.GOOD_TILE_LANES["cpu"]
    with pytest.warns(dualgpu.errors.ChunkSizeWarning) if too_many else contextlib.nullcontext():
        jac = jacobian(heat_final, u0, argnums=0, chunk_size=chunk_size, progress=False)
    expected = np.linalg.matrix_power(step_matrix(n), HEAT_STEPS)
    assert jac.shape == (n, n) and jac.dtype == np.float64
    err = np.max(np.abs(jac - expected)) / np.max(np.abs(expected))
    assert err < 1e-10, err
    np.testing.assert_array_equal(u0, kept)


def test_heat_derivative_in_alpha_matches_central_difference():
    u0 = heat.default_initial_state(200)
    d_alpha = jacfwd(heat_final, argnums=1)(u0, 1.0)
    h = 1e-6
    fd = (heat_final(u0, 1.0 + h) - heat_final(u0, 1.0 - h)) / (2 * h)
    assert d_alpha.shape == (200,)
    err = np.max(np.abs(d_alpha - fd)) / np.max(np.abs(fd))
    assert err < 1e-6, err


def test_heat_both_arguments_nest_like_jax():
    u0 = heat.default_initial_state(16)
    d_u0, d_alpha = jacobian(heat_final, u0, 1.0, argnums=(0, 1), chunk_size=8)
    assert d_u0.shape == (16, 16) and d_alpha.shape == (16,)
    np.testing.assert_allclose(d_u0, jacobian(heat_final, u0, chunk_size=8), rtol=1e-14)


def test_heat_float32_stays_float32():
    u0 = heat.default_initial_state(16).astype(np.float32)
    jac = jacobian(heat_final, u0, chunk_size=8)
    assert jac.dtype == np.float32
    expected = np.linalg.matrix_power(step_matrix(16), HEAT_STEPS)
    assert np.max(np.abs(jac - expected)) < 1e-5


def test_cpu_and_cudasim_agree():
    u0 = heat.default_initial_state(16)

    def short(u0, alpha):
        return heat.simulate(u0, 3, alpha)

    cpu = jacobian(short, u0, 1.0, argnums=(0, 1), chunk_size=8)
    with dualgpu.using_backend("cudasim"):
        sim = jacobian(short, u0, 1.0, argnums=(0, 1), chunk_size=8)
    for a, b in zip(cpu, sim):
        # the cpu backend contracts lane products into FMAs (as NVVM does on a GPU), the
        # simulator's Python duals round each product: a unit or two in the last place
        np.testing.assert_allclose(a, b, rtol=1e-14, atol=1e-16)


# ---------------------------------------------------------------------------
# N-body: 64 bodies, 20 steps
# ---------------------------------------------------------------------------
def test_nbody_positions_in_masses_and_g_match_central_differences():
    pos, vel, masses = nbody.default_initial_state(64)
    steps = 20

    def final_positions(masses, g):
        return nbody.simulate(pos, vel, masses, steps, g)[0]

    d_m, d_g = jacobian(final_positions, masses, 1.0, argnums=(0, 1), progress=False)
    assert d_m.shape == (64, 3, 64) and d_g.shape == (64, 3)
    h = 1e-6
    fd_g = (final_positions(masses, 1.0 + h) - final_positions(masses, 1.0 - h)) / (2 * h)
    assert np.max(np.abs(d_g - fd_g)) / np.max(np.abs(fd_g)) < 1e-6
    for j in (0, 17, 63):  # three mass columns, each by its own central difference
        e = np.zeros(64)
        e[j] = 1e-4 * masses[j]  # a smaller step loses the difference to rounding
        fd = (final_positions(masses + e, 1.0) - final_positions(masses - e, 1.0)) / (2 * e[j])
        assert np.max(np.abs(d_m[..., j] - fd)) / np.max(np.abs(fd)) < 1e-6, j
    np.testing.assert_array_equal(masses, np.full(64, 1 / 64))


def test_nbody_tuple_output_nesting():
    pos, vel, masses = nbody.default_initial_state(4)

    def run(positions, masses):
        return nbody.simulate(positions, vel, masses, 2)

    jac = jacobian(run, pos, masses, argnums=(0, 1))
    assert len(jac) == 2 and all(len(j) == 2 for j in jac)
    assert jac[0][0].shape == (4, 3, 4, 3) and jac[1][1].shape == (4, 3, 4)
    single = jacobian(run, pos, masses, argnums=1)
    assert len(single) == 2 and single[0].shape == (4, 3, 4)
    # 4 lanes against 16: other tiles, so LLVM may contract other products into FMAs
    np.testing.assert_allclose(single[1], jac[1][1], rtol=1e-13,
                               atol=1e-13 * np.abs(single[1]).max())


# ---------------------------------------------------------------------------
# chunking, JVPs, outputs
# ---------------------------------------------------------------------------
def test_default_chunk_size():
    assert [default_chunk_size(n) for n in (1, 3, 8, 9, 17, 200)] == [1, 3, 8, 5, 6, 8]
    assert default_chunk_size(1000, limit=500) <= MAX_LANES


def _spy(seen):
    def spy(x, a):
        seen.append((x.lanes, a.lanes, float(x.values[0])))
        x[0] = 5.0  # f scribbles on its input: the next chunk must still see the original
        u = cuda.to_device(x)
        return u.copy_to_host()
    return spy


def test_one_run_carries_every_direction_in_tiles():
    seen = []
    x = np.arange(1.0, 11.0)
    jac_x, jac_a = jacobian(_spy(seen), x, 2.0, argnums=(0, 1), chunk_size=4)
    assert seen == [(12, 12, 1.0)]  # 11 directions: 3 tiles of 4, one zero lane
    expected = np.eye(10)
    expected[0, 0] = 0.0
    np.testing.assert_array_equal(jac_x, expected)
    np.testing.assert_array_equal(jac_a, np.zeros(10))


def test_every_chunk_uses_the_same_lane_count_and_fresh_inputs(monkeypatch):
    # a memory budget of about one tile per run: 11 directions in 3 runs of 4 lanes
    monkeypatch.setattr(dualgpu.core.lanes, "BATCH_BYTES", 1)
    seen = []
    x = np.arange(1.0, 11.0)
    jac_x, jac_a = jacobian(_spy(seen), x, 2.0, argnums=(0, 1), chunk_size=4)
    assert seen == [(4, 4, 1.0)] * 3  # 11 directions: 4 + 4 + 3 padded with one zero lane
    expected = np.eye(10)
    expected[0, 0] = 0.0
    np.testing.assert_array_equal(jac_x, expected)
    np.testing.assert_array_equal(jac_a, np.zeros(10))
    np.testing.assert_array_equal(x, np.arange(1.0, 11.0))


def test_fixed_arguments_are_copied_too():
    def scribble(x, fixed):
        fixed[:] = -1.0  # writes into an argument that is not differentiated
        return cuda.to_device(x).copy_to_host()

    fixed = np.ones(3)
    jacobian(scribble, np.ones(2), fixed)
    jvp(scribble, (np.ones(2), fixed), (np.ones(2), None))
    np.testing.assert_array_equal(fixed, np.ones(3))


def test_jvp_and_jvp_batch_agree_with_the_jacobian(rng):
    u0 = heat.default_initial_state(16)
    jac_u, jac_a = jacobian(heat_final, u0, 1.0, argnums=(0, 1), chunk_size=8)
    v = rng.standard_normal(16)
    out, tangent = jvp(heat_final, (u0, 1.0), (v, 0.5))
    np.testing.assert_allclose(out, heat_final(u0, 1.0), rtol=1e-15)
    np.testing.assert_allclose(tangent, jac_u @ v + 0.5 * jac_a, rtol=1e-12, atol=1e-14)
    batch = rng.standard_normal((5, 16))
    out, tangents = jvp_batch(heat_final, (u0, 1.0), (batch, None), chunk_size=2)
    assert tangents.shape == (5, 16)
    np.testing.assert_allclose(tangents, batch @ jac_u.T, rtol=1e-12, atol=1e-14)


def test_dual_scalar_output_and_plain_side_output():
    def first_cell_and_constant(x):
        u = cuda.to_device(x).copy_to_host()
        return u[2], np.ones(3)

    d_first, d_plain = jacobian(first_cell_and_constant, np.arange(4.0), chunk_size=4)
    np.testing.assert_array_equal(d_first, [0.0, 0.0, 1.0, 0.0])
    assert d_plain.shape == (3, 4) and not d_plain.any()


class _Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self):
        return True


def test_progress_bar_is_quiet_by_default_off_a_terminal(capsys, monkeypatch):
    monkeypatch.setattr(dualgpu.core.lanes, "BATCH_BYTES", 1)  # one tile per run of f
    x = np.arange(6.0)

    def identity(x):
        return cuda.to_device(x).copy_to_host()

    jacobian(identity, x, chunk_size=3, progress=True)  # asked for: shown
    assert "jacobian" in capsys.readouterr().err
    # pytest's captured stderr is not a terminal: 6 chunks, and still nothing by default
    assert not sys.stderr.isatty()
    jacobian(identity, x, chunk_size=1)
    jvp_batch(identity, (x,), (np.eye(6),), chunk_size=1)
    assert capsys.readouterr().err == ""
    jacobian(identity, x, chunk_size=1, progress=False)
    assert capsys.readouterr().err == ""
    # on a terminal the default shows the bar, above PROGRESS_MIN_CHUNKS chunks only
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    jacobian(identity, x, chunk_size=1)
    assert "jacobian" in terminal.getvalue()
    terminal.seek(0)
    terminal.truncate()
    jacobian(identity, x, chunk_size=3)  # 2 chunks: too few to bother
    assert terminal.getvalue() == ""


def test_progress_must_be_none_true_or_false():
    with pytest.raises(dualgpu.DualgpuError, match=r"progress must be None.*got 'yes'"):
        jacobian(identity, np.ones(2), progress="yes")


# ---------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------
def identity(x):
    return cuda.to_device(x).copy_to_host()


@pytest.mark.parametrize("argnums, message", [
    (3, "points at argument 3"),
    (-4, "points at argument -4"),
    (1, "argument 1 is an int"),
    ((0, 0), "names an argument twice"),
    ("0", "argnums must be an int"),
    ((), "argnums must be an int"),
])
def test_bad_argnums(argnums, message):
    with pytest.raises(dualgpu.DualgpuError, match=message):
        jacobian(heat.simulate, np.ones(4), 2, 1.0, argnums=argnums)


@pytest.mark.parametrize("arg, message", [
    ("hot", "argument 0 is str"),
    (np.arange(4), "array of dtype int64"),
    (np.ones((2, 2, 2, 2)), "4 dimensions"),
    (True, "a bool"),
])
def test_non_float_arguments(arg, message):
    with pytest.raises(dualgpu.DualgpuError, match=message):
        jacobian(identity, arg)


@pytest.mark.parametrize("chunk_size", [0, -1, 5, 2.0, MAX_LANES + 1])
def test_bad_chunk_size(chunk_size):
    with pytest.raises(dualgpu.DualgpuError, match=r"chunk_size=.*expected an int from 1 to 4"):
        jacobian(identity, np.ones(4), chunk_size=chunk_size)


def test_chunk_size_above_max_lanes():
    with pytest.raises(dualgpu.DualgpuError, match=f"MAX_LANES={MAX_LANES}"):
        jacobian(identity, np.ones(200), chunk_size=200)


def test_output_without_partials_is_an_error_not_zeros():
    def escapes(x):
        return np.asarray(cuda.to_device(x).values) * 2.0  # plain numpy: partials dropped

    with pytest.raises(dualgpu.DualgpuError, match="does not depend on the seeded inputs"):
        jacobian(escapes, np.ones(3))
    with pytest.raises(dualgpu.DualgpuError, match="does not depend on the seeded inputs"):
        jvp(escapes, (np.ones(3),), (np.ones(3),))


@cuda.jit
def _square_root(u, out):
    i = cuda.grid(1)
    if i < u.shape[0]:
        out[i] = math.sqrt(u[i])


def test_non_finite_partials_name_the_first_entry():
    def root(x):
        u = cuda.to_device(x)
        out = cuda.device_array_like(u)
        _square_root[1, 32](u, out)
        return out.copy_to_host()

    x = np.array([1.0, 4.0, 0.0, 9.0])
    # d sqrt(u) = 0.5 / sqrt(u) * du: at u = 0 an infinite factor times the zero partials
    # of the other directions gives nan already for direction 0
    with pytest.raises(dualgpu.DualgpuError, match=r"nan of output 0\[2\].*argument 0\[0\]"):
        jacobian(root, x, chunk_size=2)
    # along e_2 alone the derivative is +inf; e_3 (direction 1) is fine but e_2 comes first
    with pytest.raises(dualgpu.DualgpuError, match=r"inf of output 0\[2\].*direction 0"):
        jvp_batch(root, (x,), (np.eye(4)[2:],))
    np.testing.assert_array_equal(x, [1.0, 4.0, 0.0, 9.0])


def test_jvp_errors():
    with pytest.raises(dualgpu.DualgpuError, match="2 primals and 1 tangents"):
        jvp(identity, (np.ones(2), 1.0), (np.ones(2),))
    with pytest.raises(dualgpu.DualgpuError, match=r"expected \(2,\)"):
        jvp(identity, (np.ones(2),), (np.ones(3),))
    with pytest.raises(dualgpu.DualgpuError, match="every tangent is None"):
        jvp(identity, (np.ones(2),), (None,))
    with pytest.raises(dualgpu.DualgpuError, match="leading batch axis"):
        jvp_batch(identity, (np.ones(2),), (np.ones(2),))


def test_too_large_chunk_size_warns_with_the_measured_reason():
    with pytest.warns(dualgpu.errors.ChunkSizeWarning) as record:
        jacobian(identity, np.ones(80), chunk_size=64, progress=False)
    (warning,) = record
    message = str(warning.message)
    assert "chunk_size=64" in message and "measured" in message and "ns per pair" in message
    assert warning.filename == __file__  # points at the caller's line
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jacobian(identity, np.ones(40), chunk_size=32, progress=False)  # within the range
