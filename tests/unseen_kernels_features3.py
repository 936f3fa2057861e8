"""numba.cuda language features, as users write them, ported by the import line only.

Third round of the unseen-kernels exercise (``unseen_kernels.py``, ``unseen_kernels_blocks2.py``
and ``unseen_kernels_sims2.py`` came first). Each kernel and its host code were written against
``from numba import cuda``; what this round brings is breadth of the language rather than
physics: math functions (atan2, hypot, copysign, fmod, erf/erfc, log1p/expm1, powers with
int variables, float and dual exponents, floor/ceil/int/round as indices, isnan/isinf/
isfinite on duals, min/max chains), control flow (while loops whose condition is a dual,
break/continue, several bare returns, device functions with keyword and default arguments,
nested tuples, arrays and slices as arguments), arrays (strided, transposed and Fortran-order
inputs, int32 gather/scatter, boolean masks, 2-D constant tables, ``len``/``shape`` loops,
``cuda.gridsize``, ``cuda.laneid``/``cuda.warpsize``, ``cuda.threadfence``, 3-D views), launch
forms (tuples, streams, dynamic shared memory 0, ``forall``, events, pinned host buffers,
``copy_to_host(stream=...)``), ``cuda.vectorize``, float32/float64 mixes with integer
arrays read as floats, and ``math.remainder``/``math.modf``.

Two things numba.cuda itself refuses and users therefore do not write were rewritten
the way users write them: non-contiguous *host* views at a launch (``Array contains
non-contiguous buffer``: device views instead), and ``table[math.ceil(s)]`` (a float on
CUDA: ``int(math.ceil(s))``).
"""
import math

import numpy as np

from dualgpu import cuda  # was: from numba import cuda

TPB = 8
TWO_PI = 2.0 * math.pi
CUTOFF = 1.2                                     # module-level float constants
DRAG32 = np.float32(0.25)
# a module-level table read through constant memory (1-D and 2-D)
SPEED_TABLE = np.array([0.0, 0.4, 1.1, 1.5, 2.6, 3.0, 3.9, 5.2, 6.0])
SMOOTH_3X3 = np.array([[0.05, 0.1, 0.05], [0.1, 0.4, 0.1], [0.05, 0.1, 0.05]])


def _blocks(n, tpb=TPB):
    return (n + tpb - 1) // tpb


# --- 1. polar rotation: atan2, hypot, fmod, copysign -------------------------------------

@cuda.jit
def polar_swirl(x, y, omega, dt):
    i = cuda.grid(1)
    if i < x.shape[0]:
        r = math.hypot(x[i], y[i])
        theta = math.atan2(y[i], x[i])
        theta = math.fmod(theta + omega * dt / (1.0 + r * r), TWO_PI)
        # a sign-preserving radial squeeze
        r = r - 0.1 * dt * math.copysign(r * r, x[i] * y[i])
        x[i] = r * math.cos(theta)
        y[i] = r * math.sin(theta)


def simulate_swirl(x0, y0, omega, n_steps=3, dt=0.2):
    d_x = cuda.to_device(x0)
    d_y = cuda.to_device(y0)
    for _ in range(n_steps):
        polar_swirl[_blocks(x0.size), TPB](d_x, d_y, omega, dt)
    return d_x.copy_to_host(), d_y.copy_to_host()


# --- 2. special functions: erf, erfc, log1p, expm1 ---------------------------------------

@cuda.jit
def soft_response(u, out, a):
    i = cuda.grid(1)
    if i < u.shape[0]:
        x = u[i]
        cdf = 0.5 * math.erfc(-x / math.sqrt(2.0))
        softplus = math.log1p(math.exp(a * x))
        out[i] = cdf * softplus + math.erf(a * x) - math.expm1(-x * x)


def simulate_soft(u, a):
    out = cuda.device_array(u.shape[0])
    soft_response[_blocks(u.size), TPB](cuda.to_device(u), out, a)
    return out.copy_to_host()


# --- 3. powers: int variables, float literals, dual exponents ----------------------------

@cuda.jit
def power_mix(u, out, p, n):
    i = cuda.grid(1)
    if i < u.shape[0]:
        x = u[i]
        out[i] = (x ** 2 + x ** 0.5 + x ** n + math.pow(x, 3) + math.pow(x, 2.5)
                  + x ** (-n) + 2.0 ** x + x ** p + p ** x)


