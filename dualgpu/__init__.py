"""dualgpu: forward-mode automatic differentiation for numba and numba.cuda simulations.

``Dual`` and ``DualArray`` carry a value and N tangent lanes through unchanged
kernels; ``dualgpu.jit`` / ``from dualgpu import cuda`` port numba.cuda kernels;
``jvp``, ``jacfwd`` and ``jacobian`` differentiate whole simulations.
"""
__version__ = "0.1.0"

from . import nansafe, rules
from .dual import Dual
from .dualarray import DualArray, dual_array
from .errors import DualgpuError, MissingRuleError, UnportedKernelError, UnsupportedFeatureError
from . import dmath
from . import numba_cpu_math, numba_types, numba_rules, numba_arrays, numba_casts, numba_libdevice  # noqa: F401,E501  (registrations)
from . import numba_nested  # noqa: F401  (tagged and nested duals: registrations)
from .backend import backend, set_backend, using_backend
from .kernel import jit
from . import cuda
from .driver import jacfwd, jacobian, jvp, jvp_batch
from .casting import astype, float32, float64
from .host_buffers import keep_host_buffers, zeros
from . import array_protocol  # noqa: F401  (numpy's protocols for Dual and DualArray)
from .hessian import hessian, hvp
from . import sparse, testing
from .ensemble import ensemble_jacobian
from .uncertainty import propagate
from .distributed import local_cluster
from .coloring import Coloring, check_coloring, color_columns
from .sparsity import as_pattern, banded_pattern, stencil_pattern_2d
from .backends._cpu_first import cpu_registries_first

# numba's CPU typing and lowering installed now, before any CUDA compile can misplace them
cpu_registries_first()

__all__ = [
    "Dual", "DualArray", "dual_array", "DualgpuError", "MissingRuleError", "UnportedKernelError",
    "UnsupportedFeatureError",
    "dmath", "rules", "nansafe",
    "jit", "cuda", "backend", "set_backend", "using_backend",
    "jvp", "jvp_batch", "jacfwd", "jacobian", "ensemble_jacobian", "propagate", "hvp", "hessian",
    "testing", "sparse", "astype", "float32", "float64", "local_cluster",
    "Coloring", "color_columns", "check_coloring", "as_pattern", "banded_pattern",
    "stencil_pattern_2d", "zeros", "keep_host_buffers",
]


def __getattr__(name):
    # matplotlib is imported only when plotting is asked for; scipy.stats (global
    # sensitivity) only when that is
    if name in ("plot", "sensitivity"):
        import importlib

        return importlib.import_module("." + name, __name__)
    raise AttributeError(f"module 'dualgpu' has no attribute {name!r}")
