"""Host code that writes kept host buffers between launches (issue 43 S1-S3, S11; issue 44.4).

Inside ``dualgpu.keep_host_buffers()`` the numba.cuda double-buffer idiom ``u[:] = u_new``,
``np.copyto``, in-place operators, resets and host bookkeeping between launches carry the
partials (each line is followed and replayed on them), checked against central
differences on the cpu and cudasim backends. Before, host writes were found by comparing
values: the copied state became a constant, a reset to a value already held kept stale
partials, and a kept buffer in a nested output gave zero, all without an error. Writes
that cannot be followed are refused with the line.
"""
import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import dualgpu
from dualgpu import DualgpuError, cuda

BACKENDS = ["cpu", "cudasim"]


@cuda.jit
def step(u, u_new, r):
    i = cuda.grid(1)
    n = u.shape[0]
    if 0 < i < n - 1:
        u_new[i] = u[i] + r * (u[i - 1] - 2.0 * u[i] + u[i + 1])
    elif i < n:
        u_new[i] = u[i]


@cuda.jit
def decay(u, rate):
    i = cuda.grid(1)
    if i < u.shape[0]:
        u[i] = u[i] * math.exp(-rate * u[i])


@cuda.jit
def shifted(x, r, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = (r - 0.3) * x[i]  # 0.0 at r = 0.3, with partials x[i]


@cuda.jit
def plus_r(a, r, y):
    i = cuda.grid(1)
    if i < y.shape[0]:
        y[i] = a[i] + r


def _u0(dtype=np.float64):
    return np.sin(np.linspace(0.0, 3.0, 8)).astype(dtype)


def copy_back(r):
    """The double-buffer idiom: the kernel reads u only, the host copies the new state."""
    u, u_new = _u0(), np.zeros(8)
    for _ in range(3):
        step[1, 8](u, u_new, r)
        u[:] = u_new
    step[1, 8](u, u_new, r)
    return u_new


def copyto_back(r):
    u, u_new = _u0(), np.zeros(8)
    for _ in range(3):
        step[1, 8](u, u_new, r)
        np.copyto(u, u_new)
    return u


def scaled_in_place(r):
    u = _u0() + 1.0
    for _ in range(2):
        decay[1, 8](u, r)
        u *= 2.0
        u[1:3] += 0.5
    return u


def interior_copy(r):
    state = np.zeros((2, 8))
    state[0] = _u0()
    u_new = np.zeros(8)
    for _ in range(2):
        step[1, 8](state[0], u_new, r)
        state[0][1:-1] = u_new[1:-1]  # through a view of a 2-D buffer
        state[1] = 0.5 * state[0]
    return state


def reset_to_held_value(r):
    """S2: ``out[:] = 0.0`` where out already held 0.0 (with nonzero partials)."""
    x = np.linspace(0.1, 1.0, 8)
    out, y = np.zeros(8), np.zeros(8)
    shifted[1, 8](x, r, out)
    out[:] = 0.0
    plus_r[1, 8](out, r, y)
    return y


def nested(r):
    """S3: a kept buffer inside a nested tuple."""
    u, u_new = _u0(), np.zeros(8)
    step[1, 8](u, u_new, r)
    return ((u_new,), u_new[2:4])


def photon_counts(mu_s, n=8, rounds=3):
    """S11, photon-transport style: host buffers filled by ``copy_to_host(buf, stream=)``
    and host bookkeeping between launches (a tally, roulette weights, a re-upload)."""
    stream = cuda.stream()
    weights = np.linspace(0.5, 1.0, n)
    tally = np.zeros(n)
    buf = np.zeros(n)
    d_w = cuda.to_device(weights, stream=stream)
    for k in range(rounds):
        decay[1, 8](d_w, mu_s)
        d_w.copy_to_host(buf, stream=stream)
        stream.synchronize()
        tally += buf                      # detected weight
        buf[::2] *= 0.5                   # roulette: half the weight of every other photon
        buf[k] = 0.25                     # a fresh photon (a constant)
        d_w = cuda.to_device(buf, stream=stream)
    return tally


def optimiser_step(p):
    """Issue 44: ``para += delta`` with para a numpy array and delta a DualArray."""
    para = np.array([0.5, 1.0, 1.5])
    d_u = cuda.to_device(np.linspace(0.2, 0.9, 3))
    decay[1, 8](d_u, p)
    delta = d_u.copy_to_host()
    para += delta
    para *= 2.0
    para -= 0.1 * delta
    para /= 1.0 + delta
    para[1:] *= delta[:2]
    return para


class _Solver:
    """Buffers held as attributes, in a list and in a dict (a solver class's host code)."""

    def __init__(self):
        self.u, self.u_new = _u0(), np.zeros(8)
        self.pair = [self.u, self.u_new]
        self.named = {"new": self.u_new}

    def run(self, r, form):
        for _ in range(3):
            step[1, 8](self.u, self.u_new, r)
            if form == "attribute":
                self.u[:] = self.u_new
            elif form == "element":
                self.u[:] = self.pair[1]
            elif form == "item":
                np.copyto(self.u, self.named["new"])
            else:
                self.u[:] = self.u_new
                self.u *= 1.5
        return self.u * r  # (also through r directly: a lost copy would be a wrong number)


def _solver(form):
    """A copy back read through ``self.u_new``, ``self.pair[1]``, ``self.named["new"]`` or
    followed by ``self.u *= 1.5``: the copy was not followed (only bare names were looked
    at) and the derivative through the steps was lost silently; ``self.u *= c`` was
    refused (found by an unseen round)."""
    return lambda r: _Solver().run(r, form)


def _derived(form):
    """A value host code computes from a kept buffer on a line of its own and uses later:
    numpy gave it no partials, and the renormalised state, the copy from a temporary and
    the kernel launched with the number lost that share of the derivative silently (found
    by an unseen round; the docs called it the limit of keep_host_buffers)."""
    def run(r):
        u, u_new = _u0() + 1.0, np.zeros(8)
        history = []
        for _ in range(3):
            step[1, 8](u, u_new, r)
            energy = np.sum(u_new ** 2)  # diagnostics only: kept beside, never refused
            history.append(float(energy))
            if form == "sum":
                s = np.sum(u_new)
                u[:] = u_new / s
            elif form == "temporary":
                tmp = u_new * 2.0
                u[:] = tmp
            elif form == "unpacked":
                s, m = u_new.sum(), np.max(u_new)
                u[:] = u_new / s + m
            elif form == "accumulated":
                s = 1.0
                s += np.linalg.norm(u_new)
                u[:] = u_new / s
            else:  # a number handed to a kernel
                rate = 0.1 * np.mean(u_new)
                u[:] = u_new
                decay[1, 8](u, rate)
        return u
    return run


def _scaler(s):
    """A kernel factory: ``s`` captured by the closure (compiled in as a plain number, it lost
    its derivative when computed from kept buffers)."""
    @cuda.jit
    def scale(u):
        i = cuda.grid(1)
        if i < u.shape[0]:
            u[i] = u[i] * s

    return scale


class _Stepper:
    """Values computed from kept buffers held and passed as solver codes do (found silently
    wrong by an unseen round: attributes, dict items, list appends, a method's return value,
    an expression in the launch, a tuple argument, a value kept across steps)."""

    def __init__(self):
        self.u, self.u_new, self.history, self.stats = _u0() + 1.0, np.zeros(8), [], {}

    def stable_rate(self):
        return 0.1 / np.max(np.abs(self.u))

    def run(self, r, form):
        energy_old = 1.0
        for _ in range(3):
            step[1, 8](self.u, self.u_new, r)
            self.u[:] = self.u_new
            if form == "attribute":
                self.rate = 0.1 / np.max(np.abs(self.u))
                decay[1, 8](self.u, self.rate)
            elif form == "dict_item":
                self.stats["rate"] = 0.1 / np.max(np.abs(self.u))
                decay[1, 8](self.u, self.stats["rate"])
            elif form == "appended":
                self.history.append(np.max(np.abs(self.u)))
                decay[1, 8](self.u, 0.01 * sum(self.history))
            elif form == "returned":
                rate = self.stable_rate()
                decay[1, 8](self.u, rate)
            elif form == "factory":
                s = 8.0 / np.sum(self.u)
                _scaler(s)[1, 8](self.u)
            elif form == "in_the_launch":
                vmax = np.max(np.abs(self.u))
                decay[1, 8](self.u, 0.1 / vmax)
            else:  # a value kept across steps under another name
                energy = 0.5 * np.sum(self.u ** 2)
                decay[1, 8](self.u, 0.1 * energy_old / energy)
                energy_old = energy
        return self.u


CODES = {
    **{f"derived_{form}": _derived(form) for form in ("sum", "temporary", "unpacked",
                                                        "accumulated", "to_a_kernel")},
    **{f"held_{form}": (lambda form: lambda r: _Stepper().run(r, form))(form)
       for form in ("attribute", "dict_item", "appended", "returned", "in_the_launch",
                    "factory", "across_steps")},
    "copy_back": copy_back, "copyto_back": copyto_back, "scaled_in_place": scaled_in_place,
    "interior_copy": interior_copy, "reset_to_held_value": reset_to_held_value,
    "photon_counts": photon_counts, "optimiser_step": optimiser_step,
    **{f"solver_{form}": _solver(form) for form in ("attribute", "element", "item",
                                                     "attribute_in_place")},
}


def _flat(out):
    if isinstance(out, (tuple, list)):
        return np.concatenate([_flat(o) for o in out])
    return np.ravel(np.asarray(out, np.float64))


def central_fd(f, x, h=1e-6):
    return (_flat(f(x + h)) - _flat(f(x - h))) / (2 * h)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(CODES))
