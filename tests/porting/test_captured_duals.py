"""Duals captured by kernels (factory closures, module globals) differentiate on every backend.

Before issue 25 the cpu backend failed with a bare numba TypingError from its launcher; the
GPU backend would have failed the same way. Checked against central finite differences on
cpu and cudasim, float32 and float64, and by compiling the lifted kernel to PTX offline.
"""
import warnings

import numpy as np
import pytest

import dualgpu
from dualgpu.errors import DualgpuError

import kernel_factories as K

TOL = {np.float64: dict(rtol=1e-6, atol=1e-8), np.float32: dict(rtol=2e-2, atol=2e-3)}


def central_fd(f, x, h):
    x = np.asarray(x, np.float64)
    cols = []
    for j in range(x.size):
        e = np.zeros_like(x)
        e.flat[j] = h
        cols.append((np.asarray(f(x + e), np.float64) - np.asarray(f(x - e), np.float64)) / (2 * h))
    return np.stack(cols, axis=-1)


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_decay_factory_with_device_function(backend, dtype):
    with dualgpu.using_backend(backend):
        f = lambda k: K.run_decay(k[0], dtype)  # noqa: E731
        k = np.array([0.7], dtype)
        J = dualgpu.jacobian(f, k)
        # the plain runs on the simulator: each new closure value would compile on the cpu
        with dualgpu.using_backend("cudasim"):
            fd = central_fd(lambda x: K.run_decay(dtype(x[0]), dtype), k, 1e-3)
    np.testing.assert_allclose(J, fd, **TOL[dtype])
    # analytic: out = u - dt*k*u + 0.1*exp(-k dt) u -> d/dk = -dt u - 0.01 exp(-k dt) u
    u = np.linspace(0.2, 1.0, 6)
    np.testing.assert_allclose(J[:, 0], -0.1 * u - 0.01 * np.exp(-0.07) * u, **TOL[dtype])


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_hodgkin_huxley_factory(backend, dtype):
    g = np.array([1.2, 0.36], dtype)
    with dualgpu.using_backend(backend):
        J = dualgpu.jacobian(lambda p: K.run_hh(p, dtype), g)
    with dualgpu.using_backend("cudasim"):  # plain runs: no compile per closure value
        fd = central_fd(lambda x: K.run_hh(x.astype(dtype), dtype), g,
                        1e-3 if dtype is np.float64 else 1e-2)
    assert np.abs(J).max() > 1e-3  # the derivative is not trivially zero
    np.testing.assert_allclose(J, fd, rtol=1e-5 if dtype is np.float64 else 5e-2,
                               atol=1e-7 if dtype is np.float64 else 1e-2 * np.abs(fd).max())


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
def test_module_global_dual_is_never_baked_in(backend):
    """One kernel object, two derivatives at two values: each uses its own (compile cache)."""
    u = np.linspace(0.2, 1.0, 6)
    with dualgpu.using_backend(backend):
        for k in (0.5, 1.5):
            value, J = dualgpu.jvp(lambda r: K.run_global(r), (k,), (1.0,))
            np.testing.assert_allclose(value, u - 0.1 * k * u, rtol=1e-12)
            np.testing.assert_allclose(J, -0.1 * u, rtol=1e-12)


def test_factory_second_value_on_cpu():
    """Two factories built from two parameter values: each derivative at its own value."""
    u = np.linspace(0.2, 1.0, 6)
    with dualgpu.using_backend("cpu"):
        for k in (0.3, 0.9):
            J = dualgpu.jacobian(lambda p: K.run_decay(p[0]), np.array([k]))
            np.testing.assert_allclose(J[:, 0], -0.1 * u - 0.01 * np.exp(-0.1 * k) * u,
                                       rtol=1e-10)


