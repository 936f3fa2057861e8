"""dualgpu.interop.to_jax: JAX transformations of wrapped simulations agree with dualgpu's
own derivatives and with central differences, in float32 and float64, on cpu and cudasim;
bad input gets errors that name the cause."""
import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import dualgpu  # noqa: E402
from dualgpu import DualgpuError, cuda  # noqa: E402
from dualgpu.interop import to_jax  # noqa: E402
from dualgpu.interop.jax import JaxBridgeCostWarning  # noqa: E402
from simulations import heat1d  # noqa: E402

pytestmark = pytest.mark.peers

N, STEPS = 10, 12
DX = 1.0 / (N - 1)
DT = 0.4 * DX ** 2
U0 = heat1d.default_initial_state(N)
P = (1.0, 0.5, 0.25)  # alpha, left, right


def heat(alpha, left, right, n_steps=STEPS):
    """Final temperatures as a function of the three parameters."""
    return heat1d.simulate(U0, n_steps=n_steps, alpha=alpha, dt=DT, dx=DX, left=left,
                           right=right)


def heat_field(u0, alpha):
    """Final temperatures as a function of the initial field and the diffusivity."""
    return heat1d.simulate(u0, n_steps=STEPS, alpha=alpha, dt=DT, dx=DX, left=0.0, right=0.0)


def loss_np(alpha, left, right):
    u = heat(alpha, left, right)
    return float(np.sum(u * u))


def central(fun, x, h):
    x = np.array(x, dtype=np.float64)
    g = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e.flat[i] = h
        g.flat[i] = (fun(x + e) - fun(x - e)) / (2 * h)
    return g


@pytest.fixture(params=[False, True], ids=["float32", "float64"])
def x64(request):
    """JAX's x64 flag for one test, restored afterwards (it is global)."""
    with jax.enable_x64(request.param):
        yield request.param


def tol(x64):
    return dict(rtol=1e-10, atol=1e-12) if x64 else dict(rtol=2e-5, atol=2e-6)


def expected_dtype(x64):
    return jnp.float64 if x64 else jnp.float32


@pytest.fixture(autouse=True)
def cpu_backend():
    with dualgpu.using_backend("cpu"):
        yield


# ---------------------------------------------------------------- first derivatives

def test_grad_of_scalar_loss_matches_jacobian_and_differences(x64):
    g = to_jax(heat)

    def loss(alpha, left, right):
        u = g(alpha, left, right)
        return jnp.sum(u * u)

    grads = jax.grad(loss, argnums=(0, 1, 2))(*map(jnp.asarray, P))
    assert all(v.dtype == expected_dtype(x64) for v in grads)
    u = heat(*P)
    J = dualgpu.jacobian(heat, *P, argnums=(0, 1, 2))
    reference = np.array([2 * u @ block for block in J])
    np.testing.assert_allclose(np.array(grads, dtype=np.float64), reference, **tol(x64))
    fd = central(lambda p: loss_np(*p), P, 1e-6)
    np.testing.assert_allclose(reference, fd, rtol=1e-6, atol=1e-8)
    # jit of the gradient: the same numbers
    jitted = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(*map(jnp.asarray, P))
    np.testing.assert_allclose(np.array(jitted), np.array(grads), rtol=1e-6)


def test_jacfwd_jacrev_jvp_vjp_of_field_input(x64):
    g = to_jax(heat_field)
    u0 = jnp.asarray(U0)
    alpha = jnp.asarray(1.0)
    J, Ja = dualgpu.jacobian(heat_field, U0, 1.0, argnums=(0, 1))
    fwd = jax.jacfwd(g, argnums=(0, 1))(u0, alpha)
    rev = jax.jacrev(g, argnums=(0, 1))(u0, alpha)
    for got in (fwd, rev):
        assert got[0].shape == (N, N) and got[0].dtype == expected_dtype(x64)
        np.testing.assert_allclose(np.asarray(got[0], np.float64), J, **tol(x64))
        np.testing.assert_allclose(np.asarray(got[1], np.float64), Ja, **tol(x64))
    fd = central(lambda a: heat_field(U0, float(a[0]))[3], [1.0], 1e-6)
    np.testing.assert_allclose(Ja[3], fd[0], rtol=1e-6, atol=1e-9)
    v = np.linspace(-1.0, 1.0, N)
    out, tangent = jax.jvp(lambda x: g(x, alpha), (u0,), (jnp.asarray(v),))
    ref_out, ref_tangent = dualgpu.jvp(lambda x: heat_field(x, 1.0), (U0,), (v,))
    np.testing.assert_allclose(np.asarray(out, np.float64), ref_out, **tol(x64))
    np.testing.assert_allclose(np.asarray(tangent, np.float64), ref_tangent, **tol(x64))
    _, pullback = jax.vjp(lambda x: g(x, alpha), u0)
    (cotangent,) = pullback(jnp.asarray(v))
    np.testing.assert_allclose(np.asarray(cotangent, np.float64), v @ J, **tol(x64))


