"""The one refusal of the global sparsity tracer: a decision taken on a traced value.

``sparsity="detect-global"`` (:func:`dualgpu.autodiff.sparse.detect_sparsity` with
``mode="global"``) promises a pattern that holds at every input. A kernel that takes a
decision from a value that depends on the input (a comparison, ``int()``, ``round()``,
``math.floor``/``ceil``/``trunc``, a cast to an integer type, any conversion whose result
can pick an index or a branch) may touch other elements at another input, so one run
cannot give such a pattern. Every such conversion calls :func:`refuse_traced_branch` on
the dual's lanes in compiled code, and :func:`refuse_traced_python` on the host: the
detection run raises, and the driver turns the error into a message that names the kernel
and the fix. Step functions that keep a float (``np.floor``, ``//``, ``np.sign``) carry
their argument's dependencies in a global tracer (:mod:`dualgpu.compiled.lowering`), so an
integer made from their result later is refused as well.
"""
import numpy as np
from numba.core.extending import register_jitable

__all__ = ["GLOBAL_BRANCH_MESSAGE", "refuse_traced_branch", "is_global_tracer",
           "refuse_traced_python"]

#: Raised where a global sparsity tracer meets a decision on a traced value;
#: :func:`dualgpu.autodiff.sparse.detect_sparsity` turns it into a DualgpuError with the fix.
GLOBAL_BRANCH_MESSAGE = (
    "dualgpu global sparsity: a kernel compares, rounds or converts a value that depends on "
    "the input")


@register_jitable
def refuse_traced_branch(partials):
    """Raise ``ValueError(GLOBAL_BRANCH_MESSAGE)`` when a lane of ``partials`` is not empty."""
    for lane in partials:
        if lane != 0:
            raise ValueError(GLOBAL_BRANCH_MESSAGE)


def is_global_tracer(numba_type):
    """True for the numba type of a dual whose lanes are global tracer lanes."""
    return getattr(numba_type, "tracer", None) == "global"


def refuse_traced_python(partials):
    """The host form of :func:`refuse_traced_branch` for a Python dual's partials.

    Examples
    --------
    >>> import numpy as np
    >>> refuse_traced_python(np.zeros(2, np.int64))  # nothing traced: no error
    >>> refuse_traced_python(np.array([0, 4], np.int64))
    Traceback (most recent call last):
    ...
    ValueError: dualgpu global sparsity: a kernel compares, rounds or converts a value that ...
    """
    if getattr(partials, "dtype", None) == np.int64 and np.any(partials):  # cheap otherwise
        raise ValueError(GLOBAL_BRANCH_MESSAGE)
