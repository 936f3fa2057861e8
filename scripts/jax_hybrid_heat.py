"""A hybrid JAX + dualgpu model: recover a spatially varying diffusivity alpha(x) of a heated rod.

The simulation (``simulations.heat1d_variable``, numba.cuda kernels through dualgpu) is
wrapped by :func:`dualgpu.interop.to_jax`; the rest is JAX: ``alpha(x)`` is a tiny MLP
(x -> 16 -> 16 -> 1, a few hundred parameters) squashed into ``[ALPHA_MIN, ALPHA_MAX]``, the
loss is the misfit to noisy final temperatures of several experiments (hot spots at
different places, ``jax.vmap`` over them), and ``jax.grad`` + Adam
(``jax.example_libraries.optimizers``) fit the MLP. Each gradient costs one dual run per
experiment with one lane per cell (reverse through forward mode of the Jacobian
d u(T) / d alpha), then JAX's own reverse mode through the MLP.

The gradient is compared once with central finite differences along a random direction in
parameter space. Figures: the recovered field against the truth, and the loss curve.

Example::

    python3 scripts/jax_hybrid_heat.py            # ~20 s on the cpu backend (2 idle cores)
    python3 scripts/jax_hybrid_heat.py --quick    # a few seconds (tests)
"""
import time

import numpy as np

try:
    from . import _common
except ImportError:
    import _common

SCRIPT = "jax_hybrid_heat"
ALPHA_MIN, ALPHA_MAX = 0.3, 1.7


def build_parser():
    p = _common.parser(SCRIPT, __doc__.split("\n\n")[0])
    p.add_argument("--cells", type=int, default=41, help="number of cells (dx = 1/(n-1) m)")
    p.add_argument("--steps", type=int, default=120, help="time steps per experiment")
    p.add_argument("--experiments", type=int, default=4, help="hot spots observed")
    p.add_argument("--iterations", type=int, default=150, help="Adam iterations")
    p.add_argument("--learning-rate", type=float, default=0.02, help="Adam step size")
    p.add_argument("--noise", type=float, default=0.002, help="observation noise [K]")
    p.add_argument("--hidden", type=int, default=16, help="width of the two hidden layers")
    p.add_argument("--seed", type=int, default=0, help="seed of the noise and the MLP")
    p.add_argument("--quick", action="store_true",
                   help="tiny problem for tests: 21 cells, 40 steps, 2 experiments, 12 "
                        "iterations")
    return p


def true_alpha(x):
    """The diffusivity to recover [m²/s]: a smooth bump and a dip."""
    return 1.0 + 0.4 * np.sin(2 * np.pi * x) * np.exp(-((x - 0.4) / 0.35) ** 2)


def initial_states(x, count):
    """``count`` Gaussian hot spots spread over the rod (the ends stay at 0 K)."""
    centres = np.linspace(0.2, 0.8, count)
    return np.stack([np.exp(-((x - c) / 0.08) ** 2) for c in centres])


def init_mlp(key, hidden):
    import jax

    k1, k2, k3 = jax.random.split(key, 3)
    scale = lambda k, shape, fan_in: jax.random.normal(k, shape) / np.sqrt(fan_in)  # noqa: E731
    return {"w1": scale(k1, (1, hidden), 1) * 3.0, "b1": jax.random.normal(k3, (hidden,)),
            "w2": scale(k2, (hidden, hidden), hidden), "b2": np.zeros(hidden),
            "w3": np.zeros((hidden, 1)), "b3": np.zeros(1)}


