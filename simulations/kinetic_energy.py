"""Total kinetic energy of N bodies by a two-stage shared-memory reduction (block-level kernel).

Physics
-------
``E = sum_i 0.5 m_i |v_i|^2``: its derivative with respect to the masses is ``0.5 |v_i|^2``,
with respect to the velocities ``m_i v_i``.

Kernels
-------
The reduction as CUDA tutorials write it: each block of ``TPB`` threads puts one term per thread
in shared memory and halves the active threads in a ``while`` loop with ``cuda.syncthreads()``;
a second kernel adds the per-block sums. It exercises shared memory and barriers in loops, which
the cpu backend runs by cutting the kernel at its barriers (:mod:`dualgpu.backends.cpu.blocks`).

Examples
--------
>>> import numpy as np
>>> import dualgpu
>>> from simulations.kinetic_energy import kinetic_energy
>>> with dualgpu.using_backend("cpu"):
...     kinetic_energy(np.ones((20, 3)), np.full(20, 2.0)).tolist()
[60.0]
"""
import numpy as np
from numba import float64

from dualgpu import cuda  # was: from numba import cuda

__all__ = ["TPB", "kinetic_energy", "kinetic_energy_partial", "sum_partials"]

#: Threads per block of the first stage (a power of two: the tree halves it).
TPB = 16


@cuda.jit
def kinetic_energy_partial(vel, mass, partial):
    """Each block sums 0.5 m |v|^2 of its bodies: tree reduction with syncthreads in a loop."""
    sdata = cuda.shared.array(TPB, dtype=float64)
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
    """Return the total kinetic energy, shape ``(1,)``, of bodies with velocities ``vel`` (n, 3)
    and masses ``mass`` (n,)."""
    d_vel = cuda.to_device(vel)
    d_mass = cuda.to_device(mass)
    blocks = (vel.shape[0] + TPB - 1) // TPB
    d_partial = cuda.device_array(blocks, dtype=np.float64)
    d_total = cuda.device_array(1, dtype=np.float64)
    kinetic_energy_partial[blocks, TPB](d_vel, d_mass, d_partial)
    sum_partials[1, 1](d_partial, d_total)
    return d_total.copy_to_host()
