"""The kernel as it was before the one-line port: numba.cuda (simulated) with the real math.

Shared by the porting tests: ``original(kernel)`` rebinds a dualgpu kernel's function to
numba.cuda and its dualgpu device functions to simulator device functions.
"""
import contextlib

import numba.cuda
import numpy as np
from numba.cuda import simulator

import dualgpu.cuda
from dualgpu.backends.common.rebind import rebind


def _unport(value):
    if value is dualgpu.cuda:
        return numba.cuda
    if getattr(value, "__dualgpu_device__", False) is True:
        return simulator.jit(device=True)(rebind(value.py_func, _unport))
    return value


def original(kernel):
    """The kernel as it was before the port: numba.cuda (simulated) with the real math."""
    return simulator.jit(rebind(kernel.py_func, _unport))


class SimulatedHost:
    """The host side of ``from numba import cuda`` under numba's simulator, for unported runs."""

    to_device = staticmethod(lambda a, stream=0: simulator.to_device(np.array(a, copy=True)))
    device_array = staticmethod(lambda shape, dtype=np.float64, stream=0:
                                simulator.device_array(shape, dtype))
    device_array_like = staticmethod(lambda a, stream=0: simulator.device_array(a.shape, a.dtype))
    stream = staticmethod(simulator.stream)
    synchronize = staticmethod(simulator.synchronize)
    event = staticmethod(simulator.event)
    event_elapsed_time = staticmethod(lambda a, b: a.elapsed_time(b))
    pinned_array = staticmethod(simulator.pinned_array)
    pinned_array_like = staticmethod(simulator.pinned_array_like)
    pinned = staticmethod(lambda *arrays: contextlib.nullcontext())
    defer_cleanup = staticmethod(simulator.defer_cleanup)


def run_unported(module, sims, unport=original, **replace):
    """``{name: tuple of outputs}`` of each simulation ``sims[name] = (f, args, ...)`` with
    ``module``'s dualgpu kernels unported (``unport``), its ``cuda`` the simulator's host side
    and its other globals ``replace``-d; the module is restored afterwards."""
    kernels = {n: v for n, v in vars(module).items() if getattr(v, "__dualgpu_kernel__", 0)}
    saved = dict(vars(module))
    try:
        vars(module).update({n: unport(k) for n, k in kernels.items()}, cuda=SimulatedHost,
                            **replace)
        results = {}
        for name, (f, args, *_) in sims.items():
            out = f(*args)
            results[name] = out if isinstance(out, tuple) else (out,)
        return results
    finally:
        vars(module).update(saved)
