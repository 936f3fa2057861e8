"""The rest of numba.cuda's host API that asks the CUDA driver: answers or refusals off the GPU.

On the ``cuda`` backend every name here is numba.cuda's own. On ``cpu`` and ``cudasim``
numba.cuda's versions raise ``CudaSupportError`` (no driver), so each either does what it
means without a GPU (streams, profiling, capability queries) or raises an
:class:`~dualgpu.errors.UnsupportedFeatureError` that names it and what to use instead
(external CUDA memory and streams, compiling for "the current device").
:mod:`dualgpu.porting.numba_names` classifies every public name of numba.cuda.
"""
import contextlib
import functools

from numba import cuda as _cuda

from dualgpu.core.dualarray import DualArray
from dualgpu.core.selection import backend
from dualgpu.errors import UnsupportedFeatureError
from dualgpu.porting.devices import COMPUTE_CAPABILITY
from dualgpu.porting.memory import HostArray, HostStream

__all__ = [
    "as_cuda_array", "compile", "compile_all", "compile_for_current_device", "compile_ptx",
    "compile_ptx_for_current_device", "cuda_error", "declare_device", "external_stream",
    "from_cuda_array_interface", "is_bfloat16_supported", "is_cuda_array",
    "is_float16_supported", "is_fp8_supported",
    "is_supported_version", "legacy_default_stream", "open_ipc_array",
    "per_thread_default_stream", "profile_start", "profile_stop", "profiling",
    "require_context", "refusal",
]


def _on_gpu():
    return backend() == "cuda"


def refusal(name, what, fix):
    """The error for ``cuda.<name>`` off the GPU: what it needs, and what to write instead.

    Parameters
    ----------
    name : str
        The numba.cuda name.
    what : str
        What it needs that the backend lacks.
    fix : str
        What to use instead.

    Returns
    -------
    UnsupportedFeatureError
    """
    return UnsupportedFeatureError(
        f"cuda.{name} {what}; the {backend()} backend has no CUDA driver, so it cannot run "
        f"here (it does on the cuda backend). Fix: {fix}"
    )


# -- streams -----------------------------------------------------------------------------
def legacy_default_stream():
    """The legacy default stream (numba.cuda's on the GPU, a HostStream elsewhere).

    Returns
    -------
    numba.cuda stream or HostStream

    Examples
    --------
    >>> import dualgpu
    >>> with dualgpu.using_backend("cpu"):
    ...     print(dualgpu.cuda.legacy_default_stream())
    <dualgpu host stream>
    """
    return _cuda.legacy_default_stream() if _on_gpu() else HostStream()


def per_thread_default_stream():
    """The per-thread default stream (numba.cuda's on the GPU, a HostStream elsewhere).

    Returns
    -------
    numba.cuda stream or HostStream

    Examples
    --------
    >>> import dualgpu
    >>> with dualgpu.using_backend("cudasim"):
    ...     print(dualgpu.cuda.per_thread_default_stream())
    <dualgpu host stream>
    """
    return _cuda.per_thread_default_stream() if _on_gpu() else HostStream()


def external_stream(ptr):
    """numba.cuda's wrapper of a stream made by another CUDA library (GPU backend only).

    Parameters
    ----------
    ptr : int
        The CUDA stream's address.

    Returns
    -------
    numba.cuda stream

    Raises
    ------
    UnsupportedFeatureError
        Off the GPU (there is no CUDA stream to wrap); use ``cuda.stream()``.

    Examples
    --------
    >>> import dualgpu
    >>> with dualgpu.using_backend("cpu"):
    ...     dualgpu.cuda.external_stream(0)
    Traceback (most recent call last):
    ...
    dualgpu.errors.UnsupportedFeatureError: cuda.external_stream wraps a CUDA stream ...
    """
    if _on_gpu():
        return _cuda.external_stream(ptr)
    raise refusal("external_stream", "wraps a CUDA stream made by another library",
                  "use cuda.stream() (a host stream here; launches are synchronous).")


