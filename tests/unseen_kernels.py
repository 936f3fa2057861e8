"""Physics kernels written the way numba.cuda users write them, ported with one line.

None of these are copies of ``simulations/``: they exercise constructs a user brings
(upwind branches on the sign of a velocity, ``max``/``min``/``abs``/``math.copysign``, a
Lennard-Jones cutoff with ``r**6`` and ``r2 ** -3``, device functions returning tuples,
``cuda.local.array`` scratch, float32 2-D grids with ``np.float32`` constants and numpy
ufuncs on scalars, RK4 in device functions, explicit ``threadIdx + blockIdx * blockDim``
indexing and ``cuda.gridsize(1)`` stride loops) and the host ``simulate`` functions that
drive them (``to_device``, ``device_array_like``, ``device_array(shape, dtype)``, buffer
swaps, ``synchronize``, ``copy_to_host`` returning tuples).
"""
import math

import numpy as np
from numba import float64

from dualgpu import cuda  # was: from numba import cuda

TPB = 32


# --- 1. Burgers / advection, upwind -------------------------------------------------------

@cuda.jit
def burgers_upwind_branch(u, u_new, dt_dx, nu_dt_dx2):
    """Inviscid-upwind + viscous Burgers step, upwind direction chosen with a branch."""
    i = cuda.grid(1)
    n = u.shape[0]
    if i < n:
        ui = u[i]
        um = u[(i - 1) % n]
        up = u[(i + 1) % n]
        if ui > 0.0:
            adv = ui * (ui - um)
        else:
            adv = ui * (up - ui)
        u_new[i] = ui - dt_dx * adv + nu_dt_dx2 * (up - 2.0 * ui + um)


@cuda.jit
def burgers_upwind_minmax(u, u_new, dt_dx, nu_dt_dx2):
    """The same step written with max/min, abs and math.copysign (flux splitting)."""
    i = cuda.grid(1)
    n = u.shape[0]
    if i < n:
        ui = u[i]
        um = u[(i - 1) % n]
        up = u[(i + 1) % n]
        a_plus = max(ui, 0.0)
        a_minus = min(ui, 0.0)
        # |u| * sign(u) == u, written the way people write "speed times direction"
        speed = abs(ui) * math.copysign(1.0, ui)
        adv = a_plus * (ui - um) + a_minus * (up - ui)
        u_new[i] = ui - dt_dx * adv + nu_dt_dx2 * (up - 2.0 * ui + um) + 0.0 * (speed - ui)


def simulate_burgers(u0, nu, n_steps=10, dt=0.01, dx=0.1, kernel=burgers_upwind_branch):
    d_u = cuda.to_device(u0)
    d_new = cuda.device_array_like(d_u)
    blocks = (u0.shape[0] + TPB - 1) // TPB
    for _ in range(n_steps):
        kernel[blocks, TPB](d_u, d_new, dt / dx, nu * dt / dx ** 2)
        d_u, d_new = d_new, d_u
    cuda.synchronize()
    return d_u.copy_to_host()


def burgers_reference(u0, nu, n_steps=10, dt=0.01, dx=0.1):
    u = np.array(u0, np.float64)
    for _ in range(n_steps):
        um, up = np.roll(u, 1), np.roll(u, -1)
        adv = np.where(u > 0.0, u * (u - um), u * (up - u))
        u = u - dt / dx * adv + nu * dt / dx ** 2 * (up - 2.0 * u + um)
    return u


# --- 2. Lennard-Jones with a cutoff --------------------------------------------------------

@cuda.jit(device=True)
def lj_pair(dx, dy, r2, eps, sigma):
    """Force components on i from j and the pair energy (shifted so nothing is returned as int)."""
    r = math.sqrt(r2)
    sr = sigma / r
    sr6 = sr ** 6
    sr12 = sr6 * sr6
    e = 4.0 * eps * (sr12 - sr6)
    inv_r6 = r2 ** -3  # 1/r^6
    f_over_r = 24.0 * eps * (2.0 * sr12 - sr6) / r2 + 0.0 * inv_r6
    return f_over_r * dx, f_over_r * dy, e


@cuda.jit
def lj_forces(pos, force, energy, eps, sigma, rc2):
    i = cuda.grid(1)
    n = pos.shape[0]
    if i >= n:
        return
    fx = 0.0
    fy = 0.0
    e = 0.0
    for j in range(n):
        if j == i:
            continue
        dx = pos[i, 0] - pos[j, 0]
        dy = pos[i, 1] - pos[j, 1]
        r2 = dx * dx + dy * dy
        if r2 < rc2:
            gx, gy, ep = lj_pair(dx, dy, r2, eps, sigma)
            fx += gx
            fy += gy
            e += 0.5 * ep
    force[i, 0] = fx
    force[i, 1] = fy
    energy[i] = e


