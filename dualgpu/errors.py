"""Exceptions raised by dualgpu."""

__all__ = ["DualgpuError", "MissingRuleError", "UnportedKernelError", "missing_rule_message"]


class DualgpuError(ValueError):
    """Bad input to dualgpu: the message says what was expected, what came and the fix."""


class MissingRuleError(TypeError):
    """A function was applied to a dual but has no derivative rule."""


class UnportedKernelError(TypeError):
    """A plain numba.cuda kernel (not ported to dualgpu) was launched with dual arguments."""


class UnsupportedFeatureError(TypeError):
    """A kernel feature the active backend cannot run on duals; the message names the feature,
    the backends that run it and the workaround. Raised while compiling, it is not a numba
    ``TypingError``, so it reaches the user on its own instead of inside numba's candidate
    list."""


#: Start of the message for complex arithmetic with a dual (tested for by dualgpu.kernel).
COMPLEX_DUAL = "complex arithmetic with a dual"


def complex_dual_message(operation):
    """The error text for ``operation`` (e.g. ``"complex128 * Dual(float64, 8)"``)."""
    return (
        f"{COMPLEX_DUAL} ({operation}) is not supported: dualgpu's duals carry real values "
        "and real partials. Write the complex quantity as two real arrays or numbers (real "
        "and imaginary parts; e.g. exp(-i v dt) as cos(v dt) - i sin(v dt)), so the duals only "
        "meet real numbers."
    )


def missing_rule_message(qualname):
    """Return the error text for a function with no derivative rule."""
    short = qualname.rsplit(".", 1)[-1]
    return (
        f"{qualname} has no derivative rule in dualgpu, so it cannot take a Dual. "
        f"Add one line to UNARY_RULES or BINARY_RULES in dualgpu/rules.py, e.g. "
        f"'{short}': Rule('{qualname}', ('<d{short}/dx in x and ans>',), ((lo, hi),)); "
        f"or, if its derivative is not needed, call it on the value: {short}(d.value)."
    )
