"""Host code that writes kept host buffers between launches, followed line by line.

Inside :func:`dualgpu.keep_host_buffers` a host numpy array that a kernel wrote duals into
is *kept*: its partials live beside it in a hidden DualArray (:mod:`dualgpu.host.buffers`).
numpy offers no hook in a plain array's own writes (``u[:] = u_new``, ``np.copyto(u,
u_new)``, ``u *= 2.0``), so no comparison of values can tell a copy of a dual from a
constant that happens to hold the same number. This module does not compare values: while
the driver runs f it traces the host code's lines (``sys.settrace``, in the thread that
runs f, in files outside dualgpu, the standard library and installed packages), and a line
that writes into a kept buffer, or stores a kept buffer or a dual into a plain float array,
is *replayed on the partials* before it runs:

* stores ``u[...] = expr`` (also through views: ``state[0][:] = expr``, ``row[j] = p``);
* in-place operators ``u op= expr`` and ``u[...] op= expr``;
* ``np.copyto(u, expr)``, ``u.fill(c)`` and a numpy call with ``out=u``;

where ``expr`` reads names, attributes, elements, slices, constants, operators and calls
of numpy functions, ndarray methods, ``math`` and builtins. The replay runs the same
statement with every kept buffer (and view of one) replaced by its hidden DualArray, so the
written elements get exactly the partials the statement gives them (a constant: zero; a
kept buffer: its partials; ``2.0 * u``: twice u's). A store of a dual into a plain array
makes that array kept. Everything else that writes a kept buffer is refused: a line that
calls other code (``u[:] = step(u)``) with the line and the fix, and writes the tracer
cannot see (compiled code, another thread, a line without source) meet a read-only array:
kept buffers are read-only to host code between the lines that are followed, and the run
is refused with the buffer's name. Nothing is lost silently.
"""
import ast
import builtins
import linecache
import os
import sys
import sysconfig

import numpy as np

from dualgpu.core import hooks
from dualgpu.core._paths import PACKAGE_DIR
from dualgpu.core.dualarray import DualArray
from dualgpu.errors import DualgpuError
from dualgpu.host.derived import (
    _METHODS, DerivedValues, _attribute_reads, _copy, _Derivation, _derives,
    _launch_arguments, _pure, _reads, _scope, _Sub, _where,
)

__all__ = ["Follower", "FOLLOWED_FORMS"]

#: What is followed, for messages and docs.
FOLLOWED_FORMS = ("stores `u[...] = expr`, in-place operators `u op= expr` and "
                  "`u[...] op= expr`, `np.copyto(u, expr)`, `u.fill(c)` and numpy calls with "
                  "`out=u`, where expr uses names, elements, slices, operators and numpy, "
                  "math or builtin functions only")

_SKIP_DIRS = tuple(d for d in {PACKAGE_DIR, os.path.dirname(np.__file__),
                               sysconfig.get_paths().get("stdlib", "\0"),
                               sysconfig.get_paths().get("platstdlib", "\0")} if d)


#: code objects of expressions (their lines belong to the statement around them)
_EXPRESSION_CODES = {"<listcomp>", "<genexpr>", "<setcomp>", "<dictcomp>", "<lambda>"}


def _skipped(filename):
    return (not filename or filename.startswith("<") or filename.startswith(_SKIP_DIRS)
            or "site-packages" in filename or "dist-packages" in filename)


def _writes(stmt):
    """The expressions whose arrays ``stmt`` writes in place, or () for none."""
    if isinstance(stmt, ast.Assign):
        found = []
        for target in stmt.targets:
            for node in ast.walk(target):
                if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
                    found.append(node.value)
        return tuple(found)
    if isinstance(stmt, ast.AugAssign):
        target = stmt.target
        return (target.value,) if isinstance(target, ast.Subscript) else (target,)
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        call = stmt.value
        found = [k.value for k in call.keywords if k.arg == "out"]
        func = call.func
        if isinstance(func, ast.Attribute):
            if func.attr == "copyto" and call.args:
                found.append(call.args[0])
            elif func.attr in _METHODS:
                found.append(func.value)
        return tuple(found)
    return ()


