"""dualgpu: forward-mode automatic differentiation for numba and numba.cuda simulations.

``Dual`` and ``DualArray`` carry a value and N tangent lanes through unchanged
kernels; ``dualgpu.jit`` / ``from dualgpu import cuda`` port numba.cuda kernels;
``jvp``, ``jacfwd`` and ``jacobian`` differentiate whole simulations.
"""
__version__ = "0.2.0.dev0"

from dualgpu import _moved

_moved.install()


def _overloads_without_c_wrappers():
    """numba builds a C entry point (cfunc wrapper) for each compiled overload implementation,
    which only compiled code ever calls: 20-40 ms of compile each, for nothing. numba copies
    its default options when an overload is declared; dualgpu's overloads (and any declared
    after this import) are built without the wrapper. Measured: about 130 wrappers fewer over
    tests/integration/test_unseen_lowering.py and tests/porting/test_language_features.py."""
    try:
        from numba.core import extending

        extending._overload_default_jit_options.setdefault("no_cfunc_wrapper", True)
    except (ImportError, AttributeError):  # pragma: no cover - another numba: wrappers stay
        pass


_overloads_without_c_wrappers()

from dualgpu import errors, nansafe, rules  # noqa: E402
from dualgpu.errors import (  # noqa: E402
    DualgpuError, MissingRuleError, UnportedKernelError, UnsupportedFeatureError,
)
from dualgpu.core.dual import Dual  # noqa: E402
from dualgpu.core.dualarray import DualArray, dual_array  # noqa: E402
from dualgpu.core.casting import astype, float32, float64  # noqa: E402
from dualgpu.core.selection import backend, set_backend, using_backend  # noqa: E402
from dualgpu import dcmath, dmath  # noqa: E402
from dualgpu import host  # noqa: E402,F401  (numpy's protocols for Dual and DualArray)
from dualgpu import compiled  # noqa: E402,F401  (numba typing and lowering; order: its __init__)
from dualgpu.host.buffers import keep_host_buffers, zeros  # noqa: E402
from dualgpu.porting.kernel import jit  # noqa: E402
from dualgpu import cuda  # noqa: E402
from dualgpu.autodiff.api import jacfwd, jacobian, jvp, jvp_batch  # noqa: E402
from dualgpu.autodiff.hessian import hessian, hvp  # noqa: E402
from dualgpu.autodiff.ensemble import ensemble_jacobian  # noqa: E402
from dualgpu.autodiff.uncertainty import propagate  # noqa: E402
from dualgpu import sparse, testing  # noqa: E402

__all__ = [
    "Dual", "DualArray", "dual_array",
    "jvp", "jvp_batch", "jacfwd", "jacobian", "hvp", "hessian", "ensemble_jacobian", "propagate",
    "jit", "cuda", "backend", "set_backend", "using_backend",
    "astype", "float32", "float64", "zeros", "keep_host_buffers",
    "dmath", "dcmath", "rules", "nansafe", "sparse", "testing", "errors",
    "DualgpuError", "MissingRuleError", "UnportedKernelError", "UnsupportedFeatureError",
]

# names that left the top-level namespace in 0.2: still reachable, with a DeprecationWarning
_MOVED_NAMES = {
    "Coloring": "dualgpu.sparse", "color_columns": "dualgpu.sparse",
    "check_coloring": "dualgpu.sparse", "as_pattern": "dualgpu.sparse",
    "banded_pattern": "dualgpu.sparse", "stencil_pattern_2d": "dualgpu.sparse",
    "local_cluster": "dualgpu.distributed",
}
# optional or heavy dependencies, imported on first use
_LAZY_MODULES = ("plot", "sensitivity", "distributed", "interop")
# numba's number types, as `from numba import cuda, int32, void` names them: a port that edits
# that line to `from dualgpu import ...` gets numba's own (float32, float64: dualgpu's casts,
# numba's types in kernels)
_NUMBA_TYPES = frozenset(
    "int8 int16 int32 int64 uint8 uint16 uint32 uint64 intp uintp intc uintc boolean bool_ "
    "complex64 complex128 void i1 i2 i4 i8 u1 u2 u4 u8 f4 f8 c8 c16 b1".split())


def __getattr__(name):
    import importlib

    if name in _NUMBA_TYPES:
        import numba

        return getattr(numba, name)
    if name in _LAZY_MODULES:
        # matplotlib only when plotting is asked for; scipy.stats (global sensitivity) only
        # when that is; Dask and JAX likewise
        return importlib.import_module("dualgpu." + name)
    if name in _MOVED_NAMES:
        import warnings

        home = _MOVED_NAMES[name]
        warnings.warn(f"dualgpu.{name} moved to {home}.{name}; the old name works until the next "
                      f"release. Fix: from {home} import {name}", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(home), name)
    if name in _moved.MOVED:  # an old module path used as an attribute: dualgpu.driver
        return importlib.import_module("dualgpu." + name)
    raise AttributeError(f"module 'dualgpu' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
