"""Block-level kernels written the way numba.cuda users write them, ported with one line.

Shared-memory tiles, ``cuda.syncthreads()`` (also inside loops and ``while`` loops),
dynamic shared memory, warp shuffles and grid-wide sync (``cuda.cg.this_grid().sync()``)
in the shapes they take in tutorials and in NVIDIA's own examples. Each kernel comes with
the host ``simulate_*`` function that drives it, written for plain arrays
(``to_device``, ``device_array_like``, ``copy_to_host``), so that the driver can
differentiate it without edits. The untiled twins of the tiled kernels compute the same
thing without shared memory: they are the reference for results and for speed.

Sizes are parameters so that tests on the CUDA simulator can keep them small.
"""
import math

import numpy as np
from numba import float32, float64

from dualgpu import cuda  # was: from numba import cuda

# --- 1. Tiled N-body (GPU Gems 3, ch. 31): a shared tile of positions and masses -------------

TILE = 8  # bodies per tile = threads per block
SOFTENING2 = 1e-2


@cuda.jit
def nbody_accel_tiled(pos, mass, acc, G):
    """Accelerations of all bodies, a tile of bodies at a time through shared memory."""
    tile = cuda.shared.array((TILE, 4), dtype=float64)
    tx = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + tx
    n = pos.shape[0]
    xi = 0.0
    yi = 0.0
    zi = 0.0
    if i < n:
        xi = pos[i, 0]
        yi = pos[i, 1]
        zi = pos[i, 2]
    ax = 0.0
    ay = 0.0
    az = 0.0
    n_tiles = (n + TILE - 1) // TILE
    for t in range(n_tiles):
        j = t * TILE + tx
        if j < n:
            tile[tx, 0] = pos[j, 0]
            tile[tx, 1] = pos[j, 1]
            tile[tx, 2] = pos[j, 2]
            tile[tx, 3] = mass[j]
        else:
            tile[tx, 0] = 0.0
            tile[tx, 1] = 0.0
            tile[tx, 2] = 0.0
            tile[tx, 3] = 0.0
        cuda.syncthreads()
        for k in range(TILE):
            dx = tile[k, 0] - xi
            dy = tile[k, 1] - yi
            dz = tile[k, 2] - zi
            r2 = dx * dx + dy * dy + dz * dz + SOFTENING2
            inv_r3 = 1.0 / (r2 * math.sqrt(r2))
            s = G * tile[k, 3] * inv_r3
            ax += s * dx
            ay += s * dy
            az += s * dz
        cuda.syncthreads()
    if i < n:
        acc[i, 0] = ax
        acc[i, 1] = ay
        acc[i, 2] = az


@cuda.jit
def nbody_accel_untiled(pos, mass, acc, G):
    """The same accelerations read straight from global memory (no shared memory)."""
    i = cuda.grid(1)
    n = pos.shape[0]
    if i < n:
        xi = pos[i, 0]
        yi = pos[i, 1]
        zi = pos[i, 2]
        ax = 0.0
        ay = 0.0
        az = 0.0
        for j in range(n):
            dx = pos[j, 0] - xi
            dy = pos[j, 1] - yi
            dz = pos[j, 2] - zi
            r2 = dx * dx + dy * dy + dz * dz + SOFTENING2
            inv_r3 = 1.0 / (r2 * math.sqrt(r2))
            s = G * mass[j] * inv_r3
            ax += s * dx
            ay += s * dy
            az += s * dz
        acc[i, 0] = ax
        acc[i, 1] = ay
        acc[i, 2] = az


@cuda.jit
def nbody_kick_drift(pos, vel, acc, dt):
    """Semi-implicit Euler: v += a dt, x += v dt."""
    i = cuda.grid(1)
    if i < pos.shape[0]:
        for c in range(3):
            vel[i, c] += acc[i, c] * dt
            pos[i, c] += vel[i, c] * dt


def nbody_initial_state(n, seed=0):
    """Positions, velocities and masses of ``n`` bodies (float64)."""
    rng = np.random.default_rng(seed)
    pos = rng.uniform(-1.0, 1.0, (n, 3))
    vel = 0.1 * rng.standard_normal((n, 3))
    mass = rng.uniform(0.5, 1.5, n)
    return pos, vel, mass


