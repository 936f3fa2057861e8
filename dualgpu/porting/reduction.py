"""``cuda.reduce`` (numba.cuda's ``Reduce``) on every backend, for plain and dual arrays.

numba.cuda's ``Reduce`` compiles the binary function into a tree-reduction kernel and asks the
CUDA driver for a device, so ``@cuda.reduce`` failed off the GPU with ``CudaSupportError``.
Here the binary function becomes a dualgpu device function and the reduction a dualgpu kernel:

* on ``cpu`` and ``cudasim`` one thread folds the array in order (a compiled loop on ``cpu``),
  then combines the result with ``init`` as numba.cuda does (``fn(result, init)``);
* on the GPU, plain arrays go to numba.cuda's own ``Reduce``; a DualArray (or a dual
  ``init``) is folded by a grid of threads, each over a strided share of the array, and their
  partial results by one thread.

A reduction of a DualArray (or with a Dual ``init``) returns a :class:`~dualgpu.Dual` whose
partials are those of the reduced value; a plain one returns a numpy scalar, as numba.cuda
does. As with numba.cuda, the order in which elements are combined is unspecified on the GPU:
the function should be associative.
"""
import numpy as np
from numba import cuda

from dualgpu.core.dual import Dual
from dualgpu.core.dualarray import DualArray
from dualgpu.core.selection import backend
from dualgpu.porting import graphs
from dualgpu.porting.kernel import jit
from dualgpu.porting.memory import device_array_like, to_device

__all__ = ["Reduce", "reduce"]

#: threads that fold a dual array on the GPU (each takes every THREADS-th element)
GPU_THREADS = 128 * 64


def _fold_kernels(functor):
    """The two kernels of a reduction by ``functor``: strided partial folds, then one fold."""
    reduce_op = jit(device=True)(functor)

    def fold_strided(arr, partial, size):
        start = cuda.grid(1)
        step = cuda.gridsize(1)
        if start < size:
            acc = arr[start]
            for i in range(start + step, size, step):
                acc = reduce_op(acc, arr[i])
            partial[start] = acc

    def fold_with_init(arr, out, init, size):
        if cuda.grid(1) == 0:
            acc = arr[0]
            for i in range(1, size):
                acc = reduce_op(acc, arr[i])
            out[0] = reduce_op(acc, init)

    return jit(fold_strided), jit(fold_with_init)


class Reduce:
    """A reduction by a binary function, as numba.cuda's ``Reduce`` (``@cuda.reduce``).

    Parameters
    ----------
    functor : function
        ``fn(a, b)``, compiled as a device function (``cuda.jit(device=True)``).

    Examples
    --------
    >>> import numpy as np
    >>> import dualgpu
    >>> from dualgpu import cuda
    >>> @cuda.reduce
    ... def sum_reduce(a, b):
    ...     return a + b
    >>> with dualgpu.using_backend("cpu"):
    ...     print(sum_reduce(np.arange(5.0)), sum_reduce(np.arange(5.0), init=10.0))
    10.0 20.0
    """

    def __init__(self, functor):
        self._functor = getattr(functor, "py_func", functor)
        self._kernels = None
        self._numba = None
        self.__name__ = getattr(self._functor, "__name__", "reduce")
        self.__doc__ = getattr(self._functor, "__doc__", None) or Reduce.__doc__

    def __repr__(self):
        return f"<dualgpu cuda.reduce of {self.__name__}>"

    def _numba_reduce(self):
        if self._numba is None:
            from numba import cuda as numba_cuda

            self._numba = numba_cuda.Reduce(self._functor)
        return self._numba

    def __call__(self, arr, size=None, res=None, init=0, stream=0):
        """Reduce ``arr`` (1-D, host or device, plain or dual) to one value.

        Parameters
        ----------
        arr : array or DualArray
            A 1-D array.
        size : int, optional
            Reduce only the first ``size`` elements.
        res : device array or DualArray, optional
            Write the result into ``res[0]`` and return None.
        init : scalar or Dual, optional
            Combined with the result as ``fn(result, init)`` (numba.cuda's default is 0).
        stream : optional
            Accepted for numba.cuda's signature.

        Returns
        -------
        numpy scalar, Dual or None
            None when ``res`` is given; ``init`` when the array is empty.
        """
        if graphs.ACTIVE is not None:
            graphs.refuse("a reduction (dualgpu.cuda.reduce)", "a reduction returns its value "
                          "at once, which a graph cannot replay; reduce before or after the "
                          "block.")
        if getattr(arr, "ndim", None) != 1:
            raise TypeError(
                f"cuda.reduce {self.__name__}: only 1-D arrays can be reduced (as in "
                f"numba.cuda); got {type(arr).__name__} with ndim={getattr(arr, 'ndim', None)}. "
                "Pass arr.ravel() to reduce every element."
            )
        if size is not None:
            arr = arr[:size]
        dual = isinstance(arr, DualArray) or isinstance(init, Dual)
        if not isinstance(init, Dual):
            init = np.dtype(arr.dtype).type(init)
        if arr.shape[0] < 1:
            return init
        if backend() == "cuda" and not dual:
            return self._numba_reduce()(arr, res=res, init=init, stream=stream)
        if self._kernels is None:
            self._kernels = _fold_kernels(self._functor)
        fold_strided, fold_with_init = self._kernels
        out = res if res is not None else _result_buffer(arr, init)
        n = arr.shape[0]
        if backend() == "cuda" and n > GPU_THREADS:
            partial = device_array_like(arr[:GPU_THREADS])
            fold_strided[GPU_THREADS // 128, 128, stream](arr, partial, n)
            arr, n = partial, GPU_THREADS
        fold_with_init[1, 1, stream](arr, out, init, n)
        if res is not None:
            return None
        host = out.copy_to_host() if hasattr(out, "copy_to_host") else out
        return host[0]


def _result_buffer(arr, init):
    """A one-element device buffer for the result: dual where ``arr`` or ``init`` is."""
    if isinstance(arr, DualArray):
        return device_array_like(arr[:1])
    if isinstance(init, Dual):
        return to_device(np.array([init], dtype=object))
    # a plain host buffer: under the driver device_array would make it dual, and a reduction
    # of plain numbers must stay a plain number (host code may take float() of it)
    return np.zeros(1, dtype=arr.dtype)


def reduce(functor):
    """Decorate a binary function as a reduction: numba.cuda's ``@cuda.reduce``.

    Parameters
    ----------
    functor : function
        ``fn(a, b)``.

    Returns
    -------
    Reduce
        Call it as ``sum_reduce(arr, size=None, res=None, init=0, stream=0)``.

    Examples
    --------
    >>> import numpy as np
    >>> import dualgpu
    >>> from dualgpu import cuda
    >>> @cuda.reduce
    ... def sum_reduce(a, b):
    ...     return a + b
    >>> u = dualgpu.dual_array(np.arange(4.0), np.ones((1, 4)))
    >>> with dualgpu.using_backend("cpu"):
    ...     total = sum_reduce(u)
    >>> float(total.value), total.partials.tolist()
    (6.0, [4.0])
    """
    return Reduce(functor)