class _Statement:
    """One candidate statement: what it writes, what it calls, and its replay."""

    __slots__ = ("node", "writes", "calls", "replay", "first", "last", "source", "value",
                 "names", "reads")

    def __init__(self, node, filename):
        self.node = node
        self.writes = tuple(compile(ast.unparse(w), filename, "eval") for w in _writes(node)
                            if not any(isinstance(n, ast.Call) for n in ast.walk(w)))
        # (`self.u *= c` stores self.u again: its replay writes the array in place)
        inplace = node.target if isinstance(node, ast.AugAssign) else None
        if any(isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)
               and n is not inplace for n in ast.walk(node)):
            raise ValueError("an attribute store: not replayed")
        # what it reads through attributes and elements (`self.u_new`, `bufs[1]`,
        # `d["rhs"]`), evaluated as the writes are: a kept buffer there brings partials
        self.reads = _attribute_reads(node, filename)
        self.calls = [(ast.unparse(c.func), compile(ast.Expression(c.func), filename, "eval"))
                      for c in ast.walk(node) if isinstance(c, ast.Call)]
        tree = _Sub().visit(ast.Module([_copy(node)], []))
        ast.fix_missing_locations(tree)
        self.replay = compile(tree, filename, "exec")
        self.first, self.last = node.lineno, getattr(node, "end_lineno", node.lineno)
        self.source = ast.unparse(node)
        self.names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        # the value stored, as written and on the duals, where it is computed (not a bare
        # name, attribute or element: those meet the dual target as they are)
        self.value = None
        value = getattr(node, "value", None) if isinstance(node, (ast.Assign, ast.AugAssign)) \
            else None
        if value is not None and not isinstance(value, (ast.Name, ast.Attribute, ast.Subscript,
                                                        ast.Constant)):
            computed = ast.Expression(_copy(ast.Expr(value)).value)
            on_duals = ast.fix_missing_locations(_Sub().visit(ast.Expression(
                _copy(ast.Expr(value)).value)))
            self.value = (compile(computed, filename, "eval"),
                          compile(on_duals, filename, "eval"))


_FILES = {}


def _statements(filename):
    """``{line: [statement, ...]}`` of the candidate statements of a file (cached)."""
    known = _FILES.get(filename)
    if known is not None:
        return known
    lines = linecache.getlines(filename)
    table = {}
    try:
        tree = ast.parse("".join(lines)) if lines else None
    except (SyntaxError, ValueError):
        tree = None
    if tree is not None:
        for node in ast.walk(tree):
            write = isinstance(node, (ast.Assign, ast.AugAssign, ast.Expr)) and _writes(node)
            derived = _derives(node)
            if not (write or derived or _launch_arguments(node)):
                continue
            text = lines[node.lineno - 1]
            if node.col_offset != len(text) - len(text.lstrip()):
                # after a header or another statement on its line (`if c: u[:] = v`): the
                # line's event does not say it runs; not followed (read-only: refused)
                continue
            for kind, wanted in ((_Statement, write), (_Derivation, derived)):
                try:
                    if wanted:
                        table.setdefault(node.lineno, []).append(kind(node, filename))
                except (SyntaxError, ValueError, TypeError):
                    pass  # not replayable (an attribute store): not followed, so refused
            for slot, argument in _launch_arguments(node):  # kernel[g, b](u, 0.5 / vmax)
                table.setdefault(node.lineno, []).append(
                    _Derivation(argument, filename, slot=slot))
    _FILES[filename] = table
    return table


