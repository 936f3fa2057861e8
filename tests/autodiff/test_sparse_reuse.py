"""Reusing a sparse coloring at another input: a pattern detected at one input (local: the
branches taken there) must not silently corrupt the Jacobian where a branch flips."""
import math

import numba
import numpy as np
import pytest

import dualgpu
from dualgpu import DualgpuError, cuda, sparse


@cuda.jit
def _upwind(u, out, c):
    i = cuda.grid(1)
    n = u.shape[0]
    if i < n:
        if u[i] > 0:  # flux from the left
            out[i] = u[i] - c * u[i] * (u[i] - u[(i - 1) % n])
        else:  # flux from the right
            out[i] = u[i] - c * u[i] * (u[(i + 1) % n] - u[i])


def upwind(u):
    d_u = cuda.to_device(u)
    out = cuda.device_array_like(d_u)
    _upwind[1, 32](d_u, out, 0.4)
    return out.copy_to_host()


N = 12
U_POSITIVE = np.linspace(0.5, 1.5, N)  # every branch: from the left
U_MIXED = np.where(np.arange(N) % 3 == 0, -1.0, 1.0) * U_POSITIVE  # some from the right


def _dense(u):
    return np.asarray(dualgpu.jacobian(upwind, u, progress=False)).reshape(N, N)


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
def test_local_coloring_reused_where_a_branch_flips_is_refused(backend):
    with dualgpu.using_backend(backend):
        J1 = sparse.sparse_jacobian(upwind, (U_POSITIVE,), progress=False)
        np.testing.assert_allclose(J1.toarray(), _dense(U_POSITIVE), rtol=1e-14, atol=1e-14)
        with pytest.raises(DualgpuError, match="detected at another input"):
            sparse.sparse_jacobian(upwind, (U_MIXED,), sparsity=J1.coloring, progress=False)


def test_the_case_is_one_where_trusting_the_pattern_gives_wrong_entries():
    """Without the check (a coloring trusted as global), the reuse returns wrong numbers
    inside the pattern: what the probe is there to stop."""
    import copy

    with dualgpu.using_backend("cpu"):
        J1 = sparse.sparse_jacobian(upwind, (U_POSITIVE,), progress=False)
        trusted = copy.copy(J1.coloring)
        trusted.local = False
        J2 = sparse.sparse_jacobian(upwind, (U_MIXED,), sparsity=trusted, progress=False)
    dense = _dense(U_MIXED)
    inside = J1.coloring.pattern.toarray()
    assert not np.allclose(J2.toarray()[inside], dense[inside])


def test_local_coloring_reused_where_no_branch_flips_is_exact():
    with dualgpu.using_backend("cpu"):
        J1 = sparse.sparse_jacobian(upwind, (U_POSITIVE,), progress=False)
        J2 = sparse.sparse_jacobian(upwind, (U_POSITIVE * 2,), sparsity=J1.coloring,
                                    progress=False)
        np.testing.assert_allclose(J2.toarray(), _dense(U_POSITIVE * 2), rtol=1e-14, atol=1e-14)


@cuda.jit
def _upwind_minmax(u, out, c):
    i = cuda.grid(1)
    n = u.shape[0]
    if i < n:  # the same scheme without a branch on u: max/min count both sides
        out[i] = u[i] - c * (max(u[i], 0.0) * (u[i] - u[(i - 1) % n])
                             + min(u[i], 0.0) * (u[(i + 1) % n] - u[i]))


def upwind_minmax(u):
    d_u = cuda.to_device(u)
    out = cuda.device_array_like(d_u)
    _upwind_minmax[1, 32](d_u, out, 0.4)
    return out.copy_to_host()


def test_global_pattern_refuses_a_branch_on_the_state():
    with dualgpu.using_backend("cpu"):
        local = sparse.detect_sparsity(upwind, (U_POSITIVE,))
        assert local.nnz == 2 * N  # the left neighbour only: the branch taken here
        with pytest.raises(DualgpuError,
                           match="kernel .*_upwind.* branches on a value that depends on the "
                                 "input"):
            sparse.detect_sparsity(upwind, (U_POSITIVE,), mode="global")
        with pytest.raises(DualgpuError, match="branches on a value"):
            sparse.sparse_jacobian(upwind, (U_POSITIVE,), sparsity="detect-global",
                                   progress=False)


