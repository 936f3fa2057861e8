"""Whole simulations and their host code, written the way numba.cuda users write them.

Second round of the unseen-kernels exercise (the first is ``unseen_kernels.py``). Each
kernel was written against ``from numba import cuda`` and ported by the import line only.
What they bring: eager signatures (float64, float32, 2-D), configured kernels kept in
variables (``step = kernel[bpg, tpb]``), buffer swaps and three-buffer rotations in the Python
loop, streams, ``inline=True`` device functions returning tuples, module-level constants
(Python floats and ``np.float32``), int and bool arguments, 2-D and 3-D arrays, host-sliced
arrays (``d_u[1:-1]``, ``u[:, 0]``), ``arr.shape`` / ``arr.size``, numpy functions on scalars,
``math`` functions (erf, hypot, copysign, int powers, atan2, tanh, log1p, expm1, fabs), RK4
ensembles, ``cuda.atomic.add`` force accumulation, periodic boundaries with ``%`` and
velocity Verlet.
"""
import math

import numpy as np

from dualgpu import cuda  # was: from numba import cuda

TPB = 16
LEFT_WALL = 1.0                 # module-level constants captured by kernels
RIGHT_WALL = 0.0
FOUR32 = np.float32(4.0)
HALF32 = np.float32(0.5)
SOFTENING = 1e-2


# --- 1. 1-D heat, eager float64 signature, configured kernel kept in a variable ----------

@cuda.jit("void(float64[:], float64[:], float64)")
def heat_eager(u, u_new, r):
    i = cuda.grid(1)
    n = u.shape[0]
    if i == 0:
        u_new[i] = LEFT_WALL
    elif i == n - 1:
        u_new[i] = RIGHT_WALL
    elif i < n - 1:
        u_new[i] = u[i] + r * (u[i - 1] - 2.0 * u[i] + u[i + 1])


def simulate_heat_eager(u0, r, n_steps=6):
    n = u0.shape[0]
    bpg = (n + TPB - 1) // TPB
    d_u = cuda.to_device(u0)
    d_v = cuda.device_array_like(d_u)
    step = heat_eager[bpg, TPB]
    for _ in range(n_steps):
        step(d_u, d_v, r)
        d_u, d_v = d_v, d_u
    cuda.synchronize()
    return d_u.copy_to_host()


# --- 2. 2-D diffusion, eager float32 signature, np.float32 module constants ---------------

@cuda.jit("void(float32[:, :], float32[:, :], float32)")
def diffuse2d_f32(c, c_new, d):
    i, j = cuda.grid(2)
    ny, nx = c.shape
    if 0 < i < ny - 1 and 0 < j < nx - 1:
        lap = c[i - 1, j] + c[i + 1, j] + c[i, j - 1] + c[i, j + 1] - FOUR32 * c[i, j]
        c_new[i, j] = c[i, j] + d * lap
    elif i < ny and j < nx:
        c_new[i, j] = HALF32 * c[i, j]


