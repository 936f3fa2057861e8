"""dualgpu: forward-mode automatic differentiation for numba and numba.cuda simulations."""
from . import rules
from .dual import Dual
from .dualarray import DualArray, dual_array
from .errors import DualgpuError, MissingRuleError
from . import dmath
from . import numba_cpu_math, numba_types, numba_rules, numba_arrays  # noqa: F401  (registrations)

__all__ = ["Dual", "DualArray", "dual_array", "DualgpuError", "MissingRuleError", "dmath", "rules"]
__version__ = "0.1.0"