def test_host_writes_between_launches_carry_the_partials(backend, name):
    f = CODES[name]
    with dualgpu.using_backend(backend), dualgpu.keep_host_buffers():
        J = dualgpu.jacobian(f, 0.3)
    with dualgpu.using_backend(backend):
        fd = central_fd(f, 0.3)
    np.testing.assert_allclose(_flat(J), fd, rtol=1e-6, atol=1e-8)
    assert np.abs(fd).max() > 1e-3  # the derivative is not trivially zero


@pytest.mark.parametrize("backend", BACKENDS)
def test_kept_buffer_in_a_nested_output(backend):
    with dualgpu.using_backend(backend), dualgpu.keep_host_buffers():
        J = dualgpu.jacobian(nested, 0.3)
    fd = central_fd(nested, 0.3)
    np.testing.assert_allclose(_flat(J), fd, rtol=1e-6, atol=1e-8)
    assert np.abs(_flat(J)[:8]).max() > 1e-3


def test_float32_copy_back():
    def f(r):
        u, u_new = _u0(np.float32), np.zeros(8, np.float32)
        for _ in range(3):
            step[1, 8](u, u_new, r)
            u[:] = u_new
            u *= np.float32(1.5)
        return u

    with dualgpu.using_backend("cpu"), dualgpu.keep_host_buffers():
        J = dualgpu.jacobian(f, np.float32(0.3))
    fd = (_flat(f(np.float64(0.3 + 1e-3))) - _flat(f(np.float64(0.3 - 1e-3)))) / 2e-3
    assert J.dtype == np.float32
    np.testing.assert_allclose(_flat(J), fd, rtol=2e-3, atol=2e-3)


