"""scripts/global_sensitivity_pendulum.py --quick: runs, ranks with intervals, writes PNGs, and
its derivatives are those of the plain numba model (central differences)."""
import numpy as np
import pytest

import dualgpu
from dualgpu.sensitivity import model_gradients, sample
from scripts import global_sensitivity_pendulum as gsp
from simulations import pendulum_samples

pytestmark = [pytest.mark.slow, pytest.mark.peers]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_quick_run(tmp_path, capsys):
    with dualgpu.using_backend("cpu"):
        out = gsp.main(["--quick", "--out", str(tmp_path), "--no-progress", "--backend", "cpu"])
    text = capsys.readouterr().out
    r, Si = out["result"], out["sobol"]
    assert r.nu.shape == (6, 10) and r.dual_runs == 1
    for expected in ("S_tot <= [95% CI]", "SALib Sobol", "model runs"):
        assert expected in text, expected
    for path in out["files"]:
        assert path.read_bytes()[:8] == PNG_SIGNATURE
    # the bound holds against SALib's estimate (within its interval)
    assert np.all(r.total_upper[:, -1] >= Si["ST"] - Si["ST_conf"])
    assert out["n_dgsm"] is not None and out["N_sobol"] is not None


def test_kernel_gradients_match_central_differences():
    X = sample(gsp.PROBLEM, 4, seed=1)
    with dualgpu.using_backend("cpu"):
        Y, G, bad, _ = model_gradients(
            lambda X: pendulum_samples.simulate(X, n_steps=60, dt=0.02, every=20), X,
            batched=True)
    assert bad == []
    h = 1e-6
    for i in range(6):
        up, down = X.copy(), X.copy()
        up[:, i] += h
        down[:, i] -= h
        fd = (pendulum_samples.simulate_numba(up, 60, 0.02, 20)
              - pendulum_samples.simulate_numba(down, 60, 0.02, 20)) / (2 * h)
        np.testing.assert_allclose(G[:, i], fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(Y, pendulum_samples.simulate_numba(X, 60, 0.02, 20), rtol=1e-13)


def test_sample_kernel_compiles_to_ptx_with_six_lanes(offline_ptx):
    """The GPU path of the script's kernel: dual inputs (6 lanes) and outputs, sm_90 PTX."""
    import numba
    from numba import types

    from dualgpu.backends.gpu import kernel as gpu
    from dualgpu.compiled.arrays import dual_array_type

    X = dual_array_type(types.float64, 2, 6)
    ptx, _ = numba.cuda.compile_ptx(
        gpu.prepare_function(pendulum_samples.integrate.py_func, 6),
        (X, types.int64, types.float64, types.int64, X), cc=offline_ptx)
    assert ".entry" in ptx
