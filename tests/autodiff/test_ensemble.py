"""ensemble_jacobian: every member seeded at once equals each member's own Jacobian.

Two ensembles: the pendulums of simulations/ (members along axis 0, shared parameters as
scalars) and a Lorenz-63 ensemble written here as a user would (state stored (3, members),
so the member axis is 1; a per-member parameter array and shared scalars). Each result is
compared with dualgpu.jacobian run on one member alone and with central differences along
a random per-member direction, in float64 and float32.
"""
import math

import numpy as np
import pytest

import dualgpu
from dualgpu import DualgpuError, cuda, ensemble_jacobian
from simulations import heat1d, pendulums

STEPS = 25
TOL = {np.float64: dict(exact=1e-12, fd=1e-6, eps=1e-6),
       np.float32: dict(exact=1e-5, fd=2e-2, eps=3e-3)}


@pytest.fixture(autouse=True)
def cpu_backend():
    with dualgpu.using_backend("cpu"):
        yield


# ---------------------------------------------------------------- a user's ensemble kernel

@cuda.jit
def lorenz_step(state, rho, sigma, beta, dt):
    """One explicit Euler step of member i of a Lorenz-63 ensemble, state[:, i] = (x, y, z)."""
    i = cuda.grid(1)
    if i >= state.shape[1]:
        return
    x = state[0, i]
    y = state[1, i]
    z = state[2, i]
    state[0, i] = x + dt * sigma * (y - x)
    state[1, i] = y + dt * (x * (rho[i] - z) - y)
    state[2, i] = z + dt * (x * y - beta * z)


def lorenz(state0, rho, sigma, beta, dt=0.01, n_steps=STEPS):
    """Final states (3, members) of an ensemble with per-member rho and shared sigma, beta."""
    state = cuda.to_device(state0)
    r = cuda.to_device(rho)
    members = state0.shape[1]
    for _ in range(n_steps):
        lorenz_step[math.ceil(members / 32), 32](state, r, sigma, beta, dt)
    return state.copy_to_host()


def pendulum_run(theta0, omega0, damping, g_over_l):
    return pendulums.simulate(theta0, omega0, n_steps=STEPS, damping=damping,
                              g_over_l=g_over_l)


def pendulum_case(dtype, members=7):
    theta0, omega0 = pendulums.default_initial_state(members)
    omega0 = np.linspace(-0.3, 0.4, members)
    return (theta0.astype(dtype), omega0.astype(dtype), dtype(0.5), dtype(1.1))


def lorenz_case(dtype, members=6):
    rng = np.random.default_rng(3)
    state0 = (rng.normal(size=(3, members)) * 5 + [[0.0], [0.0], [20.0]]).astype(dtype)
    rho = np.linspace(20.0, 30.0, members).astype(dtype)
    return state0, rho, dtype(10.0), dtype(8.0 / 3.0)


def per_member_reference(f, args, argnums, batch_axes, out_axis, member, out_sizes):
    """member's Jacobian from dualgpu.jacobian on the ensemble cut down to that member."""
    cut = list(args)
    for p, axis in zip(argnums, batch_axes):
        if axis is not None:
            cut[p] = np.take(args[p], [member], axis=axis)
    jac = dualgpu.jacobian(f, *cut, argnums=tuple(argnums), progress=False)
    outputs = jac if len(out_sizes) > 1 else (jac,)
    rows = []
    for blocks, m in zip(outputs, out_sizes):
        rows.append(np.concatenate([np.reshape(b, (m, -1)) for b in blocks], axis=1))
    return np.concatenate(rows, axis=0)


