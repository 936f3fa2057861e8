"""dualgpu: forward-mode automatic differentiation for numba and numba.cuda simulations.

``Dual`` and ``DualArray`` carry a value and N tangent lanes through unchanged
kernels; ``dualgpu.jit`` / ``from dualgpu import cuda`` port numba.cuda kernels;
``jvp``, ``jacfwd`` and ``jacobian`` differentiate whole simulations.
"""
__version__ = "0.1.0"

from . import nansafe, rules
from .dual import Dual
from .dualarray import DualArray, dual_array
from .errors import DualgpuError, MissingRuleError, UnportedKernelError
from . import dmath
from . import numba_cpu_math, numba_types, numba_rules, numba_arrays  # noqa: F401  (registrations)
from .backend import backend, set_backend, using_backend
from .kernel import jit
from . import cuda
from .driver import jacfwd, jacobian, jvp, jvp_batch
from . import sparse, testing
from .coloring import Coloring, check_coloring, color_columns
from .sparsity import as_pattern, banded_pattern, stencil_pattern_2d

__all__ = [
    "Dual", "DualArray", "dual_array", "DualgpuError", "MissingRuleError", "UnportedKernelError",
    "dmath", "rules", "nansafe",
    "jit", "cuda", "backend", "set_backend", "using_backend",
    "jvp", "jvp_batch", "jacfwd", "jacobian", "testing", "sparse",
    "Coloring", "color_columns", "check_coloring", "as_pattern", "banded_pattern",
    "stencil_pattern_2d",
]


def __getattr__(name):
    # matplotlib is imported only when plotting is asked for
    if name == "plot":
        import importlib

        return importlib.import_module(".plot", __name__)
    raise AttributeError(f"module 'dualgpu' has no attribute {name!r}")
