"""Per-member Jacobians of an ensemble: every member seeded at once.

An *ensemble* runs many independent copies of one system in one simulation: a
thread per pendulum, per particle, per parameter sample. Each member's outputs
depend only on its own inputs (its initial state, its own parameters) and on
parameters shared by all. :func:`ensemble_jacobian` returns every member's
Jacobian, shape ``(members, outputs, inputs)``, for the cost of one member's:

* a **batched** input (``batch_axes`` an int: the members run along that axis)
  is seeded per component: lane ``k`` carries a 1 in component ``k`` of *every*
  member at once. Its cost in lanes is the per-member input size, not
  members x inputs;
* a **shared** input (``batch_axes`` None: a scalar parameter, or an array used
  by all members) is seeded as :func:`dualgpu.jacobian` seeds it, and each
  member's row of the result is its own derivative.

Independence is an assumption, not something forward mode can see in one run:
when member ``i``'s outputs depend on member ``j``'s inputs (a coupling, a mean
field, a reduction over members), lane ``k`` sums those cross terms into member
``i``'s column ``k`` and the result is wrong. So every call seeds two more lanes,
the probe direction of :mod:`dualgpu.autodiff.reuse` (a different random value for
each member and component) and its rounding gauge, and raises where the run's
derivative along the probe differs from what the per-member Jacobians give beyond
the run's rounding: the same check as a reused sparse coloring
(this seeding *is* a coloring: column (member ``i``, component ``k``) has color ``k``).
``validate=True`` (a dense check, for small problems) or ``validate="detect"`` (the
structural tracer of :mod:`dualgpu.autodiff.sparse`, cpu backend) check the structure
itself, also where the probe cannot see it (an interaction that is zero at this input).
"""
from __future__ import annotations

from typing import Any, Sequence
from dualgpu.core.hints import ArgNums, Function, Progress

import re

import numpy as np

from dualgpu.autodiff.api import jacobian, jvp_batch
from dualgpu.autodiff.engine import _classify, _normalize_argnums, check_depth
from dualgpu.autodiff.reuse import check_members, probe_lanes
from dualgpu.autodiff.sparse import detect_sparsity
from dualgpu.core.dualarray import DualArray
from dualgpu.errors import DualgpuError

__all__ = ["ensemble_jacobian"]


class _Batched:
    """One differentiated argument: its batch axis (None when shared) and its columns."""

    def __init__(self, position, value, axis, offset):
        self.position = position
        self.value = value
        self.axis = axis
        self.shape = np.shape(value)
        if axis is None:
            self.members = None
            self.member_shape = self.shape
        else:
            self.members = self.shape[axis]
            self.member_shape = self.shape[:axis] + self.shape[axis + 1:]
        self.size = int(np.prod(self.member_shape))  # columns of the result
        self.offset = offset

    def tangents(self, n_directions, dtype):
        """The seeds of all directions for this argument: shape ``(n_directions,) + shape``."""
        t = np.zeros((n_directions,) + self.shape, dtype)
        eye = np.eye(self.size, dtype=dtype).reshape((self.size,) + self.member_shape)
        block = t[self.offset:self.offset + self.size]
        if self.axis is None:
            block[...] = eye
        else:  # the same one-hot component in every member
            block[...] = np.expand_dims(eye, 1 + self.axis)
        return t

    def probe(self, t, v):
        """Write ``v`` (shape ``(members, size)``) into the probe direction ``t`` of this
        batched argument, each member's values along its batch axis."""
        v = v.reshape((self.members,) + self.member_shape)
        t[...] = np.moveaxis(v, 0, self.axis)

    def where(self, column):
        """Describe column ``column`` of this argument for messages."""
        index = np.unravel_index(column, self.member_shape) if self.member_shape else ()
        if self.axis is None:
            inside = f"[{', '.join(map(str, index))}]" if index else " (scalar)"
            return f"shared argument {self.position}{inside}"
        parts = [str(i) for i in index]
        parts.insert(self.axis, ":")
        return f"argument {self.position}[{', '.join(parts)}] (component {column} of every member)"