def test_keep_host_buffers_reaches_executor_workers():
    with dualgpu.using_backend("cpu"), dualgpu.keep_host_buffers():
        with ThreadPoolExecutor(2) as pool:
            jacobians = list(pool.map(lambda r: dualgpu.jacobian(copy_back, r), [0.2, 0.3]))
    for r, J in zip([0.2, 0.3], jacobians):
        np.testing.assert_allclose(_flat(J), central_fd(copy_back, r), rtol=1e-6, atol=1e-8)


# -- what cannot be followed is refused with the line ---------------------------------------
def _scale(a):
    return 2.0 * a


def test_a_write_through_another_call_is_refused_with_the_line():
    def f(r):
        u, u_new = _u0(), np.zeros(8)
        step[1, 8](u, u_new, r)
        u[:] = _scale(u_new)
        return u

    with dualgpu.using_backend("cpu"), dualgpu.keep_host_buffers(), \
            pytest.raises(DualgpuError) as err:
        dualgpu.jacobian(f, 0.3)
    message = str(err.value)
    assert "test_host_writes.py:" in message and "u[:] = _scale(u_new)" in message
    assert "_scale" in message and "tmp = _scale(...)" in message


def test_a_write_dualgpu_cannot_see_is_refused():
    """Code without source (exec) writes a kept buffer: it is read-only there."""
    def f(r):
        u, u_new = _u0(), np.zeros(8)
        step[1, 8](u, u_new, r)
        exec("u_new[:] = 0.0", {"u_new": u_new})
        return u_new

    with dualgpu.using_backend("cpu"), dualgpu.keep_host_buffers(), \
            pytest.raises(DualgpuError) as err:
        dualgpu.jacobian(f, 0.3)
    message = str(err.value)
    assert "u_new" in message and "read-only" in message and "dualgpu.zeros" in message


