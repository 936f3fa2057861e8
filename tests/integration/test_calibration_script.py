"""scripts/calibrate_pendulum.py: the fit recovers known parameters within its reported
uncertainty, its Jacobian agrees with central differences, and it needs no more Jacobians
than the finite-difference fit."""
import numpy as np
import pytest

import dualgpu
from dualgpu.testing import check_jacobian
from scripts import calibrate_pendulum

pytestmark = pytest.mark.slow

SMALL = ["--members", "4", "--steps", "400", "--observations", "20", "--dt", "0.02",
         "--backend", "cpu"]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def cpu_backend():
    previous = dualgpu.backend()
    yield
    dualgpu.set_backend(previous)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fit_recovers_the_true_parameters_within_three_sigma(seed, tmp_path, capsys):
    result = calibrate_pendulum.main(SMALL + ["--seed", str(seed), "--out", str(tmp_path)])
    printed = capsys.readouterr().out
    sigma = np.sqrt(np.diag(result["cov"]))
    distance = np.abs(result["fit"] - result["truth"]) / sigma
    assert np.all(distance < 3.0), (seed, distance)
    assert np.all(sigma < 0.05 * result["truth"])  # a real constraint, not a wide error bar
    # the start is 20-30 % off: the fit moved far, and both fits reach the same optimum
    assert np.all(np.abs(result["fit"] - result["truth"]) < 0.05 * result["truth"])
    np.testing.assert_allclose(result["fd_fit"], result["fit"], rtol=0, atol=0.01 * sigma.min())
    # exact Jacobians: no more Jacobian evaluations than the FD fit's extra runs imply
    ad, fd = result["ad"], result["fd"]
    implied = fd["jacobian_runs"] / len(result["truth"])
    assert fd["jacobian_runs"] == fd["runs"]["plain"] - fd["nfev"] and implied >= 1
    assert ad["njev"] <= implied
    assert ad["runs"]["dual"] == ad["njev"] and ad["runs"]["plain"] == ad["nfev"]
    for row in result["parameters"]:
        assert f"{row['fit']:.5f} ± {row['sigma']:.5f}" in printed
    assert "iterations (Jacobian evaluations)" in printed
    assert len(result["figures"]) == 3
    for path in result["figures"]:
        assert path.read_bytes()[:8] == PNG_SIGNATURE


def test_the_calibration_jacobian_matches_central_differences():
    args = calibrate_pendulum.build_parser().parse_args(SMALL)
    dualgpu.set_backend("cpu")
    model = calibrate_pendulum.Model(args, calibrate_pendulum.observation_steps(args))
    p = np.array([0.35, 0.7, 1.3])
    assert check_jacobian(model.angles, p, n_directions=3) < 1e-7
    J = dualgpu.jacfwd(model.angles)(p)
    assert J.shape == (20, 4, 3)
