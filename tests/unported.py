"""The kernel as it was before the one-line port: numba.cuda (simulated) with the real math.

Shared by the porting tests: ``original(kernel)`` rebinds a dualgpu kernel's function to
numba.cuda and its dualgpu device functions to simulator device functions.
"""
import numba.cuda
from numba.cuda import simulator

import dualgpu.cuda
from dualgpu.backends._rebind import rebind


def _unport(value):
    if value is dualgpu.cuda:
        return numba.cuda
    if getattr(value, "__dualgpu_device__", False) is True:
        return simulator.jit(device=True)(rebind(value.py_func, _unport))
    return value


def original(kernel):
    """The kernel as it was before the port: numba.cuda (simulated) with the real math."""
    return simulator.jit(rebind(kernel.py_func, _unport))
