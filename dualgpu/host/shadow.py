"""The hidden DualArray of one kept host array, and which kernel parameters only read.

:mod:`dualgpu.host.buffers` keeps the partials of a host numpy array that kernels write
(inside :func:`dualgpu.keep_host_buffers`) in a :class:`Shadow`: the values and lane-major
partials of the array that owns the memory, so that any view of it (``state[0]``,
``u[1:-1]``) finds its share. :func:`read_only_params` tells which kernel parameters a
launch may leave plain (the kernel only reads them element by element).
"""
import ast
import weakref

import numpy as np

from dualgpu.core._context import lane_dtype
from dualgpu.core.dualarray import DualArray
from dualgpu.errors import DualgpuError
from dualgpu.host.host_writes import FOLLOWED_FORMS

__all__ = ["Shadow", "read_only_params", "root_of", "shape_text", "buffer_fix", "contiguous",
           "value_in"]


def root_of(array):
    """The array that owns ``array``'s memory (itself, or the base of a view of its dtype: a
    buffer of raw bytes under it, as the cpu backend's large arrays have, is not mirrored)."""
    while isinstance(array.base, np.ndarray) and array.base.dtype == array.dtype:
        array = array.base
    return array


def value_in(frame, dotted):
    """The value ``dotted`` (``u``, ``self.u``) names in ``frame``, or None (attributes read,
    nothing called)."""
    first, *rest = dotted.split(".")
    value = frame.f_locals.get(first, frame.f_globals.get(first))
    try:
        for attribute in rest:
            value = getattr(value, attribute)
    except Exception:  # noqa: BLE001 - a property that raises: no name to give
        return None
    return value


def shape_text(shape):
    """``(n,)`` or ``(n, m)``: a shape as the fixes write it."""
    return f"({shape[0]},)" if len(shape) == 1 else repr(tuple(shape))


def buffer_fix(name, array):
    """The one-line fix for the host buffer ``name``: make it a DualArray where it is made."""
    shape, dtype = shape_text(array.shape), np.dtype(array.dtype).name
    return (f"{name} = dualgpu.zeros({shape}, np.{dtype}) where it is made (or "
            f"{name} = cuda.to_device(np.zeros({shape}, np.{dtype})) to keep it on the device): "
            "under the driver that is a DualArray, which holds duals in host stores and "
            "kernel launches alike; outside the driver, the same plain array")