def simulate_powers(u, p, n=3):
    out = cuda.device_array_like(u)
    power_mix[_blocks(u.size), TPB](cuda.to_device(u), out, p, n)
    return out.copy_to_host()


# --- 4. polynomial by x ** k with the loop's int: len() and an int exponent ---------------

@cuda.jit
def polynomial(u, coeffs, out):
    i = cuda.grid(1)
    if i < len(u):
        acc = 0.0
        for k in range(len(coeffs)):
            acc += coeffs[k] * u[i] ** k
        out[i] = acc


def simulate_polynomial(u, coeffs):
    out = cuda.device_array(len(u))
    polynomial[_blocks(len(u)), TPB](u, coeffs, out)
    return out.copy_to_host()


# --- 5. flux limiter: min/max chains and abs ---------------------------------------------

@cuda.jit
def limited_advection(u, u_new, c):
    i = cuda.grid(1)
    n = u.shape[0]
    if i >= n:
        return
    if i < 2 or i > n - 2:
        u_new[i] = u[i]
        return
    du_up = u[i - 1] - u[i - 2]
    du = u[i] - u[i - 1]
    denom = du if abs(du) > 1e-12 else 1e-12
    r = du_up / denom
    phi = max(0.0, min(2.0 * r, 1.0), min(r, 2.0))        # superbee
    du_next = u[i + 1] - u[i]
    dn = du_next if abs(du_next) > 1e-12 else 1e-12
    phi_next = max(0.0, min(2.0 * du / dn, 1.0), min(du / dn, 2.0))
    flux_in = u[i - 1] + 0.5 * (1.0 - c) * phi * du
    flux_out = u[i] + 0.5 * (1.0 - c) * phi_next * du_next
    u_new[i] = u[i] - c * (flux_out - flux_in)


def simulate_limited(u0, c, n_steps=3):
    a = cuda.to_device(u0)
    b = cuda.device_array_like(a)
    for _ in range(n_steps):
        limited_advection[_blocks(u0.size), TPB](a, b, c)
        a, b = b, a
    return a.copy_to_host()


# --- 6. non-finite guards: isinf / isnan / isfinite on duals -----------------------------

@cuda.jit
def guarded_growth(u, out, rate, cap):
    i = cuda.grid(1)
    if i < u.shape[0]:
        y = u[i] * rate
        for _ in range(4):
            y = y * y * 1e100            # overflows to inf for the large cells
        if math.isinf(y):
            y = math.copysign(cap, y)
        z = y - y                       # nan where y stayed inf
        if math.isnan(z) or not math.isfinite(y):
            out[i] = -cap
        else:
            out[i] = y + z + u[i] * rate


def simulate_guarded(u, rate, cap):
    out = cuda.device_array(u.shape)
    guarded_growth[_blocks(u.size), TPB](u, out, rate, cap)
    return out.copy_to_host()


# --- 7. table interpolation: floor / ceil / int / round as indices ----------------------

@cuda.jit
def table_lookup(u, out, scale):
    i = cuda.grid(1)
    if i >= u.shape[0]:
        return
    table = cuda.const.array_like(SPEED_TABLE)
    n = table.shape[0]
    s = u[i] * scale
    j = int(math.floor(s))
    j = min(max(j, 0), n - 2)
    w = s - j
    lin = (1.0 - w) * table[j] + w * table[j + 1]
    up = table[min(int(math.ceil(s)), n - 1)]         # math.ceil is a float on CUDA
    near = table[min(round(s), n - 1)]
    out[i] = lin + 0.1 * up * s + 0.01 * near + round(s, 1) + int(s) * 0.001


def simulate_lookup(u, scale):
    out = cuda.device_array(u.shape[0])
    table_lookup[_blocks(u.size), TPB](cuda.to_device(u), out, scale)
    return out.copy_to_host()


# --- 8. Newton iteration: a while loop whose condition is a dual -------------------------

@cuda.jit(device=True)
def cubic_root(rhs, a):
    y = rhs
    f = y * y * y + a * y - rhs
    it = 0
    while abs(f) > 1e-13 and it < 60:
        y = y - f / (3.0 * y * y + a)
        f = y * y * y + a * y - rhs
        it += 1
    return y


@cuda.jit
def implicit_cubic(u, out, a):
    i = cuda.grid(1)
    if i < u.shape[0]:
        out[i] = cubic_root(u[i], a)


