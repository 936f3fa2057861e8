"""``cuda.vectorize`` and ``cuda.guvectorize`` through ``from dualgpu import cuda``.

numba.cuda compiles a vectorized function when it is decorated, which needs a GPU. Here:

* ``vectorize``: the scalar function becomes a dualgpu device function, called by an
  elementwise kernel over the broadcast arguments. It runs on every backend (numba's own
  ufunc on the GPU for plain arguments), and Duals and DualArrays take it as any
  kernel does. The signature is chosen as numba chooses it: the first whose argument
  types the arguments cast to safely (Python numbers fit any); arguments are cast to it,
  the result has its return type and the broadcast shape, and it is a device array
  when an argument was one.
* ``guvectorize``: numba's own on the GPU with plain arguments; elsewhere, or with
  duals, an error that says how to write it as a kernel.
"""
import numpy as np
from numba import cuda as _cuda
from numba.core import sigutils

from dualgpu.backends.common.translate import compile_source
from dualgpu.core._context import lane_dtype
from dualgpu.core.selection import backend
from dualgpu.core.dual import Dual
from dualgpu.core.dualarray import DualArray
from dualgpu.errors import UnsupportedFeatureError
from dualgpu.porting import graphs
from dualgpu.porting.kernel import jit
from dualgpu.porting.memory import to_device

__all__ = ["guvectorize", "vectorize"]

_TPB = 128


def _is_device(a):
    return hasattr(a, "copy_to_host") and not isinstance(a, DualArray) and (
        not isinstance(a, np.ndarray) or type(a) is not np.ndarray)


def _dtype_of(a):
    """numpy dtype of an argument, or None for a Python number (fits any signature)."""
    if isinstance(a, (bool, int, float, complex)) and not isinstance(a, np.generic):
        return None
    if isinstance(a, Dual):
        return np.dtype(a.dtype)
    dtype = getattr(a, "dtype", None)
    return np.dtype(dtype if dtype is not None else np.asarray(a).dtype)


