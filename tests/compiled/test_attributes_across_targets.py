"""The cpu backend after a CUDA compile: dual attributes and numba's own extensions.

numba's ``overload_attribute`` lowers an attribute only for the target that resolves it first:
a dual kernel compiled for CUDA before any cpu run left ``u.shape`` without a lowering on the
cpu backend for the rest of the process (``NotImplementedError: No definition for lowering
DualArray(...).shape``), and numba's own ``Array._allocate`` (behind ``np.empty``, so every
dual ``cuda.local.array`` on the cpu backend) suffered the same when the CPU typing context
first installed it during a CUDA compile. The order matters, so this runs in a fresh process:
CUDA (PTX, offline) first, then Jacobians and a Hessian on the cpu backend, checked against
their analytic values.
"""
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

SCRIPT = textwrap.dedent('''
import numba
import numpy as np
import numba.cuda.dispatcher as dispatcher
from numba import cuda as numba_cuda, njit, types

import dualgpu
from dualgpu import cuda
from dualgpu.backends.gpu import kernel as gpu
from dualgpu.compiled.arrays import dual_array_type
from dualgpu.compiled.types import dual_type


class _FakeDevice:
    compute_capability = (9, 0)


dispatcher.get_current_device = lambda: _FakeDevice()


@cuda.jit
def scale(u, out, c):
    i = cuda.grid(1)
    if i < u.shape[0] and u.ndim == 1:
        out[i] = c * u[i] * u[i] * (u.size + 0 * u.lanes)


@cuda.jit
def weighted(u, out):
    i = cuda.grid(1)
    if i < u.shape[0]:
        w = cuda.local.array(2, numba.float64)
        count = cuda.local.array(1, numba.int32)
        count[0] = 2
        w[0] = 2.0
        w[1] = 3.0
        out[i] = w[0] * u[i] + w[1] * count[0]


A, D = dual_array_type(types.float64, 1, 2), dual_type(types.float64, 2)
numba_cuda.compile_ptx(gpu.prepare_function(scale, 2), (A, A, D), cc=(9, 0))
numba_cuda.compile_ptx(gpu.prepare_function(weighted, 2), (A, A), cc=(9, 0))


def g(u):
    out = cuda.device_array_like(u)
    weighted[1, 32](cuda.to_device(u), out)
    return out.copy_to_host()



def f(u, c=1.5):
    out = cuda.device_array_like(u)
    scale[1, 32](cuda.to_device(u), out, c)
    return out.copy_to_host()


u = np.linspace(0.5, 1.5, 5)
with dualgpu.using_backend("cpu"):
    J = dualgpu.jacobian(f, u)
    H = dualgpu.hessian(lambda v: f(v)[2], u)
    assert np.array_equal(dualgpu.jacobian(g, u), 2.0 * np.eye(u.size))
n = u.size
assert np.allclose(J, np.diag(1.5 * n * 2 * u), rtol=1e-14), J
expected = np.zeros((n, n)); expected[2, 2] = 1.5 * n * 2
assert np.allclose(H, expected, rtol=1e-14), H
assert njit(lambda d: d.lanes)(dualgpu.Dual(1.0, [1.0, 0.0, 0.0])) == 3
print("ok")
''')


def test_cpu_backend_after_a_cuda_compile_in_a_fresh_process(tmp_path):
    path = tmp_path / "attributes_after_cuda.py"
    path.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    env["DUALGPU_CACHE"] = "0"  # compiled here, not loaded from an earlier process's cache
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          timeout=600, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "ok"


def test_local_arrays_on_cpu_after_a_cuda_compile_under_pytest():
    """numba's ``Array._allocate`` lost its CPU lowering when the first compile of the process
    was for CUDA (this order reproduced it under pytest; the file order of a serial run hid it,
    pytest-xdist's did not)."""
    env = dict(os.environ, DUALGPU_CACHE="0")
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         # a dual rule compiled by numba.cuda directly (not through the GPU backend) ...
         "tests/compiled/test_rules_ptx.py::test_rule_compiles_to_ptx[float64-8-add-dn]",
         # ... or a kernel through the GPU backend, then dual local arrays on the cpu backend
         "tests/backends/gpu/test_gpu_marshalling.py::test_ported_kernels_dual_specialisation_compiles"
         "[stencil_1d]", "tests/backends/cpu/test_cpu_backend.py::test_dual_local_array"],
        capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "3 passed" in proc.stdout
