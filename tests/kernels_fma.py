"""A kernel with ``cuda.fma`` (written as numba.cuda users write it, ported by the import)."""
from dualgpu import cuda


@cuda.jit
def fused(a, b, c, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = cuda.fma(a[i], b[i], c[i])


@cuda.jit
def fused_scalar(a, s, out):
    # a scalar operand of another type: float32 arrays with a Python float (computed in float64)
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = cuda.fma(a[i], s, 1)
