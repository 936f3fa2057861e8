"""numpy on host duals: every supported operation against numpy and central differences.

One generic checker (:func:`check`) runs each case of :data:`UFUNC_CASES` (generated from
the rule table) and :data:`CASES` (the hand-written functions), for float32 and float64
and 1 and 8 lanes:

* the values equal numpy's answer on the plain values, bit for bit;
* lane k of the partials equals the central difference of the same numpy expression on
  plain float64 inputs, along lane k's tangent of every dual input (norm-wise error,
  rtol 1e-6 for float64 and 2e-3 for float32 against the float64 differences).

Pure numpy, no kernels compiled: the whole grid runs in seconds.
"""
import numpy as np
import pytest

import dualgpu
from dualgpu import Dual, DualArray, DualgpuError
from dualgpu.host.ufuncs import UFUNC_RULES

TOL = {np.float64: dict(rtol=1e-6, atol=1e-9), np.float32: dict(rtol=2e-3, atol=2e-4)}
H = 1e-6  # relative step of the float64 central differences
LANES = (1, 8)
DTYPES = (np.float32, np.float64)


class Arg:
    """One argument of a case: shape, interval of its values, and whether it is a dual."""

    def __init__(self, shape, lo=-2.0, hi=2.0, dual=True, sorted_=False, scalar=False):
        self.shape, self.lo, self.hi, self.dual = shape, lo, hi, dual
        self.sorted, self.scalar = sorted_, scalar

    def draw(self, rng, dtype):
        x = rng.uniform(self.lo, self.hi, size=self.shape)
        if self.sorted:
            x = np.sort(x)
        x = x.astype(dtype)
        return dtype(x) if self.shape == () else x


def D(*shape, lo=-2.0, hi=2.0, **kw):
    return Arg(shape, lo, hi, True, **kw)


def P(*shape, lo=-2.0, hi=2.0, **kw):
    return Arg(shape, lo, hi, False, **kw)


def _as_dual(x, tangents):
    if np.ndim(x) == 0:
        return Dual(x, tangents, dtype=np.asarray(x).dtype)
    return DualArray(np.array(x), np.array(tangents, dtype=x.dtype))


def _flat(result):
    if isinstance(result, (tuple, list)):
        return [r for item in result for r in _flat(item)]
    return [result]


def _parts(item):
    if isinstance(item, DualArray):
        return item.values, item.partials
    if isinstance(item, Dual):
        return np.asarray(item.value), item.partials
    return np.asarray(item), None


def check(f, args, dtype, lanes, seed=0, exact=True, reference=None):
    """Compare f on duals with f on plain values (values) and central differences (partials)."""
    rng = np.random.default_rng(seed)
    plain = [a.draw(rng, dtype) for a in args]
    tangents = [rng.standard_normal((lanes,) + a.shape).astype(dtype) if a.dual else None
                for a in args]
    duals = [_as_dual(x, t) if t is not None else x for x, t in zip(plain, tangents)]
    before = [(np.copy(d.values), np.copy(d.partials)) if isinstance(d, DualArray) else None
              for d in duals]
    got = _flat(f(*duals))
    for d, b in zip(duals, before):  # never mutate the caller's inputs
        if b is not None:
            np.testing.assert_array_equal(d.values, b[0])
            np.testing.assert_array_equal(d.partials, b[1])
    want = _flat((reference or f)(*plain))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        values, partials = _parts(g)
        assert partials is not None, f"the result lost its partials: {type(g).__name__}"
        assert partials.shape == (lanes,) + values.shape
        assert values.dtype == np.asarray(w).dtype, (values.dtype, np.asarray(w).dtype)
        if exact:
            np.testing.assert_array_equal(values, w)
        else:
            np.testing.assert_allclose(values, w, rtol=1e-12 if dtype == np.float64 else 1e-5)
    wide = [np.asarray(x, np.float64) if a.shape else float(x) for x, a in zip(plain, args)]
    for k in range(lanes):
        def shifted(h):
            moved = [x + h * t[k].astype(np.float64) if t is not None else x
                     for x, t in zip(wide, tangents)]
            return [np.asarray(_parts(r)[0], np.float64) for r in _flat((reference or f)(*moved))]

        scale = max(1.0, max(float(np.max(np.abs(x))) for x in wide))
        h = H * scale
        fd = [(a - b) / (2 * h) for a, b in zip(shifted(h), shifted(-h))]
        for i, (g, d) in enumerate(zip(got, fd)):
            ad = np.asarray(_parts(g)[1][k], np.float64)
            size = max(float(np.max(np.abs(d), initial=0)), float(np.max(np.abs(ad), initial=0)))
            err = float(np.max(np.abs(ad - d), initial=0))
            tol = TOL[dtype]
            assert err <= tol["atol"] + tol["rtol"] * size, (
                f"output {i}, lane {k}: max |AD - FD| = {err:.3g} (size {size:.3g}, dtype "
                f"{np.dtype(dtype).name})\nAD {ad}\nFD {d}")


