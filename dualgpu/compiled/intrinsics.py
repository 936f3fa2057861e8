"""numba's ``@intrinsic``, with the codegen of each call remembered per typing context.

An intrinsic's typing template remembers the codegen it returned for each call, and numba's
lowering asks it for that codegen (``get_impl_key``). numba 0.66 keys that memory by the
argument types alone, while the CPU and the CUDA typing contexts each type the call and each
get a codegen of their own, registered in their own target's lowering registry only: after a
CUDA compile, an ``@njit`` function typing the same call again was handed the CUDA codegen
and failed with ``NotImplementedError: No definition for lowering <...codegen>`` (a
``DualArray`` element read on the cpu backend after a PTX compile of the same array type).
numba 0.67 keys it by the typing context too.

Every intrinsic template of dualgpu is a :class:`ContextKeyedIntrinsicTemplate`: its instances
read and write a memory of their own typing context, whatever key numba uses within it. Use
:func:`intrinsic` (a drop-in for ``numba.extending.intrinsic``) for dualgpu's intrinsics, and
:func:`intrinsic_template` where a template is made by hand
(:func:`dualgpu.compiled.lowering.register_lowered`).
"""
from numba.core import types
from numba.core.extending import _Intrinsic
from numba.core.typing.templates import (
    _IntrinsicTemplate, infer, infer_global, make_intrinsic_template)

__all__ = ["ContextKeyedIntrinsicTemplate", "intrinsic", "intrinsic_template"]


class ContextKeyedIntrinsicTemplate(_IntrinsicTemplate):
    """An intrinsic's template whose remembered codegens are kept per typing context.

    numba instantiates a template with the typing context of each call it types; the instance
    gets that context's own dictionary as ``_overload_cache`` (numba 0.66 keys it by argument
    types, numba 0.67 and later by context and argument types: correct either way).
    """

    #: one ``_overload_cache`` per typing context; each template class gets its own
    _overload_caches = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._overload_caches = {}

    def __init__(self, context):
        super().__init__(context)
        self._overload_cache = type(self)._overload_caches.setdefault(context, {})


def intrinsic_template(handle, definition, name, **options):
    """``make_intrinsic_template(handle, definition, name, **options)`` as a
    :class:`ContextKeyedIntrinsicTemplate` subclass."""
    base = make_intrinsic_template(handle, definition, name, **options)
    return type(base)(base.__name__, (ContextKeyedIntrinsicTemplate, base), {})


class _ContextKeyedIntrinsic(_Intrinsic):
    """numba's intrinsic object, registered with a :class:`ContextKeyedIntrinsicTemplate`."""

    def _register(self):
        template = intrinsic_template(self, self._defn, self._name,
                                      prefer_literal=self._prefer_literal,
                                      kwargs=self._ctor_kwargs)
        infer(template)
        infer_global(self, types.Function(template))


def intrinsic(*args, **kwargs):
    """``numba.extending.intrinsic`` (same arguments: ``@intrinsic`` or
    ``@intrinsic(prefer_literal=True)``), with a :class:`ContextKeyedIntrinsicTemplate`."""
    def decorate(func):
        llc = _ContextKeyedIntrinsic(getattr(func, "__name__", str(func)), func, **kwargs)
        llc._register()
        return llc

    if not kwargs:
        return decorate(*args)
    return decorate