def central_difference(f, args, argnums, batch_axes, out_axis, rng, eps):
    """Per-member directions v (members, inputs) and the central difference of f along them."""
    members = next(np.shape(args[p])[a] for p, a in zip(argnums, batch_axes) if a is not None)
    columns, plus, minus = [], list(args), list(args)
    dtype = np.result_type(args[argnums[0]])
    for p, axis in zip(argnums, batch_axes):
        x = np.asarray(args[p], np.float64)
        if axis is None:  # shared: one direction for all members
            t = rng.standard_normal(np.shape(x))
            columns.append(np.broadcast_to(np.reshape(t, (1, -1)), (members, t.size)))
        else:
            t = rng.standard_normal(np.shape(x))
            columns.append(np.moveaxis(t, axis, 0).reshape(members, -1))
        h = eps * max(1.0, float(np.max(np.abs(x))))
        plus[p] = (x + h * t).astype(dtype) if np.ndim(x) else dtype.type(x + h * t)
        minus[p] = (x - h * t).astype(dtype) if np.ndim(x) else dtype.type(x - h * t)
        columns[-1] = columns[-1] * h
    up, down = f(*plus), f(*minus)
    up = up if isinstance(up, tuple) else (up,)
    down = down if isinstance(down, tuple) else (down,)
    diff = [np.moveaxis(np.asarray(a, np.float64) - np.asarray(b, np.float64), out_axis, 0)
            .reshape(members, -1) / 2.0 for a, b in zip(up, down)]
    return np.concatenate(columns, axis=1), np.concatenate(diff, axis=1)


CASES = {
    # name: (f, case builder, argnums, batch_axes, out_axis, per-member output sizes)
    "pendulums": (pendulum_run, pendulum_case, (0, 1, 2, 3), (0, 0, None, None), 0, (1, 1)),
    "lorenz": (lorenz, lorenz_case, (0, 1, 2, 3), (1, 0, None, None), 1, (3,)),
}


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_ensemble_equals_per_member_jacobian_and_central_differences(name, dtype):
    f, build, argnums, batch_axes, out_axis, out_sizes = CASES[name]
    args = build(dtype)
    kept = [np.copy(a) for a in args]
    J = ensemble_jacobian(f, *args, argnums=argnums, batch_axes=batch_axes, out_axis=out_axis)
    members = next(np.shape(args[p])[a] for p, a in zip(argnums, batch_axes) if a is not None)
    inputs = sum(np.size(args[p]) // (members if a is not None else 1)
                 for p, a in zip(argnums, batch_axes))
    assert J.shape == (members, sum(out_sizes), inputs)
    assert J.dtype == np.dtype(dtype)
    tol = TOL[dtype]
    for i in range(members):
        reference = per_member_reference(f, args, argnums, batch_axes, out_axis, i, out_sizes)
        scale = np.max(np.abs(reference))
        np.testing.assert_allclose(J[i], reference, rtol=0, atol=tol["exact"] * scale,
                                   err_msg=f"{name} member {i}")
    directions, fd = central_difference(f, args, argnums, batch_axes, out_axis,
                                        np.random.default_rng(1), tol["eps"])
    predicted = np.einsum("imn,in->im", J.astype(np.float64), directions)
    error = np.max(np.abs(predicted - fd)) / np.max(np.abs(fd))
    assert error < tol["fd"], (name, error)
    for a, b in zip(args, kept):
        np.testing.assert_array_equal(a, b)  # the caller's inputs are untouched


def test_shared_parameters_alone_give_the_plain_jacobian_per_member():
    theta0, omega0, damping, g = pendulum_case(np.float64)
    J = ensemble_jacobian(pendulum_run, theta0, omega0, damping, g, argnums=(2, 3),
                          batch_axes=None)
    d_theta, d_omega = dualgpu.jacobian(pendulum_run, theta0, omega0, damping, g,
                                        argnums=(2, 3), progress=False)
    assert J.shape == (7, 2, 2)
    np.testing.assert_array_equal(J[:, 0, :], np.stack(d_theta, axis=1))
    np.testing.assert_array_equal(J[:, 1, :], np.stack(d_omega, axis=1))


def test_lanes_are_the_per_member_input_size_not_members_times_inputs():
    runs = []

    def counted(theta0, omega0, damping, g):
        runs.append(getattr(theta0, "lanes", None))
        return pendulum_run(theta0, omega0, damping, g)

    args = pendulum_case(np.float64, members=200)
    ensemble_jacobian(counted, *args, argnums=(0, 1), batch_axes=0)
    assert runs == [4]  # one run: two lanes for 200 members x 2 inputs, probe and gauge


