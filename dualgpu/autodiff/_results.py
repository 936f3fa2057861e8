"""Where the driver writes each chunk's partials, and the check that the result fits in memory.

The result is allocated once, after the first run of ``f`` (the output's shape is
known only then) and before any of it is written, and each chunk's partials go
straight into their final place: the peak is the result itself (1x), not the
result plus a transposed copy.

* :class:`DirectionMajor` -- ``jvp``/``jvp_batch``: per output, ``(n_directions, *S)``;
* :class:`JacobianBlocks` -- dense Jacobians: per output and differentiated
  argument, a C-ordered block of shape ``S + input.shape`` (JAX's layout); a chunk
  of directions fills columns of its ``(output.size, input.size)`` view.

Before allocating, :func:`check_fits` refuses a result larger than the memory
available, with the size and what to do instead.
"""
import os
import time

import numpy as np

from dualgpu.errors import DualgpuError

__all__ = ["available_memory", "check_fits", "DirectionMajor", "JacobianBlocks"]


#: seconds a reading of the memory available is reused (a driver call on a small simulation
#: took 40 us of its 140 us to read /proc/meminfo; an allocation that fails anyway is
#: refused by :func:`_zeros`)
MEMORY_READING_S = 0.25

_READING = [-1e9, None]  # (time.monotonic() of the last reading, its bytes)


def available_memory():
    """Bytes of memory available to a new allocation now, or None where it cannot be told
    (a reading at most :data:`MEMORY_READING_S` old)."""
    now = time.monotonic()
    if now - _READING[0] < MEMORY_READING_S:
        return _READING[1]
    _READING[1] = _read_available_memory()
    _READING[0] = now
    return _READING[1]


def _read_available_memory():
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def _size(nbytes):
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes} bytes"


def check_fits(nbytes, what, fname):
    """Raise DualgpuError when ``nbytes`` exceed the memory available (``what`` describes them)."""
    available = available_memory()
    if available is None or nbytes <= available:
        return
    raise DualgpuError(
        f"{fname}: {what} needs {_size(nbytes)}, more than the {_size(available)} of memory "
        "available now; nothing was allocated. Fix: if the Jacobian is sparse (a stencil, a "
        "local coupling), pass sparsity='detect' (or a pattern) for a scipy.sparse result; "
        "differentiate fewer arguments (argnums) or a smaller output; or compute only the "
        "directions you need with dualgpu.jvp_batch."
    )


def _zeros(shape, dtype, what, fname):
    try:
        return np.zeros(shape, dtype)
    except MemoryError:  # the check passed but the allocation did not
        raise DualgpuError(
            f"{fname}: could not allocate {what} "
            f"({_size(int(np.prod(shape)) * np.dtype(dtype).itemsize)}"
            "). Fix: as for a result larger than memory: sparsity=, fewer argnums, or jvp_batch."
        ) from None


def _zero_dtype(values):
    return np.result_type(values.dtype, np.float32)


class DirectionMajor:
    """Per output: the tangents of every direction, shape ``(n_directions, *S)``."""

    def __init__(self, n_directions):
        self.n = n_directions
        self.partials = self.layouts = None

    def allocate(self, values, layouts, fname):
        """``layouts[o]``: ``(S, dtype)`` of output o's partials, or None for a plain output."""
        self.layouts = layouts
        dtypes = [layout[1] if layout else _zero_dtype(v) for v, layout in zip(values, layouts)]
        nbytes = sum(self.n * v.size * np.dtype(dt).itemsize for v, dt in zip(values, dtypes))
        check_fits(nbytes, f"the tangents of {self.n} direction(s)", fname)
        self.partials = [_zeros((self.n,) + v.shape, dt, "the tangents", fname)
                         for v, dt in zip(values, dtypes)]

    def store(self, output, start, count, used):
        self.partials[output][start:start + count] = used

    def result(self, output):
        return self.partials[output]


class JacobianBlocks:
    """Per output and differentiated input, the Jacobian block ``S + input.shape``."""

    def __init__(self, inputs):
        self.inputs = inputs
        self.blocks = None

    def allocate(self, values, layouts, fname):
        n = sum(item.size for item in self.inputs)
        dtypes = [layout[1] if layout else _zero_dtype(v) for v, layout in zip(values, layouts)]
        nbytes = sum(v.size * n * np.dtype(dt).itemsize for v, dt in zip(values, dtypes))
        shapes = " and ".join(f"{v.shape}" for v in values)
        check_fits(nbytes, f"the dense Jacobian (output shape {shapes} x {n} input entries)",
                   fname)
        self.blocks = [
            [_zeros(v.shape + item.shape, dt, "the Jacobian", fname) for item in self.inputs]
            for v, dt in zip(values, dtypes)
        ]

    def store(self, output, start, count, used):
        flat = used.reshape(count, -1)
        m = flat.shape[1]
        for item, block in zip(self.inputs, self.blocks[output]):
            lo = max(start, item.offset)
            hi = min(start + count, item.offset + item.size)
            if lo < hi:  # columns lo..hi of this input, straight into the final layout
                block.reshape(m, item.size)[:, lo - item.offset:hi - item.offset] = \
                    flat[lo - start:hi - start].T

    def result(self, output):
        return self.blocks[output]
