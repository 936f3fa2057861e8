"""The JAX bridge (dualgpu.interop.to_jax), side by side: how thin is it, and against what.

For two problems, the gradient of a scalar loss with respect to 3 simulation parameters:

* ``to_jax``: ``jax.jit(jax.grad(loss))`` where the loss calls the wrapped dualgpu simulation
  (one dual run of 3 lanes inside a callback, then JAX's transposed Jacobian product);
* ``dualgpu.jacobian``: the Jacobian of the same simulation function by the driver (the floor
  the bridge is measured against; target: to_jax <= 1.3x this), and ``dualgpu.jvp_batch``
  (values and Jacobian of one dual run) with the loss gradient in numpy;
* ``jax.numpy``: the same simulation written in ``jax.numpy`` (``lax.fori_loop``), with
  ``jax.jit(jax.grad(loss))`` (what a JAX user would otherwise write).

Problems: the 1-D heat equation (``simulations.heat1d``: diffusivity and the two end
temperatures) and the driven-pendulum ensemble (``simulations.pendulums``: damping, drive
amplitude and frequency) of ``benchmarks/``. Times are medians after one warm-up run (which
compiles), the methods interleaved; the machine load (``os.getloadavg``) is printed with them.
The gradients of the three are checked against each other before timing.

Run::

    python3 benchmarks/jax_bridge.py              # heat 2000 cells x 200 steps, 10^4 pendulums
    python3 benchmarks/jax_bridge.py --quick      # smaller, a few seconds
"""
import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import dualgpu  # noqa: E402
from dualgpu.interop import to_jax  # noqa: E402
from simulations import heat1d, pendulums  # noqa: E402

TARGET = 1.3


def heat_problem(n, steps):
    import jax.numpy as jnp
    from jax import lax

    u0 = heat1d.default_initial_state(n)
    dx = 1.0 / (n - 1)
    dt = 0.4 * dx ** 2
    params = (1.0, 0.5, 0.25)
    target = heat1d.simulate(u0, n_steps=steps, alpha=0.9, dt=dt, dx=dx, left=0.4, right=0.3)

    def simulate(alpha, left, right):
        return heat1d.simulate(u0, n_steps=steps, alpha=alpha, dt=dt, dx=dx, left=left,
                               right=right)

    def simulate_jnp(alpha, left, right):
        r = alpha * dt / dx ** 2

        def step(k, u):
            inner = u[1:-1] + r * (u[:-2] - 2.0 * u[1:-1] + u[2:])
            return jnp.concatenate([jnp.reshape(left, (1,)), inner, jnp.reshape(right, (1,))])
        return lax.fori_loop(0, steps, step, jnp.asarray(u0))

    return simulate, simulate_jnp, params, target


def pendulum_problem(m, steps):
    from benchmarks.peers.jax_cases import _pendulum_simulation
    from benchmarks.peers.problems import pendulum_setup

    s = pendulum_setup(m, steps)
    params = tuple(float(p) for p in s["params"])
    theta0, omega0, dt = s["theta0"], s["omega0"], s["dt"]
    target = np.zeros(m)

    def simulate(damping, amplitude, frequency):
        return pendulums.simulate(theta0, omega0, n_steps=steps, dt=dt, damping=damping,
                                  drive_amplitude=amplitude, drive_frequency=frequency,
                                  g_over_l=1.0)[0]

    jnp_sim = _pendulum_simulation(steps)

    def simulate_jnp(damping, amplitude, frequency):
        import jax.numpy as jnp

        return jnp_sim(jnp.stack([damping, amplitude, frequency]), jnp.asarray(theta0),
                       jnp.asarray(omega0), dt)

    return simulate, simulate_jnp, params, target