def test_vmap_runs_a_batch_of_calls():
    g = to_jax(heat)
    alphas = jnp.array([0.8, 0.9, 1.0])
    g(alphas[0], 0.5, 0.25)  # outside vmap: finds the output shapes (documented)
    batched = jax.vmap(g, in_axes=(0, None, None))(alphas, 0.5, 0.25)
    for k, a in enumerate(np.asarray(alphas)):
        np.testing.assert_allclose(np.asarray(batched[k]), heat(float(a), 0.5, 0.25),
                                   rtol=1e-6)
    # a gradient per batch member
    grads = jax.vmap(jax.grad(lambda a: jnp.sum(g(a, 0.5, 0.25))))(alphas)
    for k, a in enumerate(np.asarray(alphas)):
        ref = dualgpu.jacobian(heat, float(a), 0.5, 0.25).sum()
        np.testing.assert_allclose(float(grads[k]), ref, rtol=2e-5)


def test_pytrees_and_static_keyword_arguments(x64):
    def sim(params, n_steps=STEPS):
        u = heat(params["alpha"], *params["ends"], n_steps=n_steps)
        return {"u": u, "mean": u.mean()}

    g = to_jax(sim)
    params = {"alpha": jnp.asarray(1.0), "ends": (jnp.asarray(0.5), jnp.asarray(0.25))}
    out = g(params, n_steps=STEPS - 2)
    assert set(out) == {"u", "mean"} and out["u"].dtype == expected_dtype(x64)
    np.testing.assert_allclose(np.asarray(out["u"], np.float64), heat(*P, n_steps=STEPS - 2),
                               **tol(x64))
    grads = jax.grad(lambda p: g(p, n_steps=STEPS - 2)["mean"])(params)
    J = dualgpu.jacobian(lambda a, l, r: heat(a, l, r, n_steps=STEPS - 2).mean(), *P,
                         argnums=(0, 1, 2))
    got = [grads["alpha"], grads["ends"][0], grads["ends"][1]]
    np.testing.assert_allclose(np.array(got, np.float64), np.array(J), **tol(x64))


def test_float64_simulation_gives_jax_dtypes():
    seen = []

    def sim(x):
        seen.append(x.dtype)
        return heat_field(x, 1.0)

    with jax.enable_x64(False):
        g = to_jax(sim, compute_dtype=np.float64)
        out = g(jnp.asarray(U0, jnp.float32))
        assert out.dtype == jnp.float32 and seen[-1] == np.float64
        J = jax.jacrev(g)(jnp.asarray(U0, jnp.float32))
        assert J.dtype == jnp.float32
    with jax.enable_x64(True):
        g = to_jax(sim)
        out = g(jnp.asarray(U0))
        assert out.dtype == jnp.float64 and seen[-1] == np.float64
    np.testing.assert_allclose(np.asarray(J, np.float64),
                               dualgpu.jacobian(heat_field, U0, 1.0), rtol=1e-5, atol=1e-7)


def test_float32_kernels_inside():
    """Inputs stay float32 with x64 off: the kernels themselves run in float32."""
    with jax.enable_x64(False):
        g = to_jax(heat_field)
        u0 = jnp.asarray(U0, jnp.float32)
        J = jax.jacrev(g)(u0, jnp.float32(1.0))
    ref = dualgpu.jacobian(heat_field, U0.astype(np.float32), np.float32(1.0))
    assert ref.dtype == np.float32
    np.testing.assert_allclose(np.asarray(J), ref, rtol=1e-6, atol=1e-7)