# ---------------------------------------------------------------------------
# elementwise ufuncs, generated from the rule table
# ---------------------------------------------------------------------------
def _domain(rule, i):
    lo, hi = rule.domain[i]
    return lo, hi


def _ufunc_cases():
    cases = {}
    for name, (rule, _) in UFUNC_RULES.items():
        ufunc = getattr(np, name)
        if len(rule.derivatives) == 1:
            lo, hi = _domain(rule, 0)
            cases[f"{name}"] = (lambda a, u=ufunc: u(a), [D(3, 4, lo=lo, hi=hi)])
            continue
        (xlo, xhi), (ylo, yhi) = _domain(rule, 0), _domain(rule, 1)
        cases[f"{name}(dual, dual)"] = (lambda a, b, u=ufunc: u(a, b),
                                        [D(3, 4, lo=xlo, hi=xhi), D(3, 4, lo=ylo, hi=yhi)])
        cases[f"{name}(dual, plain row)"] = (lambda a, b, u=ufunc: u(a, b),
                                             [D(3, 4, lo=xlo, hi=xhi), P(4, lo=ylo, hi=yhi)])
        cases[f"{name}(plain, dual)"] = (lambda a, b, u=ufunc: u(a, b),
                                         [P(3, 4, lo=xlo, hi=xhi), D(3, 4, lo=ylo, hi=yhi)])
        cases[f"{name}(Dual scalar, dual)"] = (lambda a, b, u=ufunc: u(a, b),
                                               [D(lo=xlo, hi=xhi), D(4, lo=ylo, hi=yhi)])
        cases[f"{name}(dual column, plain)"] = (lambda a, b, u=ufunc: u(a, b),
                                                [D(3, 1, lo=xlo, hi=xhi), P(4, lo=ylo, hi=yhi)])
    return cases


UFUNC_CASES = _ufunc_cases()
_DISCONTINUOUS = ("floor_divide", "remainder", "fmod", "copysign")


@pytest.mark.parametrize("lanes", LANES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(UFUNC_CASES))
def test_ufunc(name, dtype, lanes):
    f, args = UFUNC_CASES[name]
    seed = 0
    if name.split("(")[0] in _DISCONTINUOUS:
        seed = _smooth_seed(f, args, dtype)
    check(f, args, dtype, lanes, seed=seed)


def _smooth_seed(f, args, dtype):
    """A seed whose draw keeps x / y (and y) away from the jumps of mod, floor_divide..."""
    for seed in range(200):
        rng = np.random.default_rng(seed)
        x, y = [np.asarray(a.draw(rng, dtype), np.float64) for a in args]
        q = x / y
        if np.all(np.abs(q - np.round(q)) > 0.02) and np.all(np.abs(y) > 0.05) \
                and np.all(np.abs(x) > 0.05):
            return seed
    raise AssertionError("no smooth draw found")


