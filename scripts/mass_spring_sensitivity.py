"""Sensitivity of a swinging chain of masses and springs to stiffness, damping, rest length
and gravity.

A horizontal chain pinned at its left end falls and swings under gravity for ``--steps``
symplectic Euler steps (``simulations.mass_spring``). One forward-mode pass with four tangent
lanes gives the derivative of every node's final position with respect to the spring
stiffness k, the dashpot damping c, the rest length and gravity.

Prints the sensitivities of the chain's mean final height and saves the sensitivity of each
node's height, the mean height's sensitivities over time, and a parameter ranking.

Example::

    python3 scripts/mass_spring_sensitivity.py --nodes 64 --steps 5000
"""
import time

import numpy as np

try:
    from . import _common
except ImportError:
    import _common

from dualgpu import plot
from simulations import mass_spring

SCRIPT = "mass_spring_sensitivity"
PARAMETERS = ("k", "c", "rest_length", "gravity")
UNITS = {"k": "N/m", "c": "N s/m", "rest_length": "m", "gravity": "m/s²"}


def build_parser():
    p = _common.parser(SCRIPT, __doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=32, help="number of nodes")
    p.add_argument("--steps", type=int, default=4000, help="number of time steps")
    p.add_argument("--dt", type=float, default=2.0e-4, help="time step [s]")
    p.add_argument("--k", type=float, default=1000.0, help="spring stiffness [N/m]")
    p.add_argument("--c", type=float, default=0.1, help="dashpot damping [N s/m]")
    p.add_argument("--rest-length", type=float, default=0.05, help="spring rest length [m]")
    p.add_argument("--gravity", type=float, default=9.81, help="gravity [m/s²]")
    p.add_argument("--mass", type=float, default=0.01, help="mass of every node [kg]")
    p.add_argument("--snapshots", type=int, default=25,
                   help="times at which the sensitivities are recorded for the history plot")
    return p


def run(pos0, vel0, pinned, k, c, rest_length, gravity, *, args, progress=False):
    """Return the node positions at every snapshot (a tuple, the last one final)."""
    snapshots = []
    pos, vel = pos0, vel0
    for length in _common.segments(args.steps, args.snapshots, progress):
        pos, vel = mass_spring.simulate(pos, vel, pinned, n_steps=length, k=k, c=c,
                                        rest_length=rest_length, mass=args.mass,
                                        gravity=gravity, dt=args.dt)
        snapshots.append(pos)
    return tuple(snapshots)


def main(argv=None):
    args = build_parser().parse_args(argv)
    figures = _common.setup(args)
    # the chain starts straight and unstretched, spaced by the default rest length
    pos0, vel0, pinned = mass_spring.default_initial_state(args.nodes, 0.05)
    values = [args.k, args.c, args.rest_length, args.gravity]
    start = time.perf_counter()

    def f(*params):
        return run(pos0, vel0, pinned, *params, args=args, progress=args.progress)

    history = _common.jacfwd(f, argnums=(0, 1, 2, 3), chunk_size=args.chunk_size,
                             progress=args.progress)(*values)
    final = run(pos0, vel0, pinned, *values, args=args)[-1]
    seconds = _common.elapsed(start)
    times = args.dt * np.cumsum(list(_common.segments(args.steps, args.snapshots, False)))
    dy = np.stack([history[-1][p][:, 1] for p in range(4)])         # (4, nodes)
    mean = np.array([[h[p][:, 1].mean() for p in range(4)] for h in history])  # (S, 4)
    y = float(final[:, 1].mean())
    output = "mean final height of the nodes ȳ(T) [m]"
    rows = _common.print_table(output, y, PARAMETERS, values, dy.mean(axis=1),
                               [UNITS[p] for p in PARAMETERS])
    print(f"({args.nodes} nodes, {args.steps} steps of dt = {args.dt:g} s, "
          f"T = {times[-1]:.3g} s; derivatives in {seconds:.1f} s on the {args.backend} "
          "backend)")

    fig, axes = _common.figure(4, 1, size=(8.0, 10.0))
    for p, ax in enumerate(axes[:, 0]):
        name = PARAMETERS[p]
        plot.sensitivity_field(
            dy[p], ax=ax, extent=(0, args.nodes - 1), xlabel="node (0 = pinned end)",
            colorbar_label=f"∂y/∂{name}\n[m/{_unit(name)}]",
            title=f"{name} = {values[p]:g} {UNITS[name]}")
    fig.suptitle(f"Sensitivity of each node's final height y (T = {times[-1]:.3g} s)")
    figures.save(fig, "sensitivity_over_nodes")

    figures.save(plot.sensitivity_over_time(
        np.concatenate([[0.0], times]), np.vstack([np.zeros(4), mean * np.array(values)]),
        labels=list(PARAMETERS), xlabel="time t [s]",
        ylabel="p × ∂ȳ(t)/∂p  [m]",
        title="Sensitivity of the chain's mean height over time, scaled by each parameter"),
        "sensitivity_over_time")

    figures.save(plot.parameter_ranking(
        [f"{p} = {v:g} {UNITS[p]}" for p, v in zip(PARAMETERS, values)], dy.mean(axis=1),
        relative=np.array(values), output_value=y, output_name="ȳ(T)",
        title="Which parameter moves the chain's mean final height most"),
        "parameter_ranking")
    figures.report()
    return {"output": output, "value": y, "rows": rows, "figures": figures.paths,
            "seconds": seconds}


def _unit(name):
    unit = UNITS[name]
    return f"({unit})" if ("/" in unit or " " in unit) else unit


if __name__ == "__main__":
    main()
