"""Floor 4, porting: unchanged numba.cuda kernels on every backend.

``kernel`` (``dualgpu.jit``, ``flat_kernel``), ``tuple_arguments``, ``signatures``,
``vectorize``, ``captured_duals``, ``memory`` (``to_device``, ``device_array*``, streams),
``host_api`` (events, pinned memory), ``devices`` (the device API off the GPU) and ``random``
(``numba.cuda.random``). :mod:`dualgpu.cuda` re-exports them.

Importing this package installs into :mod:`dualgpu.host.buffers` (the floor below) what it
needs from this one: :func:`~dualgpu.porting.memory.to_device` and
:func:`~dualgpu.porting.tuple_arguments.holds_duals`.
"""
from dualgpu.host import buffers as _host_buffers
from dualgpu.porting import memory as _memory
from dualgpu.porting import tuple_arguments as _tuple_arguments

__all__ = []

_host_buffers.register_porting(_memory.to_device, _tuple_arguments.holds_duals)
