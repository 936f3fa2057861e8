"""A captured table's program: the kinds of its arguments and the inputs it takes.

A program (:mod:`dualgpu.backends.cpu.replay`) is keyed by its kinds of launch (a *program
key*: per kind, the launcher, its arguments' kinds, the tile, its step). Its parameters are
the table's codes and rows, then per buffer group (the numba types of a DualArray's
members) a tuple of values and one of partials, the float and int tables, per dual group
(a Dual scalar's value type and lanes) its values and partials, per number table (other
numpy scalar types) its array, per plain array group (numba's type of a plain array, in a
launch graph's replay) a tuple of the arrays, and for a tile-by-tile program its snapshots,
private values and control array. Used by :mod:`dualgpu.porting.capture` (the recorder),
:mod:`dualgpu.porting.trace` and :mod:`dualgpu.porting.graph_program`.
"""
import numpy as np

__all__ = ["seeded", "layout", "buffer_kind", "kinds_of", "table", "Inputs", "inputs", "ops"]


def layout(a):
    """numba's layout letter of ``a``."""
    return "C" if a.flags.c_contiguous else "F" if a.flags.f_contiguous else "A"


def buffer_kind(values, partials):
    """A buffer's group (the numba types of its members) and its kind in a launch key."""
    group = ("a", values.dtype.str, values.ndim, layout(values), partials.dtype.str,
             layout(partials), partials.shape[0])
    return group, group + (values.shape,)


def kinds_of(program_key):
    """The buffer groups, dual kinds, number kinds and plain array groups of a program, in
    the order its parameters take them."""
    groups, dual_kinds, number_kinds, plain_groups = [], [], [], []
    for _, kinds, _, _ in program_key:
        for kind in kinds:
            if kind[0] == "a" and kind[:-1] not in groups:
                groups.append(kind[:-1])
            elif kind[0] == "s" and kind not in dual_kinds:
                dual_kinds.append(kind)
            elif kind[0] == "n" and kind not in number_kinds:
                number_kinds.append(kind)
            elif kind[0] == "p" and kind[:-1] not in plain_groups:
                plain_groups.append(kind[:-1])
    return groups, dual_kinds, number_kinds, plain_groups


def table(entries):
    """The rows of ``entries`` as one int64 table (shorter rows padded with 0)."""
    rows = [row for _, row in entries]
    try:  # launches of kernels with as many arguments: numpy's loop
        table = np.array(rows, np.int64)
    except ValueError:
        table = None
    if table is None or table.ndim != 2:
        table = np.zeros((len(rows), max(len(row) for row in rows)), np.int64)
        for e, row in enumerate(rows):
            table[e, :len(row)] = row
    return table


class Inputs:
    """The inputs of a program (``program_key``) for one table (``codes``, ``table``), its
    fixed parts (codes and rows, the float, int and number tables, the placeholders of
    absent groups) built once: :meth:`build` adds the buffers and dual scalars of a run.
    A traced run's replays keep one (:mod:`dualgpu.porting.trace`); the program only reads
    the tables it shares."""

    __slots__ = ("groups", "dual_kinds", "plain_kinds", "head", "middle", "tail", "step",
                 "tiles")

    def __init__(self, codes, table, program_key, floats, ints, numbers):
        groups, dual_kinds, number_kinds, plain_kinds = kinds_of(program_key)
        self.groups, self.plain_kinds = groups, plain_kinds
        self.dual_kinds = [(kind, np.dtype(kind[1])) for kind in dual_kinds]
        # (a table of plain launches: the program's V0, P0 are unused)
        self.head = [codes, table] + ([(), ()] if not groups else [])
        self.middle = [np.array(floats or [0.0], np.float64), np.array(ints or [0], np.int64)]
        if not dual_kinds:
            self.middle += [np.zeros(1), np.zeros((1, 1))]
        self.tail = [np.array(numbers.get(kind) or [0], np.dtype(kind[1]))
                     for kind in number_kinds]
        self.step = program_key[0][-1]
        self.tiles = self.step.outer([key[-1] for key in program_key])

    def build(self, groups, dual_groups, plain_groups=None):
        """The inputs for a run: ``groups`` (buffer group -> its ``(values, partials)`` in
        order), ``dual_groups`` (dual kind -> ``(values, partials, duals)``), the plain array
        groups of a launch graph's replay; a tile-by-tile program's snapshots, private values
        and control array are made fresh."""
        inputs = list(self.head)
        for group in self.groups:
            found = groups[group]
            inputs += [tuple(v for v, _ in found), tuple(p for _, p in found)]
        inputs += self.middle
        for kind, dtype in self.dual_kinds:
            values, partials, _ = dual_groups.get(kind) or ((), (), ())
            if not partials:  # a kind of an earlier table that no launch of this one has
                inputs += [np.zeros(1, dtype), np.zeros((1, 1), dtype)]
                continue
            inputs += [np.array(values, dtype), np.stack(partials)]
        inputs += self.tail
        for group in self.plain_kinds:
            inputs.append(tuple(a.view(np.ndarray) for a in plain_groups[group]))
        if self.tiles:  # it runs lane tile by lane tile
            inputs += self.step.outer_inputs(
                [inputs[2 + 2 * g] for g in range(len(self.groups))], self.tiles)
        return inputs


def inputs(state, codes, table, program_key):
    """The inputs of a program (``program_key``) for a table (``codes``, ``table``): the
    codes and rows, each buffer group's values and partials, the float and int tables, each
    dual group's values and partials, the number tables, the plain array groups, and a
    tile-by-tile program's snapshots, private values and control array. ``state``: the
    recorder, or a namespace with its ``groups``, ``floats``, ``ints``, ``numbers`` and
    ``dual_groups`` (a traced run's replay)."""
    return Inputs(codes, table, program_key, state.floats, state.ints, state.numbers).build(
        state.groups, state.dual_groups, getattr(state, "plain_groups", {}))


def seeded(inputs, program_key):
    """True if some partial among a program's ``inputs`` (a buffer group's or a dual
    group's) is not zero: only then can a check of the program against the launches see how
    it computes partials (on zero partials every order of the lane arithmetic gives zero).
    True for a table without partials (plain launches)."""
    groups, dual_kinds, _, _ = kinds_of(program_key)
    partials = [p for g in range(len(groups)) for p in inputs[3 + 2 * g]]
    first_dual = 2 + 2 * max(len(groups), 1) + 2
    partials += [inputs[first_dual + 2 * k + 1] for k in range(len(dual_kinds))]
    return not partials or any(p.any() for p in partials)


def ops(program_key):
    """Per kind of launch, its arguments' sources (see ``program_source``), and the
    counts of buffer groups, dual groups, number tables and plain array groups."""
    groups, dual_kinds, number_kinds, plain_kinds = kinds_of(program_key)
    ops = []
    for _, kinds, _, _ in program_key:
        sources = []
        for kind in kinds:
            if kind[0] == "a":
                sources.append(("a", groups.index(kind[:-1])))
            elif kind[0] == "s":
                sources.append(("s", dual_kinds.index(kind)))
            elif kind[0] == "n":
                sources.append(("n", number_kinds.index(kind)))
            elif kind[0] == "p":
                sources.append(("p", plain_kinds.index(kind[:-1])))
            else:
                sources.append(kind)
        ops.append(sources)
    return ops, [len(groups), max(len(dual_kinds), 1), len(number_kinds), len(plain_kinds)]