@cuda.jit
def verlet_kick_drift(pos, vel, force, dt):
    i = cuda.grid(1)
    if i < pos.shape[0]:
        for k in range(2):
            vel[i, k] += 0.5 * dt * force[i, k]
            pos[i, k] += dt * vel[i, k]


@cuda.jit
def verlet_kick(vel, force, dt):
    i = cuda.grid(1)
    if i < vel.shape[0]:
        for k in range(2):
            vel[i, k] += 0.5 * dt * force[i, k]


def simulate_lj(pos0, vel0, eps, sigma, n_steps=3, dt=0.005, rc=2.5):
    n = pos0.shape[0]
    d_pos = cuda.to_device(pos0)
    d_vel = cuda.to_device(vel0)
    d_force = cuda.device_array((n, 2), np.float64)
    d_energy = cuda.device_array(n, np.float64)
    blocks = (n + TPB - 1) // TPB
    rc2 = rc * rc
    lj_forces[blocks, TPB](d_pos, d_force, d_energy, eps, sigma, rc2)
    for _ in range(n_steps):
        verlet_kick_drift[blocks, TPB](d_pos, d_vel, d_force, dt)
        lj_forces[blocks, TPB](d_pos, d_force, d_energy, eps, sigma, rc2)
        verlet_kick[blocks, TPB](d_vel, d_force, dt)
    cuda.synchronize()
    return d_pos.copy_to_host(), d_vel.copy_to_host(), d_energy.copy_to_host()


def lj_reference(pos0, vel0, eps, sigma, n_steps=3, dt=0.005, rc=2.5):
    def forces(p):
        d = p[:, None, :] - p[None, :, :]
        r2 = (d ** 2).sum(-1)
        np.fill_diagonal(r2, np.inf)
        mask = r2 < rc * rc
        r2s = np.where(mask, r2, 1.0)
        sr6 = (sigma ** 2 / r2s) ** 3
        e = np.where(mask, 4 * eps * (sr6 * sr6 - sr6), 0.0)
        f = np.where(mask, 24 * eps * (2 * sr6 * sr6 - sr6) / r2s, 0.0)
        return (f[:, :, None] * d).sum(1), 0.5 * e.sum(1)
    p, v = pos0.astype(float).copy(), vel0.astype(float).copy()
    f, e = forces(p)
    for _ in range(n_steps):
        v += 0.5 * dt * f
        p += dt * v
        f, e = forces(p)
        v += 0.5 * dt * f
    return p, v, e


# --- 3. SPH density with a local scratch array ---------------------------------------------

@cuda.jit
def sph_density(pos, mass, rho, h):
    i = cuda.grid(1)
    n = pos.shape[0]
    if i < n:
        dr = cuda.local.array(3, float64)
        h2 = h * h
        coef = 315.0 / (64.0 * math.pi * h ** 9)
        acc = 0.0
        for j in range(n):
            r2 = 0.0
            for k in range(3):
                dr[k] = pos[i, k] - pos[j, k]
                r2 += dr[k] * dr[k]
            if r2 < h2:
                acc += mass[j] * coef * (h2 - r2) ** 3
        rho[i] = acc


