"""Sensitivity of an ensemble of damped driven pendulums to their shared parameters.

``--members`` pendulums start at rest at angles spread over [-pi/2, pi/2] and share the damping,
the drive amplitude, the drive frequency and g/L (``simulations.pendulums``). One forward-mode
pass with four tangent lanes gives the derivative of every member's final angle with respect
to each shared parameter.

Prints the sensitivities of the ensemble's mean final angle and saves the sensitivity of each
member (against its initial angle), a histogram of their magnitudes, and a parameter ranking.
In the chaotic regime (the defaults, long runs) the sensitivities of neighbouring members
differ by orders of magnitude. A second pass (``dualgpu.ensemble_jacobian``, two lanes for all
members at once) gives each member's sensitivity to its own initial angle and velocity: how
much a small error in its start grows by time T.

Example::

    python3 scripts/pendulum_sensitivity.py --members 4096 --steps 3000
"""
import time

import numpy as np

try:
    from . import _common
except ImportError:
    import _common

import dualgpu
from dualgpu import plot
from simulations import pendulums

SCRIPT = "pendulum_sensitivity"
PARAMETERS = ("damping", "drive_amplitude", "drive_frequency", "g_over_l")
UNITS = {"damping": "1/s", "drive_amplitude": "rad/s²", "drive_frequency": "rad/s",
         "g_over_l": "1/s²"}


def build_parser():
    p = _common.parser(SCRIPT, __doc__.split("\n\n")[0])
    p.add_argument("--members", type=int, default=512, help="number of pendulums")
    p.add_argument("--steps", type=int, default=1000, help="number of RK4 steps")
    p.add_argument("--dt", type=float, default=0.01, help="time step [s]")
    p.add_argument("--damping", type=float, default=0.5, help="damping rate [1/s]")
    p.add_argument("--drive-amplitude", type=float, default=1.2,
                   help="drive amplitude [rad/s²]")
    p.add_argument("--drive-frequency", type=float, default=2.0 / 3.0,
                   help="drive angular frequency [rad/s]")
    p.add_argument("--g-over-l", type=float, default=1.0, help="g / L [1/s²]")
    p.add_argument("--segments", type=int, default=20,
                   help="the run is split into this many pieces for the progress bar")
    return p


def run(theta0, omega0, damping, amplitude, frequency, g_over_l, *, args, progress=False):
    """Return the final angles of every member."""
    theta, omega, done = theta0, omega0, 0
    for length in _common.segments(args.steps, args.segments, progress):
        theta, omega = pendulums.simulate(
            theta, omega, n_steps=length, dt=args.dt, damping=damping,
            drive_amplitude=amplitude, drive_frequency=frequency, g_over_l=g_over_l,
            t0=done * args.dt)
        done += length
    return theta


def main(argv=None):
    args = build_parser().parse_args(argv)
    figures = _common.setup(args)
    theta0, omega0 = pendulums.default_initial_state(args.members)
    values = [args.damping, args.drive_amplitude, args.drive_frequency, args.g_over_l]
    start = time.perf_counter()

    def f(*params):
        return run(theta0, omega0, *params, args=args, progress=args.progress)

    J = np.stack(_common.jacfwd(f, argnums=(0, 1, 2, 3), chunk_size=args.chunk_size,
                                progress=args.progress)(*values))     # (4, members)
    theta = run(theta0, omega0, *values, args=args)

    def final_angle(theta_start, omega_start):
        return run(theta_start, omega_start, *values, args=args, progress=args.progress)

    # each member's d theta(T) / d (theta(0), omega(0)): members x 1 output x 2 inputs
    own = dualgpu.ensemble_jacobian(final_angle, theta0, omega0, argnums=(0, 1),
                                    progress=args.progress)[:, 0, :]
    seconds = _common.elapsed(start)
    T = args.steps * args.dt
    y = float(theta.mean())
    output = "mean final angle θ̄(T) [rad]"
    rows = _common.print_table(output, y, PARAMETERS, values, J.mean(axis=1),
                               [UNITS[p] for p in PARAMETERS])
    print(f"({args.members} members, {args.steps} steps of dt = {args.dt:g} s, T = {T:g} s; "
          f"derivatives in {seconds:.1f} s on the {args.backend} backend)")
    print(f"Each member's |∂θ(T)/∂θ(0)|: median {np.median(np.abs(own[:, 0])):.3g}, largest "
          f"{np.max(np.abs(own[:, 0])):.3g} (an error in the start grows by this factor)")

    fig, axes = _common.figure(len(PARAMETERS), 1, size=(8.0, 10.0))
    for p, ax in enumerate(axes[:, 0]):
        plot.sensitivity_field(
            J[p], ax=ax, extent=(theta0[0], theta0[-1]), xlabel="initial angle θ(0) [rad]",
            colorbar_label=f"∂θ(T)/∂{PARAMETERS[p]}\n[rad/({UNITS[PARAMETERS[p]]})]",
            scale="symlog",
            title=f"{PARAMETERS[p]} = {values[p]:.4g} {UNITS[PARAMETERS[p]]}")
    fig.suptitle(f"Sensitivity of each pendulum's final angle (T = {T:g} s) to the shared "
                 "parameters")
    figures.save(fig, "sensitivity_over_members")

    fig, axes = _common.figure(size=(7.5, 4.5))
    ax = axes[0, 0]
    magnitudes = np.log10(np.abs(J) + 1e-300)
    finite = magnitudes[magnitudes > -300]
    bins = np.linspace(finite.min(), finite.max(), 40) if finite.size else 10
    for p, name in enumerate(PARAMETERS):
        ax.hist(magnitudes[p][magnitudes[p] > -300], bins=bins, histtype="step",
                linewidth=1.6, label=name)
    ax.set_xlabel("log10 |∂θ(T)/∂p|  (θ in rad, p in its own unit)")
    ax.set_ylabel("number of pendulums")
    ax.set_title(f"Spread of the sensitivities over the {args.members} members")
    ax.legend(fontsize=9)
    ax.grid(alpha=0.3)
    figures.save(fig, "sensitivity_histogram")

    fig, axes = _common.figure(size=(7.5, 4.5))
    ax = axes[0, 0]
    for k, (name, style) in enumerate((("θ(0)", "-"), ("ω(0)", "--"))):
        ax.semilogy(theta0, np.abs(own[:, k]), style, linewidth=1.4,
                    label=f"|∂θ(T)/∂{name}|  [{'rad/rad' if k == 0 else 's'}]")
    ax.axhline(1.0, color="0.4", linewidth=0.8)
    ax.set_xlabel("initial angle θ(0) [rad]")
    ax.set_ylabel("sensitivity to the member's own start")
    ax.set_title(f"How a small error in each pendulum's start grows by T = {T:g} s\n"
                 "(dualgpu.ensemble_jacobian: all members in one pass, 2 lanes)")
    ax.legend(fontsize=9)
    ax.grid(alpha=0.3, which="both")
    figures.save(fig, "initial_state_sensitivity")

    figures.save(plot.parameter_ranking(
        list(PARAMETERS), J.mean(axis=1),
        relative=np.array(values), output_value=y, output_name="θ̄(T)",
        title="Shared parameters ranked by effect on the mean final angle"),
        "parameter_ranking")
    figures.report()
    return {"output": output, "value": y, "rows": rows, "figures": figures.paths,
            "seconds": seconds, "initial_state_jacobian": own}


if __name__ == "__main__":
    main()
