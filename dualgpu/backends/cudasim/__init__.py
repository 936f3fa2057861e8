"""The ``cudasim`` backend: numba's CUDA simulator, with duals as Python objects."""
