"""The driver's message for a non-finite derivative: where it came from, as far as it can tell.

The driver refuses a NaN or infinite partial in f's output. What the user needs
to know is the source: the inputs may already hold NaN/inf (the simulation
only carried them through), the output value itself may be non-finite (the
simulation blew up), or a finite value may have an infinite derivative (a
factor such as ``sqrt`` at 0, or an overflow) that ``inf * 0`` spread to the
other directions.
"""
import numpy as np

from dualgpu.core.dual import Dual
from dualgpu.core.dualarray import DualArray

__all__ = ["non_finite_inputs", "message"]

_LISTED = 4  # sources named in full


def _host(array):
    if hasattr(array, "copy_to_host") and not isinstance(array, np.ndarray):
        array = array.copy_to_host()
    return np.asarray(array)


def _describe(name, array):
    """``"name has k non-finite entries, first name[i] = nan"``, or None when all are finite."""
    array = np.asarray(array)
    if array.dtype.kind not in "fc":
        return None
    bad = ~np.isfinite(array)
    if not bad.any():
        return None
    count = int(bad.sum())
    if not array.ndim:
        return f"{name} is {array[()]}"
    first = np.unravel_index(int(np.argmax(bad)), array.shape)
    return (f"{name} has {count} non-finite entr{'y' if count == 1 else 'ies'}, the first at "
            f"[{', '.join(map(str, first))}] = {array[first]}")


def _walk(name, value, found, seen):
    if id(value) in seen or len(found) > _LISTED:
        return
    seen.add(id(value))
    if isinstance(value, DualArray):
        _walk(f"{name}.values", _host(value.values), found, seen)
        _walk(f"{name}.partials", _host(value.partials), found, seen)
    elif isinstance(value, Dual):
        _walk(f"{name}.value", np.asarray(value.value), found, seen)
        _walk(f"{name}.partials", value.partials, found, seen)
    elif isinstance(value, (np.ndarray, float, np.floating)) or (
            hasattr(value, "copy_to_host") and hasattr(value, "shape")):
        text = _describe(name, _host(value))
        if text:
            found.append(text)
    elif isinstance(value, (tuple, list)):
        for k, item in enumerate(value):
            _walk(f"{name}[{k}]", item, found, seen)
    elif isinstance(value, dict):
        for key, item in value.items():
            _walk(f"{name}[{key!r}]", item, found, seen)


def non_finite_inputs(args, kwargs, seeded, tangents=()):
    """Descriptions of every NaN/inf found in f's arguments (and the jvp tangents).

    ``seeded``: the positions of the differentiated arguments; ``tangents``:
    ``(position, array)`` of the tangents given to jvp/jvp_batch.
    """
    found, seen = [], set()
    for p, arg in enumerate(args):
        kind = "differentiated" if p in seeded else "not differentiated"
        _walk(f"argument {p} ({kind})", arg, found, seen)
    for key, arg in kwargs.items():
        _walk(f"keyword argument {key!r}", arg, found, seen)
    for p, tangent in tangents:
        _walk(f"the tangent of argument {p}", tangent, found, seen)
    return found


def message(fname, value, output, index, primal, direction, sources):
    """The full error text (see the module docstring)."""
    head = (f"{fname}: non-finite derivative {value} of output {output}{index} (value {primal}) "
            f"with respect to {direction}; this is the first such entry. Expected finite "
            "partials. ")
    if sources:
        listed = "; ".join(sources[:_LISTED]) + ("; ..." if len(sources) > _LISTED else "")
        return head + (
            f"The inputs already contain non-finite values: {listed}. The simulation carried "
            "them into the result. Fix: give f finite inputs (check how they were made), or "
            "leave the affected entries out of what you differentiate."
        )
    if not np.isfinite(primal):
        return head + (
            "The inputs are all finite, and the output value there is itself non-finite: the "
            "simulation produced it (an instability, an overflow or an invalid operation such "
            "as 0/0 or sqrt(-1)), not just its derivative. Fix: make the simulation stable for "
            "these inputs (smaller time step, bounded parameters), then differentiate."
        )
    return head + (
        "The inputs are all finite and so is the value: the simulation passes a point where a "
        "derivative is infinite (sqrt(0), x**0.5 at 0, log(0), asin(1), division by zero) or "
        "a derivative overflows (float32 reaches inf near 3.4e38). An infinite factor times a "
        "zero partial also gives nan in directions that do not touch it: set "
        "DUALGPU_NANSAFE_MODE=1 before importing dualgpu to keep those zero. Fix: avoid the "
        "singular point (e.g. sqrt(x + eps)), or use float64."
    )
