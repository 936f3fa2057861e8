"""One element of a dual array as numpy's ``ndarray.item`` reads one (:meth:`DualArray.item`)."""
import numpy as np

__all__ = ["element"]


def element(array, index):
    """``array.item(*index)`` of a :class:`~dualgpu.DualArray`: a Dual (a copy).

    ``()`` for a one-element array, ``(k,)`` by flat index (negative from the end), ``(i, j)``
    or ``((i, j),)`` by position.

    Examples
    --------
    >>> import numpy as np, dualgpu
    >>> u = dualgpu.dual_array(np.array([[1.0, 2.0], [3.0, 4.0]]), lanes=1)
    >>> float(u.item(3).value), float(u.item(1, 0).value), float(u.item(-2).value)
    (4.0, 3.0, 3.0)
    """
    host = array.copy_to_host() if array.is_device else array
    if len(index) == 1 and isinstance(index[0], tuple):
        index = index[0]
    if len(index) <= 1:
        if not index and host.size != 1:
            raise ValueError("can only convert an array of size 1 to a Python scalar; this "
                             f"DualArray has {host.size} elements: call item(k)")
        flat = int(index[0]) if index else 0
        index = np.unravel_index(flat % host.size if flat < 0 else flat, host.shape)
    return host[tuple(int(k) for k in index)].tolist()
