"""Calibrate pendulum parameters to noisy observations, with forward-mode Jacobians.

An ensemble of ``--members`` damped, driven pendulums (``simulations.pendulums``) is observed:
every member's angle at ``--observations`` times, with Gaussian noise of ``--noise`` rad, for
known true values of the damping, the drive amplitude and g/L. Starting from a guess off by
20-30 %, ``scipy.optimize.least_squares`` fits the three parameters twice: once with the
Jacobian of the residuals from ``dualgpu.jacfwd`` (one run of the simulation with three dual
lanes), once with ``jac="2-point"`` finite differences (three extra runs per Jacobian). The
script prints the iterations, simulation runs and time of each fit, the fitted values with
their 1-sigma uncertainty from ``s² (JᵀJ)⁻¹``, and saves the fit against the data, the
parameter uncertainty, and the prediction's error band from ``dualgpu.propagate``
(``J Σ Jᵀ`` of the predicted angles, including a forecast past the last observation).

Example::

    python3 scripts/calibrate_pendulum.py --members 16 --observations 60 --noise 0.02
"""
import math
import time

import numpy as np
from scipy.optimize import least_squares

try:
    from . import _common
except ImportError:
    import _common

import dualgpu
from dualgpu import cuda, plot
from simulations import pendulums

SCRIPT = "calibrate_pendulum"
PARAMETERS = ("damping", "drive_amplitude", "g_over_l")
UNITS = {"damping": "1/s", "drive_amplitude": "rad/s²", "g_over_l": "1/s²"}
GUESS_OFFSETS = np.array([0.3, -0.25, 0.2])  # the start: truth x (1 + offset x --guess-offset)


def build_parser():
    p = _common.parser(SCRIPT, __doc__.split("\n\n")[0])
    p.add_argument("--members", type=int, default=8, help="number of observed pendulums")
    p.add_argument("--steps", type=int, default=1500, help="RK4 steps up to the last observation")
    p.add_argument("--dt", type=float, default=0.01, help="time step [s]")
    p.add_argument("--observations", type=int, default=40,
                   help="observation times per member, evenly spread up to the last step")
    p.add_argument("--noise", type=float, default=0.05,
                   help="standard deviation of the observation noise [rad]")
    p.add_argument("--seed", type=int, default=0, help="seed of the observation noise")
    p.add_argument("--damping", type=float, default=0.3, help="true damping rate [1/s]")
    p.add_argument("--drive-amplitude", type=float, default=0.8,
                   help="true drive amplitude [rad/s²]")
    p.add_argument("--g-over-l", type=float, default=1.5, help="true g / L [1/s²]")
    p.add_argument("--drive-frequency", type=float, default=2.0 / 3.0,
                   help="drive angular frequency, known [rad/s]")
    p.add_argument("--guess-offset", type=float, default=1.0,
                   help="scales how far the initial guess is from the truth (+30 %%, -25 %%, "
                        "+20 %% at 1)")
    p.add_argument("--forecast", type=float, default=0.5,
                   help="the error-band figure predicts this fraction of the observed time "
                        "past the last observation")
    return p


# ---------------------------------------------------------------- the model

@cuda.jit
def record(history, row, theta):
    """Copy every member's angle into row ``row`` of ``history``."""
    i = cuda.grid(1)
    if i < theta.shape[0]:
        history[row, i] = theta[i]