def test_global_pattern_holds_at_every_input_and_is_reused_without_a_probe():
    with dualgpu.using_backend("cpu"):
        pattern = sparse.detect_sparsity(upwind_minmax, (U_POSITIVE,), mode="global")
        assert pattern.nnz == 3 * N  # both neighbours, whichever way the flow goes here
        J1 = sparse.sparse_jacobian(upwind_minmax, (U_POSITIVE,), sparsity="detect-global",
                                    progress=False)
        assert not J1.coloring.local
        J2 = sparse.sparse_jacobian(upwind_minmax, (U_MIXED,), sparsity=J1.coloring,
                                    progress=False)
        dense = np.asarray(dualgpu.jacobian(upwind_minmax, U_MIXED, progress=False))
        np.testing.assert_allclose(J2.toarray(), dense.reshape(N, N), rtol=1e-14, atol=1e-14)
        for u in (U_POSITIVE, U_MIXED, -U_POSITIVE):  # it holds everywhere
            d = np.asarray(dualgpu.jacobian(upwind_minmax, u, progress=False)).reshape(N, N)
            assert not ((d != 0) & ~pattern.toarray()).any()


# -- global patterns: every conversion of a traced value to an integer is refused (issue 43 S6)
def _launcher(kernel):
    def f(u):
        d_u = cuda.to_device(u)
        out = cuda.device_array_like(d_u)
        kernel[1, 32](d_u, out)
        return out.copy_to_host()

    return f


@cuda.jit
def _gather_floor(u, out):
    i = cuda.grid(1)
    n = u.shape[0]
    if i < n:
        j = math.floor(3 * u[i]) % n  # the index
        out[i] = u[i] * u[j]


@cuda.jit
def _gather_ceil(u, out):
    i = cuda.grid(1)
    n = u.shape[0]
    if i < n:
        out[i] = u[i] * u[math.ceil(3 * u[i]) % n]


@cuda.jit
def _gather_trunc(u, out):
    i = cuda.grid(1)
    n = u.shape[0]
    if i < n:
        out[i] = u[i] * u[math.trunc(3 * u[i]) % n]


def _gathering(convert):
    """A kernel whose index comes from the state through ``convert`` (a float -> int) in a
    device function."""
    convert = cuda.jit(device=True)(convert)

    @cuda.jit
    def gather(u, out):
        i = cuda.grid(1)
        n = u.shape[0]
        if i < n:
            out[i] = u[i] * u[convert(3.0 * u[i]) % n]

    return _launcher(gather)


def _to_int64(x):
    return numba.int64(x)


def _to_int32(x):
    return numba.int32(x)