def test_captured_dual_array_is_refused_by_name():
    def f(x):
        K.CAPTURED_ARRAY = dualgpu.cuda.to_device(x)
        try:
            out = dualgpu.cuda.device_array_like(x)
            K.reads_global_array[1, 8](out)
            return out.copy_to_host()
        finally:
            K.CAPTURED_ARRAY = None

    with dualgpu.using_backend("cpu"), pytest.raises(DualgpuError) as err:
        dualgpu.jacobian(f, np.ones(4))
    assert "'CAPTURED_ARRAY'" in str(err.value) and "Pass it as an argument" in str(err.value)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_lifted_factory_compiles_to_ptx(offline_ptx, dtype):
    import numba.cuda
    from numba import types

    from dualgpu.backends.gpu import kernel as gpu
    from dualgpu.porting.captured_duals import captured_duals, lift
    from dualgpu.compiled.arrays import dual_array_type
    from dualgpu.compiled.types import dual_type

    lanes = 4
    k = dualgpu.Dual(0.7, np.ones(lanes), dtype=np.dtype(dtype))
    kernel = K.decay_model(k)
    lifted, values = lift(kernel, captured_duals(kernel), "cuda")
    assert [v.value for v in values] == [k.value, k.value]  # the kernel's and rate's reads
    dt = getattr(types, dtype)
    arr = dual_array_type(dt, 1, lanes)
    signature = (arr, arr, dt) + tuple(dual_type(dt, lanes) for _ in values)
    ptx, _ = numba.cuda.compile_ptx(gpu.prepare_function(lifted.py_func, lanes), signature,
                                    cc=offline_ptx)
    assert ".entry" in ptx
    # the value is a kernel parameter, never a constant of the code: the plain factory's
    # PTX holds 0.7 as an immediate, the lifted kernel's does not
    seven = "FE6666666666666"  # 0.7 (or -0.7) as a float64 immediate
    plain, _ = numba.cuda.compile_ptx(gpu.prepare_function(K.decay_model(0.7).py_func, 0),
                                      (types.Array(dt, 1, "C"),) * 2 + (dt,), cc=offline_ptx)
    assert seven in plain
    assert seven not in ptx


