"""Whole user workflows around unseen simulations (``kernels_workflows.py``), round 3.

For each simulation: the plain run equals the unported code (numba's CUDA simulator, the
kernels rebound to numba.cuda), and Jacobians w.r.t. states, scalar and array parameters agree
with central differences on the ``cudasim`` backend (and ``cpu`` for a subset: it compiles
each kernel), in float64 and float32. Then the host workflows users build on them: jacfwd
over several arguments with tuple outputs, array-and-scalar results, host losses and their
gradients, Hessians, jvp_batch, sparse detection through upwind branches and CSR graphs,
ensembles, a Gauss-Newton calibration, plots, chunk sizes that do not divide n, progress bars;
and the mistakes users make, each refused with what came and the fix, their data untouched.
"""
import numpy as np
import pytest

import dualgpu
import kernels_workflows as K
from dualgpu import DualgpuError
from dualgpu.testing import check_jacobian
from unported import run_unported

_RNG = np.random.default_rng(3)
X = np.linspace(0, 1, 10)
H0 = 1.0 + 0.2 * np.exp(-((X - 0.4) / 0.15) ** 2)
HU0 = 0.05 * np.sin(2 * np.pi * X)
TH0, OM = _RNG.uniform(-1, 1, 7), _RNG.normal(0, 0.3, 7)
TH32, OM32 = TH0.astype(np.float32), OM.astype(np.float32)
V0, W0, DRIVE = _RNG.normal(0, 1, 6), _RNG.normal(0, 0.3, 6), np.linspace(0.2, 0.8, 6)
MLV = np.linspace(-0.3, 0.2, 5).astype(np.float32)
MLW = np.linspace(0.0, 0.3, 5).astype(np.float32)
U_ROBIN = np.cos(np.linspace(0, 2, 9)) + 0.5
U_WAVE = np.exp(-((np.linspace(0, 1, 12) - 0.5) / 0.1) ** 2)
GRAPH = K.ring_graph(8)
S_G, I_G = np.full(8, 0.97), np.linspace(0.0, 0.06, 8)
NET = K.grid_net(3, 3)
POS_NET = np.stack(np.meshgrid(np.arange(3.0), np.arange(3.0)), -1).reshape(9, 2) * 1.05
POS_NET += 0.05 * _RNG.standard_normal(POS_NET.shape)
FIXED = np.zeros(9, np.int8)
FIXED[6:] = 1  # the top row is pinned
PX, PY = np.linspace(1.0, 1.5, 4), np.linspace(0.5, 0.8, 4)
PARAMS = np.array([1.1, 0.4, 0.3, 0.9])
NOISE = _RNG.standard_normal((6, 4, 2))
C_AD = _RNG.random((6, 7))
VX = np.sin(np.arange(42).reshape(6, 7) * 0.7)  # both signs: both upwind branches taken
VY = np.cos(np.arange(42).reshape(6, 7) * 0.5)
C_CH = 0.1 * np.sin(np.linspace(0, 2 * np.pi, 10, endpoint=False)) + 0.05 * _RNG.standard_normal(10)
U_B = np.sin(np.linspace(0.3, 2 * np.pi + 0.3, 10, endpoint=False)) + 0.3  # one clear maximum
U_F = (0.5 + 0.4 * np.tanh(np.linspace(-2, 2, 8))).astype(np.float32)


def _fhn(v, w, drive, a, b):
    return K.simulate_fhn(v, w, drive, a, b)


def _sir_graph(s, i, beta, gamma):
    return K.simulate_sir_graph(s, i, beta, gamma, GRAPH)


def _spring_net(pos, k, mass):
    return K.simulate_spring_net(pos, k, mass, NET, FIXED)


def _predator_prey(x, y, params, sigma):
    return K.simulate_predator_prey(x, y, params, sigma, NOISE)


def _advect_diffuse(c, diff):
    return K.simulate_advect_diffuse(c, VX, VY, diff)


