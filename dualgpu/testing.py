"""Check derivatives of simulation functions against central finite differences.

:func:`check_jvp` compares one forward-mode directional derivative with a
central difference of ``f`` along the same direction; :func:`check_jacobian`
compares ``J @ v`` for a few random directions ``v``. The finite differences
run ``f`` on plain inputs, outside the driver, so they check the dual
arithmetic against the plain arithmetic of the same code.

Error measure
-------------
For each output, ``err = max|ad - fd| / max(max|fd|, max|ad|)`` (norm-wise, so
entries near zero do not blow it up). The check passes when
``max|ad - fd| <= atol + rtol * max(max|fd|, max|ad|)`` for every output.
Default ``rtol`` (see :data:`RTOL`): 1e-6 for float64, 1e-2 for float32 (the
lowest precision among the differentiated inputs and the outputs decides);
``atol`` defaults to 0. The step is ``eps`` times the size of the inputs along
the direction, with ``eps`` about the cube root of the machine epsilon
(:data:`EPS`), which balances truncation (eps**2) against rounding (ulp/eps).

Before an alarm, a second opinion on the finite difference itself
(the finite differences' own rounding error, estimated): the dtype of the arrays is not
always the precision of
the values. Where f computes in float32 behind float64 arrays (its outputs are
float32 numbers), the float32 step and tolerance apply; and the difference is taken
again over a ladder of steps, each with its own error estimated (truncation from
two steps, rounding from the outputs' size: large where an output is large beside
its derivative). An entry then fails only where it differs by more than the
tolerance plus that estimate, and the estimate never covers more than
``MAX_FD_ERROR`` (10 %) of the derivative, so a dropped partial is always caught.
"""
from __future__ import annotations

from typing import Any, Sequence
from dualgpu.core.hints import ArgNums, ArrayLike, Function

import warnings

import numpy as np

from dualgpu.autodiff import engine
from dualgpu.autodiff.api import jacobian, jvp
from dualgpu.autodiff._protect import protect
from dualgpu.errors import DualgpuError
from dualgpu.autodiff.fd_error import MAX_FD_ERROR, UNIT_ROUNDOFF, computes_in_float32, fd_estimate

__all__ = ["check_jvp", "check_jacobian", "RTOL", "EPS"]

#: Default relative tolerance per dtype.
RTOL = {np.dtype(np.float64): 1e-6, np.dtype(np.float32): 1e-2}
#: Default finite-difference step (relative to the inputs' size) per dtype.
EPS = {np.dtype(np.float64): 6e-6, np.dtype(np.float32): 5e-3}


def _float_kind(x):
    """``(kind, dtype)`` of a differentiable argument, or ``(None, None)``."""
    kind, _, dtype = engine._classify(x)
    return kind, dtype


def _rms(a):
    a = np.asarray(a, dtype=np.float64)
    return float(np.sqrt(np.mean(a * a))) if a.size else 0.0


def _positions(primals, argnums, fname):
    if argnums is None:
        found = [p for p, x in enumerate(primals) if _float_kind(x)[0] is not None]
        if not found:
            raise DualgpuError(f"{fname}: f has no float argument to differentiate.")
        return found
    _, positions = engine._normalize_argnums(argnums, len(primals), fname)
    engine._make_inputs(primals, positions, fname)  # raises for non-float arguments
    return positions


def _random_tangents(primals, positions, rng):
    """Random directions, each argument's scaled to that argument's size."""
    tangents = [None] * len(primals)
    for p in positions:
        x = primals[p]
        kind, dtype = _float_kind(x)
        scale = _rms(x) or 1.0
        if kind == "array":
            tangents[p] = (scale * rng.standard_normal(np.shape(x))).astype(dtype)
        else:
            tangents[p] = dtype.type(scale * rng.standard_normal())
    return tuple(tangents)


def _shift(x, t, h):
    """``x + h t`` in x's own type (Python float stays float, float32 stays float32)."""
    if isinstance(x, float) and not isinstance(x, np.floating):
        return float(x + h * float(t))
    dtype = np.asarray(x).dtype
    shifted = (np.asarray(x, np.float64) + h * np.asarray(t, np.float64)).astype(dtype)
    return shifted if isinstance(x, np.ndarray) and x.ndim else dtype.type(shifted)



def _outputs(result):
    items = list(result) if isinstance(result, (tuple, list)) else [result]
    return [np.asarray(engine._to_numpy(item), dtype=np.float64) for item in items]


def _step(primals, tangents, eps):
    """The step h: ``eps`` times the inputs' size along the direction."""
    relative = max(
        _rms(t) / (_rms(x) or 1.0) for x, t in zip(primals, tangents) if t is not None
    ) or 1.0
    return eps / relative


