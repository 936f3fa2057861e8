"""dualgpu.sensitivity: DGSM from exact derivatives against closed forms, SALib and bad input.

Closed forms (x uniform unless said):
* linear f = sum a_i x_i: nu_i = a_i^2, S_i^tot = a_i^2 Var(x_i) / Var(f);
* quadratic f = sum b_i x_i^2 on [0, 1]: nu_i = 4 b_i^2 / 3, S_i^tot = b_i^2 / sum b_j^2;
* Ishigami on [-pi, pi]^3 (a = 7, b = 0.1): nu_1 = (1 + 2 b pi^4/5 + b^2 pi^8/9) / 2,
  nu_2 = a^2 / 2, nu_3 = 8 b^2 pi^6 / 7 (Sobol' & Kucherenko 2009) and the Sobol indices of
  Ishigami & Homma (1990).
The Ishigami model runs as a dualgpu kernel (one thread per sample) on the cpu backend, in
float64 and float32, and once on the CUDA simulator (a few samples).
"""
import math
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import dualgpu
from dualgpu import cuda
from dualgpu.errors import DualgpuError
from dualgpu import sensitivity as gsa
from dualgpu.sensitivity import poincare

A, B = 7.0, 0.1
ISHIGAMI = {"names": ["x1", "x2", "x3"], "bounds": [[-math.pi, math.pi]] * 3}


def ishigami_truth():
    V = A ** 2 / 8 + B * math.pi ** 4 / 5 + B ** 2 * math.pi ** 8 / 18 + 0.5
    V1 = 0.5 * (1 + B * math.pi ** 4 / 5) ** 2
    V2 = A ** 2 / 8
    V13 = 8 * B ** 2 * math.pi ** 8 / 225
    total = np.array([V1 + V13, V2, V13]) / V
    nu = np.array([0.5 * (1 + 2 * B * math.pi ** 4 / 5 + B ** 2 * math.pi ** 8 / 9),
                   A ** 2 / 2, 8 * B ** 2 * math.pi ** 6 / 7])
    return nu, total, V


@cuda.jit
def ishigami_kernel(X, out, a, b):
    i = cuda.grid(1)
    if i < X.shape[0]:
        x1 = X[i, 0]
        s = math.sin(X[i, 1])
        out[i] = math.sin(x1) + a * s * s + b * X[i, 2] ** 4 * math.sin(x1)


