"""Copies of kernel and device functions with some of their globals replaced.

The simulator and GPU backends run a kernel's own code object; what changes is
what its global names refer to (``cuda`` must be numba.cuda itself for numba's
typing, ``math`` must be dual-aware under the simulator, device functions must
be the backend's own versions). This module makes such copies; the original
function and its module are never touched.

Globals are frozen at a function's first copy, as numba freezes them at its first compile:
every later copy (the dual one made at the first dual launch, another lane count) reads the
values the first copy read, so a global changed between launches cannot give a Jacobian of
another function than the plain runs compute (issue 43 S5). Duals are never frozen: a dual a
kernel captures is a hidden argument (:mod:`dualgpu.porting.captured_duals`), or read live
where it cannot be lifted.
"""
import types as pytypes
import weakref

from dualgpu.core import casting
from dualgpu.core.dual import Dual
from dualgpu.core.dualarray import DualArray

__all__ = ["SHUFFLES", "frozen_plain", "frozen_values", "global_names", "rebind",
           "uses_dual_scratch"]

#: py_func -> the values of its globals and closure cells at its first copy
_FROZEN = weakref.WeakKeyDictionary()

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
    """True if ``py_func`` may use local or shared arrays or shuffles (names it reads, no
    typing)."""
    return bool(_DUAL_SCRATCH_NAMES & global_names(py_func.__code__))


def _live(value):
    return isinstance(value, (Dual, DualArray))


def _kernel_value(value):
    """What a kernel's global or closure value is in kernels: dualgpu's host casts
    ``dualgpu.float32``/``float64`` (a port of ``from numba import cuda, float32`` edits the
    import line to ``from dualgpu import cuda, float32``) are numba's types there, a cast and a
    dtype (``cuda.local.array(4, dtype=float32)``) as numba.cuda has them."""
    if value is casting.float32 or value is casting.float64:
        from numba.core import types

        return types.float32 if value is casting.float32 else types.float64
    return value


def frozen_values(py_func):
    """``(globals, cells)``: the values ``py_func``'s global names and closure cells had at
    its first copy (read now on the first call): ``{name: value}`` and one value per cell
    (an empty cell stays the cell itself). Duals are left out of ``globals`` and read live.
    """
    try:
        frozen = _FROZEN[py_func]
    except (KeyError, TypeError):
        frozen = None
    source_globals = py_func.__globals__
    if frozen is None:
        frozen_globals = {name: _kernel_value(source_globals[name])
                          for name in global_names(py_func.__code__)
                          if name in source_globals and not _live(source_globals[name])}
        cells = []
        for cell in py_func.__closure__ or ():
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                value = cell
            cells.append(cell if _live(value) else _kernel_value(value))
        frozen = (frozen_globals, tuple(cells))
        try:
            _FROZEN[py_func] = frozen
        except TypeError:
            pass
    cells = []
    for cell, value in zip(py_func.__closure__ or (), frozen[1]):
        if value is cell:  # empty at the first copy, or a dual: read now
            try:
                value = cell.cell_contents
            except ValueError:
                value = cell
        cells.append(value)
    return frozen[0], tuple(cells)


def frozen_plain(py_func, name, cell=None):
    """``(True, value)`` where ``py_func``'s first copy froze the global ``name`` (or the
    closure ``cell``) at a value holding no dual (numba's rule: its plain runs keep that value
    whatever the name holds later); ``(False, None)`` before its first copy, or where the
    value is read live (a Dual then, or an empty cell)."""
    try:
        frozen = _FROZEN.get(py_func)
    except TypeError:
        return False, None
    if frozen is None:
        return False, None
    if cell is None:
        if name not in frozen[0]:
            return False, None
        value = frozen[0][name]
    else:
        closure = py_func.__closure__ or ()
        index = next((k for k, c in enumerate(closure) if c is cell), None)
        if index is None or frozen[1][index] is cell:
            return False, None
        value = frozen[1][index]
    return (False, None) if _holds_live(value) else (True, value)


def _holds_live(value):
    return _live(value) or type(value) is tuple and any(map(_holds_live, value))


def rebind(py_func, replace, replace_cell=None):
    """Return a copy of ``py_func`` with each global and closure value ``v`` replaced by
    ``replace(v)``.

    ``replace`` returns the value to use (the same object to keep it); ``replace_cell``, when
    given, replaces closure values instead. The values are those of the function's first copy
    (:func:`frozen_values`).
    """
    source_globals = py_func.__globals__
    frozen, values = frozen_values(py_func)
    new_globals = dict(source_globals)
    for name in global_names(py_func.__code__):
        if name in frozen:
            new_globals[name] = replace(frozen[name])
        elif name in source_globals:
            new_globals[name] = replace(source_globals[name])
    closure = py_func.__closure__
    if closure is not None:
        cells = []
        for cell, value in zip(closure, values):
            if value is cell:  # an empty cell
                cells.append(cell)
                continue
            cells.append(pytypes.CellType((replace_cell or replace)(value)))
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
