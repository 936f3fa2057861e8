"""Elementwise numpy ufuncs on host duals, generated from :mod:`dualgpu.rules`.

``np.sin(u)``, ``u * x``, ``u ** 2``, ``np.maximum(u, 0)``, ``np.square(u - data)``: the
answer's values are the ufunc applied to the operands' values (numpy's own result, bit
for bit), and its partials are the rule table's derivative expressions, compiled here
for arrays (as :class:`dualgpu.core.dual._CompiledFactor` compiles them for scalars) and
multiplied into the lane-major partials (N, *S), broadcast along the lane axis.

Which ufuncs
------------
* every entry of :data:`~dualgpu.rules.NUMPY_UFUNCS` (the ufuncs of the math functions and
  operators with a rule) and of :data:`~dualgpu.rules.NUMPY_ONLY_RULES` (``square``,
  ``reciprocal``, ...);
* :data:`~dualgpu.rules.NUMPY_VALUE_ONLY` (comparisons, ``isnan``, ``floor``...) act on the
  values: float answers carry zero partials, bool answers are plain arrays;
* any other ufunc raises :class:`~dualgpu.errors.MissingRuleError` naming it.

A rule's conditional expression (``1 if x >= 0 else -1``) becomes ``np.where``; both of its
branches are evaluated, with floating-point warnings silenced, and the branch not taken
is discarded.
"""
import ast

import numpy as np

from dualgpu import complex_rules, rules
from dualgpu.core import complex_dual, hooks
from dualgpu.core._expressions import expression
from dualgpu.core.dual import _EXPRESSION_NAMESPACE, DECISIONS
from dualgpu.core.dualarray import DualArray
from dualgpu.errors import DualgpuError, MissingRuleError, complex_dual_message
from dualgpu.host import buffers as host_buffers
from dualgpu.host.indexing import lanes_last_key
from dualgpu.host.operands import common_lanes, full_partials, is_dual, lift, shape_of, split, wrap

__all__ = ["ArrayFactor", "UFUNC_RULES", "call", "outer", "at", "supported_ufuncs"]


# ---------------------------------------------------------------------------
# rule expressions compiled for arrays
# ---------------------------------------------------------------------------
def _and(*terms):
    result = terms[0]
    for term in terms[1:]:
        result = np.logical_and(result, term)
    return result


def _or(*terms):
    result = terms[0]
    for term in terms[1:]:
        result = np.logical_or(result, term)
    return result


class _Vectorize(ast.NodeTransformer):
    """Rewrite scalar control flow into array operations (``a if c else b`` -> where)."""

    def visit_IfExp(self, node):
        self.generic_visit(node)
        return ast.Call(ast.Name("_where", ast.Load()), [node.test, node.body, node.orelse], [])

    def visit_BoolOp(self, node):
        self.generic_visit(node)
        name = "_and" if isinstance(node.op, ast.And) else "_or"
        return ast.Call(ast.Name(name, ast.Load()), node.values, [])

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return ast.Call(ast.Name("_not", ast.Load()), [node.operand], [])
        return node

    def visit_Compare(self, node):
        self.generic_visit(node)
        if len(node.ops) == 1:
            return node
        left, pairs = node.left, []
        for op, right in zip(node.ops, node.comparators):
            pairs.append(ast.Compare(left, [op], [right]))
            left = right
        return ast.Call(ast.Name("_and", ast.Load()), pairs, [])


_UNSIGNED = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def _same(a, b):
    """Elementwise: True where two float arrays have the same bits (NaNs and signed zeros count).

    The array form of the rule table's ``same`` (the scalar one is ``dualgpu.core.dual._same``).
    """
    a = np.asarray(a)
    if a.dtype.kind != "f":
        return np.zeros(np.broadcast_shapes(a.shape, np.shape(b)), bool)
    # an operand is compared in the answer's dtype, as the rule sees it (x cast to it)
    a, b = np.broadcast_arrays(a, np.asarray(b).astype(a.dtype))
    bits = _UNSIGNED[a.dtype.itemsize]
    return np.ascontiguousarray(a).view(bits) == np.ascontiguousarray(b).view(bits)