class Follower(DerivedValues):
    """Follows the host lines of one run of f that write kept buffers (see the module)."""

    def __init__(self, registry):
        self.registry = registry
        self.previous = None
        self.installed = False
        self.pending = {}
        self._codes = {}
        # values host code computed from kept buffers (:class:`_Derivation`), by id: the
        # object and its value on the duals, or the object and why that was not possible;
        # per place (code, name), the ids its last run bound
        self.derived, self.lost, self.sites = {}, {}, {}
        self.refused = False  # a line was refused (lines pending then are not finished)
        self.at = None  # the line being replayed on the duals (for messages)
        self.expected = {}  # a launch's computed arguments on this line: slot -> on duals
        self.expected_frame = None  # the frame of that line

    def install(self):
        """Trace the calling thread's new frames; False when another tracer (a debugger,
        coverage) holds it: then kept buffers are read-only to host code, and a write is
        refused with the buffer's name instead of followed."""
        self.previous = sys.gettrace()
        if self.previous is not None:
            return False
        sys.settrace(self._call)
        self.installed = True
        return True

    def uninstall(self):
        """Stop tracing; finish a line still pending."""
        if self.installed:
            sys.settrace(self.previous)
            self.installed = False
        try:
            for pending in list(self.pending.values()):
                self._finish(pending)
        except DualgpuError:
            if not self.refused:  # (after a refusal: that one is the error raised)
                raise
        finally:
            self.pending.clear()
            hooks.FOLLOWED.on = False

    def _lines(self, code):
        lines = self._codes.get(code)
        if lines is None:
            lines = {}
            if not _skipped(code.co_filename) and code.co_name not in _EXPRESSION_CODES:
                table = _statements(code.co_filename)
                if table:
                    own = {line for _, _, line in code.co_lines() if line is not None}
                    lines = {n: table[n] for n in own if n in table}
            self._codes[code] = lines
        return lines

    def _call(self, frame, event, arg):
        if event != "call" or not self._lines(frame.f_code):
            return None
        return self._local

    def _local(self, frame, event, arg):
        pending = self.pending.pop(frame, None)
        if pending is not None:
            statement = pending[0]
            # a later line of the same statement, or its first line again (Python 3.11 reports
            # it again for the store of `u[:] = (a\n + b)`): on, past the instruction the
            # statement started at (a loop running it again starts at that instruction)
            if (event == "line" and statement.first <= frame.f_lineno <= statement.last
                    and frame.f_lasti > pending[4]):
                self.pending[frame] = pending
                return self._local
            self._finish(pending, arg if event == "return" else None)
        if event == "line":
            self.expected = {}
            statements = self._lines(frame.f_code).get(frame.f_lineno)
            if statements:
                try:
                    self._before(frame, statements)
                except DualgpuError:
                    self.refused = True
                    raise
        return self._local

    # -- one line ----------------------------------------------------------------------
    def _before(self, frame, statements):
        registry = self.registry
        for statement in statements:
            if type(statement) is _Derivation:
                if self.derived or self.lost or registry.holds_any():
                    self._derive(frame, statement)
                continue
            scope = _scope(frame)
            targets, others, duals = [], [], []
            for code in statement.writes:
                try:
                    value = eval(code, scope)  # names, attributes, elements: no calls
                except Exception:  # the line itself will raise; nothing to follow
                    continue
                for v in value if isinstance(value, tuple) else (value,):
                    if (isinstance(v, np.ndarray) and not isinstance(v, DualArray)
                            and v.dtype.kind in "fc"):
                        targets.append(v)
                    elif isinstance(v, DualArray):
                        duals.append(v)
                    else:
                        others.append(v)
            if not targets:
                if duals and statement.value is not None:
                    self._check_dual_target(statement, scope, frame)
                continue
            kept = [t for t in targets if registry.find(t) is not None]
            names = statement.names
            brings = any(self._carries(scope.get(n)) for n in names) or any(
                self._carries(value) for _, value in _reads(statement, scope))
            if not (kept or brings):
                continue  # plain host code on plain arrays
            self._check_calls(statement, scope, frame)
            if others:
                raise DualgpuError(
                    f"at {_where(frame)}: `{statement.source}` writes a kept host buffer and "
                    f"also stores into a {type(others[0]).__name__}; dualgpu replays such a "
                    "line on the partials and cannot do that without writing the "
                    "other object twice. Fix: put the two stores on lines of their own.")
            shadows = []
            for t in targets:
                shadow = registry.keep(t, _name_of(t, scope, names))
                if shadow is None:
                    raise DualgpuError(
                        f"at {_where(frame)}: `{statement.source}` writes a kept host buffer "
                        f"or a dual into an array of shape {tuple(t.shape)} whose memory is "
                        "not contiguous, which dualgpu cannot keep partials beside. Fix: make "
                        "it with dualgpu.zeros(shape) where it is made.")
                if shadow not in shadows:
                    shadows.append(shadow)
            scope["__dg_sub"] = self._substitute
            try:
                hooks.FOLLOWED.on = False
                self.at = _where(frame)
                with registry.replay():
                    exec(statement.replay, scope)  # the same statement on the partials
            except DualgpuError:
                raise
            except Exception as error:
                raise DualgpuError(
                    f"at {self.at}: `{statement.source}` writes a kept host buffer, and "
                    f"running it on the duals failed ({type(error).__name__}: {error}), so "
                    "its derivative cannot be followed. Fix: make the buffer with "
                    "dualgpu.zeros(shape) where it is made, so that numpy keeps its partials."
                ) from error
            finally:
                self.at = None
            for shadow in shadows:
                shadow.unprotect()
            views = []  # views made while their buffer was read-only are read-only too
            for t in targets:
                if t.base is not None and not t.flags.writeable:
                    try:
                        t.flags.writeable = True
                        views.append(t)
                    except ValueError:
                        pass
            hooks.FOLLOWED.on = True
            self.pending[frame] = (statement, shadows, _where(frame), views, frame.f_lasti)

    def _check_dual_target(self, statement, scope, frame):
        """A line that writes a dual array with a value numpy computed from a kept buffer
        (``u += dt * rhs``, u a DualArray): numpy gives that value no partials, and the
        line cannot be replayed on a dual target without running twice. Refused, unless
        the value carries no partials of a kept buffer."""
        registry = self.registry
        found = [(n, scope.get(n)) for n in sorted(statement.names)]
        kept = [n for n, v in found + _reads(statement, scope) if self._carries(v) and (
            isinstance(v, (np.ndarray, np.generic, float)) and not isinstance(v, DualArray))]
        if not kept:
            return
        self._check_calls(statement, scope, frame)
        plain_code, dual_code = statement.value
        try:
            plain = eval(plain_code, scope)
            if registry.find(plain) is not None:
                return  # a kept buffer meets the target: its partials are used
            scope["__dg_sub"] = self._substitute
            hooks.FOLLOWED.on = False
            self.at = _where(frame)
            with registry.replay():
                on_duals = eval(dual_code, scope)
            lost = np.asarray(getattr(on_duals, "partials", 0)) - np.asarray(
                getattr(plain, "partials", 0))  # (the duals' own partials are kept)
        except DualgpuError:
            raise
        except Exception:  # noqa: BLE001 - the line itself will raise, or run as written
            return
        finally:
            self.at = None
        if not np.any(lost):
            return
        raise DualgpuError(
            f"at {_where(frame)}: `{statement.source}` writes a dual array with a value numpy "
            f"computes from the kept host buffer(s) {', '.join(kept)}; numpy gives that value "
            "none of their partials, so this share of the derivative would be lost. Fix: "
            "make the target a plain host buffer, which a store of the dual keeps (u = "
            "np.zeros(shape), then u[:] = u0 on a line of its own), so that the line is "
            "replayed on the partials; or let the kept buffer meet the dual itself "
            "(u += rhs).")

    def _check_calls(self, statement, scope, frame):
        for text, code in statement.calls:
            try:
                callee = eval(code, scope)
            except Exception:
                continue
            if not _pure(callee):
                raise DualgpuError(
                    f"at {_where(frame)}: `{statement.source}` writes a kept host buffer (one "
                    "that a kernel wrote duals into, or a dual into a plain array) through "
                    f"a call of {text}, which dualgpu cannot run a second time on the "
                    "partials, so its derivative cannot be followed. dualgpu follows "
                    f"{FOLLOWED_FORMS}. Fix: compute the value on a line of its own "
                    f"(`tmp = {text}(...)`, a DualArray where it reads duals) and store it "
                    "with `u[...] = tmp`; or make the buffer with dualgpu.zeros(shape) where "
                    "it is made.")

    def _finish(self, pending, returned=None):
        statement, shadows, where, views, _ = pending
        if type(statement) is _Derivation:
            self._bind(statement, *shadows, where, returned)
            return
        hooks.FOLLOWED.on = False
        for view in views:
            view.flags.writeable = False
        for shadow in shadows:
            shadow.adopt(statement.source, where)


def _name_of(array, scope, names):
    for name in names:
        if scope.get(name) is array:
            return name
    return None


assert builtins  # the replay resolves builtins through the frame's globals