def test_operators_are_the_ufuncs():
    rng = np.random.default_rng(1)
    u = DualArray(rng.uniform(0.5, 2, 5), rng.normal(size=(2, 5)))
    x = rng.uniform(0.5, 2, 5)
    pairs = [(u + x, np.add(u, x)), (x - u, np.subtract(x, u)), (u * 2.5, np.multiply(u, 2.5)),
             (u / x, np.divide(u, x)), (2 ** u, np.power(2, u)), (u ** 2, np.power(u, 2)),
             (-u, np.negative(u)), (abs(u), np.absolute(u)), (+u, u),
             (u % 0.7, np.remainder(u, 0.7)),
             (1.0 / u, np.divide(1.0, u))]
    for a, b in pairs:
        np.testing.assert_array_equal(a.values, b.values)
        np.testing.assert_array_equal(a.partials, b.partials)
    assert (u ** 2).values.tolist() == (u.values ** 2).tolist()
    np.testing.assert_array_equal(u < x, u.values < x)
    np.testing.assert_array_equal(u == u, np.ones(5, bool))


def test_inplace_operators_write_into_the_array():
    u = DualArray(np.array([1.0, 2.0]), np.array([[1.0, 0.0], [0.0, 1.0]]))
    values, partials = u.values, u.partials
    u *= np.array([3.0, 4.0])
    u += 1.0
    u **= 2
    assert u.values is values and u.partials is partials
    np.testing.assert_allclose(u.values, [16.0, 81.0])
    np.testing.assert_allclose(u.partials, [[2 * 4 * 3, 0], [0, 2 * 9 * 4]])


@pytest.mark.parametrize("dtype", DTYPES)
def test_value_only_ufuncs(dtype):
    u = DualArray(np.array([-1.5, 0.0, np.nan, 2.5], dtype), np.ones((3, 4), dtype))
    for name in ("isnan", "isfinite", "isinf", "signbit", "less", "greater_equal", "equal",
                 "logical_and", "logical_not"):
        ufunc = getattr(np, name)
        args = (u,) if ufunc.nin == 1 else (u, 0.0)
        plain = (u.values,) if ufunc.nin == 1 else (u.values, 0.0)
        with np.errstate(invalid="ignore"):
            got, want = ufunc(*args), ufunc(*plain)
        assert type(got) is np.ndarray and got.dtype == bool
        np.testing.assert_array_equal(got, want)
    for name in ("floor", "ceil", "trunc", "rint", "sign"):
        got = getattr(np, name)(u)
        assert isinstance(got, DualArray) and not got.partials.any()
        np.testing.assert_array_equal(got.values, getattr(np, name)(u.values))
    got = np.heaviside(u, 0.5)
    np.testing.assert_array_equal(got.values, np.heaviside(u.values, 0.5))
    d = Dual(dtype(-0.5), [1.0, 2.0], dtype=dtype)
    assert np.isnan(d) is np.False_ and np.floor(d).partials.tolist() == [0.0, 0.0]


def test_float32_stays_float32_with_python_scalars():
    u = DualArray(np.ones(3, np.float32), np.ones((2, 3), np.float32))
    for r in (u * 2.5, 2.5 + u, u ** 2, np.sin(u), u / 3, np.maximum(u, 0.5)):
        assert r.dtype == np.float32 and r.partials.dtype == np.float32
    r = u * np.float64(2.0)  # a numpy float64 scalar promotes, as in numpy
    assert r.dtype == np.float64 and r.partials.dtype == np.float64


# ---------------------------------------------------------------------------
# hand-written functions
# ---------------------------------------------------------------------------
def _idx2(a):
    return a[[0, 2], :, [1, 3]]