class ArrayFactor:
    """A rule's derivative expression compiled for numpy arrays, evaluated per dtype.

    Calling it with the dtype of the answer and arrays (or numbers) ``x``, ``y``,
    ``ans`` returns the factor, broadcast like the operands. ``unit`` is 1, -1 or 0 when
    the expression is exactly that literal (no multiplication needed).
    """

    def __init__(self, text):
        self.expression = expression(text)
        self.unit = self.expression.unit
        tree = ast.parse(self.expression.source, mode="eval")
        tree = ast.fix_missing_locations(_Vectorize().visit(tree))
        self.source = ast.unparse(tree)
        self.code = compile(tree, f"<array rule {text}>", "eval")
        self._namespaces = {}

    def __call__(self, dtype, x, y, ans):
        ns = self._namespaces.get(dtype)
        if ns is None:
            ns = dict(_EXPRESSION_NAMESPACE)
            ns.update(_where=np.where, _and=_and, _or=_or, _not=np.logical_not, same=_same)
            ns.update({k: dtype.type(v) for k, v in self.expression.constants.items()})
            self._namespaces[dtype] = ns
        with np.errstate(all="ignore"):
            return eval(self.code, ns, {"x": x, "y": y, "ans": ans})

    def __repr__(self):
        return f"ArrayFactor({self.expression.text!r})"


def _table():
    table = {}
    for ufunc_name, rule_name in rules.NUMPY_UFUNCS.items():
        rule = rules.lookup(rule_name)  # a rule replaced with dualgpu.rules.define first
        table[ufunc_name] = (rule, tuple(ArrayFactor(t) for t in rule.derivatives))
    for ufunc_name, rule in rules.NUMPY_ONLY_RULES.items():
        table[ufunc_name] = (rule, tuple(ArrayFactor(t) for t in rule.derivatives))
    for definition in rules.DEFINED.values():  # rules added with dualgpu.rules.define
        if definition.ufunc is not None:
            table[definition.ufunc.__name__] = (
                definition.rule, tuple(ArrayFactor(t) for t in definition.rule.derivatives))
    return table


#: numpy ufunc name -> (Rule, one ArrayFactor per argument), generated from the rule table
#: (and kept in step with :func:`dualgpu.rules.define`).
UFUNC_RULES = _table()


def _on_rule_defined(new, old):
    UFUNC_RULES.clear()
    UFUNC_RULES.update(_table())


rules.subscribe(_on_rule_defined)
_VALUE_ONLY = frozenset(rules.NUMPY_VALUE_ONLY)


def supported_ufuncs():
    """Return the sorted names of the ufuncs host duals support."""
    return sorted(set(UFUNC_RULES) | _VALUE_ONLY | {"conjugate"})


def _missing(ufunc):
    name = f"numpy.{ufunc.__name__}"
    return MissingRuleError(
        f"{name} has no derivative rule in dualgpu, so it cannot take a Dual or DualArray "
        "(the answer would lose its partials). Fix: call it on the values if no derivative "
        f"is wanted ({ufunc.__name__}(u.values)); or add its rule: a line in "
        f"NUMPY_ONLY_RULES in dualgpu/rules.py, e.g. '{ufunc.__name__}': "
        f"Rule('{name}', ('<derivative in x, y and ans>',), ((lo, hi),)) (or, for a math "
        "function, a rule in UNARY_RULES/BINARY_RULES and its ufunc in NUMPY_UFUNCS); or, "
        f"without editing dualgpu, dualgpu.rules.define('{name}', '<derivative in x and ans>'). "
        f"Ufuncs supported on duals: {', '.join(supported_ufuncs())}."
    )


# ---------------------------------------------------------------------------
# ufunc(...) on duals
# ---------------------------------------------------------------------------
def _check_kwargs(ufunc, kwargs):
    unknown = set(kwargs) - {"out", "dtype"}
    if unknown:
        raise DualgpuError(
            f"numpy.{ufunc.__name__} on duals: keyword(s) {sorted(unknown)} are not supported "
            "(out= and dtype= are). Fix: compute without them, e.g. np.where(mask, f(u), u) "
            "instead of where=mask."
        )


def _store(ufunc, result, out):
    if out is None:
        return result
    if isinstance(out, tuple):
        if len(out) != 1:
            raise DualgpuError(f"numpy.{ufunc.__name__}: expected one out array; got {len(out)}.")
        out = out[0]
    if out is None:
        return result
    if not isinstance(out, DualArray) and is_dual(result):
        if not hooks.values_followed():  # a line dualgpu.host.host_writes replayed: values
            # para += delta into a plain array: kept under keep_host_buffers, else refused
            return host_buffers.store_out(ufunc.__name__, out, result)
    out[...] = result
    return out