def _batch_axes(batch_axes, count, fname):
    items = batch_axes if isinstance(batch_axes, (tuple, list)) else (batch_axes,) * count
    if len(items) != count:
        raise DualgpuError(
            f"{fname}: batch_axes={batch_axes!r} has {len(items)} entries for {count} "
            "differentiated argument(s); expected one per entry of argnums (an int axis, or "
            "None for an input shared by all members). Fix: e.g. argnums=(0, 2), "
            "batch_axes=(0, None)."
        )
    for a in items:
        if a is not None and (isinstance(a, bool) or not isinstance(a, (int, np.integer))):
            raise DualgpuError(
                f"{fname}: batch_axes entries must be ints or None; got {a!r}."
            )
    return [None if a is None else int(a) for a in items]


def _inputs(args, positions, axes, fname):
    check_depth(fname)
    inputs, offset = [], 0
    for p, axis in zip(positions, axes):
        kind, value, _ = _classify(args[p])
        if kind is None:
            raise DualgpuError(
                f"{fname}: argument {p} is {value}; expected a float32/float64 array or a "
                "float scalar to differentiate. Fix: remove it from argnums or pass floats."
            )
        if axis is not None:
            ndim = np.ndim(value)
            if kind != "array" or not -ndim <= axis < ndim:
                raise DualgpuError(
                    f"{fname}: batch axis {axis} of argument {p} does not exist: it has shape "
                    f"{np.shape(value)}. Expected an array whose axis {axis} runs over the "
                    "members. Fix: give that argument's member axis, or None if all members "
                    "share it."
                )
            axis %= ndim
        inputs.append(_Batched(p, value, axis, offset))
        offset += inputs[-1].size
    sizes = {item.members for item in inputs if item.members is not None}
    if len(sizes) > 1:
        got = ", ".join(f"argument {i.position}: {i.members}" for i in inputs
                        if i.members is not None)
        raise DualgpuError(
            f"{fname}: the batched arguments disagree on the number of members ({got}); "
            "expected the same length along every batch axis."
        )
    return inputs, (sizes.pop() if sizes else None)


def _member_rows(tangent, out_axis, members, o, fname):
    """Output tangents ``(n, *out_shape)`` as ``(n, members, per-member size)``."""
    out_shape = tangent.shape[1:]
    ndim = len(out_shape)
    if ndim == 0 or not -ndim <= out_axis < ndim:
        raise DualgpuError(
            f"{fname}: output {o} of f has shape {out_shape}, without an axis {out_axis} over "
            "the members. Expected every output to hold one entry (or row) per member along "
            "out_axis. Fix: return the per-member array, not a reduction of it (a mean, a "
            "norm), or set out_axis."
        )
    axis = out_axis % ndim
    if members is not None and out_shape[axis] != members:
        raise DualgpuError(
            f"{fname}: output {o} of f has {out_shape[axis]} entries along out_axis={out_axis} "
            f"(shape {out_shape}) but the batched inputs have {members} members. Expected "
            "the member axis of the output; fix out_axis or the batch axes."
        )
    moved = np.moveaxis(tangent, 1 + axis, 1)
    return moved.reshape(moved.shape[0], moved.shape[1], -1)


