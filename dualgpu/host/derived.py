"""Values host code computes from kept host buffers, followed on their duals.

Inside :func:`dualgpu.keep_host_buffers` host code reads kept buffers with plain numpy: a
value it computes from them on a line of its own (``s = np.sum(u)``, ``tmp = u * 2.0``,
``self.dt = cfl / np.max(np.abs(v))``, ``history.append(np.max(u))``, ``return np.mean(u)``)
gets no partials from numpy. The follower (:class:`~dualgpu.host.host_writes.Follower`, of
which :class:`DerivedValues` is a part) computes each such value on the duals too, before the
line runs, and keeps the pair once the line ran (:meth:`DerivedValues._bind`, by the value's
identity; the items of tuples, lists and dicts too). A later followed line or kernel launch
that uses the value gets its dual (:meth:`DerivedValues.launch_argument`), and so does a
launch's argument computed on the launch's own line (``kernel[g, b](u, 0.5 / vmax)``). Where
the value cannot be had on the duals (a call of a function that is not followed, ``float()``)
or differs, its later use with duals is refused with both lines; a kernel factory's closure
value bound so is lifted with its partials (``dualgpu.porting.captured_duals``). What is
not seen (a value bound by a form not followed: an assignment expression, a ``for`` target,
a second statement on a line, an annotated assignment; an expression passed straight to a
function of the user's) keeps its plain value: that limit is documented in the guide's
host-buffers page.

It also holds the line-level helpers :mod:`dualgpu.host.host_writes` shares: the rewrite of a
line onto the duals (:class:`_Sub`), which callables may run again (:func:`_pure`).
"""
import ast
import itertools
import linecache
import math
import sys
from typing import Any, NamedTuple

import numpy as np

from dualgpu.core import hooks
from dualgpu.core._paths import PACKAGE_DIR
from dualgpu.core.dual import Dual
from dualgpu.core.dualarray import DualArray
from dualgpu.core.object_arrays import from_object_array, is_object_array
from dualgpu.errors import DualgpuError

__all__ = ["DerivedValues"]

_METHODS = {"fill", "put", "itemset", "sort", "partition", "resize", "setfield"}
_FOLLOWED_METHODS = {"fill"}
_PURE_BUILTINS = {abs, min, max, len, float, int, round, range, sum, slice, tuple, list,
                  bool, complex}


class _Sub(ast.NodeTransformer):
    """Wraps every name, attribute and element read in ``__dg_sub(...)`` (a kept buffer -> its
    DualArray), and rewrites ``x op= e`` on a whole array as ``t[...] = t op e``."""

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Load) and node.id != "__dg_sub":
            return ast.copy_location(ast.Call(ast.Name("__dg_sub", ast.Load()), [node], []),
                                     node)
        return node

    def visit_Attribute(self, node):
        self.generic_visit(node)
        if isinstance(node.ctx, ast.Load):
            return ast.copy_location(ast.Call(ast.Name("__dg_sub", ast.Load()), [node], []),
                                     node)
        return node

    # an element of a list or dict of buffers (`bufs[1]`, `d["rhs"]`) may be one too
    visit_Subscript = visit_Attribute

    def visit_AugAssign(self, node):
        if isinstance(node.target, ast.Subscript):
            return self.generic_visit(node)
        target = ast.Name(node.target.id, ast.Load()) if isinstance(node.target, ast.Name) \
            else ast.Attribute(node.target.value, node.target.attr, ast.Load())
        read = self.visit(target)
        value = self.visit(node.value)
        whole = ast.Subscript(ast.Name("__dg_t", ast.Load()), ast.Constant(Ellipsis),
                              ast.Store())
        return [ast.Assign([ast.Name("__dg_t", ast.Store())], read, lineno=0),
                ast.Assign([whole], ast.BinOp(ast.Name("__dg_t", ast.Load()), node.op, value),
                           lineno=0)]


def _place(node):
    """True for a target a value can be read back from: ``x.attr``, ``d[key]`` (no calls)."""
    return isinstance(node, (ast.Attribute, ast.Subscript)) and not any(
        isinstance(c, ast.Call) for c in ast.walk(node))


