"""What the backends' launch plans share: compiling a plan from its source.

A backend's plan (:mod:`dualgpu.backends.cpu.plans`, ``GpuKernel.plan``) is a generated
function ``plan(args, stream) -> bool``: checks that return False where it does not hold
(its own, then the caller's ``prologue``, see :mod:`dualgpu.porting.launch_plan`), the
unpacking of the arguments, and a body that launches. :func:`compile_plan` puts them
together, wraps the body so that an error other than a
:class:`~dualgpu.errors.DualgpuError` goes to the caller's ``failed(exc, args)`` (its clear
message, as the full launch path gives), and registers the source with :mod:`linecache`
so that tracebacks show its lines.
"""
import itertools
import linecache
import textwrap

from dualgpu.errors import DualgpuError

__all__ = ["compile_plan", "entry_point"]

_PLANS = itertools.count()


def compile_plan(checks, unpack, body, namespace, name, prologue="", failed=None):
    """Return the plan function ``plan(args, stream)``.

    Parameters
    ----------
    checks : str
        A condition (source) under which the plan no longer holds, or "".
    unpack : str
        Source lines (indented by 4) run after all checks, before ``body``.
    body : str
        Source lines (indented by 4) that launch.
    namespace : dict
        The names the source uses (updated in place).
    name : str
        The kernel's name, for the plan's file name in tracebacks.
    prologue : str
        The caller's checks (indented by 4), run after ``checks``.
    failed : callable, optional
        ``failed(exc, args)``: raises the clear error for ``exc`` where there is one.
    """
    source = "def plan(args, stream):\n"
    if checks:
        source += f"    if {checks}:\n        return False\n"
    source += prologue + unpack
    if failed is None:
        source += body
    else:
        namespace.update(failed=failed, DualgpuError=DualgpuError)
        source += ("    try:\n" + textwrap.indent(body, "    ")
                   + "    except DualgpuError:\n        raise\n"
                   "    except Exception as exc:\n        failed(exc, args)\n        raise\n")
    source += "    return True\n"
    filename = f"<launch plan {next(_PLANS)} of {name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)
    return namespace["plan"]


def entry_point(launcher, values):
    """The compiled entry point of ``launcher`` (a numba dispatcher) for exactly the numba
    types of ``values``, or None where it has no such overload.

    A cpu launch plan calls it instead of the dispatcher: the dispatcher types every
    argument again at each call (about 1 us of a 16-cell launch's 1.3 us), while the plan's
    key already holds each argument's numba fingerprint, so a launch that finds the plan has
    the types this entry point was compiled for; a traced run's replay
    (:mod:`dualgpu.porting.trace`) builds arguments of the same types each time. It converts
    nothing: called with other types it would read them as these, which is why only code
    that guarantees the types calls it.
    """
    overloads = getattr(launcher, "overloads", None)
    if not overloads:
        return None
    try:
        types = tuple(launcher.typeof_pyval(v) for v in values)
    except Exception:  # noqa: BLE001 - a value numba cannot type: the dispatcher decides
        return None
    compiled = overloads.get(types)
    return getattr(compiled, "entry_point", None)
