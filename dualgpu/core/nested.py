"""Perturbation tags and duals of duals (second order), in plain Python.

Every dual carries a ``tag``: the derivative it belongs to. The driver gives
the duals it seeds the tag of its nesting depth (0 for an ordinary run; 1 for
a driver called while another one runs f; ...). Combining duals of different
tags never mixes their lanes: the dual with the higher tag is the *outer*
perturbation, and everything of a lower tag is a constant of it, carried in
its value. So ``x + y`` with ``x`` of tag 0 and ``y`` of tag 1 is a tag-1 dual
whose value is the tag-0 dual ``x + y.value`` and whose partials are
``y.partials`` as tag-0 duals with zero partials: the classic perturbation
confusion (``d/dx [x * d/dy (x + y)]`` coming out 2 instead of 1) cannot
happen. This is how ForwardDiff.jl orders its tags.

A *nested* dual's value and partials are duals of a lower tag. Its arithmetic
comes from the same rule table as first order (:mod:`dualgpu.rules`): the
primal is the rule applied to the values (a first-order dual operation), each
derivative factor is the rule's expression evaluated on the values (so
``cos(x)`` of an inner dual is the inner rule), and the lanes are combined
with ordinary dual arithmetic. Second derivatives come out of applying the
first-order rules twice; there is no second table.

Examples
--------
>>> from dualgpu import Dual
>>> x = Dual(3.0, [1.0])                        # d/dx, tag 0
>>> y = Dual(1.0, [1.0], tag=1)                 # d/dy inside, tag 1
>>> inner = x + y                               # a tag-1 dual of tag-0 duals
>>> d_dy = inner.partials[0]                    # d/dy (x + y) = 1, a tag-0 dual
>>> float((x * d_dy).partials[0])               # d/dx [x * d/dy (x + y)] = 1, not 2
1.0
"""
import numpy as np

from dualgpu import rules
from dualgpu.errors import DualgpuError

__all__ = [
    "apply_tagged", "check_tag", "init_nested", "is_nested_input", "lift", "primal_value",
    "lane_key", "pack", "unpack", "seed", "zeros", "lift_array", "MAX_TAG",
    "MAX_GPU_DUAL_FLOATS",
]

#: Largest tag (nesting depth) a dual may carry.
MAX_TAG = 7


_DUAL = []


def _dual():
    if not _DUAL:  # dual.py imports this module: the class is looked up on first use
        from dualgpu.core.dual import Dual

        _DUAL.append(Dual)
    return _DUAL[0]


def check_tag(tag):
    """Return ``tag`` as an int, or raise unless it is an int from 0 to MAX_TAG."""
    if isinstance(tag, bool) or not isinstance(tag, (int, np.integer)) or not 0 <= tag <= MAX_TAG:
        raise DualgpuError(
            f"Dual tag must be an int from 0 to {MAX_TAG} (the derivative's nesting depth); "
            f"got {tag!r}."
        )
    return int(tag)


def primal_value(x):
    """The innermost value of ``x`` (a float), through any nesting of duals."""
    Dual = _dual()
    while isinstance(x, Dual):
        x = x.value
    return x


def is_nested_input(value, partials):
    """True when ``Dual(value, partials)`` is a dual of duals."""
    if isinstance(partials, np.ndarray) and partials.dtype.kind in "fiub":
        return isinstance(value, _dual())
    Dual = _dual()
    if isinstance(value, Dual):
        return True
    from dualgpu.core.dualarray import DualArray

    if isinstance(partials, DualArray):
        return True
    try:
        return any(isinstance(p, Dual) for p in partials)
    except TypeError:
        return False


def _signature(x):
    Dual = _dual()
    if isinstance(x, Dual):
        return (x.tag, x.lanes, _signature(x.value))
    return None