def call(ufunc, inputs, kwargs):
    """Return ``ufunc(*inputs, **kwargs)`` with partials propagated by the rule table."""
    _check_kwargs(ufunc, kwargs)
    out = kwargs.pop("out", None)
    name = ufunc.__name__
    if ufunc.nout != 1 or (name not in UFUNC_RULES and name not in _VALUE_ONLY
                           and name not in complex_rules.COMPLEX_NUMPY):
        raise _missing(ufunc)
    pairs = [split(a, f"numpy.{name} operand") for a in inputs]
    values = [v for v, _ in pairs]
    lanes = common_lanes([p for _, p in pairs], f"numpy.{name}")
    if any(_complex(v) for v in values) or name not in UFUNC_RULES and name not in _VALUE_ONLY:
        # a complex operand, or np.conjugate (of real numbers: the identity)
        return _store(ufunc, _complex_call(ufunc, pairs, values, lanes, kwargs), out)
    ans = np.asarray(ufunc(*values, **kwargs))
    if name in _VALUE_ONLY:
        DECISIONS[0] += 1  # (numbers taken from the values: see dualgpu.core.dual)
        if ans.dtype.kind != "f":
            return _store(ufunc, wrap(ans, None), out)
        return _store(ufunc, wrap(ans, np.zeros((lanes,) + ans.shape, ans.dtype)), out)
    _, factors = UFUNC_RULES[name]
    dtype = ans.dtype
    if dtype.kind == "c":  # the kernels' refusal of complex duals, on the host too
        raise DualgpuError(complex_dual_message(
            f"numpy.{name} of " + " and ".join(type(v).__name__ for v in values)))
    if dtype.kind != "f":
        raise DualgpuError(
            f"numpy.{name} on duals gave a {dtype} answer; expected float32 or float64. Fix: "
            "pass dtype=np.float64 (or float32), or, if no derivative is wanted, operate on "
            "the values."
        )
    return _store(ufunc, wrap(ans, _partials(pairs, factors, values, ans, lanes)), out)


def _partials(pairs, factors, values, ans, lanes):
    """The answer's partials (lanes, *shape): each operand's partials times its factor."""
    dtype = ans.dtype
    cast = [v.astype(dtype, copy=False) if isinstance(v, np.ndarray) else v for v in values]
    x = cast[0]
    y = cast[1] if len(cast) > 1 else None
    ndim = ans.ndim
    partials, owned = None, False
    for (_, p), factor in zip(pairs, factors):
        if p is None or factor.unit == 0:
            continue
        p = lift(p, ndim)
        if factor.unit == 1:
            term, term_owned = p, False
        elif factor.unit == -1:
            term, term_owned = np.negative(p), True
        else:
            term, term_owned = np.multiply(factor(dtype, x, y, ans), p), True
        if partials is None:
            partials, owned = term, term_owned
        elif owned and partials.shape == np.broadcast_shapes(partials.shape, term.shape):
            partials += term
        else:
            partials, owned = partials + term, True
    full = (lanes,) + ans.shape
    if partials is None:
        partials, owned = np.zeros(full, dtype), True
    if not owned or partials.shape != full or partials.dtype != dtype:
        partials = np.array(np.broadcast_to(partials, full), dtype=dtype)
    return partials


def _complex(value):
    return (value.dtype.kind == "c") if isinstance(value, np.ndarray) else isinstance(
        value, (complex, np.complexfloating))


_COMPLEX_FACTORS = {}


def _complex_factors(key):
    factors = _COMPLEX_FACTORS.get(key)
    if factors is None:
        rule = complex_rules.COMPLEX_RULES[key]
        factors = _COMPLEX_FACTORS[key] = tuple(ArrayFactor(t) for t in rule.derivatives)
    return factors


def _complex_call(ufunc, pairs, values, lanes, kwargs):
    """``ufunc`` with a complex operand: the complex rules (:mod:`dualgpu.complex_rules`)."""
    name = ufunc.__name__
    if name in complex_rules.ORDERING:
        raise TypeError(complex_rules.ordering_message(f"numpy.{name}"))
    key = complex_rules.COMPLEX_NUMPY.get(name, rules.NUMPY_UFUNCS.get(name, name))
    if name not in _VALUE_ONLY and key not in complex_rules.COMPLEX_RULES:
        complex_dual.rule_of(key, f"numpy.{name} of a complex operand")  # raises, naming it
    ans = np.asarray(ufunc(*values, **kwargs))
    if name in _VALUE_ONLY:
        DECISIONS[0] += 1
        if ans.dtype.kind not in "fc":
            return wrap(ans, None)
        return wrap(ans, np.zeros((lanes,) + ans.shape, ans.dtype))
    return wrap(ans, complex_partials(key, pairs, values, ans, lanes, f"numpy.{name}"))


