"""Number casts of duals in compiled code (``@njit``, the cpu backend and CUDA alike).

``float64(d)``, ``float32(d)``, ``numba.float32(d)``, ``np.float32(d)`` and
``cuda.float32(d)`` on a dual ``d`` give a dual of that dtype: the value and every
lane are cast, so float32 simulations that cast their inputs keep their partials.
A cast to an integer type (``int32(d)``, ``np.int64(d)``) acts on the value, as
``int(d)`` does (its derivative is zero almost everywhere). ``float(d)`` still
refuses: it is Python's conversion to a plain float.

numba types a call of a number class (``types.NumberClass``) through the
``__call__`` attribute of that class. numba looks for attribute templates under
the exact type first and only falls back to the templates of its class when there
are none, so a template registered under ``NumberClass(float64)`` (one per number
type) takes precedence over numba's own; for every argument that is not a dual it
hands the call to numba's own template. The CPU and CUDA typing contexts keep
separate registries, so each template is registered in both. Lowering is numba's
(a number-class call lowers to a cast): the dual-to-dual cast is
:mod:`dualgpu.compiled.types`' and the dual-to-integer cast is below.

Examples
--------
>>> import numpy as np
>>> from numba import njit, float32
>>> from dualgpu import Dual
>>> @njit
... def to_single(x):
...     return float32(x) * np.float32(2.0)
>>> d = to_single(Dual(1.5, [1.0, -2.0]))
>>> d.dtype.name, float(d.value), d.partials.tolist()
('float32', 3.0, [2.0, -4.0])
"""
from numba import types
from numba.core.extending import lower_cast
from numba.core.typing import signature

from dualgpu.compiled.types import DualType, dual_type
from dualgpu.core.traced_branch import is_global_tracer, refuse_traced_branch

__all__ = ["CAST_TYPES", "cast_result"]

#: The number types whose calls cast duals.
CAST_TYPES = (
    types.float32, types.float64,
    types.int8, types.int16, types.int32, types.int64,
    types.uint8, types.uint16, types.uint32, types.uint64,
)


def cast_result(target, dual):
    """The type of ``target(dual)``: a dual of ``target`` for floats, ``target`` for integers."""
    if isinstance(target, types.Float):
        return dual_type(target, dual.n, dual.tracer, getattr(dual, "mode", None))
    return target


def _register(templates, builtin_attribute):
    """Register one ``__call__`` template per number type in one typing registry."""
    for target in CAST_TYPES:

        class DualCastAttribute(templates.AttributeTemplate):
            key = types.NumberClass(target)

            def resolve___call__(self, classty, _target=target):
                builtin = builtin_attribute(self.context).resolve___call__(classty)
                context = self.context

                def typer(val):
                    if isinstance(val, DualType):
                        return cast_result(_target, val)
                    sig = context.resolve_function_type(builtin, (val,), {})
                    return None if sig is None else sig.return_type

                return types.Function(templates.make_callable_template(key=_target, typer=typer))

        DualCastAttribute.__name__ = f"DualCast_{target}"
        templates.infer_getattr(DualCastAttribute)


def _register_all():
    from numba.core.typing import builtins as core_builtins
    from numba.core.typing import templates as core_templates

    _register(core_templates, core_builtins.NumberClassAttribute)
    from numba.core import config

    if config.ENABLE_CUDASIM:  # numba.cuda is the simulator: there is no CUDA typing
        return
    from numba.cuda.typing import builtins as cuda_builtins
    from numba.cuda.typing import templates as cuda_templates

    _register(cuda_templates, cuda_builtins.NumberClassAttribute)


_register_all()


@lower_cast(DualType, types.Integer)
def _dual_to_integer(context, builder, fromty, toty, val):
    from numba.core import cgutils

    if is_global_tracer(fromty):  # global sparsity: an integer made from a traced value
        def refuse(x):
            refuse_traced_branch(x.partials)
            return x.value

        val = context.compile_internal(builder, refuse, signature(fromty.dtype, fromty), (val,))
        return context.cast(builder, val, fromty.dtype, toty)
    dual = cgutils.create_struct_proxy(fromty)(context, builder, value=val)
    return context.cast(builder, dual.value, fromty.dtype, toty)