def lift(x, like):
    """Return ``x`` with the structure of ``like`` (a dual or a float); lower parts: constants.

    A number or a dual of a lower tag than ``like`` becomes a dual of ``like``'s
    tag with zero partials (recursively); a dual of ``like``'s tag keeps its
    partials. A dual of a higher tag cannot be lowered: that would drop its
    partials.
    """
    Dual = _dual()
    if not isinstance(like, Dual):
        if isinstance(x, Dual):
            raise DualgpuError(
                f"a dual of tag {x.tag} cannot be used where a plain number is expected: its "
                "partials would be dropped."
            )
        return np.dtype(like.dtype if hasattr(like, "dtype") else np.float64).type(x)
    if isinstance(x, Dual) and x.tag == like.tag:
        if x.lanes != like.lanes:
            raise DualgpuError(
                f"duals of tag {x.tag} with {x.lanes} and {like.lanes} lanes cannot be combined; "
                "seed every dual of one derivative with the same lane count."
            )
        if _signature(x) == _signature(like):
            return x
        return Dual(lift(x.value, like.value), [lift(p, like.value) for p in x.partials],
                    tag=like.tag)
    if isinstance(x, Dual) and x.tag > like.tag:
        raise DualgpuError(
            f"a dual of tag {x.tag} cannot become part of a dual of tag {like.tag}: its partials "
            "would be dropped (a higher tag is an outer derivative)."
        )
    zero = lift(0.0, like.value)
    return Dual(lift(x, like.value), [zero] * like.lanes, tag=like.tag)


def init_nested(self, value, partials, dtype):
    """``Dual.__init__`` for a nested dual: ``value`` a dual of a lower tag, partials like it."""
    Dual = _dual()
    from dualgpu.core.dualarray import DualArray

    if isinstance(partials, DualArray):
        if partials.ndim != 1:
            raise DualgpuError(
                f"Dual(value, partials): a DualArray of partials must be 1-D (one element per "
                f"lane); got shape {partials.shape}."
            )
        partials = [partials[k] for k in range(partials.shape[0])]
    items = list(partials)
    if not items:
        raise DualgpuError("Dual: partials need at least one lane (N >= 1).")
    if not isinstance(value, Dual):
        # partials are duals but the value is a number: the value is a constant of their tag
        template = next(p for p in items if isinstance(p, Dual))
        value = lift(value, template)
    if value.tag >= self.tag:
        raise DualgpuError(
            f"Dual(value, partials, tag={self.tag}): the value is a dual of tag {value.tag}; a "
            "nested dual's tag must be higher than its value's (give the outer derivative the "
            f"higher tag, e.g. tag={value.tag + 1})."
        )
    if dtype is not None and np.dtype(dtype) != value.dtype:
        raise DualgpuError(
            f"Dual(..., dtype={np.dtype(dtype)}): a nested dual takes its dtype from its value "
            f"({value.dtype}); cast the value first."
        )
    lanes = np.empty(len(items), dtype=object)
    for k, p in enumerate(items):
        lanes[k] = lift(p, value)
    self.value = value
    self.partials = lanes


def _resolve_dtype(args):
    from dualgpu.core.dual import check_dtype

    # numpy's promotion of the innermost values: Python numbers are weak (float32 stays float32)
    Dual = _dual()
    dtype = np.result_type(*(a.dtype.type(0) if isinstance(a, Dual) else a for a in args))
    if dtype.kind != "f":
        dtype = np.dtype(np.float64)
    return check_dtype(np.promote_types(dtype, np.float32), "nested dual")


def _expression_namespace():
    """The rule expressions' functions, made dual-aware: ``cos(x)`` of a dual is the cos rule."""
    from dualgpu.core.dual import _EXPRESSION_NAMESPACE, apply_rule

    Dual = _dual()
    namespace = {}
    for name in rules.EXPRESSION_FUNCTIONS:
        plain = _EXPRESSION_NAMESPACE[name]
        if name in rules.VALUE_ONLY or name in ("same", "rint"):  # floor, trunc, rint, same
            namespace[name] = (lambda plain: lambda *v: plain(*map(primal_value, v)))(plain)
        else:
            def call(*a, _name=name, _plain=plain):
                if any(isinstance(v, Dual) for v in a):
                    return apply_rule(_name, *a)
                return _plain(*a)

            namespace[name] = call
    return namespace


_NAMESPACE = None
_CONSTANTS = {}