def ensemble_jacobian(f: Function, *args: Any, argnums: ArgNums = 0,
                      batch_axes: int | Sequence[int | None] = 0, out_axis: int = 0,
                      chunk_size: int | None = None, progress: Progress = None,
                      validate: bool = False) -> Any:
    """Return every member's Jacobian of an ensemble simulation, shape
    ``(members, outputs, inputs)``.

    ``J[i, r, c]`` is the derivative of member ``i``'s output component ``r``
    with respect to its input component ``c``. All members are seeded at once
    (see the user guide's ensembles page): the simulation runs once per chunk of the
    per-member input size, whatever the number of members.

    Parameters
    ----------
    f : callable
        The simulation function, as for :func:`dualgpu.jacobian`. Each output
        (an array, or a tuple of arrays) holds the members along ``out_axis``.
    *args
        f's positional arguments.
    argnums : int or tuple of int
        The arguments to differentiate.
    batch_axes : int, None or tuple of (int or None)
        Per entry of ``argnums`` (or one value for all): the axis of that
        argument that runs over the members (a *batched* input: each member
        has its own), or None for an input *shared* by every member (a scalar
        parameter, or an array all members read).
    out_axis : int
        The axis of every output that runs over the members.
    chunk_size : int, optional
        Lanes per run, as for :func:`dualgpu.jvp_batch`.
    progress : bool, optional
        As for :func:`dualgpu.jacobian`: by default a bar only on an
        interactive terminal or in a notebook.
    validate : bool or "detect"
        Check that members do not interact (otherwise the result is wrong, see
        below): ``True`` computes the dense Jacobian of each batched argument
        and checks that it has no entry between different members (small
        problems: it seeds members x inputs directions); ``"detect"`` checks
        the structure with the sparsity tracer (cpu backend).

    Returns
    -------
    ndarray, shape ``(members, outputs, inputs)``
        ``outputs`` is the per-member size of all outputs, concatenated in
        order (each flattened in C order without its member axis);
        ``inputs`` the per-member size of the differentiated arguments in
        ``argnums`` order (a batched argument without its member axis, a
        shared one whole).

    Raises
    ------
    DualgpuError
        For arguments or outputs without a member axis, members that disagree
        in number, and, with ``validate``, members that interact.

    Notes
    -----
    Lane ``k`` of a batched input seeds component ``k`` of every member. When
    member ``i``'s outputs depend on another member's inputs, the column that
    comes back is the sum of member ``i``'s own derivative and those cross
    terms: it is *not* member ``i``'s Jacobian. Nothing in one forward run can
    tell the two apart; ``validate`` can, on a small instance of the problem.
    A shared input has no such assumption.

    Examples
    --------
    Each pendulum's final (angle, velocity) with respect to its own initial
    (angle, velocity), and to the shared damping:

    >>> import numpy as np, dualgpu
    >>> from simulations import pendulums
    >>> theta0, omega0 = pendulums.default_initial_state(1000)
    >>> def final_state(theta0, omega0, damping):
    ...     return pendulums.simulate(theta0, omega0, n_steps=20, damping=damping)
    >>> with dualgpu.using_backend("cpu"):
    ...     J = ensemble_jacobian(final_state, theta0, omega0, 0.5, argnums=(0, 1, 2),
    ...                           batch_axes=(0, 0, None))
    >>> J.shape               # 1000 members, (theta, omega) outputs, 3 inputs
    (1000, 2, 3)
    """
    fname = "ensemble_jacobian"
    args = tuple(args)
    _, positions = _normalize_argnums(argnums, len(args), fname)
    axes = _batch_axes(batch_axes, len(positions), fname)
    if isinstance(out_axis, bool) or not isinstance(out_axis, (int, np.integer)):
        raise DualgpuError(f"{fname}: out_axis must be an int; got {out_axis!r}.")
    if validate not in (False, True, "detect"):
        raise DualgpuError(
            f"{fname}: validate must be False, True (dense check) or 'detect' (structural "
            f"check); got {validate!r}."
        )
    inputs, members = _inputs(args, positions, axes, fname)
    if validate:
        _check_independent(f, args, inputs, int(out_axis), validate, fname)
    n = sum(item.size for item in inputs)
    dtypes = [np.result_type(item.value) for item in inputs]
    batched = [item for item in inputs if item.axis is not None]
    n_batched = sum(item.size for item in batched)
    probe = None
    if members is not None and members > 1:  # the probe and gauge (dualgpu.autodiff.reuse)
        probe = probe_lanes(members * n_batched, dtypes[inputs.index(batched[0])],
                            np.tile(np.arange(n_batched), members), (members, n_batched))
    tangents = [None] * len(args)
    done = 0
    for item, dtype in zip(inputs, dtypes):
        tangents[item.position] = item.tangents(n + (0 if probe is None else 2), dtype)
        if probe is not None and item.axis is not None:
            for which, direction in enumerate(probe):
                item.probe(tangents[item.position][n + which],
                           direction[:, done:done + item.size])
            done += item.size
    try:
        outputs, out_tangents = jvp_batch(f, args, tangents, chunk_size=chunk_size,
                                          progress=progress)
    except DualgpuError as error:
        raise _in_terms_of_columns(error, inputs) from None
    if not isinstance(outputs, tuple):
        out_tangents = (out_tangents,)
    rows = []
    for o, tangent in enumerate(out_tangents):
        block = _member_rows(tangent, int(out_axis), members, o, fname)
        members = block.shape[1] if members is None else members
        rows.append(block)
    stacked = np.concatenate(rows, axis=2) if len(rows) > 1 else rows[0]
    if probe is not None:
        _check_probe(stacked, inputs, probe, n, fname)
        stacked = stacked[:n]
    result = np.transpose(stacked, (1, 2, 0))
    if isinstance(result, DualArray):  # inside another derivative: its partials come along
        return result.copy()
    return np.ascontiguousarray(result)