def test_kept_buffers_get_their_write_flag_back():
    seen = []

    def f(r):
        u, u_new = _u0(), np.zeros(8)
        step[1, 8](u, u_new, r)
        seen.append(u_new)
        return u_new

    with dualgpu.using_backend("cpu"), dualgpu.keep_host_buffers():
        dualgpu.jacobian(f, 0.3)
    assert seen and all(a.flags.writeable for a in seen)


def test_in_place_update_without_keep_names_line_and_fix():
    """Issue 44: ``para += delta`` outside keep_host_buffers: the line and `para = para + delta`."""
    with dualgpu.using_backend("cpu"), pytest.raises(DualgpuError) as err:
        dualgpu.jacobian(optimiser_step, 0.3)
    message = str(err.value)
    assert "test_host_writes.py:" in message and "para += delta" in message
    assert "para = para + delta" in message and "keep_host_buffers" in message


# -- issue 44: messages ----------------------------------------------------------------------
@cuda.jit
def fill_rows(I_nu, s):
    k = cuda.grid(1)
    if k < I_nu.shape[0]:
        row = I_nu[k]
        for j in range(I_nu.shape[1]):
            row[j] = s * (k + j)


def _rows(s):
    I_nu = np.zeros((3, 4))
    fill_rows[1, 4](I_nu, s)
    return I_nu


@pytest.mark.parametrize("backend", BACKENDS)
def test_kernel_store_through_a_row_view_gets_the_host_buffer_fix(backend):
    with dualgpu.using_backend(backend), pytest.raises(DualgpuError) as err:
        dualgpu.jacobian(_rows, 0.5)
    message = str(err.value)
    assert "did not receive" not in message, message
    assert "host numpy array I_nu" in message and "keep_host_buffers" in message
    assert "I_nu = dualgpu.zeros((3, 4), np.float64)" in message
    with dualgpu.using_backend(backend), dualgpu.keep_host_buffers():
        J = dualgpu.jacobian(_rows, 0.5)
    np.testing.assert_array_equal(J, np.add.outer(np.arange(3.0), np.arange(4.0)))


def _trajectory(r, traj):
    d_u = cuda.to_device(np.linspace(1.0, 2.0, 4))
    for t in range(traj.shape[0]):
        decay[1, 8](d_u, r)
        traj[t] = d_u.copy_to_host()
    return traj


@pytest.mark.parametrize("make", ["numpy", "pinned"])
def test_dual_array_stored_into_a_preallocated_host_buffer(make):
    """Refused with the buffer, the line and pinned arrays; followed under keep_host_buffers."""
    traj = np.zeros((3, 4)) if make == "numpy" else cuda.pinned_array((3, 4))
    with dualgpu.using_backend("cpu"), pytest.raises(TypeError) as err:
        dualgpu.jacobian(lambda r: _trajectory(r, traj), 0.3)
    message = str(err.value)
    assert "test_host_writes.py:" in message and "`traj[t] = d_u.copy_to_host()`" in message
    assert "'traj'" in message and "cuda.pinned_array((3, 4), np.float64)" in message
    with dualgpu.using_backend("cpu"), dualgpu.keep_host_buffers():
        J = dualgpu.jacobian(lambda r: _trajectory(r, np.zeros((3, 4))), 0.3)
    fd = central_fd(lambda r: _trajectory(r, np.zeros((3, 4))), 0.3)
    np.testing.assert_allclose(_flat(J), fd, rtol=1e-6, atol=1e-9)