def simulate_nbody(pos0, vel0, mass, G=1.0, n_steps=3, dt=0.01, tiled=True):
    """Final positions after ``n_steps`` steps; ``tiled`` picks the shared-memory kernel."""
    d_pos = cuda.to_device(pos0)
    d_vel = cuda.to_device(vel0)
    d_mass = cuda.to_device(mass)
    d_acc = cuda.device_array_like(d_pos)
    n = pos0.shape[0]
    blocks = (n + TILE - 1) // TILE
    accel = nbody_accel_tiled if tiled else nbody_accel_untiled
    for _ in range(n_steps):
        accel[blocks, TILE](d_pos, d_mass, d_acc, G)
        nbody_kick_drift[blocks, TILE](d_pos, d_vel, d_acc, dt)
    cuda.synchronize()
    return d_pos.copy_to_host()


# --- 2. Block reduction in shared memory: total kinetic energy --------------------------------

RED_TPB = 16


@cuda.jit
def kinetic_energy_partial(vel, mass, partial):
    """Each block sums 0.5 m |v|^2 of its bodies: tree reduction with syncthreads in a loop."""
    sdata = cuda.shared.array(RED_TPB, dtype=float64)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    e = 0.0
    if i < vel.shape[0]:
        e = 0.5 * mass[i] * (vel[i, 0] ** 2 + vel[i, 1] ** 2 + vel[i, 2] ** 2)
    sdata[tid] = e
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if tid < s:
            sdata[tid] += sdata[tid + s]
        cuda.syncthreads()
        s //= 2
    if tid == 0:
        partial[cuda.blockIdx.x] = sdata[0]


@cuda.jit
def sum_partials(partial, total):
    """Second stage: one block of one thread adds the per-block sums."""
    if cuda.grid(1) == 0:
        acc = 0.0
        for b in range(partial.shape[0]):
            acc += partial[b]
        total[0] = acc


def kinetic_energy(vel, mass):
    """Total kinetic energy (shape (1,) array) by a two-stage shared-memory reduction."""
    d_vel = cuda.to_device(vel)
    d_mass = cuda.to_device(mass)
    blocks = (vel.shape[0] + RED_TPB - 1) // RED_TPB
    d_partial = cuda.device_array(blocks, dtype=np.float64)
    d_total = cuda.device_array(1, dtype=np.float64)
    kinetic_energy_partial[blocks, RED_TPB](d_vel, d_mass, d_partial)
    sum_partials[1, 1](d_partial, d_total)
    return d_total.copy_to_host()


@cuda.jit
def kinetic_energy_dynamic_shared(vel, mass, partial):
    """The same reduction with dynamic shared memory (size given at launch)."""
    sdata = cuda.shared.array(0, dtype=float64)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    e = 0.0
    if i < vel.shape[0]:
        e = 0.5 * mass[i] * (vel[i, 0] * vel[i, 0] + vel[i, 1] * vel[i, 1] + vel[i, 2] * vel[i, 2])
    sdata[tid] = e
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if tid < s:
            sdata[tid] += sdata[tid + s]
        cuda.syncthreads()
        s //= 2
    if tid == 0:
        partial[cuda.blockIdx.x] = sdata[0]


def kinetic_energy_dynamic(vel, mass, tpb=RED_TPB):
    d_vel = cuda.to_device(vel)
    d_mass = cuda.to_device(mass)
    blocks = (vel.shape[0] + tpb - 1) // tpb
    d_partial = cuda.device_array(blocks, dtype=np.float64)
    d_total = cuda.device_array(1, dtype=np.float64)
    kinetic_energy_dynamic_shared[blocks, tpb, 0, tpb * 8](d_vel, d_mass, d_partial)
    sum_partials[1, 1](d_partial, d_total)
    return d_total.copy_to_host()


# --- 3. Warp-shuffle reduction (one warp per block) -------------------------------------------

WARP = 32


