"""Floor 2a, host numpy: numpy's protocols and functions on host duals and dual arrays.

``protocol`` (``__array_ufunc__`` and ``__array_function__``), ``ufuncs`` (generated from
:mod:`dualgpu.rules`), ``reductions``, ``shapes``, ``indexing``, ``linalg``, ``solve``,
``quantiles``, ``tracer`` (sparsity through data movement), ``operands`` (what they share) and
``buffers`` (host numpy buffers under the driver). Imports only :mod:`dualgpu.core` and the
foundation (:mod:`dualgpu.rules`, :mod:`dualgpu.errors`).

Importing this package installs its functions into the slots of :mod:`dualgpu.core.hooks`,
through which :class:`~dualgpu.Dual` and :class:`~dualgpu.DualArray` reach it.
"""
from dualgpu.core import hooks
from dualgpu.core._host_lines import float_message_at
from dualgpu.host import buffers, indexing, protocol
from dualgpu.host import ufuncs  # noqa: F401  (rules added with dualgpu.rules.define reach host numpy: a rules.subscribe)

__all__ = ["float_message"]


def float_message(frame):
    """The message of ``float(dual)`` run by ``frame``: it names the host line and the fix.

    A store into a plain numpy buffer (``state[0] = p``) names the buffer and its fix
    (:func:`dualgpu.host.buffers.host_store_message`); anything else names what the line
    does (``math.*``, ``float()``, ``np.float32``) and the fix that keeps the partials
    (:func:`dualgpu.core._host_lines.float_message_at`).
    """
    message = buffers.host_store_message(frame)
    return float_message_at(frame) if message is None else message


hooks.install(
    array_ufunc=protocol.array_ufunc,
    array_function=protocol.array_function,
    advanced_getitem=indexing.getitem,
    advanced_setitem=indexing.store_advanced,
    copy_to_plain=buffers.copy_to_plain,
    float_message=float_message,
    array_message=buffers.array_message,
    kept_source=buffers.kept_source,
)