def ishigami_batched(X):
    """The ensemble form: one thread per sample."""
    n = X.shape[0]
    Xd = cuda.to_device(X)
    out = cuda.device_array(n, dtype=X.dtype)
    ishigami_kernel[(n + 31) // 32, 32](Xd, out, A, B)
    return out.copy_to_host()


def ishigami_numpy(X):
    return np.sin(X[:, 0]) + A * np.sin(X[:, 1]) ** 2 + B * X[:, 2] ** 4 * np.sin(X[:, 0])


def ishigami_gradient(X):
    x1, x2, x3 = X.T
    return np.stack([np.cos(x1) * (1 + B * x3 ** 4), A * np.sin(2 * x2),
                     4 * B * x3 ** 3 * np.sin(x1)], axis=1)


def inside(value, ci, rtol=1e-12):
    slack = rtol * np.abs(value)
    return np.all((ci[0] - slack <= value) & (value <= ci[1] + slack))


@pytest.fixture(scope="module")
def ishigami64():
    with dualgpu.using_backend("cpu"):
        return gsa.dgsm(ishigami_batched, ISHIGAMI, 1024, seed=3, batched=True)


# ---------------------------------------------------------------- analytic cases

def test_linear_uniform_and_normal():
    a = np.array([3.0, -1.0, 0.5])
    problem = {"names": ["p", "q", "r"], "bounds": [[0, 2], [1, 5], [-1, 1]]}
    r = gsa.dgsm(lambda x: x @ a, problem, 64, seed=0)         # point form: 64 dual runs
    assert r.dual_runs == 64
    np.testing.assert_allclose(r.nu, a ** 2, rtol=1e-12)
    np.testing.assert_allclose(r.mu, a, rtol=1e-12)
    assert inside(a ** 2, r.nu_ci)
    var_x = np.array([4, 16, 4]) / 12
    total = a ** 2 * var_x / np.sum(a ** 2 * var_x)
    # uniform: the bound is (12 / pi^2) x the total index for a linear model
    np.testing.assert_allclose(r.total_upper, total * 12 / math.pi ** 2 * (
        np.sum(a ** 2 * var_x) / r.variance), rtol=1e-12)
    assert np.all(r.total_upper >= total)
    assert r.ranking() == ["p", "q", "r"]
    # normal inputs: the bound is attained by a linear model
    normal = {"names": ["p", "q", "r"], "bounds": [[0, 1], [2, 2], [0, 0.5]],
              "dists": ["norm"] * 3}
    rn = gsa.dgsm(lambda X: X @ a, normal, 1024, seed=1, batched=True)
    sd2 = np.array([1, 4, 0.25])
    np.testing.assert_allclose(rn.total_upper * rn.variance / np.sum(a ** 2 * sd2),
                               a ** 2 * sd2 / np.sum(a ** 2 * sd2), rtol=1e-12)
    assert np.all(rn.total_upper_ci[1] >= a ** 2 * sd2 / np.sum(a ** 2 * sd2))


def test_quadratic_nu_in_interval_and_bound_above_total():
    b = np.array([2.0, 1.0, 0.2])
    problem = {"names": ["a", "b", "c"], "bounds": [[0, 1]] * 3}
    r = gsa.dgsm(lambda X: (X ** 2) @ b, problem, 512, seed=5, batched=True)
    nu = 4 * b ** 2 / 3
    total = b ** 2 / np.sum(b ** 2)
    assert inside(nu, r.nu_ci), (nu, r.nu_ci)
    assert np.all(r.total_upper >= total) and np.all(r.total_upper_ci[0] >= total)
    np.testing.assert_allclose(r.nu, nu, rtol=2e-2)


def test_ishigami_kernel_float64(ishigami64):
    r = ishigami64
    nu, total, V = ishigami_truth()
    assert r.dual_runs == 1
    assert inside(nu, r.nu_ci), (nu, r.nu_ci)
    np.testing.assert_allclose(r.nu, nu, rtol=3e-2)
    assert np.all(r.total_upper >= total)
    assert np.all(r.total_upper_ci[0] >= total)
    # the derivatives are the kernel's, equal to the analytic gradient at the samples
    X = r.samples
    np.testing.assert_allclose(r.mu, ishigami_gradient(X).mean(axis=0), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(r.outputs, ishigami_numpy(X), rtol=1e-12, atol=1e-12)
    # the bound ranks x3 above x1 (4 nu_3 / V > 4 nu_1 / V): a known looseness for x3's
    # x^4 interaction, which the Sobol indices do not share (S_1^tot > S_3^tot)
    assert 4 * nu[2] > 4 * nu[0] and total[0] > total[2]
    assert r.ranking() == ["x2", "x3", "x1"]


def test_ishigami_kernel_float32(ishigami64):
    with dualgpu.using_backend("cpu"):
        r32 = gsa.dgsm(ishigami_batched, ISHIGAMI, 1024, seed=3, batched=True,
                       dtype=np.float32)
    X32 = r32.samples.astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(r32.mu, ishigami_gradient(X32).mean(axis=0), rtol=2e-5,
                               atol=2e-5)
    np.testing.assert_allclose(r32.nu, ishigami64.nu, rtol=1e-4)
    nu, total, _ = ishigami_truth()
    assert inside(nu, r32.nu_ci, rtol=1e-5)
    assert np.all(r32.total_upper >= total)


def test_point_form_agrees_with_batched_form(ishigami64):
    X = ishigami64.samples[:32]
    with dualgpu.using_backend("cpu"):
        point = gsa.dgsm(lambda x: ishigami_batched(x[None, :])[0], ISHIGAMI, None,
                         samples=X, seed=0)
    batched = gsa.dgsm(ishigami_batched, ISHIGAMI, None, samples=X, seed=0, batched=True)
    assert point.dual_runs == 32 and batched.dual_runs == 1
    np.testing.assert_allclose(point.nu, batched.nu, rtol=1e-12)
    np.testing.assert_allclose(point.total_upper_ci, batched.total_upper_ci, rtol=1e-12)


def test_cudasim_kernel_tiny():
    X = gsa.sample(ISHIGAMI, 4, seed=2)
    with dualgpu.using_backend("cudasim"):
        Y, G, bad, runs = gsa.model_gradients(ishigami_batched, X, batched=True)
    assert bad == [] and runs == 1
    np.testing.assert_allclose(G, ishigami_gradient(X), rtol=1e-12, atol=1e-12)


def test_executor_passes_through(ishigami64):
    X = ishigami64.samples[:64]
    with ThreadPoolExecutor(2) as pool, dualgpu.using_backend("cpu"):
        r = gsa.dgsm(ishigami_batched, ISHIGAMI, None, samples=X, batched=True, seed=0,
                     executor=pool, chunk_size=1)
    np.testing.assert_allclose(r.mu, ishigami_gradient(X).mean(axis=0), rtol=1e-12)


# ---------------------------------------------------------------- SALib

def smooth_model(X):
    return np.exp(0.5 * X[:, 0]) + X[:, 0] * X[:, 1] ** 2 + np.sin(X[:, 2])


@pytest.mark.peers
def test_equals_salib_finite_difference_dgsm():
    from SALib.analyze import dgsm as salib_dgsm
    from SALib.sample import finite_diff

    problem = {"num_vars": 3, "names": ["a", "b", "c"], "bounds": [[0.5, 2], [1, 3], [0.2, 1]]}
    delta = 1e-5
    X = finite_diff.sample(problem, 64, delta=delta, seed=4)
    Si = salib_dgsm.analyze(problem, X, smooth_model(X), seed=4)
    base = X[::problem["num_vars"] + 1]
    r = gsa.dgsm(smooth_model, problem, None, samples=base, batched=True, seed=0)
    # SALib: forward differences with relative steps delta * x: error ~ delta * |f''| x
    np.testing.assert_allclose(r.nu, Si["vi"], rtol=1e-4)
    # SALib divides by the variance with ddof=0, dualgpu by the unbiased one (ddof=1)
    np.testing.assert_allclose(r.total_upper, Si["dgsm"] * 63 / 64, rtol=1e-4)
    assert np.max(np.abs(r.nu / Si["vi"] - 1)) > 0  # FD, not the same numbers


@pytest.mark.peers
def test_salib_sobol_cross_check(ishigami64):
    Si = gsa.salib_sobol(ishigami_numpy, ISHIGAMI, 1024, seed=1, batched=True)
    assert Si["evaluations"] == 1024 * 5
    _, total, _ = ishigami_truth()
    np.testing.assert_allclose(Si["ST"], total, atol=0.05)
    r = ishigami64.attach_sobol(Si["ST"], Si["ST_conf"])
    assert np.all(r.total_upper >= Si["ST"] - Si["ST_conf"])
    assert "Sobol ST (SALib)" in r.table()
    assert r.to_dataframe()["sobol_total"].tolist() == list(Si["ST"])


# ---------------------------------------------------------------- Poincaré constants

@pytest.mark.parametrize("peak", [0.0, 0.3, 0.5, 1.0])
def test_triangular_constant_between_variance_and_uniform(peak):
    from scipy import stats

    C = poincare.poincare_constant("triang", (1.0, 3.0, peak))
    var = stats.triang(c=peak, loc=1.0, scale=2.0).var()
    assert var < C < 4.0 / math.pi ** 2


def test_eigen_solver_gives_uniform_constant():
    x = np.linspace(0.0, 2.0, 801)
    C = 1.0 / poincare._neumann_lambda1(np.full(x.size, 0.5), x)
    assert C == pytest.approx(4.0 / math.pi ** 2, rel=1e-5)


def test_lognormal_and_triangular_bounds_above_total():
    problem = {"names": ["k", "t"], "bounds": [[0.0, 0.5], [0.0, 2.0, 0.25]],
               "dists": ["lognorm", "triang"]}
    r = gsa.dgsm(lambda X: X[:, 0] + X[:, 1], problem, 2048, seed=7, batched=True)
    s = 0.5
    var_k = (math.exp(s ** 2) - 1) * math.exp(s ** 2)
    from scipy import stats
    var_t = stats.triang(c=0.25, scale=2.0).var()
    total = np.array([var_k, var_t]) / (var_k + var_t)
    assert np.all(r.total_upper_ci[0] >= total), (r.total_upper_ci, total)
    np.testing.assert_allclose(r.nu, [1.0, 1.0])


# ---------------------------------------------------------------- fields

@cuda.jit
def profile_kernel(X, xs, out):
    i, j = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = X[i, 0] * math.exp(-X[i, 1] * xs[j]) + X[i, 2] * xs[j]


def profiles(X):
    xs = np.linspace(0.0, 1.0, 6)
    out = cuda.device_array((X.shape[0], xs.size), dtype=X.dtype)
    profile_kernel[((X.shape[0] + 7) // 8, 1), (8, 8)](cuda.to_device(X), xs, out)
    return out.copy_to_host()


def test_field_output_maps_and_plots(tmp_path):
    from dualgpu import plot

    problem = {"names": ["amp", "decay", "slope"], "bounds": [[1, 2], [0.5, 3], [0, 0.1]]}
    with dualgpu.using_backend("cpu"):
        r = gsa.dgsm(profiles, problem, 256, seed=0, batched=True, output_name="u [K]",
                     units={"amp": "K", "decay": "1/m", "slope": "K/m"})
    assert r.nu.shape == (3, 6) and r.total_upper_ci.shape == (2, 3, 6)
    xs = np.linspace(0.0, 1.0, 6)
    X = r.samples
    d_decay = -X[:, 0, None] * xs * np.exp(-X[:, 1, None] * xs)
    np.testing.assert_allclose(r.nu[1], (d_decay ** 2).mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(r.nu[2], xs ** 2, rtol=1e-12)
    assert r.ranking(output=5)[-1] == "slope"
    assert "variance-weighted" in plot.dgsm_bars(r)[1].get_title()
    assert "weighted by each cell's variance" in r.table()
    with pytest.raises(DualgpuError, match="give output="):
        plot.dgsm_bars(r, measure="nu")
    for name, fig in (("bars", plot.dgsm_bars(r, output=3)), ("maps", plot.dgsm_maps(r)),
                      ("mu", plot.dgsm_maps(r, measure="mu", axis=xs, xlabel="x [m]"))):
        path = plot.save(fig, tmp_path / name)
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    fig, axes = plot.dgsm_maps(r, measure="mu", axis=xs)
    assert axes[0].collections[0].norm.vmin == -axes[0].collections[0].norm.vmax
    # 2-D fields: one panel per parameter
    r2 = gsa.analyze(problem, X, profiles(X).reshape(-1, 2, 3),
                     np.moveaxis(gsa.model_gradients(profiles, X, batched=True)[1], 0, 0)
                     .reshape(-1, 3, 2, 3), seed=0)
    fig, axes = plot.dgsm_maps(r2)
    assert len(axes) == 3 and axes[0].get_title().startswith(r2.ranking()[0])
    with pytest.raises(DualgpuError, match=r"names \['nope'\] are not parameters"):
        plot.dgsm_maps(r2, names=["nope"])


def test_table_and_dataframe(ishigami64):
    text = str(ishigami64)
    assert text.splitlines()[3].split()[1] == "x2"
    df = ishigami64.to_dataframe()
    assert list(df.index) == ["x1", "x2", "x3"]
    assert np.allclose(df["nu_low"], ishigami64.nu_ci[0])
    assert ishigami64.separates(top=2)


def test_same_seed_same_result():
    problem = {"names": ["a", "b"], "bounds": [[0, 1], [0, 1]]}
    f = lambda X: X[:, 0] * X[:, 1] ** 2  # noqa: E731
    r1 = gsa.dgsm(f, problem, 64, seed=11, batched=True)
    r2 = gsa.dgsm(f, problem, 64, seed=11, batched=True)
    np.testing.assert_array_equal(r1.nu_ci, r2.nu_ci)
    np.testing.assert_array_equal(r1.samples, r2.samples)


# ---------------------------------------------------------------- bad input

def test_unknown_distribution():
    with pytest.raises(DualgpuError, match=r"'b' has the unknown distribution 'gamma'.*unif"):
        gsa.dgsm(lambda x: x[0], {"names": ["a", "b"], "bounds": [[0, 1], [0, 1]],
                                  "dists": ["unif", "gamma"]}, 8)
    with pytest.raises(DualgpuError, match="no Poincaré constant"):
        gsa.check_problem({"names": ["a"], "bounds": [[1, 2]], "dists": ["logunif"]})


@pytest.mark.parametrize("bounds, dist, match", [
    ([2.0, 1.0], "unif", "lo >= hi"), ([1.0, 1.0], "unif", "lo >= hi"),
    ([0.0, -1.0], "norm", "standard deviation -1.0 is not > 0"),
    ([3.0, 1.0, 0.5], "triang", "start >= end"), ([0.0, 1.0, 1.5], "triang", "peak 1.5"),
    ([0.0, float("nan")], "unif", "finite"), ([0.0], "unif", "expected"),
    ([720.0, 0.5], "lognorm", r"parameter 'a' \(lognorm\).*overflow float64"),
    ([300.0, 8.0], "lognorm", r"parameter 'a' \(lognorm\).*overflow float64"),
])
def test_bad_bounds(bounds, dist, match):
    problem = {"names": ["a"], "bounds": [bounds], "dists": [dist]}
    with pytest.raises(DualgpuError, match=match):
        gsa.check_problem(problem)


def test_problem_not_mutated_and_mismatches():
    problem = {"names": ["a", "b"], "bounds": [[0, 1], [3.0, 0.5]], "dists": ["unif", "triang"]}
    copy = {k: [list(v) if isinstance(v, list) else v for v in vals]
            for k, vals in problem.items()}
    gsa.check_problem(problem)
    assert problem == copy
    with pytest.raises(DualgpuError, match="'bounds' has 1 entries for 2 names"):
        gsa.check_problem({"names": ["a", "b"], "bounds": [[0, 1]]})
    with pytest.raises(DualgpuError, match="power of 2"):
        gsa.sample({"names": ["a"], "bounds": [[0, 1]]}, 100)


def sqrt_model(X):
    return np.sqrt(X[:, 0]) + X[:, 1]


def test_non_finite_derivatives_named_batched():
    problem = {"names": ["a", "b"], "bounds": [[0, 1], [0, 1]]}
    X = gsa.sample(problem, 32, seed=0)
    X[[5, 17], 0] = 0.0          # sqrt'(0) = inf at samples 5 and 17
    with pytest.raises(DualgpuError, match=r"non-finite at 2 of 32 samples \(sample 5: a=0, "
                                           r"b=.*; sample 17: a=0"):
        gsa.dgsm(sqrt_model, problem, None, samples=X, batched=True)
    with pytest.warns(RuntimeWarning, match="non-finite at 2 of 32 samples"):
        r = gsa.dgsm(sqrt_model, problem, None, samples=X, batched=True, non_finite="drop",
                     seed=0)
    assert r.dropped == (5, 17) and r.n_used == 30
    keep = np.setdiff1d(np.arange(32), [5, 17])
    np.testing.assert_allclose(r.nu[0], np.mean(0.25 / X[keep, 0]), rtol=1e-12)
    assert "2 dropped" in r.table()


def test_non_finite_derivatives_named_point_form():
    problem = {"names": ["a", "b"], "bounds": [[0, 1], [0, 1]]}
    X = gsa.sample(problem, 8, seed=0)
    X[3, 0] = 0.0
    with pytest.raises(DualgpuError, match=r"non-finite at 1 of 8 samples \(sample 3: a=0"):
        gsa.dgsm(lambda x: np.sqrt(x[0]) + x[1], problem, None, samples=X)


def test_output_shape_changes():
    problem = {"names": ["a", "b"], "bounds": [[0, 1], [0, 1]]}
    X = gsa.sample(problem, 8, seed=0)

    def ragged(x):
        return np.ones(2 if x[0] < 0.5 else 3) * x[1]

    with pytest.raises(DualgpuError, match="changed shape between samples: sample 0 gave shape"):
        gsa.dgsm(ragged, problem, None, samples=X)
    with pytest.raises(DualgpuError, match="one output per sample along axis 0"):
        gsa.dgsm(lambda X: X.sum(), problem, 8, batched=True)
    with pytest.raises(DualgpuError, match="tuple of 2 outputs"):
        gsa.dgsm(lambda x: (x[0], x[1]), problem, 8)


def test_lognormal_bound_is_taken_in_log_space():
    # f = ln x with ln x ~ N(0.3, 0.4^2): in z = ln x the model is linear and normal, so the
    # bound sd^2 E[(x df/dx)^2] / Var(f) = 0.16 / Var(f) meets the total index 1
    problem = {"names": ["x", "y"], "bounds": [[0.3, 0.4], [0, 1]], "dists": ["lognorm", "unif"]}
    r = gsa.dgsm(lambda X: np.log(X[:, 0]) + 0 * X[:, 1], problem, 1024, seed=2, batched=True)
    np.testing.assert_allclose(r.total_upper[0], 0.16 / r.variance, rtol=1e-12)
    assert r.total_upper_ci[0, 0] <= 1.0 <= r.total_upper_ci[1, 0]
    np.testing.assert_allclose(r.nu[0], np.mean(1 / r.samples[:, 0] ** 2), rtol=1e-12)
    assert r.total_upper[1] == 0


def test_non_finite_everywhere():
    problem = {"names": ["a", "b"], "bounds": [[0, 1], [0, 1]]}
    X = np.zeros((4, 2))
    with pytest.raises(DualgpuError, match="non-finite at all 4 samples"):
        gsa.dgsm(sqrt_model, problem, None, samples=X, batched=True)


def test_large_offset_output_keeps_its_intervals():
    # temperatures near 300 K varying by millikelvin: the bootstrap variance must not cancel
    problem = {"names": ["a", "b"], "bounds": [[0, 1], [0, 1]]}
    r = gsa.dgsm(lambda X: 300.0 + 1e-3 * X[:, 0] + 5e-4 * X[:, 1], problem, 256, seed=0,
                 batched=True)
    shifted = gsa.dgsm(lambda X: 1e-3 * X[:, 0] + 5e-4 * X[:, 1], problem, 256, seed=0,
                       batched=True)
    np.testing.assert_allclose(r.total_upper_ci, shifted.total_upper_ci, rtol=1e-6)
    total = np.array([4.0, 1.0]) / 5.0
    assert np.all(r.total_upper_ci[0] >= total)


def test_constant_cells_of_a_field_are_nan_not_numbers():
    problem = {"names": ["a", "b"], "bounds": [[0, 1], [0, 1]]}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = gsa.dgsm(lambda X: np.stack([X[:, 0] * X[:, 1], 0 * X[:, 0] + 1.0], axis=1),
                     problem, 64, seed=0, batched=True)
    assert np.all(np.isnan(r.total_upper[:, 1])) and np.all(np.isnan(r.total_upper_ci[:, :, 1]))
    assert np.all(np.isfinite(r.total_upper[:, 0]))


@cuda.jit
def _coupled_kernel(X, out):
    i = cuda.grid(1)
    n = X.shape[0]
    if i < n:  # sample i reads its neighbour's second parameter: samples interact
        out[i] = X[i, 0] + X[i, 1] - X[(i + 1) % n, 1]


def coupled_batched(X):
    out = cuda.device_array(X.shape[0], dtype=X.dtype)
    _coupled_kernel[(X.shape[0] + 31) // 32, 32](cuda.to_device(X), out)
    return out.copy_to_host()


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batched_form_with_interacting_samples_is_refused(backend, dtype):
    """Issue 43 S9: every sample's lane 1 summed +1 (own) and -1 (the neighbour's), so nu of
    the second parameter came out 0 (the per-sample derivative is 1), with no warning."""
    problem = {"names": ["a", "b"], "bounds": [[0.0, 1.0], [0.0, 1.0]]}
    X = np.random.default_rng(0).uniform(0, 1, (16, 2)).astype(dtype)
    with dualgpu.using_backend(backend):
        with pytest.raises(DualgpuError, match="the members were seeded at once"):
            gsa.dgsm(coupled_batched, problem, None, samples=X, batched=True, seed=0)
        # the samples of an independent model pass the same check, in one run
        r = gsa.dgsm(ishigami_batched, ISHIGAMI, None, samples=X.repeat(2, axis=1)[:, :3],
                     batched=True, seed=0)
    assert r.dual_runs == 1


def test_lognormal_mean_above_710_names_the_parameter_in_dgsm():
    """Issue 43: dgsm raised a bare OverflowError (math range error) from scipy's setup."""
    problem = {"names": ["k", "t"], "bounds": [[720.0, 0.5], [0.0, 1.0]],
               "dists": ["lognorm", "unif"]}
    with pytest.raises(DualgpuError, match=r"parameter 'k' \(lognorm\)"):
        gsa.dgsm(lambda X: X[:, 0] + X[:, 1], problem, 16, seed=1, batched=True)
    fine = {"names": ["k", "t"], "bounds": [[300.0, 0.5], [0.0, 1.0]],
            "dists": ["lognorm", "unif"]}
    r = gsa.dgsm(lambda X: X[:, 0] * 0 + X[:, 1], fine, 16, seed=1, batched=True)
    assert np.isfinite(r.nu).all()
