"""numpy.fft and scipy.fft on host DualArrays: values and all lanes in one call.

Oracles: the transform applied to each lane's partials one by one (the transforms are
linear), a central difference of a nonlinear objective (|rfft(u)|^2), and jax.jvp.
"""
import numpy as np
import pytest
import scipy.fft

import dualgpu
from dualgpu import DualArray
from dualgpu.errors import DualgpuError

LANES = 3


def _dual(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)

    def draw(size):
        data = rng.standard_normal(size)
        if dtype.kind == "c":
            data = data + 1j * rng.standard_normal(size)
        return data.astype(dtype)

    return DualArray(draw(shape), draw((LANES,) + shape))


#: (function name, shape, keywords): the transforms with their n/s/axes/norm variants
CASES = [
    ("fft", (8,), {}), ("fft", (8,), {"n": 6, "norm": "ortho"}), ("fft", (4, 6), {"axis": 0}),
    ("ifft", (8,), {"norm": "forward"}), ("ifft", (3, 5), {"n": 8, "axis": -2}),
    ("rfft", (8,), {}), ("rfft", (4, 6), {"axis": 0, "n": 5, "norm": "ortho"}),
    ("irfft", (5,), {}), ("irfft", (3, 5), {"n": 9, "axis": 1, "norm": "backward"}),
    ("hfft", (5,), {"n": 8}), ("ihfft", (8,), {}),
    ("fft2", (4, 6), {}), ("fft2", (2, 4, 6), {"s": (5, 3), "axes": (0, 2)}),
    ("ifft2", (4, 6), {"norm": "ortho"}), ("rfft2", (4, 6), {}), ("irfft2", (4, 4), {"s": (4, 6)}),
    ("fftn", (2, 3, 4), {}), ("fftn", (2, 3, 4), {"s": (4, 4), "axes": (1, 2)}),
    ("fftn", (2, 3, 4), {"axes": (1,)}),
    ("ifftn", (2, 3, 4), {"axes": (0, 2), "norm": "forward"}),
    ("rfftn", (4, 6), {}), ("rfftn", (2, 3, 4), {"axes": (0, 1)}),
    ("irfftn", (4, 5), {"s": (4, 8), "axes": (0, 1)}), ("irfftn", (2, 3, 4), {}),
    ("fftshift", (5,), {}), ("fftshift", (4, 5), {"axes": 1}), ("ifftshift", (4, 5), {}),
    ("ifftshift", (2, 3, 4), {"axes": (0, -1)}),
]
REAL_ONLY = {"rfft", "rfft2", "rfftn", "ihfft"}  # numpy refuses (or drops) complex input


def _check(function, shape, kwargs, dtype):
    u = _dual(shape, dtype)
    result = function(u, **kwargs)
    plain = function(u.values, **kwargs)
    assert isinstance(result, DualArray) and result.lanes == LANES
    np.testing.assert_array_equal(result.values, plain)
    assert result.partials.dtype == plain.dtype
    for k in range(LANES):  # the oracle: the transform of each lane on its own
        np.testing.assert_allclose(result.partials[k], function(u.partials[k], **kwargs),
                                   rtol=1e-5 if plain.real.dtype == np.float32 else 1e-12,
                                   atol=1e-5 if plain.real.dtype == np.float32 else 1e-12)


def _dtypes(name):
    return (np.float32, np.float64) + (() if name in REAL_ONLY else (np.complex64, np.complex128))


@pytest.mark.parametrize("name, shape, kwargs", CASES,
                         ids=[f"{n}{s}{sorted(k.items())}" for n, s, k in CASES])
def test_numpy_fft_transforms_values_and_every_lane(name, shape, kwargs):
    for dtype in _dtypes(name):
        _check(getattr(np.fft, name), shape, kwargs, dtype)


SCIPY_CASES = [c for c in CASES if "shift" not in c[0]] + [
    ("hfft2", (4, 4), {}), ("ihfft2", (4, 6), {}), ("hfftn", (2, 3, 4), {"s": (2, 3, 6)}),
    ("ihfftn", (2, 3, 4), {}), ("dct", (8,), {}), ("dct", (4, 6), {"type": 3, "axis": 0}),
    ("idct", (8,), {"norm": "ortho"}), ("dst", (8,), {"type": 1}), ("idst", (4, 6), {}),
    ("dctn", (4, 6), {}), ("idctn", (2, 3, 4), {"axes": (0, 2)}), ("dstn", (4, 6), {"type": 4}),
    ("idstn", (4, 6), {"s": (5, 5)}), ("fft", (8,), {"workers": 2}),
]
SCIPY_REAL_ONLY = REAL_ONLY | {"ihfft2", "ihfftn"}


