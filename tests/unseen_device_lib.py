"""Probe kernels for constructs users bring (each a small kernel plus a host function)."""
import math

import numpy as np
from numba import float64

import dualgpu
from dualgpu import cuda


# P1: device function with an early `return 0.0, 0.0` (float tuple) vs a dual tuple
@cuda.jit(device=True)
def pair_force_early(dx, r2, rc2, eps):
    if r2 >= rc2:
        return 0.0, 0.0
    inv = 1.0 / r2
    return eps * dx * inv, eps * inv


@cuda.jit
def p_early_return_tuple(x, out, rc2, eps):
    i = cuda.grid(1)
    n = x.shape[0]
    if i < n:
        acc = 0
        e = 0.0
        for j in range(n):
            if j != i:
                dx = x[i] - x[j]
                f, g = pair_force_early(dx, dx * dx, rc2, eps)
                acc += f
                e += g
        out[i] = acc + 0.1 * e


def f_early_return_tuple(x, eps):
    d = cuda.to_device(x)
    out = cuda.device_array_like(d)
    p_early_return_tuple[1, 8](d, out, 0.6, eps)
    return out.copy_to_host()


# P2: eager signature string
@cuda.jit("void(float64[:], float64[:], float64)")
def p_eager(u, out, a):
    i = cuda.grid(1)
    if i < u.shape[0]:
        out[i] = a * u[i] * u[i]


def f_eager(u, a):
    d = cuda.to_device(u)
    out = cuda.device_array_like(d)
    p_eager[1, 8](d, out, a)
    return out.copy_to_host()


# P3: host numpy output array passed straight to the kernel (auto transfer)
@cuda.jit
def p_square(u, out, a):
    i = cuda.grid(1)
    if i < u.shape[0]:
        out[i] = a * u[i] * u[i]


def f_numpy_out(u, a):
    out = np.zeros_like(u)
    p_square[1, 8](u, out, a)
    return out


# P4: host-side np.float32(param) cast of a scalar parameter
def f_host_float32_cast(u, a):
    a = np.float32(a)
    d = cuda.to_device(u)
    out = cuda.device_array_like(d)
    p_square[1, 8](d, out, a)
    return out.copy_to_host()


# P4, the documented way: dualgpu.float32(param) is np.float32 for plain numbers and keeps
# a Dual's partials
def f_host_float32_cast_documented(u, a):
    a = dualgpu.float32(a)
    d = cuda.to_device(u)
    out = cuda.device_array_like(d)
    p_square[1, 8](d, out, a)
    return out.copy_to_host()


# P4c: host objective computed straight on the device result (no copy_to_host first)
def f_host_objective_of_device_result(u, a):
    d = cuda.to_device(u)
    out = cuda.device_array_like(d)
    p_square[1, 8](d, out, a)
    return np.sum(out ** 2) + np.max(out) - np.linalg.norm(out - u)


# P5: host-side math.sqrt of a parameter
def f_host_math_sqrt(u, k):
    omega = math.sqrt(k)
    d = cuda.to_device(u)
    out = cuda.device_array_like(d)
    p_square[1, 8](d, out, omega)
    return out.copy_to_host()


# P6: host-side reduction of the result (a scalar output)
def f_host_sum(u, a):
    d = cuda.to_device(u)
    out = cuda.device_array_like(d)
    p_square[1, 8](d, out, a)
    return out.copy_to_host().sum()


# P7: shared-memory tile (cudasim only)
@cuda.jit
def p_shared_tile(u, out, a):
    tile = cuda.shared.array(8, float64)
    i = cuda.grid(1)
    t = cuda.threadIdx.x
    if i < u.shape[0]:
        tile[t] = u[i]
    cuda.syncthreads()
    if i < u.shape[0]:
        left = tile[t - 1] if t > 0 else u[i]
        out[i] = a * (tile[t] - left)


def f_shared_tile(u, a):
    d = cuda.to_device(u)
    out = cuda.device_array_like(d)
    p_shared_tile[2, 8](d, out, a)
    return out.copy_to_host()


# P8: atomic add of a dual into a density grid (particle deposit)
@cuda.jit
def p_atomic_deposit(x, w, grid, inv_dx):
    i = cuda.grid(1)
    if i < x.shape[0]:
        s = x[i] * inv_dx
        c = int(math.floor(s))
        frac = s - c
        cuda.atomic.add(grid, c, w[i] * (1.0 - frac))
        cuda.atomic.add(grid, c + 1, w[i] * frac)


