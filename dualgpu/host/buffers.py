"""Host numpy buffers under the driver: numba.cuda's host-array idiom, and ``dualgpu.zeros``.

numba.cuda users often keep a simulation's state in a host numpy array and hand it to
kernels directly (numba copies a host array to the device before the launch and back
after it), or copy a device array back into one::

    state = np.zeros((6, n))
    step[blocks, threads](state, p)        # numba copies state in and out
    d_u.copy_to_host(host_buffer)

A numpy float array cannot hold partials. While the driver runs the user's function
(``dualgpu.jacobian`` and the others), this module keeps them beside it instead: a
*registry* (one per run of f) maps each such array (by identity of the array that owns
the memory, so views such as ``state[0]`` find it too) to a hidden host
:class:`~dualgpu.DualArray` holding the same values and their partials.

* a kernel launch with dual arguments (or one given a registered buffer) runs on the
  hidden DualArray in place of each float host array, then writes the values back into
  the user's array, exactly as numba copies a host array back;
* ``dual_array.copy_to_host(host_buffer)`` writes the values into ``host_buffer`` and its
  partials into the registry;
* a registered array given to a later launch, to ``cuda.to_device``, or returned by f
  (itself or a view of it) brings its partials back;
* host code may write plain numbers into a registered array between launches: the
  elements whose values changed get zero partials (a plain number is a constant).

What cannot be seen is host code that *reads* a registered array with numpy
(``state.sum()``, ``state[0, 3]``, ``state.copy()``): it gets plain floats. Where such
a plain result is returned by f, the run is refused with the buffer's name and the fix,
never differentiated with a silently missing term. Outside the driver, and in nested
derivatives, nothing is registered and the stores are refused with the array, the line
and the one-line fix (:func:`host_store_message`, :func:`launch_store_fix`).

``state[0] = p`` itself, a Dual stored into a plain numpy array by host code, cannot
work: numpy converts with ``float()`` inside ``ndarray.__setitem__``, which no library
can intercept for a plain array. It is refused with the array's name, the line and the
fix: make the buffer with :func:`zeros` (or ``cuda.to_device(np.zeros(...))``), a
DualArray under the driver that takes duals in host stores and kernels alike.
"""
from __future__ import annotations

from typing import Any, Iterator
import numpy.typing as npt

import contextlib
import contextvars
import linecache
import os
import re
import sys
import threading

import numpy as np

from dualgpu.core import hooks
from dualgpu.core._context import active_lanes, active_levels, lane_dtype
from dualgpu.core.dual import Dual
from dualgpu.core.dualarray import DualArray
from dualgpu.core.nested import zeros as nested_zeros
from dualgpu.core.object_arrays import is_object_array
from dualgpu.core.selection import _in_simulated_thread, backend
from dualgpu.errors import DualgpuError
from dualgpu.core._paths import PACKAGE_DIR
from dualgpu.host.host_writes import FOLLOWED_FORMS, Follower
from dualgpu.host.shadow import Shadow as _Shadow
from dualgpu.host.shadow import buffer_fix as _fix
from dualgpu.host.shadow import contiguous as _contiguous
from dualgpu.host.shadow import read_only_params as _read_only_params  # noqa: F401 (porting)
from dualgpu.host.shadow import root_of as _root
from dualgpu.host.shadow import shape_text as _shape_text, value_in as _value_in

__all__ = ["zeros", "keep_host_buffers", "scope", "active", "kept_source", "keep_copy",
           "device_buffer_fix", "Registry", "host_store_message", "register_porting",
           "caller_line", "launch_store_fix", "copy_to_plain", "substitute"]

