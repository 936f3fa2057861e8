"""Sensitivity of a nonlinear Schrödinger pulse to its nonlinearity, trap, width and chirp.

A chirped Gaussian pulse evolves under the 1-D nonlinear Schrödinger equation in a harmonic
trap (``simulations.nls_split_step``: split-step Fourier, the nonlinear phase a numba.cuda
kernel on the complex field, the dispersion by ``np.fft``). Forward-mode AD with complex duals
gives, in one pass of four tangent lanes, the derivative of the final density ``|psi(x, T)|^2``
at every point with respect to the nonlinearity ``g``, the trap strength ``v0``, the initial
width and the initial chirp.

Prints the sensitivities of the final peak-centre density ``|psi(0, T)|^2`` and saves three
figures: the initial and final densities, the sensitivity fields and a parameter ranking.
Complex duals run compiled on the cpu backend (the default here) and on cudasim; the cuda
backend runs the plain simulation only (complex dual launches on a GPU are not enabled yet).

Example::

    python3 scripts/nls_sensitivity.py --points 64 --steps 200
"""
import time

import numpy as np

try:
    from . import _common
except ImportError:
    import _common

from dualgpu import plot
from simulations import nls_split_step as nls

SCRIPT = "nls_sensitivity"
PARAMETERS = ("g", "v0", "width", "chirp")
DESCRIPTIONS = {"g": "nonlinearity", "v0": "trap strength", "width": "initial width",
                "chirp": "initial chirp"}


def build_parser():
    p = _common.parser(SCRIPT, __doc__.split("\n\n")[0])
    p.add_argument("--points", type=int, default=64, help="grid points n (a power of two)")
    p.add_argument("--length", type=float, default=20.0, help="length of the periodic box")
    p.add_argument("--steps", type=int, default=100, help="number of split steps")
    p.add_argument("--dt", type=float, default=0.01, help="time step")
    p.add_argument("--g", type=float, default=1.0,
                   help="nonlinearity g (> 0 defocusing, < 0 focusing)")
    p.add_argument("--v0", type=float, default=0.5, help="harmonic trap strength v0")
    p.add_argument("--width", type=float, default=1.0, help="initial pulse width")
    p.add_argument("--chirp", type=float, default=0.2, help="initial chirp (phase c x^2)")
    p.set_defaults(backend="cpu")  # complex duals: cpu and cudasim (not yet launched on GPUs)
    return p


def density(args, g, v0, width, chirp):
    """Return the final density ``|psi(x, T)|^2`` for the options and parameters."""
    x, _, k = nls.grid(args.points, args.length)
    psi = nls.simulate(nls.initial_state(x, width, chirp), g=g, v0=v0, dt=args.dt,
                       n_steps=args.steps, x=x, k=k)
    return np.abs(psi) ** 2


def main(argv=None):
    args = build_parser().parse_args(argv)
    figures = _common.setup(args)
    x, dx, _ = nls.grid(args.points, args.length)
    values = [getattr(args, name) for name in PARAMETERS]
    centre = args.points // 2  # x = 0
    start = time.perf_counter()

    def simulate_params(g, v0, width, chirp):
        return density(args, g, v0, width, chirp)

    fields = np.stack(_common.jacfwd(simulate_params, argnums=(0, 1, 2, 3))(*values))  # (4, n)
    final = density(args, *values)
    seconds = _common.elapsed(start)
    initial = np.abs(nls.initial_state(x, args.width, args.chirp)) ** 2

    output = "centre density |psi(0, T)|^2"
    rows = _common.print_table(output, float(final[centre]), PARAMETERS, values,
                               fields[:, centre])
    T = args.steps * args.dt
    print(f"(n = {args.points} points, {args.steps} steps of dt = {args.dt:g}, T = {T:g}; norm "
          f"{np.sum(final) * dx:.12f}; derivatives in {seconds:.1f} s on the {args.backend} "
          "backend)")

    fig, axes = _common.figure(1, 1)
    ax = axes[0, 0]
    ax.plot(x, initial, label="|ψ(x, 0)|²", color="0.5", linestyle="--")
    ax.plot(x, final, label=f"|ψ(x, T)|², T = {T:g}")
    ax.set_xlabel("position x")
    ax.set_ylabel("density |ψ|²")
    ax.set_title(f"Nonlinear Schrödinger pulse: g = {args.g:g}, v0 = {args.v0:g}, width = "
                 f"{args.width:g}, chirp = {args.chirp:g}")
    ax.legend()
    figures.save(fig, "densities")

    fig, axes = _common.figure(4, 1, size=(7.5, 11.0))
    for p, ax in zip(range(4), axes[:, 0]):
        name = PARAMETERS[p]
        plot.sensitivity_field(
            fields[p], ax=ax, extent=(x[0], x[-1]), xlabel="position x",
            colorbar_label=f"∂|ψ(x, T)|²/∂{name}",
            title=f"Sensitivity of the final density to the {DESCRIPTIONS[name]} {name} = "
                  f"{values[p]:g}")
    fig.suptitle(f"1-D nonlinear Schrödinger equation, T = {T:g}: where each parameter "
                 "matters")
    figures.save(fig, "sensitivity_fields")

    figures.save(plot.parameter_ranking(
        [f"{p} = {v:g}" for p, v in zip(PARAMETERS, values)], fields[:, centre],
        relative=np.array(values), output_value=float(final[centre]),
        output_name="|ψ(0, T)|²",
        title="Which parameter moves the centre density most"), "parameter_ranking")
    figures.report()
    return {"output": output, "value": float(final[centre]), "rows": rows,
            "figures": figures.paths, "seconds": seconds, "fields": fields}


if __name__ == "__main__":
    main()
