"""Small complete simulations written the way numba.cuda users write them (round 3).

Third round of the unseen-kernels exercise (``unseen_kernels.py``, ``unseen_kernels_sims2.py``
came first). Each kernel was written against ``from numba import cuda`` and ported by the
import line only. What they bring: two coupled fields (shallow water), all-pairs ``sin``
(Kuramoto), exp/tanh/cosh ODE ensembles (FitzHugh-Nagumo, Morris-Lecar), Neumann and Robin
boundaries, absorbing (Mur) boundaries, a graph in CSR form with int32 index arrays, a spring
net with fixed nodes (an int8 mask), Euler-Maruyama with a fixed noise array, upwinding with
``if vel > 0`` branches in 2-D, a fourth-order operator through a temporary buffer
(Cahn-Hilliard), an adaptive time step chosen on the host from ``np.max(np.abs(...))`` of a
device result, a one-element accumulator filled with ``cuda.atomic.add``, and float32
versions, and an IMEX step whose implicit half is ``np.linalg.solve`` on the host.
"""
import math

import numpy as np

from dualgpu import cuda  # was: from numba import cuda

TPB = 32


def _blocks(n, tpb=TPB):
    return (n + tpb - 1) // tpb


# --- 1. 1-D shallow water, Lax-Friedrichs, two coupled fields, reflective walls ----------

@cuda.jit(device=True)
def sw_flux(h, hu, g):
    u = hu / h
    return hu, hu * u + 0.5 * g * h * h


@cuda.jit
def shallow_water_step(h, hu, h_new, hu_new, g, dt_dx):
    i = cuda.grid(1)
    n = h.shape[0]
    if i >= n:
        return
    if i == 0 or i == n - 1:  # reflective walls: mirror the depth, flip the momentum
        j = 1 if i == 0 else n - 2
        h_new[i] = h[j]
        hu_new[i] = -hu[j]
        return
    fl_h, fl_hu = sw_flux(h[i - 1], hu[i - 1], g)
    fr_h, fr_hu = sw_flux(h[i + 1], hu[i + 1], g)
    h_new[i] = 0.5 * (h[i - 1] + h[i + 1]) - 0.5 * dt_dx * (fr_h - fl_h)
    hu_new[i] = 0.5 * (hu[i - 1] + hu[i + 1]) - 0.5 * dt_dx * (fr_hu - fl_hu)


def simulate_shallow_water(h0, hu0, g, n_steps=5, dt_dx=0.1):
    n = h0.shape[0]
    d_h, d_hu = cuda.to_device(h0), cuda.to_device(hu0)
    d_h2, d_hu2 = cuda.device_array_like(d_h), cuda.device_array_like(d_hu)
    for _ in range(n_steps):
        shallow_water_step[_blocks(n), TPB](d_h, d_hu, d_h2, d_hu2, g, dt_dx)
        d_h, d_h2 = d_h2, d_h
        d_hu, d_hu2 = d_hu2, d_hu
    return d_h.copy_to_host(), d_hu.copy_to_host()


# --- 2. Kuramoto oscillators: all pairs, sin of differences -----------------------------

@cuda.jit
def kuramoto_step(theta, theta_new, omega, coupling, dt):
    i = cuda.grid(1)
    n = theta.shape[0]
    if i < n:
        acc = 0.0
        for j in range(n):
            acc += math.sin(theta[j] - theta[i])
        theta_new[i] = theta[i] + dt * (omega[i] + coupling / n * acc)


def simulate_kuramoto(theta0, omega, coupling, n_steps=4, dt=0.1):
    d_t = cuda.to_device(theta0)
    d_o = cuda.to_device(omega)
    d_n = cuda.device_array_like(d_t)
    for _ in range(n_steps):
        kuramoto_step[1, TPB](d_t, d_n, d_o, coupling, dt)
        d_t, d_n = d_n, d_t
    theta = d_t.copy_to_host()
    # order parameter r = |mean(exp(i theta))|, computed on the host
    r = np.sqrt(np.mean(np.cos(theta)) ** 2 + np.mean(np.sin(theta)) ** 2)
    return theta, r