def test_sparse_jacobian_through_jacrev():
    g = to_jax(heat_field, sparsity=dualgpu.sparse.banded_pattern(N, STEPS), argnums=0)
    with jax.enable_x64(True):
        J = jax.jacrev(lambda x: g(x, 1.0))(jnp.asarray(U0))
        grad = jax.grad(lambda x: jnp.sum(g(x, 1.0) ** 2))(jnp.asarray(U0))
    ref = dualgpu.jacobian(heat_field, U0, 1.0)
    np.testing.assert_allclose(np.asarray(J), ref, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(np.asarray(grad), 2 * heat_field(U0, 1.0) @ ref, rtol=1e-12)


def test_detected_sparsity():
    g = to_jax(heat_field, sparsity="detect", argnums=0)
    with jax.enable_x64(True):
        J = jax.jacrev(lambda x: g(x, 1.0))(jnp.asarray(U0))
    (coloring,) = g.colorings.values()
    assert coloring.n_colors == min(N, 2 * STEPS + 1)  # the band of STEPS stencil steps
    np.testing.assert_allclose(np.asarray(J), dualgpu.jacobian(heat_field, U0, 1.0),
                               rtol=1e-12, atol=1e-14)
    with pytest.raises(DualgpuError, match="sparsity='detect' needs argnums"):
        to_jax(heat_field, sparsity="detect")


# ---------------------------------------------------------------- second derivatives

def test_hessian_and_jvp_of_grad(x64):
    g = to_jax(heat)

    def loss(alpha, left):
        u = g(alpha, left, 0.25)
        return jnp.sum(u * u)

    H = jax.hessian(loss, argnums=(0, 1))(jnp.asarray(1.0), jnp.asarray(0.5))
    H = np.array([[H[0][0], H[0][1]], [H[1][0], H[1][1]]], dtype=np.float64)

    def loss_dual(p):  # host objective from elements: nested duals handle it
        u = heat(p[0], p[1], 0.25)
        return sum(u[i] * u[i] for i in range(N))

    ref = dualgpu.hessian(loss_dual, np.array([1.0, 0.5]))
    np.testing.assert_allclose(H, ref, rtol=1e-9 if x64 else 1e-4, atol=1e-9 if x64 else 1e-5)
    grad = lambda p: np.array(dualgpu.jacobian(  # noqa: E731
        lambda a, l: (lambda u: (u * u).sum())(heat(a, l, 0.25)), *p, argnums=(0, 1)))
    fd = np.stack([central(lambda p: grad(p)[k], [1.0, 0.5], 1e-5) for k in range(2)])
    np.testing.assert_allclose(ref, fd, rtol=1e-6, atol=1e-7)
    # forward over reverse: jvp of grad is H v
    v = (jnp.asarray(1.0), jnp.asarray(-2.0))
    _, hv = jax.jvp(jax.grad(loss, argnums=(0, 1)), (jnp.asarray(1.0), jnp.asarray(0.5)), v)
    np.testing.assert_allclose(np.array(hv, np.float64), ref @ np.array([1.0, -2.0]),
                               rtol=1e-9 if x64 else 1e-4, atol=1e-5)


def test_third_order_is_refused():
    g = to_jax(heat)
    third = jax.grad(jax.grad(jax.grad(lambda a: jnp.sum(g(a, 0.5, 0.25)))))
    with pytest.raises(DualgpuError, match="order 3 are not available"):
        third(jnp.asarray(1.0))


# ---------------------------------------------------------------- cudasim

def test_cudasim_grad_and_jacfwd(x64):
    n, steps = 4, 3
    u0 = heat1d.default_initial_state(n)

    def small(alpha, left):
        return heat1d.simulate(u0, n_steps=steps, alpha=alpha, dt=0.04, dx=1.0 / 3, left=left,
                               right=0.0, threads_per_block=4)

    with dualgpu.using_backend("cudasim"):
        g = to_jax(small)
        grads = jax.grad(lambda a, l: jnp.sum(g(a, l) ** 2), argnums=(0, 1))(1.0, 0.5)
        J = jax.jacfwd(g)(1.0, 0.5)
        ref = dualgpu.jacobian(small, 1.0, 0.5, argnums=(0, 1))
        u = small(1.0, 0.5)
    assert J.dtype == expected_dtype(x64)
    np.testing.assert_allclose(np.asarray(J, np.float64), ref[0], **tol(x64))
    np.testing.assert_allclose(np.array(grads, np.float64), [2 * u @ ref[0], 2 * u @ ref[1]],
                               **tol(x64))
    fd = central(lambda p: float(np.sum(small(*p) ** 2)), [1.0, 0.5], 1e-6)
    np.testing.assert_allclose(np.array(grads, np.float64), fd, rtol=1e-6 if x64 else 1e-5)


# ---------------------------------------------------------------- cost guard

def test_cost_guard_refuses_with_the_estimate():
    g = to_jax(heat_field, max_lanes=N - 1)
    with pytest.raises(DualgpuError, match=rf"needs {N} tangent lanes.*max_lanes={N - 1}"):
        jax.grad(lambda x: jnp.sum(g(x, 1.0)))(jnp.asarray(U0))
    # differentiating only alpha stays cheap
    jax.grad(lambda a: jnp.sum(g(jnp.asarray(U0), a)))(1.0)


def test_cost_guard_warns():
    g = to_jax(heat_field, warn_lanes=4)
    with pytest.warns(JaxBridgeCostWarning, match=f"{N} tangent lanes"):
        jax.grad(lambda x: jnp.sum(g(x, 1.0)))(jnp.asarray(U0))


# ---------------------------------------------------------------- bad input

def test_output_shape_changing_between_calls():
    state = {"shrink": False}

    def unstable(x):
        u = heat_field(x, 1.0)
        return u[:-1] if state["shrink"] else u

    g = to_jax(unstable)
    g(jnp.asarray(U0))  # the first call finds the shape
    state["shrink"] = True
    with pytest.raises(Exception, match=r"has shape \(9,\) in this call; the wrapper was set "
                                        r"up for \(10,\)"):
        jax.block_until_ready(g(jnp.asarray(U0)))
    with pytest.raises(Exception, match=r"derivative block 0 of the output has shape"):
        jax.grad(lambda x: jnp.sum(g(x)))(jnp.asarray(U0))


def test_non_float_input_marked_differentiable():
    g = to_jax(lambda u0, n: heat_field(u0, 1.0), argnums=(0, 1))
    with pytest.raises(DualgpuError, match="argument 1 is marked differentiable.*int32"):
        g(jnp.asarray(U0), jnp.int32(3))


def test_derivative_outside_argnums_is_refused():
    g = to_jax(heat_field, argnums=0)
    with pytest.raises(DualgpuError, match="argument 1 was asked, but argnums"):
        jax.grad(lambda a: jnp.sum(g(jnp.asarray(U0), a)))(1.0)


def test_tracer_leaking_into_the_simulation():
    def loss_closure(alpha):
        g = to_jax(lambda u0: heat_field(u0, alpha))  # closes over a traced value
        return jnp.sum(g(jnp.asarray(U0)))

    with pytest.raises(DualgpuError, match="JAX tracer reached the simulation.*closes over"):
        jax.grad(loss_closure)(1.0)

    with pytest.raises(DualgpuError, match="JAX tracer reached.*keyword argument"):
        jax.grad(lambda a: jnp.sum(to_jax(lambda u0, alpha: heat_field(u0, alpha))(
            jnp.asarray(U0), alpha=a)))(1.0)

    hidden = {}

    def sneaky(u0):  # a tracer hidden where the closure scan cannot see it
        return heat_field(u0, hidden["alpha"])

    gs = to_jax(sneaky)

    def loss(a):
        hidden["alpha"] = a
        return jnp.sum(gs(jnp.asarray(U0)))

    with pytest.raises(DualgpuError, match="JAX tracer reached the simulation"):
        jax.grad(loss)(1.0)


def test_backend_error_inside_the_callback():
    def broken(x):
        cuda.to_device(x)
        raise RuntimeError("CUDA_ERROR_LAUNCH_FAILED (simulated)")

    g = to_jax(broken, result_shape_dtypes=jax.ShapeDtypeStruct((N,), jnp.float32))
    with pytest.raises(DualgpuError, match="simulation raised RuntimeError: CUDA_ERROR_LAUNCH"):
        g(jnp.asarray(U0, jnp.float32))
    with pytest.raises(Exception, match="simulation raised RuntimeError: CUDA_ERROR_LAUNCH"):
        jax.block_until_ready(jax.jit(g)(jnp.asarray(U0, jnp.float32)))


def test_unknown_shapes_under_jit_name_the_fix():
    g = to_jax(heat_field)
    with pytest.raises(DualgpuError, match="result_shape_dtypes"):
        jax.jit(g)(jnp.asarray(U0), 1.0)
    given = to_jax(heat_field, result_shape_dtypes=jax.ShapeDtypeStruct((N,), jnp.float32))
    out = jax.jit(given)(jnp.asarray(U0), 1.0)
    np.testing.assert_allclose(np.asarray(out), heat_field(U0, 1.0), rtol=1e-6)


def test_concrete_jax_arrays_as_keyword_arguments():
    g = to_jax(lambda alpha, u0: heat_field(u0, alpha))
    with jax.enable_x64(True):
        grad = jax.grad(lambda a: jnp.sum(g(a, u0=jnp.asarray(U0))))(1.0)
    np.testing.assert_allclose(float(grad), dualgpu.jacobian(
        lambda a: heat_field(U0, a), 1.0).sum(), rtol=1e-12)


def test_caller_inputs_are_not_mutated():
    def writes(x, work):
        work[:] = 7.0  # a keyword array written in place
        return heat_field(x, 1.0)

    work = np.zeros(3)
    x = np.array(U0)
    g = to_jax(writes)
    jax.grad(lambda v: jnp.sum(g(v, work=work)))(jnp.asarray(x))
    assert not work.any() and np.array_equal(x, U0)


def test_import_dualgpu_does_not_import_jax():
    """JAX is imported lazily: no module-level import of it in the package or the bridge."""
    import ast
    from pathlib import Path

    import dualgpu.interop

    package = Path(dualgpu.__file__).parent
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in tree.body:  # module level only; imports inside functions are lazy
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level
                     else [])
            assert not any(n == "jax" or n.startswith("jax.") for n in names), (
                f"{path.relative_to(package)} imports JAX at module level")