def test_dual_scalar_tolist():
    d = dualgpu.Dual(2.0, [1.0, 0.5])
    item = d.tolist()
    assert isinstance(item, dualgpu.Dual) and item is not d
    assert float(item.value) == 2.0 and item.partials.tolist() == [1.0, 0.5]
    u = dualgpu.dual_array(np.array([1.0, 2.0]), np.eye(2))
    assert [x.partials.tolist() for x in u.tolist()] == [x.tolist().partials.tolist()
                                                         for x in u]


def test_a_comprehension_in_a_followed_line():
    def f(r):
        u, u_new = _u0(), np.zeros(8)
        step[1, 8](u, u_new, r)
        u += np.array([2.0 * k for k in range(8)]) * u_new
        return u

    with dualgpu.using_backend("cpu"), dualgpu.keep_host_buffers():
        J = dualgpu.jacobian(f, 0.3)
    np.testing.assert_allclose(_flat(J), central_fd(f, 0.3), rtol=1e-6, atol=1e-9)


def test_stores_into_several_elements_on_one_line():
    """Ghost cells as one tuple store (``u[0], u[-1] = u[1], u[-2]``): its replay stored
    the first target into the hidden values, then looked the buffer up again for the second
    and took that difference for a write it did not see."""
    def f(r):
        u, u_new = _u0(), np.zeros(8)
        step[1, 8](u, u_new, r)
        u_new[0], u_new[-1] = u_new[1], 2.0 * u_new[-2]
        u[0], u[1] = 0.0, u_new[3]
        return u_new, u

    with dualgpu.using_backend("cpu"), dualgpu.keep_host_buffers():
        J = dualgpu.jacobian(f, 0.3)
    for got, want in zip(J, central_fd_pair(f, 0.3)):
        np.testing.assert_allclose(np.ravel(got), want, rtol=1e-6, atol=1e-9)


@cuda.jit
def _minus_square(u, out, k):
    i = cuda.grid(1)
    if i < u.shape[0]:
        out[i] = -k * u[i] * u[i]


@pytest.mark.parametrize("form", ["plain_target", "direct", "scaled", "through_a_dual",
                                  "scaled_element", "scaled_attribute"])
def test_a_dual_target_written_from_a_kept_buffer_through_numpy(form):
    """``u += 0.1 * rhs`` with u a DualArray (the differentiated u0 copied) and rhs a kept
    buffer: numpy's 0.1 * rhs has no partials, and the line was not followed (its target is
    no plain array): rhs's share of the derivative was lost silently. Now refused, with the
    fix (a plain target, replayed); ``u += rhs`` meets the dual itself and was right."""
    def f(u0, amp):
        if form == "plain_target":
            u = np.zeros(u0.shape[0])
            u[:] = u0
        else:
            u = u0.copy()
        rhs = np.zeros(u0.shape[0])
        held = [rhs]
        box = _Solver()
        box.rhs = rhs
        for _ in range(3):
            _minus_square[1, 8](u, rhs, 0.7)
            if form == "direct":
                u += rhs
            elif form == "through_a_dual":
                u[:] = u + np.sin(rhs) * amp
            elif form == "scaled_element":  # (was silently wrong: not a bare name)
                u += 0.1 * held[0]
            elif form == "scaled_attribute":
                u += 0.1 * box.rhs
            else:
                u += 0.1 * rhs
        return u

    x = np.linspace(0.5, 1.0, 3)
    with dualgpu.using_backend("cpu"), dualgpu.keep_host_buffers():
        if form not in ("plain_target", "direct"):
            name = {"scaled_element": r"held\[0\]", "scaled_attribute": r"box\.rhs"}.get(
                form, "rhs")
            with pytest.raises(DualgpuError, match=r"writes a dual array with a value numpy "
                                                   r"computes from the kept host buffer\(s\) "
                                                   + name):
                dualgpu.jacobian(f, x, 0.3)
            return
        J = dualgpu.jacobian(f, x, 0.3)
    h = 1e-6
    fd = np.stack([(f(x + h * e, 0.3) - f(x - h * e, 0.3)) / (2 * h) for e in np.eye(3)], 1)
    np.testing.assert_allclose(J, fd, rtol=1e-6, atol=1e-9)


