"""The ``.lanes``, ``.shape``, ``.size`` and ``.ndim`` attributes of compiled duals and dual
arrays, typed and lowered for every target at once.

numba's ``overload_attribute`` registers its lowering only in the registry of the target
that first resolves the attribute: a dual kernel compiled for CUDA first left ``u.shape``
without a lowering on the cpu backend for the rest of the process. These use numba's core
registries (``infer_getattr`` and ``lower_getattr``, which CUDA borrows), as
``make_attribute_wrapper`` does, and compile the array attributes with
``context.compile_internal`` in whichever target is lowering.
"""
from numba import types
from numba.core.extending import infer_getattr, lower_getattr
from numba.core.typing import signature
from numba.core.typing.templates import AttributeTemplate

__all__ = ["lanes_attribute", "array_attributes"]

#: Attributes a dual array takes from its values array: name -> (result type, implementation).
VALUES_ATTRIBUTES = {
    "shape": (lambda typ: types.UniTuple(types.intp, typ.ndim), lambda a: a.values.shape),
    "size": (lambda typ: types.intp, lambda a: a.values.size),
    "ndim": (lambda typ: types.intp, lambda a: a.values.ndim),
}


def lanes_attribute(type_class):
    """Give ``type_class`` (a numba type with a lane count ``n``) the attribute ``.lanes``,
    typed as a literal (code that sizes scratch by it needs a compile-time constant)."""
    _typed(type_class, {"lanes": lambda typ: types.literal(typ.n)})

    @lower_getattr(type_class, "lanes")
    def lanes(context, builder, typ, value):
        return context.get_constant(types.literal(typ.n).literal_type, typ.n)


def array_attributes(type_class):
    """Give ``type_class`` (a dual array type with a ``values`` member and a lane count ``n``)
    ``.lanes`` and its values' ``.shape``, ``.size`` and ``.ndim``."""
    lanes_attribute(type_class)
    _typed(type_class, {name: result for name, (result, _) in VALUES_ATTRIBUTES.items()})
    for name, (result, implementation) in VALUES_ATTRIBUTES.items():
        lower_getattr(type_class, name)(_through_values(result, implementation))


def _typed(type_class, results):
    @infer_getattr
    class Attributes(AttributeTemplate):
        key = type_class

        def generic_resolve(self, typ, attr):
            if attr in results:
                return results[attr](typ)

    return Attributes


def _through_values(result, implementation):
    def lower(context, builder, typ, value):
        sig = signature(result(typ), typ)
        return context.compile_internal(builder, implementation, sig, (value,))

    return lower