# -- profiling ---------------------------------------------------------------------------
def profile_start():
    """Start CUDA profiling (nothing to profile off the GPU).

    Examples
    --------
    >>> import dualgpu
    >>> with dualgpu.using_backend("cpu"):
    ...     dualgpu.cuda.profile_start()
    """
    if _on_gpu():
        _cuda.profile_start()


def profile_stop():
    """Stop CUDA profiling (nothing to profile off the GPU).

    Examples
    --------
    >>> import dualgpu
    >>> with dualgpu.using_backend("cpu"):
    ...     dualgpu.cuda.profile_stop()
    """
    if _on_gpu():
        _cuda.profile_stop()


@contextlib.contextmanager
def profiling():
    """A context manager that profiles its body on the GPU (does nothing elsewhere).

    Yields
    ------
    None

    Examples
    --------
    >>> import dualgpu
    >>> with dualgpu.using_backend("cpu"), dualgpu.cuda.profiling():
    ...     pass
    """
    profile_start()
    try:
        yield
    finally:
        profile_stop()


# -- contexts and capability queries -----------------------------------------------------
def require_context(fn):
    """numba.cuda's decorator: ``fn`` runs inside a CUDA context on the GPU, plainly elsewhere.

    Parameters
    ----------
    fn : callable
        The function to decorate.

    Returns
    -------
    callable

    Examples
    --------
    >>> import dualgpu
    >>> with dualgpu.using_backend("cpu"):
    ...     print(dualgpu.cuda.require_context(lambda: 42)())
    42
    """
    gpu_version = _cuda.require_context(fn)

    @functools.wraps(fn)
    def run(*args, **kwargs):
        return gpu_version(*args, **kwargs) if _on_gpu() else fn(*args, **kwargs)

    return run


def is_float16_supported():
    """Whether float16 is supported: True, as numba.cuda answers on every device.

    Returns
    -------
    bool

    Examples
    --------
    >>> import dualgpu
    >>> dualgpu.cuda.is_float16_supported()
    True
    """
    return True


def is_bfloat16_supported():
    """Whether bfloat16 is supported: the device's answer, False off the GPU (compute 5.2).

    Returns
    -------
    bool
        Off the GPU, as for the simulator's device (compute capability 5.2).

    Examples
    --------
    >>> import dualgpu
    >>> with dualgpu.using_backend("cpu"):
    ...     print(dualgpu.cuda.is_bfloat16_supported())
    False
    """
    return _cuda.is_bfloat16_supported() if _on_gpu() else COMPUTE_CAPABILITY >= (8, 0)


def is_fp8_supported():
    """Whether FP8 is supported: the device's answer, False off the GPU (compute 5.2).

    Returns
    -------
    bool
        Off the GPU, as for the simulator's device (compute capability 5.2).

    Examples
    --------
    >>> import dualgpu
    >>> with dualgpu.using_backend("cpu"):
    ...     print(dualgpu.cuda.is_fp8_supported())
    False
    """
    return _cuda.is_fp8_supported() if _on_gpu() else COMPUTE_CAPABILITY >= (8, 9)


def is_supported_version():
    """Whether the CUDA runtime is supported: numba.cuda's answer on the GPU, True elsewhere.

    Returns
    -------
    bool

    Examples
    --------
    >>> import dualgpu
    >>> with dualgpu.using_backend("cpu"):
    ...     print(dualgpu.cuda.is_supported_version())
    True
    """
    return _cuda.is_supported_version() if _on_gpu() else True


def cuda_error():
    """The CUDA driver's initialisation error on the GPU; None elsewhere (nothing to start).

    Returns
    -------
    str or None

    Examples
    --------
    >>> import dualgpu
    >>> with dualgpu.using_backend("cpu"):
    ...     print(dualgpu.cuda.cuda_error())
    None
    """
    return _cuda.cuda_error() if _on_gpu() else None


# -- arrays from other CUDA libraries ----------------------------------------------------
def _is_backend_device_array(obj):
    return isinstance(obj, HostArray) or (isinstance(obj, DualArray) and obj.is_device)