# name: (simulation, arguments, run on cpu too)
SIMS = {
    "shallow_water": (K.simulate_shallow_water, (H0, HU0, 9.81), True),
    "kuramoto": (K.simulate_kuramoto, (TH0, OM, 1.5), True),
    "kuramoto_f32": (K.simulate_kuramoto_f32, (TH32, OM32, np.float32(1.5)), False),
    "fitzhugh_nagumo": (_fhn, (V0, W0, DRIVE, 0.7, 0.8), False),
    "morris_lecar_f32": (K.simulate_morris_lecar, (MLV, MLW, np.float32(1.2), np.float32(0.3)),
                         True),
    "heat_neumann_robin": (K.simulate_heat_robin, (U_ROBIN, 2.0, 0.3), True),
    "wave_absorbing": (K.simulate_wave_absorbing, (U_WAVE, 1.0, 0.05), False),
    "sir_graph_csr": (_sir_graph, (S_G, I_G, 0.9, 0.2), False),
    "spring_net_fixed": (_spring_net, (POS_NET, 20.0, 1.0), False),
    "predator_prey_em": (_predator_prey, (PX, PY, PARAMS, 0.1), False),
    "advect_diffuse_upwind": (_advect_diffuse, (C_AD, 0.3), True),
    "cahn_hilliard": (K.simulate_cahn_hilliard, (C_CH, 1.0, 0.5), False),
    "adaptive_burgers": (K.simulate_adaptive_burgers, (U_B, 1.2), False),
    "fisher_kpp_f32": (K.simulate_fisher_f32, (U_F, np.float32(0.2), np.float32(1.5)), False),
    "imex_host_solve": (K.simulate_imex, (U_F.astype(np.float64), 1.5, 0.4), True),
}
#: float32 simulations calling transcendental math: equal to the unported code to a few ulp
F32_LIBM = {"morris_lecar_f32"}
#: simulations returning a total made by cuda.atomic.add: the last bit depends on thread order
ATOMIC_TOTALS = {"heat_neumann_robin"}
CASES = [pytest.param(name, "cudasim", id=f"{name}-cudasim") for name in SIMS] + [
    pytest.param(name, "cpu", id=f"{name}-cpu") for name, s in SIMS.items() if s[2]]

# the Mur boundary kernel runs 2 threads on purpose: it must not warn about launch coverage
pytestmark = pytest.mark.filterwarnings("error::dualgpu.errors.LaunchCoverageWarning",
                                        "ignore::dualgpu.errors.ChunkSizeWarning")


def _tuple(x):
    return x if isinstance(x, tuple) else (x,)


def _float_argnums(args):
    return tuple(k for k, a in enumerate(args) if np.asarray(a).dtype.kind == "f")


@pytest.fixture(scope="module")
def unported_results():
    """Each simulation run by the unported code: numba's simulator, numba.cuda allocation."""
    return run_unported(K, SIMS)


@pytest.mark.parametrize("name, backend", CASES)
def test_plain_run_equals_unported(name, backend, unported_results):
    f, args, _ = SIMS[name]
    with dualgpu.using_backend(backend):
        got = _tuple(f(*args))
    assert len(got) == len(unported_results[name])
    for g, e in zip(got, unported_results[name]):
        assert type(g) is type(e) and np.asarray(g).dtype == np.asarray(e).dtype
        if name in F32_LIBM:  # numba's simulator calls double tanh/cosh/exp, compiled code tanhf
            np.testing.assert_allclose(g, e, rtol=4 * np.finfo(np.float32).eps, atol=1e-7)
        elif np.ndim(e) == 0 and name in ATOMIC_TOTALS:  # summed in thread order, as on a GPU
            np.testing.assert_allclose(g, e, rtol=1e-14)
        else:
            np.testing.assert_array_equal(g, e)