def f_atomic_deposit(x, w):
    d_x = cuda.to_device(x)
    d_w = cuda.to_device(w)
    g = cuda.to_device(np.zeros(8))
    p_atomic_deposit[1, 8](d_x, d_w, g, 1.0)
    return g.copy_to_host()


# P9: row view (slice) of a 2-D array inside a kernel
@cuda.jit
def p_row_view(a, out, s):
    i = cuda.grid(1)
    if i < a.shape[0]:
        row = a[i]
        acc = 0.0
        for j in range(row.shape[0]):
            acc += row[j] * row[j]
        out[i] = s * acc


def f_row_view(a, s):
    d = cuda.to_device(a)
    out = cuda.device_array(a.shape[0], np.float64)
    p_row_view[1, 8](d, out, s)
    return out.copy_to_host()


# P10: math.inf start for a running minimum, min() of float and dual in a loop
@cuda.jit
def p_running_min(x, out, s):
    i = cuda.grid(1)
    n = x.shape[0]
    if i < n:
        rmin = math.inf
        for j in range(n):
            if j != i:
                rmin = min(rmin, abs(x[i] - x[j]))
        out[i] = s * rmin


def f_running_min(x, s):
    d = cuda.to_device(x)
    out = cuda.device_array_like(d)
    p_running_min[1, 8](d, out, s)
    return out.copy_to_host()


# P11: ternary mixing a float literal and a dual
@cuda.jit
def p_ternary(u, out, a):
    i = cuda.grid(1)
    if i < u.shape[0]:
        v = u[i]
        out[i] = a * v * v if v > 0.5 else 0.0


def f_ternary(u, a):
    d = cuda.to_device(u)
    out = cuda.device_array_like(d)
    p_ternary[1, 8](d, out, a)
    return out.copy_to_host()


# P12: 2-D local array, keyword form, and math.pow
@cuda.jit
def p_local2d(u, out, a):
    i = cuda.grid(1)
    if i < u.shape[0]:
        m = cuda.local.array(shape=(2, 2), dtype=float64)
        m[0, 0] = u[i]
        m[0, 1] = a
        m[1, 0] = -a
        m[1, 1] = math.pow(u[i], 2.0)
        out[i] = m[0, 0] * m[1, 1] - m[0, 1] * m[1, 0]


def f_local2d(u, a):
    d = cuda.to_device(u)
    out = cuda.device_array_like(d)
    p_local2d[1, 8](d, out, a)
    return out.copy_to_host()


# P13: 2-D grid with explicit .x/.y indices and gridsize(2) stride loops
@cuda.jit
def p_explicit_2d(a, out, s):
    x0 = cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x
    y0 = cuda.threadIdx.y + cuda.blockIdx.y * cuda.blockDim.y
    sx, sy = cuda.gridsize(2)
    for y in range(y0, a.shape[0], sy):
        for x in range(x0, a.shape[1], sx):
            out[y, x] = s * math.sin(a[y, x]) + a[y, (x + 1) % a.shape[1]]


def f_explicit_2d(a, s):
    d = cuda.to_device(a)
    out = cuda.device_array_like(d)
    p_explicit_2d[(1, 1), (2, 2)](d, out, s)
    return out.copy_to_host()


# P14: constant memory coefficients
COEF = np.array([0.25, 0.5, 0.25])


@cuda.jit
def p_const(u, out, a):
    c = cuda.const.array_like(COEF)
    i = cuda.grid(1)
    n = u.shape[0]
    if i < n:
        out[i] = a * (c[0] * u[(i - 1) % n] + c[1] * u[i] + c[2] * u[(i + 1) % n])


def f_const(u, a):
    d = cuda.to_device(u)
    out = cuda.device_array_like(d)
    p_const[1, 8](d, out, a)
    return out.copy_to_host()


# P15: in-place augmented update of an array element, and u.size / len()
@cuda.jit
def p_inplace(u, a):
    i = cuda.grid(1)
    if i < u.size and i < len(u):
        u[i] *= a
        u[i] += a * a
        u[i] -= 0.5 * u[i]
        u[i] /= 1.0 + a


def f_inplace(u, a):
    d = cuda.to_device(u)
    p_inplace[1, 8](d, a)
    return d.copy_to_host()


