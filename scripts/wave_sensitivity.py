"""Sensitivity of a 2-D damped wave (a clamped membrane) to its wave speed and damping.

A Gaussian bump at rest in the middle of the unit square (``simulations.wave2d``) spreads for
``--steps`` leapfrog steps. One forward-mode pass with two tangent lanes gives the derivative
of the final displacement of every cell with respect to the wave speed c and the damping rate.

Prints the sensitivities of the final displacement at the centre and saves the sensitivity
fields d u(T) / d c and d u(T) / d damping, the final displacement, and a parameter ranking.

Example::

    python3 scripts/wave_sensitivity.py --cells 129 --steps 400
"""
import time

import numpy as np

try:
    from . import _common
except ImportError:
    import _common

from dualgpu import plot
from simulations import wave2d

SCRIPT = "wave_sensitivity"
PARAMETERS = ("c", "damping")
UNITS = {"c": "m/s", "damping": "1/s"}


def build_parser():
    p = _common.parser(SCRIPT, __doc__.split("\n\n")[0])
    p.add_argument("--cells", type=int, default=65, help="cells per side (dx = 1/(n-1) m)")
    p.add_argument("--steps", type=int, default=200, help="number of time steps")
    p.add_argument("--c", type=float, default=1.0, help="wave speed [m/s]")
    p.add_argument("--damping", type=float, default=0.5, help="damping rate [1/s]")
    p.add_argument("--courant", type=float, default=0.32,
                   help="c dt / dx, sets dt (stable below 1/sqrt(2))")
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    figures = _common.setup(args)
    u0, v0 = wave2d.default_initial_state(args.cells)
    dx = 1.0 / (args.cells - 1)
    dt = args.courant * dx / args.c
    values = [args.c, args.damping]
    start = time.perf_counter()

    def f(c, damping):
        return wave2d.simulate(u0, v0, n_steps=args.steps, c=c, dt=dt, dx=dx,
                               damping=damping)[0]

    dc, dg = _common.jacfwd(f, argnums=(0, 1), chunk_size=args.chunk_size,
                            progress=args.progress)(*values)
    u = f(*values)
    seconds = _common.elapsed(start)
    T = args.steps * dt
    mid = args.cells // 2
    y = float(u[mid, mid])
    output = "final displacement at the centre u(0.5, 0.5, T) [m]"
    rows = _common.print_table(output, y, PARAMETERS, values, [dc[mid, mid], dg[mid, mid]],
                               [UNITS[p] for p in PARAMETERS])
    print(f"({args.cells}×{args.cells} cells, {args.steps} steps of dt = {dt:.3g} s, "
          f"T = {T:.3g} s; derivatives in {seconds:.1f} s on the {args.backend} backend)")

    extent = (0.0, 1.0, 0.0, 1.0)
    fig, axes = _common.figure(1, 3, size=(17.0, 5.0))
    # simulate's arrays are u[ix, iy]; the plots want field[iy, ix]
    plot.sensitivity_field(u.T, ax=axes[0, 0], extent=extent, xlabel="x [m]", ylabel="y [m]",
                           colorbar_label="u(T) [m]", title=f"Displacement u at T = {T:.3g} s")
    plot.sensitivity_field(dc.T, ax=axes[0, 1], extent=extent, xlabel="x [m]",
                           ylabel="y [m]", colorbar_label="∂u/∂c [m / (m/s)] = [s]",
                           title=f"Sensitivity ∂u(T)/∂c  (c = {args.c:g} m/s)")
    plot.sensitivity_field(dg.T, ax=axes[0, 2], extent=extent, xlabel="x [m]",
                           ylabel="y [m]", colorbar_label="∂u/∂damping [m / (1/s)] = [m s]",
                           title=f"Sensitivity ∂u(T)/∂damping  (damping = {args.damping:g} 1/s)")
    fig.suptitle("2-D damped wave on a clamped membrane: final displacement and where it "
                 "depends on the wave speed and the damping")
    figures.save(fig, "sensitivity_fields")

    figures.save(plot.parameter_ranking(
        [f"{p} = {v:g} {UNITS[p]}" for p, v in zip(PARAMETERS, values)],
        [dc[mid, mid], dg[mid, mid]], relative=np.array(values), output_value=y,
        output_name="u_centre",
        title="Which parameter moves the final displacement at the centre most"),
        "parameter_ranking")
    figures.report()
    return {"output": output, "value": y, "rows": rows, "figures": figures.paths,
            "seconds": seconds}


if __name__ == "__main__":
    main()