def test_a_captured_dual_without_source_is_named_with_the_fix():
    scope = {"cuda": dualgpu.cuda}
    exec("def make(k):\n    def step(u):\n        u[0] = k * u[0]\n    return cuda.jit(step)\n",
         scope)
    step = scope["make"](dualgpu.Dual(2.0, [1.0]))
    u = dualgpu.dual_array(np.ones(2), lanes=1)
    with dualgpu.using_backend("cpu"), pytest.raises(DualgpuError) as err:
        step[1, 1](u)
    message = str(err.value)
    assert "step" in message and "'k'" in message and "Pass it as an argument" in message
    with dualgpu.using_backend("cudasim"):  # the simulator reads the closure itself
        step[1, 1](u)
    assert u.values[0] == 2.0 and u.partials[0, 0] == 1.0


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("how", ["attribute", "alias", "from_import", "reads_attribute"])
def test_dual_global_of_another_module_reaches_every_naming(backend, dtype, how):
    """Issue 43 S4: ``lib.func(x)`` reading a Dual global of ``lib``, after a plain run of the
    kernel. The cpu backend compiled the plain value in as a constant (a zero Jacobian, no
    error); a dual first launch failed in numba's lowering (OverloadSelector)."""
    import captured_attr_kernels as C

    kernel = C.KERNELS[how]
    u = np.linspace(0.2, 1.0, 6).astype(dtype)
    with dualgpu.using_backend(backend):
        plain = C.run(kernel, dtype(0.5), dtype)  # the plain value compiled first
        np.testing.assert_allclose(plain, 0.5 * u, **TOL[dtype])
        value, tangent = dualgpu.jvp(lambda r: C.run(kernel, r, dtype), (dtype(0.7),), (1.0,))
        # plain runs keep the global they were compiled with (numba's rule): the differences
        # come from the values of dual runs, whose RATE is an argument
        h = 1e-3 if dtype is np.float64 else 1e-2
        ahead, behind = (dualgpu.jvp(lambda r: C.run(kernel, r, dtype), (dtype(0.7 + s),),
                                     (1.0,))[0] for s in (h, -h))
    np.testing.assert_allclose(value, 0.3 * u, **TOL[dtype])  # at the dual's own value
    np.testing.assert_allclose(tangent, (ahead - behind) / (2 * h), **TOL[dtype])
    np.testing.assert_allclose(tangent, -u, **TOL[dtype])


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_device_function_called_as_a_module_attribute_uses_dual_math(backend, dtype):
    """``lib.func(x)`` with ``math.exp`` inside: cudasim ran the function unsimulated (plain
    ``math`` on a Dual) and refused the launch."""
    import captured_attr_kernels as C

    def run(x):
        d_x = dualgpu.cuda.to_device(x)
        out = dualgpu.cuda.device_array_like(d_x)
        C.calls_math_by_attribute[1, 8](d_x, out)
        return out.copy_to_host()

    u = np.array([0.1, -0.2, 0.3], dtype)
    with dualgpu.using_backend(backend):
        J = dualgpu.jacobian(run, u)
        fd = central_fd(run, u, 1e-3 if dtype is np.float32 else 1e-6)
    np.testing.assert_allclose(J, fd, **TOL[dtype])
    np.testing.assert_allclose(np.diag(J), np.exp(u), **TOL[dtype])


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
def test_plain_global_changed_after_the_first_launch_is_frozen_for_duals_too(backend):
    """Issue 43 S5: a plain module global changed after the kernel's first launch. Plain runs
    keep the value of the first compile (numba's rule); the cudasim dual run read the new
    one, a Jacobian of another function than the plain runs compute."""
    import captured_attr_kernels as C

    u = np.array([0.5, 1.0, 1.5])
    kernel = C.make_gain_kernel()
    saved = C.GAIN
    try:
        with dualgpu.using_backend(backend):
            first = C.run_gain(kernel, u)
            C.GAIN = 3.0
            later = C.run_gain(kernel, u)
            J = dualgpu.jacobian(lambda x: C.run_gain(kernel, x), u)
            fd = central_fd(lambda x: C.run_gain(kernel, x), u, 1e-5)
    finally:
        C.GAIN = saved
    np.testing.assert_allclose(first, u * u + u, rtol=1e-12)
    np.testing.assert_allclose(later, first, rtol=1e-12)  # numba's rule: frozen
    np.testing.assert_allclose(J, fd, rtol=1e-7, atol=1e-9)  # the function the plain runs are
    np.testing.assert_allclose(np.diag(J), 2 * u + 1, rtol=1e-12)


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
def test_lifted_copy_keeps_the_frozen_globals(backend):
    """A dual captured beside a plain global changed after the first launch: the lifted copy
    the dual launches run read the global anew (another function than the plain runs)."""
    import captured_attr_kernels as C

    u = np.array([0.5, 1.0, 1.5])
    kernel = C.make_gain_rate_kernel()
    saved = C.GAIN
    try:
        with dualgpu.using_backend(backend):
            plain = C.run_gain(kernel, u)  # GAIN 1, RATE 0.5
            C.GAIN = 3.0
            value, tangent = dualgpu.jvp(
                lambda r: _run_rate(C, kernel, u, r),
                (0.5,), (1.0,))
    finally:
        C.GAIN = saved
    np.testing.assert_allclose(value, plain, rtol=1e-12)
    np.testing.assert_allclose(tangent, u, rtol=1e-12)


