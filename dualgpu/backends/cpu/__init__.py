"""The compiled CPU backend: run an unchanged numba.cuda kernel with numba on the CPU."""