def _int_of_floordiv(x):
    return int(x // 1.0)


def _int_of_floor_in_device_function(x):
    return math.floor(x)


CONVERSIONS = {
    "math.floor": lambda: _launcher(_gather_floor),
    "math.ceil": lambda: _launcher(_gather_ceil),
    "math.trunc": lambda: _launcher(_gather_trunc),
    "int64 cast": lambda: _gathering(_to_int64),
    "int32 cast": lambda: _gathering(_to_int32),
    "int of //": lambda: _gathering(_int_of_floordiv),
    "math.floor in a device function": lambda: _gathering(_int_of_floor_in_device_function),
}
U_LOW = np.linspace(0.1, 0.9, 8)  # index 0..2 here
U_HIGH = U_LOW[::-1] + 1.0  # other indices there


@pytest.mark.parametrize("conversion", sorted(CONVERSIONS))
def test_global_pattern_refuses_every_conversion_to_an_index(conversion):
    with dualgpu.using_backend("cpu"):
        with pytest.raises(DualgpuError, match="branches on a value that depends on the input"):
            sparse.detect_sparsity(CONVERSIONS[conversion](), (U_LOW,), mode="global")


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
def test_floor_index_under_detect_global_raises_instead_of_a_wrong_jacobian(backend):
    """The issue's repro: j = floor(3 u[i]) % n. Before, the pattern of U_LOW was marked
    global and reused at U_HIGH without a probe: entries 100% wrong, no error."""
    f = _launcher(_gather_floor)
    with dualgpu.using_backend(backend):
        with pytest.raises(DualgpuError, match="branches on a value"):
            sparse.sparse_jacobian(f, (U_LOW,), sparsity="detect-global", progress=False)
        J = sparse.sparse_jacobian(f, (U_LOW,), sparsity="detect", progress=False)
        assert J.coloring.local  # the local pattern: checked by the probe at U_HIGH
        with pytest.raises(DualgpuError, match="detected at another input"):
            sparse.sparse_jacobian(f, (U_HIGH,), sparsity=J.coloring, progress=False)


@cuda.jit
def _quantized(u, out):
    i = cuda.grid(1)
    n = u.shape[0]
    if i < n:  # a step function used as a value, not as an index: no decision is taken
        out[i] = u[i] * ((4.0 * u[(i + 1) % n]) // 1.0) + u[(i - 1) % n]


def quantized(u):
    d_u = cuda.to_device(u)
    out = cuda.device_array_like(d_u)
    _quantized[1, 32](d_u, out)
    return out.copy_to_host()


def test_global_pattern_of_a_step_function_used_as_a_value_holds_elsewhere():
    """`//` keeps its argument's dependencies in a global pattern (a superset of the
    Jacobian's entries, which hold at every input) and the reuse is exact."""
    with dualgpu.using_backend("cpu"):
        J0 = sparse.sparse_jacobian(quantized, (U_LOW,), sparsity="detect-global",
                                    progress=False)
        assert J0.coloring.pattern.nnz == 3 * 8
        J1 = sparse.sparse_jacobian(quantized, (U_HIGH,), sparsity=J0.coloring, progress=False)
        dense = np.asarray(dualgpu.jacobian(quantized, U_HIGH, progress=False)).reshape(8, 8)
    np.testing.assert_allclose(J1.toarray(), dense, rtol=1e-14, atol=1e-14)


# -- the probe's tolerance: a small miss must not become a 100% error (issue 43 S7)
@cuda.jit
def _weak_right(u, out, w):
    i = cuda.grid(1)
    n = u.shape[0]
    if i < n:  # diagonal 1, left neighbour w; the right neighbour w only where u > 0
        s = u[i] + w * u[(i - 1) % n]
        if u[i] > 0:
            s += w * u[(i + 1) % n]
        out[i] = s


def weak_right(u):
    d_u = cuda.to_device(u)
    out = cuda.device_array_like(d_u)
    _weak_right[1, 32](d_u, out, u.dtype.type(1e-4))
    return out.copy_to_host()


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_small_miss_is_refused_not_added_into_an_entry_of_its_size(backend, dtype):
    """Detected where u < 0 (diagonal and left neighbour: 2 colors, columns i-1 and i+1
    share one), reused where u > 0: the new right coupling 1e-4 of the diagonal would be
    added into the left one of the same size, 100% wrong. sqrt(eps) of the row's scale
    (3.4e-4 in float32) let it pass in every row."""
    n = 8
    u_neg = -np.linspace(1.0, 2.0, n).astype(dtype)
    with dualgpu.using_backend(backend):
        J = sparse.sparse_jacobian(weak_right, (u_neg,), progress=False)
        assert J.coloring.n_colors == 2
        with pytest.raises(DualgpuError, match="detected at another input") as error:
            sparse.sparse_jacobian(weak_right, (-u_neg,), sparsity=J.coloring, progress=False)
    assert "of its row's scale" in str(error.value)


def test_probe_tolerance_is_explicit_and_checked():
    n = 8
    u_neg = -np.linspace(1.0, 2.0, n).astype(np.float32)
    with dualgpu.using_backend("cpu"):
        J = sparse.sparse_jacobian(weak_right, (u_neg,), progress=False)
        # a knowingly loose tolerance lets the miss through: the documented trade
        loose = sparse.sparse_jacobian(weak_right, (-u_neg,), sparsity=J.coloring,
                                       progress=False, probe_tolerance=1e-2)
        dense = np.asarray(dualgpu.jacobian(weak_right, -u_neg, progress=False)).reshape(n, n)
        assert not np.allclose(loose.toarray(), dense, rtol=0.5)
        with pytest.raises(DualgpuError, match="probe_tolerance must be a number in"):
            sparse.sparse_jacobian(weak_right, (u_neg,), sparsity=J.coloring,
                                   progress=False, probe_tolerance=2.0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reuse_where_the_pattern_holds_passes_the_tight_probe(dtype):
    """64 eps is above the rounding of real runs: 50 steps of the heat equation, reused at
    another input, pass (measured: under 2.3 eps of the row's scale)."""
    from simulations import heat1d

    u0 = heat1d.default_initial_state(200).astype(dtype)
    f = lambda u: heat1d.simulate(u, n_steps=50)  # noqa: E731
    with dualgpu.using_backend("cpu"):
        J = sparse.sparse_jacobian(f, (u0,), progress=False)
        u1 = (u0 * 1.3 + 0.2).astype(dtype)
        J1 = sparse.sparse_jacobian(f, (u1,), sparsity=J.coloring, progress=False)
        J2 = sparse.sparse_jacobian(f, (u1,), progress=False)
    np.testing.assert_allclose(J1.toarray(), J2.toarray(), rtol=0, atol=0)


@cuda.jit
def _product_with_shift(u, out, s):
    i = cuda.grid(1)
    n = u.shape[0]
    if i < n:
        out[i] = u[(i + s) % n] * u[i]


def _host_decided(how):
    """A second launch whose shift f's host code takes from the first launch's values."""
    def f(u):
        d = cuda.to_device(u)
        o = cuda.device_array_like(d)
        _product_with_shift[1, 32](d, o, 1)
        h = o.copy_to_host()
        if how == "argmax":
            s = int(np.argmax(h))
        elif how == "digitize":
            s = int(np.digitize(h, [0.5, 1.0, 1.5])[0])
        else:
            s = int(h.astype(np.int64)[1])
        o2 = cuda.device_array_like(d)
        _product_with_shift[1, 32](cuda.to_device(h), o2, s)
        return o2.copy_to_host()
    return f


@pytest.mark.parametrize("how", ["argmax", "digitize", "astype"])
def test_a_global_pattern_refuses_host_decisions_on_the_traced_values(how):
    """Host code picks a launch's shift from values (np.argmax, np.digitize, astype(int)):
    the 'global' pattern held at the detection input only, and its coloring, trusted at
    every input without a probe, gave wrong entries (errors of 1 to 4) at another. It is
    refused, with the local pattern as the fix; the local one is checked where reused."""
    f = _host_decided(how)
    u1 = np.linspace(0.5, 1.5, 8)
    u2 = -np.linspace(0.5, 1.5, 8)[::-1]
    u2[1] = 1.7
    with dualgpu.using_backend("cpu"):
        with pytest.raises(DualgpuError, match=r"mode='global'\): f's host code took a decision "
                                               r"from the values.*sparsity='detect'"):
            dualgpu.jacobian(f, u1, sparsity="detect-global")
        local = dualgpu.jacobian(f, u1, sparsity="detect")
        np.testing.assert_allclose(sparse.to_dense(local), dualgpu.jacobian(f, u1), rtol=1e-12)
        try:  # reused where the shift differs: right, or refused by the probe lane
            J2 = sparse.to_dense(dualgpu.jacobian(f, u2, sparsity=local.coloring))
        except DualgpuError as error:
            assert "probe" in str(error) or "pattern" in str(error)
        else:
            np.testing.assert_allclose(J2, dualgpu.jacobian(f, u2), rtol=1e-12, atol=1e-12)
