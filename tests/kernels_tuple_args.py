"""Kernels taking tuples of arrays and of scalars (numba.cuda passes them), ported by the import."""
from dualgpu import cuda


@cuda.jit
def mix(fields, out, coef):
    i = cuda.grid(1)
    u, v = fields
    if i < u.shape[0]:
        out[i] = coef[0] * u[i] * v[i] + coef[1]


@cuda.jit
def relax(state, rate):
    # writes through a tuple member: state[1] <- state[1] + rate * (state[0] - state[1])
    i = cuda.grid(1)
    if i < state[0].shape[0]:
        state[1][i] += rate * (state[0][i] - state[1][i])


@cuda.jit
def nested(pair_and_scale, out):
    i = cuda.grid(1)
    (a, b), s = pair_and_scale
    if i < out.shape[0]:
        out[i] = s * (a[i] - b[i]) ** 2
