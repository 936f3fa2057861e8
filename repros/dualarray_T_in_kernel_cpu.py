"""x.T (and out.T) of a DualArray inside a kernel: works on cudasim and in plain numba
(@njit / numba.cuda support ndarray.T), fails to type on the cpu backend."""
import numpy as np
import dualgpu
from dualgpu import cuda


@cuda.jit
def k(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        t = x.T
        out[i, 0] = t[0, i] * t[1, i]


def f(x):
    d = cuda.to_device(x)
    o = cuda.device_array_like(d)
    k[1, 4](d, o)
    return o.copy_to_host()


x = np.arange(1.0, 9.0).reshape(4, 2)
for backend in ("cudasim", "cpu"):
    with dualgpu.using_backend(backend):
        print(backend, "plain", f(x)[:, 0])
        try:
            J = dualgpu.jacobian(f, x)
            print(backend, "jacobian ok", J[0, 0, 0])
        except Exception as e:
            print(backend, "FAILS:", type(e).__name__, str(e).splitlines()[0][:200],
                  "|", [l for l in str(e).splitlines() if "Unknown attribute" in l][:1])