def compare(name, problem, repeats):
    import jax
    import jax.numpy as jnp

    simulate, simulate_jnp, params, target = problem
    g = to_jax(simulate)
    target_j = jnp.asarray(target)

    def loss_bridge(*p):
        return jnp.mean((g(*p) - target_j) ** 2)

    def loss_jnp(*p):
        return jnp.mean((simulate_jnp(*p) - target_j) ** 2)

    p_j = tuple(jnp.asarray(p) for p in params)
    g(*p_j)  # finds the output shape outside jit
    grad_bridge = jax.jit(jax.grad(loss_bridge, argnums=(0, 1, 2)))
    grad_jnp = jax.jit(jax.grad(loss_jnp, argnums=(0, 1, 2)))

    def run_bridge():
        return np.array(jax.block_until_ready(grad_bridge(*p_j)))

    def run_driver():  # the Jacobian alone, as the target names it
        return dualgpu.jacobian(simulate, *params, argnums=(0, 1, 2))

    def run_driver_loss():  # values and Jacobian from one dual run, then the loss gradient
        seeds = [np.eye(3)[:, k] for k in range(3)]
        u, columns = dualgpu.jvp_batch(simulate, params, seeds)
        return columns @ (2.0 * (u - target) / u.size)

    def run_jnp():
        return np.array(jax.block_until_ready(grad_jnp(*p_j)))

    reference = run_driver_loss()
    J = run_driver()
    u = simulate(*params)
    from_jacobian = np.array([2.0 * (u - target) / u.size @ block for block in J])
    for label, got in (("dualgpu.jacobian", from_jacobian), ("to_jax", run_bridge()),
                       ("jax.numpy", run_jnp())):
        err = np.max(np.abs(got - reference)) / np.max(np.abs(reference))
        print(f"  {name}: {label} gradient vs dualgpu.jvp_batch: max rel. difference {err:.1e}")
    runs = {"to_jax + jax.grad": run_bridge, "dualgpu.jacobian": run_driver,
            "dualgpu.jvp_batch + numpy loss": run_driver_loss,
            "jax.numpy + jax.grad": run_jnp}
    times = {label: [] for label in runs}
    for fn in runs.values():
        fn()  # warm-up: compilation
    for _ in range(repeats):  # interleaved, so that load changes hit every method alike
        for label, fn in runs.items():
            start = time.perf_counter()
            fn()
            times[label].append(time.perf_counter() - start)
    return times


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes (a few seconds)")
    p.add_argument("--repeats", type=int, default=None, help="timed runs per measurement")
    p.add_argument("--backend", default="cpu", choices=("cpu", "cudasim", "cuda"))
    args = p.parse_args(argv)
    import jax

    jax.config.update("jax_enable_x64", True)
    dualgpu.set_backend(args.backend)
    if args.quick:
        sizes = {"heat": (200, 50), "pendulum": (1000, 50)}
        repeats = args.repeats or 5
    else:
        sizes = {"heat": (2000, 200), "pendulum": (10_000, 200)}
        repeats = args.repeats or 9
    load = os.getloadavg()
    print(f"JAX bridge benchmark, {args.backend} backend, float64, medians of {repeats}; "
          f"load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} on {os.cpu_count()} "
          "cores")
    results = {}
    for name, factory in (("heat", heat_problem), ("pendulum", pendulum_problem)):
        size = sizes[name]
        print(f"{name}: {size[0]} {'cells' if name == 'heat' else 'members'} x {size[1]} steps")
        results[name] = compare(name, factory(*size), repeats)
    print()
    header = (f"{'problem':<10} {'method':<32} {'median [ms]':>12} {'min [ms]':>10} "
              f"{'median / dualgpu.jacobian':>26}")
    print(header)
    print("-" * len(header))
    for name, times in results.items():
        med = {k: statistics.median(v) for k, v in times.items()}
        floor = med["dualgpu.jacobian"]
        for method, samples in times.items():
            print(f"{name:<10} {method:<32} {med[method] * 1e3:>12.2f} "
                  f"{min(samples) * 1e3:>10.2f} {med[method] / floor:>25.2f}x")
        ratio = med["to_jax + jax.grad"] / floor
        best = min(times["to_jax + jax.grad"]) / min(times["dualgpu.jacobian"])
        print(f"{name:<10} to_jax / dualgpu.jacobian = {ratio:.2f}x median, {best:.2f}x min "
              f"(target <= {TARGET}x: {'MET' if ratio <= TARGET else 'MISSED'}); "
              f"to_jax / jax.numpy = {med['to_jax + jax.grad'] / med['jax.numpy + jax.grad']:.2f}x")
    load = os.getloadavg()
    print(f"load average at the end {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}")
    return results


if __name__ == "__main__":
    main()