def _factor(factor, dtype, x, y, ans):
    global _NAMESPACE
    if _NAMESPACE is None:
        _NAMESPACE = _expression_namespace()
    key = (id(factor), dtype)
    ns = _CONSTANTS.get(key)
    if ns is None:
        ns = dict(_NAMESPACE)
        ns.update({k: dtype.type(v) for k, v in factor.expression.constants.items()})
        _CONSTANTS[key] = ns
    return eval(factor.code, ns, {"x": x, "y": y, "ans": ans})


def apply_tagged(name, *args):
    """Apply the rule ``name`` to arguments among which is a dual of a tag above 0.

    The duals of the highest tag are differentiated; everything else is a
    constant of that tag (see the module documentation).
    """
    from dualgpu.core.dual import _RUNTIME, apply_rule

    Dual = _dual()
    rule = rules.lookup(name)  # a rule added with dualgpu.rules.define first
    factors = _RUNTIME[name][1]
    top = max(a.tag for a in args if isinstance(a, Dual))
    outer = [isinstance(a, Dual) and a.tag == top for a in args]
    lanes = {a.lanes for a, o in zip(args, outer) if o}
    if len(lanes) > 1:
        raise DualgpuError(
            f"{rule.primal}: duals of tag {top} with different lane counts {sorted(lanes)}; "
            "all duals of one derivative must be seeded with the same N."
        )
    n = lanes.pop()
    values = [a.value if o else a for a, o in zip(args, outer)]
    if not any(isinstance(v, Dual) for v in values):
        # first order at this tag: the ordinary rule, then the tag
        plain = [Dual(a.value, a.partials) if o else a for a, o in zip(args, outer)]
        result = apply_rule(name, *plain)
        result.tag = top
        return result
    dtype = _resolve_dtype(args)
    values = [v if isinstance(v, Dual) else dtype.type(v) for v in values]
    with np.errstate(all="ignore"):
        ans = apply_rule(name, *values)  # the value: the rule on the inner duals
        x = values[0]
        y = values[1] if len(values) > 1 else None
        total = None
        for arg, is_outer, factor in zip(args, outer, factors):
            if not is_outer:
                continue
            unit = factor.expression.unit
            if unit == 0:
                continue
            if unit == 1:
                term = list(arg.partials)
            elif unit == -1:
                term = [-p for p in arg.partials]
            else:
                f = _factor(factor, dtype, x, y, ans)  # the factor: the rule on the inner duals
                term = [f * p for p in arg.partials]
            total = term if total is None else [s + t for s, t in zip(total, term)]
    if total is None:
        total = [0.0] * n
    return Dual(ans, total, tag=top)


def _levels(arg):
    """``[(tag, lanes), ...]`` of a dual or DualArray (anything with ``lanes``) and of the duals
    nested in it."""
    found = []
    lanes = getattr(arg, "lanes", None)
    while lanes is not None:
        found.append((getattr(arg, "tag", 0), int(lanes)))
        arg = getattr(arg, "value", None) if hasattr(arg, "value") else getattr(arg, "values", None)
        lanes = getattr(arg, "lanes", None)
    return found


def lane_key(args, where):
    """Return the lane structure of a launch's arguments, the key of its specialisations.

    0 without duals; N when every dual is first order (tag 0) with N lanes; else a
    tuple ``((tag, lanes), ...)`` over the tags present (a launch with tagged or
    nested duals). Raises if two duals of one tag disagree on the lane count.
    """
    lanes = {}
    for arg in args:
        for tag, n in _levels(arg):
            if lanes.setdefault(tag, n) != n:
                which = f" of tag {tag}" if tag else ""
                raise DualgpuError(
                    f"{where}: dual arguments{which} have different numbers of lanes "
                    f"({lanes[tag]} and {n}); seed all duals of one launch (of one derivative) "
                    "with the same number of partials."
                )
    if not lanes:
        return 0
    if set(lanes) == {0}:
        return lanes[0]
    return tuple(sorted(lanes.items()))


