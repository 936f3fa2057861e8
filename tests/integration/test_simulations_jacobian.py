"""Every simulation's Jacobian (small sizes) matches central differences on cpu and cudasim.

Each case differentiates the final state with respect to the initial state and to the
physical parameters at once; ``check_jacobian`` compares J @ v with a central difference
along random directions. Blocks are small (4 threads, 4 x 4 in 2-D): every grid has several
blocks, most a partial last one, and the simulator (a Python thread per CUDA thread) runs
few idle threads.
"""
import pytest

import dualgpu
from dualgpu.testing import check_jacobian
from simulations import gray_scott, heat1d, heat2d, mass_spring, nbody, pendulums, wave2d

TPB, TPB_2D = 4, (4, 4)


def _heat1d():
    u0 = heat1d.default_initial_state(12)
    return (lambda u, alpha, left: heat1d.simulate(u, n_steps=4, alpha=alpha, left=left,
                                                   threads_per_block=TPB),
            (u0, 1.0, 0.3), (0, 1, 2))


def _heat2d():
    u0 = heat2d.default_initial_state(6)
    return (lambda u, alpha: heat2d.simulate(u, n_steps=3, alpha=alpha, threads_per_block=TPB_2D),
            (u0, 0.05), (0, 1))


def _wave2d():
    u0, v0 = wave2d.default_initial_state(6)
    return (lambda u, c: wave2d.simulate(u, v0, n_steps=3, c=c, damping=0.2,
                                         threads_per_block=TPB_2D)[0], (u0, 1.0), (0, 1))


def _nbody():
    # masses ~1/n move the bodies by ~1e-6 in 3 steps: finite differences of such small
    # changes carry ~1e-6 relative rounding, so this case is checked at rtol 1e-5
    pos, vel, masses = nbody.default_initial_state(5)
    return (lambda m, G: nbody.simulate(pos, vel, m, n_steps=3, G=G, threads_per_block=TPB)[0],
            (masses, 1.0), (0, 1))


def _mass_spring():
    pos, vel, pinned = mass_spring.default_initial_state(5)
    return (lambda p, k, c: mass_spring.simulate(p, vel, pinned, n_steps=3, k=k, c=c,
                                                 threads_per_block=TPB)[0],
            (pos, 1000.0, 0.1), (0, 1, 2))


def _pendulums():
    theta0, omega0 = pendulums.default_initial_state(6)

    def final_angle(theta, damping, amplitude, frequency):
        return pendulums.simulate(theta, omega0, n_steps=5, damping=damping,
                                  drive_amplitude=amplitude, drive_frequency=frequency,
                                  threads_per_block=TPB)[0]

    return final_angle, (theta0, 0.5, 1.2, 2.0 / 3.0), (0, 1, 2, 3)


def _gray_scott():
    u0, v0 = gray_scott.default_initial_state(6)
    return (lambda v, F, k: gray_scott.simulate(u0, v, n_steps=3, F=F, k=k,
                                                threads_per_block=TPB_2D)[1],
            (v0, 0.035, 0.065), (0, 1, 2))


CASES = {"heat1d": _heat1d, "heat2d": _heat2d, "wave2d": _wave2d, "nbody": _nbody,
         "mass_spring": _mass_spring, "pendulums": _pendulums, "gray_scott": _gray_scott}


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
@pytest.mark.parametrize("name", list(CASES))
def test_simulation_jacobian_matches_central_differences(name, backend):
    f, args, argnums = CASES[name]()
    rtol = 1e-5 if name == "nbody" else 1e-6
    with dualgpu.using_backend(backend):
        error = check_jacobian(f, *args, argnums=argnums, n_directions=2, rtol=rtol)
    assert error < rtol