def is_cuda_array(obj):
    """Whether ``obj`` is a device array: numba.cuda's test, or the backend's device arrays.

    Parameters
    ----------
    obj : object
        Anything.

    Returns
    -------
    bool
        True for objects with ``__cuda_array_interface__`` and, off the GPU, for the arrays
        ``cuda.to_device`` and ``cuda.device_array`` make there.

    Examples
    --------
    >>> import numpy as np, dualgpu
    >>> with dualgpu.using_backend("cpu"):
    ...     print(dualgpu.cuda.is_cuda_array(dualgpu.cuda.to_device(np.ones(2))))
    True
    """
    return _cuda.is_cuda_array(obj) or (not _on_gpu() and _is_backend_device_array(obj))


def as_cuda_array(obj, sync=True):
    """numba.cuda's view of another library's CUDA array; off the GPU, the backend's own only.

    Parameters
    ----------
    obj : object
        An object with ``__cuda_array_interface__`` (off the GPU: a device array of the
        backend, returned as it is).
    sync : bool, optional
        As in numba.cuda.

    Returns
    -------
    device array

    Raises
    ------
    UnsupportedFeatureError
        Off the GPU, for anything but the backend's own device arrays.

    Examples
    --------
    >>> import numpy as np, dualgpu
    >>> with dualgpu.using_backend("cpu"):
    ...     d = dualgpu.cuda.to_device(np.ones(2))
    ...     print(dualgpu.cuda.as_cuda_array(d) is d)
    True
    """
    if _on_gpu():
        return _cuda.as_cuda_array(obj, sync=sync)
    if _is_backend_device_array(obj):
        return obj
    raise refusal("as_cuda_array", f"views GPU memory of another library (got "
                  f"{type(obj).__name__})", "pass a numpy array (or cuda.to_device(array)).")


def from_cuda_array_interface(desc, owner=None, sync=True):
    """numba.cuda's array from a ``__cuda_array_interface__`` dict (GPU backend only).

    Parameters
    ----------
    desc : dict
        The interface dictionary.
    owner, sync : optional
        As in numba.cuda.

    Returns
    -------
    numba.cuda device array

    Raises
    ------
    UnsupportedFeatureError
        Off the GPU (there is no device pointer to view).

    Examples
    --------
    >>> import dualgpu
    >>> with dualgpu.using_backend("cpu"):
    ...     dualgpu.cuda.from_cuda_array_interface({})
    Traceback (most recent call last):
    ...
    dualgpu.errors.UnsupportedFeatureError: cuda.from_cuda_array_interface views GPU memory ...
    """
    if _on_gpu():
        return _cuda.from_cuda_array_interface(desc, owner=owner, sync=sync)
    raise refusal("from_cuda_array_interface", "views GPU memory by its device pointer",
                  "pass a numpy array (or cuda.to_device(array)).")


def open_ipc_array(handle, shape, dtype, strides=None, offset=0):
    """numba.cuda's array from another process's CUDA IPC handle (GPU backend only).

    Parameters
    ----------
    handle, shape, dtype, strides, offset
        As in numba.cuda.

    Returns
    -------
    context manager
        numba.cuda's, yielding the device array.

    Raises
    ------
    UnsupportedFeatureError
        Off the GPU (no GPU memory to share).

    Examples
    --------
    >>> import dualgpu
    >>> with dualgpu.using_backend("cpu"):
    ...     dualgpu.cuda.open_ipc_array(None, 3, "float64")
    Traceback (most recent call last):
    ...
    dualgpu.errors.UnsupportedFeatureError: cuda.open_ipc_array opens GPU memory ...
    """
    if _on_gpu():
        return _cuda.open_ipc_array(handle, shape, dtype, strides=strides, offset=offset)
    raise refusal("open_ipc_array", "opens GPU memory shared by another process",
                  "share host arrays (numpy, multiprocessing.shared_memory) instead.")


# -- compiling ---------------------------------------------------------------------------
def _needs_cc(name, numba_function):
    @functools.wraps(numba_function)
    def compile_for(*args, **kwargs):
        if kwargs.get("cc") is None and not _on_gpu():
            raise refusal(name, "without cc= compiles for the current GPU",
                          f"pass the target, e.g. cuda.{name}(..., cc=(9, 0)).")
        return numba_function(*args, **kwargs)

    return compile_for