def complex_partials(key, pairs, values, ans, lanes, what):
    """The partials of ``ans`` by the complex rule ``key`` (lanes, *shape), in ans's dtype.

    Each operand's partials (complex, or real ones made complex) times its factor, taken as
    the rule's tangent says (``"real"``: the real part...), summed.
    """
    rule = complex_rules.COMPLEX_RULES.get(key)
    if rule is None:
        complex_dual.rule_of(key, what)  # raises: an ordering operation or a missing rule
    work = complex_dual.complex_of(np.result_type(ans.dtype, *[
        v.dtype if isinstance(v, np.ndarray) else v for v in values]))
    cast = [np.asarray(v).astype(work, copy=False) for v in values]
    x = cast[0]
    y = cast[1] if len(cast) > 1 else None
    factor_ans = ans.astype(work, copy=False)
    total = None
    for (_, p), factor, kind in zip(pairs, _complex_factors(key), rule.tangents):
        if p is None or factor.unit == 0:
            continue
        p = lift(p, ans.ndim)
        if factor.unit == 1:
            c = p
        elif factor.unit == -1:
            c = np.negative(p)
        else:
            c = np.multiply(factor(work, x, y, factor_ans), p)
        term = complex_dual.tangent(kind, c)
        total = term if total is None else total + term
    full = (lanes,) + ans.shape
    if total is None:
        return np.zeros(full, ans.dtype)
    return np.array(np.broadcast_to(total, full), dtype=ans.dtype)


def _call_defined(definition, args):
    """A wrapper of :func:`dualgpu.rules.define` called with arrays or dual arrays.

    Elementwise: through the rule's ufunc when it has one, else the function element by
    element (numpy's promotion gives the dtype, at least float32); a rules.add_call_handler
    handler.
    """
    if not any(isinstance(a, (DualArray, np.ndarray)) for a in args):
        return NotImplemented
    if definition.ufunc is not None:
        return call(definition.ufunc, args, {})
    name = definition.name
    if len(args) != len(definition.rule.derivatives):
        raise DualgpuError(f"{name} takes {len(definition.rule.derivatives)} argument(s); got "
                           f"{len(args)}.")
    pairs = [split(a, f"{name} operand") for a in args]
    values = [v for v, _ in pairs]
    dtype = np.result_type(*values)
    if dtype.kind != "f":
        dtype = np.dtype(np.float64)
    cast = [np.asarray(v).astype(dtype, copy=False) for v in values]
    primal = getattr(definition.function, "py_func", definition.function)
    with np.errstate(all="ignore"):
        ans = np.asarray(np.vectorize(primal, otypes=[dtype])(*cast))
    if not any(p is not None for _, p in pairs):
        return ans
    lanes = common_lanes([p for _, p in pairs], name)
    factors = tuple(ArrayFactor(t) for t in definition.rule.derivatives)
    return wrap(ans, _partials(pairs, factors, cast, ans, lanes))


rules.add_call_handler(_call_defined)


def outer(ufunc, inputs, kwargs):
    """Return ``ufunc.outer(a, b)``: the call with ``a`` given trailing axes for ``b``'s."""
    if len(inputs) != 2:
        raise DualgpuError(f"numpy.{ufunc.__name__}.outer takes two operands; got {len(inputs)}.")
    a, b = inputs
    shape = shape_of(a)
    if shape:
        a = np.reshape(a, shape + (1,) * len(shape_of(b)))  # dispatches for duals
    return call(ufunc, (a, b), kwargs)


def at(ufunc, inputs, kwargs):
    """``np.add.at(u, index, v)`` / ``np.subtract.at``: unbuffered scatter into a DualArray."""
    name = ufunc.__name__
    if name not in ("add", "subtract") or kwargs:
        raise DualgpuError(
            f"numpy.{name}.at on duals is not supported (np.add.at and np.subtract.at are). "
            "Fix: compute the scattered update with supported operations, or operate on the "
            "values."
        )
    target, index = inputs[0], inputs[1]
    item = inputs[2] if len(inputs) > 2 else None
    if not isinstance(target, DualArray):
        raise DualgpuError(
            f"numpy.{name}.at(a, index, b): a is a {type(target).__name__} and b is a dual, "
            "so the partials would be dropped. Fix: make a a DualArray (np.zeros_like of a "
            "DualArray, or dualgpu.dual_array(a, lanes=N))."
        )
    if target.is_device:
        raise DualgpuError(
            f"numpy.{name}.at needs a host DualArray; copy it with .copy_to_host() first."
        )
    values, partials = split(item) if item is not None else (None, None)
    common_lanes([target.partials, partials], f"numpy.{name}.at")
    index = index if isinstance(index, tuple) else (index,)
    ufunc.at(target.values, index, values)
    if partials is not None:  # the lane axis moved last, where no index reaches it
        lanes = np.moveaxis(full_partials(partials, target.lanes, np.shape(values),
                                          target.dtype), 0, -1)
        ufunc.at(np.moveaxis(target.partials, 0, -1), lanes_last_key(index), lanes)
    return None