def test_independent_members_pass_validation():
    args = pendulum_case(np.float64)
    plain = ensemble_jacobian(pendulum_run, *args, argnums=(0, 1, 2), batch_axes=(0, 0, None))
    for how in (True, "detect"):
        checked = ensemble_jacobian(pendulum_run, *args, argnums=(0, 1, 2),
                                    batch_axes=(0, 0, None), validate=how)
        np.testing.assert_array_equal(checked, plain)


@pytest.mark.parametrize("how, by", [(True, "the dense Jacobian"),
                                     ("detect", "the structural tracer")])
def test_interacting_members_are_caught_by_validation(how, by):
    # heat cells are no ensemble: each depends on its neighbours
    u0 = heat1d.default_initial_state(8)
    rod = lambda u: heat1d.simulate(u, n_steps=2)
    with pytest.raises(DualgpuError, match=f"members interact: {by} shows output 0 of member 1 "
                                           "depending on argument 0 of member 0"):
        ensemble_jacobian(rod, u0, validate=how)


@pytest.mark.parametrize("kwargs, match", [
    (dict(argnums=(0, 1), batch_axes=(0,)), r"1 entries for 2 differentiated"),
    (dict(argnums=2, batch_axes=0), r"batch axis 0 of argument 2 does not exist"),
    (dict(argnums=0, batch_axes=1), r"batch axis 1 of argument 0 does not exist"),
    (dict(argnums=0, batch_axes="0"), r"ints or None"),
    (dict(argnums=0, out_axis=1), r"output 0 of f has shape \(7,\), without an axis 1"),
    (dict(argnums=0, validate="yes"), r"validate must be"),
])
def test_errors_say_what_was_expected(kwargs, match):
    args = pendulum_case(np.float64)
    with pytest.raises(DualgpuError, match=match):
        ensemble_jacobian(pendulum_run, *args, **kwargs)


def test_members_must_agree_and_outputs_keep_the_member_axis():
    theta0, omega0, damping, g = pendulum_case(np.float64)
    with pytest.raises(DualgpuError, match=r"disagree on the number of members.*7.*6"):
        ensemble_jacobian(pendulum_run, theta0, omega0[:6], damping, g, argnums=(0, 1))

    def mean_angle(theta0):
        return pendulum_run(theta0, omega0, damping, g)[0].mean()

    with pytest.raises(DualgpuError, match="not a reduction of it"):
        ensemble_jacobian(mean_angle, theta0)


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_interacting_members_are_refused_without_validate(backend, dtype):
    """Issue 43: members that interact gave wrong per-member Jacobians with no error unless
    validate= was asked for; the probe lane of dualgpu.autodiff.reuse now refuses them."""
    u0 = heat1d.default_initial_state(8).astype(dtype)
    rod = lambda u: heat1d.simulate(u, n_steps=2)  # noqa: E731
    with dualgpu.using_backend(backend):
        with pytest.raises(DualgpuError, match="the members were seeded at once"):
            ensemble_jacobian(rod, u0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_long_runs_of_independent_members_are_not_refused(dtype):
    """2000 pendulum steps round hundreds of eps of a row's scale: the probe's tolerance follows
    the rounding its gauge lane measures (a fixed 64 eps refused these members)."""
    theta0, omega0 = pendulums.default_initial_state(256)
    theta0, omega0 = theta0.astype(dtype), omega0.astype(dtype)
    run = lambda a, b: pendulums.simulate(a, b, n_steps=2000, damping=0.3)  # noqa: E731
    with dualgpu.using_backend("cpu"):
        J = ensemble_jacobian(run, theta0, omega0, argnums=(0, 1))
        # member 0's two directions alone (a jacobian of all 512 cost 5 s)
        seeds = np.zeros((2, 2, theta0.size), dtype)
        seeds[0, 0, 0] = seeds[1, 1, 0] = 1.0
        _, first = dualgpu.jvp_batch(lambda a, b: run(a, b)[0][:1], (theta0, omega0),
                                     (seeds[:, 0], seeds[:, 1]))
    np.testing.assert_allclose(J[0, 0], first[:, 0], rtol=1e-3 if dtype == np.float32
                               else 1e-9)