def simulate_cubic(u, a):
    out = cuda.device_array(u.shape[0])
    implicit_cubic[_blocks(u.size), TPB](cuda.to_device(u), out, a)
    return out.copy_to_host()


# --- 9. adaptive stepping: the loop bound t_end is a dual ---------------------------------

@cuda.jit
def decay_until(y0, out, k, t_end):
    i = cuda.grid(1)
    if i >= y0.shape[0]:
        return
    y = y0[i]
    t = 0.0
    dt = 0.07
    while t < t_end:
        h = min(dt, t_end - t)
        y = y + h * (-k * y + 0.1 * math.sin(t))   # forward Euler
        t += h
    out[i] = y


def simulate_decay(y0, k, t_end):
    out = cuda.device_array(y0.shape[0])
    decay_until[_blocks(y0.size), TPB](cuda.to_device(y0), out, k, t_end)
    return out.copy_to_host()


# --- 10. neighbour sums with break / continue --------------------------------------------

@cuda.jit
def first_neighbours(x, out, width):
    i = cuda.grid(1)
    n = x.shape[0]
    if i >= n:
        return
    acc = 0.0
    count = 0
    for j in range(n):
        if j == i:
            continue
        d = x[j] - x[i]
        if abs(d) > CUTOFF:
            continue
        acc += math.exp(-d * d / width)
        count += 1
        if count >= 3:
            break
    out[i] = acc / max(count, 1)


def simulate_neighbours(x, width):
    out = cuda.device_array(x.shape[0])
    first_neighbours[_blocks(x.size), TPB](cuda.to_device(x), out, width)
    return out.copy_to_host()


# --- 11. device functions: defaults, keywords, nested tuples ------------------------------

@cuda.jit(device=True)
def ideal_pressure(rho, e, gamma=1.4):
    return (gamma - 1.0) * rho * e


@cuda.jit(device=True)
def primitive(state, gamma=1.4):
    rho, mom, energy = state
    v = mom / rho
    e = energy / rho - 0.5 * v * v
    return (rho, v), ideal_pressure(rho, e, gamma=gamma)


@cuda.jit
def euler_pressures(q, out, gamma):
    i = cuda.grid(1)
    if i < q.shape[0]:
        (rho, v), p = primitive((q[i, 0], q[i, 1], q[i, 2]), gamma=gamma)
        (_, _), p_air = primitive((q[i, 0], q[i, 1], q[i, 2]))
        p_kw = ideal_pressure(e=p / rho, rho=rho)
        out[i, 0] = p
        out[i, 1] = p_air + rho * v * v
        out[i, 2] = p_kw


def simulate_euler(q, gamma):
    out = cuda.device_array(q.shape)
    euler_pressures[_blocks(q.shape[0]), TPB](cuda.to_device(q), out, gamma)
    return out.copy_to_host()


# --- 12. device functions taking arrays, rows and slices ----------------------------------

@cuda.jit(device=True)
def weighted(segment, weights):
    acc = 0.0
    for k in range(weights.shape[0]):
        acc += weights[k] * segment[k]
    return acc


@cuda.jit(device=True)
def row_energy(row):
    acc = 0.0
    for v in row:
        acc += v * v
    return 0.5 * acc


@cuda.jit
def slice_stencil(u, a, weights, out):
    i = cuda.grid(1)
    n = u.shape[0]
    if 0 < i < n - 1:
        out[i] = weighted(u[i - 1:i + 2], weights) + row_energy(a[i]) - row_energy(a[i, 1:])
    elif i < n:
        out[i] = u[i]


def simulate_slice_stencil(u, a, weights):
    out = cuda.device_array(u.shape[0])
    slice_stencil[_blocks(u.size), TPB](cuda.to_device(u), cuda.to_device(a),
                                        cuda.to_device(weights), out)
    return out.copy_to_host()


# --- 13. strided, reversed and interior views passed to kernels ---------------------------

@cuda.jit
def axpy(x, y, out, a):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = a * x[i] + y[i]


