"""scripts/curvature_mass_spring.py: it runs, writes its figures, and its Hessian is the central
difference of the gradient; near the nominal point the quadratic model beats the linear one."""
import numpy as np
import pytest

import dualgpu
from scripts import curvature_mass_spring as script

pytestmark = pytest.mark.slow

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
ARGV = ["--nodes", "6", "--steps", "120", "--grid", "3", "--span", "0.1", "--backend", "cpu",
        "--no-progress"]


def test_curvature_script(tmp_path, capsys):
    previous = dualgpu.backend()
    try:
        result = script.main(ARGV + ["--out", str(tmp_path)])
        printed = capsys.readouterr().out
        args = script.build_parser().parse_args(ARGV)
        from simulations import mass_spring

        pos0, vel0, pinned = mass_spring.default_initial_state(args.nodes, 0.05)

        def gradient(params):
            return dualgpu.jacobian(script.final_energy, params, pos0, vel0, pinned, args)

        p0 = np.array([args.k, args.c])
        expected = np.zeros((2, 2))
        for j in range(2):
            h = 1e-4 * p0[j]
            e = np.zeros(2)
            e[j] = h
            expected[:, j] = (gradient(p0 + e) - gradient(p0 - e)) / (2 * h)
    finally:
        dualgpu.set_backend(previous)
    assert len(result["figures"]) == 2
    for path in result["figures"]:
        assert path.read_bytes()[:8] == PNG_SIGNATURE and str(path) in printed
    np.testing.assert_allclose(result["gradient"], gradient(p0), rtol=1e-14)
    np.testing.assert_allclose(result["hessian"], expected, rtol=1e-5)
    h = result["hessian"]
    assert abs(h[0, 1] - h[1, 0]) <= 1e-12 * abs(h[0, 1])  # symmetric to rounding
    assert result["errors"]["quadratic"] < 0.5 * result["errors"]["linear"]
    assert f"{result['hessian'][0, 0]:.10e}" in printed