def _derives(node):
    """True for ``name = expr``, ``a, b = expr``, ``a = b = expr``, ``self.dt = expr``,
    ``d["dt"] = expr``, ``name op= expr`` and ``return expr`` (a computed value bound)."""
    if isinstance(node, ast.Assign):
        return not isinstance(node.value, ast.Constant) and all(
            isinstance(t, ast.Name) or _place(t) or isinstance(t, (ast.Tuple, ast.List))
            and all(isinstance(e, ast.Name) for e in t.elts) for t in node.targets)
    if isinstance(node, ast.Return):
        return node.value is not None and not isinstance(node.value, ast.Constant)
    if isinstance(node, ast.Expr):  # history.append(np.max(u))
        return _appended(node) is not None
    return isinstance(node, ast.AugAssign) and (isinstance(node.target, ast.Name)
                                                or _place(node.target))


def _launch_arguments(node):
    """``[(position, argument)]``: the computed arguments of a kernel launch statement
    (``kernel[g, b](u, 0.5 / vmax)``), numbers or names alone left out."""
    call = node.value if isinstance(node, ast.Expr) else None
    if not (isinstance(call, ast.Call) and isinstance(call.func, (ast.Subscript, ast.Call))):
        return []
    return [(k, a) for k, a in enumerate(call.args)
            if not isinstance(a, (ast.Name, ast.Constant, ast.Starred))]


def _appended(node):
    """``(list, value)`` of a statement ``list.append(value)`` (the list named without
    calls), else None."""
    call = node.value if isinstance(node, ast.Expr) else None
    if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
            and call.func.attr == "append" and len(call.args) == 1 and not call.keywords
            and not any(isinstance(c, ast.Call) for c in ast.walk(call.func.value))
            and not isinstance(call.args[0], ast.Constant)):
        return call.func.value, call.args[0]
    return None


def _attribute_reads(node, filename):
    return tuple((ast.unparse(n), compile(ast.Expression(_load(n)), filename, "eval"))
                 for n in ast.walk(node) if isinstance(n, (ast.Attribute, ast.Subscript))
                 and not any(isinstance(c, ast.Call) for c in ast.walk(n)))


class _Derivation:
    """``name = expr`` (or ``name op= expr`` on a number): a value host code computes from
    kept buffers (``s = np.sum(u)``, ``tmp = u * 2.0``). numpy gives it no partials; the
    follower computes it on the duals too and keeps them beside it (see
    :meth:`Follower._bind`), so that a later line or launch that uses it gets them."""

    __slots__ = ("target", "targets", "dual", "calls", "reads", "names", "first", "last",
                 "source", "augmented", "slot")

    def __init__(self, node, filename, slot=None):
        self.augmented = isinstance(node, ast.AugAssign)
        self.slot = slot  # a launch's argument (``node`` the expression): its position
        if slot is not None:
            value, self.targets, self.target = node, [], f"argument {slot} of the launch"
        elif isinstance(node, ast.Return):  # the value returned (:meth:`Follower._local`)
            value, self.targets, self.target = node.value, [], "the value returned"
        elif isinstance(node, ast.Expr):  # list.append(value): the list's last item
            held, value = _appended(node)
            last = ast.Subscript(held, ast.Constant(-1), ast.Load())
            self.targets = [_Place(ast.unparse(last), compile(ast.fix_missing_locations(
                ast.Expression(_load(last))), filename, "eval"), None)]
            self.target = ast.unparse(last)
        elif self.augmented:
            self.targets = [_target(node.target, filename)]
            value = ast.BinOp(_load(node.target), node.op, node.value)
            self.target = ast.unparse(node.target)
        else:
            value = node.value
            # per target: a name, the names a tuple unpacks into, or a place read back
            self.targets = [_target(t, filename) for t in node.targets]
            self.target = ", ".join(ast.unparse(t) for t in node.targets)
        value = ast.parse(ast.unparse(value), mode="eval").body
        self.names = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}
        self.reads = _attribute_reads(value, filename)
        self.calls = [(ast.unparse(c.func), compile(ast.Expression(c.func), filename, "eval"))
                      for c in ast.walk(value) if isinstance(c, ast.Call)]
        on_duals = ast.fix_missing_locations(_Sub().visit(ast.Expression(value)))
        self.dual = compile(on_duals, filename, "eval")
        self.first, self.last = node.lineno, getattr(node, "end_lineno", node.lineno)
        self.source = ast.unparse(node)