def nested_local_array_error(where, backend):
    """The error for ``cuda.local.array`` in a launch with tagged or nested duals."""
    return DualgpuError(
        f"{where} uses cuda.local.array, cuda.shared.array or a warp shuffle, and this launch "
        "has duals of a nested derivative (second order); scratch arrays, shared tiles and "
        f"shuffles of nested duals are not supported on the {backend} backend yet. Pass the "
        "scratch as a DualArray argument allocated through dualgpu.cuda under the driver, or "
        "take this derivative to first order only."
    )


# ---------------------------------------------------------------------------
# the nested driver: seeding inputs of every active level, packing outputs
# ---------------------------------------------------------------------------
#: Largest number of floats per nested dual, prod(1 + lanes) over its levels, that the
#: driver allows on the GPU: (1 + 8) * (1 + 8). A float64 nested dual of 81 floats
#: needs 162 registers, and a kernel keeps a few duals live at once: more spills
#: to local memory (first-order N-body duals already spilled at 17 floats each).
MAX_GPU_DUAL_FLOATS = 81


def zeros(shape, levels, dtype, allocate=np.zeros):
    """Return a zero array of duals with one level per entry of ``levels`` (lanes, tag 0 first)."""
    shape = tuple(shape)
    if not levels:
        return allocate(shape, dtype)
    from dualgpu.core.dualarray import DualArray

    below = levels[:-1]
    return DualArray(zeros(shape, below, dtype, allocate),
                     zeros((levels[-1],) + shape, below, dtype, allocate), tag=len(levels) - 1)


def lift_array(x, levels, allocate=np.zeros):
    """Return ``x`` (an array or DualArray) as an array of duals of every level in ``levels``.

    Parts of lower levels that ``x`` lacks are zero; ``x``'s own members are used as given.
    """
    from dualgpu.core.dualarray import DualArray

    if not levels:
        if isinstance(x, DualArray):
            raise DualgpuError(
                f"a DualArray of tag {x.tag} cannot be used where plain values are expected: its "
                "partials would be dropped."
            )
        return x
    tag = len(levels) - 1
    below = levels[:-1]
    if isinstance(x, DualArray) and x.tag == tag:
        if x.lanes != levels[-1]:
            raise DualgpuError(
                f"a DualArray of tag {tag} has {x.lanes} lanes; its derivative seeds "
                f"{levels[-1]}."
            )
        return DualArray(lift_array(x.values, below, allocate),
                         lift_array(x.partials, below, allocate), tag=tag)
    if isinstance(x, DualArray) and x.tag > tag:
        raise DualgpuError(
            f"a DualArray of tag {x.tag} cannot become part of one of tag {tag}: the outer "
            "derivative's partials would be dropped."
        )
    return DualArray(lift_array(x, below, allocate),
                     zeros((levels[-1],) + tuple(x.shape), below, x.dtype, allocate), tag=tag)


def template(levels, dtype):
    """A zero dual with one level per entry of ``levels`` (a float for no levels)."""
    Dual = _dual()
    value = np.dtype(dtype).type(0)
    for tag, n in enumerate(levels):
        value = Dual(value, [value] * n, tag=tag) if tag else Dual(value, np.zeros(n, dtype))
    return value


def seed(value, lanes, levels, dtype):
    """The argument a driver of depth ``len(levels)`` passes to f: ``value`` with seed ``lanes``.

    ``value`` is the input (a float, array, or a dual of the enclosing drivers),
    ``lanes`` the seed of each lane (shape ``(N,)`` for a scalar, ``(N, *shape)`` for
    an array). Every level of ``levels`` is present in the result (zero where the
    input has none), and the new level gets the tag ``len(levels)``.
    """
    from dualgpu.core.dualarray import DualArray

    Dual = _dual()
    tag = len(levels)
    if isinstance(value, DualArray) or np.ndim(value) > 0:
        if isinstance(value, DualArray):
            value = value.copy()
        else:
            value = np.array(value, dtype=dtype, copy=True)
        return DualArray(lift_array(value, levels), lift_array(np.array(lanes), levels), tag=tag)
    like = template(levels, dtype)
    return Dual(lift(value, like), [lift(dtype.type(p), like) for p in lanes], tag=tag)


