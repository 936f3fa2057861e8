"""FFTs of host duals: ``numpy.fft`` and ``scipy.fft`` on DualArrays.

Every discrete Fourier (and cosine, sine) transform is linear over the reals, so its
derivative is the transform itself: the answer's partials are the transform of the
partials. The values and all lanes' partials (lane-major, shape ``(N, *S)``) go through the
library's own transform, the partials in one batched call along the same axes (an axis
counted from the end names the same axis of the values and of the partials; one counted
from the start moves by one, past the lane axis). ``n=``, ``s=``, ``axis=``, ``axes=``,
``norm=`` and ``type=`` apply to both.

* ``numpy.fft``: ``fft``, ``ifft``, ``rfft``, ``irfft``, ``hfft``, ``ihfft``, ``fft2``,
  ``ifft2``, ``rfft2``, ``irfft2``, ``fftn``, ``ifftn``, ``rfftn``, ``irfftn``, ``fftshift``,
  ``ifftshift`` (through ``__array_function__``);
* ``scipy.fft``: the same transforms and ``hfft2``/``hfftn``, ``dct``, ``idct``, ``dst``,
  ``idst``, ``dctn``, ``idctn``, ``dstn``, ``idstn``, through a uarray backend that
  dualgpu sets as scipy.fft's global backend when scipy.fft is imported (before or after
  dualgpu; dualgpu itself does not import it): it handles calls with a dual and hands every
  other call to SciPy's own backend unchanged. A backend you set with
  ``scipy.fft.set_backend`` inside a ``with`` block is tried first (and gets the dual).
  ``overwrite_x=True`` is ignored for duals (their arrays are never overwritten);
  ``workers=`` is honoured.

DualArrays in device memory are transformed on the host (numba.cuda has no FFT): the
answer is a host DualArray, as for every host numpy operation.

Examples
--------
>>> import numpy as np, dualgpu
>>> u = dualgpu.dual_array([1.0, 2.0, 0.0, -1.0], np.eye(4))
>>> power = np.abs(np.fft.rfft(u)) ** 2          # a real DualArray
>>> bool(np.allclose(power.partials[:, 0], 2 * np.sum(u.values)))  # d|U0|^2/du_k = 2 U0
True
"""
import importlib.abc
import importlib.util
import inspect
import sys

import numpy as np

from dualgpu.errors import DualgpuError
from dualgpu.host.operands import is_dual, registrar, split, wrap

__all__ = ["FUNCTIONS", "NUMPY_TRANSFORMS", "SCIPY_TRANSFORMS", "transform", "DualBackend"]

#: numpy function -> implementation for duals.
FUNCTIONS = {}
implements = registrar(FUNCTIONS)

NUMPY_TRANSFORMS = (
    "fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2",
    "fftn", "ifftn", "rfftn", "irfftn", "fftshift", "ifftshift",
)
SCIPY_TRANSFORMS = (
    "fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2",
    "hfft2", "ihfft2", "fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn",
    "dct", "idct", "dst", "idst", "dctn", "idctn", "dstn", "idstn",
)


def _from_end(axis, ndim, fname):
    """``axis`` counted from the end (-1 the last), so it names the same axis of the partials."""
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or not (
            -ndim <= axis < ndim):
        raise np.exceptions.AxisError(
            f"{fname}: axis {axis!r} is out of bounds for an array of dimension {ndim}")
    return int(axis) % ndim - ndim


