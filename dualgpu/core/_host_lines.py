"""Which host line turned a Dual into a float, and what to write there instead.

A :class:`~dualgpu.Dual` refuses ``float()`` (the partials would be lost), and
everything that needs a Python float calls it: ``math.sqrt(p)``, ``np.float32(p)``,
``np.array([p, q], dtype=float)``, a store into a numpy float array (``state[0] =
p``). The bare refusal cannot say which of these happened; the caller's frame can.
:func:`describe_host_line` reads it (the file, the line, the exact expression from
the bytecode position, and what the code there calls or stores into) and
:func:`float_message` writes the message with the fix that keeps the partials.

Other messages (a kernel writing duals into a host array, host buffers under the
driver) call these two functions with the frame they care about.
"""
import ast
import builtins
import linecache
import math
import os
import sys
import threading
import warnings
from dataclasses import dataclass

import numpy as np

from dualgpu.core import dmath
from dualgpu.core._paths import PACKAGE_DIR
from dualgpu.core.dual import Dual
from dualgpu.core.selection import _in_simulated_thread

__all__ = ["HostLine", "describe_host_line", "float_message", "float_message_at",
           "float_message_here", "user_frame"]

_PACKAGE_DIR = PACKAGE_DIR
_NUMPY_DIR = os.path.dirname(os.path.abspath(np.__file__)) + os.sep

#: math names whose numpy ufunc has another name
_NUMPY_NAMES = {
    "asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh",
    "acosh": "arccosh", "atanh": "arctanh", "atan2": "arctan2", "pow": "power",
    "fabs": "fabs", "fmod": "fmod",
}
#: numpy functions that build an array from their argument (``np.array(duals, dtype=float)``)
_ARRAY_BUILDERS = {"array", "asarray", "asanyarray", "ascontiguousarray", "fromiter", "full",
                   "full_like", "append", "concatenate", "hstack", "vstack", "stack"}


@dataclass
class HostLine:
    """Where host code is and what it does there.

    Attributes
    ----------
    filename, lineno : str, int
        The line.
    source : str
        The line's text (stripped), or '' when the file cannot be read.
    expression : str
        The exact expression running there (``math.sqrt(p)``, ``state[0]``), or ''.
    kind : str
        ``"store"`` (``a[i] = x``), ``"call"`` (a call) or ``"other"``.
    callee : str
        The called function's dotted name as written (``math.sqrt``, ``np.float32``), or ''.
    function : object
        The called object when it could be looked up without running code, else None.
    target : str
        For a store, the subscripted expression (``state``), else ''.
    args : list of str
        The call's positional arguments as written.
    """

    filename: str
    lineno: int
    source: str = ""
    expression: str = ""
    kind: str = "other"
    callee: str = ""
    function: object = None
    target: str = ""
    args: list = None

    @property
    def location(self):
        """``file:line`` of the line."""
        return f"{self.filename}:{self.lineno}"


def user_frame(frame):
    """The first frame, from ``frame`` outwards, outside dualgpu and numpy (or None)."""
    while frame is not None:
        name = os.path.abspath(frame.f_code.co_filename)
        if not (name.startswith(_PACKAGE_DIR) or name.startswith(_NUMPY_DIR)):
            return frame
        frame = frame.f_back
    return None


def _segment(filename, position):
    """The source text at a bytecode position ``(line, end_line, col, end_col)``."""
    line, end_line, col, end_col = position
    if None in position:
        return ""
    lines = [linecache.getline(filename, k) for k in range(line, end_line + 1)]
    if not all(lines):
        return ""
    if len(lines) == 1:
        return lines[0].encode()[col:end_col].decode(errors="replace")
    lines[0] = lines[0].encode()[col:].decode(errors="replace")
    lines[-1] = lines[-1].encode()[:end_col].decode(errors="replace")
    return "".join(lines)


def _lookup(node, frame):
    """The object a Name or a dotted Attribute chain of names refers to (no code runs)."""
    if isinstance(node, ast.Name):
        for scope in (frame.f_locals, frame.f_globals, vars(builtins)):
            if node.id in scope:
                return scope[node.id]
        return None
    if isinstance(node, ast.Attribute):
        base = _lookup(node.value, frame)
        return None if base is None else getattr(base, node.attr, None)
    return None