def simulate_sph_density(pos, mass, h):
    d_pos = cuda.to_device(pos)
    d_mass = cuda.to_device(mass)
    d_rho = cuda.device_array(pos.shape[0], np.float64)
    sph_density[(pos.shape[0] + TPB - 1) // TPB, TPB](d_pos, d_mass, d_rho, h)
    return d_rho.copy_to_host()


def sph_reference(pos, mass, h):
    r2 = ((pos[:, None, :] - pos[None, :, :]) ** 2).sum(-1)
    w = np.where(r2 < h * h, (h * h - r2) ** 3, 0.0) * 315.0 / (64.0 * np.pi * h ** 9)
    return (w * mass[None, :]).sum(1)


# --- 4. 2-D Allen-Cahn, float32, periodic, cuda.grid(2) with x the fast index ---------------

@cuda.jit
def allen_cahn_step(phi, phi_new, dt, eps2, inv_dx2):
    x, y = cuda.grid(2)
    ny, nx = phi.shape
    if y < ny and x < nx:
        c = phi[y, x]
        lap = (phi[y, (x + 1) % nx] + phi[y, (x - 1) % nx] + phi[(y + 1) % ny, x]
               + phi[(y - 1) % ny, x] - np.float32(4.0) * c) * inv_dx2
        reaction = c - c * c * c
        # a smooth "mobility" so numpy ufuncs on scalars are exercised
        mob = np.float32(1.0) + np.float32(0.1) * np.tanh(c) * np.exp(-c * c)
        phi_new[y, x] = c + dt * mob * (eps2 * lap + reaction)


def simulate_allen_cahn(phi0, eps2, n_steps=4, dt=np.float32(0.05), dx=np.float32(1.0)):
    d_phi = cuda.to_device(phi0)
    d_new = cuda.device_array_like(d_phi)
    ny, nx = phi0.shape
    threads = (8, 4)
    blocks = ((nx + threads[0] - 1) // threads[0], (ny + threads[1] - 1) // threads[1])
    inv_dx2 = np.float32(1.0) / (dx * dx)
    for _ in range(n_steps):
        allen_cahn_step[blocks, threads](d_phi, d_new, dt, eps2, inv_dx2)
        d_phi, d_new = d_new, d_phi
    cuda.synchronize()
    return d_phi.copy_to_host()


def allen_cahn_reference(phi0, eps2, n_steps=4, dt=0.05, dx=1.0):
    p = np.array(phi0, np.float64)
    for _ in range(n_steps):
        lap = (np.roll(p, 1, 0) + np.roll(p, -1, 0) + np.roll(p, 1, 1) + np.roll(p, -1, 1)
               - 4 * p) / dx ** 2
        mob = 1.0 + 0.1 * np.tanh(p) * np.exp(-p * p)
        p = p + dt * mob * (eps2 * lap + p - p ** 3)
    return p


# --- 5. Brusselator ensemble, RK4 in device functions, stride loop --------------------------

@cuda.jit(device=True)
def brusselator_rhs(x, y, a, b, ea):
    k = math.exp(-ea)  # an Arrhenius-like factor on the autocatalytic step
    dx = a - (b + 1.0) * x + k * x * x * y
    dy = b * x - k * x * x * y
    return dx, dy


@cuda.jit(device=True)
def rk4_step(x, y, a, b, ea, dt):
    k1x, k1y = brusselator_rhs(x, y, a, b, ea)
    k2x, k2y = brusselator_rhs(x + 0.5 * dt * k1x, y + 0.5 * dt * k1y, a, b, ea)
    k3x, k3y = brusselator_rhs(x + 0.5 * dt * k2x, y + 0.5 * dt * k2y, a, b, ea)
    k4x, k4y = brusselator_rhs(x + dt * k3x, y + dt * k3y, a, b, ea)
    return (x + dt / 6.0 * (k1x + 2.0 * k2x + 2.0 * k3x + k4x),
            y + dt / 6.0 * (k1y + 2.0 * k2y + 2.0 * k3y + k4y))


@cuda.jit
def brusselator_ensemble(xs, ys, a, b, ea, dt, n_steps):
    start = cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x
    stride = cuda.gridsize(1)
    for m in range(start, xs.shape[0], stride):
        x = xs[m]
        y = ys[m]
        for _ in range(n_steps):
            x, y = rk4_step(x, y, a, b, ea, dt)
        xs[m] = x
        ys[m] = y


def simulate_brusselator(x0, y0, a, b, ea, dt=0.02, n_steps=20):
    d_x = cuda.to_device(x0)
    d_y = cuda.to_device(y0)
    brusselator_ensemble[2, 4](d_x, d_y, a, b, ea, dt, n_steps)  # 8 threads, stride loop
    cuda.synchronize()
    return d_x.copy_to_host(), d_y.copy_to_host()


def brusselator_reference(x0, y0, a, b, ea, dt=0.02, n_steps=20):
    k = math.exp(-ea)

    def rhs(x, y):
        return a - (b + 1) * x + k * x * x * y, b * x - k * x * x * y
    x, y = np.array(x0, float), np.array(y0, float)
    for _ in range(n_steps):
        k1 = rhs(x, y)
        k2 = rhs(x + 0.5 * dt * k1[0], y + 0.5 * dt * k1[1])
        k3 = rhs(x + 0.5 * dt * k2[0], y + 0.5 * dt * k2[1])
        k4 = rhs(x + dt * k3[0], y + dt * k3[1])
        x = x + dt / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
        y = y + dt / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
    return x, y