class _Place(NamedTuple):
    """A derivation's target read back after the line: ``self.dt``, ``d["dt"]``."""

    text: str
    code: Any  # the target as an expression
    container: Any  # ``d`` of ``d["dt"]`` (an array's element is a write), or None


def _target(node, filename):
    """A name, a tuple of names, or a :class:`_Place`."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(e.id for e in node.elts)
    container = node.value if isinstance(node, ast.Subscript) else None
    return _Place(ast.unparse(node), compile(ast.Expression(_load(node)), filename, "eval"),
                  None if container is None else compile(ast.Expression(_load(container)),
                                                         filename, "eval"))


def _copy(node):
    return ast.parse(ast.unparse(node)).body[0]


def _load(node):
    """``node`` (an attribute or element, maybe a store's target) as an expression read."""
    return ast.parse(ast.unparse(node), mode="eval").body


#: runs of one line whose values stay known (see :meth:`Follower._bind`)
_RUNS_KEPT = 8
#: items of a list, tuple or dict looked at for values computed from kept buffers
_CONTAINER_ITEMS = 256
#: the target of ``return expr``
_RETURNED = object()


def _pure(value):
    """True for a callable a replay may call again: numpy, math, builtins, array methods."""
    if _hashable(value) and value in _PURE_BUILTINS:
        return True
    if isinstance(value, np.ufunc):
        return True
    owner = getattr(value, "__self__", None)
    if isinstance(owner, (np.ndarray, DualArray, Dual, np.generic)):
        name = getattr(value, "__name__", "")
        return name not in _METHODS or name in _FOLLOWED_METHODS
    module = getattr(value, "__module__", None) or ""
    if owner is math or module == "math":
        return True
    return callable(value) and (module == "numpy" or module.startswith("numpy."))


def _hashable(value):
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _scope(frame):
    """The names a line of ``frame`` reads: its globals, its locals over them."""
    scope = dict(frame.f_globals)
    scope.update(frame.f_locals)
    return scope


def _user_frame():
    """The innermost frame outside dualgpu (a launch's caller), or None."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(PACKAGE_DIR):
        frame = frame.f_back
    return frame


def _user_where():
    """:func:`_where` of the innermost frame outside dualgpu (a launch's line)."""
    frame = _user_frame()
    return "an unknown line" if frame is None else _where(frame)


def _same_values(plain, on_duals):
    """True when a value host code got equals (bit for bit, NaNs alike) the duals' value."""
    value = getattr(on_duals, "values", getattr(on_duals, "value", on_duals))
    try:
        a, b = np.asarray(plain), np.asarray(value)
        return a.shape == b.shape and bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))
    except (TypeError, ValueError):
        return False


def _reads(statement, scope):
    """``[(text, value)]`` of what ``statement`` reads through attributes and elements."""
    found = []
    for text, code in statement.reads:
        try:
            found.append((text, eval(code, scope)))  # no calls: attributes and elements
        except Exception:  # noqa: BLE001 - the line itself will raise, or reads no array
            pass
    return found


def _brings(value, registry):
    """True when ``value`` carries partials into a store: a dual, a kept buffer with partials."""
    if isinstance(value, (Dual, DualArray)):
        return True
    if isinstance(value, (list, tuple)):
        return any(isinstance(v, (Dual, DualArray)) for v in value)
    if isinstance(value, np.ndarray) and value.dtype.kind in "fc":
        shadow = registry.find(value)
        return shadow is not None and shadow.live
    return False


def _where(frame):
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
    return f"{frame.f_code.co_filename}:{frame.f_lineno} (`{line}`)"