def transform(function, fname, parameters, arguments):
    """Apply the linear transform ``function`` to a dual's values and partials.

    Parameters
    ----------
    function : callable
        The transform on plain arrays, called with keywords.
    fname : str
        Its name, for messages.
    parameters : inspect.Signature
        Its signature: the first parameter is the array.
    arguments : inspect.BoundArguments
        The call (defaults applied).
    """
    kwargs = dict(arguments.arguments)
    name = next(iter(parameters.parameters))
    if kwargs.get("out") is not None:
        raise DualgpuError(
            f"{fname}(..., out=...) on a dual is not supported: the answer's partials need "
            "their own array. Fix: leave out= out and assign the result.")
    kwargs.pop("out", None)
    if "overwrite_x" in kwargs:
        kwargs["overwrite_x"] = False  # never overwrite the caller's arrays
    values, partials = split(kwargs[name], f"{fname} operand")
    values = np.asarray(values)
    ndim = values.ndim
    if partials is None:
        return wrap(function(**{**kwargs, name: values}), None)
    if ndim == 0:
        raise DualgpuError(f"{fname} of a 0-d dual: expected an array (a DualArray).")
    lanes = dict(kwargs)
    lanes[name] = partials
    if "axis" in kwargs:
        lanes["axis"] = _from_end(kwargs["axis"], ndim, fname)
    if "axes" in kwargs:
        axes = kwargs["axes"]
        if axes is None:
            shape = kwargs.get("s")
            count = ndim if shape is None else len(np.atleast_1d(shape))
            axes = tuple(range(-count, 0))
        elif isinstance(axes, (int, np.integer)):
            axes = _from_end(axes, ndim, fname)
        else:
            axes = tuple(_from_end(a, ndim, fname) for a in axes)
        lanes["axes"] = axes
    answer = function(**{**kwargs, name: values})
    return wrap(answer, np.asarray(function(**lanes)))


def _numpy(function):
    signature = inspect.signature(function)
    fname = f"numpy.fft.{function.__name__}"

    def implementation(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as error:
            raise TypeError(f"{fname}: {error}") from None
        bound.apply_defaults()
        return transform(function, fname, signature, bound)

    implementation.__name__ = function.__name__
    implementation.__doc__ = f"``{fname}`` of a dual: the transform of values and partials."
    return implementation


for _name in NUMPY_TRANSFORMS:
    _function = getattr(np.fft, _name)
    implements(_function)(_numpy(_function))


# ---------------------------------------------------------------------------
# scipy.fft: a uarray backend, installed when scipy.fft is imported (importing it costs time)
# ---------------------------------------------------------------------------
def _holds_dual(args, kwargs):
    return any(is_dual(a) for a in args) or any(is_dual(a) for a in kwargs.values())


class DualBackend:
    """scipy.fft's global backend under dualgpu: duals here, everything else to SciPy.

    A call holding a Dual or DualArray is differentiated (:func:`transform` with SciPy's
    own transform); any other call goes to SciPy's backend, unchanged.
    """

    __ua_domain__ = "numpy.scipy.fft"
    scipy_backend = None  # SciPy's own backend, set by install_scipy_backend
    signatures = {}

    @classmethod
    def __ua_function__(cls, method, args, kwargs):
        name = method.__name__
        if not _holds_dual(args, kwargs):
            return cls.scipy_backend.__ua_function__(method, args, kwargs)
        signature = cls.signatures.get(name)
        fname = f"scipy.fft.{name}"
        if signature is None:
            raise DualgpuError(
                f"{fname} of a dual is not supported (the supported transforms are "
                f"{', '.join(SCIPY_TRANSFORMS)}). Fix: call it on the values (u.values) if no "
                "derivative is wanted.")
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()

        def function(**arguments):
            return cls.scipy_backend.__ua_function__(method, (), arguments)

        return transform(function, fname, signature, bound)


def install_scipy_backend(module):
    """Make :class:`DualBackend` scipy.fft's global backend (``module`` is scipy.fft)."""
    from scipy.fft._backend import _ScipyBackend

    DualBackend.scipy_backend = _ScipyBackend
    DualBackend.signatures = {name: inspect.signature(getattr(module, name))
                              for name in SCIPY_TRANSFORMS}
    module.set_global_backend(DualBackend)


class _ScipyFFTHook(importlib.abc.MetaPathFinder):
    """Installs the backend right after the first ``import scipy.fft`` (by anyone)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "scipy.fft":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        execute = loader.exec_module

        def exec_module(module):
            execute(module)
            install_scipy_backend(module)

        loader.exec_module = exec_module
        return spec


if "scipy.fft" in sys.modules:
    install_scipy_backend(sys.modules["scipy.fft"])
else:
    sys.meta_path.insert(0, _ScipyFFTHook())
