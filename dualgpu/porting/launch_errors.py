"""What a failed launch's exception says, for the clear errors of :mod:`dualgpu.porting.kernel`.

numba's typing failures and the simulator's Python errors name the call that failed and,
somewhere in their text or traceback, the user's line; these helpers find them: a dual stored
into a plain array (and where), a call with no dual version, a store into a read-only array,
the innermost line of user code.
"""
import linecache
import os
import re

import numpy as np

from dualgpu.core._paths import PACKAGE_DIR
from dualgpu.core.dualarray import DualArray

__all__ = ["COMPILED_STORE", "PYTHON_FLOAT", "NUMBA_LOCATION", "SUBSCRIPT_STORE", "ANSI",
           "READ_ONLY_STORE", "read_only", "missing_dual_version", "kernel_line",
           "dual_store_target", "whole_array_operation"]

#: numba's message for a dual stored into a plain array (numba_arrays' setitem overload)
COMPILED_STORE = "is stored into a plain"
#: the Python dual's message when numpy converts it to a float (a store, or an explicit float())
PYTHON_FLOAT = "float(Dual) would drop the partials"
#: numba's locations in its messages: 'File "f.py", line 12' and 'at f.py (12)'
NUMBA_LOCATION = re.compile(r'File "([^"]+)", line (\d+)|at (\S+\.py) \((\d+)\)')
SUBSCRIPT_STORE = re.compile(r"^\s*([A-Za-z_]\w*)\s*\[.*\]\s*(?:[-+*/%]|//|\*\*)?=(?!=)")


#: numba's typing failure of a call: the function and the signature it was given
NO_IMPLEMENTATION = re.compile(
    r"No implementation of function Function\((.*?)\) found for signature:\s*>>> ([^\n]*)")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: numba's typing failure of a store into a read-only array
READ_ONLY_STORE = re.compile(r"setitem\(readonly array\(")


def read_only(a):
    """True for a numpy array, or a DualArray with a member, that cannot be written."""
    if isinstance(a, DualArray):
        return any(isinstance(m, np.ndarray) and not m.flags.writeable
                   for m in (a.values, a.partials))
    return isinstance(a, np.ndarray) and not a.flags.writeable


def missing_dual_version(exc):
    """``"sign(Dual(float64, 1))"`` when ``exc`` is numba's typing failure of a call on duals.

    The innermost such call, unless a dualgpu overload explains the failure itself (its
    message then follows in numba's text and is kept). None for any other error.
    """
    if type(exc).__name__ != "TypingError":
        return None
    text = ANSI.sub("", str(exc))
    calls = [m for m in NO_IMPLEMENTATION.finditer(text) if "Dual(" in m.group(2)]
    if not calls:
        return None
    last = calls[-1]
    candidates = text[last.end():].split("\nDuring:", 1)[0]  # numba's reasons for this call
    if re.search(r"dualgpu|partials|lanes", candidates):
        return None
    return last.group(2).strip()


def whole_array_operation(exc):
    """``"mul(float64, DualArray(...))"`` when ``exc`` is numba's typing failure of an
    operation on a whole dual array in a kernel (``2.0 * u[i]`` with u 2-D), else None."""
    if type(exc).__name__ != "TypingError":
        return None
    text = ANSI.sub("", str(exc))
    calls = [m for m in NO_IMPLEMENTATION.finditer(text) if "DualArray(" in m.group(2)
             and "setitem" not in m.group(2)]
    return calls[-1].group(2).strip() if calls else None


def kernel_line(exc):
    """``" (at file.py:12)"``: the innermost line of user code in ``exc``, or ""."""
    place = ""
    for found in NUMBA_LOCATION.findall(str(exc)):  # compiled: numba names it first
        filename, lineno = (found[0], found[1]) if found[0] else (found[2], found[3])
        if not (os.path.abspath(filename).startswith(PACKAGE_DIR)
                or "cpu-launchers" in filename):  # not dualgpu's generated launchers
            place = f"{os.path.abspath(filename)}:{lineno}"
            break
    tb = None if place else exc.__traceback__
    while tb is not None:  # the simulator: the innermost frame of user code
        filename = tb.tb_frame.f_code.co_filename
        if not (filename.startswith(PACKAGE_DIR) or f"{os.sep}numba" in filename
                or filename.startswith("<")):
            place = f"{filename}:{tb.tb_lineno}"
        tb = tb.tb_next
    return f" (at {place})" if place else ""


def dual_store_target(exc):
    """If ``exc`` reports a dual stored into a plain array: ``(name, "file:line")``.

    The name and place are "" where unknown. None when it is another error (an explicit
    ``float(dual)`` keeps its own message).
    """
    text = str(exc)
    if COMPILED_STORE in text:  # numba's message shows the kernel's line: read the store there
        for found in reversed(NUMBA_LOCATION.findall(text)):
            filename, lineno = (found[0], found[1]) if found[0] else (found[2], found[3])
            if os.path.abspath(filename).startswith(PACKAGE_DIR):
                continue  # dualgpu's own code (an atomic's store): not the kernel's line
            match = SUBSCRIPT_STORE.match(linecache.getline(filename, int(lineno)))
            if match:
                return match.group(1), f"{filename}:{lineno}"
        return "", ""
    if PYTHON_FLOAT not in text:
        return None
    store = None
    tb = exc.__traceback__
    while tb is not None:  # the innermost subscript store outside dualgpu: the kernel's line
        filename = tb.tb_frame.f_code.co_filename
        line = linecache.getline(filename, tb.tb_lineno)
        if (not filename.startswith(PACKAGE_DIR) and SUBSCRIPT_STORE.match(line)
                and f"{os.sep}numba" not in filename):  # not numba's simulator (atomics)
            store = (line, f"{filename}:{tb.tb_lineno}")
        tb = tb.tb_next
    if store is None or "float(" in store[0]:  # an explicit float(dual) keeps its own message
        return None
    return SUBSCRIPT_STORE.match(store[0]).group(1), store[1]
