"""How wrong a central finite difference itself is: the second opinion of the checkers.

A central difference ``D(h) = (f(x + h t) - f(x - h t)) / 2h`` has two errors:

* truncation, about ``c h**2``: ``D(h) - D(2h)`` is ``-3 c h**2``, so it bounds it;
* rounding: each output carries about one unit of roundoff ``u`` of the precision f
  computes in, relative to the output's size, so ``D(h)`` carries about
  ``u |f| / h``: large where an output is large beside its derivative (an offset, an
  energy), and large where f computes in float32 though its arrays are float64
  (the float64 step is then far too small).

:func:`fd_estimate` evaluates ``D`` at a ladder of steps ``..., h/4, h/2, h, 2h, 4h, ...``,
estimates each one's error as ``|D(h) - D(2h)| + 2 u max|f(x +- h t)| / h`` per entry, and
returns, entry by entry, the difference whose estimate is smallest: an entry whose output
has a kink (a limiter's min/max, abs) within a step of ``x`` takes a step short of it, the
others a step where rounding is small. :func:`computes_in_float32`
tells float32 arithmetic behind float64 arrays: every output of the perturbed runs
is a float32 number, which float64 arithmetic at a float64 step gives by chance
with probability about 2**-29 per entry.

The checkers (:mod:`dualgpu.testing`) ask for this second opinion only when the
dtype's tolerance fails, and allow a difference up to the estimate, never more
than :data:`MAX_FD_ERROR` of the derivative's size, so a dropped partial or a
wrong rule (a difference as large as the derivative) is always caught.
"""
import numpy as np

__all__ = ["MAX_FD_ERROR", "UNIT_ROUNDOFF", "computes_in_float32", "fd_estimate"]

#: unit roundoff of each float dtype
UNIT_ROUNDOFF = {np.dtype(np.float64): 2.0 ** -53, np.dtype(np.float32): 2.0 ** -24}
#: the largest finite-difference error (relative to the output's largest derivative)
#: that the checkers allow: beyond it a finite difference cannot check the derivative
MAX_FD_ERROR = 0.1
#: how many doublings of the step :func:`fd_estimate` tries
STEP_DOUBLINGS = 6
#: and how many halvings
STEP_HALVINGS = 4


def computes_in_float32(outputs):
    """True when float64 ``outputs`` (arrays) hold float32 numbers only, and vary.

    Parameters
    ----------
    outputs : list of ndarray
        The outputs of f at perturbed inputs (several runs).

    Returns
    -------
    bool

    Examples
    --------
    >>> import numpy as np
    >>> from dualgpu.autodiff.fd_error import computes_in_float32
    >>> x = np.linspace(0.1, 1.0, 5)
    >>> (computes_in_float32([np.sin(x)]),
    ...  computes_in_float32([np.sin(x.astype(np.float32)).astype(float)]))
    (False, True)
    """
    values = [np.asarray(o, np.float64).reshape(-1) for o in outputs]
    values = np.concatenate(values) if values else np.zeros(0)
    values = values[np.isfinite(values)]
    varied = values[values != np.round(values)]  # integers are float32 numbers by chance
    if varied.size < 2:
        return False
    return bool(np.all(values.astype(np.float32).astype(np.float64) == values))


def fd_estimate(evaluate, h, roundoff):
    """The central difference with the smallest estimated error over a ladder of steps,
    entry by entry.

    Parameters
    ----------
    evaluate : callable
        ``evaluate(h)`` returns ``(up, down)``: f's outputs (lists of float64 arrays)
        at ``x + h t`` and ``x - h t``.
    h : float
        The middle step of the ladder.
    roundoff : float
        The unit roundoff of the precision f computes in.

    Returns
    -------
    fd : list of ndarray
        The central difference per output, each entry at its own step.
    error : list of ndarray
        Its estimated error per entry.
    steps : tuple of float
        The smallest and largest step the entries took.
    """
    ladder = []
    for k in range(-STEP_HALVINGS, STEP_DOUBLINGS + 1):
        step = h * 2.0 ** k
        up, down = evaluate(step)
        fd = [(a - b) / (2.0 * step) for a, b in zip(up, down)]
        rounding = [2.0 * roundoff * np.maximum(np.abs(a), np.abs(b)) / step
                    for a, b in zip(up, down)]
        ladder.append((step, fd, rounding))
    pairs = list(zip(ladder, ladder[1:]))
    fds, errors, taken = [], [], []
    for o in range(len(ladder[0][1])):
        candidates = np.stack([np.asarray(fd[o], np.float64) for (_, fd, _), _ in pairs])
        estimates = np.stack([np.abs(np.asarray(fd[o]) - np.asarray(fd2[o])) + rounding[o]
                              for (_, fd, rounding), (_, fd2, _) in pairs])
        estimates = np.where(np.isnan(estimates), np.inf, estimates)
        best = np.argmin(estimates, axis=0)
        fds.append(np.take_along_axis(candidates, best[None], 0)[0])
        errors.append(np.take_along_axis(estimates, best[None], 0)[0])
        taken.extend(np.unique(best).tolist())
    steps = [pairs[k][0][0] for k in taken] or [h]
    return fds, errors, (min(steps), max(steps))