# P16: copy_to_host into a preallocated host buffer; copy_to_device to reset
def f_copy_into(u, a):
    d = cuda.to_device(u)
    out = cuda.device_array_like(d)
    p_square[1, 8](d, out, a)
    host = np.empty_like(u)
    out.copy_to_host(host)
    return host


# P17: 3-D array kernel, cuda.grid(3)
@cuda.jit
def p_3d(a, out, s):
    x, y, z = cuda.grid(3)
    nz, ny, nx = a.shape
    if z < nz and y < ny and x < nx:
        out[z, y, x] = s * a[z, y, x] ** 3 - a[(z + 1) % nz, y, x]


def f_3d(a, s):
    d = cuda.to_device(a)
    out = cuda.device_array_like(d)
    p_3d[(1, 1, 1), (4, 4, 4)](d, out, s)
    return out.copy_to_host()


# P18: integer power with a negative literal and float exponent, math.hypot, math.atan2, fmod
@cuda.jit
def p_powers(u, out, a):
    i = cuda.grid(1)
    if i < u.shape[0]:
        r = u[i] + 1.0
        out[i] = r ** -6 + r ** 2.5 + a ** 2 * math.hypot(r, a) + math.atan2(r, a) + math.fmod(r * 7.0, 1.3)


def f_powers(u, a):
    d = cuda.to_device(u)
    out = cuda.device_array_like(d)
    p_powers[1, 8](d, out, a)
    return out.copy_to_host()


# P19: kernel.forall
def f_forall(u, a):
    d = cuda.to_device(u)
    out = cuda.device_array_like(d)
    p_square.forall(u.shape[0])(d, out, a)
    return out.copy_to_host()


# P20: streams
def f_stream(u, a):
    stream = cuda.stream()
    d = cuda.to_device(u, stream=stream)
    out = cuda.device_array_like(d, stream=stream)
    p_square[1, 8, stream](d, out, a)
    stream.synchronize()
    return out.copy_to_host(stream=stream)


# P21: float(...) / np.float64(...) of a value inside a kernel (users write float() casts)
@cuda.jit
def p_float_cast(u, out, a):
    i = cuda.grid(1)
    if i < u.shape[0]:
        out[i] = float(a) * u[i]


def f_float_cast(u, a):
    d = cuda.to_device(u)
    out = cuda.device_array_like(d)
    p_float_cast[1, 8](d, out, a)
    return out.copy_to_host()


# P22: device function called positionally with a tuple argument (vector as tuple)
@cuda.jit(device=True)
def dot3(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@cuda.jit
def p_tuple_arg(p, out, s):
    i = cuda.grid(1)
    if i < p.shape[0]:
        v = (p[i, 0], p[i, 1], p[i, 2])
        w = (s, 1.0, 2.0)
        out[i] = dot3(v, w)


def f_tuple_arg(p, s):
    d = cuda.to_device(p)
    out = cuda.device_array(p.shape[0], np.float64)
    p_tuple_arg[1, 8](d, out, s)
    return out.copy_to_host()


# P23: integer state array alongside floats (cell list); int scalar parameter
@cuda.jit
def p_int_array(u, idx, out, a, shift):
    i = cuda.grid(1)
    if i < u.shape[0]:
        out[i] = a * u[(idx[i] + shift) % u.shape[0]]


def f_int_array(u, a):
    idx = np.arange(u.shape[0], dtype=np.int32)[::-1].copy()
    d_idx = cuda.to_device(idx)
    d = cuda.to_device(u)
    out = cuda.device_array_like(d)
    p_int_array[1, 8](d, d_idx, out, a, 1)
    return out.copy_to_host()


# P24: np ufuncs with two args on scalars: np.maximum/np.minimum/np.clip-like, np.sqrt, np.abs
@cuda.jit
def p_np_ufuncs(u, out, a):
    i = cuda.grid(1)
    if i < u.shape[0]:
        v = u[i]
        out[i] = np.maximum(v, a) * np.sqrt(np.abs(v) + 1.0) + np.minimum(v * v, a) + np.power(v + 2.0, a)


def f_np_ufuncs(u, a):
    d = cuda.to_device(u)
    out = cuda.device_array_like(d)
    p_np_ufuncs[1, 8](d, out, a)
    return out.copy_to_host()
