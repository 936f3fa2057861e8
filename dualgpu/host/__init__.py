"""Floor 2a, host numpy: numpy's protocols and functions on host duals and dual arrays.

``protocol`` (``__array_ufunc__`` and ``__array_function__``), ``ufuncs`` (generated from
:mod:`dualgpu.rules`), ``reductions``, ``shapes``, ``indexing``, ``linalg``, ``solve``,
``quantiles``, ``tracer`` (sparsity through data movement), ``operands`` (what they share) and
``buffers`` (host numpy buffers under the driver). Imports only :mod:`dualgpu.core` and the
foundation (:mod:`dualgpu.rules`, :mod:`dualgpu.errors`).
"""
# rules added with dualgpu.rules.define reach host numpy from the start (a rules.subscribe)
from dualgpu.host import ufuncs  # noqa: E402,F401