# --- 3. Kuramoto in float32 (np.float32 constants, float32 sinf) ------------------------

DT32 = np.float32(0.1)


@cuda.jit
def kuramoto_step_f32(theta, theta_new, omega, coupling):
    i = cuda.grid(1)
    n = theta.shape[0]
    if i < n:
        acc = np.float32(0.0)
        for j in range(n):
            acc += math.sin(theta[j] - theta[i])
        theta_new[i] = theta[i] + DT32 * (omega[i] + coupling * acc / np.float32(n))


def simulate_kuramoto_f32(theta0, omega, coupling, n_steps=4):
    d_t = cuda.to_device(theta0)
    d_o = cuda.to_device(omega)
    d_n = cuda.device_array(theta0.shape, dtype=np.float32)
    for _ in range(n_steps):
        kuramoto_step_f32[1, TPB](d_t, d_n, d_o, coupling)
        d_t, d_n = d_n, d_t
    return d_t.copy_to_host()


# --- 4. FitzHugh-Nagumo ensemble with a tanh-saturated drive, Heun steps ----------------

@cuda.jit(device=True)
def fhn_rhs(v, w, a, b, eps, drive):
    current = drive * math.tanh(2.0 * v + 0.5) * math.exp(-0.1 * w * w)
    return v - v * v * v / 3.0 - w + current, eps * (v + a - b * w)


@cuda.jit
def fhn_ensemble(v, w, a, b, eps, drive, dt, n_steps):
    m = cuda.grid(1)
    if m >= v.shape[0]:
        return
    vm, wm = v[m], w[m]
    for _ in range(n_steps):
        f1v, f1w = fhn_rhs(vm, wm, a, b, eps, drive[m])
        f2v, f2w = fhn_rhs(vm + dt * f1v, wm + dt * f1w, a, b, eps, drive[m])
        vm += 0.5 * dt * (f1v + f2v)
        wm += 0.5 * dt * (f1w + f2w)
    v[m] = vm
    w[m] = wm


def simulate_fhn(v0, w0, drive, a, b, eps=0.08, dt=0.2, n_steps=10):
    d_v, d_w, d_drive = cuda.to_device(v0), cuda.to_device(w0), cuda.to_device(drive)
    fhn_ensemble[_blocks(v0.size), TPB](d_v, d_w, a, b, eps, d_drive, dt, n_steps)
    return d_v.copy_to_host(), d_w.copy_to_host()


# --- 5. Morris-Lecar ensemble in float32: tanh, cosh, exp ------------------------------

V1, V2, V3, V4 = np.float32(-0.01), np.float32(0.15), np.float32(0.1), np.float32(0.145)
HALF = np.float32(0.5)


@cuda.jit
def morris_lecar_f32(v, w, g_ca, phi, dt, n_steps):
    m = cuda.grid(1)
    if m < v.shape[0]:
        vm = v[m]
        wm = w[m]
        for _ in range(n_steps):
            m_inf = HALF * (np.float32(1.0) + math.tanh((vm - V1) / V2))
            w_inf = HALF * (np.float32(1.0) + math.tanh((vm - V3) / V4))
            rate = phi * math.cosh((vm - V3) / (np.float32(2.0) * V4))
            leak = np.float32(0.5) * (vm + np.float32(0.5))
            dv = -g_ca * m_inf * (vm - np.float32(1.0)) - np.float32(2.0) * wm * (
                vm + np.float32(0.7)) - leak + np.float32(0.1) * math.exp(-vm * vm)
            vm = vm + dt * dv
            wm = wm + dt * rate * (w_inf - wm)
        v[m] = vm
        w[m] = wm


def simulate_morris_lecar(v0, w0, g_ca, phi, dt=np.float32(0.05), n_steps=8):
    d_v = cuda.to_device(v0)
    d_w = cuda.to_device(w0)
    morris_lecar_f32[_blocks(v0.size), TPB](d_v, d_w, g_ca, phi, dt, n_steps)
    return d_v.copy_to_host(), d_w.copy_to_host()


