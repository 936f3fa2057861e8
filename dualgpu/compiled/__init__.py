"""Floor 2b, compiled duals: numba typing and lowering of duals and dual arrays.

Every numba extension of dualgpu is registered by importing this package, and this module
is the one place that states the order (numba-cuda's ``device_init`` plays the same role).
No module of the package imports another for its registrations alone: each imports only
the names it uses, and those imports form no cycle.
"""
# The registration order:
# 1. the CPU target's math functions that numba.cuda has (cpu_math);
# 2. every numba type and data model, with the dual's intrinsics and number casts (types);
# 3. the numba types of Python Duals and DualArrays, now that the types exist (typeof);
# 4. boxing and unboxing of the four types (boxing);
# 5. operations: the rule overloads of first-order duals (rules), dual arrays (arrays) and
#    their iteration (array_iter), casts by number classes (casts), libdevice's refusals
#    (libdevice), tagged duals (nested), which build on the first-order overloads, and
#    complex duals (complex_duals, complex_ops: the complex rule table, complex_builtins);
# 6. eager-signature @njit functions compile a dual specialisation when called with duals
#    (eager_njit);
# 7. numba's CPU typing and lowering installed under the CPU target (cpu_first), before
#    anything can be compiled for CUDA (see dualgpu.compiled.cpu_first).
from dualgpu.compiled import cpu_math  # noqa: F401
from dualgpu.compiled import types  # noqa: F401
from dualgpu.compiled import typeof  # noqa: F401
from dualgpu.compiled import boxing  # noqa: F401
from dualgpu.compiled import rules  # noqa: F401
from dualgpu.compiled import arrays  # noqa: F401
from dualgpu.compiled import array_iter  # noqa: F401
from dualgpu.compiled import casts  # noqa: F401
from dualgpu.compiled import libdevice  # noqa: F401
from dualgpu.compiled import nested  # noqa: F401
from dualgpu.compiled import complex_duals  # noqa: F401
from dualgpu.compiled import complex_ops  # noqa: F401
from dualgpu.compiled import complex_builtins  # noqa: F401
from dualgpu.compiled.cpu_first import cpu_registries_first
from dualgpu.compiled.eager_njit import install as install_eager_njit

__all__ = ["cpu_registries_first"]

install_eager_njit()
cpu_registries_first()
