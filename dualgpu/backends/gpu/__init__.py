"""The ``cuda`` backend: real numba.cuda kernels, with dual arguments marshalled in."""
