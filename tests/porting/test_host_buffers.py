"""Round-4 real codes with host buffers (``kernels_host_buffers.py``) and their refusals (issue 25).

Each code is ported by the import line only. Its plain run equals the unported code
(numba's CUDA simulator); its Jacobian agrees with central finite differences on the cpu and
cudasim backends. Before issue 25 none of the seven differentiated with the import line
alone on the cpu backend (one, the kernel factory, on cudasim). By default the four host
buffer codes are refused with the buffer, the line and the one-line fix (a plain numpy read
of such a buffer could otherwise lose partials silently); with the opt-in
``dualgpu.keep_host_buffers()`` (here: DUALGPU_HOST_BUFFERS=keep for the whole module) five
differentiate on both backends as written, and the other two are refused with the fix,
after which they differentiate.
"""
import numpy as np
import pytest

import dualgpu
import kernels_host_buffers as R
from dualgpu import DualgpuError, cuda
from unported import run_unported

DIFFERENTIATE = ["heat_host", "oscillators", "energy_host", "logistic_snapshots", "gate_factory"]
REFUSED = {"energy_scalar": "energy[0:1]", "params_buffer": "params = dualgpu.zeros((2,)"}


@pytest.fixture(autouse=True)
def keep_host_buffers(monkeypatch):
    monkeypatch.setenv("DUALGPU_HOST_BUFFERS", "keep")


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
@pytest.mark.parametrize("name", ["heat_host", "energy_host", "logistic_snapshots"])
def test_host_buffer_codes_are_refused_by_default_with_both_fixes(monkeypatch, backend, name):
    monkeypatch.delenv("DUALGPU_HOST_BUFFERS")
    f, p, _ = R.CODES[name]
    with dualgpu.using_backend(backend), pytest.raises(DualgpuError) as error:
        dualgpu.jacobian(_flat(f), np.asarray(p, float))
    text = str(error.value)
    assert "dualgpu.zeros(" in text or "copy_to_host()" in text, text
    assert "keep_host_buffers" in text, text
    with dualgpu.using_backend(backend), dualgpu.keep_host_buffers():
        assert np.isfinite(dualgpu.jacobian(_flat(f), np.asarray(p, float))).all()


def _flat(f):
    return lambda x: np.ravel(f(*x))