def central_fd_pair(f, r, h=1e-6):
    up, down = f(r + h), f(r - h)
    return [(np.asarray(a) - np.asarray(b)) / (2 * h) for a, b in zip(up, down)]


def test_a_view_taken_on_one_line_and_written_on_another():
    def f(r):
        state = np.zeros((2, 8))
        u_new = np.zeros(8)
        step[1, 8](_u0(), u_new, r)
        state[0] = u_new                  # state is kept (read-only between followed lines)
        row = state[1]                    # a view made while it is read-only
        row[:] = 2.0 * u_new
        row[0] += 1.0
        return state

    with dualgpu.using_backend("cpu"), dualgpu.keep_host_buffers():
        J = dualgpu.jacobian(f, 0.3)
    np.testing.assert_allclose(_flat(J), central_fd(f, 0.3), rtol=1e-6, atol=1e-9)


def test_a_write_in_compiled_host_code_is_refused():
    from numba import njit

    @njit
    def zero(a):
        a[:] = 0.0

    def f(r):
        u, u_new = _u0(), np.zeros(8)
        step[1, 8](u, u_new, r)
        zero(u_new)
        return u_new

    with dualgpu.using_backend("cpu"), dualgpu.keep_host_buffers(), \
            pytest.raises(DualgpuError) as err:
        dualgpu.jacobian(f, 0.3)
    message = str(err.value)
    assert "u_new" in message and "test_host_writes.py:" in message and "zero(u_new)" in message


def test_a_changed_value_dualgpu_did_not_see_is_refused_not_zeroed():
    """A view made before the buffer was kept stays writeable; what it writes unseen is
    found at the next use of the buffer and refused (before: zero partials, no error)."""
    def f(r):
        u, u_new = _u0(), np.zeros(8)
        alias = u_new[:]                  # made before a kernel wrote u_new
        step[1, 8](u, u_new, r)
        exec("alias[2:4] = 5.0", {"alias": alias})
        return u_new

    with dualgpu.using_backend("cpu"), dualgpu.keep_host_buffers(), \
            pytest.raises(DualgpuError) as err:
        dualgpu.jacobian(f, 0.3)
    message = str(err.value)
    assert "u_new" in message and "2 element(s)" in message and "did not see" in message


# formatted as black and ruff format long lines: each write spans several lines, and Python
# 3.11 reports the first line again for the store (the statement was finished before it ran)
def _split_paren(u, u_new, k):
    u[:] = (0.9 * u_new
            + 0.1 * u_new)


def _split_backslash(u, u_new, k):
    u[:] = 0.9 * u_new + \
        0.1 * u_new


def _split_call(u, u_new, k):
    np.copyto(u,
              u_new)


def _split_inplace(u, u_new, k):
    u += (
        0.5 * (u_new - u)
    )


def _split_where(u, u_new, k):
    u[:] = np.where(u_new > 0.5,
                    u_new, 0.5 * u_new)


def _split_target(u, u_new, k):
    u[
        1:-1
    ] = u_new[1:-1]


@pytest.mark.parametrize("write", [_split_paren, _split_backslash, _split_call, _split_inplace,
                                   _split_where, _split_target])
def test_a_write_over_several_lines_is_followed(write):
    def f(r):
        u, u_new = _u0(), np.zeros(8)
        for k in range(3):  # the same statement again: each run of it is its own write
            step[1, 8](u, u_new, r)
            write(u, u_new, k)
        return u

    with dualgpu.using_backend("cpu"), dualgpu.keep_host_buffers():
        J = dualgpu.jacobian(f, 0.3)
    np.testing.assert_allclose(_flat(J), central_fd(f, 0.3), rtol=1e-6, atol=1e-9)
    assert np.abs(_flat(J)).max() > 0.01


@cuda.jit
def _kick(psi, out, v, dt):
    i = cuda.grid(1)
    if i < psi.shape[0]:
        out[i] = psi[i] * (1.0 - v * dt * (i + 1)) * (1.0 + 0.5j * dt)


def _complex_run(v):
    psi = (np.linspace(0.5, 1.0, 8) + 0.25j).astype(np.complex128)
    out = np.zeros(8, np.complex128)
    for _ in range(3):
        _kick[1, 8](psi, out, v, 0.1)
        psi[:] = out
        psi *= 0.5
        psi += 0.25j * out.conj()
    return psi


