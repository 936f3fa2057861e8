"""Complex host dual arrays: every complex rule against central differences and jax.jvp.

The rules are dualgpu.complex_rules: holomorphic functions take their complex derivative;
abs, real, imag, conj and angle their real-linear tangents. complex64 and complex128.
"""
import numpy as np
import pytest

import dualgpu
from complex_harness import (BINARY, BINARY_KINDS, NUMPY, UNARY, assert_tangent_close,
                             central_difference, draw)
from dualgpu import DualArray, dual_array

DTYPES = (np.complex64, np.complex128)
SHAPE = (7,)


def _operand(value, tangent, kind):
    if tangent is None:
        return value  # a constant
    return DualArray(np.array(value), np.array(tangent)[None].copy())


def _check(key, kinds, dtype, seed):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    drawn = [draw(key, i, kind, dtype, SHAPE, rng) for i, kind in enumerate(kinds)]
    operands = [_operand(v, t, k) for (v, t), k in zip(drawn, kinds)]
    function = NUMPY[key]
    result = function(*operands)
    values = [v for v, _ in drawn]
    with np.errstate(all="ignore"):
        plain = function(*values)
    assert isinstance(result, DualArray), f"{key}{kinds}: {type(result)}"
    np.testing.assert_array_equal(result.values, plain)  # numpy's own value, bit for bit
    assert result.partials.dtype == plain.dtype
    expected = central_difference(function, values, [t for _, t in drawn])
    assert_tangent_close(result.partials[0], expected, dtype, f"{key}{kinds} {dtype}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("key", UNARY)
def test_unary_complex_rule_on_host_arrays(key, dtype):
    _check(key, ("c",), dtype, seed=UNARY.index(key))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kinds", BINARY_KINDS, ids="-".join)
@pytest.mark.parametrize("key", BINARY)
def test_binary_complex_rule_on_host_arrays(key, kinds, dtype):
    _check(key, kinds, dtype, seed=BINARY.index(key))


def test_a_checker_that_cannot_fail_is_not_one():
    """The checker catches a wrong tangent: conj's tangent in place of the identity's."""
    rng = np.random.default_rng(0)
    value, tangent = draw("conj", 0, "c", np.dtype(np.complex128), SHAPE, rng)
    expected = central_difference(np.conjugate, [value], [tangent])
    with pytest.raises(AssertionError):
        assert_tangent_close(tangent, expected, np.complex128, "identity as conj")


# --- against jax.jvp -----------------------------------------------------------------------
JAX_NAMES = {"neg": "negative", "pos": "positive", "asin": "arcsin", "acos": "arccos",
             "atan": "arctan", "asinh": "arcsinh", "acosh": "arccosh", "atanh": "arctanh",
             "conj": "conjugate", "phase": "angle", "sub": "subtract", "mul": "multiply",
             "truediv": "divide", "pow": "power"}


@pytest.mark.peers
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("key", UNARY + BINARY)
def test_complex_rule_matches_jax_jvp(key, dtype):
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(7)
    kinds = ("c",) * (2 if key in BINARY else 1)
    drawn = [draw(key, i, k, dtype, SHAPE, rng) for i, k in enumerate(kinds)]
    function = getattr(jnp, JAX_NAMES.get(key, key))
    with jax.enable_x64(dtype == np.complex128):
        _, expected = jax.jvp(function, tuple(jnp.asarray(v) for v, _ in drawn),
                              tuple(jnp.asarray(t) for _, t in drawn))
        expected = np.asarray(expected)
    result = NUMPY[key](*[_operand(v, t, k) for (v, t), k in zip(drawn, kinds)])
    assert_tangent_close(result.partials[0], expected, dtype, f"{key} vs jax.jvp")


# --- conventions, objectives, errors -------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_abs_and_angle_give_zero_partials_at_zero(dtype):
    z = dual_array(np.array([0, 1 + 1j], dtype), np.ones((1, 2), dtype))
    assert np.abs(z).partials[0, 0] == 0 and np.angle(z).partials[0, 0] == 0
    assert np.abs(z).partials.dtype == np.dtype(dtype).type(0).real.dtype


def test_real_input_complex_output_has_complex_partials():
    u = dual_array(np.linspace(0.1, 1.0, 5), np.eye(5))
    z = u * np.exp(1j * u)  # d/du = (1 + i u) e^{iu}
    expected = np.diag((1 + 1j * u.values) * np.exp(1j * u.values))
    np.testing.assert_allclose(z.partials, expected, rtol=1e-14)
    power = np.abs(z) ** 2  # |u e^{iu}|^2 = u^2: real partials
    assert power.dtype == np.float64
    np.testing.assert_allclose(power.partials, np.diag(2 * u.values), rtol=1e-13)


@pytest.mark.parametrize("dtype", DTYPES)
def test_objectives_on_complex_results_keep_their_partials(dtype):
    rng = np.random.default_rng(3)
    x = rng.uniform(0.5, 1.5, 6).astype(np.dtype(dtype).type(0).real.dtype)
    tangent = rng.standard_normal(6).astype(x.dtype)

    def objectives(u):
        psi = np.exp(1j * u) * (u + 2j)
        return (np.vdot(psi, psi * u), np.sum(np.abs(psi) ** 2), np.linalg.norm(psi),
                np.mean(psi), np.sum(np.real(psi) * np.imag(psi)), np.angle(psi).sum())

    got = objectives(DualArray(x.copy(), tangent[None].copy()))
    expected = central_difference(lambda v: np.array(objectives(v)), [x], [tangent])
    for index, (g, e) in enumerate(zip(got, expected)):
        assert isinstance(g, dualgpu.Dual), index
        assert_tangent_close(g.partials[0], e, dtype, f"objective {index}")
    # vdot conjugates its first argument: <psi, psi> is real
    psi = np.exp(1j * DualArray(x.copy(), tangent[None].copy()))
    assert abs(np.vdot(psi, psi).value.imag) == 0


def test_ordering_of_complex_duals_names_the_fix():
    z = dual_array(np.array([1 + 1j, 2j]), lanes=1)
    for compare in (np.less, np.greater_equal, np.maximum):
        with pytest.raises(TypeError, match=r"orders complex numbers.*Fix: compare a real"):
            compare(z, 0.5)
    assert (z == 2j).tolist() == [False, True]  # equality compares values


def test_complex_dual_arrays_from_complex_arrays_and_parts():
    z = dual_array(np.array([1 + 2j, 3 - 1j], np.complex64), lanes=2)
    assert z.dtype == np.complex64 and z.partials.dtype == np.complex64
    assert z.real.dtype == np.float32 and z.imag.values.tolist() == [2.0, -1.0]
    assert np.iscomplexobj(z) and not np.isrealobj(z)
    assert np.conj(z).values.tolist() == [1 - 2j, 3 + 1j]
    with pytest.raises(dualgpu.errors.DualgpuError, match="drop the imaginary parts"):
        z.astype(np.float32)
    assert z.astype(np.complex128).dtype == np.complex128
    u = dual_array(np.ones(2), lanes=1)
    assert np.conj(u).values.tolist() == [1.0, 1.0] and np.real(u) is u
    assert np.imag(u).partials.tolist() == [[0.0, 0.0]]


def test_complex_inputs_follow_jax_pairs_of_reals_convention():
    z = np.array([0.3 + 0.2j, 0.5 - 0.1j])
    with pytest.raises(dualgpu.errors.DualgpuError, match=r"argument 0 is complex.*real and "
                       r"imaginary parts as two real arguments"):
        dualgpu.jacobian(np.exp, z, progress=False)
    jac_re, jac_im = dualgpu.jacobian(lambda re, im: np.exp(re + 1j * im), z.real, z.imag,
                                      argnums=(0, 1), progress=False)
    np.testing.assert_allclose(jac_re, np.diag(np.exp(z)), rtol=1e-15)  # holomorphic: df/dz
    np.testing.assert_allclose(jac_im, 1j * jac_re, rtol=1e-15)


# --- host numpy functions on complex dual arrays -------------------------------------------
_M = np.random.default_rng(11).standard_normal((6, 6)) * (1 + 0.5j)
HOST_FUNCTIONS = {
    "sum": np.sum, "mean": np.mean, "prod": np.prod, "cumsum": np.cumsum, "var": np.var,
    "std": np.std, "norm": np.linalg.norm, "dot": lambda z: np.dot(_M, z),
    "matmul": lambda z: z @ _M, "einsum": lambda z: np.einsum("ij,j->i", _M, z),
    "outer": lambda z: np.outer(z, z), "inner": lambda z: np.inner(z, z),
    "tensordot": lambda z: np.tensordot(_M, z, axes=1), "solve": lambda z: np.linalg.solve(_M, z),
    "inv": lambda z: np.linalg.inv(np.outer(z, z) + np.eye(6)),
    "convolve": lambda z: np.convolve(z, z), "trapezoid": np.trapezoid,
    "average": lambda z: np.average(z, weights=np.arange(1.0, 7.0)),
    "shapes": lambda z: np.concatenate([np.roll(z, 2), np.pad(np.flip(z), 1), np.diff(z)]),
    "where": lambda z: np.where(np.arange(6) > 2, z, z * z), "index": lambda z: z[1:4] * z[2],
    "sorted |z|": lambda z: np.sort(np.abs(z)),
}


@pytest.mark.parametrize("name", sorted(HOST_FUNCTIONS))
def test_host_functions_on_complex_dual_arrays(name):
    rng = np.random.default_rng(5)
    z = rng.standard_normal(6) + 1j * rng.standard_normal(6)
    dz = rng.standard_normal(6) + 1j * rng.standard_normal(6)
    function = HOST_FUNCTIONS[name]
    result = function(DualArray(z.copy(), dz[None].copy()))
    value = result.values if isinstance(result, DualArray) else result.value
    np.testing.assert_array_equal(value, function(z))
    expected = central_difference(function, [z], [dz])
    assert_tangent_close(result.partials[0], expected, np.complex128, name)


def test_holomorphic_jacobian_is_df_dz_as_in_jax():
    z = np.array([0.3 + 0.2j, 0.5 - 0.1j, -0.2 + 0.4j])

    def f(w):
        return np.exp(w) * w + np.sin(w) ** 2 / (w + 2)

    jac = dualgpu.jacobian(f, z, holomorphic=True, progress=False)
    h = 1e-6  # holomorphic: the derivative along a real step is df/dz
    np.testing.assert_allclose(np.diag(jac), (f(z + h) - f(z - h)) / (2 * h), rtol=1e-8)
    assert jac.dtype == np.complex128 and not np.any(jac - np.diag(np.diag(jac)))
    np.testing.assert_allclose(dualgpu.jacfwd(np.exp, holomorphic=True)(0.5 + 0.1j),
                               np.exp(0.5 + 0.1j), rtol=1e-15)
    with pytest.raises(dualgpu.errors.DualgpuError, match="output 0 of f is real.*Fix"):
        dualgpu.jacobian(np.abs, z, holomorphic=True, progress=False)
    with pytest.raises(dualgpu.errors.DualgpuError, match=r"argument 0 is dtype float64.*Fix"):
        dualgpu.jacobian(np.exp, z.real, holomorphic=True, progress=False)


@pytest.mark.peers
def test_holomorphic_jacobian_matches_jax_jacfwd():
    jax = pytest.importorskip("jax")
    z = np.array([0.3 + 0.2j, 0.5 - 0.1j])

    def f(w, xp):
        return xp.exp(w) * xp.sqrt(w + 1) - xp.tanh(w[::-1])

    with jax.enable_x64(True):
        expected = np.asarray(jax.jacfwd(lambda w: f(w, jax.numpy), holomorphic=True)(
            jax.numpy.asarray(z)))
    got = dualgpu.jacobian(lambda w: f(w, np), z, holomorphic=True, progress=False)
    np.testing.assert_allclose(got, expected, rtol=1e-13)


@pytest.mark.peers
def test_jvp_of_complex_primals_matches_jax_jvp_holomorphic_or_not():
    jax = pytest.importorskip("jax")
    z, dz = np.array([0.3 + 0.2j, 0.5 - 0.1j]), np.array([1.0 - 0.5j, 0.2 + 0.3j])

    def f(w, xp):
        return xp.abs(w) ** 2 + xp.exp(w) * xp.conj(w)  # not holomorphic

    _, got = dualgpu.jvp(lambda w: f(w, np), (z,), (dz,))
    with jax.enable_x64(True):
        _, expected = jax.jvp(lambda w: f(w, jax.numpy), (jax.numpy.asarray(z),),
                              (jax.numpy.asarray(dz),))
    np.testing.assert_allclose(got, np.asarray(expected), rtol=1e-14)
    _, along_real = dualgpu.jvp(lambda w: f(w, np), (z,), (dz.real,))  # a real tangent
    np.testing.assert_allclose(along_real, central_difference(lambda w: f(w, np), [z],
                                                              [dz.real]), rtol=1e-7)
    with pytest.raises(dualgpu.errors.DualgpuError, match="tangent 0 is complex.*dropped"):
        dualgpu.jvp(lambda w: w, (z.real,), (dz,))  # a real primal keeps real tangents