def _evaluate(f, primals, tangents, h, shapes=None, what="f"):
    """f's outputs (float64 arrays) at ``x + h t`` and ``x - h t``.

    With ``shapes`` (the forward-mode outputs' shapes), outputs of other shapes raise a
    :class:`~dualgpu.DualgpuError` that names them and the step, instead of numpy's
    broadcasting error when they are subtracted.
    """
    # fresh copies of every array reachable from the fixed arguments for each run: f may
    # write into them, and neither the caller nor the other run may see that
    plus = tuple(protect(x) if t is None else _shift(x, t, h) for x, t in zip(primals, tangents))
    minus = tuple(protect(x) if t is None else _shift(x, t, -h) for x, t in zip(primals, tangents))
    up, down = _outputs(f(*plus)), _outputs(f(*minus))
    if shapes is not None:
        _check_shapes(shapes, up, down, h, what)
    return up, down


def _check_shapes(shapes, up, down, h, what):
    """Raise if f's outputs at ``x +- h t`` differ in number or shape from the derivative's."""
    got_up, got_down = [a.shape for a in up], [a.shape for a in down]
    if got_up == got_down == list(shapes):
        return
    raise DualgpuError(
        f"{what}: f's output shapes change with its inputs, so finite differences cannot be "
        f"taken: at the step h = {h:.3g} along the direction, f(x + h t) has shape(s) "
        f"{_shape_list(got_up)} and f(x - h t) {_shape_list(got_down)}, where the forward-mode "
        f"derivative at x has {_shape_list(shapes)}. An output whose length depends on the "
        "inputs (an adaptive number of time steps, a stopping tolerance, a threshold on a "
        "value) does that. Fix: give eps= a smaller relative step, so that x +- h t stays "
        "where the shapes are the same, or return outputs of a fixed shape (a fixed number "
        "of steps, or the final state only)."
    )


def _shape_list(shapes):
    return ", ".join(str(tuple(s)) for s in shapes) if len(shapes) != 1 else str(tuple(shapes[0]))


def _central_difference(f, primals, tangents, eps):
    """Central difference of f along ``tangents`` at the step ``eps`` gives."""
    h = _step(primals, tangents, eps)
    up, down = _evaluate(f, primals, tangents, h)
    return [(a - b) / (2.0 * h) for a, b in zip(up, down)]


def _check(f, primals, tangents, ad, precision, rtol, atol, eps, what):
    """Compare ``ad`` with central differences; a second opinion before an alarm.

    First at the step and tolerance of ``precision`` (the lowest among the inputs and
    outputs). Where they differ, the finite difference itself may be the one that is
    off: f may compute in float32 behind float64 arrays (its outputs are float32
    numbers), or an output may be large beside its derivative. Then the difference is
    taken again over a ladder of steps, with its own error estimated
    (the finite differences' own rounding error, estimated), and the derivative fails only
    where it differs by more
    than the tolerance plus that estimate (never more than ``MAX_FD_ERROR`` of it).
    """
    rtol_, atol_, eps_ = _tolerances(precision, rtol, atol, eps)
    h = _step(primals, tangents, eps_)
    shapes = [np.shape(np.asarray(a)) for a in ad]
    up, down = _evaluate(f, primals, tangents, h, shapes, what)
    fd = [(a - b) / (2.0 * h) for a, b in zip(up, down)]
    try:
        return _compare(ad, fd, rtol_, atol_, what)
    except AssertionError:
        pass
    note = ""
    if precision == np.dtype(np.float64) and computes_in_float32(up + down):
        precision = np.dtype(np.float32)
        rtol_, atol_, eps_ = _tolerances(precision, rtol, atol, eps)
        h = _step(primals, tangents, eps_)
        note = "f computes in float32 (its float64 outputs hold float32 numbers); "
    runs = {}

    def evaluate(step):
        if step not in runs:
            runs[step] = _evaluate(f, primals, tangents, step, shapes, what)
        return runs[step]

    fd, fd_error, (low, high) = fd_estimate(evaluate, h, UNIT_ROUNDOFF[precision])
    at = f"the step {low:.3g}" if low == high else f"steps {low:.3g} to {high:.3g}"
    note += (f"finite differences taken again at {at}, each entry at the step of least "
             "estimated error")
    return _compare(ad, fd, rtol_, atol_, what, fd_error=fd_error, note=note)


def _lowest_precision(dtypes):
    return np.dtype(np.float32) if np.dtype(np.float32) in dtypes else np.dtype(np.float64)


