"""Launch plans (issue 41): a repeated launch reuses what was decided, never across kinds.

A plan is keyed by the kinds of the arguments (dtype, ndim, layout, lanes, tag...) and the
context (backend, driver); it is never reused where they differ, nor where the kernel's
captured globals, the arrays' aliasing, the grid's coverage or the backend's state changed.
Each test launches through one configured launcher (``kernel[g, b]``), first with one kind,
then with another, and checks the results against references computed without plans
(:data:`dualgpu.porting.launch_plan.ENABLED` off) or by hand, and derivatives against
central finite differences.
"""
import contextlib
import warnings

import numpy as np
import pytest

import dualgpu
from dualgpu import Dual, DualArray
from dualgpu.backends.cpu import parallel as cpu_parallel
from dualgpu.errors import LaunchCoverageWarning
from dualgpu.porting import launch_plan

import kernels_launch_plans as K

TOL = {np.float64: dict(rtol=1e-7, atol=1e-9), np.float32: dict(rtol=1e-3, atol=1e-4)}


@contextlib.contextmanager
def no_plans():
    previous, launch_plan.ENABLED = launch_plan.ENABLED, False
    try:
        yield
    finally:
        launch_plan.ENABLED = previous


def planned(launcher):
    """The kinds of arguments ``launcher`` holds a plan for (not the refusals)."""
    return [key for key, plan in launcher.plans.items() if plan]


def fresh(launcher):
    """``launcher`` without the plans earlier tests left in it (it is cached per kernel)."""
    launcher.plans.clear()
    return launcher


def dual(values, partials):
    return DualArray(np.array(values), np.array(partials))


def u0(n=16, dtype=np.float64):
    return (np.sin(np.arange(n) * 0.3) + 1.0).astype(dtype)


# -- the signature ------------------------------------------------------------------------

def test_signature_tells_kinds_apart():
    sig = launch_plan.signature
    a = np.zeros(8)
    assert sig((a, 1.0)) == sig((np.ones(8), 3.0))  # values and lengths do not count
    assert sig((np.zeros(9), 1.0)) == sig((a, 1.0))
    different = [
        (a.astype(np.float32), 1.0),  # dtype
        (np.zeros((8, 1)), 1.0),  # ndim
        (a[::2], 1.0),  # layout
        (np.zeros((2, 4), order="F"), 1.0),
        (a, np.float32(1.0)),  # scalar type
        (a, 1),
        (a, 2 ** 63),  # numba types it uint64
        (DualArray(a, np.zeros((1, 8))), 1.0),  # plain then dual
        (DualArray(a, np.zeros((2, 8))), 1.0),  # lanes
        (DualArray(a, np.zeros((2, 8)), tag=1), 1.0),  # tag
        (a, Dual(1.0, [1.0])),
        (a, Dual(1.0, [1.0, 0.0])),
        (a, Dual(1.0, [1.0], weak=True)),
    ]
    read_only = np.zeros(8)
    read_only.flags.writeable = False
    different.append((read_only, 1.0))
    keys = [sig(args) for args in [(a, 1.0)] + different]
    assert len(set(keys)) == len(keys)


def test_no_signature_for_what_takes_the_full_path():
    sig = launch_plan.signature
    inner = DualArray(np.zeros(4), np.zeros((1, 4)))
    assert sig((np.zeros(3, dtype=object),)) is None  # np.array([dual, 0.0])
    outer = DualArray(inner, DualArray(np.zeros((1, 4)), np.zeros((1, 1, 4))), tag=1)
    assert sig((outer,)) is None
    assert sig(((inner, 1.0),)) is None  # a tuple holding duals
    assert sig((Dual(Dual(1.0, [1.0]), [Dual(0.0, [0.0])], tag=1),)) is None  # nested


# -- reuse boundaries on the cpu backend ---------------------------------------------------

@pytest.fixture
def cpu():
    with dualgpu.using_backend("cpu"):
        yield


