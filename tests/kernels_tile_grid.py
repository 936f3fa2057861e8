"""Kernels for the GPU backend's lane tiles in one launch (``dualgpu.backends.gpu.tile_grid``).

Written as numba.cuda users write them: out-of-place stencils on 1-D and 2-D grids, with a
device function (safe to run every lane tile at once), and kernels that read the grid's third
dimension (not safe). Shared and local memory kernels come from ``block_kernels`` and
``kernels_tiles``.
"""
from numba import cuda


@cuda.jit(device=True)
def laplacian(u, i, n):
    return u[(i - 1) % n] - 2.0 * u[i] + u[(i + 1) % n]


@cuda.jit
def heat_step(u, out, r):
    i = cuda.grid(1)
    n = u.shape[0]
    if i < n:
        out[i] = u[i] + r * laplacian(u, i, n)


@cuda.jit
def wave_2d(u, out, c):
    i, j = cuda.grid(2)
    ny, nx = u.shape
    if 0 < i < ny - 1 and 0 < j < nx - 1:
        out[i, j] = c * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]) - u[i, j] ** 2
    elif i < ny and j < nx:
        out[i, j] = u[i, j]


@cuda.jit
def reads_block_z(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = x[i] * (1 + cuda.blockIdx.z)


@cuda.jit
def grid_3d(x, out):
    i, j, k = cuda.grid(3)
    if i < x.shape[0] and j == 0 and k == 0:
        out[i] = 2.0 * x[i]


@cuda.jit(device=True)
def layer_count():
    return cuda.gridDim.z


@cuda.jit
def z_through_device(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = x[i] * layer_count()