# --- 6. Heat with a Neumann left end and a Robin right end; energy by atomic add ---------

@cuda.jit
def heat_robin(u, u_new, r, h_coef, t_inf, dx):
    i = cuda.grid(1)
    n = u.shape[0]
    if i >= n:
        return
    if i == 0:  # du/dx = 0: ghost cell u[-1] = u[1]
        u_new[i] = u[i] + r * (2.0 * u[1] - 2.0 * u[0])
    elif i == n - 1:  # -du/dx = h (u - t_inf): ghost u[n] = u[n-2] - 2 dx h (u[n-1] - t_inf)
        ghost = u[n - 2] - 2.0 * dx * h_coef * (u[i] - t_inf)
        u_new[i] = u[i] + r * (u[n - 2] - 2.0 * u[i] + ghost)
    else:
        u_new[i] = u[i] + r * (u[i - 1] - 2.0 * u[i] + u[i + 1])


@cuda.jit
def total_heat(u, dx, out):
    i = cuda.grid(1)
    if i < u.shape[0]:
        cuda.atomic.add(out, 0, u[i] * dx)


def simulate_heat_robin(u0, h_coef, t_inf, r=0.2, dx=0.1, n_steps=6):
    n = u0.size
    d_u = cuda.to_device(u0)
    d_v = cuda.device_array_like(d_u)
    for _ in range(n_steps):
        heat_robin[_blocks(n), TPB](d_u, d_v, r, h_coef, t_inf, dx)
        d_u, d_v = d_v, d_u
    d_e = cuda.to_device(np.zeros(1, dtype=u0.dtype))
    total_heat[_blocks(n), TPB](d_u, dx, d_e)
    u = d_u.copy_to_host()
    return u, d_e.copy_to_host()[0]   # an array and a scalar


# --- 7. Damped 1-D wave, Mur absorbing ends in a second launch (they read the interior) --

@cuda.jit
def wave_interior(u_prev, u, u_next, c2, damping):
    i = cuda.grid(1)
    n = u.shape[0]
    if 0 < i < n - 1:
        lap = u[i - 1] - 2.0 * u[i] + u[i + 1]
        u_next[i] = (2.0 * u[i] - (1.0 - damping) * u_prev[i] + c2 * lap) / (1.0 + damping)


@cuda.jit
def wave_mur(u, u_next, courant):
    i = cuda.grid(1)
    n = u.shape[0]
    k = (courant - 1.0) / (courant + 1.0)
    if i == 0:
        u_next[0] = u[1] + k * (u_next[1] - u[0])
    elif i == 1:
        u_next[n - 1] = u[n - 2] + k * (u_next[n - 2] - u[n - 1])


def simulate_wave_absorbing(u0, c, damping, n_steps=6, dt=0.1, dx=0.2):
    courant = c * dt / dx
    c2 = courant * courant
    n = u0.size
    d_prev, d_u = cuda.to_device(u0), cuda.to_device(u0)
    d_next = cuda.device_array_like(d_u)
    for _ in range(n_steps):  # interior first, then the boundaries that read it: 2 launches
        wave_interior[_blocks(n), TPB](d_prev, d_u, d_next, c2, damping)
        wave_mur[1, 2](d_u, d_next, courant)
        d_prev, d_u, d_next = d_u, d_next, d_prev
    return d_u.copy_to_host()


# --- 8. SIR on a graph: CSR adjacency with int32 index arrays ----------------------------

@cuda.jit
def sir_graph_step(s, i, s_new, i_new, indptr, indices, weights, beta, gamma, dt):
    v = cuda.grid(1)
    if v >= s.shape[0]:
        return
    force = 0.0
    for e in range(indptr[v], indptr[v + 1]):
        force += weights[e] * i[indices[e]]
    infection = beta * s[v] * force
    s_new[v] = s[v] - dt * infection
    i_new[v] = i[v] + dt * (infection - gamma * i[v])


