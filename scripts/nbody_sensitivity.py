"""Sensitivity of an N-body cluster to the body masses, G and the softening length.

A random cluster in N-body units (``simulations.nbody``; G = 1, total mass 1) evolves for
``--steps`` leapfrog steps. One forward-mode pass seeds one tangent lane per mass plus one for
G and one for the softening length eps, and gives the derivative of every final position with
respect to each of them.

Prints the sensitivities of the final distance of body 0 from the origin, |r_0(T)|, and saves
the Jacobian d(final x positions)/d(masses), a ranking of the parameters and the sensitivity
of that distance over time.

Example::

    python3 scripts/nbody_sensitivity.py --bodies 48 --steps 400
"""
import time

import numpy as np

try:
    from . import _common
except ImportError:
    import _common

from dualgpu import plot
from simulations import nbody

SCRIPT = "nbody_sensitivity"


def build_parser():
    p = _common.parser(SCRIPT, __doc__.split("\n\n")[0])
    p.add_argument("--bodies", type=int, default=32, help="number of bodies n")
    p.add_argument("--steps", type=int, default=200, help="number of leapfrog steps")
    p.add_argument("--dt", type=float, default=2.0e-3, help="time step [N-body time units]")
    p.add_argument("--G", type=float, default=1.0, help="gravitational constant")
    p.add_argument("--eps", type=float, default=0.05, help="softening length [length]")
    p.add_argument("--seed", type=int, default=0, help="seed of the random initial cluster")
    p.add_argument("--snapshots", type=int, default=20,
                   help="times at which the sensitivities are recorded for the history plot")
    return p


def run(pos0, vel0, masses, G, eps, *, args, progress=False):
    """Return the positions at every snapshot (a tuple, the last one final)."""
    snapshots = []
    pos, vel = pos0, vel0
    for length in _common.segments(args.steps, args.snapshots, progress):
        pos, vel = nbody.simulate(pos, vel, masses, n_steps=length, G=G, eps=eps, dt=args.dt)
        snapshots.append(pos)
    return tuple(snapshots)


def distance(pos):
    """Return |r_0| and its gradient with respect to r_0."""
    r = float(np.linalg.norm(pos[0]))
    return r, pos[0] / r


def main(argv=None):
    args = build_parser().parse_args(argv)
    figures = _common.setup(args)
    pos0, vel0, masses = nbody.default_initial_state(args.bodies, seed=args.seed)
    start = time.perf_counter()

    def f(m, G, eps):
        return run(pos0, vel0, m, G, eps, args=args, progress=args.progress)

    history = _common.jacfwd(f, argnums=(0, 1, 2), chunk_size=args.chunk_size,
                             progress=args.progress)(masses, args.G, args.eps)
    final = run(pos0, vel0, masses, args.G, args.eps, args=args)
    seconds = _common.elapsed(start)
    times = args.dt * np.cumsum(list(_common.segments(args.steps, args.snapshots, False)))

    dm, dG, deps = history[-1]            # (n, 3, n), (n, 3), (n, 3)
    r0, unit = distance(final[-1])
    names = ["G", "eps"] + [f"m_{j}" for j in range(args.bodies)]
    values = np.concatenate([[args.G, args.eps], masses])
    sens = np.concatenate([[unit @ dG[0], unit @ deps[0]], unit @ dm[0]])
    output = "final distance of body 0 from the origin |r_0(T)|"
    shown = min(len(names), 8)
    order = np.concatenate([[0, 1], 2 + np.argsort(-np.abs(sens[2:]))[:shown - 2]])
    rows = _common.print_table(output, r0, [names[i] for i in order], values[order],
                               sens[order])
    print(f"(masses listed: the {shown - 2} largest of {args.bodies} by |sensitivity|; "
          f"{args.steps} steps, T = {times[-1]:.3g}; derivatives in {seconds:.1f} s on the "
          f"{args.backend} backend)")

    fig, ax = plot.jacobian_heatmap(
        dm[:, 0, :], output_name="x_i(T)", input_name="m_j",
        colorbar_label="∂ x_i(T) / ∂ m_j  [length / mass]",
        title=f"How each mass moves each body's final x position (T = {times[-1]:.3g})")
    ax.set_xlabel("mass m_j of body j")
    ax.set_ylabel("final x position of body i")
    figures.save(fig, "jacobian_x_masses")

    figures.save(plot.parameter_ranking(
        names, sens, relative=values, output_value=r0, output_name="|r_0|", top=12,
        title="Parameters that move body 0's final distance from the origin"),
        "parameter_ranking")

    dist = [(unit_s @ h[1][0], unit_s @ h[2][0])
            for h, unit_s in ((h, distance(p)[1]) for h, p in zip(history, final))]
    figures.save(plot.sensitivity_over_time(
        times, np.array(dist) * np.array([args.G, args.eps]), labels=["G × ∂|r_0|/∂G",
                                                                       "eps × ∂|r_0|/∂eps"],
        xlabel="time t [N-body units]", ylabel="p × ∂|r_0(t)|/∂p  [length]",
        title="Sensitivity of body 0's distance from the origin over time"),
        "sensitivity_over_time")
    figures.report()
    return {"output": output, "value": r0, "rows": rows, "figures": figures.paths,
            "seconds": seconds}


if __name__ == "__main__":
    main()
