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
"""
import warnings

import numpy as np

from . import driver
from ._protect import protect
from .errors import DualgpuError

__all__ = ["check_jvp", "check_jacobian", "RTOL", "EPS"]

#: Default relative tolerance per dtype.
RTOL = {np.dtype(np.float64): 1e-6, np.dtype(np.float32): 1e-2}
#: Default finite-difference step (relative to the inputs' size) per dtype.
EPS = {np.dtype(np.float64): 6e-6, np.dtype(np.float32): 5e-3}


def _float_kind(x):
    """``(kind, dtype)`` of a differentiable argument, or ``(None, None)``."""
    kind, _, dtype = driver._classify(x)
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
    _, positions = driver._normalize_argnums(argnums, len(primals), fname)
    driver._make_inputs(primals, positions, fname)  # raises for non-float arguments
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
    return [np.asarray(driver._to_numpy(item), dtype=np.float64) for item in items]


def _central_difference(f, primals, tangents, eps):
    """Central difference of f along ``tangents`` and the dtypes involved."""
    relative = max(
        _rms(t) / (_rms(x) or 1.0) for x, t in zip(primals, tangents) if t is not None
    ) or 1.0
    h = eps / relative
    # fresh copies of every array reachable from the fixed arguments for each run: f may
    # write into them, and neither the caller nor the other run may see that
    plus = tuple(protect(x) if t is None else _shift(x, t, h) for x, t in zip(primals, tangents))
    minus = tuple(protect(x) if t is None else _shift(x, t, -h) for x, t in zip(primals, tangents))
    up, down = _outputs(f(*plus)), _outputs(f(*minus))
    return [(a - b) / (2.0 * h) for a, b in zip(up, down)]


def _lowest_precision(dtypes):
    return np.dtype(np.float32) if np.dtype(np.float32) in dtypes else np.dtype(np.float64)


def _compare(ad, fd, rtol, atol, what):
    """Return the largest norm-wise relative error; raise AssertionError past tolerance."""
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
        if biggest > atol + rtol * scale:
            flat = int(np.argmax(diff)) if diff.size else 0
            index = list(map(int, np.unravel_index(flat, a.shape))) if a.ndim else []
            failures.append(
                f"output {o}{index if index else ''}: forward mode "
                f"{float(a.reshape(-1)[flat]):.10g} vs finite difference "
                f"{float(b.reshape(-1)[flat]):.10g} (|diff| {biggest:.3g}, relative {err:.3g} of "
                f"max |derivative| {scale:.3g}; allowed {atol} + {rtol} * {scale:.3g})"
            )
    if failures:
        raise AssertionError(
            f"{what}: forward-mode derivative differs from central finite differences.\n  "
            + "\n  ".join(failures)
            + "\nForward mode and finite differences should agree to rtol for a correct "
            "derivative; a dropped partial (.value, float(), np.asarray on a dual) or a wrong "
            "rule gives a large error. Raise rtol/atol or adjust eps if the function is "
            "ill-conditioned."
        )
    return worst


def _tolerances(dtype, rtol, atol, eps):
    return (RTOL[dtype] if rtol is None else float(rtol),
            0.0 if atol is None else float(atol),
            EPS[dtype] if eps is None else float(eps))


def check_jvp(f, primals, tangents=None, *, rtol=None, atol=None, eps=None, seed=0,
              argnums=None):
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
    outputs, ad = driver.jvp(f, primals, tangents)
    ad = list(ad) if isinstance(outputs, tuple) else [ad]
    dtypes = {_float_kind(x)[1] for x, t in zip(primals, tangents) if t is not None}
    dtypes |= {np.asarray(a).dtype for a in ad}
    rtol, atol, eps = _tolerances(_lowest_precision(dtypes), rtol, atol, eps)
    fd = _central_difference(f, primals, tangents, eps)
    return _compare(ad, fd, rtol, atol, f"check_jvp of {getattr(f, '__name__', 'f')}")


def check_jacobian(f, *args, argnums=0, chunk_size=None, n_directions=3, rtol=None,
                   atol=None, eps=None, seed=0):
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
    single, positions = driver._normalize_argnums(argnums, len(args), fname)
    for p in positions:
        if isinstance(args[p], (tuple, list)):
            raise DualgpuError(
                f"{fname}: argument {p} is a {type(args[p]).__name__}; expected a float array "
                "or float scalar. check_jacobian takes f's arguments the way dualgpu.jacobian "
                "does. Fix: check_jacobian(f, *args, argnums=...) instead of "
                "check_jacobian(f, args, ...)."
            )
    jac = driver.jacobian(f, *args, argnums=argnums, chunk_size=chunk_size, progress=False)
    multi_output = isinstance(jac, tuple) and (single or isinstance(jac[0], tuple))
    per_output = list(jac) if multi_output else [jac]
    per_output = [[j] if single else list(j) for j in per_output]
    dtypes = {_float_kind(args[p])[1] for p in positions}
    dtypes |= {blocks[0].dtype for blocks in per_output}
    rtol, atol, eps = _tolerances(_lowest_precision(dtypes), rtol, atol, eps)
    rng = np.random.default_rng(seed)
    worst = 0.0
    for d in range(int(n_directions)):
        tangents = _random_tangents(args, positions, rng)
        ad = []
        for blocks in per_output:
            total = 0.0
            for p, block in zip(positions, blocks):
                v = np.asarray(tangents[p], np.float64)
                total = total + np.tensordot(block.astype(np.float64), v, axes=v.ndim)
            ad.append(total)
        fd = _central_difference(f, args, tangents, eps)
        what = f"check_jacobian of {getattr(f, '__name__', 'f')} (direction {d})"
        worst = max(worst, _compare(ad, fd, rtol, atol, what))
    return worst
