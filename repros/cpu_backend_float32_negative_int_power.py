"""float32 ** negative int in a PLAIN kernel on the cpu backend is computed (and typed) as
float64: numba (@njit and numba.cuda) types float32 ** int64 as float32. The cpu backend
compiles ``a ** b`` as dualgpu.core.int_power.power -> float_int_power, whose ``1 / r`` is
int / float32 = float64, so the branch b < 0 returns float64. Seen as: values of dual runs
(float32, as numba) differ from the plain cpu-backend run (and the plain run differs from
the simulator and from @njit)."""
import numpy as np
from numba import njit
import dualgpu
from dualgpu import cuda
from dualgpu.core.int_power import float_int_power


@cuda.jit
def k(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = x[i] ** -1          # float32 in numba / numba.cuda


@njit
def plain_numba(x, out):
    for i in range(x.shape[0]):
        out[i] = x[i] ** -1


x = np.float32([0.7, 0.3, 0.9])
want = (np.float32(1) / x).astype(np.float64)    # numba: float32 result
o = np.zeros(3)
plain_numba(x, o)
print("@njit                 float32-rounded:", np.array_equal(o, want))
for backend in ("cudasim", "cpu"):
    with dualgpu.using_backend(backend):
        d = cuda.to_device(x)
        out = cuda.device_array(3, np.float64)
        k[1, 3](d, out)
        print(f"{backend:8s} plain kernel float32-rounded:", np.array_equal(out.copy_to_host(), want),
              out.copy_to_host() - want)
fip = njit(lambda a, b: float_int_power(a, b))
fip(np.float32(0.7), -1)
print("float_int_power signature:", fip.nopython_signatures)  # (float32, int64) -> float64