def ring_graph(n, dtype=np.int32):
    """CSR adjacency of a ring with one chord per node: (indptr, indices, weights)."""
    indptr = np.arange(0, 3 * n + 1, 3, dtype=dtype)
    indices = np.empty(3 * n, dtype=dtype)
    for v in range(n):
        indices[3 * v:3 * v + 3] = [(v - 1) % n, (v + 1) % n, (v + n // 2) % n]
    weights = np.tile([0.5, 0.5, 0.25], n)
    return indptr, indices, weights


def simulate_sir_graph(s0, i0, beta, gamma, graph, dt=0.2, n_steps=6):
    indptr, indices, weights = (cuda.to_device(a) for a in graph)
    d_s, d_i = cuda.to_device(s0), cuda.to_device(i0)
    d_s2, d_i2 = cuda.device_array_like(d_s), cuda.device_array_like(d_i)
    for _ in range(n_steps):
        sir_graph_step[_blocks(s0.size), TPB](d_s, d_i, d_s2, d_i2, indptr, indices, weights,
                                              beta, gamma, dt)
        d_s, d_s2 = d_s2, d_s
        d_i, d_i2 = d_i2, d_i
    return d_s.copy_to_host(), d_i.copy_to_host()


# --- 9. Spring net with fixed nodes: per-node neighbour loop, Stormer-Verlet -------------

@cuda.jit
def net_forces(pos, nbr_ptr, nbr, rest, k, force):
    a = cuda.grid(1)
    if a >= pos.shape[0]:
        return
    fx = 0.0
    fy = 0.0
    for e in range(nbr_ptr[a], nbr_ptr[a + 1]):
        b = nbr[e]
        dx = pos[b, 0] - pos[a, 0]
        dy = pos[b, 1] - pos[a, 1]
        length = math.sqrt(dx * dx + dy * dy)
        f = k * (length - rest[e]) / length
        fx += f * dx
        fy += f * dy
    force[a, 0] = fx
    force[a, 1] = fy - 0.5  # gravity


@cuda.jit
def net_verlet(pos, pos_prev, force, fixed, mass, dt):
    a = cuda.grid(1)
    if a >= pos.shape[0] or fixed[a]:
        return
    for d in range(2):
        x = pos[a, d]
        pos[a, d] = 2.0 * x - pos_prev[a, d] + dt * dt * force[a, d] / mass
        pos_prev[a, d] = x


def grid_net(nx, ny):
    """Neighbour lists (CSR, int32) and rest lengths of an nx x ny grid of unit springs."""
    ptr, nbr = [0], []
    for a in range(nx * ny):
        x, y = a % nx, a // nx
        for bx, by in ((x - 1, y), (x + 1, y), (x, y - 1), (x, y + 1)):
            if 0 <= bx < nx and 0 <= by < ny:
                nbr.append(by * nx + bx)
        ptr.append(len(nbr))
    return np.array(ptr, np.int32), np.array(nbr, np.int32), np.ones(len(nbr))


def simulate_spring_net(pos0, k, mass, net, fixed, dt=0.05, n_steps=4):
    nbr_ptr, nbr, rest = (cuda.to_device(a) for a in net)
    d_pos, d_prev = cuda.to_device(pos0), cuda.to_device(pos0)
    d_fixed = cuda.to_device(fixed)
    d_force = cuda.device_array(pos0.shape, dtype=pos0.dtype)
    bpg = _blocks(pos0.shape[0])
    for _ in range(n_steps):
        net_forces[bpg, TPB](d_pos, nbr_ptr, nbr, rest, k, d_force)
        net_verlet[bpg, TPB](d_pos, d_prev, d_force, d_fixed, mass, dt)
    return d_pos.copy_to_host()


# --- 10. Predator-prey Euler-Maruyama with a fixed noise array --------------------------

@cuda.jit
def lv_euler_maruyama(x, y, noise, alpha, beta, delta, gamma, sigma, dt):
    m = cuda.grid(1)
    if m >= x.shape[0]:
        return
    sq = math.sqrt(dt)
    xm = x[m]
    ym = y[m]
    for t in range(noise.shape[0]):
        dx = (alpha * xm - beta * xm * ym) * dt + sigma * xm * sq * noise[t, m, 0]
        dy = (delta * xm * ym - gamma * ym) * dt + sigma * ym * sq * noise[t, m, 1]
        xm += dx
        ym += dy
    x[m] = xm
    y[m] = ym


def simulate_predator_prey(x0, y0, params, sigma, noise, dt=0.05):
    alpha, beta, delta, gamma = params   # a parameter array unpacked on the host
    d_x, d_y, d_noise = cuda.to_device(x0), cuda.to_device(y0), cuda.to_device(noise)
    lv_euler_maruyama[_blocks(x0.size), TPB](d_x, d_y, d_noise, alpha, beta, delta, gamma,
                                             sigma, dt)
    return np.stack([d_x.copy_to_host(), d_y.copy_to_host()])


# --- 11. 2-D advection-diffusion, first-order upwinding with `if vel > 0` branches ------

@cuda.jit
def advect_diffuse_2d(c, c_new, vx, vy, diff, dt, dx):
    i, j = cuda.grid(2)
    ny, nx = c.shape
    if i >= ny or j >= nx:
        return
    if i == 0 or j == 0 or i == ny - 1 or j == nx - 1:
        c_new[i, j] = 0.0  # inflow/outflow walls held at zero
        return
    u = vx[i, j]
    v = vy[i, j]
    if u > 0:
        dcdx = (c[i, j] - c[i, j - 1]) / dx
    else:
        dcdx = (c[i, j + 1] - c[i, j]) / dx
    if v > 0:
        dcdy = (c[i, j] - c[i - 1, j]) / dx
    else:
        dcdy = (c[i + 1, j] - c[i, j]) / dx
    lap = (c[i - 1, j] + c[i + 1, j] + c[i, j - 1] + c[i, j + 1] - 4.0 * c[i, j]) / (dx * dx)
    c_new[i, j] = c[i, j] + dt * (diff * lap - u * dcdx - v * dcdy)


def simulate_advect_diffuse(c0, vx, vy, diff, dt=0.02, dx=0.5, n_steps=3):
    ny, nx = c0.shape
    tpb = (8, 8)
    bpg = (_blocks(ny, 8), _blocks(nx, 8))
    d_c, d_n = cuda.to_device(c0), cuda.device_array_like(c0)
    d_vx, d_vy = cuda.to_device(vx), cuda.to_device(vy)
    for _ in range(n_steps):
        advect_diffuse_2d[bpg, tpb](d_c, d_n, d_vx, d_vy, diff, dt, dx)
        d_c, d_n = d_n, d_c
    return d_c.copy_to_host()


# --- 12. 1-D Cahn-Hilliard, periodic: a Laplacian of a Laplacian through a temporary -----

@cuda.jit
def chemical_potential(c, mu, gamma, inv_dx2):
    i = cuda.grid(1)
    n = c.shape[0]
    if i < n:
        lap = (c[(i - 1) % n] - 2.0 * c[i] + c[(i + 1) % n]) * inv_dx2
        mu[i] = c[i] ** 3 - c[i] - gamma * lap


@cuda.jit
def cahn_hilliard_update(c, mu, mobility, dt, inv_dx2):
    i = cuda.grid(1)
    n = c.shape[0]
    if i < n:
        lap_mu = (mu[(i - 1) % n] - 2.0 * mu[i] + mu[(i + 1) % n]) * inv_dx2
        c[i] += dt * mobility * lap_mu   # in place: mu was computed from the old c


def simulate_cahn_hilliard(c0, mobility, gamma, dt=0.002, dx=0.5, n_steps=4):
    n = c0.size
    inv_dx2 = 1.0 / (dx * dx)
    d_c = cuda.to_device(c0)
    d_mu = cuda.device_array(n, dtype=np.float64)
    for _ in range(n_steps):
        chemical_potential[_blocks(n), TPB](d_c, d_mu, gamma, inv_dx2)
        cahn_hilliard_update[_blocks(n), TPB](d_c, d_mu, mobility, dt, inv_dx2)
    return d_c.copy_to_host()


# --- 13. Adaptive time step: the host reads the state to pick dt (CFL) -----------------

@cuda.jit
def burgers_rusanov(u, u_new, dt_dx):
    i = cuda.grid(1)
    n = u.shape[0]
    if i >= n:
        return
    left = u[(i - 1) % n]
    right = u[(i + 1) % n]
    a_l = max(abs(left), abs(u[i]))
    a_r = max(abs(u[i]), abs(right))
    f_l = 0.25 * (left * left + u[i] * u[i]) - 0.5 * a_l * (u[i] - left)
    f_r = 0.25 * (u[i] * u[i] + right * right) - 0.5 * a_r * (right - u[i])
    u_new[i] = u[i] - dt_dx * (f_r - f_l)


def simulate_adaptive_burgers(u0, amplitude, t_end=0.3, dx=0.25, cfl=0.4):
    n = u0.size
    d_u = cuda.to_device(amplitude * u0)
    d_v = cuda.device_array_like(d_u)
    t = 0.0
    n_steps = 0
    while t < t_end:
        speed = np.max(np.abs(d_u.copy_to_host()))   # the host reads the state
        dt = min(cfl * dx / speed, t_end - t)
        burgers_rusanov[_blocks(n), TPB](d_u, d_v, dt / dx)
        d_u, d_v = d_v, d_u
        t += dt
        n_steps += 1
    return d_u.copy_to_host()


# --- 14. Reaction-diffusion in float32 with a Neumann box and a host-side trajectory ----

@cuda.jit
def fisher_kpp_f32(u, u_new, d, growth, dt):
    i = cuda.grid(1)
    n = u.shape[0]
    if i < n:
        left = u[i - 1] if i > 0 else u[1]
        right = u[i + 1] if i < n - 1 else u[n - 2]
        lap = left - np.float32(2.0) * u[i] + right
        u_new[i] = u[i] + dt * (d * lap + growth * u[i] * (np.float32(1.0) - u[i]))


def simulate_fisher_f32(u0, d, growth, dt=np.float32(0.1), n_steps=5):
    d_u = cuda.to_device(u0)
    d_v = cuda.device_array_like(d_u)
    means = []
    for _ in range(n_steps):
        fisher_kpp_f32[_blocks(u0.size), TPB](d_u, d_v, d, growth, dt)
        d_u, d_v = d_v, d_u
        means.append(np.mean(d_u.copy_to_host()))
    return d_u.copy_to_host(), np.array(means)


# --- 15. IMEX reaction-diffusion: a kernel for the reaction, np.linalg.solve on the host --

@cuda.jit
def logistic_reaction(u, out, rate, dt):
    i = cuda.grid(1)
    if i < u.shape[0]:
        out[i] = u[i] + dt * rate * u[i] * (1.0 - u[i])


def simulate_imex(u0, rate, diff, dt=0.1, dx=0.5, n_steps=3):
    """Explicit reaction in a kernel, implicit diffusion solved on the host each step."""
    n = u0.size
    r = diff * dt / (dx * dx)
    lap = np.eye(n, k=1) + np.eye(n, k=-1) - 2.0 * np.eye(n)
    lap[0, 1] = lap[-1, -2] = 2.0          # Neumann ends
    system = np.eye(n) - r * lap           # a matrix of duals when diff is differentiated
    d_u = cuda.to_device(u0)
    d_out = cuda.device_array_like(d_u)
    for _ in range(n_steps):
        logistic_reaction[_blocks(n), TPB](d_u, d_out, rate, dt)
        u = np.linalg.solve(system, d_out.copy_to_host())
        d_u = cuda.to_device(u)
    return d_u.copy_to_host()