def test_plain_then_dual_then_plain(cpu):
    launch = fresh(K.stencil[1, 16])
    u, out = u0(), np.zeros(16)
    for _ in range(2):  # full path, then the plan
        launch(u, out, 0.25)
    expect = out.copy()
    lanes = np.eye(2, 16)
    du, dout = DualArray(u.copy(), lanes.copy()), DualArray(np.zeros(16), np.zeros((2, 16)))
    for _ in range(2):
        launch(du, dout, 0.25)
    np.testing.assert_array_equal(dout.values, expect)
    # d out_i / d u_j of one step: 1 - 2r on the diagonal, r beside it
    np.testing.assert_allclose(dout.partials[0, :2], [0.5, 0.25])
    np.testing.assert_allclose(dout.partials[1, :3], [0.25, 0.5, 0.25])
    out2 = np.zeros(16)
    launch(u, out2, 0.25)
    np.testing.assert_array_equal(out2, expect)
    assert len(planned(launch)) == 2


@pytest.mark.parametrize("first, second", [(np.float32, np.float64), (np.float64, np.float32)])
def test_float32_then_float64(cpu, first, second):
    launch = fresh(K.stencil[1, 16])
    for dtype in (first, first, second, second):
        u, out = u0(dtype=dtype), np.zeros(16, dtype)
        launch(u, out, dtype(0.25))
        ref = np.zeros(16, dtype)
        with no_plans():
            K.stencil[1, 16](u, ref, dtype(0.25))
        assert out.dtype == dtype
        np.testing.assert_array_equal(out, ref)
    assert len(planned(launch)) >= 2


def test_dual_lanes_change(cpu):
    launch = fresh(K.stencil[1, 16])
    u = u0()
    for lanes in (1, 1, 3, 3, 16, 16, 1):
        seed = np.eye(lanes, 16)
        du = DualArray(u.copy(), seed)
        dout = DualArray(np.zeros(16), np.zeros((lanes, 16)))
        launch(du, dout, Dual(0.25, np.ones(lanes)))
        lap = np.convolve(np.pad(u, 1), [1.0, -2.0, 1.0], mode="valid")
        for k in range(lanes):  # d/d u_k (seed) + d/d r (every lane)
            expect = lap.copy()
            expect[k] += 0.5
            if k > 0:
                expect[k - 1] += 0.25
            if k + 1 < 16:
                expect[k + 1] += 0.25
            np.testing.assert_allclose(dout.partials[k], expect, **TOL[np.float64])
    assert len(planned(launch)) == 3


def test_ndim_and_layout_change(cpu):
    launch = fresh(K.rows[1, 8])
    base = np.arange(24.0).reshape(8, 3)
    for a in (base, base, np.asfortranarray(base), np.asfortranarray(base), base[:, 1:],
              base[:, 1:], base):
        out = np.zeros(8)
        launch(a, out)
        np.testing.assert_array_equal(out, a[:, 0] + 10.0 * a[:, 1])
    assert len(planned(launch)) == 3


def test_plans_call_compiled_entry_points_only_for_their_kinds(cpu):
    # a plan calls the launcher's compiled entry point (no typing per launch); an argument
    # of another kind (read-only, another dtype, a bigger int) never reaches it
    launch = fresh(K.stencil[1, 16])
    u, out = u0(), np.zeros(16)
    for _ in range(2):
        launch(u, out, 0.25)
    (plan,) = [plan for plan in launch.plans.values() if plan]
    assert not hasattr(plan.__globals__["launcher"], "overloads")  # not the dispatcher
    frozen = u0()
    frozen.flags.writeable = False
    for args in ((frozen, np.zeros(16), 0.25), (u, np.zeros(16), np.float32(0.25)),
                 (u0(dtype=np.float32), np.zeros(16, np.float32), 0.25)):
        for _ in range(2):  # the full path, then its own plan
            got = args[1]
            launch(*args)
            ref = np.zeros_like(got)
            with no_plans():
                K.stencil[1, 16](args[0], ref, args[2])
            np.testing.assert_array_equal(got, ref)
    assert len(planned(launch)) == 4
    du, dout = dual(u, np.eye(2, 16)), dual(np.zeros(16), np.zeros((2, 16)))
    for _ in range(2):
        launch(du, dout, Dual(0.25, np.ones(2)))
    dual_plans = [plan for plan in launch.plans.values() if plan][4:]
    assert [plan.__globals__["entry"] is not None for plan in dual_plans] == [True]
    ref = dual(np.zeros(16), np.zeros((2, 16)))
    with no_plans():
        K.stencil[1, 16](dual(u, np.eye(2, 16)), ref, Dual(0.25, np.ones(2)))
    np.testing.assert_array_equal(dout.partials, ref.partials)