compile = _needs_cc("compile", _cuda.compile)  # noqa: A001  numba.cuda's name
compile_ptx = _needs_cc("compile_ptx", _cuda.compile_ptx)
compile_all = _needs_cc("compile_all", _cuda.compile_all)


def compile_for_current_device(*args, **kwargs):
    """numba.cuda's ``compile`` for the current GPU (GPU backend only).

    Parameters
    ----------
    *args, **kwargs
        As in numba.cuda.

    Returns
    -------
    tuple
        numba.cuda's answer (the code and the return type).

    Raises
    ------
    UnsupportedFeatureError
        Off the GPU; name the target instead: ``cuda.compile(..., cc=(9, 0))``.

    Examples
    --------
    >>> import dualgpu
    >>> with dualgpu.using_backend("cpu"):
    ...     dualgpu.cuda.compile_for_current_device(abs, "float64(float64)")
    Traceback (most recent call last):
    ...
    dualgpu.errors.UnsupportedFeatureError: cuda.compile_for_current_device compiles ...
    """
    if _on_gpu():
        return _cuda.compile_for_current_device(*args, **kwargs)
    raise refusal("compile_for_current_device", "compiles for the current GPU",
                  "name the target: cuda.compile(..., cc=(9, 0)).")


def compile_ptx_for_current_device(*args, **kwargs):
    """numba.cuda's ``compile_ptx`` for the current GPU (GPU backend only).

    Parameters
    ----------
    *args, **kwargs
        As in numba.cuda.

    Returns
    -------
    tuple
        numba.cuda's answer (the PTX and the return type).

    Raises
    ------
    UnsupportedFeatureError
        Off the GPU; name the target instead: ``cuda.compile_ptx(..., cc=(9, 0))``.

    Examples
    --------
    >>> import dualgpu
    >>> with dualgpu.using_backend("cpu"):
    ...     dualgpu.cuda.compile_ptx_for_current_device(abs, "float64(float64)")
    Traceback (most recent call last):
    ...
    dualgpu.errors.UnsupportedFeatureError: cuda.compile_ptx_for_current_device compiles ...
    """
    if _on_gpu():
        return _cuda.compile_ptx_for_current_device(*args, **kwargs)
    raise refusal("compile_ptx_for_current_device", "compiles for the current GPU",
                  "name the target: cuda.compile_ptx(..., cc=(9, 0)).")


# -- foreign device code -----------------------------------------------------------------
def declare_device(name, sig, link=None, use_cooperative=False, abi="numba"):
    """numba.cuda's declaration of a device function written in CUDA C/C++ or PTX.

    On the GPU backend kernels call numba.cuda's declaration. Elsewhere the foreign code
    cannot run, so a kernel that calls it raises, naming the function, the line and the fix
    (write it in Python as a device function), when it is launched.

    Parameters
    ----------
    name : str
        The function's name in the linked code.
    sig : str or signature
        Its numba signature.
    link, use_cooperative, abi : optional
        As in numba.cuda.

    Returns
    -------
    ForeignDeviceFunction

    Examples
    --------
    >>> import dualgpu
    >>> dualgpu.cuda.declare_device("scale", "float64(float64)")
    <dualgpu foreign device function scale>
    """
    declared = _cuda.declare_device(name, sig, link=link, use_cooperative=use_cooperative,
                                    abi=abi)
    return ForeignDeviceFunction(name, declared)


class ForeignDeviceFunction:
    """A ``cuda.declare_device`` function: numba.cuda's on the GPU, refused elsewhere."""

    __dualgpu_foreign__ = True

    def __init__(self, name, declared):
        self.name = name
        self.declared = declared

    def refusal(self):
        """The error for a call of this function off the GPU."""
        return refusal(f"declare_device({self.name!r})", "is CUDA C/C++ or PTX code linked "
                       "into the kernel", f"write {self.name} in Python as a "
                       "@cuda.jit(device=True) function to run it on cpu and cudasim.")

    def __call__(self, *args):
        raise self.refusal()

    def __repr__(self):
        return f"<dualgpu foreign device function {self.name}>"