def alpha_field(params, x):
    """The MLP: alpha(x) in (ALPHA_MIN, ALPHA_MAX), exactly the midpoint at initialisation."""
    import jax
    import jax.numpy as jnp

    h = jnp.tanh(x[:, None] @ params["w1"] + params["b1"])
    h = jnp.tanh(h @ params["w2"] + params["b2"])
    out = (h @ params["w3"] + params["b3"])[:, 0]
    return ALPHA_MIN + (ALPHA_MAX - ALPHA_MIN) * jax.nn.sigmoid(out)


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.quick:
        args.cells, args.steps, args.experiments, args.iterations = 21, 40, 2, 12
    figures = _common.setup(args)

    import jax
    import jax.numpy as jnp
    from jax.example_libraries import optimizers

    from dualgpu.interop import to_jax
    from simulations import heat1d_variable

    jax.config.update("jax_enable_x64", True)  # float64 end to end (the FD check is crisp)
    x = np.linspace(0.0, 1.0, args.cells)
    dx = x[1] - x[0]
    dt = 0.4 * dx ** 2 / ALPHA_MAX
    u0s = initial_states(x, args.experiments)

    def simulate(alpha, u0):
        return heat1d_variable.simulate(alpha, u0, n_steps=args.steps, dt=dt, dx=dx)

    sim = to_jax(simulate, argnums=0)  # alpha differentiated, u0 only data
    rng = np.random.default_rng(args.seed)
    clean = np.stack([simulate(true_alpha(x), u0) for u0 in u0s])
    observed = clean + args.noise * rng.standard_normal(clean.shape)

    xs = jnp.asarray(x)
    u0s_j, observed_j = jnp.asarray(u0s), jnp.asarray(observed)
    sim(alpha_field(init_mlp(jax.random.PRNGKey(args.seed), args.hidden), xs), u0s_j[0])

    def loss(params):
        alpha = alpha_field(params, xs)
        predicted = jax.vmap(sim, in_axes=(None, 0))(alpha, u0s_j)
        return jnp.mean((predicted - observed_j) ** 2) / args.noise ** 2

    params = jax.tree_util.tree_map(jnp.asarray, init_mlp(jax.random.PRNGKey(args.seed),
                                                          args.hidden))
    n_params = sum(p.size for p in jax.tree_util.tree_leaves(params))
    value_and_grad = jax.jit(jax.value_and_grad(loss))

    # the gradient once against central differences along a random direction
    direction = jax.tree_util.tree_map(
        lambda p: jnp.asarray(rng.standard_normal(p.shape)), params)
    _, grad0 = value_and_grad(params)
    along = sum(jnp.vdot(g, d) for g, d in zip(jax.tree_util.tree_leaves(grad0),
                                                 jax.tree_util.tree_leaves(direction)))
    h = 1e-6
    shifted = lambda s: jax.tree_util.tree_map(lambda p, d: p + s * d, params, direction)  # noqa
    fd = (loss(shifted(h)) - loss(shifted(-h))) / (2 * h)
    agreement = abs(float(along) - float(fd)) / max(abs(float(fd)), 1e-300)
    print(f"gradient check along a random direction: jax.grad {float(along):.10e}, central "
          f"differences {float(fd):.10e}, relative difference {agreement:.2e}")

    init, update, get_params = optimizers.adam(args.learning_rate)
    state = init(params)
    losses = []
    start = time.perf_counter()
    for k in range(args.iterations):
        value, grad = value_and_grad(get_params(state))
        losses.append(float(value))
        state = update(k, grad, state)
    seconds = _common.elapsed(start)
    fitted = np.asarray(alpha_field(get_params(state), xs))
    truth = true_alpha(x)
    first = np.asarray(alpha_field(params, xs))
    error = np.sqrt(np.mean((fitted[1:-1] - truth[1:-1]) ** 2))
    print(f"{args.iterations} Adam iterations in {seconds:.1f} s on the {args.backend} backend "
          f"({n_params} MLP parameters, {args.cells} cells x {args.steps} steps x "
          f"{args.experiments} experiments; each gradient: {args.experiments} dual runs of "
          f"{args.cells} lanes)")
    print(f"loss {losses[0]:.4g} -> {losses[-1]:.4g}; rms error of alpha(x) "
          f"{np.sqrt(np.mean((first - truth) ** 2)):.3g} -> {error:.3g} m²/s")

    fig, axes = _common.figure(1, 2, size=(11.0, 4.2))
    ax = axes[0, 0]
    ax.plot(x, truth, "k-", lw=2, label="true α(x)")
    ax.plot(x, fitted, "C3--", lw=2, label="recovered (MLP)")
    ax.plot(x, first, "C0:", label="initial guess")
    for u0 in u0s:
        ax.plot(x, ALPHA_MIN + 0.25 * u0, color="0.7", lw=0.8)
    ax.set_xlabel("position x [m]")
    ax.set_ylabel("diffusivity α [m²/s]")
    ax.set_title("Diffusivity recovered from noisy final temperatures\n(grey: the hot spots "
                 "observed, not to scale)")
    ax.legend()
    ax = axes[0, 1]
    ax.semilogy(np.arange(1, len(losses) + 1), losses, "C0-")
    ax.axhline(1.0, color="0.5", ls=":", label="noise level (loss = 1)")
    ax.set_xlabel("Adam iteration")
    ax.set_ylabel("mean squared misfit / noise²")
    ax.set_title("Loss: jax.grad through dualgpu.interop.to_jax")
    ax.legend()
    fig.suptitle("Hybrid model: numba.cuda heat simulation (dualgpu) inside a JAX fit")
    figures.save(fig, "recovered_diffusivity")
    figures.report()
    return {"losses": losses, "alpha_error": float(error), "gradient_check": agreement,
            "figures": figures.paths, "seconds": seconds, "n_params": n_params}


if __name__ == "__main__":
    main()
