"""NaN-safe mode: a lane whose incoming partial is exactly zero contributes zero.

Forward mode multiplies each argument's partials by a derivative factor. Where
the factor is infinite -- ``sqrt`` or ``x ** 0.5`` at 0, ``log`` or ``1 / x``
at 0, ``asin`` at 1, or an overflow (float32 reaches ``inf`` with
``1e38 / 0.5``) -- the lanes that do not perturb that argument hold 0, and
``inf * 0`` makes them NaN: one bad factor poisons the derivative with respect
to every input. With NaN-safe mode on, a zero partial stays zero whatever the
factor (ForwardDiff.jl's ``NANSAFE_MODE_ENABLED``); lanes that do perturb the
argument still see the infinite factor, as they should.

It is a **compile-time switch**: set the environment variable
``DUALGPU_NANSAFE_MODE=1`` before ``import dualgpu``. Compiled duals
(``@njit``, the cpu backend, CUDA) are generated once per process and cached,
so the mode is read once, at import, and applies to the pure-Python dual
(cudasim, host) and to all compiled code alike. The mode is part of the numba
types of duals (:data:`TYPE_KEY`), hence of every compile cache key: dualgpu's
launcher cache and numba's ``cache=True`` index of users' functions on duals. It is off by
default because each lane product gains a compare and a select (see the README's
performance section for the measured cost).

Examples
--------
>>> from dualgpu import nansafe
>>> nansafe.NANSAFE_MODE_ENABLED in (True, False)
True
"""
import os

__all__ = ["NANSAFE_MODE_ENABLED", "ENVIRONMENT_VARIABLE", "TYPE_KEY"]

#: The environment variable read at import.
ENVIRONMENT_VARIABLE = "DUALGPU_NANSAFE_MODE"

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")


def _read(value):
    text = (value or "").strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(
        f"{ENVIRONMENT_VARIABLE}={value!r}: expected 1/true/yes/on or 0/false/no/off (or unset). "
        f"Fix: export {ENVIRONMENT_VARIABLE}=1 to enable NaN-safe mode, or unset it."
    )


#: True when NaN-safe mode is on for this process (read from the environment at import).
NANSAFE_MODE_ENABLED = _read(os.environ.get(ENVIRONMENT_VARIABLE))

#: Appended to the key of every numba type of a dual (and its name): compiled code for duals
#: differs between the modes, and numba's ``cache=True`` index keys a function's cached code
#: by its signature, so a user's cached function compiled under the other mode is another
#: entry, never loaded in this process. Empty in the default mode (keys unchanged).
TYPE_KEY = ("nansafe",) if NANSAFE_MODE_ENABLED else ()