# ---------------------------------------------------------------- reuse at another input
@cuda.jit
def _upwind(u, out, c):
    i = cuda.grid(1)
    n = u.shape[0]
    if i < n:
        if u[i] > 0:  # a branch on the state: flux from the left
            out[i] = u[i] - c * u[i] * (u[i] - u[(i - 1) % n])
        else:  # flux from the right
            out[i] = u[i] - c * u[i] * (u[(i + 1) % n] - u[i])


def upwind(u):
    d_u = cuda.to_device(u)
    out = cuda.device_array_like(d_u)
    _upwind[1, 32](d_u, out, 0.4)
    return out.copy_to_host()


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
def test_detected_pattern_reused_where_a_branch_flips_is_refused(backend):
    """Issue 43 S10: the pattern detected once per input signature was trusted at every
    later input without the probe: jacrev at an input where the branch goes the other way
    returned wrong numbers with no error."""
    n = 12
    u_pos = np.linspace(0.5, 1.5, n)
    u_mixed = np.where(np.arange(n) % 3 == 0, -1.0, 1.0) * u_pos
    g = to_jax(upwind, sparsity="detect", argnums=0)
    with dualgpu.using_backend(backend), jax.enable_x64(True):
        J = jax.jacrev(g)(jnp.asarray(u_pos))
        np.testing.assert_allclose(np.asarray(J), dualgpu.jacobian(upwind, u_pos),
                                   rtol=1e-12, atol=1e-14)
        (coloring,) = g.colorings.values()
        assert coloring.local
        with pytest.raises(DualgpuError, match="detected at another input"):
            jax.jacrev(g)(jnp.asarray(u_mixed))
        with pytest.raises(DualgpuError, match="detected at another input"):
            jax.grad(lambda x: jnp.sum(g(x) ** 2))(jnp.asarray(u_mixed))
        J2 = jax.jacrev(g)(jnp.asarray(2 * u_pos))  # the same branches: exact
    np.testing.assert_allclose(np.asarray(J2), dualgpu.jacobian(upwind, 2 * u_pos),
                               rtol=1e-12, atol=1e-14)


def test_f_that_writes_its_input_gets_its_own_copy():
    """JAX hands numpy read-only views; f writing its input in place got "output array is
    read-only". f gets a copy, and the caller's array is untouched."""
    def in_place(x):
        x *= 2.0  # an in-place update of the argument, as simulations do with state
        return heat_field(x, 1.0)

    g = to_jax(in_place)
    x = jnp.asarray(U0)
    with jax.enable_x64(True):
        x = jnp.asarray(U0)
        value = g(x)
        grad = jax.grad(lambda v: jnp.sum(g(v) ** 2))(x)
    np.testing.assert_allclose(np.asarray(value), heat_field(2 * U0, 1.0), rtol=1e-12)
    ref = 2 * (2 * heat_field(2 * U0, 1.0) @ dualgpu.jacobian(heat_field, 2 * U0, 1.0))
    np.testing.assert_allclose(np.asarray(grad), ref, rtol=1e-10)
    np.testing.assert_array_equal(np.asarray(x), U0)