class Vectorized:
    """A function made elementwise by ``cuda.vectorize`` (see the module docstring)."""

    def __init__(self, py_func, signatures, options):
        self.py_func = py_func
        self.__name__ = py_func.__name__
        self.__doc__ = py_func.__doc__
        self.signatures = []
        for sig in signatures:
            args, ret = sigutils.normalize_signature(sig)
            if ret is None:
                raise UnsupportedFeatureError(
                    f"cuda.vectorize({sig!r}) of {py_func.__name__}: expected a signature "
                    "with a return type, such as 'float64(float64, float64)'.")
            self.signatures.append(([np.dtype(str(a)) for a in args], np.dtype(str(ret))))
        if not self.signatures:
            raise UnsupportedFeatureError(
                f"cuda.vectorize of {py_func.__name__}: numba.cuda needs its signatures, e.g. "
                "@cuda.vectorize(['float64(float64, float64)']).")
        self.options = options
        self._numba_signatures = list(signatures)  # as given: numba.cuda parses them itself
        self._numba_ufunc = None
        self._device = None
        self._kernels = {}

    def __repr__(self):
        return f"<dualgpu vectorized {self.__name__}>"

    def _choose(self, args):
        """The signature numba.cuda's ufunc picks: arrays of exactly its types; scalars of
        exactly its types if one signature has them, else any signature (cast)."""
        arrays = [isinstance(a, DualArray) or (not isinstance(a, Dual) and np.ndim(a) > 0)
                  for a in args]
        dtypes = [_dtype_of(a) for a in args]
        candidates = [(t, r) for t, r in self.signatures if len(t) == len(args)
                      and all(d == f for d, f, arr in zip(dtypes, t, arrays) if arr)]
        exact = [(t, r) for t, r in candidates
                 if all((d or np.dtype(type(a))) == f for a, d, f in zip(args, dtypes, t))]
        matches = exact or candidates
        if len(matches) == 1:
            return matches[0]
        wanted = ", ".join(f"{d or type(a).__name__} {'array' if arr else 'scalar'}"
                           for a, d, arr in zip(args, dtypes, arrays))
        have = "; ".join(f"({', '.join(map(str, t))}) -> {r}" for t, r in self.signatures)
        if not matches:
            raise TypeError(
                f"{self.__name__}: no signature takes ({wanted}); its signatures are {have}. "
                "numba.cuda's ufuncs take arrays of exactly a signature's types (casting='no'): "
                "cast the arrays (u.astype(np.float32)) or add a signature.")
        raise TypeError(
            f"{self.__name__}: ({wanted}) matches several signatures ({have}), as numba.cuda "
            "finds too; give the scalars a numpy type (np.float32(2.0)).")

    def _kernel(self, scalar_mask):
        if scalar_mask not in self._kernels:
            if self._device is None:
                self._device = jit(device=True)(self.py_func)
            names = [f"a{k}" for k in range(len(scalar_mask))]
            call = ", ".join(n if scalar else f"{n}[i]" for n, scalar in zip(names, scalar_mask))
            source = (f"def vectorized_{self.__name__}({', '.join(names)}, out):\n"
                      "    i = cuda.grid(1)\n"
                      "    if i < out.shape[0]:\n"
                      f"        out[i] = scalar({call})\n")
            # ``cuda`` in the generated source is numba.cuda itself: every backend reads
            # ``cuda.grid`` there as in a user's kernel
            fn = compile_source(source, {"cuda": _cuda, "scalar": self._device},
                                f"vectorized_{self.__name__}", f"vectorize {self.__name__}")
            self._kernels[scalar_mask] = jit(fn)
        return self._kernels[scalar_mask]

    def __call__(self, *args, out=None, stream=0):
        if graphs.ACTIVE is not None:
            graphs.refuse(f"the ufunc {self.__name__}()", "ufuncs run at once and are not "
                          "recorded; call it before or after the block, or write the "
                          "elementwise step as a kernel (dualgpu.cuda.jit).")
        duals = any(isinstance(a, (Dual, DualArray)) for a in args) or isinstance(out, DualArray)
        if backend() == "cuda" and not duals:
            if self._numba_ufunc is None:
                self._numba_ufunc = _cuda.vectorize(self._numba_signatures,
                                                    **self.options)(self.py_func)
            return self._numba_ufunc(*args, out=out, stream=stream)
        arg_types, ret = self._choose(args)
        on_device = any(_is_device(a) for a in args)
        host = [a.copy_to_host() if _is_device(a) else a for a in args]
        host = [a if isinstance(a, (Dual, DualArray)) or np.ndim(a) == 0 else np.asarray(a)
                for a in host]
        arrays = [k for k, a in enumerate(host) if isinstance(a, (DualArray, np.ndarray))]
        shape = np.broadcast_shapes(*(host[k].shape for k in arrays)) if arrays else ()
        size = int(np.prod(shape))
        launch_args = []
        lanes = 0
        for k, (a, t) in enumerate(zip(host, arg_types)):
            if k in arrays:
                # a writable C-contiguous copy: kernels may write their arguments back
                a = np.reshape(np.broadcast_to(a.astype(t, copy=False), shape), (-1,)).copy()
            elif isinstance(a, Dual):
                a = a.astype(t)
            else:
                a = t.type(a)
            if isinstance(a, (Dual, DualArray)):
                lanes = max(lanes, len(a.partials))
            launch_args.append(a)
        result = (DualArray(np.zeros(size, ret), np.zeros((lanes, size), lane_dtype(ret)))
                  if lanes else np.zeros(size, ret))
        if size:
            mask = tuple(k not in arrays for k in range(len(args)))
            self._kernel(mask)[(size + _TPB - 1) // _TPB, _TPB](*launch_args, result)
        result = np.reshape(result, shape) if shape else result[0]
        if out is not None:
            out[...] = result
            return out
        return to_device(result) if on_device and shape else result


def vectorize(ftylist_or_function=(), **kws):
    """``numba.cuda.vectorize`` that runs on every backend and takes duals.

    Parameters
    ----------
    ftylist_or_function : str or list of str
        The signatures, as numba.cuda requires (``["float64(float64, float64)"]``).
    **kws
        numba.cuda.vectorize's options.

    Returns
    -------
    callable
        A decorator; the function it makes runs elementwise as a dualgpu kernel (numba's
        own ufunc on the GPU for plain arguments), choosing the signature as numba.cuda
        chooses it.

    Raises
    ------
    UnsupportedFeatureError
        When no signatures are given (numba.cuda needs them too).

    Examples
    --------
    >>> import numpy as np
    >>> from dualgpu import cuda
    >>> @cuda.vectorize(["float64(float64, float64)"])
    ... def scaled_sum(x, y):
    ...     return 2.0 * x + y
    >>> scaled_sum(np.ones(3), np.arange(3.0)).tolist()
    [2.0, 3.0, 4.0]
    """
    if callable(ftylist_or_function):
        raise UnsupportedFeatureError(
            f"cuda.vectorize of {ftylist_or_function.__name__} without signatures: numba.cuda "
            "needs them too, e.g. @cuda.vectorize(['float64(float64, float64)']).")
    signatures = ([ftylist_or_function] if isinstance(ftylist_or_function, str)
                  else list(ftylist_or_function))
    return lambda py_func: Vectorized(py_func, signatures, kws)


class _Guvectorized:
    def __init__(self, py_func, args, kws):
        self.py_func, self._args, self._kws = py_func, args, kws
        self.__name__ = py_func.__name__
        self._numba = None

    def __call__(self, *args, **kwargs):
        duals = any(isinstance(a, (Dual, DualArray)) for a in list(args) + list(kwargs.values()))
        if backend() == "cuda" and not duals:
            if self._numba is None:
                self._numba = _cuda.guvectorize(*self._args, **self._kws)(self.py_func)
            return self._numba(*args, **kwargs)
        where = "dual arguments" if duals else f"the {backend()} backend"
        raise UnsupportedFeatureError(
            f"cuda.guvectorize function {self.__name__} cannot run with {where}: dualgpu runs "
            "numba.cuda's generalized ufuncs on the cuda backend with plain arrays only. "
            "Write it as a @cuda.jit kernel (one thread per element of the loop dimensions, "
            "the core dimensions looped over inside), which every backend runs and "
            "differentiates; @cuda.vectorize functions are supported everywhere.")


def guvectorize(*args, **kws):
    """``numba.cuda.guvectorize``: numba's own on the GPU with plain arrays, else an error.

    Parameters
    ----------
    *args, **kws
        numba.cuda.guvectorize's signatures, layout and options.

    Returns
    -------
    callable
        A decorator. The function it makes raises :class:`~dualgpu.UnsupportedFeatureError` when
        called with duals or off the GPU, saying how to write it as a kernel.

    Examples
    --------
    >>> import dualgpu
    >>> from dualgpu import cuda
    >>> @cuda.guvectorize(["void(float64[:], float64[:])"], "(n)->(n)")
    ... def copy(x, out):
    ...     for i in range(x.shape[0]):
    ...         out[i] = x[i]
    >>> with dualgpu.using_backend("cpu"):
    ...     try:
    ...         copy([1.0])
    ...     except dualgpu.UnsupportedFeatureError as error:
    ...         print(str(error).split(":")[0])
    cuda.guvectorize function copy cannot run with the cpu backend
    """
    return lambda py_func: _Guvectorized(py_func, args, kws)
