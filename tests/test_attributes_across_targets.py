"""Dual attributes (``.shape``, ``.size``, ``.ndim``, ``.lanes``) on every target, in any order.

numba's ``overload_attribute`` lowers an attribute only for the target that resolves it first:
a dual kernel compiled for CUDA before any cpu run left ``u.shape`` without a lowering on the
cpu backend for the rest of the process (``NotImplementedError: No definition for lowering
DualArray(...).shape``). The order matters, so this runs in a fresh process: CUDA (PTX,
offline) first, then a Jacobian and a Hessian on the cpu backend, checked against their
analytic values.
"""
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = textwrap.dedent('''
import numpy as np
import numba.cuda.dispatcher as dispatcher
from numba import cuda as numba_cuda, njit, types

import dualgpu
from dualgpu import cuda
from dualgpu.backends import gpu
from dualgpu.numba_arrays import dual_array_type
from dualgpu.numba_types import dual_type


class _FakeDevice:
    compute_capability = (9, 0)


dispatcher.get_current_device = lambda: _FakeDevice()


@cuda.jit
def scale(u, out, c):
    i = cuda.grid(1)
    if i < u.shape[0] and u.ndim == 1:
        out[i] = c * u[i] * u[i] * (u.size + 0 * u.lanes)


A, D = dual_array_type(types.float64, 1, 2), dual_type(types.float64, 2)
numba_cuda.compile_ptx(gpu.prepare_function(scale, 2), (A, A, D), cc=(9, 0))


def f(u, c=1.5):
    out = cuda.device_array_like(u)
    scale[1, 32](cuda.to_device(u), out, c)
    return out.copy_to_host()


u = np.linspace(0.5, 1.5, 5)
with dualgpu.using_backend("cpu"):
    J = dualgpu.jacobian(f, u)
    H = dualgpu.hessian(lambda v: f(v)[2], u)
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
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          timeout=600, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "ok"
