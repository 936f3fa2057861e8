"""Caller data stays untouched and every run of f sees the same data, on every driver path.

Each function below updates a non-differentiated array in place (``w += 1.0``), reached
positionally, by keyword, inside a tuple or inside a dict/list. Unprotected, every chunk
after the first runs on different data (a wrong Jacobian) and the caller's array changes.
The expected Jacobian of ``u -> u * (w + 1)`` is ``diag(w + 1)``.
"""
import numpy as np
import pytest

import dualgpu
from dualgpu import cuda
from dualgpu.autodiff._protect import protect
from dualgpu.autodiff.api import jacfwd, jacobian, jvp, jvp_batch
from dualgpu.sparse import detect_sparsity, sparse_jacobian
from dualgpu.testing import check_jacobian, check_jvp

N = 6
CHUNK = 2  # several chunks per Jacobian, one compile per lane count


@pytest.fixture(autouse=True)
def cpu_backend():
    with dualgpu.using_backend("cpu"):
        yield


@cuda.jit
def scale(u, w, out):
    i = cuda.grid(1)
    if i < u.shape[0]:
        out[i] = u[i] * w[i]


def _run(u, w):
    d_u = cuda.to_device(u)
    out = cuda.device_array_like(d_u)
    scale[1, 32](d_u, cuda.to_device(w), out)
    return out.copy_to_host()


def mutate_positional(u, w):
    w += 1.0
    return _run(u, w)


def mutate_keyword(u, *, w):
    w += 1.0
    return _run(u, w)


def mutate_in_tuple(u, params):
    w, _ = params
    w += 1.0
    return _run(u, w)


def mutate_in_dict(u, params):
    w = params["w"][0]
    w += 1.0
    return _run(u, w)


def _data():
    u = np.linspace(1.0, 2.0, N)
    w = np.linspace(0.5, 3.0, N)
    return u, w, np.diag(w + 1.0)


CALLS = {
    "positional": (mutate_positional, lambda w: ((w,), {})),
    "keyword": (mutate_keyword, lambda w: ((), {"w": w})),
    "tuple": (mutate_in_tuple, lambda w: (((w, 2.0),), {})),
    "dict": (mutate_in_dict, lambda w: (({"w": [w]},), {})),
}


def _jacobian_by(path, f, u, extra, kwargs):
    if path == "jacobian":
        return jacobian(f, u, *extra, chunk_size=CHUNK, progress=False)
    if path == "jacfwd":
        return jacfwd(f, chunk_size=CHUNK, progress=False)(u, *extra, **kwargs)
    if path == "sparse-pattern":
        J = jacfwd(f, sparsity=np.ones((N, N), bool), chunk_size=CHUNK)(u, *extra, **kwargs)
        return J.toarray()
    if path == "sparse-detect":
        J = jacfwd(f, sparsity="detect", chunk_size=1)(u, *extra, **kwargs)
        return J.toarray()
    if path == "jvp_batch":
        return jvp_batch(f, (u,) + extra, (np.eye(N),) + (None,) * len(extra),
                         chunk_size=CHUNK)[1].T
    if path == "jvp":
        columns = [jvp(f, (u,) + extra, (np.eye(N)[k],) + (None,) * len(extra))[1]
                   for k in range(N)]
        return np.stack(columns, axis=1)
    raise AssertionError(path)


PATHS = ["jacobian", "jacfwd", "sparse-pattern", "sparse-detect", "jvp_batch", "jvp"]


@pytest.mark.parametrize("path, how", [
    (path, how) for path in PATHS for how in CALLS
    # jacobian, jvp and jvp_batch take positional arguments only (jacfwd covers keywords)
    if not (path in ("jacobian", "jvp", "jvp_batch") and how == "keyword")
])
def test_in_place_updates_of_fixed_arrays_change_neither_the_jacobian_nor_the_caller(path, how):
    f, arguments = CALLS[how]
    u, w, expected = _data()
    kept_u, kept_w = u.copy(), w.copy()
    extra, kwargs = arguments(w)
    J = _jacobian_by(path, f, u, extra, kwargs)
    np.testing.assert_allclose(J, expected, rtol=1e-15, atol=0)
    np.testing.assert_array_equal(w, kept_w)
    np.testing.assert_array_equal(u, kept_u)


@pytest.mark.parametrize("how", ["positional", "tuple", "dict"])
def test_checkers_and_detection_see_the_same_data_every_run(how):
    f, arguments = CALLS[how]
    u, w, _ = _data()
    kept = w.copy()
    extra, _ = arguments(w)
    assert check_jvp(f, (u,) + extra, argnums=0) < 1e-8
    assert check_jacobian(f, u, *extra, argnums=0, chunk_size=CHUNK) < 1e-8
    pattern = detect_sparsity(f, (u,) + extra)
    assert (pattern.toarray() == np.eye(N, dtype=bool)).all()
    J = sparse_jacobian(f, (u,) + extra, sparsity=pattern, chunk_size=1)
    np.testing.assert_allclose(J.toarray(), np.diag(w + 1.0), rtol=1e-15)
    np.testing.assert_array_equal(w, kept)


def test_protect_copies_every_reachable_array_and_keeps_aliasing():
    from collections import namedtuple

    Params = namedtuple("Params", "w k")
    w = np.arange(3.0)
    host = cuda.to_device(w)  # the cpu backend's HostArray
    d = dualgpu.dual_array(w, lanes=2)
    args = (w, Params(w, 3), {"a": [w, (host, d)]}, "text", 2.5)
    out = protect(args)
    assert out[0] is not w and out[1].w is out[0]  # one array passed twice: still one array
    assert isinstance(out[1], Params) and out[1].k == 3
    copied_host, copied_dual = out[2]["a"][1]
    assert type(copied_host) is type(host) and copied_host is not host
    assert copied_dual.values is not d.values and copied_dual.partials is not d.partials
    out[0][:] = -1.0
    copied_dual.partials[:] = 7.0
    np.testing.assert_array_equal(w, np.arange(3.0))
    assert not d.partials.any()
    assert out[3:] == ("text", 2.5)
    loop = [w]
    loop.append(loop)
    copied = protect(loop)
    assert copied[1] is copied and copied[0] is not w


def test_device_arrays_of_the_simulator_are_copied():
    from numba.cuda import simulator

    w = np.arange(4.0)
    dev = simulator.to_device(w)
    copied = protect([dev])[0]
    assert copied is not dev
    np.testing.assert_array_equal(copied.copy_to_host(), w)
