"""Sensitivity of a 1-D heat simulation to its diffusivity, end temperatures and initial state.

A rod on ``x = 0 .. 1`` m starts with a Gaussian hot spot and diffuses for ``--steps`` explicit
steps with its ends held at ``--left`` and ``--right`` K (``simulations.heat1d``). Forward-mode
AD gives, in one pass with three tangent lanes, the derivative of the final temperature of every
cell with respect to the diffusivity ``alpha`` and the two end temperatures, and in chunks of up
to 64 lanes the Jacobian of the final field with respect to the initial field.

Prints the sensitivities of the mean final temperature and saves four figures: the Jacobian
d u(T) / d u(0), the sensitivity fields, a parameter ranking and the sensitivities over time.

Example::

    python3 scripts/heat_sensitivity.py --cells 201 --steps 2000
"""
import time

import numpy as np

try:
    from . import _common
except ImportError:
    import _common

from dualgpu import plot
from simulations import heat1d

SCRIPT = "heat_sensitivity"
PARAMETERS = ("alpha", "left", "right")
UNITS = {"alpha": "m²/s", "left": "K", "right": "K"}


def build_parser():
    p = _common.parser(SCRIPT, __doc__.split("\n\n")[0])
    p.add_argument("--cells", type=int, default=101, help="number of cells n (dx = 1/(n-1) m)")
    p.add_argument("--steps", type=int, default=500, help="number of time steps")
    p.add_argument("--alpha", type=float, default=1.0, help="thermal diffusivity [m²/s]")
    p.add_argument("--left", type=float, default=0.5, help="temperature of the left end [K]")
    p.add_argument("--right", type=float, default=0.25, help="temperature of the right end [K]")
    p.add_argument("--cfl", type=float, default=0.4,
                   help="r = alpha dt / dx², sets dt (stable for r <= 0.5)")
    p.add_argument("--snapshots", type=int, default=20,
                   help="times at which the sensitivities are recorded for the history plot")
    return p


def grid(args):
    """Return ``(x, dx, dt, u0)`` for the options."""
    x = np.linspace(0.0, 1.0, args.cells)
    dx = x[1] - x[0]
    dt = args.cfl * dx ** 2 / args.alpha
    return x, dx, dt, heat1d.default_initial_state(args.cells)


def run(u0, alpha, left, right, *, args, dx, dt, progress=False):
    """Return the temperatures at every snapshot (a tuple, the last one final)."""
    snapshots = []
    u = u0
    for length in _common.segments(args.steps, args.snapshots, progress):
        u = heat1d.simulate(u, n_steps=length, alpha=alpha, dt=dt, dx=dx, left=left,
                            right=right)
        snapshots.append(u)
    return tuple(snapshots)


def main(argv=None):
    args = build_parser().parse_args(argv)
    figures = _common.setup(args)
    x, dx, dt, u0 = grid(args)
    values = [args.alpha, args.left, args.right]
    start = time.perf_counter()

    def simulate_params(alpha, left, right):
        return run(u0, alpha, left, right, args=args, dx=dx, dt=dt, progress=args.progress)

    history = _common.jacfwd(simulate_params, argnums=(0, 1, 2))(*values)
    times = dt * np.cumsum(list(_common.segments(args.steps, args.snapshots, False)))
    # history[s][p]: d u(t_s) / d p, shape (n,)
    dfield = np.stack([history[-1][p] for p in range(3)])          # (3, n)
    dmean_history = np.array([[h[p].mean() for p in range(3)] for h in history])  # (S, 3)

    def simulate_initial(u_init):
        return run(u_init, *values, args=args, dx=dx, dt=dt)[-1]

    J0 = _common.jacfwd(simulate_initial, chunk_size=args.chunk_size,
                        progress=args.progress)(u0)                # (n, n)
    u_final = run(u0, *values, args=args, dx=dx, dt=dt)[-1]
    seconds = _common.elapsed(start)

    mean = float(np.mean(u_final))
    output = "mean final temperature ū(T) [K]"
    rows = _common.print_table(output, mean, PARAMETERS, values, dfield.mean(axis=1),
                               [UNITS[p] for p in PARAMETERS])
    print(f"(n = {args.cells} cells, {args.steps} steps of dt = {dt:.3g} s, T = {times[-1]:.3g} s;"
          f" derivatives in {seconds:.1f} s on the {args.backend} backend)")

    T = times[-1]
    figures.save(_heatmap(J0, dx, T), "jacobian_initial_state")

    fig, axes = _common.figure(3, 1, size=(7.5, 9.0))
    for p, ax in zip(range(3), axes[:, 0]):
        name = PARAMETERS[p]
        plot.sensitivity_field(
            dfield[p], ax=ax, extent=(x[0], x[-1]), xlabel="position x [m]",
            colorbar_label=f"∂u/∂{name} [K/{_unit(name)}]",
            title=f"Sensitivity of the final temperature u(x, T) to {name} = {values[p]:g} "
                  f"{UNITS[name]}")
    fig.suptitle(f"1-D heat equation, T = {T:.3g} s: where each parameter matters")
    figures.save(fig, "sensitivity_fields")

    figures.save(plot.parameter_ranking(
        [f"{p} = {v:g} {UNITS[p]}" for p, v in zip(PARAMETERS, values)], dfield.mean(axis=1),
        relative=np.array(values), output_value=mean, output_name="ū(T)",
        title="Which parameter moves the mean final temperature most"), "parameter_ranking")

    figures.save(plot.sensitivity_over_time(
        np.concatenate([[0.0], times]),
        np.vstack([np.zeros(3), dmean_history * np.array(values)]),
        labels=[f"{p} × ∂ū/∂{p}" for p in PARAMETERS], xlabel="time t [s]",
        ylabel="p × ∂ū(t)/∂p  [K]",
        title="Sensitivity of the mean temperature ū(t), scaled by each parameter"),
        "sensitivity_over_time")
    figures.report()
    return {"output": output, "value": mean, "rows": rows, "figures": figures.paths,
            "seconds": seconds}


def _unit(name):
    return f"({UNITS[name]})" if "/" in UNITS[name] else UNITS[name]


def _heatmap(J0, dx, T):
    fig, ax = plot.jacobian_heatmap(
        J0, output_name="u(T)", input_name="u(0)",
        colorbar_label="∂ u_i(T) / ∂ u_j(0)  [K/K]",
        title=f"Jacobian of the final temperature w.r.t. the initial one (T = {T:.3g} s)")
    ax.set_xlabel(f"initial-state cell j  (x = j × {dx:.3g} m)")
    ax.set_ylabel(f"final-state cell i  (x = i × {dx:.3g} m)")
    return fig, ax


if __name__ == "__main__":
    main()
