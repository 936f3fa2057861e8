"""NaN-safe mode (DUALGPU_NANSAFE_MODE=1): a zero partial stays zero whatever the factor.

The mode is read at import, so the NaN-safe side runs in fresh processes; this process, in the
default mode, checks plain forward mode. One sequence of three processes (mode off, on, off
again, over the same cache directories) checks:

- the four paths on two poisoning cases, and kernels of lowered operations (sqrt, ``** 0.5``,
  asin at an exact zero) on the cpu backend and the simulator in both dtypes (the NaN-safe
  process);
- the caches on disk: neither numba's cache index (users' ``@njit(cache=True)`` functions on
  duals) nor the cpu backend's launcher cache may hand a process code compiled under the other
  mode. The mode is part of the numba types of duals (their key), so it is part of every cache
  index key numba makes for them, and of the cpu backend's keys.
"""
import json
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dualgpu

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")

USER_MODULE = textwrap.dedent("""
    import math
    from numba import njit

    @njit(cache=True)
    def root(a):
        return math.sqrt(a)  # at 0: an infinite factor

    @njit(cache=True)
    def roots(x, out):
        for i in range(x.shape[0]):
            out[i] = math.sqrt(x[i])
""")

SCRIPT = textwrap.dedent("""
    import json, math, warnings
    import numpy as np
    from numba import njit
    import dualgpu
    from dualgpu import Dual, DualArray, cuda, dmath
    import kernels_edge_cases as K
    import user_cached
    from kernels_unseen_lowering import nansafe_probe

    warnings.simplefilter("ignore", RuntimeWarning)
    nansafe = dualgpu.nansafe.NANSAFE_MODE_ENABLED
    results = {"nansafe": nansafe}
    f32 = np.float32
    # x / y in float32: d/dy = -x / y**2 = -4e38 overflows; lane 0 does not perturb y
    x = Dual(f32(1e38), np.array([1.0, 0.0], f32))
    y = Dual(f32(0.5), np.array([0.0, 1.0], f32))
    # the cpu backend's launcher in every process (the cache checks), the other paths in the
    # NaN-safe one
    for backend in ("cpu", "cudasim") if nansafe else ("cpu",):
        out = dualgpu.dual_array(np.zeros(1, f32), lanes=2)
        with dualgpu.using_backend(backend):
            K.ratio[1, 1](DualArray(np.array([x.value]), x.partials.reshape(2, 1).copy()),
                          DualArray(np.array([y.value]), y.partials.reshape(2, 1).copy()), out)
        results["ratio " + backend] = out.partials[:, 0].tolist()
    if nansafe:
        results["ratio python"] = (x / y).partials.tolist()
        results["ratio njit"] = njit(lambda a, b: a / b)(x, y).partials.tolist()
        # sqrt at 0: an infinite factor; lane 1 does not perturb the argument
        z = Dual(0.0, [1.0, 0.0])
        results["sqrt python"] = dmath.sqrt(z).partials.tolist()
        results["sqrt njit"] = njit(lambda a: math.sqrt(a))(z).partials.tolist()

        def probe(u):
            d = cuda.to_device(u)
            o = cuda.device_array_like(d)
            nansafe_probe[1, 4](d, o)
            return o.copy_to_host()

        u = np.array([0.3, 0.5, 0.7, 0.9])
        for backend in ("cpu", "cudasim"):
            for dtype in (np.float64, np.float32):
                with dualgpu.using_backend(backend):
                    J = dualgpu.jacobian(probe, u.astype(dtype))
                results[f"probe {backend} {np.dtype(dtype).name}"] = (
                    J.ravel().astype(np.float64).tolist())
    # the user's cached functions
    scalar = user_cached.root(Dual(0.0, [1.0, 0.0]))
    xs = DualArray(np.zeros(2), np.array([[1.0, 0.0], [0.0, 0.0]]))
    roots = dualgpu.dual_array(np.zeros(2), lanes=2)
    user_cached.roots(xs, roots)
    results.update({"user scalar": scalar.partials.tolist(),
                    "user array": roots.partials[1].tolist(),
                    "user cached": [len(f.stats.cache_hits) for f in (user_cached.root,
                                                                      user_cached.roots)]})
    print(json.dumps(results))
""")