def simulate_views(u, a):
    """Even and odd cells, and the interior of u: views of a device array.

    (numba.cuda refuses non-contiguous *host* views at a launch: "Array contains
    non-contiguous buffer"; device views are how users pass them.)
    """
    d_u = cuda.to_device(u)
    half = u.shape[0] // 2
    first = cuda.device_array(half)
    axpy[1, TPB](d_u[::2], d_u[1::2], first, a)
    second = cuda.device_array(u.shape[0] - 2)
    axpy[1, TPB](d_u[1:-1], d_u[:-2], second, a)
    return first.copy_to_host(), second.copy_to_host()


# --- 14. transposed and Fortran-order 2-D arrays -----------------------------------------

@cuda.jit
def mix_2d(a, b, c, out, s):
    i, j = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = s * a[i, j] * b[i, j] + a[i, j] - c[i, j] ** 2


def simulate_transposed(a, b, s):
    """a.T from the host, a Fortran-order copy of b, and the transpose of a device array.

    (On a GPU ``d.T`` is a transposed *copy*, made by a kernel: fine to read, and writes
    into it would be lost; numba's simulator makes it a view.)
    """
    at = cuda.to_device(a.T)                          # Fortran-contiguous on the device too
    bf = cuda.to_device(np.copy(b, order="F"))        # np.asfortranarray(b) for plain arrays
    ct = cuda.to_device(a).T
    out = cuda.device_array(b.shape)
    ny, nx = b.shape
    mix_2d[(_blocks(ny, 4), _blocks(nx, 4)), (4, 4)](at, bf, ct, out, s)
    return out.copy_to_host()


# --- 15. gather and scatter through int32 index arrays -----------------------------------

@cuda.jit
def permute_scale(u, perm, out, a):
    i = cuda.grid(1)
    if i < perm.shape[0]:
        j = perm[i]
        out[j] = a * u[perm[(i + 1) % perm.shape[0]]] + u[i]


def simulate_permute(u, a, perm):
    out = cuda.device_array(u.shape[0])
    permute_scale[_blocks(u.size), TPB](cuda.to_device(u), cuda.to_device(perm), out, a)
    return out.copy_to_host()


# --- 16. a boolean mask and an int array read as floats -----------------------------------

@cuda.jit
def masked_relax(u, mask, counts, u_new, w):
    i = cuda.grid(1)
    n = u.shape[0]
    if i >= n:
        return
    if mask[i] and 0 < i < n - 1:
        u_new[i] = (1.0 - w) * u[i] + 0.5 * w * (u[i - 1] + u[i + 1]) / counts[i]
    else:
        u_new[i] = u[i] * float(counts[i]) / 2


def simulate_masked(u0, w, mask, counts, n_steps=3):
    a = cuda.to_device(u0)
    b = cuda.device_array_like(a)
    d_mask = cuda.to_device(mask)
    for _ in range(n_steps):
        masked_relax[_blocks(u0.size), TPB](a, d_mask, counts, b, w)
        a, b = b, a
    return a.copy_to_host()


# --- 17. a 2-D constant table: 3x3 smoothing --------------------------------------------

@cuda.jit
def smooth_const_2d(u, out, strength):
    i, j = cuda.grid(2)
    ny, nx = u.shape
    if i >= ny or j >= nx:
        return
    weights = cuda.const.array_like(SMOOTH_3X3)
    acc = 0.0
    for di in range(3):
        for dj in range(3):
            ii = min(max(i + di - 1, 0), ny - 1)
            jj = min(max(j + dj - 1, 0), nx - 1)
            acc += weights[di, dj] * u[ii, jj]
    out[i, j] = (1.0 - strength) * u[i, j] + strength * acc


def simulate_smooth(u0, strength, n_steps=2):
    a = cuda.to_device(u0)
    b = cuda.device_array(u0.shape)
    grid = (_blocks(u0.shape[0], 4), _blocks(u0.shape[1], 4))
    for _ in range(n_steps):
        smooth_const_2d[grid, (4, 4)](a, b, strength)
        a, b = b, a
    return a.copy_to_host()


# --- 18. moments with shape loops over a 2-D array ---------------------------------------

@cuda.jit
def row_moments(a, out, p):
    i = cuda.grid(1)
    if i >= a.shape[0]:
        return
    mean = 0.0
    for j in range(a.shape[1]):
        mean += a[i, j]
    mean /= a.shape[1]
    var = 0.0
    for j in range(a.shape[1]):
        var += (a[i, j] - mean) ** 2
    out[i, 0] = mean
    out[i, 1] = (var / (a.shape[1] - 1)) ** p