class Model:
    """The observed angles as a function of the parameter vector, counting its runs.

    ``angles(p)`` runs the ensemble from its initial state and returns the angles at the
    observation steps, shape ``(times, members)``. ``p = (damping, drive_amplitude,
    g_over_l)`` is an array, so ``dualgpu.jacfwd(model.angles)(p)`` gives the Jacobian
    ``(times, members, 3)`` in one run with three lanes.
    """

    def __init__(self, args, record_steps):
        self.args = args
        self.record_steps = np.asarray(record_steps)
        self.theta0 = np.linspace(-1.0, 1.0, args.members)
        self.omega0 = np.zeros(args.members)
        self.runs = {"plain": 0, "dual": 0}

    def angles(self, p):
        self.runs["dual" if isinstance(p, dualgpu.DualArray) else "plain"] += 1
        a = self.args
        members = a.members
        blocks = math.ceil(members / pendulums.THREADS_PER_BLOCK)
        threads = pendulums.THREADS_PER_BLOCK
        theta = cuda.to_device(self.theta0)
        omega = cuda.to_device(self.omega0)
        history = cuda.device_array((len(self.record_steps), members))
        damping, amplitude, g_over_l = p[0], p[1], p[2]
        row = 0
        for step in range(int(self.record_steps[-1]) + 1):
            while row < len(self.record_steps) and self.record_steps[row] == step:
                record[blocks, threads](history, row, theta)
                row += 1
            if step == self.record_steps[-1]:
                break
            pendulums.advance[blocks, threads](theta, omega, step * a.dt, a.dt, damping,
                                               amplitude, a.drive_frequency, g_over_l)
        return history.copy_to_host()


def observation_steps(args):
    """The steps at which the members are observed: evenly spread, the last at ``--steps``."""
    return np.unique(np.linspace(0, args.steps, args.observations + 1)[1:].round().astype(int))


# ---------------------------------------------------------------- fitting

def fit(model, data, x0, jac):
    """Return ``(result, seconds, runs)`` of one least-squares fit."""
    model.runs = {"plain": 0, "dual": 0}

    def residuals(p):
        return (model.angles(p) - data).ravel()

    start = time.perf_counter()
    result = least_squares(residuals, x0, jac=jac)
    return result, _common.elapsed(start), dict(model.runs)


def covariance(J, residual, n_parameters):
    """Return ``(cov, s²)``: the parameters' covariance ``s² (JᵀJ)⁻¹`` at the optimum.

    ``s²`` estimates the noise variance from the residuals, ``|r|² / (m - p)``.
    """
    m = residual.size
    s2 = float(residual @ residual) / (m - n_parameters)
    return s2 * np.linalg.inv(J.T @ J), s2