@cuda.jit
def warp_sum_of_squares(x, partial):
    """Per-warp sum of x**2 with shfl_down_sync; lane 0 writes the warp's sum."""
    i = cuda.grid(1)
    v = 0.0
    if i < x.shape[0]:
        v = x[i] * x[i]
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    if cuda.laneid == 0:
        partial[i // WARP] = v


def sum_of_squares_warp(x):
    d_x = cuda.to_device(x)
    blocks = (x.shape[0] + WARP - 1) // WARP
    d_partial = cuda.device_array(blocks, dtype=np.float64)
    warp_sum_of_squares[blocks, WARP](d_x, d_partial)
    return d_partial.copy_to_host()


# --- 4. 2-D heat stencil with a halo tile -----------------------------------------------------

BX = 8
BY = 8
HALO_SHAPE = (BY + 2, BX + 2)  # numba.cuda needs a constant shape, not an expression


@cuda.jit
def heat2d_halo_step(u, u_new, r):
    """5-point diffusion step; each block loads its (BY+2) x (BX+2) tile with halos."""
    tile = cuda.shared.array(HALO_SHAPE, dtype=float64)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    i = cuda.blockIdx.y * BY + ty  # row
    j = cuda.blockIdx.x * BX + tx  # column
    ny, nx = u.shape
    if i < ny and j < nx:
        tile[ty + 1, tx + 1] = u[i, j]
        if tx == 0 and j > 0:
            tile[ty + 1, 0] = u[i, j - 1]
        if tx == BX - 1 and j < nx - 1:
            tile[ty + 1, BX + 1] = u[i, j + 1]
        if ty == 0 and i > 0:
            tile[0, tx + 1] = u[i - 1, j]
        if ty == BY - 1 and i < ny - 1:
            tile[BY + 1, tx + 1] = u[i + 1, j]
    cuda.syncthreads()
    if i < ny and j < nx:
        if i == 0 or j == 0 or i == ny - 1 or j == nx - 1:
            u_new[i, j] = u[i, j]  # Dirichlet boundary: held
        else:
            c = tile[ty + 1, tx + 1]
            lap = (tile[ty, tx + 1] + tile[ty + 2, tx + 1] + tile[ty + 1, tx]
                   + tile[ty + 1, tx + 2] - 4.0 * c)
            u_new[i, j] = c + r * lap


@cuda.jit
def heat2d_halo_step_f32(u, u_new, r):
    """The halo stencil in float32, as float32 simulations write it."""
    tile = cuda.shared.array(HALO_SHAPE, dtype=float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    i = cuda.blockIdx.y * BY + ty
    j = cuda.blockIdx.x * BX + tx
    ny, nx = u.shape
    if i < ny and j < nx:
        tile[ty + 1, tx + 1] = u[i, j]
        if tx == 0 and j > 0:
            tile[ty + 1, 0] = u[i, j - 1]
        if tx == BX - 1 and j < nx - 1:
            tile[ty + 1, BX + 1] = u[i, j + 1]
        if ty == 0 and i > 0:
            tile[0, tx + 1] = u[i - 1, j]
        if ty == BY - 1 and i < ny - 1:
            tile[BY + 1, tx + 1] = u[i + 1, j]
    cuda.syncthreads()
    if i < ny and j < nx:
        if i == 0 or j == 0 or i == ny - 1 or j == nx - 1:
            u_new[i, j] = u[i, j]
        else:
            c = tile[ty + 1, tx + 1]
            lap = (tile[ty, tx + 1] + tile[ty + 2, tx + 1] + tile[ty + 1, tx]
                   + tile[ty + 1, tx + 2] - float32(4.0) * c)
            u_new[i, j] = c + r * lap


@cuda.jit
def heat2d_plain_step(u, u_new, r):
    """The untiled twin of heat2d_halo_step."""
    i, j = cuda.grid(2)
    ny, nx = u.shape
    if i < ny and j < nx:
        if i == 0 or j == 0 or i == ny - 1 or j == nx - 1:
            u_new[i, j] = u[i, j]
        else:
            u_new[i, j] = u[i, j] + r * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1]
                                         + u[i, j + 1] - 4.0 * u[i, j])


def heat2d_initial_state(ny, nx, dtype=np.float64):
    y = np.linspace(0.0, 1.0, ny)[:, None]
    x = np.linspace(0.0, 1.0, nx)[None, :]
    return (np.sin(np.pi * x) * np.sin(np.pi * y) + 0.3 * x * y).astype(dtype)