def simulate_moments(a, p):
    out = cuda.device_array((a.shape[0], 2))
    row_moments[_blocks(a.shape[0]), TPB](cuda.to_device(a), out, p)
    return out.copy_to_host()


# --- 19. grid-stride loop with cuda.gridsize, tuple launch configuration -----------------

@cuda.jit
def grid_stride_damp(u, out, gamma):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, u.shape[0], stride):
        out[i] = u[i] * math.exp(-gamma * i / u.shape[0])


def simulate_grid_stride(u, gamma):
    out = cuda.device_array_like(u)
    grid_stride_damp[(2,), (3,)](cuda.to_device(u), out, gamma)   # 6 threads, more cells
    return out.copy_to_host()


# --- 20. laneid / warpsize / threadfence -------------------------------------------------

@cuda.jit
def lane_weights(u, out, a):
    i = cuda.grid(1)
    if i >= u.shape[0]:
        return
    lane = cuda.laneid
    warp = i // cuda.warpsize
    out[i] = a * u[i] * (1.0 + 0.1 * lane) + warp
    cuda.threadfence()
    if lane == 0:
        out[i] = out[i] + 1.0


def simulate_lanes(u, a):
    out = cuda.device_array(u.shape[0])
    lane_weights[_blocks(u.size, 32), 32](cuda.to_device(u), out, a)
    return out.copy_to_host()


# --- 21. several bare returns -------------------------------------------------------------

@cuda.jit
def piecewise_source(u, out, k):
    i = cuda.grid(1)
    if i >= u.shape[0]:
        return
    x = u[i]
    if x < 0.2:
        out[i] = k * x
        return
    if x > 0.8:
        out[i] = k * 0.8 + (x - 0.8) ** 2
        return
    if i % 3 == 0:
        return                                         # leaves out[i] as it was
    out[i] = k * x + math.sin(k * x)


def simulate_piecewise(u, k):
    out = cuda.to_device(0.5 * u)                       # cells that return early keep 0.5 u
    piecewise_source[_blocks(u.size), TPB](cuda.to_device(u), out, k)
    return out.copy_to_host()


# --- 22. launch forms: streams, dynamic shared memory 0, forall, synchronize -------------

@cuda.jit
def heat_step(u, u_new, r):
    i = cuda.grid(1)
    n = u.shape[0]
    if 0 < i < n - 1:
        u_new[i] = u[i] + r * (u[i - 1] - 2.0 * u[i] + u[i + 1])
    elif i < n:
        u_new[i] = u[i]


def simulate_streamed(u0, r, n_steps=4):
    stream = cuda.stream()
    d_u = cuda.to_device(u0, stream=stream)
    d_v = cuda.device_array(u0.shape, dtype=u0.dtype, stream=stream)
    for step in range(n_steps):
        if step % 2 == 0:
            heat_step[_blocks(u0.size), TPB, stream, 0](d_u, d_v, r)
        else:
            heat_step.forall(u0.size, stream=stream)(d_u, d_v, r)
        d_u, d_v = d_v, d_u
    stream.synchronize()
    cuda.synchronize()
    return d_u.copy_to_host(stream=stream)


# --- 23. events and pinned host buffers --------------------------------------------------

def simulate_timed_pinned(u0, r, n_steps=3):
    stream = cuda.stream()
    start, stop = cuda.event(), cuda.event()
    staging = cuda.pinned_array(u0.shape, dtype=u0.dtype)
    staging[:] = u0
    start.record(stream)
    d_u = cuda.to_device(staging, stream=stream)
    d_v = cuda.device_array_like(d_u, stream=stream)
    for _ in range(n_steps):
        heat_step[_blocks(u0.size), TPB, stream](d_u, d_v, r)
        d_u, d_v = d_v, d_u
    stop.record(stream)
    stop.synchronize()
    cuda.event_elapsed_time(start, stop)     # timing is printed by users, not used
    result = cuda.pinned_array_like(staging)
    d_u.copy_to_host(result, stream=stream)
    stream.synchronize()
    return result


def simulate_pinned_context(u0, r):
    out = np.zeros_like(u0)
    with cuda.pinned(u0, out), cuda.defer_cleanup():
        d_u = cuda.to_device(u0)
        d_v = cuda.device_array_like(d_u)
        heat_step[_blocks(u0.size), TPB](d_u, d_v, r)
        d_v.copy_to_host(out)
    return out