def _compare(ad, fd, rtol, atol, what, fd_error=None, note=""):
    """Return the largest norm-wise relative error; raise AssertionError past tolerance.

    ``fd_error`` (per output, per entry) is the finite difference's own estimated error:
    an entry passes when ``|ad - fd| <= atol + rtol * scale + fd_error`` with
    ``fd_error`` at most ``MAX_FD_ERROR * scale``.
    """
    worst = 0.0
    failures = []
    for o, (a, b) in enumerate(zip(ad, fd)):
        a = np.asarray(a, np.float64)
        b = np.asarray(b, np.float64)
        diff = np.abs(a - b)
        if not np.all(np.isfinite(diff)):
            failures.append(f"output {o}: non-finite values (ad has {np.sum(~np.isfinite(a))}, "
                            f"fd has {np.sum(~np.isfinite(b))} non-finite entries)")
            worst = np.inf
            continue
        scale = max(float(np.max(np.abs(b), initial=0.0)), float(np.max(np.abs(a), initial=0.0)))
        biggest = float(np.max(diff, initial=0.0))
        err = biggest / scale if scale > 0 else 0.0
        worst = max(worst, err)
        allowed = np.zeros_like(diff)
        if fd_error is not None:
            estimate = np.broadcast_to(np.asarray(fd_error[o], np.float64), diff.shape)
            allowed = np.minimum(np.nan_to_num(estimate, nan=np.inf), MAX_FD_ERROR * scale)
        excess = diff - allowed
        if float(np.max(excess, initial=0.0)) > atol + rtol * scale:
            flat = int(np.argmax(excess)) if diff.size else 0
            index = list(map(int, np.unravel_index(flat, a.shape))) if a.ndim else []
            fd_part = (" + estimated finite-difference error "
                       f"{float(allowed.reshape(-1)[flat]):.3g}"
                       if fd_error is not None else "")
            failures.append(
                f"output {o}{index if index else ''}: forward mode "
                f"{float(a.reshape(-1)[flat]):.10g} vs finite difference "
                f"{float(b.reshape(-1)[flat]):.10g} (|diff| {float(diff.reshape(-1)[flat]):.3g}, "
                f"relative {err:.3g} of max |derivative| {scale:.3g}; allowed {atol} + {rtol} * "
                f"{scale:.3g}{fd_part})"
            )
    if failures:
        raise AssertionError(
            f"{what}: forward-mode derivative differs from central finite differences"
            + (f" ({note})" if note else "") + ".\n  "
            + "\n  ".join(failures)
            + "\nForward mode and finite differences should agree to rtol for a correct "
            "derivative; a dropped partial (.value, float(), np.asarray on a dual), a wrong "
            "rule, or a write the dual run lost (forward mode 0 where the differences are "
            "not: a kernel writing into a copy rather than the output) gives a large error. "
            "Where f has a kink near the point (a limiter's min/max, abs, a branch on a "
            "value), the finite differences themselves cross it: try a smaller eps. Raise "
            "rtol/atol or adjust eps if the function is ill-conditioned."
        )
    return worst


def _tolerances(dtype, rtol, atol, eps):
    return (RTOL[dtype] if rtol is None else float(rtol),
            0.0 if atol is None else float(atol),
            EPS[dtype] if eps is None else float(eps))


def check_jvp(f: Function, primals: Sequence[ArrayLike],
              tangents: Sequence[ArrayLike] | None = None, *, rtol: float | None = None,
              atol: float | None = None, eps: float | None = None, seed: int = 0,
              argnums: ArgNums | None = None) -> Any:
    """Check ``dualgpu.jvp(f, primals, tangents)`` against a central finite difference.

    Parameters
    ----------
    f : callable
        The simulation function.
    primals : tuple
        f's positional arguments.
    tangents : tuple, optional
        One entry per primal, None for arguments held fixed. Default: a random
        direction (seeded by ``seed``) for the arguments in ``argnums``, each
        scaled to its argument's root-mean-square size.
    rtol, atol, eps : float, optional
        Tolerances and relative finite-difference step; defaults per dtype
        (:data:`RTOL`, atol 0, :data:`EPS`).
    seed : int
        Seed of the random direction.
    argnums : int or tuple of int, optional
        Arguments given random tangents when ``tangents`` is None; default
        every float argument.

    Returns
    -------
    float
        The largest norm-wise relative error over the outputs.

    Raises
    ------
    AssertionError
        When they differ by more than the tolerance; the message gives both
        values where they differ most.

    Examples
    --------
    >>> import numpy as np, dualgpu
    >>> def cube(x):
    ...     return dualgpu.cuda.to_device(x).copy_to_host() ** 3
    >>> dualgpu.testing.check_jvp(cube, (np.linspace(0.5, 1.0, 4),)) < 1e-6
    True
    """
    fname = "check_jvp"
    primals = tuple(primals)
    if tangents is None:
        positions = _positions(primals, argnums, fname)
        tangents = _random_tangents(primals, positions, np.random.default_rng(seed))
    tangents = tuple(tangents)
    outputs, ad = jvp(f, primals, tangents)
    ad = list(ad) if isinstance(outputs, tuple) else [ad]
    dtypes = {_float_kind(x)[1] for x, t in zip(primals, tangents) if t is not None}
    dtypes |= {np.asarray(a).dtype for a in ad}
    return _check(f, primals, tangents, ad, _lowest_precision(dtypes), rtol, atol, eps,
                  f"check_jvp of {getattr(f, '__name__', 'f')}")