def _run(tmp_path, nansafe):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"),
               DUALGPU_CACHE_DIR=str(tmp_path / "dualgpu"),
               DUALGPU_CACHE="1", DUALGPU_NANSAFE_MODE="1" if nansafe else "0",
               PYTHONPATH=os.pathsep.join([str(tmp_path), ROOT, FIXTURES]))
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The three processes, in order: mode off, on, off again (the same cache directories)."""
    tmp_path = tmp_path_factory.mktemp("nansafe")
    (tmp_path / "user_cached.py").write_text(USER_MODULE)
    off, on, again = (_run(tmp_path, nansafe=nansafe) for nansafe in (False, True, False))
    assert (off.pop("nansafe"), on.pop("nansafe"), again.pop("nansafe")) == (False, True, False)
    return off, on, again


@pytest.mark.slow
def test_nansafe_mode_keeps_zero_partials_zero_on_every_path(runs):
    _, on, _ = runs
    for name in ("ratio python", "ratio njit", "ratio cpu", "ratio cudasim"):
        lanes = on[name]
        assert lanes[0] == 2.0, f"{name}: {lanes}"  # d(x/y)/dx = 1/y, untouched by inf
        assert lanes[1] == -math.inf, f"{name}: {lanes}"  # the overflow is still reported
    for name in ("sqrt python", "sqrt njit"):
        assert on[name] == [math.inf, 0.0], f"{name}: {on[name]}"


@pytest.mark.slow
def test_nansafe_mode_on_keeps_zero_partials_zero(runs):
    """sqrt(w), w ** 0.5, asin(w + 1) with w exactly 0 and zero partials in a kernel
    (tests/fixtures/kernels_unseen_lowering.py): NaN-safe mode gives the derivative of the rest
    (2 x_i, and 0.5 / sqrt(x_0) in column 0), not NaN, on the cpu backend and the simulator in
    both dtypes (without the mode: test_nansafe_mode_off_refuses_the_nan in
    tests/integration/test_unseen_lowering.py)."""
    _, on, _ = runs
    x = np.array([0.3, 0.5, 0.7, 0.9])
    want = np.diag(2 * x)
    want[:, 0] += 0.5 / np.sqrt(0.3)
    probes = [name for name in on if name.startswith("probe ")]
    assert sorted(probes) == ["probe cpu float32", "probe cpu float64", "probe cudasim float32",
                              "probe cudasim float64"]
    for name in probes:
        np.testing.assert_allclose(on[name], want.ravel(), rtol=1e-6, err_msg=name)


@pytest.mark.slow
def test_users_cached_function_is_not_loaded_under_the_other_mode(runs):
    off, on, again = runs
    assert np.isnan(off["user scalar"][1])  # inf * 0 without the mode
    assert on["user scalar"] == [np.inf, 0.0], on  # same cache directory; NaN-safe: the zero
    assert on["user array"] == [0.0, 0.0], on  # lane stays zero
    assert np.isnan(again["user scalar"][1])  # each mode's entry stays cached beside the other
    assert again["user cached"] == [1, 1], again  # both loaded from the cache (DualArrays too)


@pytest.mark.slow
def test_cpu_launchers_cached_without_the_mode_are_not_loaded_under_it(runs):
    """A launcher cached without NaN-safe mode was loaded by a NaN-safe process: NaN partials
    where the mode promises the zero lane's own derivative (tests/backends/cpu/test_cpu_cache.py
    checks the rest of the launcher cache)."""
    off, on, again = runs
    assert np.isnan(off["ratio cpu"][0])  # inf * 0 = nan without the mode
    assert on["ratio cpu"] == [2.0, -np.inf], on  # from the same cache directory
    assert np.isnan(again["ratio cpu"][0])


def test_default_mode_is_plain_forward_mode():
    # inf * 0 = nan, as in JAX and ForwardDiff without NaN-safe mode
    assert dualgpu.nansafe.NANSAFE_MODE_ENABLED is False
    d = dualgpu.dmath.sqrt(dualgpu.Dual(0.0, [1.0, 0.0]))
    assert d.partials[0] == math.inf and math.isnan(d.partials[1])


def test_a_bad_setting_is_refused():
    with pytest.raises(ValueError, match="DUALGPU_NANSAFE_MODE='maybe'.*1/true/yes/on"):
        dualgpu.nansafe._read("maybe")
    assert dualgpu.nansafe._read(" On ") is True and dualgpu.nansafe._read(None) is False