def test_a_changed_captured_global(cpu, monkeypatch):
    launch = fresh(K.scaled[1, 4])
    u = np.arange(4.0)
    du = DualArray(u.copy(), np.array([np.ones(4), np.zeros(4)]))
    dout = DualArray(np.zeros(4), np.zeros((2, 4)))
    for _ in range(2):  # the full path, then the plan, with the float global
        launch(du, dout)
        np.testing.assert_array_equal(dout.values, 2.0 * u)
        np.testing.assert_array_equal(dout.partials, [2.0 * np.ones(4), np.zeros(4)])
    assert planned(launch)
    # a Dual in the global, the same kinds of arguments: its value and partials must come
    # through (the lifting path), not the plan's compiled code with 2.0 baked in
    for scale in (Dual(3.0, [1.0, 0.5]), Dual(3.0, [1.0, 0.5]), Dual(5.0, [2.0, 0.0])):
        monkeypatch.setattr(K, "SCALE", scale)
        launch(du, dout)
        np.testing.assert_array_equal(dout.values, scale.value * u)
        np.testing.assert_array_equal(
            dout.partials, [scale.value + scale.partials[0] * u, scale.partials[1] * u])


def test_jvp_through_a_captured_global_matches_finite_differences(cpu, monkeypatch):
    u = np.linspace(0.5, 1.5, 4)

    def f(scale):
        monkeypatch.setattr(K, "SCALE", scale)
        out = dualgpu.cuda.device_array_like(dualgpu.cuda.to_device(u))
        for _ in range(3):
            K.scaled[1, 4](dualgpu.cuda.to_device(u), out)
        return out.copy_to_host()

    np.testing.assert_array_equal(f(2.0), 2.0 * u)
    np.testing.assert_array_equal(f(2.0), 2.0 * u)
    for scale in (2.0, 3.0):  # twice: the second run finds the plans of the first
        value, tangent = dualgpu.jvp(f, (scale,), (1.0,))
        np.testing.assert_allclose(value, scale * u, rtol=1e-15)
        np.testing.assert_allclose(tangent, u, rtol=1e-15)  # d(scale u)/d scale
    # (the plain runs keep the value of the first compile, as numba.cuda freezes globals:
    # no finite differences of plain runs here)


@pytest.mark.parametrize("launch_mode", ["serial", "pieces"])
def test_aliasing_between_lane_tiles(cpu, monkeypatch, launch_mode):
    """16 lanes in tiles of 8: out must be restored between tiles when it is x itself."""
    if launch_mode == "pieces":
        monkeypatch.setattr(cpu_parallel, "FORCE", True)
        monkeypatch.setattr(cpu_parallel, "available_threads", lambda: 2)
    kernel = K.double_into.compiled("cpu")
    monkeypatch.setattr(kernel, "tile_lanes", 8)
    launch = fresh(K.double_into[1, 16])
    x0 = u0()
    for alias in (False, False, True, True, False, True):
        x = DualArray(x0.copy(), np.eye(16))
        out = x if alias else DualArray(np.zeros(16), np.zeros((16, 16)))
        launch(x, out)
        np.testing.assert_allclose(out.values, 2.0 * x0 * x0, **TOL[np.float64])
        np.testing.assert_allclose(out.partials, np.diag(4.0 * x0), **TOL[np.float64])


def test_read_and_written_argument_is_restored_between_tiles(cpu, monkeypatch):
    kernel = K.add_in_place.compiled("cpu")
    monkeypatch.setattr(kernel, "tile_lanes", 4)
    launch = fresh(K.add_in_place[1, 8])
    a = DualArray(np.ones(8), np.zeros((16, 8)))
    x = Dual(0.5, np.arange(16.0))
    for step in range(1, 4):
        launch(a, x)
        np.testing.assert_allclose(a.values, 1.0 + 0.5 * step)
        np.testing.assert_allclose(a.partials, step * np.arange(16.0)[:, None] * np.ones(8))


