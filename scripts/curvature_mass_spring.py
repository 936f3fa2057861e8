"""Curvature of a swinging chain's energy with respect to stiffness and damping.

A horizontal chain pinned at its left end falls and swings under gravity for ``--steps``
symplectic Euler steps (``simulations.mass_spring``). Forward over forward (nested duals)
gives the gradient and the 2 x 2 Hessian of the chain's mechanical energy E(T) at the end
(kinetic, gravitational and elastic) with respect to the spring stiffness k and the dashpot
damping c. The script compares the quadratic model E0 + g·Δp + ½ Δpᵀ H Δp (and the linear
one) with the simulation itself on a grid of (k, c) around the nominal values.

Prints the gradient, the Hessian (also scaled by the parameters, in joules) and how far
each model is from the simulation on the grid; saves the simulated output over the grid
with the quadratic model's contours, and slices along each parameter.

Example::

    python3 scripts/curvature_mass_spring.py --nodes 32 --steps 3000 --span 0.5
"""
import time

import numpy as np

try:
    from . import _common
except ImportError:
    import _common

import dualgpu
from simulations import mass_spring

SCRIPT = "curvature_mass_spring"
PARAMETERS = ("k", "c")
UNITS = {"k": "N/m", "c": "N s/m"}


def build_parser():
    p = _common.parser(SCRIPT, __doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=16, help="number of nodes")
    p.add_argument("--steps", type=int, default=1000, help="number of time steps")
    p.add_argument("--dt", type=float, default=2.0e-4, help="time step [s]")
    p.add_argument("--k", type=float, default=1000.0, help="spring stiffness [N/m]")
    p.add_argument("--c", type=float, default=0.1, help="dashpot damping [N s/m]")
    p.add_argument("--span", type=float, default=0.3,
                   help="the grid spans each parameter by ± this fraction of its value")
    p.add_argument("--grid", type=int, default=9, help="grid points per parameter")
    return p


def final_energy(params, pos0, vel0, pinned, args):
    """E(T), the chain's mechanical energy after the run [J], of params = (k, c)."""
    k, c = params[0], params[1]
    pos, vel = mass_spring.simulate(pos0, vel0, pinned, n_steps=args.steps, k=k, c=c,
                                    dt=args.dt)
    return mass_spring.energy(pos, vel, k=k)


def main(argv=None):
    args = build_parser().parse_args(argv)
    figures = _common.setup(args)
    pos0, vel0, pinned = mass_spring.default_initial_state(args.nodes, 0.05)
    p0 = np.array([args.k, args.c])

    def output(params):
        return final_energy(params, pos0, vel0, pinned, args)

    start = time.perf_counter()
    y0 = float(output(p0))
    gradient = dualgpu.jacobian(output, p0, progress=False)
    hessian = dualgpu.hessian(output, p0, progress=False)
    seconds = _common.elapsed(start)

    print(f"\nCurvature of the chain's final energy E(T) = {y0:.10g} J "
          f"({args.nodes} nodes, {args.steps} steps of dt = {args.dt:g} s; gradient and "
          f"Hessian in {seconds:.1f} s on the {args.backend} backend)")
    print(f"{'':>12} {'value':>12} {'dE/dp':>17} {'d²E/dp dk':>17} {'d²E/dp dc':>17}")
    for i, name in enumerate(PARAMETERS):
        label = f"{name} [{UNITS[name]}]"
        print(f"{label:>12} {p0[i]:>12.6g} {gradient[i]:>17.10e} {hessian[i, 0]:>17.10e} "
              f"{hessian[i, 1]:>17.10e}")
    scaled = hessian * np.outer(p0, p0)
    print("scaled Hessian p_i p_j d²E/dp_i dp_j [J] (the change of E per relative change²):")
    print(np.array2string(scaled, precision=4))
    print(f"eigenvalues of the scaled Hessian: {np.linalg.eigvalsh(scaled)}")

    # the simulation on a grid, against the linear and the quadratic model
    axes_values = [p0[i] * np.linspace(1 - args.span, 1 + args.span, args.grid) for i in range(2)]
    K, C = np.meshgrid(*axes_values, indexing="ij")
    simulated = np.array([[float(output(np.array([k, c]))) for k, c in zip(rk, rc)]
                          for rk, rc in zip(K, C)])
    dk, dc = K - p0[0], C - p0[1]
    linear = y0 + gradient[0] * dk + gradient[1] * dc
    quadratic = linear + 0.5 * (hessian[0, 0] * dk * dk + 2 * hessian[0, 1] * dk * dc
                                + hessian[1, 1] * dc * dc)
    errors = {"linear": np.abs(simulated - linear).max(),
              "quadratic": np.abs(simulated - quadratic).max()}
    print(f"\nOn the {args.grid} x {args.grid} grid (±{100 * args.span:g} % of k and c), the "
          f"largest distance to the simulation: linear model {errors['linear']:.3e} J, "
          f"quadratic model {errors['quadratic']:.3e} J (range of E: "
          f"{simulated.max() - simulated.min():.3e} J)")

    _surface(figures, K, C, simulated, quadratic, p0, y0)
    _slices(figures, axes_values, p0, y0, gradient, hessian, output)
    figures.report()
    return {"value": y0, "gradient": gradient, "hessian": hessian, "grid": (K, C),
            "simulated": simulated, "errors": errors, "figures": figures.paths,
            "seconds": seconds}