class DerivedValues:
    """The follower's record of values computed from kept buffers (see the module); its
    :class:`~dualgpu.host.host_writes.Follower` sets ``registry``, ``derived``, ``lost``,
    ``sites``, ``at``, ``expected`` and ``pending``."""

    # -- values computed from kept buffers -------------------------------------------
    def _carries(self, value):
        """True when ``value`` brings partials into a line: a dual, a kept buffer with
        partials, a value computed from them (or one whose partials were lost: refused)."""
        key = id(value)
        found = self.derived.get(key) or self.lost.get(key)
        if found is not None and found[0] is value:
            return True
        if type(value) in (list, tuple, dict) and (self.derived or self.lost):
            items = value.values() if type(value) is dict else value
            return any(self._carries(v) for v in itertools.islice(items, _CONTAINER_ITEMS))
        return _brings(value, self.registry)

    def _substitute(self, item):
        """``item`` as a replay on the duals reads it (:meth:`Registry.substitute_one`,
        and a value computed from kept buffers: its value on the duals)."""
        return self.registry.substitute_one(self.launch_argument(item))

    def launch_argument(self, item):
        """``item``, or its value on the duals if host code computed it from kept buffers;
        DualgpuError where that value's partials were lost."""
        key = id(item)
        found = self.derived.get(key)
        if found is not None and found[0] is item:
            return found[1]
        if type(item) in (list, tuple, dict) and self._carries(item):  # (their items)
            if type(item) is dict:
                return {k: self.launch_argument(v) for k, v in item.items()}
            return type(item)(map(self.launch_argument, item))
        lost = self.lost.get(key)
        if lost is not None and lost[0] is item:
            raise DualgpuError(
                f"{lost[1]}, and it is used at {self.at or _user_where()} with duals, so its "
                "share of the derivative would be lost. Fix: compute it with numpy and "
                "builtin functions (np.sqrt, not math.sqrt, which converts to a float; no "
                "float() or int()), in your own functions too; or make the buffers "
                "DualArrays where they are made (dualgpu.zeros(shape)).")
        return item

    def launch_arguments(self, args):
        """A launch's ``args`` with values computed from kept buffers on their duals (also
        those computed on the launch's own line: :attr:`expected`)."""
        expected = {}
        if self.expected and _user_frame() is self.expected_frame:  # (not a launch inside a
            expected, self.expected = self.expected, {}  # function the launch line calls)
        if not (self.derived or self.lost or expected):
            return args
        args = list(map(self.launch_argument, args))
        for slot, (dual, reason, derivation) in expected.items():
            value = getattr(dual, "value", None)
            if slot >= len(args) or not isinstance(args[slot], (float, np.floating)):
                continue
            if reason is not None:
                raise DualgpuError(
                    f"`{derivation.source}` ({derivation.target} at {_user_where()}) is "
                    f"computed from kept host buffers, but {reason}, so its share of the "
                    "derivative would be lost. Fix: compute it with numpy and builtin "
                    "functions (np.sqrt, not math.sqrt, which converts to a float), or make "
                    "the buffers DualArrays (dualgpu.zeros(shape)).")
            if isinstance(dual, Dual) and _same_values(args[slot], dual) and value is not None:
                args[slot] = dual
        return tuple(args)

    def _derive(self, frame, derivation):
        """Before ``name = expr`` runs: where expr reads kept buffers (or values computed
        from them), compute it on the duals (pending until the line ran: :meth:`_bind`)."""
        local, names = frame.f_locals, frame.f_globals
        target = derivation.targets[0] if derivation.targets else None
        if derivation.augmented and type(target) is str and isinstance(local.get(target),
                                                                       np.ndarray):
            return  # `u += expr` on an array: a write, followed as such
        scope = None
        for place in derivation.targets:
            if type(place) is _Place:  # an array's element or `self.u *= c`: a write
                if scope is None:
                    scope = _scope(frame)
                try:
                    held = eval(place.container or place.code, scope)
                except Exception:  # noqa: BLE001 - a place not there yet (self.dt = ...)
                    continue
                if isinstance(held, np.ndarray) and (place.container or derivation.augmented):
                    return
        values = [local[n] if n in local else names.get(n) for n in derivation.names]
        if not (derivation.reads or any(map(self._carries, values))):
            return  # (every line of a traced function that binds a name passes here)
        if scope is None:
            scope = _scope(frame)
        if not any(map(self._carries, values + [v for _, v in _reads(derivation, scope)])):
            return
        dual, reason = None, None
        for text, code in derivation.calls:
            try:
                callee = eval(code, scope)
            except Exception:  # noqa: BLE001 - the line itself will raise
                return
            if not _pure(callee):
                reason = f"it calls {text}, which dualgpu cannot run again on the duals"
                break
        if reason is None:
            scope["__dg_sub"] = self._substitute
            try:
                hooks.FOLLOWED.on = False
                self.at = _where(frame)
                with self.registry.replay():
                    dual = eval(derivation.dual, scope)
            except Exception as error:  # noqa: BLE001 - a refusal of its own use, later
                reason = f"running it on the duals failed ({type(error).__name__}: " \
                         f"{str(error).splitlines()[0] if str(error) else ''})"
            finally:
                self.at = None
        if derivation.slot is not None:  # a launch on this line takes it (launch_arguments)
            self.expected[derivation.slot] = (dual, reason, derivation)
            self.expected_frame = frame
            return
        self.pending[frame] = (derivation, (dual, reason, frame), _where(frame), None,
                               frame.f_lasti)

    def _bind(self, derivation, dual, reason, frame, where, returned=None):
        """After ``name = expr`` ran: the value host code got (each item of a tuple or list)
        is kept with its value on the duals; where that value differs or could not be had,
        its uses with duals are refused (:meth:`launch_argument`)."""
        try:
            local = frame.f_locals
            scope = _scope(frame)
        except Exception:  # noqa: BLE001 - the frame is gone
            return
        pairs = []
        for target in derivation.targets or [_RETURNED]:
            if target is _RETURNED:
                got = returned
            elif type(target) is _Place:
                try:
                    got = eval(target.code, scope)
                except Exception:  # noqa: BLE001 - the line raised: nothing bound
                    return
            else:
                got = tuple(local.get(n) for n in target) if type(target) is tuple \
                    else local.get(target)
            if type(got) is dict and type(dual) is dict and got.keys() == dual.keys():
                pairs += [(got[k], dual[k]) for k in got]  # {"max": np.max(u)}
            elif isinstance(got, (tuple, list)):  # each item, beside the duals' item
                items = dual if isinstance(dual, (tuple, list)) and len(dual) == len(got) \
                    else [None] * len(got)
                if items is not dual and reason is None and dual is not None:
                    reason = "its items on the duals do not match the ones host code got"
                pairs += zip(got, items)
            else:
                pairs.append((got, dual))
        pairs = [(a, from_object_array(b, derivation.target) if is_object_array(b) else b)
                 for a, b in pairs]  # (np.array(history) of duals: a DualArray)
        if reason is None and not all(_same_values(a, b) for a, b in pairs):
            reason = "its value on the duals differs from the one host code got"
        keys = []
        for plain, on_duals in pairs:
            if reason is None and not isinstance(on_duals, (Dual, DualArray)):
                continue  # no partials: the plain value is the whole story
            if isinstance(plain, np.ndarray) and plain.dtype.kind in "fc" and reason is None:
                shadow = self.registry.keep(plain, derivation.target)
                view = None if shadow is None else shadow.view(plain)
                if view is not None:  # an array: kept beside its partials, as buffers are
                    view[...] = on_duals
                    shadow.writer = f"host code at {where}"
                    shadow.write_back()
                    continue
            if isinstance(plain, (float, complex, np.floating, np.complexfloating,
                                  np.ndarray)) and not isinstance(plain, DualArray):
                known = self.derived.get(id(plain))
                if known is not None and known[0] is plain:
                    pass  # (returned by a function whose `return` was followed)
                elif reason is None:
                    self.derived[id(plain)] = (plain, on_duals)
                else:
                    self.lost[id(plain)] = (plain, f"{derivation.target} was computed by "
                                                   f"`{derivation.source}` at {where} from "
                                                   f"kept host buffers, but {reason}")
                keys.append(id(plain))
        # the values of this line's last runs stay known (another name may hold one:
        # `E_old = E`); older ones are forgotten (a long loop would keep them all)
        runs = self.sites.setdefault((frame.f_code, derivation.first), [])
        runs.append(keys)
        if len(runs) > _RUNS_KEPT:
            newer = {key for run in runs[1:] for key in run}
            for key in runs.pop(0):
                if key not in newer:
                    self.derived.pop(key, None)
                    self.lost.pop(key, None)
