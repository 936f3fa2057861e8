"""``numba.cuda.random`` on every backend: ``from dualgpu.cuda.random import ...``.

Stochastic simulations (Langevin dynamics, Euler-Maruyama ensembles) draw numbers in kernels
with numba.cuda's xoroshiro128+ generators. Their device functions
(``xoroshiro128p_normal_float64(states, i)``...) are numba's own: the GPU compiles them, the
cpu backend compiles them too and the cudasim backend runs their Python. What needs a GPU is
numba's host side, which allocates the state array on the device: here
:func:`create_xoroshiro128p_states` and :func:`init_xoroshiro128p_states` give host arrays on
the cpu and cudasim backends, and are numba's on the GPU. The same seed gives the same states,
so a simulation draws the same numbers on every backend.

Port ``from numba.cuda.random import ...`` as ``from dualgpu.cuda.random import ...`` (or use
``cuda.random.`` after ``from dualgpu import cuda``). A derivative through a stochastic
simulation is the derivative of that one draw (the states are plain arrays, not differentiated).

Examples
--------
>>> import dualgpu
>>> from dualgpu.cuda import random
>>> with dualgpu.using_backend("cpu"):
...     states = random.create_xoroshiro128p_states(4, seed=1)
>>> type(states).__name__, states.dtype == random.xoroshiro128p_dtype
('ndarray', True)
"""
import numpy as np
from numba.cuda import random as _random
from numba.cuda.random import (  # noqa: F401  (the device side: numba's own functions)
    init_xoroshiro128p_state, init_xoroshiro128p_states_cpu, uint64_to_unit_float32,
    uint64_to_unit_float64, xoroshiro128p_jump, xoroshiro128p_next,
    xoroshiro128p_normal_float32, xoroshiro128p_normal_float64,
    xoroshiro128p_uniform_float32, xoroshiro128p_uniform_float64,
)

from dualgpu.core.selection import backend

xoroshiro128p_dtype = _random.xoroshiro128p_dtype
"""numpy dtype of one generator state (numba.cuda's): two uint64 words, ``s0`` and ``s1``."""

xoroshiro128p_type = _random.xoroshiro128p_type
"""numba type of one generator state (numba.cuda's), for kernel signatures."""

__all__ = [
    "create_xoroshiro128p_states", "init_xoroshiro128p_states", "init_xoroshiro128p_states_cpu",
    "init_xoroshiro128p_state", "xoroshiro128p_dtype", "xoroshiro128p_type",
    "xoroshiro128p_next", "xoroshiro128p_jump", "xoroshiro128p_uniform_float32",
    "xoroshiro128p_uniform_float64", "xoroshiro128p_normal_float32",
    "xoroshiro128p_normal_float64", "uint64_to_unit_float32", "uint64_to_unit_float64",
]


def create_xoroshiro128p_states(n, seed, subsequence_start=0, stream=0):
    """Return ``n`` seeded generator states (numba.cuda's function; a host array off the GPU).

    Parameters
    ----------
    n : int
        Number of states: one per thread that draws numbers.
    seed : int
        The seed; the same seed gives the same states on every backend.
    subsequence_start : int
        Index of the first state's subsequence (each state jumps 2**64 draws ahead).
    stream : int or numba.cuda stream
        The CUDA stream of the GPU allocation (ignored off the GPU).

    Returns
    -------
    numpy.ndarray or numba.cuda device array
        ``n`` states of dtype :data:`xoroshiro128p_dtype`: a device array on the ``cuda``
        backend, a host array on ``cpu`` and ``cudasim``.

    Examples
    --------
    >>> import dualgpu
    >>> from dualgpu.cuda import random
    >>> with dualgpu.using_backend("cpu"):
    ...     states = random.create_xoroshiro128p_states(8, seed=42)
    >>> states.shape
    (8,)
    """
    if backend() == "cuda":
        return _random.create_xoroshiro128p_states(n, seed, subsequence_start, stream)
    states = np.empty(int(n), dtype=xoroshiro128p_dtype)
    init_xoroshiro128p_states_cpu(states, seed, subsequence_start)
    return states


def init_xoroshiro128p_states(states, seed, subsequence_start=0, stream=0):
    """Seed ``states`` in place (numba.cuda's function; host arrays off the GPU).

    Parameters
    ----------
    states : numpy.ndarray or numba.cuda device array
        States of dtype :data:`xoroshiro128p_dtype`, overwritten.
    seed : int
        The seed; the same seed gives the same states on every backend.
    subsequence_start : int
        Index of the first state's subsequence.
    stream : int or numba.cuda stream
        The CUDA stream of a device array's initialisation (ignored for host arrays).

    Examples
    --------
    >>> import numpy as np
    >>> from dualgpu.cuda import random
    >>> states = np.empty(4, dtype=random.xoroshiro128p_dtype)
    >>> random.init_xoroshiro128p_states(states, seed=1)
    >>> bool((states == random.create_xoroshiro128p_states(4, seed=1)).all())
    True
    """
    if isinstance(states, np.ndarray):
        init_xoroshiro128p_states_cpu(states, seed, subsequence_start)
    else:
        _random.init_xoroshiro128p_states(states, seed, subsequence_start, stream)
