"""The sensitivity scripts in scripts/: they run, write readable PNGs, and the sensitivities
they print agree with central differences of the plain simulations."""
import numpy as np
import pytest

import dualgpu
from scripts import (gray_scott_sensitivity, heat_sensitivity, mass_spring_sensitivity,
                     nbody_sensitivity, pendulum_sensitivity, wave_sensitivity)
from simulations import gray_scott, mass_spring, nbody, pendulums, wave2d

pytestmark = pytest.mark.slow

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def heat_output(args, p):
    x, dx, dt, u0 = heat_sensitivity.grid(args)
    values = [p.get(name, getattr(args, name)) for name in heat_sensitivity.PARAMETERS]
    return heat_sensitivity.run(u0, *values, args=args, dx=dx, dt=dt)[-1].mean()


def nbody_output(args, p):
    pos0, vel0, masses = nbody.default_initial_state(args.bodies, seed=args.seed)
    masses = masses.copy()
    for name, value in p.items():
        if name.startswith("m_"):
            masses[int(name[2:])] = value
    pos = nbody_sensitivity.run(pos0, vel0, masses, p.get("G", args.G), p.get("eps", args.eps),
                                args=args)[-1]
    return np.linalg.norm(pos[0])


def wave_output(args, p):
    u0, v0 = wave2d.default_initial_state(args.cells)
    dx = 1.0 / (args.cells - 1)
    dt = args.courant * dx / args.c  # dt stays fixed while c is perturbed
    u = wave2d.simulate(u0, v0, n_steps=args.steps, c=p.get("c", args.c), dt=dt, dx=dx,
                        damping=p.get("damping", args.damping))[0]
    return u[args.cells // 2, args.cells // 2]


def pendulum_output(args, p):
    theta0, omega0 = pendulums.default_initial_state(args.members)
    values = [p.get(name, getattr(args, name)) for name in pendulum_sensitivity.PARAMETERS]
    return pendulum_sensitivity.run(theta0, omega0, *values, args=args).mean()


def gray_scott_output(args, p):
    u0, v0 = gray_scott.default_initial_state(args.cells, seed=args.seed)
    return gray_scott_sensitivity.run(u0, v0, p.get("F", args.F), p.get("k", args.k),
                                      args=args)[1].mean()


def mass_spring_output(args, p):
    pos0, vel0, pinned = mass_spring.default_initial_state(args.nodes, 0.05)
    values = [p.get(name, getattr(args, name)) for name in mass_spring_sensitivity.PARAMETERS]
    return mass_spring_sensitivity.run(pos0, vel0, pinned, *values, args=args)[-1][:, 1].mean()


CASES = {
    "heat": (heat_sensitivity, ["--cells", "12", "--steps", "30", "--snapshots", "3"],
             heat_output, 4),
    "nbody": (nbody_sensitivity, ["--bodies", "6", "--steps", "20", "--snapshots", "3"],
              nbody_output, 3),
    "wave": (wave_sensitivity, ["--cells", "12", "--steps", "20"], wave_output, 2),
    "pendulum": (pendulum_sensitivity, ["--members", "8", "--steps", "40", "--segments", "3"],
                 pendulum_output, 4),
    "gray_scott": (gray_scott_sensitivity, ["--cells", "12", "--steps", "30", "--segments",
                                            "3"], gray_scott_output, 2),
    "mass_spring": (mass_spring_sensitivity, ["--nodes", "6", "--steps", "60", "--snapshots",
                                              "3"], mass_spring_output, 3),
}


@pytest.fixture(autouse=True)
def cpu_backend():
    previous = dualgpu.backend()
    yield
    dualgpu.set_backend(previous)


@pytest.mark.parametrize("case", sorted(CASES))
def test_script(case, tmp_path, capsys):
    module, argv, output_of, n_figures = CASES[case]
    argv = argv + ["--backend", "cpu", "--out", str(tmp_path)]
    result = module.main(argv)
    captured = capsys.readouterr()
    printed = captured.out
    # progress bars are off by default where stderr is not a terminal (pytest captures it)
    assert captured.err == "", captured.err

    assert len(result["figures"]) == n_figures
    for path in result["figures"]:
        data = path.read_bytes()
        assert data[:8] == PNG_SIGNATURE, path
        width = int.from_bytes(data[16:20], "big")
        assert width >= 400, (path, width)
        assert str(path) in printed

    args = module.build_parser().parse_args(argv)
    assert output_of(args, {}) == pytest.approx(result["value"], rel=1e-12)
    largest = max(abs(s) for _, _, s, _ in result["rows"])
    for name, value, sensitivity, _ in result["rows"]:
        assert f"{sensitivity:.10e}" in printed
        h = 1e-5 * abs(value)
        fd = (output_of(args, {name: value + h}) - output_of(args, {name: value - h})) / (2 * h)
        rounding = 1e-13 * abs(result["value"]) / h  # the difference's own rounding error
        assert abs(fd - sensitivity) <= 1e-5 * abs(sensitivity) + 1e-9 * largest + rounding, (
            f"{case}: d output / d {name}: AD {sensitivity!r}, central difference {fd!r}")


def test_help_lists_the_shared_options(capsys):
    from scripts import calibrate_pendulum

    for module in [case[0] for case in CASES.values()] + [calibrate_pendulum]:
        with pytest.raises(SystemExit):
            module.main(["--help"])
        text = " ".join(capsys.readouterr().out.split())
        for option in ("--backend", "--out", "--no-progress", "--chunk-size"):
            assert option in text
        assert "default: shown only when stderr is an interactive terminal" in text


def test_progress_option_shows_the_bars(tmp_path, capsys):
    module, argv, _, _ = CASES["heat"]
    module.main(argv + ["--backend", "cpu", "--out", str(tmp_path), "--progress"])
    assert "step" in capsys.readouterr().err  # the time-step bar of the segments


def test_backend_cuda_without_a_gpu_is_a_one_line_error(tmp_path, capsys, monkeypatch):
    import numba.cuda

    monkeypatch.setattr(numba.cuda, "is_available", lambda: False)
    module, argv, _, _ = CASES["heat"]
    with pytest.raises(SystemExit) as exit_info:
        module.main(argv + ["--backend", "cuda", "--out", str(tmp_path)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("heat_sensitivity.py: error: --backend cuda:")
    assert "cpu" in err and "cudasim" in err


def test_pendulum_members_own_start_sensitivity_matches_central_differences(tmp_path, capsys):
    module, argv, _, _ = CASES["pendulum"]
    argv = argv + ["--backend", "cpu", "--out", str(tmp_path)]
    own = module.main(argv)["initial_state_jacobian"]
    assert own.shape == (8, 2)
    assert "Each member's |∂θ(T)/∂θ(0)|" in capsys.readouterr().out
    args = module.build_parser().parse_args(argv)
    theta0, omega0 = pendulums.default_initial_state(args.members)
    values = [getattr(args, name) for name in module.PARAMETERS]
    h = 1e-6
    for i in (0, 5):  # nudge one member's start; only that member's angle may move
        for k, start in enumerate((theta0, omega0)):
            up, down = start.copy(), start.copy()
            up[i] += h
            down[i] -= h
            plus = (up, omega0) if k == 0 else (theta0, up)
            minus = (down, omega0) if k == 0 else (theta0, down)
            fd = (module.run(*plus, *values, args=args) - module.run(*minus, *values, args=args))
            fd /= 2 * h
            assert fd[i] == pytest.approx(own[i, k], rel=1e-6, abs=1e-9)
            assert np.all(np.delete(fd, i) == 0)  # the members are independent