def _surface(figures, K, C, simulated, quadratic, p0, y0):
    fig, axes = _common.figure(1, 2, size=(11.0, 4.6))
    ax = axes[0, 0]
    mesh = ax.pcolormesh(K, C, simulated, shading="auto", cmap="viridis")
    fig.colorbar(mesh, ax=ax, label="E(T) simulated [J]")
    levels = np.linspace(simulated.min(), simulated.max(), 9)[1:-1]
    ax.contour(K, C, simulated, levels=levels, colors="white", linewidths=1.0)
    ax.contour(K, C, quadratic, levels=levels, colors="red", linewidths=1.2, linestyles="--")
    ax.plot([p0[0]], [p0[1]], marker="+", color="red", markersize=12)
    ax.set_xlabel("stiffness k [N/m]")
    ax.set_ylabel("damping c [N s/m]")
    ax.set_title("simulation (white), quadratic model (red, dashed)")
    ax = axes[0, 1]
    error = np.abs(simulated - quadratic)
    mesh = ax.pcolormesh(K, C, error, shading="auto", cmap="magma")
    fig.colorbar(mesh, ax=ax, label="|simulation − quadratic model| [J]")
    ax.plot([p0[0]], [p0[1]], marker="+", color="cyan", markersize=12)
    ax.set_xlabel("stiffness k [N/m]")
    ax.set_ylabel("damping c [N s/m]")
    ax.set_title("error of the second-order model")
    fig.suptitle(f"Final energy of the chain around k = {p0[0]:g}, c = {p0[1]:g} "
                 f"(E0 = {y0:.4g} J)")
    figures.save(fig, "surface_and_quadratic_model")


def _slices(figures, axes_values, p0, y0, gradient, hessian, output):
    fig, axes = _common.figure(1, 2, size=(11.0, 4.2))
    for i, name in enumerate(PARAMETERS):
        ax = axes[0, i]
        values = axes_values[i]
        fine = np.linspace(values[0], values[-1], 4 * len(values))
        d = fine - p0[i]
        simulated = []
        for v in values:
            p = p0.copy()
            p[i] = v
            simulated.append(float(output(p)))
        ax.plot(values, simulated, "o", color="black", label="simulation")
        ax.plot(fine, y0 + gradient[i] * d, color="tab:blue", label="linear model")
        ax.plot(fine, y0 + gradient[i] * d + 0.5 * hessian[i, i] * d * d, "--",
                color="tab:red", label="quadratic model")
        ax.axvline(p0[i], color="grey", linewidth=0.8)
        ax.set_xlabel(f"{name} [{UNITS[name]}]")
        ax.set_ylabel("E(T) [J]")
        ax.set_title(f"along {name} (other parameter nominal)")
        ax.legend()
    fig.suptitle("First- and second-order models of the chain's final energy")
    figures.save(fig, "slices")


if __name__ == "__main__":
    main()