class Shadow:
    """The hidden DualArray of one host array (the owner of the memory) and its history.

    Between the writes the registry makes or follows, the array is read-only to host code
    (its own flag is restored when the run of f ends): a write dualgpu cannot see (compiled
    code, another thread) fails there instead of leaving stale partials.
    """

    __slots__ = ("_root", "values", "partials", "flat_values", "flat_partials", "name",
                 "writer", "live", "shape", "dtype", "writeable", "__weakref__")

    def __init__(self, root, lanes, forget):
        # held weakly: a buffer host code drops (a fresh np.zeros per step) frees its hidden
        # DualArray; ``forget`` removes the registry's entry before the id can be reused
        self._root = weakref.ref(root, forget)
        self.shape, self.dtype = tuple(root.shape), root.dtype
        self.values = np.empty_like(root, order="K")
        self.values[...] = root
        dtype = lane_dtype(root.dtype)
        self.flat_partials = np.zeros(lanes * root.size, dtype)
        self.partials = np.lib.stride_tricks.as_strided(
            self.flat_partials, (lanes,) + root.shape,
            (root.size * dtype.itemsize,) + tuple(s // root.itemsize * dtype.itemsize
                                                  for s in root.strides))
        self.flat_values = self.values.ravel(order="K")
        self.name, self.writer, self.live = None, None, False
        self.writeable = bool(root.flags.writeable)

    @property
    def root(self):
        return self._root()

    def protect(self):
        """Make the array read-only to host code (until :meth:`unprotect`)."""
        root = self.root
        if root is not None and self.writeable:
            root.flags.writeable = False

    def unprotect(self):
        """Let the next write (the registry's own, or a followed host line) through."""
        root = self.root
        if root is not None and self.writeable:
            root.flags.writeable = True

    def changed(self):
        """A mask of the elements whose values differ from the hidden ones, or None."""
        root, values = self.root, self.values
        if root is None or values is None:
            return None
        same = (root == values) | (np.isnan(root) & np.isnan(values))
        return None if same.all() else ~same

    def sync(self):
        """Refuse values host code wrote that the registry did not see (never zero them:
        a copy of a dual cannot be told from a constant by its value)."""
        changed = self.changed()
        if changed is not None:
            raise DualgpuError(
                f"the kept host buffer {self.name or 'a host array'} (shape {self.shape}, "
                f"last written by {self.writer}) was changed at {int(changed.sum())} "
                "element(s) by a write dualgpu did not see (through a view made before a "
                "kernel wrote it, in compiled code or in another thread), so the partials "
                "of those elements are unknown. dualgpu follows host writes of the forms: "
                f"{FOLLOWED_FORMS}. Fix: write the buffer with one of those on a line of "
                "host code, or make it with "
                f"{buffer_fix(self.name or 'buf', self)}."
            )

    def adopt(self, source, where):
        """After a followed host line: the values it wrote, checked against its replay."""
        root = self.root
        if root is None or self.values is None:
            return
        changed = self.changed()
        if changed is not None:
            close = np.isclose(root, self.values, rtol=8 * np.finfo(self.dtype).eps, atol=0.0,
                               equal_nan=True)
            if not close.all():
                self.protect()
                raise DualgpuError(
                    f"at {where}: `{source}` wrote values into the kept host buffer "
                    f"{self.name or 'a host array'} that differ from the same line run on "
                    "its duals, so the partials cannot be trusted. Fix: make the buffer "
                    f"with {buffer_fix(self.name or 'buf', self)}."
                )
            self.values[changed] = root[changed]
        self.live = self.live or bool(np.any(self.partials))
        self.writer = f"host code at {where}"
        self.protect()

    def view(self, array):
        """The DualArray for ``array``, a view of the root (or the root itself)."""
        if array is self.root:
            return DualArray(self.values, self.partials)
        item = self.root.itemsize
        offset = (array.__array_interface__["data"][0]
                  - self.root.__array_interface__["data"][0])
        if (array.dtype != self.root.dtype or offset % item
                or any(s % item for s in array.strides)):
            return None
        start = offset // item
        values = np.lib.stride_tricks.as_strided(self.flat_values[start:], array.shape,
                                                 array.strides)
        pitem = self.flat_partials.itemsize
        partials = np.lib.stride_tricks.as_strided(
            self.flat_partials[start:], (self.partials.shape[0],) + array.shape,
            (self.root.size * pitem,) + tuple(s // item * pitem for s in array.strides))
        return DualArray(values, partials)

    def write_back(self):
        self.unprotect()
        np.copyto(self.root, self.values)
        self.protect()
        self.live = self.live or bool(np.any(self.partials))


def read_only_params(kernel):
    """``{parameter: k}`` for the kernel's parameters that its source only reads, with ``k``
    the fewest indices of a read (``u[i]``: 1, ``u[i, j]``: 2; ``u.shape``, ``len(u)`` do not
    count). An array of at most ``k`` dimensions there is read element by element only, so a
    plain host array stays plain in a dual launch (nothing can store a dual in it). A slice,
    a chained index (``u[i][j]``), a call or an assignment of the array itself may alias it:
    such parameters are absent."""
    cached = kernel.__dict__.get("_read_only_params")
    if cached is not None:
        return cached
    tree = kernel._source_tree
    params = set(kernel._params)
    reads = {}
    if tree is not None:
        parents = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                parents[child] = node
        escaped = set()
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Name) and node.id in params):
                continue
            parent = parents.get(node)
            if isinstance(node.ctx, ast.Store) or isinstance(parent, ast.arguments):
                escaped.add(node.id)  # rebound
            elif isinstance(parent, ast.Subscript) and parent.value is node:
                index = parent.slice
                above = parents.get(parent)
                if (not isinstance(parent.ctx, ast.Load)
                        or any(isinstance(n, ast.Slice) for n in ast.walk(index))
                        or (isinstance(above, ast.Subscript) and above.value is parent)):
                    escaped.add(node.id)  # a store, a slice (a view), u[i][j]
                else:
                    k = len(index.elts) if isinstance(index, ast.Tuple) else 1
                    reads[node.id] = min(reads.get(node.id, k), k)
            elif isinstance(parent, ast.Attribute) and parent.attr in (
                    "shape", "size", "ndim", "dtype"):
                pass
            elif (isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name)
                  and parent.func.id == "len"):
                pass
            else:
                escaped.add(node.id)  # passed to a call (atomics, device functions), aliased
        reads = {p: reads.get(p, 3) for p in params - escaped}
    kernel.__dict__["_read_only_params"] = reads
    return reads


def contiguous(root):
    """True for memory a shadow can mirror element for element."""
    return root.flags.c_contiguous or root.flags.f_contiguous