def simulate_diffuse2d_f32(c0, d, n_steps=3):
    ny, nx = c0.shape
    tpb = (4, 4)
    bpg = ((ny + 3) // 4, (nx + 3) // 4)
    d_c = cuda.to_device(c0)
    d_n = cuda.device_array(c0.shape, np.float32)
    for _ in range(n_steps):
        diffuse2d_f32[bpg, tpb](d_c, d_n, d)
        d_c, d_n = d_n, d_c
    return d_c.copy_to_host()


# --- 3. 2-D wave equation, three buffers rotated on the host -----------------------------

@cuda.jit
def wave2d_step(u_prev, u, u_next, c2):
    i, j = cuda.grid(2)
    ny, nx = u.shape
    if i >= ny or j >= nx:
        return
    if i == 0 or j == 0 or i == ny - 1 or j == nx - 1:
        u_next[i, j] = 0.0
        return
    lap = u[i + 1, j] + u[i - 1, j] + u[i, j + 1] + u[i, j - 1] - 4.0 * u[i, j]
    u_next[i, j] = 2.0 * u[i, j] - u_prev[i, j] + c2 * lap


def simulate_wave2d(u0, c, n_steps=5, dt=0.1, dx=0.5):
    c2 = (c * dt / dx) ** 2
    ny, nx = u0.shape
    tpb = (8, 8)
    bpg = (math.ceil(ny / 8), math.ceil(nx / 8))
    u_prev = cuda.to_device(u0)
    u = cuda.to_device(u0)          # starts at rest: u(-dt) = u(0)
    u_next = cuda.device_array_like(u)
    for _ in range(n_steps):
        wave2d_step[bpg, tpb](u_prev, u, u_next, c2)
        u_prev, u, u_next = u, u_next, u_prev
    return u.copy_to_host()


# --- 4. SIR ensemble, RK4 through inline device functions returning tuples ---------------

@cuda.jit(device=True, inline=True)
def sir_rhs(s, i, beta, gamma):
    infection = beta * s * i
    return -infection, infection - gamma * i


@cuda.jit(device=True, inline=True)
def sir_rk4(s, i, beta, gamma, dt):
    k1s, k1i = sir_rhs(s, i, beta, gamma)
    k2s, k2i = sir_rhs(s + 0.5 * dt * k1s, i + 0.5 * dt * k1i, beta, gamma)
    k3s, k3i = sir_rhs(s + 0.5 * dt * k2s, i + 0.5 * dt * k2i, beta, gamma)
    k4s, k4i = sir_rhs(s + dt * k3s, i + dt * k3i, beta, gamma)
    return (s + dt / 6.0 * (k1s + 2.0 * k2s + 2.0 * k3s + k4s),
            i + dt / 6.0 * (k1i + 2.0 * k2i + 2.0 * k3i + k4i))


@cuda.jit
def sir_ensemble(s, i, beta, gamma, dt, n_steps, record_peak, peak):
    m = cuda.grid(1)
    if m >= s.size:
        return
    sm = s[m]
    im = i[m]
    top = im
    for _ in range(n_steps):
        sm, im = sir_rk4(sm, im, beta[m], gamma, dt)
        if record_peak and im > top:
            top = im
    s[m] = sm
    i[m] = im
    if record_peak:
        peak[m] = top


def simulate_sir(s0, i0, beta, gamma, dt=0.25, n_steps=12, record_peak=True):
    d_s = cuda.to_device(s0)
    d_i = cuda.to_device(i0)
    d_beta = cuda.to_device(beta)
    d_peak = cuda.device_array_like(d_i)
    sir_ensemble[1, 32](d_s, d_i, d_beta, gamma, dt, n_steps, record_peak, d_peak)
    cuda.synchronize()
    return d_s.copy_to_host(), d_i.copy_to_host(), d_peak.copy_to_host()


# --- 5. Lotka-Volterra ensemble in float32 ----------------------------------------------

DT32 = np.float32(0.05)


@cuda.jit(device=True)
def lv_rhs(x, y, a, b, c, d):
    return a * x - b * x * y, d * x * y - c * y


@cuda.jit
def lotka_volterra_f32(x, y, a, b, c, d, n_steps):
    m = cuda.grid(1)
    if m < x.shape[0]:
        xm = x[m]
        ym = y[m]
        for _ in range(n_steps):
            fx, fy = lv_rhs(xm, ym, a, b, c, d)
            # midpoint (RK2) step, every constant kept in float32
            xh = xm + HALF32 * DT32 * fx
            yh = ym + HALF32 * DT32 * fy
            gx, gy = lv_rhs(xh, yh, a, b, c, d)
            xm = np.float32(xm + DT32 * gx)
            ym = np.float32(ym + DT32 * gy)
        x[m] = xm
        y[m] = ym


def simulate_lotka_volterra(x0, y0, a, b, c=np.float32(1.0), d=np.float32(0.5), n_steps=10):
    d_x = cuda.to_device(x0)
    d_y = cuda.to_device(y0)
    lotka_volterra_f32[1, 32](d_x, d_y, a, b, c, d, n_steps)
    return d_x.copy_to_host(), d_y.copy_to_host()


# --- 6. Mass-spring chain: spring threads, atomic forces, velocity Verlet ----------------

@cuda.jit
def zero_forces(f):
    i = cuda.grid(1)
    if i < f.shape[0]:
        f[i, 0] = 0.0
        f[i, 1] = 0.0


@cuda.jit
def spring_forces(pos, f, k, rest):
    s = cuda.grid(1)               # spring s joins nodes s and s + 1
    if s >= pos.shape[0] - 1:
        return
    dx = pos[s + 1, 0] - pos[s, 0]
    dy = pos[s + 1, 1] - pos[s, 1]
    length = math.hypot(dx, dy)
    mag = k * (length - rest) / length
    cuda.atomic.add(f, (s, 0), mag * dx)
    cuda.atomic.add(f, (s, 1), mag * dy)
    cuda.atomic.add(f, (s + 1, 0), -mag * dx)
    cuda.atomic.add(f, (s + 1, 1), -mag * dy)


@cuda.jit
def verlet_half_kick(vel, f, mass, dt):
    i = cuda.grid(1)
    if i < vel.shape[0]:
        vel[i, 0] += 0.5 * dt * f[i, 0] / mass
        vel[i, 1] += 0.5 * dt * f[i, 1] / mass


@cuda.jit
def verlet_drift(pos, vel, dt):
    i = cuda.grid(1)
    if i < pos.shape[0]:
        pos[i, 0] += dt * vel[i, 0]
        pos[i, 1] += dt * vel[i, 1]


def simulate_springs(pos0, vel0, k, mass=1.0, rest=1.0, dt=0.05, n_steps=4):
    n = pos0.shape[0]
    bpg = (n + TPB - 1) // TPB
    d_pos = cuda.to_device(pos0)
    d_vel = cuda.to_device(vel0)
    d_f = cuda.device_array((n, 2), dtype=np.float64)

    def forces():
        zero_forces[bpg, TPB](d_f)
        spring_forces[bpg, TPB](d_pos, d_f, k, rest)

    forces()
    for _ in range(n_steps):
        verlet_half_kick[bpg, TPB](d_vel, d_f, mass, dt)
        verlet_drift[bpg, TPB](d_pos, d_vel, dt)
        forces()
        verlet_half_kick[bpg, TPB](d_vel, d_f, mass, dt)
    return d_pos.copy_to_host(), d_vel.copy_to_host()


# --- 7. N-body, one thread per pair on a 2-D grid, atomics into a 2-D array ---------------

@cuda.jit
def pair_accelerations(pos, mass, acc, g):
    i, j = cuda.grid(2)
    n = pos.shape[0]
    if i >= n or j >= n or i == j:
        return
    dx = pos[j, 0] - pos[i, 0]
    dy = pos[j, 1] - pos[i, 1]
    r2 = dx * dx + dy * dy + SOFTENING
    inv_r3 = r2 ** -1.5
    s = g * mass[j] * inv_r3
    cuda.atomic.add(acc, (i, 0), s * dx)
    cuda.atomic.add(acc, (i, 1), s * dy)


@cuda.jit
def kick_drift(pos, vel, acc, dt):
    i = cuda.grid(1)
    if i < pos.shape[0]:
        for d in range(2):
            vel[i, d] += dt * acc[i, d]
            pos[i, d] += dt * vel[i, d]
            acc[i, d] = 0.0


def simulate_nbody_pairs(pos0, vel0, mass, g=1.0, dt=0.01, n_steps=3):
    n = pos0.shape[0]
    d_pos = cuda.to_device(pos0)
    d_vel = cuda.to_device(vel0)
    d_mass = cuda.to_device(mass)
    d_acc = cuda.to_device(np.zeros((n, 2)))
    for _ in range(n_steps):
        pair_accelerations[(1, 1), (8, 8)](d_pos, d_mass, d_acc, g)
        kick_drift[1, 8](d_pos, d_vel, d_acc, dt)
    cuda.synchronize()
    return d_pos.copy_to_host()


# --- 8. Gray-Scott reaction-diffusion, periodic with %, two species ----------------------

@cuda.jit
def gray_scott(u, v, u_new, v_new, du, dv, feed, kill, dt):
    x, y = cuda.grid(2)
    nx = u.shape[0]
    ny = u.shape[1]
    if x < nx and y < ny:
        xp = (x + 1) % nx
        xm = (x - 1 + nx) % nx
        yp = (y + 1) % ny
        ym = (y - 1 + ny) % ny
        uc = u[x, y]
        vc = v[x, y]
        lap_u = u[xp, y] + u[xm, y] + u[x, yp] + u[x, ym] - 4 * uc
        lap_v = v[xp, y] + v[xm, y] + v[x, yp] + v[x, ym] - 4 * vc
        uvv = uc * vc * vc
        u_new[x, y] = uc + dt * (du * lap_u - uvv + feed * (1 - uc))
        v_new[x, y] = vc + dt * (dv * lap_v + uvv - (feed + kill) * vc)


def simulate_gray_scott(u0, v0, feed, kill, du=0.16, dv=0.08, dt=1.0, n_steps=4):
    shape = u0.shape
    tpb = (4, 4)
    bpg = ((shape[0] + 3) // 4, (shape[1] + 3) // 4)
    u, v = cuda.to_device(u0), cuda.to_device(v0)
    u2, v2 = cuda.device_array_like(u), cuda.device_array_like(v)
    for _ in range(n_steps):
        gray_scott[bpg, tpb](u, v, u2, v2, du, dv, feed, kill, dt)
        u, u2 = u2, u
        v, v2 = v2, v
    return u.copy_to_host(), v.copy_to_host()


# --- 9. A nonlinear material law: many math functions -----------------------------------

@cuda.jit
def material_law(strain, rate, stress, e_mod, eta):
    i = cuda.grid(1)
    if i < strain.shape[0]:
        e = strain[i]
        r = rate[i]
        elastic = e_mod * math.tanh(e) + 0.1 * math.erf(2.0 * e)
        viscous = eta * math.copysign(math.log1p(math.fabs(r)), r)
        angle = math.atan2(r, 1.0 + e * e)
        soft = math.expm1(-math.hypot(e, r)) + pow(e, 3) - e ** 2
        stress[i] = elastic + viscous + 0.05 * angle + 0.01 * soft


def simulate_material(strain, rate, e_mod, eta):
    out = cuda.device_array(strain.shape[0])
    material_law[1, 32](cuda.to_device(strain), cuda.to_device(rate), out, e_mod, eta)
    return out.copy_to_host()


def material_reference(strain, rate, e_mod, eta):
    from scipy.special import erf
    e, r = strain, rate
    return (e_mod * np.tanh(e) + 0.1 * erf(2 * e) + eta * np.copysign(np.log1p(np.abs(r)), r)
            + 0.05 * np.arctan2(r, 1 + e * e) + 0.01 * (np.expm1(-np.hypot(e, r)) + e ** 3 - e ** 2))


# --- 10. Kernels on host-sliced arrays: interior views and a column ---------------------

@cuda.jit
def smooth_interior(u_in, u_out, w):
    i = cuda.grid(1)
    if i < u_out.size:          # u_out is the interior view, u_in the whole array
        u_out[i] = w * u_in[i] + (1.0 - 2.0 * w) * u_in[i + 1] + w * u_in[i + 2]


@cuda.jit
def scale_column(col, out, s):
    i = cuda.grid(1)
    if i < col.shape[0]:
        out[i] = s * col[i] * col[i]


def simulate_sliced(u0, w, n_steps=3):
    d_u = cuda.to_device(u0)
    d_v = cuda.to_device(u0)
    n = u0.shape[0]
    for _ in range(n_steps):
        smooth_interior[1, 32](d_u, d_v[1:-1], w)   # boundaries stay put
        d_u, d_v = d_v, d_u
    return d_u.copy_to_host()


def simulate_column(a, s):
    d_a = cuda.to_device(a)
    out = cuda.device_array(a.shape[0])
    scale_column[1, 32](d_a[:, 1], out, s)          # a strided column of a device array
    return out.copy_to_host()


def simulate_host_column(a, s):
    out = np.zeros(a.shape[0])
    scale_column[1, 32](a[:, 2], out, s)            # host arrays, a strided column
    return out


# --- 11. numpy functions, arr.size and np.float32 inside a float64 kernel ----------------

@cuda.jit
def damped_update(x, v, out, gamma, dt):
    i = cuda.grid(1)
    if i < x.size:
        speed = np.abs(v[i])
        decay = np.exp(-gamma * dt * np.sqrt(1.0 + speed))
        out[i] = x[i] + dt * v[i] * decay + np.float32(0.25) * np.maximum(x[i], 0.0) * dt


def simulate_damped(x0, v0, gamma, dt=0.1, n_steps=3):
    d_x = cuda.to_device(x0)
    d_v = cuda.to_device(v0)
    d_o = cuda.device_array_like(d_x)
    for _ in range(n_steps):
        damped_update[1, 32](d_x, d_v, d_o, gamma, dt)
        d_x, d_o = d_o, d_x
    return d_x.copy_to_host()


# --- 12. 3-D heat, cuda.grid(3), 7-point stencil ----------------------------------------

@cuda.jit
def heat3d(u, u_new, r):
    i, j, k = cuda.grid(3)
    a, b, c = u.shape
    if 0 < i < a - 1 and 0 < j < b - 1 and 0 < k < c - 1:
        u_new[i, j, k] = u[i, j, k] + r * (
            u[i - 1, j, k] + u[i + 1, j, k] + u[i, j - 1, k] + u[i, j + 1, k]
            + u[i, j, k - 1] + u[i, j, k + 1] - 6.0 * u[i, j, k])
    elif i < a and j < b and k < c:
        u_new[i, j, k] = u[i, j, k]


def simulate_heat3d(u0, r, n_steps=2):
    d_u = cuda.to_device(u0)
    d_v = cuda.device_array_like(d_u)
    for _ in range(n_steps):
        heat3d[(1, 2, 1), (4, 4, 4)](d_u, d_v, r)
        d_u, d_v = d_v, d_u
    return d_u.copy_to_host()


# --- 13. Upwind advection with an int shift and a bool flag; stream launches -------------

@cuda.jit
def advect(u, u_new, courant, direction, periodic):
    i = cuda.grid(1)
    n = u.shape[0]
    if i >= n:
        return
    j = i - direction
    if periodic:
        j = j % n
    elif j < 0 or j >= n:
        u_new[i] = u[i]
        return
    u_new[i] = u[i] - courant * direction * (u[i] - u[j])


def simulate_advect_stream(u0, courant, direction=1, periodic=True, n_steps=4):
    stream = cuda.stream()
    d_u = cuda.to_device(u0, stream=stream)
    d_v = cuda.device_array_like(d_u, stream=stream)
    launch = advect[(u0.size + TPB - 1) // TPB, TPB, stream]
    for _ in range(n_steps):
        launch(d_u, d_v, courant, direction, periodic)
        d_u, d_v = d_v, d_u
    stream.synchronize()
    out = np.empty_like(u0)
    d_u.copy_to_host(out, stream=stream)
    return out


# --- 14. A trajectory recorded on the host, step by step --------------------------------

@cuda.jit
def logistic_step(x, r):
    i = cuda.grid(1)
    if i < x.shape[0]:
        x[i] = r * x[i] * (1.0 - x[i])


def simulate_trajectory_list(x0, r, n_steps=4):
    d_x = cuda.to_device(x0)
    frames = [x0]
    for _ in range(n_steps):
        logistic_step[1, 32](d_x, r)
        frames.append(d_x.copy_to_host())
    return np.stack(frames)


def simulate_trajectory_preallocated(x0, r, n_steps=4):
    d_x = cuda.to_device(x0)
    traj = np.zeros((n_steps + 1, x0.shape[0]))
    traj[0] = x0
    for t in range(n_steps):
        logistic_step[1, 32](d_x, r)
        traj[t + 1] = d_x.copy_to_host()
    return traj