def _instruction_position(frame):
    code = frame.f_code
    try:
        positions = list(code.co_positions())
        return positions[frame.f_lasti // 2]
    except (AttributeError, IndexError):  # Python < 3.11: the line only
        return (frame.f_lineno, frame.f_lineno, None, None)


def describe_host_line(frame):
    """Describe what the code of ``frame`` is doing now (see :class:`HostLine`).

    Parameters
    ----------
    frame : frame
        A Python frame, e.g. ``sys._getframe(1)`` in a method that C code called.

    Returns
    -------
    HostLine

    Examples
    --------
    >>> import sys
    >>> from dualgpu.core._host_lines import describe_host_line
    >>> line = describe_host_line(sys._getframe())
    >>> line.kind, line.callee
    ('call', 'describe_host_line')
    """
    filename = frame.f_code.co_filename
    position = _instruction_position(frame)
    lineno = position[0] or frame.f_lineno
    line = HostLine(filename, lineno, linecache.getline(filename, lineno).strip(), args=[])
    text = _segment(filename, position)
    line.expression = " ".join(text.split())
    try:
        node = ast.parse("(" + text.strip() + ")", mode="eval").body if text.strip() else None
    except SyntaxError:
        node = None
    if isinstance(node, ast.Subscript):
        line.kind = "store"
        line.target = ast.unparse(node.value)
    elif isinstance(node, ast.Call):
        line.kind = "call"
        line.callee = ast.unparse(node.func)
        line.function = _lookup(node.func, frame)
        line.args = [ast.unparse(a) for a in node.args]
    return line


def _math_name(function):
    name = getattr(function, "__name__", None)
    if name and getattr(math, name, None) is function:
        return name
    return None


def _works(fn, nargs):
    """Whether ``fn`` takes Duals (tried on ``nargs`` Duals at harmless values)."""
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            fn(*[Dual(0.5, [1.0]) for _ in range(max(nargs, 1))])
        return True
    except Exception:  # noqa: BLE001  (any failure: not a replacement)
        return False


def _math_fix(line, name):
    args = ", ".join(line.args) or "x"
    nargs = len(line.args)
    options = []
    np_name = _NUMPY_NAMES.get(name, name)
    if isinstance(getattr(np, np_name, None), np.ufunc) and _works(getattr(np, np_name), nargs):
        options.append(f"np.{np_name}({args})")
    if _works(getattr(dmath, name, None), nargs):
        options.append(f"dualgpu.dmath.{name}({args})")
    what = (f"math.{name} takes Python floats only, so it converts the Dual with float() "
            "and its partials would be lost")
    if options:
        return (f"{what}. Fix: write {' or '.join(options)} instead; "
                f"{'both keep' if len(options) > 1 else 'it keeps'} the partials and give the "
                "same value for plain numbers.")
    return (f"{what}, and math.{name} has no derivative rule in dualgpu. Fix: add one "
            "(dualgpu.rules, see the docs on rules), or compute it from functions that "
            "have rules.")


def _call_fix(line):
    fn = line.function
    args = ", ".join(line.args) or "x"
    name = _math_name(fn)
    if name is not None:
        called = "" if line.callee == f"math.{name}" else f"{line.callee}(...) is math.{name}: "
        return called + _math_fix(line, name)
    if fn is float:
        return (f"float() of a Dual keeps the value alone. Fix: keep the dual (drop the "
                f"float(): arithmetic with plain floats promotes), or cast with "
                f"dualgpu.float64({args}), which keeps the partials.")
    if isinstance(fn, type) and issubclass(fn, np.floating):
        cast = {np.float32: "float32", np.float64: "float64"}.get(fn)
        fix = (f"dualgpu.{cast}({args})" if cast else f"dualgpu.astype({args}, np.float32)")
        return (f"{line.callee}(...) converts the Dual with float(). Fix: {fix}, which keeps "
                f"the partials (and is {line.callee} for plain numbers).")
    if getattr(fn, "__name__", "") in _ARRAY_BUILDERS and getattr(fn, "__module__", "") \
            and str(getattr(fn, "__module__", "")).startswith("numpy"):
        first = line.args[0] if line.args else "[...]"
        return (f"{line.callee}(...) builds a plain float array (a float dtype) and "
                f"converts each Dual with float(). Fix: dualgpu.float64({first}) or "
                f"dualgpu.float32({first}) (a DualArray), or np.stack({first}); leave out "
                "dtype=.")
    shown = line.callee or "the function called here"
    return (f"{shown}(...) needs a Python float and converts the Dual with float(). Fix: "
            "give it a dual-aware operation instead (numpy ufuncs such as np.sqrt, "
            "dualgpu.dmath for math, dualgpu.float32/float64 for casts).")


def _store_fix(line, scratch=False):
    target = line.target or "the array"
    if scratch:  # a shared or local array of a kernel the CUDA simulator runs
        return (f"storing a Dual into {target}, a shared or local array of a kernel the CUDA "
                "simulator runs, converts it with float(): such an array holds duals only "
                "where its type can (real float32/float64 arrays; not complex ones, see the "
                f"limitations page). Fix: pass {target} to the kernel as an argument, "
                f"allocated with {target} = cuda.device_array(shape, dtype) outside it (a "
                "DualArray under the driver), in place of the shared or local array.")
    return (f"storing a Dual into the numpy float array {target} converts it with float(); a "
            f"numpy array has no room for the partials. Fix: allocate {target} so that it "
            f"holds duals while a derivative runs: {target} = dualgpu.cuda.pinned_array(shape) "
            "(a host array: plain numpy without the driver, a zeroed DualArray under it), "
            "or collect the values in a list and np.stack(...) them.")


def float_message(line, scratch=False):
    """The message for ``float(Dual)`` at ``line`` (a :class:`HostLine` or None).

    It starts with ``float(Dual) would drop the partials`` (callers match that), names
    the line and the operation, and gives the fix that keeps the partials.
    ``d.value`` comes last: it drops the derivative.

    Examples
    --------
    >>> from dualgpu.core._host_lines import HostLine, float_message
    >>> print(float_message(None).splitlines()[0])
    float(Dual) would drop the partials.
    """
    head = "float(Dual) would drop the partials"
    last = ("(d.value reads the value alone and silently drops the derivative: use it only "
            "where no derivative must flow, e.g. a log line.)")
    if line is None:
        return (f"{head}.\nSomething here needs a Python float: math.* functions, float(), "
                "np.float32(d), a store into a numpy float array. Fix: numpy ufuncs "
                "(np.sqrt(d)) and dualgpu.dmath keep the partials; cast with "
                "dualgpu.float32(d) or dualgpu.float64(d); allocate buffers with "
                f"dualgpu.cuda.device_array.\n{last}")
    if line.kind == "store":
        fix = _store_fix(line, scratch)
    elif line.kind == "call":
        fix = _call_fix(line)
    else:
        fix = ("this line needs a Python float. Fix: numpy ufuncs (np.sqrt(d)) and "
               "dualgpu.dmath keep the partials; cast with dualgpu.float32/float64.")
    shown = f"\n    {line.source}" if line.source else ""
    return f"{head}: at {line.location}{shown}\n{fix}\n{last}"


def _scratch_store(line, frame):
    """True for a store into an array a kernel run by the CUDA simulator made itself (a shared
    or local array: not one of its parameters)."""
    if line is None or line.kind != "store" or not line.target:
        return False
    if not _in_simulated_thread():
        return False
    code = frame.f_code
    name = line.target.split("[")[0].split(".")[0].strip()
    return name.isidentifier() and name not in code.co_varnames[:code.co_argcount]


_WRITING = threading.local()


#: numpy's reductions of object arrays that convert their result with ``dtype.type(...)``:
#: (file name, function) -> the reduction's name
_NUMPY_REDUCTIONS = {("_methods.py", "_mean"): "mean", ("_methods.py", "_var"): "var",
                     ("_methods.py", "_std"): "std",
                     ("_function_base_impl.py", "average"): "average",
                     ("function_base.py", "average"): "average"}


def _numpy_reduction(frame):
    """The name of the numpy reduction ``frame`` and its callers within numpy run (the
    outermost: np.std runs _var), or None."""
    found = None
    for _ in range(5):
        if frame is None:
            break
        code = frame.f_code
        name = _NUMPY_REDUCTIONS.get((code.co_filename.rsplit("/", 1)[-1], code.co_name))
        if name is not None and "numpy" in code.co_filename:
            found = name
        frame = frame.f_back
    return found


def float_message_here(depth=2):
    """:func:`float_message` for the host line that called ``float()`` (``depth`` frames up)."""
    return float_message_at(sys._getframe(depth))


def float_message_at(frame):
    """:func:`float_message` for the host line at or above ``frame`` (the caller of ``float()``).

    Never raises: a line it cannot read gives the message without a line.
    """
    if getattr(_WRITING, "active", False):  # a replacement tried while writing one message
        return float_message(None)
    _WRITING.active = True
    try:
        found = user_frame(frame)
        line = None if found is None else describe_host_line(found)
        message = float_message(line, _scratch_store(line, found))
        reduction = _numpy_reduction(frame)
        if reduction is not None:  # np.mean of a list of Duals: its fix, not the general one
            head, _, rest = message.partition("\n")
            message = (f"{head}\nnumpy's {reduction} of a list (an object array) of Duals "
                       "converts its result with float(). Fix: stack the Duals into a "
                       f"DualArray first, np.stack(values).{reduction}() (or "
                       f"np.{reduction}(np.stack(values))), which keeps the partials.")
        return message
    except Exception:  # noqa: BLE001  (a message must never fail)
        return float_message(None)
    finally:
        _WRITING.active = False