def test_coverage_warning_on_a_planned_launcher(cpu):
    launch = fresh(K.stencil[1, 16])
    u, out = u0(), np.zeros(16)
    launch(u, out, 0.25)
    launch(u, out, 0.25)
    long_u, long_out = u0(64), np.zeros(64)
    with pytest.warns(LaunchCoverageWarning):
        launch(long_u, long_out, 0.25)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LaunchCoverageWarning)
        launch(u, out, 0.25)


def test_tile_lanes_and_parallel_switches_are_followed(cpu, monkeypatch):
    kernel = K.double_into.compiled("cpu")
    launch = fresh(K.double_into[1, 16])
    x0 = u0()
    for tile, enabled in ((None, True), (None, True), (4, True), (4, False), (2, False)):
        monkeypatch.setattr(kernel, "tile_lanes", tile)
        monkeypatch.setattr(cpu_parallel, "ENABLED", enabled)
        x = DualArray(x0.copy(), np.eye(16))
        launch(x, x)
        np.testing.assert_allclose(x.partials, np.diag(4.0 * x0), **TOL[np.float64])
    assert any(spec.lanes == 2 for spec in kernel._launchers)  # the last tile was used


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_planned_runs_equal_unplanned_runs_bit_for_bit(cpu, dtype):
    """The heat loop under jvp (1 lane) and jacobian (16 lanes), with and without plans."""
    u, r = u0(dtype=dtype), dtype(0.2)
    f_r = lambda rr: K.heat(u, rr, 40)  # noqa: E731
    f_u = lambda uu: K.heat(uu, r, 40)  # noqa: E731
    planned_jvp = dualgpu.jvp(f_r, (r,), (dtype(1.0),))
    planned_jac = dualgpu.jacobian(f_u, u, progress=False)
    with no_plans():
        plain_jvp = dualgpu.jvp(f_r, (r,), (dtype(1.0),))
        plain_jac = dualgpu.jacobian(f_u, u, progress=False)
    for a, b in zip(planned_jvp, plain_jvp):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(planned_jac, plain_jac)
    assert planned(K.stencil[1, 16])


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_planned_derivatives_match_finite_differences(cpu, dtype):
    u, r, steps = u0(dtype=dtype), 0.2, 30
    jac = dualgpu.jacobian(lambda uu: K.heat(uu, dtype(r), steps), u, progress=False)
    _, tangent = dualgpu.jvp(lambda rr: K.heat(u, rr, steps), (dtype(r),), (dtype(1.0),))
    h = 1e-6 if dtype == np.float64 else 1e-2
    u64 = u.astype(np.float64)
    with dualgpu.using_backend("cpu"):
        fd_r = (K.heat(u64, r + h, steps) - K.heat(u64, r - h, steps)) / (2 * h)
        fd_u = np.stack([(K.heat(u64 + h * e, r, steps) - K.heat(u64 - h * e, r, steps))
                         / (2 * h) for e in np.eye(16)], axis=1)
    tol = dict(rtol=1e-6, atol=1e-8) if dtype == np.float64 else dict(rtol=2e-3, atol=2e-4)
    np.testing.assert_allclose(tangent, fd_r, **tol)
    np.testing.assert_allclose(jac, fd_u, **tol)


def test_cudasim_takes_the_full_path():
    launch = fresh(K.stencil[1, 16])
    u, out = u0(), np.zeros(16)
    with dualgpu.using_backend("cudasim"):
        launch(u, out, 0.25)
        launch(u, out, 0.25)
    with no_plans(), dualgpu.using_backend("cpu"):
        ref = np.zeros(16)
        K.stencil[1, 16](u, ref, 0.25)
    np.testing.assert_allclose(out, ref, rtol=1e-15)
    assert not [key for key in planned(launch) if key[0] == "cudasim"]
