"""Exceptions and warnings raised by dualgpu.

Every exception derives from :class:`DualgpuBaseError` (``except DualgpuBaseError`` catches
them all) and keeps its builtin base: :class:`DualgpuError` is a :class:`ValueError`, the
other three are :class:`TypeError` s. Every warning derives from :class:`DualgpuWarning`.
"""

__all__ = ["DualgpuBaseError", "DualgpuError", "MissingRuleError", "UnportedKernelError",
           "UnsupportedFeatureError", "DualgpuWarning", "ChunkSizeWarning",
           "LaunchCoverageWarning", "missing_rule_message"]


class DualgpuBaseError(Exception):
    """The root of dualgpu's exceptions: ``except DualgpuBaseError`` catches every one of them.

    Each subclass also keeps its builtin base (:class:`ValueError` or :class:`TypeError`), so code
    that catches those still catches dualgpu's.

    Examples
    --------
    >>> import dualgpu
    >>> try:
    ...     dualgpu.set_backend("tpu")
    ... except dualgpu.errors.DualgpuBaseError as error:
    ...     print(type(error).__name__)
    DualgpuError
    """


class DualgpuWarning(UserWarning):
    """The root of dualgpu's warnings: filter them all with
    ``warnings.simplefilter(..., DualgpuWarning)``.

    Examples
    --------
    >>> import warnings
    >>> from dualgpu.errors import DualgpuWarning
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always", DualgpuWarning)
    ...     warnings.warn("a chunk did not fit", DualgpuWarning)
    >>> caught[0].category.__name__
    'DualgpuWarning'
    """


class ChunkSizeWarning(DualgpuWarning):
    """A ``chunk_size`` above the range measured to be fast on the active backend.

    The message gives the measurement; the derivative is still right.

    Examples
    --------
    >>> import warnings
    >>> from dualgpu.errors import ChunkSizeWarning
    >>> warnings.simplefilter("ignore", ChunkSizeWarning)  # chunk sizes chosen on purpose
    """


class LaunchCoverageWarning(DualgpuWarning):
    """A launch has fewer threads than the arrays it is given have rows.

    Often a grid computed for another size; rows without a thread keep their old values.

    Examples
    --------
    >>> from dualgpu.errors import LaunchCoverageWarning, DualgpuWarning
    >>> issubclass(LaunchCoverageWarning, DualgpuWarning)
    True
    """


class DualgpuError(DualgpuBaseError, ValueError):
    """Bad input to dualgpu: the message says what was expected, what came and the fix.

    A :class:`ValueError`, so code that catches bad values catches it too.

    Examples
    --------
    >>> import dualgpu
    >>> try:
    ...     dualgpu.set_backend("tpu")
    ... except dualgpu.DualgpuError as error:
    ...     print(str(error).split(";")[0])
    unknown backend 'tpu'
    """


class MissingRuleError(DualgpuBaseError, TypeError):
    """A function was applied to a dual but has no derivative rule.

    The message names the function and the line to add to :mod:`dualgpu.rules`
    (:func:`~dualgpu.errors.missing_rule_message`). A :class:`TypeError`.

    Examples
    --------
    >>> import dualgpu
    >>> try:
    ...     dualgpu.dmath.nextafter(dualgpu.Dual(1.5, [1.0]), 2.0)
    ... except dualgpu.MissingRuleError as error:
    ...     print(str(error).split(",")[0])
    math.nextafter has no derivative rule in dualgpu
    """


class UnportedKernelError(DualgpuBaseError, TypeError):
    """A plain numba.cuda kernel (not ported to dualgpu) was launched with dual arguments.

    The message says how to port it (``from dualgpu import cuda``) or wrap it
    (``dualgpu.jit(kernel)``). A :class:`TypeError`.

    Examples
    --------
    >>> from dualgpu.errors import UnportedKernelError
    >>> issubclass(UnportedKernelError, TypeError)
    True
    """