@pytest.mark.parametrize("name, shape, kwargs", SCIPY_CASES,
                         ids=[f"{n}{s}{sorted(k.items())}" for n, s, k in SCIPY_CASES])
def test_scipy_fft_transforms_values_and_every_lane(name, shape, kwargs):
    dtypes = (np.float32, np.float64) + (
        () if name in SCIPY_REAL_ONLY else (np.complex64, np.complex128))
    for dtype in dtypes:
        _check(getattr(scipy.fft, name), shape, kwargs, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_power_spectrum_against_central_differences(dtype):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(16).astype(dtype)
    direction = rng.standard_normal(16).astype(dtype)

    def objective(u):
        spectrum = np.abs(np.fft.rfft(u * np.exp(-u))) ** 2
        return np.fft.irfft(np.fft.fftshift(spectrum) * 1j, n=16)

    got = objective(DualArray(x.copy(), direction[None].copy())).partials[0]
    wide, h = x.astype(np.float64), 1e-6
    expected = (objective(wide + h * direction) - objective(wide - h * direction)) / (2 * h)
    tolerance = 2e-3 if dtype == np.float32 else 1e-6
    np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance * np.abs(
        expected).max())


@pytest.mark.peers
def test_fft_objective_matches_jax_jvp():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    rng = np.random.default_rng(2)
    x, direction = rng.standard_normal(12), rng.standard_normal(12)

    def objective(u, xp):
        psi = xp.exp(1j * u) * u
        return xp.abs(xp.fft.ifft(xp.fft.fft(psi) * xp.exp(-0.3j * xp.arange(12)))) ** 2

    with jax.enable_x64(True):
        _, expected = jax.jvp(lambda u: objective(u, jnp), (jnp.asarray(x),),
                              (jnp.asarray(direction),))
    got = objective(DualArray(x.copy(), direction[None].copy()), np)
    np.testing.assert_allclose(got.partials[0], np.asarray(expected), rtol=1e-10, atol=1e-12)


def test_plain_arrays_keep_going_to_scipy_and_inputs_are_not_overwritten():
    data = np.arange(8.0)
    with scipy.fft.set_backend("scipy", only=True):
        own = scipy.fft.fft(data)
    np.testing.assert_array_equal(scipy.fft.fft(data), own)  # SciPy's own backend, unchanged
    u = _dual((8,), np.complex128)
    before = u.values.copy(), u.partials.copy()
    scipy.fft.fft(u, overwrite_x=True)
    np.testing.assert_array_equal(u.values, before[0])
    np.testing.assert_array_equal(u.partials, before[1])


def test_fft_errors_name_the_fix():
    u = _dual((8,), np.float64)
    with pytest.raises(DualgpuError, match="out=.*Fix: leave out= out"):
        np.fft.fft(u, out=np.zeros(8, complex))
    with pytest.raises(np.exceptions.AxisError, match="axis 3 is out of bounds"):
        np.fft.fft(u, axis=3)


def test_device_dual_arrays_are_transformed_on_the_host():
    u = _dual((8,), np.float64)
    with dualgpu.using_backend("cudasim"):
        device = dualgpu.cuda.to_device(u)
        result = np.fft.fft(device)
    assert isinstance(result, DualArray) and not result.is_device
    np.testing.assert_allclose(result.partials, np.fft.fft(u.partials), rtol=1e-14)


def test_jacobian_of_a_complex_output_is_complex():
    x = np.linspace(0.1, 1.0, 6)

    def f(u):
        return np.fft.fft(np.exp(1j * u) * u)

    jac = dualgpu.jacobian(f, x, progress=False)
    h = 1e-6
    expected = np.stack([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(6)], axis=1)
    assert jac.dtype == np.complex128
    np.testing.assert_allclose(jac, expected, rtol=1e-7, atol=1e-8)
    (tangent,) = dualgpu.jvp(lambda u: f(u), (x,), (np.ones(6),))[1:]
    np.testing.assert_allclose(tangent, expected.sum(axis=1), rtol=1e-7, atol=1e-8)


# scipy.fft imported before or after dualgpu (fresh processes):
# tests/architecture/test_fresh_imports.py
