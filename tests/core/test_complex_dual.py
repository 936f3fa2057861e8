"""The complex Python Dual (host and simulator): every complex rule in each of its forms.

Forms: operators (``z * w``, ``-z``, ``abs(z)``), attributes (``z.real``, ``z.imag``,
``z.conjugate()``), numpy ufuncs on scalars (``np.exp(z)``) and :mod:`dualgpu.dcmath`
(``cmath.exp(z)`` in a kernel run by the simulator). Each against a complex128 central
difference along the tangent (tests/fixtures/complex_harness.py), complex64 and complex128.
"""
import cmath
import operator

import numpy as np
import pytest

from complex_harness import (BINARY, BINARY_KINDS, CMATH, NUMPY, OPERATORS, UNARY,
                             assert_tangent_close, central_difference, draw)
import dualgpu
from dualgpu import Dual, dcmath
from dualgpu.errors import DualgpuError, MissingRuleError  # noqa: F401

DTYPES = (np.complex64, np.complex128)
LANES = 2

#: (form name, rule key -> function) of every scalar form
FORMS = [("operator", OPERATORS), ("numpy", NUMPY), ("dcmath", CMATH)]
CASES = [(form, key, kinds) for form, table in FORMS for key in UNARY + BINARY if key in table
         for kinds in ([("c",), ("r",)] if key in UNARY else BINARY_KINDS)
         if not (kinds == ("r",) and form != "dcmath")]  # real in, complex rule: dcmath only


def _scalar(value, tangent):
    if tangent is None:
        return value[()]
    lanes = np.stack([tangent, 2 * tangent])  # lane 1: twice lane 0
    return Dual(value[()], lanes)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("form, key, kinds", CASES,
                         ids=[f"{f}-{k}-{'-'.join(kinds)}" for f, k, kinds in CASES])
def test_complex_rule_on_python_duals(form, key, kinds, dtype):
    rng = np.random.default_rng(len(key) + 7 * len(kinds))
    dtype = np.dtype(dtype)
    drawn = [draw(key, i, kind, dtype, (), rng) for i, kind in enumerate(kinds)]
    function = dict(FORMS)[form][key]
    result = function(*[_scalar(v, t) for v, t in drawn])
    assert isinstance(result, Dual) and result.lanes == LANES
    reference = NUMPY[key]
    expected = central_difference(reference, [v for v, _ in drawn], [t for _, t in drawn])
    assert_tangent_close(result.partials[0], expected, dtype, f"{form} {key}{kinds}")
    assert_tangent_close(result.partials[1], 2 * expected, dtype, f"{form} {key}{kinds} lane 1")
    with np.errstate(all="ignore"):
        plain = reference(*[np.asarray(v).astype(dtype if k in ("c", "kc") else v.dtype)
                            for (v, _), k in zip(drawn, kinds)])
    np.testing.assert_allclose(complex(result.value), complex(plain), rtol=1e-6 if dtype ==
                               np.complex64 else 1e-15)


def test_cmath_extras_on_duals():
    v = Dual(0.3, [1.0])
    r, phi = dcmath.polar(dcmath.rect(2 * v, v))  # polar(rect(r, phi)) = (r, phi)
    assert np.allclose([r.value, phi.value], [0.6, 0.3])
    np.testing.assert_allclose([r.partials[0], phi.partials[0]], [2.0, 1.0], rtol=1e-14)
    z = dcmath.complex(v, v * v)  # complex(a, b): a + i b
    assert z.partials[0] == 1 + 0.6j and dcmath.complex(v).dtype == np.complex128
    assert dcmath.isfinite(z) and not dcmath.isnan(z) and not dcmath.isinf(z)
    base = dcmath.log(z, 10)
    np.testing.assert_allclose(base.partials[0], (1 + 0.6j) / (complex(z.value) * np.log(10)))
    assert dcmath.exp(1.0) == cmath.exp(1.0)  # plain numbers: cmath itself
    assert dcmath.isclose(z, z)  # reads the values
    assert dcmath.phase(Dual(-2.0, [1.0])).value == np.pi


def test_complex_duals_mix_with_real_duals_and_constants():
    u = Dual(np.float32(0.5), np.ones(1, np.float32))
    z = u * 1j
    assert z.dtype == np.complex64  # numpy's promotion: a Python complex is weak
    assert (np.complex128(2) * z).dtype == np.complex128
    w = Dual(1 + 1j, [1j])
    assert (w + u).dtype == np.complex128 and (u + w).partials.tolist() == [1 + 1j]
    assert w == 1 + 1j and w != 2 and bool(w)
    assert w.real.dtype == np.float64 and (w * w.conjugate()).imag.partials.tolist() == [0.0]


def test_ordering_a_complex_dual_names_the_fix():
    w = Dual(1 + 1j, [1j])
    for compare in (operator.lt, operator.le, operator.gt, operator.ge):
        with pytest.raises(TypeError, match=r"orders complex numbers.*Fix: compare a real"):
            compare(w, 0.5)
    with pytest.raises(TypeError, match="orders complex numbers"):
        max(w, Dual(0.5, [1.0]))
    with pytest.raises(TypeError, match="drop the partials"):
        complex(w)
    with pytest.raises(TypeError, match="drop the imaginary part"):
        w.astype(np.float64)


def test_unsupported_complex_operations_name_themselves():
    w = Dual(1 + 1j, [1j])
    with pytest.raises(TypeError, match="orders complex numbers"):
        w // 2
    with pytest.raises(MissingRuleError, match=r"hypot has no rule for complex numbers"):
        np.hypot(w, 1.0)
    with pytest.raises(DualgpuError, match="nested derivative"):
        Dual(Dual(1.0, [1.0]), [Dual(0.0, [0.0])], tag=1) * 1j


def test_values_are_the_plain_codes_bit_for_bit():
    z = np.complex128(0.3 + 1.7j)
    w = Dual(z, [1.0])
    assert (w ** 2).value == z ** 2 and (w * 3 - 1j).value == z * 3 - 1j
    assert dcmath.exp(w).value == cmath.exp(z) and np.exp(w).value == np.exp(z)
    assert abs(w).value == abs(z) and dcmath.phase(w).value == cmath.phase(z)


def test_complex_of_real_duals_on_the_host_names_the_spelling_that_keeps_the_partials():
    def f(a, b):
        z = complex(a, b)  # Python's complex() must return a plain complex
        return np.array([(z * z).real, (z * z).imag])

    with pytest.raises(TypeError, match=r"a \+ 1j \* b") as info:
        dualgpu.jacobian(f, 1.0, 2.0, argnums=(0, 1), progress=False)
    assert "sparsity" not in str(info.value) and "cuda backend" not in str(info.value)
    d_a, d_b = dualgpu.jacobian(lambda a, b: np.array([((a + 1j * b) ** 2).real,
                                                      ((a + 1j * b) ** 2).imag]),
                                1.0, 2.0, argnums=(0, 1), progress=False)
    np.testing.assert_allclose(d_a, [2.0, 4.0])
    np.testing.assert_allclose(d_b, [-4.0, 2.0])