def central_fd(f, x, h=1e-6):
    cols = [(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(len(x))]
    return np.stack(cols, axis=-1)


def test_plain_runs_equal_the_unported_code():
    sims = {name: (f, p) for name, (f, p, _) in R.CODES.items() if name != "gate_factory"}
    unported = run_unported(R, sims)
    with dualgpu.using_backend("cpu"):
        for name, (f, p) in sims.items():
            np.testing.assert_allclose(f(*p), unported[name][0], rtol=1e-12, err_msg=name)


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
@pytest.mark.parametrize("name", DIFFERENTIATE)
def test_import_line_only_codes_differentiate(backend, name):
    f, p, _ = R.CODES[name]
    g = _flat(f)
    x = np.array(p, np.float64)
    with dualgpu.using_backend(backend):
        J = dualgpu.jacobian(g, x)
    with dualgpu.using_backend("cpu"):
        fd = central_fd(g, x)
    assert np.abs(J).max() > 1e-3
    np.testing.assert_allclose(J, fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_codes_needing_an_edit_are_refused_with_the_fix_then_differentiate(monkeypatch, name):
    f, p, edited = R.CODES[name]
    x = np.array(p, np.float64)
    if name == "params_buffer":  # host stores of duals are followed under keep_host_buffers
        monkeypatch.delenv("DUALGPU_HOST_BUFFERS")
    with dualgpu.using_backend("cpu"):
        with pytest.raises((DualgpuError, TypeError)) as err:
            dualgpu.jacobian(_flat(f), x)
        message = str(err.value)
        assert REFUSED[name] in message and "kernels_host_buffers.py:" in message, message
        J = dualgpu.jacobian(_flat(edited), x)
        fd = central_fd(_flat(edited), x)
        np.testing.assert_allclose(J, fd, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(edited(*p), np.ravel(f(*p)), rtol=1e-12)  # same plain run


def test_host_stores_of_duals_are_followed_under_keep_host_buffers():
    """``params[0] = c`` into ``np.zeros``: refused by default (above), kept when opted in."""
    f, p, _ = R.CODES["params_buffer"]
    x = np.array(p, np.float64)
    for backend in ("cpu", "cudasim"):
        with dualgpu.using_backend(backend):
            J = dualgpu.jacobian(_flat(f), x)
            fd = central_fd(_flat(f), x)
        np.testing.assert_allclose(J, fd, rtol=1e-6, atol=1e-8)
        assert np.abs(J).min() > 0


def test_float32_host_buffer():
    def heat32(r):
        u = np.sin(np.linspace(0.0, 3.0, 8)).astype(np.float32)
        u_new = np.zeros(8, np.float32)
        for _ in range(3):
            R.heat_step[1, 8](u, u_new, r)
            u, u_new = u_new, u
        return u

    with dualgpu.using_backend("cpu"):
        J = dualgpu.jacobian(lambda x: heat32(x[0]), np.array([0.2], np.float32))
        fd = central_fd(lambda x: heat32(np.float64(x[0])).astype(np.float64),
                        np.array([0.2]), 1e-3)
    assert J.dtype == np.float32
    np.testing.assert_allclose(J, fd, rtol=1e-3, atol=1e-4)


def test_host_writes_between_launches_are_constants():
    """``energy[:] = 0`` between two reductions: the first one's partials are gone."""
    def twice(rate):
        d_u = cuda.to_device(np.linspace(0.5, 1.5, 8))
        energy = np.zeros(1)
        R.decay[1, 8](d_u, rate, 0.1)
        R.energy_sum[1, 8](d_u, energy)
        energy[:] = 0.0  # host reset: a plain constant
        R.decay[1, 8](d_u, rate, 0.1)
        R.energy_sum[1, 8](d_u, energy)
        return energy

    with dualgpu.using_backend("cpu"):
        J = dualgpu.jacobian(lambda x: twice(x[0]), np.array([0.7]))
        fd = central_fd(lambda x: twice(x[0]), np.array([0.7]))
    np.testing.assert_allclose(J, fd, rtol=1e-6)


def test_numpy_arithmetic_with_a_written_buffer_keeps_its_partials():
    with dualgpu.using_backend("cpu"):
        J = dualgpu.jacobian(lambda x: R.heat_host(x[0], x[1]), np.array([0.2, 1.5]))
        fd = central_fd(lambda x: R.heat_host(x[0], x[1]), np.array([0.2, 1.5]))
    np.testing.assert_allclose(J, fd, rtol=1e-6, atol=1e-9)  # u * amp: both columns


def test_caller_buffer_is_untouched():
    out = np.zeros(6)

    def f(g, buf):
        d_u = cuda.to_device(np.linspace(0.1, 0.6, 6))
        R.logistic_step[1, 8](d_u, g, 0.5)
        d_u.copy_to_host(buf)
        return buf

    with dualgpu.using_backend("cpu"):
        J = dualgpu.jacobian(f, 1.3, out, argnums=0)  # out: the caller's, not differentiated
    assert not out.any()
    assert np.abs(J).max() > 0


# -- the refusals name the array, the line and the one-line fix ----------------------------
def test_host_store_of_a_dual_names_array_line_and_fix(monkeypatch):
    def f(p):
        state = np.zeros((3, 4))
        state[0] = p
        return state

    with dualgpu.using_backend("cpu"):  # kept buffers follow the store
        np.testing.assert_array_equal(np.ravel(dualgpu.jacobian(f, 1.0)), [1.0] * 4 + [0.0] * 8)
    monkeypatch.delenv("DUALGPU_HOST_BUFFERS")
    with pytest.raises(TypeError) as err:
        dualgpu.jacobian(f, 1.0)
    message = str(err.value)
    assert "test_host_buffers.py:" in message and "`state[0] = p`" in message
    assert "'state'" in message and "state = dualgpu.zeros((3, 4), np.float64)" in message
    assert "cuda.to_device(np.zeros((3, 4), np.float64))" in message


def test_kernel_store_into_host_array_outside_the_driver_names_launch_and_fix():
    p = dualgpu.Dual(0.2, [1.0])
    u, u_new = np.ones(8), np.zeros(8)
    with dualgpu.using_backend("cpu"), pytest.raises(DualgpuError) as err:
        R.heat_step[1, 8](u, u_new, p)
    message = str(err.value)
    assert "u_new" in message and "test_host_buffers.py:" in message
    assert "R.heat_step[1, 8](u, u_new, p)" in message
    assert "u_new = dualgpu.zeros((8,), np.float64)" in message
    assert not u_new.any()


def test_copy_to_host_into_plain_buffer_outside_the_driver_names_fix():
    d = dualgpu.dual_array(np.ones(4), lanes=2)
    host = np.zeros(4)
    with pytest.raises(DualgpuError) as err:
        d.copy_to_host(host)
    message = str(err.value)
    assert "copy_to_host(host)" in message and "test_host_buffers.py:" in message
    assert "host = <device array>.copy_to_host()" in message
    assert "dualgpu.zeros((4,), np.float64)" in message  # (the buffer's dtype)


def test_dualgpu_zeros():
    assert type(dualgpu.zeros(3)) is np.ndarray
    with dualgpu.using_backend("cpu"):
        J = dualgpu.jacobian(lambda x: R.params_buffer_edited(x[0], x[1]), np.array([0.2, 0.1]))
    assert J.shape == (6, 2)


def test_kernel_store_message_on_cudasim_names_the_fix():
    p = dualgpu.Dual(0.2, [1.0])
    u, u_new = np.ones(4), np.zeros(4)
    with dualgpu.using_backend("cudasim"), pytest.raises(DualgpuError) as err:
        R.heat_step[1, 4](u, u_new, p)
    assert "u_new = dualgpu.zeros((4,), np.float64)" in str(err.value)
    assert "R.heat_step[1, 4](u, u_new, p)" in str(err.value)


def test_nested_derivative_with_a_host_reduction_buffer_names_the_fix():
    """A Hessian keeps no host buffers: the atomic into one is refused with the host name."""
    with dualgpu.using_backend("cpu"), pytest.raises(DualgpuError) as err:
        dualgpu.hessian(lambda x: R.energy_host(x[0])[0:1].sum(), np.array([0.7]))
    message = str(err.value)
    assert "energy = dualgpu.zeros((1,), np.float64)" in message
    assert "nested derivative" in message and "kernels_host_buffers.py:" in message


def test_to_device_of_a_written_host_buffer_keeps_its_partials():
    def f(rate):
        u = np.linspace(0.5, 1.5, 8)
        R.decay[1, 8](u, rate, 0.1)       # duals into a host array
        d_u = cuda.to_device(u)           # ... read by to_device: a DualArray
        R.decay[1, 8](d_u, rate, 0.1)
        return d_u.copy_to_host()

    with dualgpu.using_backend("cpu"):
        J = dualgpu.jacobian(f, 0.7)
    u = np.linspace(0.5, 1.5, 8)
    np.testing.assert_allclose(J, -0.2 * u * np.exp(-0.14), rtol=1e-12)


@pytest.mark.parametrize("copy", ["copy_to_device", "to_device_to"])
def test_a_kept_host_buffer_copied_into_a_device_array_keeps_its_partials(copy):
    """d.copy_to_device(u) and cuda.to_device(u, to=d) of a kept host buffer take its
    partials as cuda.to_device(u) does (they were copied as plain values: J = 0)."""
    def f(rate):
        u = np.linspace(0.5, 1.5, 8)
        d_u = cuda.to_device(u)
        R.decay[1, 8](d_u, rate, 0.1)
        d_u.copy_to_host(u)               # u kept: its values and partials
        d_back = cuda.device_array_like(d_u)
        if copy == "copy_to_device":
            d_back.copy_to_device(u)
        else:
            cuda.to_device(u, to=d_back)
        R.decay[1, 8](d_back, rate, 0.1)
        return d_back.copy_to_host()

    with dualgpu.using_backend("cpu"), dualgpu.keep_host_buffers():
        J = dualgpu.jacobian(f, 0.7)
    u = np.linspace(0.5, 1.5, 8)
    np.testing.assert_allclose(J, -0.2 * u * np.exp(-0.14), rtol=1e-12)


def test_host_buffers_dropped_by_host_code_are_freed(users_gc):
    """A fresh host buffer per step: the hidden DualArrays of dropped ones do not pile up
    (with the collection thresholds users have: the test processes collect less often)."""
    from dualgpu.host import buffers as host_buffers

    sizes = []

    def f(r):
        u = np.linspace(0.0, 1.0, 8)
        for _ in range(20):
            u_new = np.zeros(8)           # a new host buffer each step
            R.heat_step[1, 8](u, u_new, r)
            u = u_new
            if host_buffers.active() is not None:  # under the driver
                sizes.append(len(host_buffers.active()._shadows))
        return u

    with dualgpu.using_backend("cpu"):
        J = dualgpu.jacobian(f, 0.2)
        fd = (f(0.2 + 1e-6) - f(0.2 - 1e-6)) / 2e-6
    np.testing.assert_allclose(J, fd, rtol=1e-6, atol=1e-9)
    assert sizes and max(sizes) <= 3, sizes