@pytest.mark.parametrize("name", sorted(F32_LIBM | {"kuramoto_f32", "fisher_kpp_f32"}))
def test_float32_runs_agree_bit_for_bit_between_backends(name):
    """Both dualgpu backends compute float32 math as compiled CUDA does (sinf, tanhf, ...)."""
    f, args, _ = SIMS[name]
    with dualgpu.using_backend("cpu"):
        on_cpu = _tuple(f(*args))
    with dualgpu.using_backend("cudasim"):
        on_sim = _tuple(f(*args))
    for a, b in zip(on_cpu, on_sim):
        assert a.dtype == np.float32
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name, backend", CASES)
def test_jacobian_matches_differences(name, backend):
    f, args, _ = SIMS[name]
    with dualgpu.using_backend(backend):
        check_jacobian(f, *args, argnums=_float_argnums(args), n_directions=2)


@pytest.mark.parametrize("name, f64", [("kuramoto_f32", "kuramoto")])
def test_float32_jacobian_is_float32_and_near_float64(name, f64):
    f, args, _ = SIMS[name]
    with dualgpu.using_backend("cudasim"):
        J32 = dualgpu.jacobian(f, *args, argnums=(0, 2))
        J64 = dualgpu.jacobian(lambda *a: SIMS[f64][0](*a)[0], *SIMS[f64][1], argnums=(0, 2))
    for a, b in zip(J32, J64):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=2e-3, atol=2e-4)


# --- host workflows --------------------------------------------------------------------------