def main(argv=None):
    args = build_parser().parse_args(argv)
    figures = _common.setup(args)
    steps = observation_steps(args)
    model = Model(args, steps)
    truth = np.array([args.damping, args.drive_amplitude, args.g_over_l])
    x0 = truth * (1.0 + args.guess_offset * GUESS_OFFSETS)
    rng = np.random.default_rng(args.seed)
    clean = model.angles(truth)
    data = clean + args.noise * rng.standard_normal(clean.shape)

    jacobian_of_angles = dualgpu.jacfwd(model.angles, chunk_size=args.chunk_size,
                                        progress=args.progress)

    def jac(p):
        return jacobian_of_angles(p).reshape(-1, len(truth))

    start = time.perf_counter()  # compile the plain and the dual kernels once, untimed
    model.angles(x0)
    jac(x0)
    warm_up = _common.elapsed(start)

    ad, ad_seconds, ad_runs = fit(model, data, x0, jac)
    fd, fd_seconds, fd_runs = fit(model, data, x0, "2-point")
    J = jac(ad.x)
    cov, s2 = covariance(J, ad.fun, len(truth))
    sigma = np.sqrt(np.diag(cov))

    times = steps * args.dt
    print(f"\nCalibration of {len(truth)} pendulum parameters to {data.size} noisy angles "
          f"({args.members} members x {len(steps)} times up to T = {times[-1]:g} s, noise "
          f"{args.noise:g} rad; {args.backend} backend)")
    header = f"{'':<34} {'dualgpu.jacfwd':>16} {'2-point FD':>12}"
    print(header)
    print("-" * len(header))
    fd_jacobian_runs = fd_runs["plain"] - fd.nfev
    rows = [
        ("iterations (Jacobian evaluations)", ad.njev, fd.njev),
        ("residual evaluations (nfev)", ad.nfev, fd.nfev),
        ("simulation runs: plain", ad_runs["plain"], fd_runs["plain"]),
        ("simulation runs: dual (3 lanes)", ad_runs["dual"], fd_runs["dual"]),
        ("time [s]", f"{ad_seconds:.2f}", f"{fd_seconds:.2f}"),
        ("final cost ½|r|²", f"{ad.cost:.6g}", f"{fd.cost:.6g}"),
    ]
    for label, a, b in rows:
        print(f"{label:<34} {a!s:>16} {b!s:>12}")
    print(f"(compilation before the fits, untimed: {warm_up:.1f} s; each FD Jacobian costs "
          f"{len(truth)} plain runs, each dualgpu Jacobian one run with {len(truth)} lanes)")

    print(f"\n{'parameter':<26} {'true':>8} {'start':>8} {'fit ± 1σ':>22} {'FD fit':>10} "
          f"{'|fit - true| / σ':>17}")
    table = []
    for name, t, s, a, e, b in zip(PARAMETERS, truth, x0, ad.x, sigma, fd.x):
        label = f"{name} [{UNITS[name]}]"
        z = abs(a - t) / e
        print(f"{label:<26} {t:>8.4g} {s:>8.4g} {f'{a:.5f} ± {e:.5f}':>22} {b:>10.5f} "
              f"{z:>17.2f}")
        table.append({"name": name, "true": float(t), "start": float(s), "fit": float(a),
                      "sigma": float(e), "fd_fit": float(b)})
    print(f"(σ from s² (JᵀJ)⁻¹ with s = {math.sqrt(s2):.4g} rad estimated from the residuals; "
          f"the noise was {args.noise:g} rad)")

    figures.save(_fit_figure(args, model, data, times, truth, x0, ad.x), "fit_vs_data")
    figures.save(_uncertainty_figure(truth, x0, ad.x, fd.x, cov), "parameter_uncertainty")
    figures.save(_error_band_figure(args, times, truth, ad.x, cov), "error_band")
    figures.report()
    return {"parameters": table, "cov": cov, "truth": truth, "fit": ad.x, "fd_fit": fd.x,
            "ad": {"njev": ad.njev, "nfev": ad.nfev, "runs": ad_runs, "seconds": ad_seconds,
                   "cost": ad.cost},
            "fd": {"njev": fd.njev, "nfev": fd.nfev, "runs": fd_runs, "seconds": fd_seconds,
                   "cost": fd.cost, "jacobian_runs": fd_jacobian_runs},
            "figures": figures.paths}


# ---------------------------------------------------------------- figures

def _shown_members(members):
    return sorted(set(np.linspace(0, members - 1, min(members, 4)).round().astype(int)))


