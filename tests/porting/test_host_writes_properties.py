"""Property tests, "host code between launches" (issue 43): random programs of kernel launches
and host writes into the host buffers they use, inside ``dualgpu.keep_host_buffers()``.

hypothesis draws a program over two host arrays ``u`` and ``v``: kernel launches that read
one and write the other or update one in place, and host writes between them (copies
``u[:] = v`` and ``np.copyto``, in-place operators with constants and with the other
buffer, resets to constants, stores of slices and of single elements). Its Jacobian with
respect to the kernels' parameter must equal central finite differences of the plain
program (float64, cpu backend; a few programs on cudasim). CI runs few examples
(``DUALGPU_HYPOTHESIS_PROFILE=dualgpu-long`` runs many more, conftest.py).
"""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dualgpu
from dualgpu import cuda


@cuda.jit
def diffuse(a, b, r):
    i = cuda.grid(1)
    n = a.shape[0]
    if 0 < i < n - 1:
        b[i] = a[i] + r * (a[i - 1] - 2.0 * a[i] + a[i + 1])
    elif i < n:
        b[i] = a[i] * (1.0 - r)


@cuda.jit
def damp(a, r):
    i = cuda.grid(1)
    if i < a.shape[0]:
        a[i] = a[i] * math.exp(-r * (1.0 + 0.1 * i))


N = 8
#: the operations: launches (0-3) and host writes (4-15); each is one line of `run`
OPS = 16


def run(r, program):
    """The program on host buffers, one operation per line (as numba.cuda host code is)."""
    u = np.cos(np.linspace(0.0, 2.0, N))
    v = np.zeros(N)
    for op, k, c in program:
        if op == 0:
            diffuse[1, N](u, v, r)
        elif op == 1:
            diffuse[1, N](v, u, r)
        elif op == 2:
            damp[1, N](u, r)
        elif op == 3:
            damp[1, N](v, r)
        elif op == 4:
            u[:] = v
        elif op == 5:
            np.copyto(v, u)
        elif op == 6:
            u *= c
        elif op == 7:
            v += u
        elif op == 8:
            u -= c * v
        elif op == 9:
            v[k:] = 0.0
        elif op == 10:
            u[k] = c
        elif op == 11:
            u[1:-1] = v[1:-1]
        elif op == 12:
            v[:k] = 0.5 * u[:k] + v[:k]
        elif op == 13:
            u[:] = 0.0
        elif op == 14:
            v /= 1.0 + c
        else:
            u.fill(c)
    damp[1, N](u, r)  # both end kept (a buffer no kernel or dual reached is a plain output,
    damp[1, N](v, r)  # which is refused while kept buffers hold partials)
    return u, v  # the buffers themselves (np.concatenate would read them as plain numbers)


programs = st.lists(
    st.tuples(st.integers(0, OPS - 1), st.integers(0, N - 1),
              st.sampled_from([0.5, 1.5, -0.75, 2.0])),
    min_size=1, max_size=8,
).filter(lambda p: any(op < 4 for op, _, _ in p))  # at least one launch


def _check(backend, r, program):
    with dualgpu.using_backend(backend), dualgpu.keep_host_buffers():
        J = np.concatenate([np.ravel(j) for j in dualgpu.jacobian(lambda x: run(x, program), r)])
    h = 1e-6
    with dualgpu.using_backend(backend):
        fd = (np.concatenate(run(r + h, program)) - np.concatenate(run(r - h, program))) / (2 * h)
    scale = max(1.0, float(np.abs(fd).max()))
    np.testing.assert_allclose(J, fd, rtol=1e-5, atol=1e-7 * scale, err_msg=str(program))


@settings(max_examples=12, deadline=None)
@given(program=programs, r=st.sampled_from([0.1, 0.2, 0.3]))
def test_host_code_between_launches_cpu(program, r):
    _check("cpu", r, program)


@settings(max_examples=3, deadline=None)
@given(program=programs)
def test_host_code_between_launches_cudasim(program):
    _check("cudasim", 0.2, program)


@pytest.mark.parametrize("program", [
    [(0, 0, 0.5), (4, 0, 0.5), (0, 0, 0.5)],                  # double buffer, u[:] = v
    [(2, 0, 0.5), (13, 0, 0.5), (0, 0, 0.5)],                 # a reset to 0.0
    [(0, 0, 0.5), (9, 3, 0.5), (1, 0, 0.5), (12, 5, 0.5)],    # partial resets and slices
])
def test_host_code_between_launches_examples(program):
    _check("cpu", 0.2, program)