def simulate_heat2d(u0, r, n_steps=3, kernel="halo"):
    """``n_steps`` diffusion steps; kernel is "halo", "halo_f32" or "plain"."""
    step = {"halo": heat2d_halo_step, "halo_f32": heat2d_halo_step_f32,
            "plain": heat2d_plain_step}[kernel]
    d_u = cuda.to_device(u0)
    d_new = cuda.device_array_like(d_u)
    ny, nx = u0.shape
    if kernel == "plain":
        grid = ((ny + BY - 1) // BY, (nx + BX - 1) // BX)
    else:
        grid = ((nx + BX - 1) // BX, (ny + BY - 1) // BY)
    for _ in range(n_steps):
        step[grid, (BX, BY)](d_u, d_new, r)
        d_u, d_new = d_new, d_u
    return d_u.copy_to_host()


# --- 5. NVIDIA's Laplace / heat example with grid-wide sync ----------------------------------
# (numba documentation, "Cooperative Groups": one launch runs every time step)

@cuda.jit
def solve_heat_equation(buf_0, buf_1, timesteps, k):
    i = cuda.grid(1)

    # Don't continue if our index is outside the domain
    if i >= len(buf_0):
        return

    # Prepare to do a grid-wide synchronization later
    grid = cuda.cg.this_grid()

    for step in range(timesteps):
        # Select the buffer from the previous timestep
        if (step % 2) == 0:
            data = buf_0
            next_data = buf_1
        else:
            data = buf_1
            next_data = buf_0

        # Get the current temperature associated with this point
        curr_temp = data[i]

        # Apply formula from finite difference equation
        if i == 0:
            # Left wall is held at T = 0
            next_temp = curr_temp + k * (data[i + 1] - (2 * curr_temp))
        elif i == len(data) - 1:
            # Right wall is held at T = 0
            next_temp = curr_temp + k * (data[i - 1] - (2 * curr_temp))
        else:
            # Interior points are a weighted average of their neighbors
            next_temp = curr_temp + k * (
                data[i - 1] - (2 * curr_temp) + data[i + 1]
            )

        # Write new value to the next buffer
        next_data[i] = next_temp

        # Wait for every thread to write before moving on
        grid.sync()


def laplace_initial_state(size=1001):
    data = np.zeros(size)
    data[size // 2] = 10000.0
    return data


def simulate_laplace(data, k=0.25, timesteps=20, threads_per_block=256):
    """Final temperature after ``timesteps`` steps, all in one cooperative launch."""
    size = data.shape[0]
    buf_0 = cuda.to_device(data)
    buf_1 = cuda.device_array_like(buf_0)
    blocks = (size + threads_per_block - 1) // threads_per_block
    solve_heat_equation[blocks, threads_per_block](buf_0, buf_1, timesteps, k)
    return (buf_0 if timesteps % 2 == 0 else buf_1).copy_to_host()


# --- 6. syncthreads inside a loop: block-local Jacobi smoothing ------------------------------

SMOOTH_TPB = 16


@cuda.jit
def block_jacobi_smooth(u, out, n_iter, w):
    """Each block smooths its own segment ``n_iter`` times in shared memory (ends held)."""
    seg = cuda.shared.array(SMOOTH_TPB, dtype=float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    n = u.shape[0]
    if i < n:
        seg[t] = u[i]
    else:
        seg[t] = 0.0
    cuda.syncthreads()
    last = min(SMOOTH_TPB, n - cuda.blockIdx.x * SMOOTH_TPB) - 1
    for it in range(n_iter):
        new = seg[t]
        if 0 < t < last:
            new = (1.0 - w) * seg[t] + 0.5 * w * (seg[t - 1] + seg[t + 1])
        cuda.syncthreads()
        seg[t] = new
        cuda.syncthreads()
    if i < n:
        out[i] = seg[t]


def smooth_blocks(u0, n_iter=4, w=0.8):
    d_u = cuda.to_device(u0)
    d_out = cuda.device_array_like(d_u)
    n = u0.shape[0]
    blocks = (n + SMOOTH_TPB - 1) // SMOOTH_TPB
    block_jacobi_smooth[blocks, SMOOTH_TPB](d_u, d_out, n_iter, w)
    return d_out.copy_to_host()


# --- 7. syncthreads_count / syncthreads_or: block-wide votes ----------------------------------

@cuda.jit
def count_hot_cells(u, threshold, counts, any_hot):
    """Per block: how many cells exceed ``threshold`` and whether any does."""
    i = cuda.grid(1)
    hot = 0
    if i < u.shape[0] and u[i] > threshold:
        hot = 1
    c = cuda.syncthreads_count(hot)
    a = cuda.syncthreads_or(hot)
    if cuda.threadIdx.x == 0:
        counts[cuda.blockIdx.x] = c
        any_hot[cuda.blockIdx.x] = a


# --- 8. a device function that synchronises (barriers need not be in the kernel body) --------

@cuda.jit(device=True)
def load_tile_and_sync(u, tile, i, t):
    if i < u.shape[0]:
        tile[t] = u[i]
    else:
        tile[t] = 0.0
    cuda.syncthreads()


@cuda.jit
def neighbour_average_tiled(u, out):
    """out[i] = mean of u[i-1..i+1] inside each block (block edges use what they have)."""
    tile = cuda.shared.array(SMOOTH_TPB, dtype=float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    load_tile_and_sync(u, tile, i, t)
    if i < u.shape[0]:
        left = tile[t - 1] if t > 0 else tile[t]
        right = tile[t + 1] if t < SMOOTH_TPB - 1 else tile[t]
        out[i] = (left + tile[t] + right) / 3.0


def neighbour_average(u0):
    d_u = cuda.to_device(u0)
    d_out = cuda.device_array_like(d_u)
    blocks = (u0.shape[0] + SMOOTH_TPB - 1) // SMOOTH_TPB
    neighbour_average_tiled[blocks, SMOOTH_TPB](d_u, d_out)
    return d_out.copy_to_host()
