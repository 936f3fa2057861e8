"""Kernel arguments that are tuples holding duals: ``kernel[g, b]((u, v), out, (a, b))``.

numba.cuda passes tuples of arrays and numbers to kernels. Under the driver such a
tuple holds DualArrays or Duals, and the cpu and GPU backends' lane tiles (a launch
of many directions runs them a few lanes at a time, see :mod:`dualgpu.core.lanes`) work on
top-level arguments. So a launch with such tuples runs a generated kernel whose
parameters are the tuples' members, one by one; it rebuilds the tuples and calls the
kernel's body, compiled as a device function, with them::

    def _dg_flat(a0, a1_0, a1_1, a2_0, a2_1):
        body(a0, (a1_0, a1_1), (a2_0, a2_1))

The kernel's source is unchanged, and tuples without duals pass as they are. This module
holds the pure part (the structure, the flattening, the source);
:func:`dualgpu.porting.kernel.flat_kernel` builds the kernel.

Examples
--------
>>> print(flat_source("_dg_flat", (None, (None, None), (None, (None, None)))), end="")
def _dg_flat(a0, a1_0, a1_1, a2_0, a2_1_0, a2_1_1):
    body(a0, (a1_0, a1_1), (a2_0, (a2_1_0, a2_1_1)))
"""
from dualgpu.core.dual import Dual
from dualgpu.core.dualarray import DualArray

__all__ = ["holds_duals", "structure", "flatten", "flat_source"]


def holds_duals(arg):
    """True for a tuple holding a Dual or DualArray at any depth (a namedtuple is passed as it
    is: the kernel may read its fields by name)."""
    return type(arg) is tuple and any(
        isinstance(x, (Dual, DualArray)) or holds_duals(x) for x in arg)


def structure(args):
    """Per argument: None (passed as it is) or the tuple of its members' structures."""
    def of(arg, top):
        if type(arg) is tuple and (not top or holds_duals(arg)):
            return tuple(of(x, False) for x in arg)
        return None
    return tuple(of(a, True) for a in args)


def flatten(args, shape):
    """The generated kernel's arguments: the members of the tuples ``shape`` marks."""
    flat = []
    for arg, sub in zip(args, shape):
        if sub is None:
            flat.append(arg)
        else:
            flat += flatten(arg, sub)
    return flat


def flat_source(name, shape):
    """Source of the generated kernel for arguments of structure ``shape``."""
    params = []

    def rebuild(sub, prefix):
        if sub is None:
            params.append(prefix)
            return prefix
        members = [rebuild(s, f"{prefix}_{k}") for k, s in enumerate(sub)]
        return "(" + ", ".join(members) + ("," if len(members) == 1 else "") + ")"

    call = [rebuild(sub, f"a{k}") for k, sub in enumerate(shape)]
    return f"def {name}({', '.join(params)}):\n    body({', '.join(call)})\n"