def check_jacobian(f: Function, *args: Any, argnums: ArgNums = 0,
                   chunk_size: int | None = None, n_directions: int = 3,
                   rtol: float | None = None, atol: float | None = None,
                   eps: float | None = None, seed: int = 0) -> Any:
    """Return the largest relative error of ``dualgpu.jacobian(f, *args, argnums=argnums)``.

    Takes f's arguments the way :func:`dualgpu.jacobian` does. The Jacobian is
    computed once by the driver; then for ``n_directions`` random directions
    ``v`` (each argument's part scaled to its size), ``J @ v`` is compared with
    a central difference of f along ``v``.

    Parameters
    ----------
    f : callable
    *args
        f's positional arguments.
    argnums : int or tuple of int
        Which arguments to differentiate, as in :func:`dualgpu.jacobian`.
    chunk_size : int, optional
        Passed to the driver.
    n_directions : int
        Number of random directions.
    rtol, atol, eps, seed
        As in :func:`check_jvp`.

    Returns
    -------
    float
        The largest norm-wise relative error over directions and outputs.

    Raises
    ------
    AssertionError
        When ``J @ v`` and the central difference differ by more than the
        tolerance; the message gives both values where they differ most.

    Examples
    --------
    >>> import numpy as np, dualgpu
    >>> from simulations import heat1d
    >>> def final(u0, alpha):
    ...     return heat1d.simulate(u0, n_steps=5, alpha=alpha)
    >>> with dualgpu.using_backend("cpu"):
    ...     error = check_jacobian(final, heat1d.default_initial_state(8), 1.0, argnums=(0, 1))
    >>> error < 1e-6
    True
    """
    if len(args) == 1 and isinstance(args[0], tuple):
        # the former signature check_jacobian(f, args, argnums): a tuple cannot be
        # differentiated, so a lone tuple can only mean that
        warnings.warn(
            "check_jacobian(f, (a, b, ...)) is deprecated: pass f's arguments the way "
            "dualgpu.jacobian takes them, check_jacobian(f, a, b, ..., argnums=...).",
            DeprecationWarning, stacklevel=2)
        args = args[0]
    fname = "check_jacobian"
    args = tuple(args)
    single, positions = engine._normalize_argnums(argnums, len(args), fname)
    for p in positions:
        if isinstance(args[p], (tuple, list)):
            raise DualgpuError(
                f"{fname}: argument {p} is a {type(args[p]).__name__}; expected a float array "
                "or float scalar. check_jacobian takes f's arguments the way dualgpu.jacobian "
                "does. Fix: check_jacobian(f, *args, argnums=...) instead of "
                "check_jacobian(f, args, ...)."
            )
    jac = jacobian(f, *args, argnums=argnums, chunk_size=chunk_size, progress=False)
    multi_output = isinstance(jac, tuple) and (single or isinstance(jac[0], tuple))
    per_output = list(jac) if multi_output else [jac]
    per_output = [[j] if single else list(j) for j in per_output]
    dtypes = {_float_kind(args[p])[1] for p in positions}
    dtypes |= {blocks[0].dtype for blocks in per_output}
    precision = _lowest_precision(dtypes)
    rng = np.random.default_rng(seed)
    worst = 0.0
    for d in range(int(n_directions)):
        tangents = _random_tangents(args, positions, rng)
        ad = []
        for blocks in per_output:
            total: Any = 0.0
            for p, block in zip(positions, blocks):
                v = np.asarray(tangents[p], np.float64)
                total = total + np.tensordot(block.astype(np.float64), v, axes=v.ndim)
            ad.append(total)
        what = f"check_jacobian of {getattr(f, '__name__', 'f')} (direction {d})"
        worst = max(worst, _check(f, args, tangents, ad, precision, rtol, atol, eps, what))
    return worst
