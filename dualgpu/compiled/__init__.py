"""Floor 2b, compiled duals: numba typing and lowering of duals and dual arrays.

Every numba extension of dualgpu is registered here, in this order (numba-cuda's
``device_init`` plays the same role): see :func:`dualgpu.compiled.cpu_first.cpu_registries_first`.
"""
# The registration order. numba's CPU typing and lowering go first (cpu_first), so that no
# CUDA compile can install its own in their place; then the dual type and its data model, the
# rule overloads, dual arrays (with their iterator), casts, libdevice's refusals and the tagged
# (nested) duals, which build on all of them.
from dualgpu.compiled import cpu_math  # noqa: F401,E402
from dualgpu.compiled import types  # noqa: F401,E402
from dualgpu.compiled import rules  # noqa: F401,E402
from dualgpu.compiled import arrays  # noqa: F401,E402
from dualgpu.compiled import casts  # noqa: F401,E402
from dualgpu.compiled import libdevice  # noqa: F401,E402
from dualgpu.compiled import nested  # noqa: F401,E402
from dualgpu.compiled.cpu_first import cpu_registries_first  # noqa: E402

cpu_registries_first()
