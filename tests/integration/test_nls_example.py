"""The split-step nonlinear Schrödinger example and its sensitivity script (issue 42).

The simulation: norm conserved, the same plain answer on the cpu and cudasim backends, and
its Jacobian with respect to g, v0, width and chirp (complex duals through a numba.cuda kernel
and np.fft) against central differences. The script: its table against central differences,
its figures.
"""
import numpy as np
import pytest

import dualgpu
from scripts import nls_sensitivity
from simulations import nls_split_step as nls

pytestmark = pytest.mark.slow

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PARAMS = (1.0, 0.5, 1.2, 0.3)  # g, v0, width, chirp


def _density(g, v0, width, chirp, n_steps=6):
    x, _, k = nls.grid(16, 12.0)
    psi = nls.simulate(nls.initial_state(x, width, chirp), g=g, v0=v0, dt=0.05,
                       n_steps=n_steps, x=x, k=k)
    return np.abs(psi) ** 2


def test_plain_run_conserves_the_norm_and_agrees_across_backends():
    x, dx, k = nls.grid(16, 12.0)
    psi0 = nls.initial_state(x, 1.2, 0.3)
    runs = {}
    for backend in ("cpu", "cudasim"):
        with dualgpu.using_backend(backend):
            runs[backend] = nls.simulate(psi0, g=-2.0, v0=0.5, dt=0.05, n_steps=20, x=x, k=k)
    assert nls.norm(runs["cpu"], dx) == pytest.approx(nls.norm(psi0, dx), rel=1e-12)
    np.testing.assert_allclose(runs["cudasim"], runs["cpu"], rtol=1e-12, atol=1e-14)


def test_free_linear_pulse_spreads_as_the_analytic_gaussian():
    """g = v0 = 0: a Gaussian of width w spreads to width w sqrt(1 + (t / w^2)^2)."""
    x, dx, k = nls.grid(128, 40.0)
    t = 0.5
    with dualgpu.using_backend("cudasim"):
        psi = nls.simulate(nls.initial_state(x, 1.0), g=0.0, v0=0.0, dt=0.05, n_steps=10,
                           x=x, k=k)
    width = np.sqrt(1 + t * t)
    expected = np.exp(-x * x / width ** 2) / (np.sqrt(np.pi) * width)
    np.testing.assert_allclose(np.abs(psi) ** 2, expected, atol=1e-12)


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
def test_jacobian_of_the_final_density_matches_central_differences(backend):
    with dualgpu.using_backend(backend):
        jac = dualgpu.jacobian(_density, *PARAMS, argnums=(0, 1, 2, 3), progress=False)
        for p, block in enumerate(jac):
            h = 1e-6 * max(1.0, abs(PARAMS[p]))
            plus, minus = list(PARAMS), list(PARAMS)
            plus[p] += h
            minus[p] -= h
            fd = (_density(*plus) - _density(*minus)) / (2 * h)
            assert block.dtype == np.float64 and np.abs(fd).max() > 1e-3
            # the central difference rounds to about 1e-16 |density| / h: atol 1e-7 of its peak
            np.testing.assert_allclose(block, fd, rtol=1e-6, atol=1e-7 * np.abs(fd).max())


def test_script_table_and_figures(tmp_path, capsys):
    argv = ["--points", "16", "--length", "12", "--steps", "6", "--dt", "0.05",
            "--out", str(tmp_path)]
    result = nls_sensitivity.main(argv)
    printed = capsys.readouterr().out
    assert len(result["figures"]) == 3
    for path in result["figures"]:
        assert path.read_bytes()[:8] == PNG_SIGNATURE and str(path) in printed
    args = nls_sensitivity.build_parser().parse_args(argv)
    assert args.backend == "cpu"
    values = [getattr(args, name) for name in nls_sensitivity.PARAMETERS]
    centre = args.points // 2
    with dualgpu.using_backend("cpu"):
        for p, (name, value, sensitivity, _) in enumerate(result["rows"]):
            assert f"{sensitivity:.10e}" in printed
            h = 1e-6
            plus, minus = list(values), list(values)
            plus[p] += h
            minus[p] -= h
            fd = (nls_sensitivity.density(args, *plus)[centre]
                  - nls_sensitivity.density(args, *minus)[centre]) / (2 * h)
            assert sensitivity == pytest.approx(fd, rel=1e-6, abs=1e-9), name


def test_jacobian_on_the_cpu_backend_equals_cudasims():
    """The compiled complex duals (cpu) and the simulator's give the same derivatives."""
    jac = {}
    for backend in ("cpu", "cudasim"):
        with dualgpu.using_backend(backend):
            jac[backend] = dualgpu.jacobian(_density, *PARAMS, argnums=(0, 1, 2, 3),
                                            progress=False)
    for cpu, sim in zip(jac["cpu"], jac["cudasim"]):
        np.testing.assert_allclose(cpu, sim, rtol=1e-12, atol=1e-14 * np.abs(sim).max())


@pytest.mark.parametrize("complex_, real", [("complex64", "float32"),
                                            ("complex128", "float64")])
def test_nonlinear_kernel_compiles_to_ptx_with_complex_duals(offline_ptx, complex_, real):
    from numba import cuda, types

    from dualgpu.backends.gpu.kernel import prepare_function
    from dualgpu.compiled.types import dual_array_type, dual_type

    c, r, lanes = getattr(types, complex_), getattr(types, real), 4
    signature = (dual_array_type(c, 1, lanes), types.Array(r, 1, "C"), dual_type(r, lanes),
                 dual_type(r, lanes), r)
    ptx, _ = cuda.compile_ptx(prepare_function(nls.nonlinear_half_step.py_func, lanes),
                              signature, cc=offline_ptx)
    assert ".entry" in ptx