@pytest.mark.parametrize("backend", BACKENDS)
def test_complex_host_buffers_are_kept_too(backend):
    """A complex128 host buffer that a kernel writes and host code copies and updates (it was
    refused, with the advice to do what the code already did: use keep_host_buffers)."""
    with dualgpu.using_backend(backend), dualgpu.keep_host_buffers():
        J = dualgpu.jacobian(_complex_run, 0.4)
    h = 1e-6
    fd = (_complex_run(0.4 + h) - _complex_run(0.4 - h)) / (2 * h)
    assert J.dtype == np.complex128
    np.testing.assert_allclose(np.ravel(J), fd, rtol=1e-6, atol=1e-9)
    assert np.abs(fd.imag).max() > 1e-3  # a derivative with an imaginary part


def test_dualgpu_zeros_holds_complex_duals():
    """``dualgpu.zeros(shape, np.complex128)``, the fix a refused complex host buffer names,
    is a complex DualArray under the driver (it was a plain array: the same refusal again)."""
    def f(v):
        psi = cuda.to_device((np.linspace(0.5, 1.0, 8) + 0.1j).astype(np.complex128))
        out = dualgpu.zeros((8,), np.complex128)
        _kick[1, 8](psi, out, v, 0.1)
        return out

    with dualgpu.using_backend("cpu"):
        J = dualgpu.jacobian(f, 0.4)
    h = 1e-6
    assert J.dtype == np.complex128
    np.testing.assert_allclose(np.ravel(J), (f(0.4 + h) - f(0.4 - h)) / (2 * h), rtol=1e-7)


@cuda.jit
def _forced(u, p, dt):
    i = cuda.grid(1)
    if i < u.shape[0]:
        u[i] = u[i] + dt * (p[0] * u[i] - p[1] * u[i] ** 3)


def _forced_run(k):
    u = np.linspace(0.1, 1.0, 8)
    p = np.array([k, 2.0 * k])  # an object array of duals: a DualArray at the launch
    for _ in range(4):
        _forced[1, 8](u, p, 0.05)
    return u


@pytest.mark.parametrize("backend", BACKENDS)
def test_parameters_in_an_object_array_beside_a_kept_buffer(backend):
    """The launch's only duals in an object array (``np.array([k, 2 * k])``): the kept
    buffer it writes was left plain, and the store refused."""
    with dualgpu.using_backend(backend), dualgpu.keep_host_buffers():
        J = dualgpu.jacobian(_forced_run, 0.7)
    np.testing.assert_allclose(_flat(J), central_fd(_forced_run, 0.7), rtol=1e-6, atol=1e-9)


_mean_of = lambda a: np.mean(a)  # noqa: E731 - a lambda's lines are not followed


def _launching(u):  # launches a kernel itself, and returns a plain number
    decay[1, 8](u, 0.0)
    return 2.0


@pytest.mark.parametrize("form", ["lambda", "float", "to_a_kernel", "in_the_launch"])
def test_a_value_computed_from_a_kept_buffer_that_cannot_be_followed_is_refused(form):
    def run(r):
        u, u_new = _u0() + 1.0, np.zeros(8)
        for _ in range(2):
            step[1, 8](u, u_new, r)
            if form == "in_the_launch":  # (the inner launch must not take its slot)
                u[:] = u_new
                decay[1, 8](u, _launching(u_new) / np.sum(u_new))
                continue
            s = float(np.sum(u_new)) if form == "float" else _mean_of(u_new)
            if form == "to_a_kernel":
                u[:] = u_new
                decay[1, 8](u, s)
            else:
                u[:] = u_new / s
        return u

    with dualgpu.using_backend("cpu"), dualgpu.keep_host_buffers():
        with pytest.raises(DualgpuError, match=r"s was computed by `s = .*` at .* from kept "
                                               r"host buffers, but .* and it is used at "
                                               r".*test_host_writes.py:\d+ \(`(u\[:\] = "
                                               r"u_new / s|decay\[1, 8\]\(u, s\))`\)"
                           if form != "in_the_launch" else r"argument 1 of the launch at "
                           r".*test_host_writes.py:\d+ .* calls _launching"):
            dualgpu.jacobian(run, 0.3)
