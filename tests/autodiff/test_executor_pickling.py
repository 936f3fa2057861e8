"""dualgpu's own callables pickle, so hessian runs on a process pool (issue 25, unclear error 6).

``hessian(f, x, executor=ProcessPoolExecutor())`` sends jacfwd's function of f to the
worker processes. That was a local closure: without cloudpickle it did not pickle,
and the message blamed the user's f. jacfwd now returns a module-level
:class:`dualgpu.autodiff.api.JacobianOf`, and the message names the part that does not
pickle: the user's f, or one of its arguments.
"""
import multiprocessing
import pickle
import sys
import threading
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

import dualgpu
from dualgpu import DualgpuError

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def cpu_backend():
    with dualgpu.using_backend("cpu"):
        yield


@pytest.fixture
def plain_pickle(monkeypatch):
    """Ship chunk plans with the standard pickle, as where cloudpickle is not installed."""
    monkeypatch.setitem(sys.modules, "cloudpickle", None)


def energy(x):
    """x0**2 x1 + x1**3: H = [[2 x1, 2 x0], [2 x0, 6 x1]]."""
    u = dualgpu.cuda.to_device(x).copy_to_host()
    return u[0] * u[0] * u[1] + u[1] * u[1] * u[1]


def scaled_energy(x, scale):
    return energy(x) * scale.factor


def analytic_hessian(x):
    return np.array([[2 * x[1], 2 * x[0]], [2 * x[0], 6 * x[1]]])


def test_jacfwd_of_a_module_level_function_pickles():
    g = pickle.loads(pickle.dumps(dualgpu.jacfwd(dualgpu.jacfwd(energy))))
    x = np.array([1.0, 3.0])
    np.testing.assert_allclose(g(x), analytic_hessian(x), rtol=1e-12)


def test_hessian_on_a_process_pool_without_cloudpickle(plain_pickle):
    x = np.array([1.0, 3.0])
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=context) as pool:
        H = dualgpu.hessian(energy, x, executor=pool, chunk_size=1)
    np.testing.assert_allclose(H, analytic_hessian(x), rtol=1e-12)




def test_an_unpicklable_user_function_is_named(plain_pickle):
    def local_energy(x):
        return energy(x)

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        with pytest.raises(DualgpuError, match=r"f \(.*local_energy\) could not be pickled"):
            dualgpu.hessian(local_energy, np.array([1.0, 3.0]), executor=pool, chunk_size=1)


def test_an_unpicklable_argument_is_named(plain_pickle):
    class Scale:
        factor = 2.0
        lock = threading.Lock()

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        with pytest.raises(DualgpuError, match=r"argument 1 of f \(Scale\) could not be pickled"):
            dualgpu.hessian(scaled_energy, np.array([1.0, 3.0]), Scale(), executor=pool,
                            chunk_size=1)