def pack(x, levels):
    """The components of ``x`` (duals of every level in ``levels``, shape S) as one float array of
    shape ``S + (m,)``, ``m = prod(1 + lanes)``: component 0 the value, then the lanes."""
    if not levels:
        return np.asarray(x)[..., None]
    below = levels[:-1]
    Dual = _dual()
    if isinstance(x, Dual):
        values = pack(x.value, below)
        partials = _stack(x.partials) if isinstance(x.value, Dual) else x.partials
    else:
        values = pack(x.values, below)
        partials = x.partials
    partials = np.moveaxis(pack(partials, below), 0, -2)  # S + (n, m')
    out = np.concatenate([values[..., None, :], partials], axis=-2)
    return out.reshape(out.shape[:-2] + (-1,))


def _stack(duals):
    """Lanes of a nested dual (an object array of first-order duals) as a DualArray (n,)."""
    from dualgpu.core.dualarray import DualArray

    Dual = _dual()
    first = duals[0]
    if isinstance(first.value, Dual):
        raise DualgpuError(
            "the driver nests derivatives to second order; a scalar output with duals of three "
            "levels (third order) is not supported."
        )
    return DualArray(np.array([d.value for d in duals], first.dtype),
                     np.stack([d.partials for d in duals], axis=1), tag=first.tag)


def unpack(a, levels):
    """The inverse of :func:`pack`: duals of every level in ``levels``, shape ``a.shape[:-1]``.

    Returns a DualArray, or a Dual for a 0-d result, of tag ``len(levels) - 1``.
    """
    from dualgpu.core.dualarray import DualArray

    Dual = _dual()
    if not levels:
        return np.array(a[..., 0], copy=True, order="C")  # (keeps a 0-d array 0-d)
    below = levels[:-1]
    n = levels[-1]
    shape = a.shape[:-1]
    a = a.reshape(shape + (1 + n, -1))
    values = unpack(a[..., 0, :], below)
    partials = unpack(np.moveaxis(a[..., 1:, :], -2, 0), below)
    tag = len(levels) - 1
    if not shape:
        if tag == 0:
            return Dual(values, partials)
        return Dual(values, [partials[k] for k in range(n)], tag=tag)
    if len(shape) > 3:
        raise DualgpuError(
            f"a nested derivative would return an array of duals of shape {shape} ({len(shape)} "
            "dimensions); arrays of duals have at most 3. Flatten the input or the output "
            "(reshape) before nesting derivatives."
        )
    return DualArray(values, partials, tag=tag)


def pack_output(item, levels, lanes):
    """``(values, partials or None)`` of one output of f in a driver of depth ``len(levels)``.

    Values and partials are packed (:func:`pack`) over the enclosing levels; partials
    are None when the output does not carry this driver's tag.
    """
    from dualgpu.core.dualarray import DualArray

    Dual = _dual()
    tag = len(levels)
    if isinstance(item, DualArray) and item.is_device:
        item = item.copy_to_host()
    if isinstance(item, (Dual, DualArray)) and item.tag > tag:
        raise DualgpuError(
            f"an output of f is a dual of tag {item.tag}, from a derivative nested deeper than "
            f"this one (tag {tag}); return the inner derivative's result instead."
        )
    if isinstance(item, DualArray) and item.tag == tag:
        full = lift_array(item, levels + (lanes,))
        return pack(full.values, levels), pack(full.partials, levels)
    if isinstance(item, Dual) and item.tag == tag:
        full = lift(item, template(levels + (lanes,), item.dtype))
        return pack(full.value, levels), pack(_stack(full.partials), levels)
    if isinstance(item, DualArray):
        return pack(lift_array(item, levels), levels), None
    if isinstance(item, Dual):
        return pack(lift(item, template(levels, item.dtype)), levels), None
    try:  # a plain number or array: a constant of every level
        values = np.asarray(item.copy_to_host() if hasattr(item, "copy_to_host") else item)
    except Exception:
        return None
    if values.dtype.kind not in "biuf":
        return None
    m = int(np.prod([1 + n for n in levels]))
    packed = np.zeros(values.shape + (m,), np.result_type(values.dtype, np.float32))
    packed[..., 0] = values
    return packed, None