def _check_probe(stacked, inputs, probe, n, fname):
    """Compare the probe lane ``stacked[n]`` (gauge ``stacked[n + 1]``) with the per-member
    Jacobians along it."""
    values = getattr(stacked, "values", stacked)  # inside another derivative: the values
    values = np.asarray(values)
    columns = np.concatenate([np.arange(item.offset, item.offset + item.size)
                              for item in inputs if item.axis is not None])
    G = np.transpose(values[columns], (1, 2, 0))  # (members, outputs, batched inputs)
    check_members(G, probe[0], values[n], probe[0].dtype, fname, gauge=values[n + 1], fix=(
        "for coupled members use dualgpu.jacobian (the full Jacobian) or "
        "dualgpu.jacobian(..., sparsity='detect'); check that the batch axes are the member "
        "axes; validate=True or 'detect' names the pair of members that interact."))


def _in_terms_of_columns(error, inputs):
    """Say which input column a driver message's 'tangent direction k' is."""
    message = str(error)
    found = re.search(r"tangent direction (\d+)", message)
    if found:
        d = int(found.group(1))
        for item in inputs:
            if item.offset <= d < item.offset + item.size:
                message += (f" (In ensemble_jacobian, direction {d} is "
                            f"{item.where(d - item.offset)}.)")
    return DualgpuError(message.replace("jvp_batch:", "ensemble_jacobian:", 1))


def _check_independent(f, args, inputs, out_axis, how, fname):
    """Raise when a member's outputs depend on another member's batched inputs."""
    for item in inputs:
        if item.axis is None:
            continue
        if how == "detect":
            _check_structure(f, args, item, out_axis, fname)
            continue
        jac = jacobian(f, *args, argnums=item.position, chunk_size=None, progress=False)
        blocks = jac if isinstance(jac, tuple) else (jac,)
        for o, block in enumerate(blocks):
            out_ndim = block.ndim - len(item.shape)
            if out_ndim == 0:
                continue  # _member_rows reports outputs without a member axis
            dense = np.moveaxis(block, out_axis % out_ndim, 0)
            dense = np.moveaxis(dense, out_ndim + item.axis, 1)
            B = dense.shape[0]
            if dense.shape[1] != B:
                continue  # member counts disagree: reported by _member_rows
            cross = np.abs(dense.reshape(B, B, -1)).max(axis=2) if dense.size else None
            if cross is None:
                continue
            np.fill_diagonal(cross, 0.0)
            _raise_if_coupled(cross, item, o, fname, "the dense Jacobian")


def _check_structure(f, args, item, out_axis, fname):
    probe = f(*args)
    count = len(probe) if isinstance(probe, tuple) else 1
    for o in range(count):
        def one_output(*a, _o=o):
            result = f(*a)
            return result[_o] if isinstance(result, tuple) else result

        out_shape = np.shape(probe[o] if isinstance(probe, tuple) else probe)
        if not out_shape:
            continue
        pattern = detect_sparsity(one_output, args, item.position).tocoo()
        out_member = np.unravel_index(pattern.row, out_shape)[out_axis % len(out_shape)]
        in_member = np.unravel_index(pattern.col, item.shape)[item.axis]
        B = item.members
        if out_shape[out_axis % len(out_shape)] != B:
            continue  # reported by _member_rows
        cross = np.zeros((B, B))
        np.maximum.at(cross, (out_member, in_member), 1.0)
        np.fill_diagonal(cross, 0.0)
        _raise_if_coupled(cross, item, o, fname, "the structural tracer")


def _raise_if_coupled(cross, item, o, fname, how):
    if not cross.any():
        return
    i, j = np.argwhere(cross)[0]
    pairs = int(np.count_nonzero(cross))
    raise DualgpuError(
        f"{fname}: members interact: {how} shows output {o} of member {i} depending on "
        f"argument {item.position} of member {j} ({pairs} such pair(s) of members). "
        "ensemble_jacobian seeds every member at once and would add those cross terms into "
        "each member's Jacobian. Expected independent members along the batch axis. Fix: "
        "use dualgpu.jacobian (the full Jacobian) or dualgpu.jacobian(..., sparsity='detect') "
        "for coupled members, or check that the batch axis is the member axis."
    )
