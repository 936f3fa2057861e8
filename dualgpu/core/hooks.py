"""Slots that the core offers and the floors above fill when they are imported.

:class:`~dualgpu.Dual` and :class:`~dualgpu.DualArray` hand some of their behaviour to
:mod:`dualgpu.host`, which builds on them: numpy's protocols (``__array_ufunc__``,
``__array_function__``), advanced indexing of host dual arrays (masks, index arrays), host
numpy buffers under the driver, and the message of ``float(dual)`` that names the host
line. The core cannot import the host (the host imports the core), so it calls these
slots instead, and ``dualgpu.host`` installs its functions into them at import
(:func:`install`), as autograd's ``Box.register`` or JAX's ``primitive_jvps`` do.
``import dualgpu`` always imports ``dualgpu.host``; a slot still empty says so when called.

Examples
--------
>>> import dualgpu
>>> from dualgpu.core import hooks
>>> hooks.array_function.installed
True
>>> sorted(hooks.SLOTS)[:3]
['advanced_getitem', 'advanced_setitem', 'array_function']
"""
import threading

from dualgpu.errors import DualgpuError

__all__ = [
    "Slot", "SLOTS", "install", "array_ufunc", "array_function", "advanced_getitem",
    "advanced_setitem", "copy_to_plain", "float_message", "array_message", "device_copy",
    "kept_source", "FOLLOWED", "values_followed",
]

#: ``FOLLOWED.on`` is True while host code runs one line whose writes into kept host buffers
#: :mod:`dualgpu.host.host_writes` has already replayed on their partials (``u[:] = d``,
#: ``u += d``): there, and only there, a dual may give its values to a plain numpy array.
FOLLOWED = threading.local()


def values_followed():
    """True while a host line runs whose stores of duals into plain arrays were followed."""
    return getattr(FOLLOWED, "on", False)


class Slot:
    """A function of the core that a floor above provides.

    Parameters
    ----------
    name : str
        The slot's name (the keyword of :func:`install`).
    what : str
        What it does, for the error raised while it is empty.
    fallback : callable, optional
        Called while the slot is empty, instead of raising.

    Examples
    --------
    >>> slot = Slot("double", "doubling numbers")
    >>> slot.installed
    False
    >>> slot(21)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dualgpu.errors.DualgpuError: doubling numbers is provided by dualgpu.host, which is not ...
    >>> slot.install(lambda x: 2 * x)
    >>> slot(21)
    42
    """

    __slots__ = ("name", "what", "fallback", "implementation")

    def __init__(self, name, what, fallback=None):
        self.name = name
        self.what = what
        self.fallback = fallback
        self.implementation = None

    @property
    def installed(self):
        """True once a floor above has installed its implementation."""
        return self.implementation is not None

    def install(self, implementation):
        """Make ``implementation`` the function this slot calls."""
        if not callable(implementation):
            raise TypeError(f"hooks.{self.name}: expected a callable; got {implementation!r}.")
        self.implementation = implementation

    def __call__(self, *args, **kwargs):
        implementation = self.implementation
        if implementation is None:
            if self.fallback is not None:
                return self.fallback(*args, **kwargs)
            raise DualgpuError(
                f"{self.what} is provided by dualgpu.host, which is not imported (the slot "
                f"dualgpu.core.hooks.{self.name} is empty). Fix: import dualgpu (or "
                "dualgpu.host) before using duals with numpy."
            )
        return implementation(*args, **kwargs)

    def __repr__(self):
        state = "installed" if self.installed else "empty"
        return f"<hooks.{self.name}: {state}>"


def _plain_float_message(frame):
    return ("float(Dual) would drop the partials. Fix: numpy ufuncs (np.sqrt(d)) and "
            "dualgpu.dmath keep the partials; cast with dualgpu.float32(d) or "
            "dualgpu.float64(d); d.value reads the value alone and drops the derivative.")


#: ``array_ufunc(ufunc, method, inputs, kwargs)``: numpy ufuncs on duals (``__array_ufunc__``).
array_ufunc = Slot("array_ufunc", "numpy's ufuncs on duals (np.sin(u), u * x)")
#: ``array_function(function, types, args, kwargs)``: numpy functions (``__array_function__``).
array_function = Slot("array_function", "numpy's functions on duals (np.sum(u), np.stack)")
#: ``advanced_getitem(array, index)``: ``u[mask]``, ``u[[0, 2]]`` of a host DualArray.
advanced_getitem = Slot("advanced_getitem", "indexing a DualArray with masks or index arrays")
#: ``advanced_setitem(array, index, values, partials)``: stores through masks, index arrays.
advanced_setitem = Slot("advanced_setitem", "storing into a DualArray through masks or "
                                            "index arrays")
#: ``copy_to_plain(source, ary)``: ``dual_array.copy_to_host(plain_numpy_buffer)``.
copy_to_plain = Slot("copy_to_plain", "copying a DualArray into a plain host buffer")
#: ``float_message(frame)``: the message of ``float(dual)`` run by ``frame`` (names the line).
float_message = Slot("float_message", "the message of float(Dual)",
                     fallback=_plain_float_message)
#: ``array_message(frame)``: the message of a DualArray made a plain array by ``frame``'s
#: line (a store into a host buffer, ``buf[:] = u``), or None for the general one.
array_message = Slot("array_message", "the message of np.asarray(DualArray)",
                     fallback=lambda frame: None)

#: ``device_copy(what)``: before ``dual_array.copy_to_device(x)`` copies (``what`` names
#: it); :mod:`dualgpu.porting.graphs` refuses it inside ``capture_graph()``, where nothing runs.
device_copy = Slot("device_copy", "the check before a copy into a device DualArray",
                   fallback=lambda what: None)

#: ``kept_source(ary)``: ``ary``, or the DualArray standing for it where it is a host buffer
#: kept by :func:`dualgpu.keep_host_buffers` (copied into a device array with its partials).
kept_source = Slot("kept_source", "the dual form of a kept host buffer",
                   fallback=lambda ary: ary)

#: name -> slot, every slot of this module.
SLOTS = {slot.name: slot for slot in (array_ufunc, array_function, advanced_getitem,
                                      advanced_setitem, copy_to_plain, float_message,
                                      array_message, device_copy, kept_source)}


def install(**implementations):
    """Install implementations into the slots of the same names (``install(array_ufunc=f)``).

    Raises
    ------
    DualgpuError
        For a name that is not a slot.
    """
    unknown = sorted(set(implementations) - set(SLOTS))
    if unknown:
        raise DualgpuError(f"hooks.install: no slot named {unknown}; the slots are "
                           f"{sorted(SLOTS)}.")
    for name, implementation in implementations.items():
        SLOTS[name].install(implementation)