class UnsupportedFeatureError(DualgpuBaseError, TypeError):
    """A kernel feature the active backend cannot run on duals.

    The message names the feature, the backends that run it and the workaround. Raised while
    compiling, it is not a numba ``TypingError``, so it reaches the user on its own instead of
    inside numba's candidate list. A :class:`TypeError`.

    Examples
    --------
    >>> import dualgpu
    >>> try:
    ...     dualgpu.cuda.vectorize(lambda x: x)
    ... except dualgpu.UnsupportedFeatureError as error:
    ...     print(str(error).split(":")[0])
    cuda.vectorize of <lambda> without signatures
    """


#: Start of the message for complex arithmetic with a dual (tested for by dualgpu.porting.kernel).
COMPLEX_DUAL = "complex arithmetic with a dual"


def complex_dual_message(operation):
    """The error text for ``operation`` (e.g. ``"complex128 * Dual(float64, 8)"``) where complex
    duals do not run: structural sparsity tracers, launches on the cuda backend, a host
    function without a complex rule."""
    return (
        f"{COMPLEX_DUAL} ({operation}) is not supported here. Complex duals run on the host, "
        "in @njit code and in kernels on the cpu and cudasim backends; not in sparsity "
        "detection (tracers carry real dependency sets) nor in launches on the cuda backend (a "
        "GPU: the kernels compile to PTX, but complex dual launches are not enabled before "
        "they are checked on a GPU). Fix: for sparsity, give the pattern yourself "
        "(sparse_jacobian(..., sparsity=pattern)) or take the dense jacobian; on the cuda "
        "backend, run it on the cpu or cudasim backend (dualgpu.set_backend('cpu')); or write "
        "the complex quantity as two real arrays or numbers (real and imaginary parts; e.g. "
        "exp(-i v dt) as cos(v dt) - i sin(v dt)), so the duals only meet real numbers."
    )


#: functions with a tuple answer, written with functions that have rules (x the Dual)
_WRITTEN_WITH = {
    "math.modf": "frac = math.fmod(x, 1.0); whole = x - frac (d frac/dx = 1, d whole/dx = 0)",
    "math.frexp": "e = math.floor(math.log2(abs(x))) + 1; m = x / 2.0 ** e (x = m * 2 ** e "
                  "with 0.5 <= |m| < 1; e has no derivative)",
}


def missing_rule_message(qualname, nargs=1):
    """Return the error text for a function with no derivative rule.

    Parameters
    ----------
    qualname : str
        The function's qualified name, e.g. ``"math.nextafter"``.
    nargs : int, optional
        How many arguments the call gave (2: the rule to add has two derivatives).

    Returns
    -------
    str
        The message :class:`MissingRuleError` carries: the function, the line to add to
        the rule table and the alternative of calling it on the value.

    Examples
    --------
    >>> from dualgpu.errors import missing_rule_message
    >>> missing_rule_message("math.nextafter", 2).split(".")[1]
    'nextafter has no derivative rule in dualgpu, so it cannot take a Dual'
    """
    short = qualname.rsplit(".", 1)[-1]
    written = _WRITTEN_WITH.get(qualname)
    if written is not None:  # a tuple answer: a rule cannot say it; the same from rules that exist
        return (f"{qualname} has no derivative rule in dualgpu, so it cannot take a Dual: it "
                f"returns two numbers, which a rule cannot describe. Fix: write it with "
                f"functions that have rules, in the kernel as on the host: {written}.")
    if nargs == 2:
        return (
            f"{qualname} has no derivative rule in dualgpu, so it cannot take a Dual. Fix: "
            f"give it one from your own code, dualgpu.rules.define('{qualname}', ('<d/dx>', "
            f"'<d/dy>')) in x, y and ans; or, if its derivative is not needed, call it on the "
            f"values: {short}(x.value, y). (In dualgpu itself: a line in BINARY_RULES of "
            f"dualgpu/rules.py.)"
        )
    return (
        f"{qualname} has no derivative rule in dualgpu, so it cannot take a Dual. Fix: give "
        f"it one from your own code, dualgpu.rules.define('{qualname}', '<d{short}/dx in x "
        f"and ans>'); or, if its derivative is not needed, call it on the value: "
        f"{short}(d.value). (In dualgpu itself: a line in UNARY_RULES of dualgpu/rules.py.)"
    )
