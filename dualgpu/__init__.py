"""dualgpu: forward-mode automatic differentiation for numba and numba.cuda simulations."""
from . import rules
from .dual import Dual
from .dualarray import DualArray, dual_array
from .errors import DualgpuError, MissingRuleError
from . import dmath
from .backend import backend, set_backend, using_backend
from .kernel import jit
from . import numba_cpu_math, numba_types, numba_rules, numba_arrays  # noqa: F401  (registrations)

from . import cuda  # noqa: E402  (the drop-in namespace needs jit and the backends)

__all__ = [
    "Dual", "DualArray", "dual_array", "DualgpuError", "MissingRuleError", "dmath", "rules",
    "jit", "cuda", "backend", "set_backend", "using_backend",
]
__version__ = "0.1.0"