def _run_rate(C, kernel, u, rate):
    saved, C.captured_attr_lib.RATE = C.captured_attr_lib.RATE, rate
    try:
        return C.run_gain(kernel, u)
    finally:
        C.captured_attr_lib.RATE = saved


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
def test_module_attribute_changed_after_the_first_launch(backend):
    """``lib.GAIN`` changed after the first launch: the cpu backend's plain build kept the old
    value and its dual build (compiled later) read the new one. On each backend the Jacobian
    is now that of the function the plain runs compute (cpu: frozen at translation, as a
    global; cudasim reads module attributes at each launch, plain and dual alike)."""
    import captured_attr_kernels as C

    u = np.array([0.5, 1.0, 1.5])
    kernel = C.make_attribute_gain_kernel()
    saved = C.captured_attr_lib.GAIN
    try:
        with dualgpu.using_backend(backend):
            C.run_gain(kernel, u)
            C.captured_attr_lib.GAIN = 3.0
            J = dualgpu.jacobian(lambda x: C.run_gain(kernel, x), u)
            fd = central_fd(lambda x: C.run_gain(kernel, x), u, 1e-5)
            later = C.run_gain(kernel, u)
    finally:
        C.captured_attr_lib.GAIN = saved
    np.testing.assert_allclose(J, fd, rtol=1e-7, atol=1e-9)
    gain = later[0] / u[0] ** 2
    assert gain == (1.0 if backend == "cpu" else 3.0)
    np.testing.assert_allclose(np.diag(J), 2 * gain * u, rtol=1e-12)


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
@pytest.mark.parametrize("which", ["numba", "dualgpu"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_kernel_factory_importing_cuda_in_the_function(backend, which, dtype):
    """Issue 44: ``from numba import cuda`` (or dualgpu's) inside a kernel factory makes
    ``cuda`` a closure variable; cudasim raised "<intrinsic grid> is not usable in
    pure-python" (numba's simulator swaps the module only among globals)."""
    import captured_attr_kernels as C

    made = C.factory_with_local_cuda(2.0, which)
    kernel = dualgpu.jit(made) if which == "numba" else made

    def run(x):
        d_x = dualgpu.cuda.to_device(x)
        out = dualgpu.cuda.device_array_like(d_x)
        kernel[1, 8](d_x, out)
        return out.copy_to_host()

    u = np.array([0.1, 0.2, -0.3], dtype)
    with dualgpu.using_backend(backend):
        np.testing.assert_allclose(run(u), 2 * u * u, **TOL[dtype])
        J = dualgpu.jacobian(run, u)
        fd = central_fd(run, u, 1e-3 if dtype is np.float32 else 1e-6)
    np.testing.assert_allclose(J, fd, **TOL[dtype])
    np.testing.assert_allclose(np.diag(J), 4 * u, **TOL[dtype])


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_tuple_of_duals_captured_by_a_factory(backend, dtype):
    """Issue 44: a tuple of Duals in a kernel factory's closure; the cpu backend failed with
    numba's lowering error (OverloadSelector) where cudasim differentiated it."""
    p = np.array([0.3, 0.7, 0.1], dtype)
    with dualgpu.using_backend(backend):
        J = dualgpu.jacobian(lambda q: K.run_tuple(q, dtype), p)
    with dualgpu.using_backend("cudasim"):  # plain runs: no compile per closure value
        fd = central_fd(lambda q: K.run_tuple(q.astype(dtype), dtype), p,
                        1e-3 if dtype is np.float32 else 1e-6)
    u = np.linspace(0.5, 1.0, 4)
    analytic = np.stack([u + 0.7 * u, u * u + 0.3 * u, np.ones(4)], axis=-1)
    np.testing.assert_allclose(J, fd, **TOL[dtype])
    np.testing.assert_allclose(J, analytic, **TOL[dtype])


def test_tuple_holding_a_dual_array_is_refused_by_name():
    def f(x):
        held = (dualgpu.cuda.to_device(x), 2.0)

        @dualgpu.cuda.jit
        def copy(out):
            i = dualgpu.cuda.grid(1)
            if i < out.shape[0]:
                out[i] = held[0][i] * held[1]

        out = dualgpu.cuda.device_array_like(x)
        copy[1, 8](out)
        return out.copy_to_host()

    with dualgpu.using_backend("cpu"), pytest.raises(DualgpuError) as err:
        dualgpu.jacobian(f, np.ones(4))
    assert "tuple holding a DualArray 'held'" in str(err.value), str(err.value)
    assert "Pass it as an argument" in str(err.value)


@pytest.mark.parametrize("how", ["attribute", "alias", "reads_attribute"])
def test_lifted_module_attribute_kernels_compile_to_ptx(offline_ptx, how):
    """The lifted copies of issue 43 S4's kernels (``lib.func(x)`` called by a name of its own,
    ``lib.RATE`` a hidden parameter) compile for numba.cuda, the Dual a kernel parameter."""
    import numba.cuda
    from numba import types

    import captured_attr_kernels as C
    from dualgpu.backends.gpu import kernel as gpu
    from dualgpu.compiled.arrays import dual_array_type
    from dualgpu.compiled.types import dual_type
    from dualgpu.porting.captured_duals import captured_duals, lift

    lanes = 2
    saved, C.captured_attr_lib.RATE = C.captured_attr_lib.RATE, dualgpu.Dual(0.7, np.ones(lanes))
    try:
        kernel = C.KERNELS[how]
        lifted, values = lift(kernel, captured_duals(kernel), "cuda")
    finally:
        C.captured_attr_lib.RATE = saved
    assert len(values) == 1 and values[0].value == 0.7
    arr = dual_array_type(types.float64, 1, lanes)
    ptx, _ = numba.cuda.compile_ptx(gpu.prepare_function(lifted.py_func, lanes),
                                    (arr, arr, dual_type(types.float64, lanes)), cc=offline_ptx)
    assert ".entry" in ptx


_ALPHA = 0.1


@dualgpu.cuda.jit
def _diffuse_by_global(u, un):
    i = dualgpu.cuda.grid(1)
    n = u.shape[0]
    if 0 < i < n - 1:
        un[i] = u[i] + _ALPHA * (u[i - 1] - 2.0 * u[i] + u[i + 1])
    elif i < n:
        un[i] = u[i]


def _run_alpha(alpha):
    global _ALPHA
    _ALPHA = alpha
    a = dualgpu.cuda.to_device(np.linspace(0, 1, 8) ** 2)
    b = dualgpu.cuda.device_array_like(a)
    for _ in range(3):
        _diffuse_by_global[1, 8](a, b)
        a, b = b, a
    return a.copy_to_host()


def test_a_dual_global_that_plain_runs_froze_earlier_is_lifted_with_a_warning():
    """f sets a module global the kernel reads (``global ALPHA; ALPHA = alpha``): the plain
    runs froze its first value (numba's rule) while the dual runs use the Dual's (issue 43),
    so their finite differences disagree with the derivative: said once, with the fix."""
    with dualgpu.using_backend("cpu"):
        first = _run_alpha(0.2)  # the first launch: 0.2 compiled in
        np.testing.assert_array_equal(_run_alpha(0.3), first)  # plain runs keep it
        with pytest.warns(dualgpu.errors.DualgpuWarning,
                          match=r"reads the global '_ALPHA'.*held 0\.2 at the kernel's first "
                                r"launch.*Fix: pass _ALPHA as an argument"):
            value, tangent = dualgpu.jvp(_run_alpha, (0.3,), (1.0,))
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # once per kernel and name
            again = dualgpu.jvp(_run_alpha, (0.3,), (1.0,))
    assert np.array_equal(again[1], tangent)
    # the derivative of the dual runs (ALPHA an argument in effect): their own differences
    h = 1e-6
    ahead = dualgpu.jvp(_run_alpha, (0.3 + h,), (1.0,))[0]
    behind = dualgpu.jvp(_run_alpha, (0.3 - h,), (1.0,))[0]
    np.testing.assert_allclose(tangent, (ahead - behind) / (2 * h), rtol=1e-6, atol=1e-9)
    assert not np.array_equal(value, first)
