"""Copies of kernel and device functions with some of their globals replaced.

The simulator and GPU backends run a kernel's own code object; what changes is
what its global names refer to (``cuda`` must be numba.cuda itself for numba's
typing, ``math`` must be dual-aware under the simulator, device functions must
be the backend's own versions). This module makes such copies; the original
function and its module are never touched.
"""
import types as pytypes

__all__ = ["SHUFFLES", "global_names", "rebind", "uses_dual_scratch"]

#: numba.cuda's warp shuffles: in a dual launch each must move a dual's partials too.
SHUFFLES = ("shfl_sync", "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync")

#: Global names whose presence means a dual launch may need dual scratch, tiles or shuffles.
_DUAL_SCRATCH_NAMES = frozenset(("local", "shared") + SHUFFLES)


def global_names(code):
    """All names a code object (and the code objects nested in it) may read as globals."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, pytypes.CodeType):
            names |= global_names(const)
    return names


def uses_dual_scratch(py_func):
    """True if ``py_func`` may use local or shared arrays or shuffles (names it reads, no typing)."""
    return bool(_DUAL_SCRATCH_NAMES & global_names(py_func.__code__))


def rebind(py_func, replace):
    """Return a copy of ``py_func`` with each global and closure value ``v`` replaced by ``replace(v)``.

    ``replace`` returns the value to use (the same object to keep it).
    """
    source_globals = py_func.__globals__
    new_globals = dict(source_globals)
    for name in global_names(py_func.__code__):
        if name in source_globals:
            new_globals[name] = replace(source_globals[name])
    closure = py_func.__closure__
    if closure is not None:
        cells = []
        for cell in closure:
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                cells.append(cell)
                continue
            cells.append(pytypes.CellType(replace(value)))
        closure = tuple(cells)
    copy = pytypes.FunctionType(
        py_func.__code__, new_globals, py_func.__name__, py_func.__defaults__, closure
    )
    copy.__kwdefaults__ = py_func.__kwdefaults__
    copy.__qualname__ = py_func.__qualname__
    copy.__module__ = py_func.__module__
    copy.__doc__ = py_func.__doc__
    copy.__wrapped__ = py_func
    return copy
