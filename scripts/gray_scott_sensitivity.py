"""Sensitivity of a Gray-Scott reaction-diffusion pattern to the feed and kill rates.

The classic start (a perturbed square of autocatalyst v in a sea of substrate u) evolves for
``--steps`` explicit steps on a periodic grid (``simulations.gray_scott``). One forward-mode
pass with two tangent lanes gives the derivative of the final concentrations of every cell with
respect to the feed rate F and the kill rate k.

Prints the sensitivities of the mean final autocatalyst concentration and saves the final
pattern with its sensitivity fields d v(T)/d F and d v(T)/d k, and a parameter ranking.

Example::

    python3 scripts/gray_scott_sensitivity.py --cells 128 --steps 4000
"""
import time

import numpy as np

try:
    from . import _common
except ImportError:
    import _common

from dualgpu import plot
from simulations import gray_scott

SCRIPT = "gray_scott_sensitivity"
PARAMETERS = ("F", "k")
UNITS = {"F": "1/time", "k": "1/time"}


def build_parser():
    p = _common.parser(SCRIPT, __doc__.split("\n\n")[0])
    p.add_argument("--cells", type=int, default=64, help="cells per side")
    p.add_argument("--steps", type=int, default=1000, help="number of time steps (dt = 1)")
    p.add_argument("--F", type=float, default=0.035, help="feed rate [1/time]")
    p.add_argument("--k", type=float, default=0.065, help="kill rate [1/time]")
    p.add_argument("--seed", type=int, default=0, help="seed of the initial noise")
    p.add_argument("--segments", type=int, default=20,
                   help="the run is split into this many pieces for the progress bar")
    return p


def run(u0, v0, F, k, *, args, progress=False):
    """Return the final concentrations ``(u, v)``."""
    u, v = u0, v0
    for length in _common.segments(args.steps, args.segments, progress):
        u, v = gray_scott.simulate(u, v, n_steps=length, F=F, k=k)
    return u, v


def main(argv=None):
    args = build_parser().parse_args(argv)
    figures = _common.setup(args)
    u0, v0 = gray_scott.default_initial_state(args.cells, seed=args.seed)
    values = [args.F, args.k]
    start = time.perf_counter()

    def f(F, k):
        return run(u0, v0, F, k, args=args, progress=args.progress)[1]

    dF, dk = _common.jacfwd(f, argnums=(0, 1), chunk_size=args.chunk_size,
                            progress=args.progress)(*values)
    v = f(*values)
    seconds = _common.elapsed(start)
    y = float(v.mean())
    output = "mean final autocatalyst concentration v̄(T)"
    rows = _common.print_table(output, y, PARAMETERS, values, [dF.mean(), dk.mean()],
                               [UNITS[p] for p in PARAMETERS])
    print(f"({args.cells}×{args.cells} cells, {args.steps} steps of dt = 1; derivatives in "
          f"{seconds:.1f} s on the {args.backend} backend)")

    extent = (0.0, float(args.cells), 0.0, float(args.cells))
    fig, axes = _common.figure(1, 3, size=(17.0, 5.0))
    plot.sensitivity_field(v.T, ax=axes[0, 0], extent=extent, xlabel="x [cells]",
                           ylabel="y [cells]", colorbar_label="v(T) [concentration]",
                           title=f"Autocatalyst v after {args.steps} steps")
    plot.sensitivity_field(dF.T, ax=axes[0, 1], extent=extent, xlabel="x [cells]",
                           ylabel="y [cells]", colorbar_label="∂v/∂F [concentration × time]",
                           title=f"Sensitivity ∂v(T)/∂F  (feed F = {args.F:g})")
    plot.sensitivity_field(dk.T, ax=axes[0, 2], extent=extent, xlabel="x [cells]",
                           ylabel="y [cells]", colorbar_label="∂v/∂k [concentration × time]",
                           title=f"Sensitivity ∂v(T)/∂k  (kill k = {args.k:g})")
    fig.suptitle("Gray-Scott reaction-diffusion: the final pattern and where it depends on "
                 "the feed and kill rates (red: v grows with the parameter)")
    figures.save(fig, "sensitivity_fields")

    figures.save(plot.parameter_ranking(
        [f"{p} = {v_:g} {UNITS[p]}" for p, v_ in zip(PARAMETERS, values)],
        [dF.mean(), dk.mean()], relative=np.array(values), output_value=y,
        output_name="v̄(T)",
        title="Which rate moves the mean autocatalyst concentration most"),
        "parameter_ranking")
    figures.report()
    return {"output": output, "value": y, "rows": rows, "figures": figures.paths,
            "seconds": seconds}


if __name__ == "__main__":
    main()