# --- 24. cuda.vectorize ------------------------------------------------------------------

@cuda.vectorize(["float64(float64, float64)", "float32(float32, float32)"])
def logistic(x, k):
    return 1.0 / (1.0 + math.exp(-k * x))


def simulate_vectorized(u, k):
    return logistic(u, k)


# --- 25. float32 arrays with float64 literals and np.float32 casts -----------------------

@cuda.jit
def drag_f32(v, v_new, dt):
    i = cuda.grid(1)
    if i < v.shape[0]:
        speed = abs(v[i])
        drag = DRAG32 * speed * v[i]                  # float32 throughout
        v_new[i] = np.float32(v[i] - dt * drag) + np.float32(0.5) * dt * 1e-3 * v[i]


def simulate_drag_f32(v0, dt, n_steps=4):
    a = cuda.to_device(v0)
    b = cuda.device_array(v0.shape, np.float32)
    for _ in range(n_steps):
        drag_f32[_blocks(v0.size), TPB](a, b, dt)
        a, b = b, a
    return a.copy_to_host()


# --- 26. float32 state, float64 accumulation, int32 counts -------------------------------

@cuda.jit
def mean_field_f32(u, counts, out, coupling):
    i = cuda.grid(1)
    n = u.shape[0]
    if i >= n:
        return
    acc = 0.0                                         # a float64 accumulator
    for j in range(n):
        acc += u[j] * counts[j]
    mean = acc / n
    out[i] = u[i] + coupling * (mean - u[i]) / (1 + counts[i])


def simulate_mean_field_f32(u0, coupling, counts, n_steps=2):
    a = cuda.to_device(u0)
    b = cuda.device_array_like(a)
    for _ in range(n_steps):
        mean_field_f32[_blocks(u0.size), TPB](a, counts, b, coupling)
        a, b = b, a
    return a.copy_to_host()


# --- 27. 3-D grid over a non-contiguous 3-D view ---------------------------------------

@cuda.jit
def decay_3d(u, out, k):
    i, j, m = cuda.grid(3)
    nz, ny, nx = u.shape
    if i < nz and j < ny and m < nx:
        neighbours = 0.0
        if m > 0:
            neighbours += u[i, j, m - 1]
        if m < nx - 1:
            neighbours += u[i, j, m + 1]
        out[i, j, m] = u[i, j, m] * math.exp(-k) + 0.1 * k * neighbours


def simulate_decay_3d(u, k):
    view = cuda.to_device(u)[:, ::2, :]               # every other row: not contiguous
    out = cuda.device_array(view.shape)
    decay_3d[(1, 1, 1), (view.shape[0], view.shape[1], view.shape[2])](view, out, k)
    return out.copy_to_host()


# --- 28. comparisons stored as bools and signs -------------------------------------------

@cuda.jit
def upwind_flags(u, flags, out, c):
    i = cuda.grid(1)
    n = u.shape[0]
    if i >= n:
        return
    left = u[(i - 1) % n]
    right = u[(i + 1) % n]
    flags[i] = u[i] > 0.0
    sign = 1 if u[i] > 0.0 else -1
    upwind = left if sign > 0 else right
    out[i] = u[i] - c * sign * (u[i] - upwind)


def simulate_flags(u, c):
    flags = np.zeros(u.shape[0], np.bool_)
    out = cuda.device_array(u.shape[0])
    upwind_flags[_blocks(u.size), TPB](cuda.to_device(u), flags, out, c)
    return out.copy_to_host(), flags.astype(np.float64)


# --- 29. math.remainder and math.modf of plain numbers (int degrees), remainder of a dual

@cuda.jit
def wrapped_phase(degrees, out, amp):
    i = cuda.grid(1)
    if i < degrees.shape[0]:
        centred = math.remainder(degrees[i] * math.pi / 180.0, TWO_PI)   # in [-pi, pi]
        frac, turns = math.modf(degrees[i] / 360.0)
        out[i] = (amp * math.sin(centred) + turns + 0.5 * frac * amp * amp
                  + 0.1 * math.remainder(amp * 7.0 + i, 2.0))            # of a dual too


def simulate_wrapped_phase(degrees, amp):
    out = cuda.device_array(degrees.shape[0])
    wrapped_phase[_blocks(degrees.size), TPB](cuda.to_device(degrees), out, amp)
    return out.copy_to_host()
