"""Floor 4, porting: unchanged numba.cuda kernels on every backend.

``kernel`` (``dualgpu.jit``), ``tuple_arguments``, ``signatures``, ``vectorize``,
``captured_duals``, ``host_api`` (events, pinned memory), ``devices`` (the device API off the
GPU) and ``random`` (``numba.cuda.random``). :mod:`dualgpu.cuda` re-exports them.
"""