CASES = {
    # reductions
    "sum": (lambda a: np.sum(a), [D(3, 4)]),
    "sum axis 0": (lambda a: np.sum(a, axis=0), [D(3, 4)]),
    "sum axis -1 keepdims": (lambda a: np.sum(a, axis=-1, keepdims=True), [D(2, 3, 4)]),
    "sum axes (0, 2)": (lambda a: np.sum(a, axis=(0, 2)), [D(2, 3, 4)]),
    "sum keepdims": (lambda a: np.sum(a, keepdims=True), [D(2, 3)]),
    "u.sum(axis=1)": (lambda a: a.sum(axis=1), [D(3, 4)]),
    "sum of x * u": (lambda a, x: np.sum(x * a), [D(50), P(50)]),
    "sum dtype float64": (lambda a: np.sum(a, dtype=np.float64), [D(6)]),
    "mean": (lambda a: np.mean(a), [D(3, 4)]),
    "mean axis 1": (lambda a: a.mean(axis=1), [D(3, 4)]),
    "prod": (lambda a: np.prod(a), [D(6, lo=0.5, hi=1.5)]),
    "prod axis 1": (lambda a: np.prod(a, axis=1), [D(3, 4, lo=-1.5, hi=1.5)]),
    "prod axes (0, 2) keepdims": (lambda a: a.prod(axis=(0, 2), keepdims=True),
                                  [D(2, 3, 4, lo=0.5, hi=1.5)]),
    "max": (lambda a: np.max(a), [D(3, 4)]),
    "u.max()": (lambda a: a.max(), [D(7)]),
    "max axis 0": (lambda a: np.max(a, axis=0), [D(3, 4)]),
    "max axis 1 keepdims": (lambda a: a.max(axis=1, keepdims=True), [D(3, 4)]),
    "amax axes (0, 1)": (lambda a: np.amax(a, axis=(0, 1)), [D(2, 3, 4)]),
    "min": (lambda a: np.min(a), [D(3, 4)]),
    "min axis -1": (lambda a: a.min(axis=-1), [D(2, 3, 4)]),
    "maximum.reduce": (lambda a: np.maximum.reduce(a, axis=1), [D(3, 4)]),
    "add.reduce": (lambda a: np.add.reduce(a), [D(3, 4)]),
    "multiply.reduce": (lambda a: np.multiply.reduce(a, axis=0), [D(3, 4, lo=0.5, hi=1.5)]),
    "cumsum": (lambda a: np.cumsum(a), [D(3, 4)]),
    "cumsum axis 1": (lambda a: a.cumsum(axis=1), [D(3, 4)]),
    "add.accumulate": (lambda a: np.add.accumulate(a, axis=0), [D(3, 4)]),
    "var": (lambda a: np.var(a), [D(3, 4)]),
    "var axis 0 ddof 1": (lambda a: np.var(a, axis=0, ddof=1), [D(3, 4)]),
    "std axis 1": (lambda a: a.std(axis=1), [D(3, 4)]),
    "average weights plain": (lambda a, w: np.average(a, weights=w), [D(6), P(6, lo=0.5, hi=2)]),
    "average weights dual": (lambda a, w: np.average(a, weights=w), [D(6), D(6, lo=0.5, hi=2)]),
    "average axis 1 weights 1-D": (lambda a, w: np.average(a, axis=1, weights=w),
                                   [D(3, 4), P(4, lo=0.5, hi=2)]),
    "average returned": (lambda a: np.average(a, axis=0, returned=True)[0], [D(3, 4)]),
    "median": (lambda a: np.median(a), [D(7)]),
    "median even, axis 1": (lambda a: np.median(a, axis=1), [D(3, 4)]),
    "quantile axis 0 keepdims": (lambda a: np.quantile(a, 0.3, axis=0, keepdims=True), [D(5, 3)]),
    "quantile of several q": (lambda a: np.quantile(a, [0.1, 0.5, 0.9]), [D(9)]),
    "quantile of several q, axis 1": (lambda a: np.quantile(a, [0.25, 0.75], axis=1), [D(3, 5)]),
    "percentile axes (0, 2)": (lambda a: np.percentile(a, 75, axis=(0, 2)), [D(2, 3, 4)]),
    "trapezoid": (lambda y: np.trapezoid(y, dx=0.1), [D(9)]),
    "trapezoid x dual": (lambda y, x: np.trapezoid(y, x), [D(9), D(9, sorted_=True)]),
    "trapezoid 2-D axis 0": (lambda y, x: np.trapezoid(y, x, axis=0),
                             [D(5, 3), P(5, sorted_=True)]),
    # products
    "dot vectors": (lambda a, b: np.dot(a, b), [D(5), D(5)]),
    "u @ x": (lambda a, x: a @ x, [D(5), P(5)]),
    "x @ u": (lambda x, a: x @ a, [P(5), D(5)]),
    "dot matrix vector": (lambda a, x: np.dot(a, x), [D(3, 4), P(4)]),
    "dot vector matrix": (lambda x, a: np.dot(x, a), [P(3), D(3, 4)]),
    "dot matrices": (lambda a, b: a.dot(b), [D(3, 4), D(4, 2)]),
    "dot 3-D, 2-D": (lambda a, b: np.dot(a, b), [D(2, 3, 4), D(4, 2)]),
    "dot scalar": (lambda a, b: np.dot(a, b), [D(), D(3)]),
    "matmul matrix vector": (lambda a, x: a @ x, [D(3, 4), D(4)]),
    "matmul vector matrix": (lambda x, a: x @ a, [D(4), D(4, 2)]),
    "matmul stacked": (lambda a, b: np.matmul(a, b), [D(2, 3, 4), D(4, 5)]),
    "matmul broadcast": (lambda a, b: a @ b, [D(3, 4), D(2, 4, 5)]),
    "matmul vector stacked": (lambda x, b: x @ b, [D(4), D(2, 4, 3)]),
    "vdot": (lambda a, b: np.vdot(a, b), [D(2, 3), D(2, 3)]),
    "inner": (lambda a, b: np.inner(a, b), [D(2, 3), D(4, 3)]),
    "outer": (lambda a, b: np.outer(a, b), [D(3), D(4)]),
    "tensordot 1": (lambda a, b: np.tensordot(a, b, axes=1), [D(2, 3), D(3, 4)]),
    "tensordot pairs": (lambda a, b: np.tensordot(a, b, axes=([1, 0], [0, 1])),
                        [D(2, 3, 4), D(3, 2)]),
    "einsum ij,j->i": (lambda a, x: np.einsum("ij,j->i", a, x), [D(3, 4), D(4)]),
    "einsum ij,ij": (lambda a, b: np.einsum("ij,ij", a, b), [D(3, 4), P(3, 4)]),
    "einsum ii->": (lambda a: np.einsum("ii->", a), [D(3, 3)]),
    "einsum ji (implicit transpose)": (lambda a: np.einsum("ji", a), [D(3, 4)]),
    "einsum ...j,j": (lambda a, x: np.einsum("...j,j", a, x), [D(2, 3, 4), D(4)]),
    "einsum i,i,i->": (lambda a, b, c: np.einsum("i,i,i->", a, b, c), [D(4), P(4), D(4)]),
    "multiply.outer": (lambda a, b: np.multiply.outer(a, b), [D(3), P(2, 2)]),
    "subtract.outer dual b": (lambda a, b: np.subtract.outer(a, b), [P(3), D(2)]),
    "trace": (lambda a: np.trace(a), [D(3, 3)]),
    "diagonal": (lambda a: np.diagonal(a, 1), [D(3, 4)]),
    "vecdot": (lambda a, b: np.vecdot(a, b), [D(3, 4), D(4)]),
    # linear solves (shifted to be well conditioned)
    "solve dual matrix, dual vector": (lambda a, b: np.linalg.solve(a + 4 * np.eye(4), b),
                                       [D(4, 4), D(4)]),
    "solve plain matrix, dual columns": (lambda a, b: np.linalg.solve(a + 4 * np.eye(4), b),
                                         [P(4, 4), D(4, 3)]),
    "solve dual matrix, plain columns": (lambda a, b: np.linalg.solve(a + 4 * np.eye(4), b),
                                         [D(4, 4), P(4, 2)]),
    "inv": (lambda a: np.linalg.inv(a + 3 * np.eye(3)), [D(3, 3)]),
    "implicit step": (lambda u, r: np.linalg.solve((1 + 2 * r) * np.eye(5) - r * (
        np.eye(5, k=1) + np.eye(5, k=-1)), u), [D(5), D(lo=0.1, hi=0.5)]),
    # norms
    "norm": (lambda a: np.linalg.norm(a), [D(7)]),
    "norm of a difference": (lambda a, d: np.linalg.norm(a - d), [D(3, 4), P(3, 4)]),
    "norm ord 1": (lambda a: np.linalg.norm(a, 1), [D(7)]),
    "norm ord inf": (lambda a: np.linalg.norm(a, np.inf), [D(7)]),
    "norm ord -inf": (lambda a: np.linalg.norm(a, -np.inf), [D(7)]),
    "norm ord 3": (lambda a: np.linalg.norm(a, 3), [D(7)]),
    "norm ord 0.5": (lambda a: np.linalg.norm(a, 0.5), [D(7, lo=0.2, hi=2)]),
    "norm axis 0": (lambda a: np.linalg.norm(a, axis=0), [D(3, 4)]),
    "norm axis 1 keepdims ord inf": (lambda a: np.linalg.norm(a, np.inf, axis=1, keepdims=True),
                                     [D(3, 4)]),
    "norm fro": (lambda a: np.linalg.norm(a, "fro"), [D(3, 4)]),
    "norm matrix 1": (lambda a: np.linalg.norm(a, 1), [D(3, 4)]),
    "norm matrix inf": (lambda a: np.linalg.norm(a, np.inf), [D(3, 4)]),
    "norm matrix -1": (lambda a: np.linalg.norm(a, -1), [D(3, 4)]),
    "norm matrix 2": (lambda a: np.linalg.norm(a, 2), [D(3, 4)]),
    "norm matrix -2": (lambda a: np.linalg.norm(a, -2), [D(3, 4)]),
    "norm matrix nuc": (lambda a: np.linalg.norm(a, "nuc"), [D(3, 4)]),
    "norm matrices axes (2, 0) keepdims": (
        lambda a: np.linalg.norm(a, 1, axis=(2, 0), keepdims=True), [D(2, 3, 4)]),
    # convolution and interpolation
    "convolve full": (lambda a, v: np.convolve(a, v), [D(8), P(3)]),
    "convolve same": (lambda a, v: np.convolve(a, v, "same"), [D(8), D(3)]),
    "convolve valid short first": (lambda v, a: np.convolve(v, a, "valid"), [D(3), D(8)]),
    "correlate valid": (lambda a, v: np.correlate(a, v), [D(8), D(3)]),
    "correlate full": (lambda a, v: np.correlate(a, v, "full"), [D(8), P(3)]),
    "interp fp": (lambda x, fp: np.interp(x, np.linspace(-2.5, 2.5, 6), fp),
                  [P(7, lo=-3, hi=3), D(6)]),
    "interp x": (lambda x, fp: np.interp(x, np.linspace(-2.5, 2.5, 6), fp),
                 [D(7, lo=-2.4, hi=2.4), P(6)]),
    "interp x and fp, left right": (
        lambda x, fp: np.interp(x, np.linspace(-2.5, 2.5, 6), fp, left=0.0, right=1.0),
        [D(7, lo=-3, hi=3), D(6)]),
    # shape
    "reshape": (lambda a: np.reshape(a, (4, 3)), [D(3, 4)]),
    "reshape F": (lambda a: np.reshape(a, (2, 6), order="F"), [D(3, 4)]),
    "u.reshape(-1, 2)": (lambda a: a.reshape(-1, 2), [D(3, 4)]),
    "ravel": (lambda a: np.ravel(a), [D(2, 3, 2)]),
    "transpose": (lambda a: np.transpose(a), [D(2, 3, 4)]),
    "transpose axes": (lambda a: a.transpose(1, 2, 0), [D(2, 3, 4)]),
    "u.T": (lambda a: a.T, [D(3, 4)]),
    "swapaxes": (lambda a: np.swapaxes(a, 0, -1), [D(2, 3, 4)]),
    "moveaxis": (lambda a: np.moveaxis(a, 0, 2), [D(2, 3, 4)]),
    "squeeze": (lambda a: np.squeeze(a), [D(3, 1, 4)]),
    "expand_dims": (lambda a: np.expand_dims(a, -1), [D(3, 4)]),
    "atleast_2d": (lambda a: np.atleast_2d(a), [D(4)]),
    "broadcast_to": (lambda a: np.broadcast_to(a, (3, 4)), [D(4)]),
    # joining
    "concatenate": (lambda a, b: np.concatenate([a, b]), [D(3), P(4)]),
    "concatenate axis 1": (lambda a, b: np.concatenate((a, b), axis=1), [D(3, 2), D(3, 4)]),
    "concatenate axis None": (lambda a, b: np.concatenate((a, b), axis=None), [D(3, 2), P(4)]),
    "stack axis 1": (lambda a, b: np.stack([a, b], axis=1), [D(3), P(3)]),
    "stack Duals": (lambda a, b: np.stack([a, b, a]), [D(), D()]),
    "hstack": (lambda a, b: np.hstack([a, b]), [D(3), D(2)]),
    "vstack": (lambda a, b: np.vstack([a, b]), [D(3), P(3)]),
    "append": (lambda a, b: np.append(a, b), [D(2, 2), D(3)]),
    "split": (lambda a: np.split(a, 2, axis=1), [D(3, 4)]),
    "array_split": (lambda a: np.array_split(a, 3), [D(7)]),
    # selection
    "where": (lambda a, b: np.where(a > 0, a, b), [D(3, 4), D(4)]),
    "where with a number": (lambda a: np.where(a > 0, a, 0.0), [D(3, 4)]),
    "take": (lambda a: np.take(a, [0, 2, 2], axis=1), [D(3, 4)]),
    "take flat": (lambda a: a.take([5, 0, 11]), [D(3, 4)]),
    "take_along_axis": (lambda a: np.take_along_axis(a, np.array([[0], [3], [1]]), axis=1),
                        [D(3, 4)]),
    "flip": (lambda a: np.flip(a), [D(3, 4)]),
    "flipud": (lambda a: np.flipud(a), [D(3, 4)]),
    "roll": (lambda a: np.roll(a, 2), [D(3, 4)]),
    "roll axis 1": (lambda a: np.roll(a, -1, axis=1), [D(3, 4)]),
    "repeat": (lambda a: np.repeat(a, 2, axis=0), [D(3, 4)]),
    "diff": (lambda a: np.diff(a), [D(3, 4)]),
    "diff n 2 axis 0 prepend": (lambda a, p: np.diff(a, n=2, axis=0, prepend=p), [D(3, 4), D()]),
    "sort": (lambda a: np.sort(a), [D(3, 4)]),
    "sort axis None": (lambda a: np.sort(a, axis=None), [D(3, 4)]),
    "clip": (lambda a: np.clip(a, -1.0, 1.0), [D(3, 4, lo=-2, hi=2)]),
    "clip dual bound": (lambda a, b: a.clip(b, 1.0), [D(3, 4, lo=-2, hi=2), D()]),
    "pad constant": (lambda a: np.pad(a, 2), [D(3, 4)]),
    "pad edge": (lambda a: np.pad(a, ((1, 0), (2, 1)), mode="edge"), [D(3, 4)]),
    "pad wrap": (lambda a: np.pad(a, 1, mode="wrap"), [D(5)]),
    "gradient": (lambda a: np.gradient(a, 0.5), [D(3, 4)]),
    "gradient axis 1": (lambda a: np.gradient(a, axis=1, edge_order=2), [D(3, 4)]),
    # indexing
    "slice": (lambda a: a[1:, ::2], [D(3, 4)]),
    "row": (lambda a: a[1], [D(3, 4)]),
    "element": (lambda a: a[1, 2], [D(3, 4)]),
    "Ellipsis": (lambda a: a[..., 1], [D(2, 3, 4)]),
    "newaxis": (lambda a: a[None, :, 1], [D(3, 4)]),
    "index list": (lambda a: a[[0, 2, 2]], [D(3, 4)]),
    "mask": (lambda a: a[np.arange(12).reshape(3, 4) % 3 == 0], [D(3, 4)]),
    "mask rows": (lambda a: a[np.array([True, False, True])], [D(3, 4)]),
    "separated index arrays": (_idx2, [D(3, 2, 4)]),
    "index arrays and a slice": (lambda a: a[:, [0, 3], [1, 1]], [D(2, 4, 3)]),
    # objectives as users write them
    "energy": (lambda u, w: np.sum(w * u ** 2), [D(20), P(20, lo=0, hi=1)]),
    "centroid": (lambda u, x: np.sum(x * u) / np.sum(u), [D(20, lo=0.5, hi=2), P(20)]),
    "misfit": (lambda u, d: 0.5 * np.mean(np.square(u - d)), [D(20), P(20)]),
    "windowed sum": (lambda u: np.convolve(u, np.ones(4), "valid"), [D(20)]),
    "running-sum window": (lambda u: (lambda c: c[4:] - c[:-4])(np.cumsum(u)), [D(20)]),
    "masked energy": (lambda u: np.sum(np.where(np.abs(u) > 0.5, u * u, 0.0)), [D(20)]),
}