def _fit_figure(args, model, data, times, truth, x0, fitted):
    dense = Model(args, np.arange(0, args.steps + 1, max(1, args.steps // 300)))
    t_dense = dense.record_steps * args.dt
    curves = {"true parameters": (dense.angles(truth), "0.2", "-"),
              "start of the fit": (dense.angles(x0), "0.55", ":"),
              "fitted (dualgpu.jacfwd)": (dense.angles(fitted), plot.POSITIVE_COLOR, "--")}
    shown = _shown_members(args.members)
    fig, axes = _common.figure(len(shown), 1, size=(8.0, 2.3 * len(shown) + 0.8))
    for ax, i in zip(axes[:, 0], shown):
        ax.errorbar(times, data[:, i], yerr=args.noise, fmt="o", markersize=3, color="0.35",
                    elinewidth=0.8, label=f"observations (± {args.noise:g} rad)")
        for label, (angles, colour, style) in curves.items():
            ax.plot(t_dense, angles[:, i], style, color=colour, linewidth=1.5, label=label)
        ax.set_ylabel(f"θ of member {i} [rad]")
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=8, ncols=2)
    axes[-1, 0].set_xlabel("time t [s]")
    fig.suptitle("Pendulum angles: noisy observations and the least-squares fit")
    return fig


def _uncertainty_figure(truth, x0, fitted, fd_fit, cov):
    sigma = np.sqrt(np.diag(cov))
    fig, axes = _common.figure(1, 2, size=(12.0, 4.2))
    ax = axes[0, 0]
    y = np.arange(len(PARAMETERS))[::-1]
    for k, alpha in ((2, 0.25), (1, 0.5)):
        ax.barh(y, 2 * k, left=-k, height=0.5, color=plot.NEGATIVE_COLOR, alpha=alpha,
                label=f"± {k} σ")
    ax.plot((fitted - truth) / sigma, y, "o", color="black", label="fit (dualgpu.jacfwd)")
    ax.plot((fd_fit - truth) / sigma, y, "x", color=plot.POSITIVE_COLOR, markersize=9,
            label="fit (2-point FD)")
    ax.axvline(0.0, color="0.3", linewidth=1.0, label="true value")
    ax.set_yticks(y, [f"{n} = {v:.4g} ± {s:.2g}" for n, v, s in zip(PARAMETERS, fitted, sigma)])
    ax.set_xlabel("(fitted - true) / σ")
    limit = max(3.5, float(np.max(np.abs((fitted - truth) / sigma))) + 0.5)
    ax.set_xlim(-limit, limit)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title("Fitted parameters: distance from the truth in standard deviations")
    correlation = cov / np.outer(sigma, sigma)
    plot.jacobian_heatmap(correlation, ax=axes[0, 1], output_labels=list(PARAMETERS),
                          input_labels=list(PARAMETERS), output_name="parameter",
                          input_name="parameter", colorbar_label="correlation",
                          title="Correlation of the fitted parameters")
    # correlations are compared with -1 and 1: the full diverging scale, also when all are > 0
    axes[0, 1].images[0].set_cmap(plot.DIVERGING_CMAP)
    axes[0, 1].images[0].set_clim(-1.0, 1.0)
    fig.suptitle("Parameter uncertainty from s² (JᵀJ)⁻¹, J from dualgpu.jacfwd")
    return fig


def _error_band_figure(args, times, truth, fitted, cov):
    """The fitted model's error band (propagated) around it, and the truth's deviation from it."""
    horizon = int(round(args.steps * (1.0 + args.forecast)))
    dense = Model(args, np.arange(0, horizon + 1, max(1, horizon // 300)))
    t_dense = dense.record_steps * args.dt
    predicted = dense.angles(fitted)
    std = np.sqrt(dualgpu.propagate(dense.angles, cov, fitted, diagonal=True,
                                    progress=args.progress))
    deviation = dense.angles(truth) - predicted
    shown = _shown_members(args.members)
    fig, axes = _common.figure(len(shown), 1, size=(8.0, 2.1 * len(shown) + 1.0))
    for ax, i in zip(axes[:, 0], shown):
        for k, alpha in ((2, 0.2), (1, 0.4)):
            ax.fill_between(t_dense, -k * std[:, i], k * std[:, i], color=plot.NEGATIVE_COLOR,
                            alpha=alpha, linewidth=0, label=f"± {k} σ of the prediction")
        ax.plot(t_dense, deviation[:, i], color="0.15", linewidth=1.2,
                label="truth - fitted model")
        ax.axhline(0.0, color=plot.NEGATIVE_COLOR, linewidth=0.8)
        ax.axvline(times[-1], color="0.3", linewidth=0.8, linestyle=":")
        ax.set_ylabel(f"member {i}\nθ - θ_fit [rad]")
        ax.grid(alpha=0.3)
    fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="outside lower center", ncols=3,
               fontsize=8, frameon=False)
    axes[-1, 0].set_xlabel("time t [s]  (dotted line: last observation; after it, a forecast)")
    fig.suptitle("Prediction error band: the angles' standard deviation from the fitted "
                 "parameters' covariance,\nJ Σ Jᵀ by dualgpu.propagate, against the true error")
    return fig


if __name__ == "__main__":
    main()
