"""A stochastic kernel written with numba.cuda's generators, ported by the import lines."""
import numpy as np

from dualgpu import cuda
from dualgpu.cuda.random import (
    create_xoroshiro128p_states, xoroshiro128p_normal_float64, xoroshiro128p_uniform_float32,
)


@cuda.jit
def euler_maruyama(x, states, mu, sigma, dt):
    # geometric Brownian motion, one path per thread
    i = cuda.grid(1)
    if i < x.shape[0]:
        z = xoroshiro128p_normal_float64(states, i)
        x[i] += mu * x[i] * dt + sigma * x[i] * z * dt ** 0.5


@cuda.jit
def jitter(x, states, amplitude):
    i = cuda.grid(1)
    if i < x.shape[0]:
        x[i] = x[i] + amplitude * (xoroshiro128p_uniform_float32(states, i) - 0.5)


def simulate(mu, sigma, n=16, steps=20, seed=7, dt=0.01):
    states = create_xoroshiro128p_states(n, seed=seed)
    x = cuda.to_device(np.ones(n))
    for _ in range(steps):
        euler_maruyama[(n + 31) // 32, 32](x, states, mu, sigma, dt)
    return x.copy_to_host()