@pytest.mark.parametrize("lanes", LANES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(CASES))
def test_function(name, dtype, lanes):
    f, args = CASES[name]
    check(f, args, dtype, lanes, seed=3)


def test_the_checker_catches_wrong_partials_values_and_drops():
    def wrong_partials(a):
        return DualArray(np.sin(a.values), a.partials) if isinstance(a, DualArray) else np.sin(a)

    def wrong_value(a):
        return a * 1.0000001 if isinstance(a, DualArray) else a

    def dropped(a):
        return a.values * 2 if isinstance(a, DualArray) else a * 2

    for f in (wrong_partials, wrong_value, dropped):
        with pytest.raises(AssertionError):
            check(f, [D(5)], np.float64, 2)


def test_solve_of_a_stack_of_matrices_says_how():
    a = DualArray(np.tile(np.eye(3), (2, 1, 1)), np.zeros((1, 2, 3, 3)))
    with pytest.raises(DualgpuError, match=r"one square matrix \(n, n\); got shape \(2, 3, 3\)"
                                           r".*loop over a stack"):
        np.linalg.solve(a, np.ones((2, 3)))
    with pytest.raises(DualgpuError, match=r"right-hand side of shape \(3,\) or \(3, k\)"):
        np.linalg.solve(a[0], np.ones(4))


def test_quantile_refuses_a_dual_level_and_other_methods():
    u = dualgpu.dual_array(np.arange(1.0, 6.0), lanes=2)
    with pytest.raises(NotImplementedError, match="derivatives with respect to the quantile"):
        np.quantile(u, dualgpu.Dual(0.5, [1.0, 0.0]))
    with pytest.raises(NotImplementedError, match="method='nearest' is not supported"):
        np.percentile(u, 50, method="nearest")