def test_jacfwd_over_several_arguments_with_a_tuple_output():
    """jacfwd(f, argnums=(0, 2)) with keywords: JAX nesting, outputs x arguments."""
    with dualgpu.using_backend("cudasim"):
        (dh_dh0, dh_dg), (dhu_dh0, dhu_dg) = dualgpu.jacfwd(
            K.simulate_shallow_water, argnums=(0, 2))(H0, HU0, 9.81, n_steps=3)
        eps = 1e-6
        plus = K.simulate_shallow_water(H0, HU0, 9.81 + eps, n_steps=3)
        minus = K.simulate_shallow_water(H0, HU0, 9.81 - eps, n_steps=3)
    assert dh_dh0.shape == dhu_dh0.shape == (10, 10) and dh_dg.shape == dhu_dg.shape == (10,)
    np.testing.assert_allclose(dhu_dg, (plus[1] - minus[1]) / (2 * eps), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(dh_dg, (plus[0] - minus[0]) / (2 * eps), rtol=1e-6, atol=1e-9)
    assert np.abs(dhu_dg).max() > 1e-3  # gravity moves the momentum


def test_array_and_scalar_outputs():
    """(u, total heat) where the total is an atomic sum: dE/dp = dx * sum(du/dp)."""
    with dualgpu.using_backend("cudasim"):
        (du_dh, du_dt), (de_dh, de_dt) = dualgpu.jacobian(K.simulate_heat_robin, U_ROBIN, 2.0,
                                                         0.3, argnums=(1, 2))
    assert du_dh.shape == (9,) and np.shape(de_dh) == ()
    np.testing.assert_allclose([de_dh, de_dt], [0.1 * du_dh.sum(), 0.1 * du_dt.sum()],
                               rtol=1e-12)
    assert du_dt[-1] > 0 and de_dt > 0  # a warmer outside warms the rod through the Robin end


TARGET = np.linspace(0.2, 0.8, 9)


def _misfit(h_coef, t_inf):
    u, energy = K.simulate_heat_robin(U_ROBIN, h_coef, t_inf)
    return (np.sum((u - TARGET) ** 2) + 0.1 * np.linalg.norm(u[1:] - u[:-1])
            + np.mean(u) * energy)


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
def test_gradient_of_a_host_loss(backend):
    with dualgpu.using_backend(backend):
        grad = dualgpu.jacobian(_misfit, 2.0, 0.3, argnums=(0, 1))
        eps = 1e-5  # the atomic total's last bit varies with thread order
        fd = [(_misfit(2.0 + eps, 0.3) - _misfit(2.0 - eps, 0.3)) / (2 * eps),
              (_misfit(2.0, 0.3 + eps) - _misfit(2.0, 0.3 - eps)) / (2 * eps)]
    np.testing.assert_allclose(np.array(grad, dtype=float), fd, rtol=1e-6, atol=1e-9)
    assert abs(grad[1]) > 0.1


def _loss_by_elements(p):
    """The loss written with u[i] and .mean(): the forms nested duals support on the host."""
    u, energy = K.simulate_heat_robin(U_ROBIN, p[0], p[1])
    return sum((u[i] - TARGET[i]) ** 2 for i in range(u.size)) + u.mean() * energy


def test_hessian_and_hvp_of_a_small_loss():
    p, v = np.array([2.0, 0.3]), np.array([1.0, -0.5])
    with dualgpu.using_backend("cudasim"):
        H = dualgpu.hessian(_loss_by_elements, p)
        hv = dualgpu.hvp(_loss_by_elements, (p,), (v,))
        eps = 1e-5
        fd = np.stack([(dualgpu.jacobian(_loss_by_elements, p + eps * e)
                        - dualgpu.jacobian(_loss_by_elements, p - eps * e)) / (2 * eps)
                       for e in np.eye(2)], 1)
    np.testing.assert_allclose(H, fd, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(H, H.T, rtol=1e-12)
    np.testing.assert_allclose(hv, H @ v, rtol=1e-12)


def test_hessian_of_a_numpy_loss_says_how_to_write_it():
    """Host numpy on nested duals is refused (first order only), with the form that works."""
    with dualgpu.using_backend("cudasim"), pytest.raises(DualgpuError) as info:
        dualgpu.hessian(lambda p: _misfit(p[0], p[1]), np.array([2.0, 0.3]))
    message = str(info.value)
    assert "numpy.subtract" in message and "nested derivative" in message
    assert "elements (u[i])" in message


def test_jvp_batch_of_kuramoto_state_and_order_parameter():
    V = _RNG.standard_normal((5, 7))
    with dualgpu.using_backend("cudasim"):
        (theta, r), (t_theta, t_r) = dualgpu.jvp_batch(K.simulate_kuramoto, (TH0, OM, 1.5),
                                                       (V, None, None), chunk_size=2)
        J_theta, J_r = dualgpu.jacobian(K.simulate_kuramoto, TH0, OM, 1.5)
    assert t_theta.shape == (5, 7) and t_r.shape == (5,) and np.shape(r) == ()
    np.testing.assert_allclose(t_theta, V @ J_theta.T, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(t_r, V @ J_r, rtol=1e-12, atol=1e-14)


def test_sparse_detection_through_upwind_branches():
    f = lambda c: _advect_diffuse(c, 0.3)  # noqa: E731
    with dualgpu.using_backend("cudasim"):  # detection itself runs on the cpu backend
        J = dualgpu.jacobian(f, C_AD, sparsity="detect", validate=True)
        dense = dualgpu.jacobian(f, C_AD)
    np.testing.assert_array_equal(dualgpu.sparse.to_dense(J), dense)
    assert J.coloring.n_colors < C_AD.size / 1.5
    # upwinding: one step reaches only the upwind neighbour and the diffusion stencil
    assert J.nnz < C_AD.size * 25


def test_sparse_detection_through_a_csr_graph():
    """int32 index arrays steer the reads: the pattern is the graph plus the diagonal."""
    f = lambda i: K.simulate_sir_graph(S_G, i, 0.9, 0.2, GRAPH, n_steps=1)[1]  # noqa: E731
    with dualgpu.using_backend("cudasim"):
        J = dualgpu.jacobian(f, I_G, sparsity="detect")
        dense = dualgpu.jacobian(f, I_G)
    indptr, indices, _ = GRAPH
    expected = np.eye(8, dtype=bool)
    for v in range(8):
        expected[v, indices[indptr[v]:indptr[v + 1]]] = True
    np.testing.assert_array_equal(J.toarray() != 0, expected)
    np.testing.assert_allclose(dualgpu.sparse.to_dense(J), dense, rtol=1e-14, atol=1e-16)


def test_ensemble_jacobian_of_fitzhugh_nagumo_members():
    f = lambda v, w, a, b: np.stack(K.simulate_fhn(v, w, DRIVE, a, b))  # noqa: E731
    with dualgpu.using_backend("cudasim"):
        E = dualgpu.ensemble_jacobian(f, V0, W0, 0.7, 0.8, argnums=(0, 1, 2, 3),
                                      batch_axes=(0, 0, None, None), out_axis=1, validate=True)
        full = dualgpu.jacobian(f, V0, W0, 0.7, 0.8, argnums=(0, 1, 2, 3))
    assert E.shape == (6, 2, 4)
    for m in range(6):  # member m: (v, w) w.r.t. its own v0, w0 and the shared a, b
        expected = [[full[0][o, m, m], full[1][o, m, m], full[2][o, m], full[3][o, m]]
                    for o in range(2)]
        np.testing.assert_allclose(E[m], expected, rtol=1e-12, atol=1e-15)


def test_structure_checks_through_np_stack_of_the_outputs():
    """validate='detect' and sparsity='detect' trace f's np.stack of two result arrays."""
    f = lambda v, w: np.stack(K.simulate_fhn(v, w, DRIVE, 0.7, 0.8))  # noqa: E731
    with dualgpu.using_backend("cudasim"):
        E = dualgpu.ensemble_jacobian(f, V0, W0, argnums=(0, 1), batch_axes=0, out_axis=1,
                                      validate="detect")
        J = dualgpu.jacobian(lambda v: f(v, W0), V0, sparsity="detect", validate=True)
        dense = dualgpu.jacobian(lambda v: f(v, W0), V0)
    np.testing.assert_array_equal(E[:, :, 0], np.stack([np.diagonal(dense[0]),
                                                       np.diagonal(dense[1])], 1))
    np.testing.assert_array_equal(dualgpu.sparse.to_dense(J), dense)
    assert J.coloring.n_colors == 1  # members are independent: one color for all six


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
def test_gauss_newton_calibration_of_the_robin_boundary(backend):
    """Recover (h, T_inf) from synthetic data; the Jacobian post-processed with numpy."""
    truth = np.array([3.0, 0.6])
    model = lambda h, t: K.simulate_heat_robin(U_ROBIN, h, t)[0]  # noqa: E731
    with dualgpu.using_backend(backend):
        data = model(*truth)
        p = np.array([1.0, 0.0])
        for _ in range(6):
            residual = model(*p) - data
            J = np.stack(dualgpu.jacobian(model, p[0], p[1], argnums=(0, 1)), axis=1)
            JtJ = np.einsum("ki,kj->ij", J, J)
            p = p - np.linalg.solve(JtJ, J.T @ residual)
            p = np.where(p[0] > 0, p, [0.5, p[1]])  # keep the transfer coefficient positive
    np.testing.assert_allclose(p, truth, rtol=1e-8)


def test_plots_of_a_workflow(tmp_path):
    import dualgpu.plot as plot

    with dualgpu.using_backend("cudasim"):
        (J_c, J_d) = dualgpu.jacobian(_advect_diffuse, C_AD, 0.3, argnums=(0, 1))
        grads = dualgpu.jacobian(_misfit, 2.0, 0.3, argnums=(0, 1))
    cell = (3, 4)
    paths = [
        plot.save(plot.jacobian_heatmap(J_c.reshape(C_AD.size, C_AD.size),
                                        title="d c(T) / d c(0)"), tmp_path / "jacobian"),
        plot.save(plot.sensitivity_field(J_c[cell], title="cell (3, 4) depends on"),
                  tmp_path / "field.png"),
        plot.save(plot.sensitivity_field(J_d, title="d c / d D"), tmp_path / "diffusivity"),
        plot.save(plot.parameter_ranking(["h", "T_inf"], np.array(grads, dtype=float)),
                  tmp_path / "ranking"),
    ]
    for path in paths:
        assert path.exists() and path.stat().st_size > 1000
    assert {p.name for p in tmp_path.iterdir()} == {"jacobian.png", "field.png",
                                                    "diffusivity.png", "ranking.png"}


@pytest.mark.parametrize("chunk_size", [3, 4, 7])
def test_chunk_sizes_that_do_not_divide_n_and_a_progress_bar(chunk_size, capsys):
    with dualgpu.using_backend("cudasim"):
        J = dualgpu.jacobian(K.simulate_shallow_water, H0, HU0, 9.81, argnums=(0, 1, 2),
                             chunk_size=chunk_size, progress=True)
        reference = dualgpu.jacobian(K.simulate_shallow_water, H0, HU0, 9.81,
                                     argnums=(0, 1, 2), progress=False)
    for row, row_ref in zip(J, reference):
        for a, b in zip(row, row_ref):
            np.testing.assert_array_equal(a, b)
    captured = capsys.readouterr()
    assert "jacobian" in captured.err and captured.out == ""


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
def test_a_result_left_on_the_device_is_differentiated(backend):
    """Forgetting copy_to_host: f returns the device array itself; the driver copies it."""
    def no_copy(theta):
        d_t, d_o = K.cuda.to_device(theta), K.cuda.to_device(OM)
        d_n = K.cuda.device_array_like(d_t)
        K.kuramoto_step[1, 32](d_t, d_n, d_o, 1.5, 0.1)
        return d_n

    def with_copy(theta):
        return no_copy(theta).copy_to_host()

    with dualgpu.using_backend(backend):
        np.testing.assert_array_equal(dualgpu.jacobian(no_copy, TH0),
                                      dualgpu.jacobian(with_copy, TH0))
        check_jacobian(no_copy, TH0, n_directions=1)


# --- what users get wrong --------------------------------------------------------------------

@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
def test_a_list_passed_to_a_kernel_names_the_argument(backend):
    theta = list(TH0)
    with dualgpu.using_backend(backend), pytest.raises(DualgpuError) as info:
        K.kuramoto_step[1, 32](theta, np.zeros(7), OM, 1.5, 0.1)
    message = str(info.value)
    assert "kernel kuramoto_step: argument theta is a Python list (length 7)" in message
    assert "np.asarray(theta)" in message
    assert theta == list(TH0)


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
def test_a_float_where_an_array_is_expected_under_the_driver(backend):
    """omega=0.3 instead of an array: to_device(Dual) says what came and the fix."""
    with dualgpu.using_backend(backend), pytest.raises(DualgpuError) as info:
        dualgpu.jacobian(K.simulate_kuramoto, TH0, 0.3, 1.5, argnums=1)
    message = str(info.value)
    assert "cuda.to_device got a Dual (0.3)" in message and "0-d" in message
    assert "np.full(n, x)" in message


def test_to_device_of_a_plain_scalar_outside_the_driver_is_numbas_0d_array():
    with dualgpu.using_backend("cudasim"):
        assert dualgpu.cuda.to_device(0.5).copy_to_host().shape == ()


def test_sparse_detection_of_host_code_reading_an_element():
    """simulate_heat_robin reads d_e.copy_to_host()[0]: the tracer cannot follow that."""
    f = lambda u: K.simulate_heat_robin(u, 2.0, 0.3)[0]  # noqa: E731
    with dualgpu.using_backend("cudasim"), pytest.raises(DualgpuError) as info:
        dualgpu.jacobian(f, U_ROBIN, sparsity="detect")
    message = str(info.value)
    assert "host code read the element [0]" in message and "sparsity='detect'" in message
    assert "u[0:1]" in message and "banded_pattern" in message
    assert "use the cpu backend" not in message  # detection runs there already


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
def test_blocks_from_true_division_are_refused_like_numba_cuda(backend):
    """bpg = n / TPB is a float; a launch at (1, 32) before must not make (1.0, 32) run."""
    with dualgpu.using_backend(backend):
        K.simulate_kuramoto(TH0, OM, 1.5, n_steps=1)  # launches kuramoto_step[1, 32]
        with pytest.raises(DualgpuError, match=r"griddim must be an int.*got 1\.0, a float"):
            K.kuramoto_step[32 / 32, 32](TH0, np.zeros(7), OM, 1.5, 0.1)


def test_kernel_called_without_a_launch_configuration():
    with dualgpu.using_backend("cudasim"), pytest.raises(DualgpuError,
                                                         match=r"kuramoto_step\[blocks, thr"):
        dualgpu.jacobian(lambda t: K.kuramoto_step(t, np.zeros(7), OM, 1.5, 0.1), TH0)


def test_f_mutating_its_inputs_leaves_the_callers_arrays_alone():
    def mutating(u0, h_coef):
        u0 *= 2.0
        u0[0] = 0.0
        return K.simulate_heat_robin(u0, h_coef, 0.3)[0]

    u = U_ROBIN.copy()
    with dualgpu.using_backend("cudasim"):
        J_u, J_h = dualgpu.jacobian(mutating, u, 2.0, argnums=(0, 1))
        check_jacobian(mutating, u, 2.0, argnums=(0, 1), n_directions=2)
        J_plain = dualgpu.jacobian(lambda v: K.simulate_heat_robin(v, 2.0, 0.3)[0],
                                   2.0 * U_ROBIN)
    np.testing.assert_array_equal(u, U_ROBIN)
    assert np.all(J_u[:, 0] == 0.0)  # the overwritten cell has no influence
    np.testing.assert_allclose(J_u[:, 1:], 2.0 * J_plain[:, 1:], rtol=1e-13, atol=1e-15)


def test_an_array_shorter_than_the_kernel_expects_is_an_index_error_on_cudasim():
    """hu0 of 5 cells for a 10-cell depth: numba's simulator raises, so does dualgpu's (the
    cpu backend, like a GPU, checks no indices unless NUMBA_BOUNDSCHECK=1: see the README)."""
    with dualgpu.using_backend("cudasim"), pytest.raises(IndexError, match="out of bounds"):
        dualgpu.jacobian(K.simulate_shallow_water, H0, HU0[:5], 9.81)


def test_shape_and_dtype_mistakes_in_the_driver():
    with dualgpu.using_backend("cudasim"):
        with pytest.raises(DualgpuError, match=r"tangent 0 has shape \(6,\); expected \(7,\)"):
            dualgpu.jvp(K.simulate_kuramoto, (TH0, OM, 1.5), (np.ones(6), None, None))
        with pytest.raises(DualgpuError, match=r"expected \(B,\) \+ \(7,\)"):
            dualgpu.jvp_batch(K.simulate_kuramoto, (TH0, OM, 1.5), (np.ones(7), None, None))
        with pytest.raises(DualgpuError, match=r"argument 0 is an array of dtype int64.*"
                                               r"np\.asarray\(x, dtype=np\.float64\)"):
            dualgpu.jacobian(K.simulate_kuramoto, np.arange(7), OM, 1.5)
        with pytest.raises(DualgpuError, match=r"argument 0 is list.*remove it from argnums"):
            dualgpu.jacobian(K.simulate_kuramoto, list(TH0), OM, 1.5)
        # f's arguments as one tuple (numpy's own error on the ragged tuple, before)
        with pytest.raises(DualgpuError, match=r"argument 0 is a tuple of 3 holding arrays.*"
                                               r"unpack the tuple \(f, \*args\)"):
            dualgpu.jacobian(K.simulate_kuramoto, (TH0, OM, 1.5))
        with pytest.raises(DualgpuError, match=r"argnums=3 points at argument 3"):
            dualgpu.jacobian(K.simulate_kuramoto, TH0, OM, 1.5, argnums=3)



# --- the dual kernels compile for the GPU ----------------------------------------------------

@pytest.mark.parametrize("name", ["sir_graph_csr", "morris_lecar_f32"])
def test_dual_kernels_compile_to_ptx(offline_ptx, name):
    """CSR reads through int32 index arrays, and float32 duals that stay float32 (no .f64
    instruction in the PTX)."""
    import numba.cuda

    from dualgpu.backends.gpu import kernel as gpu
    from porting.test_whole_simulations import _dual_launch_types

    f, args, _ = SIMS[name]
    for py_func, argtypes in _dual_launch_types(f, args).items():
        ptx, _ = numba.cuda.compile_ptx(gpu.prepare_function(py_func, 2), argtypes,
                                        cc=offline_ptx)
        assert ".entry" in ptx
        if name.endswith("_f32"):
            assert ".f64" not in ptx