_PACKAGE_DIR = PACKAGE_DIR
_SUBSCRIPT_STORE = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*\[.*\]\s*(?:[-+*/%]|//|\*\*)?=(?!=)")

_REGISTRY = contextvars.ContextVar("dualgpu_host_buffers", default=None)
_DEVICE_COPY_CALL = re.compile(r"([A-Za-z_][\w.]*)\.copy_to_device\(")
_TO_DEVICE_CALL = re.compile(r"to_device\(.*\bto\s*=\s*([A-Za-z_][\w.]*)")
#: True inside ``keep_host_buffers()``; the environment's DUALGPU_HOST_BUFFERS=keep sets the default
_KEEP: contextvars.ContextVar[bool | None] = contextvars.ContextVar(
    "dualgpu_keep_host_buffers", default=None)
#: how many ``keep_host_buffers()`` blocks are open in any thread: a thread that entered none
#: itself (an executor's worker, which does not inherit the caller's context) follows them
_OPEN = [0]
_OPEN_LOCK = threading.Lock()


def zeros(shape: int | tuple[int, ...], dtype: npt.DTypeLike = np.float64) -> Any:
    """A zero-filled host array that holds duals while the driver runs, plain floats otherwise.

    The one-line fix for host buffers that receive duals (``state[0] = p`` with ``p`` a
    differentiated parameter): under the driver it is a host :class:`~dualgpu.DualArray`
    with the driver's lanes (zero partials), which takes Duals in host stores and can be
    passed to kernels; outside the driver it is ``np.zeros(shape, dtype)``.

    Parameters
    ----------
    shape : int or tuple of int
        1 to 3 dimensions under the driver (any for the plain array).
    dtype : float32, float64, complex64 or complex128 (other dtypes always give a plain
        array; complex ones too inside a second-order derivative, where duals are real)

    Returns
    -------
    numpy.ndarray or DualArray

    Examples
    --------
    >>> import numpy as np, dualgpu
    >>> def f(p):
    ...     state = dualgpu.zeros((2, 3))
    ...     state[0] = p          # a Dual under the driver: kept
    ...     state[1] = 2.0 * p
    ...     return state
    >>> dualgpu.jacobian(f, 1.5).ravel().tolist()
    [1.0, 1.0, 1.0, 2.0, 2.0, 2.0]
    >>> f(1.5)[1].tolist()
    [3.0, 3.0, 3.0]
    """
    dims: Any = shape
    shape = (int(dims),) if np.ndim(dims) == 0 else tuple(int(s) for s in dims)
    dtype = np.dtype(dtype)
    levels = active_levels()
    if dtype.kind not in "fc" or not levels:
        return np.zeros(shape, dtype)
    if len(levels) > 1:  # (complex duals are first order only: a store of one is refused)
        return nested_zeros(shape, levels, dtype, np.zeros) if dtype.kind == "f" else \
            np.zeros(shape, dtype)
    return DualArray(np.zeros(shape, dtype), np.zeros((levels[-1],) + shape, lane_dtype(dtype)))


def active():
    """The registry of the run of f in progress, or None (outside the driver, or nested)."""
    return _REGISTRY.get()


def _keeping():
    keep = _KEEP.get()
    if keep is None:
        keep = (os.environ.get("DUALGPU_HOST_BUFFERS", "").strip().lower() == "keep"
                or _OPEN[0] > 0)
    return keep


@contextlib.contextmanager
def keep_host_buffers(enabled: bool = True) -> Iterator[None]:
    """Within the block, derivatives keep the partials of host numpy buffers that kernels write.

    numba.cuda code often hands host numpy arrays to kernels (numba copies them in and out)
    or copies device arrays back into them (``d_u.copy_to_host(buf)``). A numpy float array
    cannot hold partials, so by default such a kernel store under the driver is refused
    with the array's name, the line and the one-line fix (:func:`zeros`). Inside this
    block the driver (``dualgpu.jacobian``, ``jvp``, ``jacfwd``...; not nested
    derivatives) keeps the partials beside each such array instead, so the code runs as
    written. Host code that writes such a buffer between launches (``u[:] = u_new``,
    ``np.copyto(u, u_new)``, ``u *= 2.0``, ``out[:] = 0.0``, ``para += delta``) is followed
    line by line and carries the partials (the user guide lists the forms); a write that
    cannot be followed is refused with the line. Opt in knowingly: host code that *reads*
    such a buffer with plain numpy into a new value (``total = u.sum()``, ``v = u.copy()``)
    gets plain floats, and where that value is mixed with duals its share of the
    derivative is lost without an error (a plain result returned by f is still refused).
    The block reaches the driver runs of every thread while it is open (an executor's
    workers too). Setting the environment variable ``DUALGPU_HOST_BUFFERS=keep`` makes
    this the default.

    Parameters
    ----------
    enabled : bool, optional
        False turns keeping off inside the block (default True).

    Yields
    ------
    None

    Examples
    --------
    >>> import numpy as np, dualgpu
    >>> from dualgpu import cuda
    >>> from simulations.heat1d import step_dirichlet
    >>> def f(r):
    ...     u, u_new = np.linspace(0.0, 1.0, 5) ** 2, np.zeros(5)  # host buffers
    ...     step_dirichlet[1, 8](u, u_new, r, 0.0, 1.0)
    ...     return u_new
    >>> with dualgpu.keep_host_buffers():
    ...     J = dualgpu.jacobian(f, 0.1)
    >>> np.round(J, 4).tolist()
    [0.0, 0.125, 0.125, 0.125, 0.0]
    """
    token = _KEEP.set(bool(enabled))
    if enabled:
        with _OPEN_LOCK:
            _OPEN[0] += 1
    try:
        yield
    finally:
        if enabled:
            with _OPEN_LOCK:
                _OPEN[0] -= 1
        _KEEP.reset(token)


@contextlib.contextmanager
def scope():
    """Within the block (one run of f by the driver) host buffers may receive duals.

    Only inside :func:`keep_host_buffers` (or with ``DUALGPU_HOST_BUFFERS=keep``); else
    the stores are refused with the fix.
    """
    registry = Registry() if len(active_levels()) == 1 and _keeping() else None
    token = _REGISTRY.set(registry)
    follower = None
    if registry is not None:
        follower = Follower(registry)
        registry.followed = follower.install() and follower  # (its launch_arguments)
    try:
        yield registry
    except Exception as error:  # numpy's ValueError, numba's TypingError for a read-only array
        text = str(error)
        if (registry is None or isinstance(error, DualgpuError) or not registry.holds_any()
                or ("read-only" not in text and "readonly" not in text)):
            raise
        raise registry.unseen_write(error) from error
    finally:
        if follower is not None:
            follower.uninstall()
        if registry is not None:
            registry.release()
        _REGISTRY.reset(token)


def caller_line():
    """``(filename, lineno, source line)`` of the innermost frame outside dualgpu, or None."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
    if frame is None:
        return None
    filename, lineno = frame.f_code.co_filename, frame.f_lineno
    return filename, lineno, linecache.getline(filename, lineno).strip()


def _user_line(tb):
    """``(filename, lineno, line)`` of the innermost traceback entry outside dualgpu."""
    where = None
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if not filename.startswith(_PACKAGE_DIR) and f"{os.sep}numba" not in filename:
            where = (filename, tb.tb_lineno, linecache.getline(filename, tb.tb_lineno).strip())
        tb = tb.tb_next
    return where


def _at(where):
    return f" at {where[0]}:{where[1]} (`{where[2]}`)" if where else ""


def _store_into_float_array(frame):
    """``(filename, line, name, target)`` when ``frame``'s line stores into a plain float numpy
    array ``target`` of user code (``name[...] = ...``), else None."""
    if frame is None or _in_simulated_thread():
        return None
    filename = frame.f_code.co_filename
    if filename.startswith(_PACKAGE_DIR) or f"{os.sep}numba" in filename:
        return None
    line = linecache.getline(filename, frame.f_lineno)
    match = _SUBSCRIPT_STORE.match(line)
    if match is None:
        return None
    name = match.group(1)
    target = _value_in(frame, name)  # (`u[:] = ...`, `self.u[:] = ...`)
    if not isinstance(target, np.ndarray) or target.dtype.kind not in "fc":
        return None
    return filename, line, name, target


def host_store_message(frame):
    """The message for ``name[...] = dual`` on a plain numpy array in host code, or None.

    ``frame`` is the frame that executes the store (the caller of ``Dual.__float__``);
    None when it is not a subscript store into a numpy array outside dualgpu and numba.
    """
    store = _store_into_float_array(frame)
    if store is None:
        return None
    filename, line, name, target = store
    return (
        f"float(Dual) would drop the partials: at {filename}:{frame.f_lineno}, "
        f"`{line.strip()}` stores a Dual into the numpy array "
        f"{name!r} (shape {tuple(target.shape)}, {target.dtype}), which holds plain floats: "
        "numpy converts the Dual with float(), and float(Dual) would drop the partials "
        "(numpy offers no hook in a plain array's stores). Fix, one line: "
        f"{_fix(name, target)}."
    )


def launch_store_fix(name, array, where):
    """The fix for a kernel that stores duals into the plain host array ``name`` (no driver)."""
    if isinstance(array, np.ndarray):
        caller = _name_in(_root(array))
        if not caller.startswith("a host") and caller != name:
            name = caller  # the host code's name of the array, not the kernel's
        fix = _fix(name, array)
    else:
        fix = f"allocate {name} with dualgpu.cuda (to_device, device_array_like) or dualgpu.zeros"
    if len(active_levels()) > 1:
        why = ("; in a nested derivative (hessian, a driver inside f) host numpy buffers do not "
               "keep partials")
    elif active_levels():
        why = _keep_hint()
    else:
        why = ("; or run the simulation under the driver (dualgpu.jacobian / jvp) inside "
               "`with dualgpu.keep_host_buffers():`, which keeps the partials of host buffers "
               "that kernels write")
    return f" Launched{_at(where)}. Fix, one line: {fix}{why}."


def _name_in(array):
    """The name ``array`` (or a same-shaped view of it) has in the caller's frame, or a
    description."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
    if frame is not None:
        for scope_ in (frame.f_locals, frame.f_globals):
            for key, value in scope_.items():
                if value is array or (isinstance(value, np.ndarray) and _root(value) is array
                                      and value.shape == array.shape):
                    return key
    return f"a host array of shape {tuple(array.shape)}"


#: What the porting floor (above this one) supplies when it is imported, through
#: :func:`register_porting`: the copy of a host DualArray to the active backend
#: (``to_device``) and the test for a tuple holding duals (``holds_duals``).
_PORTING: dict[str, Any] = {}


def register_porting(to_device, holds_duals):
    """Install the porting floor's copy to the device and its tuple test (called at its import).

    A launch on the ``cuda`` backend copies a registered buffer's hidden DualArray to the
    device as numba copies a host array, and a launch given tuples that hold duals
    (``kernel[g, b]((u, v), ...)``) has its host buffers registered; both belong to
    :mod:`dualgpu.porting`, which this floor does not import.

    Parameters
    ----------
    to_device : callable
        ``to_device(dual_array)``: the array on the active backend
        (:func:`dualgpu.porting.memory.to_device`).
    holds_duals : callable
        ``holds_duals(arg)``: True for a tuple holding a Dual or DualArray at any depth
        (:func:`dualgpu.porting.tuple_arguments.holds_duals`).
    """
    _PORTING["to_device"] = to_device
    _PORTING["holds_duals"] = holds_duals


def _holds_duals(arg):
    # (an object array of duals, np.array([k, 2 * k]), becomes a DualArray at the launch)
    return isinstance(arg, (Dual, DualArray)) or _PORTING["holds_duals"](arg) or (
        is_object_array(arg) and any(isinstance(x, Dual) for x in arg.flat))


class Registry:
    """The host arrays of one run of f that hold duals, each with its hidden DualArray."""

    def __init__(self):
        self.lanes = active_lanes()
        self._shadows = {}
        self.replaying: set[int] | None = None  # the shadows a replay synced (replay())
        self._gone = []  # buffers with partials that host code dropped: for messages
        self.followed = False  # the Follower while host lines are followed (host_writes)

    def _forget(self, key):
        """A registered array was freed: drop its hidden DualArray, keep a note for messages."""
        shadow = self._shadows.pop(key, None)
        if shadow is not None and shadow.live:
            shadow.values = shadow.partials = shadow.flat_values = shadow.flat_partials = None
            self._gone = self._gone[-7:] + [shadow]

    def find(self, array):
        """The registered shadow of ``array``'s memory, synced, or None."""
        if not isinstance(array, np.ndarray) or isinstance(array, DualArray):
            return None
        shadow = self._shadows.get(id(_root(array)))
        replaying = self.replaying
        if shadow is not None and (replaying is None or id(shadow) not in replaying):
            shadow.sync()
            if replaying is not None:
                replaying.add(id(shadow))
        return shadow

    @contextlib.contextmanager
    def replay(self):
        """A followed host line's replay on the duals: each shadow syncs once, before the
        replay first reads it (``u[0], u[-1] = u[1], u[-2]``: its second target, looked up
        after the first store into the hidden values, would differ from the buffer)."""
        self.replaying = set()
        try:
            yield
        finally:
            self.replaying = None

    def _shadow(self, array, name):
        root = _root(array)
        shadow = self._shadows.get(id(root))
        if shadow is None:
            if not _contiguous(root) or root.ndim == 0:
                return None
            key = id(root)
            shadow = self._shadows[key] = _Shadow(root, self.lanes,
                                                  lambda _, key=key: self._forget(key))
            shadow.name = name
            shadow.protect()
        else:
            shadow.sync()
        return shadow

    def keep(self, array, name=None):
        """The shadow of ``array``'s memory, made now (zero partials) if it has none; None
        for memory that cannot be mirrored (not contiguous, 0-d)."""
        shadow = self._shadow(array, name)
        if shadow is not None and shadow.name is None:
            shadow.name = name or _name_in(shadow.root)
        return shadow

    def substitute_one(self, item):
        """``item``, or the DualArray standing for it if it is a kept buffer or a view of one."""
        if isinstance(item, np.ndarray) and not isinstance(item, DualArray) \
                and item.dtype.kind in "fc":
            found = self.lookup(item)
            if found is not None:
                return found
        return item

    def holds_any(self):
        """True while some host array is kept (and read-only to unseen writes)."""
        return any(s.root is not None for s in list(self._shadows.values()))

    def release(self):
        """The end of the run of f: every kept array gets its own write flag back."""
        for shadow in list(self._shadows.values()):
            shadow.unprotect()

    def unseen_write(self, error):
        """The refusal of a host write into a read-only kept buffer (``error``: numpy's)."""
        where = _user_line(error.__traceback__)
        kept = [s for s in list(self._shadows.values()) if s.root is not None]
        names = ", ".join(f"{s.name or 'a host array'} (shape {s.shape})" for s in kept)
        how = ("host code dualgpu does not follow (compiled code, another thread, a library)"
               if self.followed else
               "host code, while another tracer (a debugger, coverage) holds sys.settrace, "
               "so dualgpu cannot follow host lines")
        return DualgpuError(
            f"a write into a kept host buffer{_at(where)}: {names} hold duals whose partials "
            f"dualgpu keeps beside them, and {how} wrote into one, which would leave its "
            "partials stale; kept buffers are read-only to such writes ("
            f"{type(error).__name__}: {error}). dualgpu follows host lines of the forms: "
            f"{FOLLOWED_FORMS}. Fix: write the buffer with one of those in your own code, "
            "or make it a DualArray where it is made (dualgpu.zeros(shape), or "
            "cuda.to_device(np.zeros(shape)) to keep it on the device)."
        )

    def store_out(self, out, result):
        """``np.ufunc(..., out=out)`` (``para += delta``) with a dual ``result`` and a plain
        float ``out``: kept here (values into ``out``, partials beside it). False when
        ``out`` cannot be kept."""
        shadow = self.keep(out)
        view = None if shadow is None else shadow.view(out)
        if view is None:
            return False
        view[...] = result
        shadow.writer = f"numpy{_at(caller_line())}"
        shadow.write_back()
        return True

    def lookup(self, array, live=False):
        """The DualArray standing for ``array`` (a registered buffer or a view of one), or None.

        ``live``: only a buffer that holds nonzero partials.
        """
        if live and not any(s.live for s in list(self._shadows.values())):
            return None
        shadow = self.find(array)
        if shadow is None or (live and not shadow.live):
            return None
        return shadow.view(array)

    def before_launch(self, kernel, args, captured=False):
        """Replace the float host arrays of a dual launch by their hidden DualArrays.

        Returns ``(args, token)``; :meth:`after_launch(token) <after_launch>` writes the
        values back (``token`` is None when nothing was replaced).
        """
        # host arrays, and the simulator's device arrays by their memory
        memory = [a if isinstance(a, np.ndarray) else _host_memory(a) for a in args]
        float_arrays = [i for i, a in enumerate(memory)
                        if isinstance(a, np.ndarray) and not isinstance(a, DualArray)
                        and a.dtype.kind in "fc" and 1 <= a.ndim <= 3]
        if not float_arrays:
            return args, None
        # every kept buffer (read-only to plain code) runs on its hidden DualArray
        live = [i for i in float_arrays if self._shadows.get(id(_root(memory[i]))) is not None]
        if not (live or captured or any(_holds_duals(a) for a in args)):
            return args, None
        read_only = _read_only_params(kernel)
        float_arrays = [i for i in float_arrays
                        if i in live or memory[i].ndim > read_only.get(kernel._params[i], 0)]
        args = list(args)
        used, pairs = [], []
        on_gpu = backend() == "cuda"
        where = caller_line()
        for i in float_arrays:
            shadow = self._shadow(memory[i], None)
            if shadow is not None and shadow.name is None:
                name = _name_in(shadow.root)
                shadow.name = kernel._params[i] if name.startswith("a host") else name
            view = None if shadow is None else shadow.view(memory[i])
            if view is None:
                continue  # left plain: a store of a dual into it is refused as before
            if on_gpu:  # numba copies a host array in and out: here, values and partials
                device = _PORTING["to_device"](view)
                pairs.append((view, device))
                view = device
            args[i] = view
            if shadow not in used:
                used.append(shadow)
            shadow.writer = f"kernel {kernel.__name__}{_at(where)}"
        return args, (used, pairs)

    @staticmethod
    def after_launch(token):
        """Copy what the launch wrote back into the hidden arrays and the user's arrays."""
        used, pairs = token
        for view, device in pairs:
            device.copy_to_host(view)
        for shadow in used:
            shadow.write_back()

    def copy_into(self, host, source):
        """``source.copy_to_host(host)``: the values into ``host``, the partials kept here."""
        where = caller_line()
        shadow = self._shadow(host, _name_in(_root(host)))
        view = None if shadow is None else shadow.view(host)
        if view is None:
            return False
        if tuple(host.shape) != tuple(source.shape):
            raise DualgpuError(
                f"copy_to_host(ary){_at(where)}: ary has shape {tuple(host.shape)}, the "
                f"DualArray {tuple(source.shape)}; give a buffer of the same shape."
            )
        host_copy = source.copy_to_host()
        view[...] = host_copy
        shadow.writer = f"copy_to_host{_at(where)}"
        shadow.write_back()
        return True

    def resolve(self, result, fname):
        """f's result with registered host arrays (and views) as their DualArrays.

        Refuses a plain float output while a registered buffer holds partials: it was
        read with numpy (``buf.sum()``, ``buf[0, 3]``, ``buf.copy()``) and lost them.
        """
        plain = []
        resolved = self._resolve(result, "", plain)
        alive = [s for s in list(self._shadows.values()) if s.live and s.root is not None]
        live = self._gone + alive
        if plain and live:
            buffers = "; ".join(f"{s.name or 'a host array'} (shape {s.shape}, "
                                f"written by {s.writer})" for s in live)
            outputs = ", ".join(k for k, _ in plain)
            values = [np.asarray(item, np.float64).ravel() for _, item in plain]
            holds = [s for s in alive if any(np.isin(v, s.root).any() for v in values)]
            first = (holds or live)[-1]  # the buffer the plain output was read from, if seen
            name = first.name or "buf"
            raise DualgpuError(
                f"{fname}: output {outputs} of f is a plain numpy value, but the host "
                f"buffer(s) {buffers} hold duals whose partials dualgpu keeps beside them. "
                "Host code that reads such a buffer with numpy (buf.sum(), buf[0, 3], "
                "buf.copy(), float(buf[i])) gets plain floats and drops the partials, so "
                "this output would be differentiated without them. Fix: return the buffer "
                f"itself or a slice of it (return {name}, or {name}[0:1] rather than "
                f"{name}[0]), or make it a DualArray where it is made, so that numpy "
                f"reads keep the partials: {_fix(name, first)}."
            )
        return resolved

    def _resolve(self, item, path, plain):
        """``item`` with kept buffers as DualArrays, at any depth of tuples and lists; plain
        float outputs are noted in ``plain`` as ``(path, item)``.

        f's outputs are its result or the items of a tuple (list) result; a sequence below
        that is one array output, as numpy makes it (``((u,), v)``: ``(u,)`` is an array of
        shape (1, n)), so one holding a kept buffer is stacked with its partials.
        """
        if isinstance(item, (tuple, list)) and not hasattr(item, "_fields"):
            parts = [self._resolve(x, f"{path}[{k}]" if path else str(k), plain)
                     for k, x in enumerate(item)]
            if not path:
                return parts if isinstance(item, list) else tuple(parts)
            if any(isinstance(x, (Dual, DualArray)) for x in parts):
                plain[:] = [(k, x) for k, x in plain if not k.startswith(path)]
                try:
                    return np.stack(parts)
                except Exception as error:
                    raise DualgpuError(
                        f"output {path} of f is a {type(item).__name__} holding kept host "
                        "buffers, which dualgpu reads as one array (as numpy does), but its "
                        f"items do not stack ({error}). Fix: return the buffers as items "
                        "of f's result tuple (return u, v), not inside a nested one."
                    ) from error
            return type(item)(parts)
        if isinstance(item, np.ndarray) and item.dtype.kind in "fc":
            found = self.lookup(item)
            if found is not None:
                return found.copy_to_host()
        if (isinstance(item, (np.ndarray, np.generic, float))
                and np.asarray(item).dtype.kind in "fc"):
            plain.append((path or "0", item))
        return item


_COPY_CALL = re.compile(r"copy_to_host\(\s*(?:ary\s*=\s*)?([A-Za-z_]\w*)\s*(?:\[[^\]]*\])?\s*[,)]")


def kept_source(ary):
    """``ary``, or the DualArray standing for it where it is a host buffer kept by
    :func:`keep_host_buffers` (a copy into a device array, ``d.copy_to_device(u)`` or
    ``cuda.to_device(u, to=d)``, takes its partials as ``cuda.to_device(u)`` does)."""
    registry = active()
    return ary if registry is None else registry.substitute_one(ary)


def keep_copy(ary, source):
    """``ary.copy_to_device(source)`` for a plain float array ``ary`` standing in for a device
    array (the cpu backend's, the simulator's memory) and a DualArray ``source``: the values
    into ``ary``, the partials kept by the registry (True). Under the driver, outside
    :func:`keep_host_buffers`, refused with the buffer's name, the line and the fixes; outside
    the driver, False (the caller refuses the copy)."""
    registry = active()
    if (registry is not None and isinstance(ary, np.ndarray) and ary.dtype.kind in "fc"
            and not source.tag and registry.copy_into(ary, source)):
        return True
    if not active_lanes():
        return False  # outside the driver: the caller's refusal
    where = caller_line()
    found = _DEVICE_COPY_CALL.search(where[2]) if where else None
    found = found or _TO_DEVICE_CALL.search(where[2]) if where else None
    name = found.group(1) if found else "the device array"
    raise DualgpuError(
        f"a copy into {name}{_at(where)} would drop the {source.lanes} lanes of partials "
        f"copied into it: " + device_buffer_fix(name))


def device_buffer_fix(name):
    """What a plain device array ``name`` made before the driver ran f is, and the fixes (a
    copy or a kernel store of duals into it is refused with them)."""
    keep = ("; a nested derivative (hessian) keeps nothing beside it." if len(active_levels()) > 1
            else ", or run the driver inside `with dualgpu.keep_host_buffers():`, which keeps "
            "the partials beside such arrays (cpu and cudasim backends).")
    return (f"{name} is a plain device array made before the driver ran f (by a solver's "
            "__init__, a module global). Fix: allocate it inside f (cuda.device_array_like(x) "
            f"there makes a DualArray under the driver){keep}")


def _host_memory(item):
    """The numpy memory of a device array that lives in host memory (the simulator's: its
    ``host_memory``), else None."""
    return item.host_memory if hasattr(type(item), "host_memory") else None


def copy_to_plain(source, ary):
    """``source.copy_to_host(ary)`` for a plain ``ary``: kept by the registry, or refused.

    Raises
    ------
    DualgpuError
        Outside the driver (or in a nested derivative), or for a buffer whose memory
        cannot be mirrored: the message names the buffer, the line and the fix.
    """
    registry = active()
    if (registry is not None and isinstance(ary, np.ndarray) and ary.dtype.kind in "fc"
            and not source.tag and registry.copy_into(ary, source)):
        return ary
    where = caller_line()
    found = _COPY_CALL.search(where[2]) if where else None
    name = found.group(1) if found else "ary"
    shape = _shape_text(source.shape)
    raise DualgpuError(
        f"copy_to_host({name}){_at(where)}: {name} is a plain {type(ary).__name__} (a numpy "
        "buffer, or pinned or mapped host memory from cuda.pinned_array / mapped_array made "
        f"outside the driver), which would drop the {source.lanes} lanes of partials. Fix, "
        "one line: "
        f"{name} = <device array>.copy_to_host() (a new host DualArray that keeps them), or "
        f"make the buffer with {name} = dualgpu.zeros({shape}, "
        f"np.{np.dtype(getattr(ary, 'dtype', source.dtype)).name}) (a DualArray under the "
        "driver, plain outside it)" + _keep_hint() + "."
    )


def _keep_hint():
    """The opt-in, for a refusal in a first-level driver run that does not keep buffers."""
    if len(active_levels()) != 1:
        return ""
    return ("; or leave the code as it is and take the derivative (dualgpu.jacobian / jvp) "
            "inside `with dualgpu.keep_host_buffers():`, which keeps the partials of host "
            "buffers that kernels write (but not of plain numpy reads of them: see that "
            "function's docstring)")


def substitute(items):
    """``items`` (a ufunc's inputs, a numpy function's arguments) with each registered host
    buffer that holds partials replaced by its DualArray (one level into lists and tuples):
    ``u * p`` with ``u`` a host array a kernel wrote duals into keeps u's partials."""
    registry = active()
    if (registry is None or hooks.values_followed()  # a followed line: replayed already
            or not any(s.live for s in list(registry._shadows.values()))):
        return items
    out = []
    for item in items:
        if isinstance(item, np.ndarray) and item.dtype.kind in "fc":
            found = registry.lookup(item, live=True)
            item = item if found is None else found
        elif type(item) in (list, tuple):
            item = type(item)(substitute(item))
        out.append(item)
    return tuple(out) if isinstance(items, tuple) else out


_AUG = re.compile(r"^\s*([A-Za-z_][\w.]*(?:\[[^\]]*\])?)\s*([-+*/%@&|^]|//|\*\*)=(?!=)\s*(.+?)\s*$")


def store_out(ufunc_name, out, result):
    """A dual ``result`` of ``np.<ufunc>(..., out=out)`` with ``out`` a plain numpy array.

    ``para += delta`` (``para`` numpy, ``delta`` a DualArray) lands here. Inside
    :func:`keep_host_buffers` under the driver ``out`` is kept (values into it, partials
    beside it); anywhere else this raises with the line and the one-line fix.

    Returns
    -------
    out

    Raises
    ------
    DualgpuError
        Outside the driver's kept buffers, or for memory that cannot be kept.
    """
    registry = active()
    if (registry is not None and isinstance(out, np.ndarray) and out.dtype.kind in "fc"
            and registry.store_out(out, result)):
        return out
    where = caller_line()
    found = _AUG.match(where[2]) if where else None
    if found:
        target, op, value = found.groups()
        fix = (f"{target} = {target} {op} {value} (a new array, which holds duals under the "
               "driver)")
        what = f"`{target} {op}= ...` updates the numpy array {target} in place"
    else:
        fix = "leave out out= and use the result (a DualArray under the driver)"
        what = f"numpy.{ufunc_name}(..., out=...) writes into a plain numpy array"
    raise DualgpuError(
        f"{what}{_at(where)}, and the answer is a dual: a numpy float array has no room for "
        f"its partials, which would be dropped. Fix, one line: {fix}; or make the array "
        "a DualArray where it is made (dualgpu.zeros(shape))" + _keep_hint() + "."
    )


def array_message(frame):
    """The message of a DualArray stored into a plain host array by ``frame``'s line
    (``buf[:] = u``, ``buf[t] = u`` into ``np.zeros`` or ``cuda.pinned_array`` memory), or
    None for another line."""
    store = _store_into_float_array(frame)
    if store is None:
        return None
    filename, line, name, target = store
    shape, dtype = _shape_text(target.shape), np.dtype(target.dtype).name
    return (
        f"at {filename}:{frame.f_lineno}, `{line.strip()}` stores a DualArray into the numpy "
        f"array {name!r} (shape {tuple(target.shape)}, {target.dtype}), which holds plain "
        "floats (a numpy buffer, or one from cuda.pinned_array / pinned_array_like / "
        "mapped_array): its partials would be dropped. Fix, one line, where the buffer is "
        f"made: {name} = dualgpu.zeros({shape}, np.{dtype}), or "
        f"{name} = cuda.pinned_array({shape}, np.{dtype}) with dualgpu's cuda (both a "
        "DualArray under the driver, the same plain array outside it: make it inside the "
        "function the driver runs, not before); or collect the steps in a list and "
        f"np.stack them{_keep_hint_stores()}."
    )


def _keep_hint_stores():
    if len(active_levels()) != 1 or _keeping():
        return ""
    return ("; or take the derivative inside `with dualgpu.keep_host_buffers():`, which "
            "follows such stores into host buffers")
