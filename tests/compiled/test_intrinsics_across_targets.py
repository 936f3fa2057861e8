"""dualgpu's intrinsics typed by the CPU, then CUDA, then the CPU again, in one process.

numba 0.66 remembered an intrinsic's codegen per argument types alone: the CUDA compile of a
call replaced the CPU's codegen, and the next ``@njit`` function typing the same call was
handed a codegen the CPU had never registered (``NotImplementedError: No definition for
lowering <_element_get.<locals>.codegen>``: a float32 Jacobian on the cpu backend failed after
the PTX tests had run in the same pytest worker). dualgpu's intrinsic templates keep one memory
per typing context (:mod:`dualgpu.compiled.intrinsics`).

Each step compiles a new function, so the order holds whatever ran before in the process: after
a CPU-only history the CUDA step replaced the CPU's codegen, after a CUDA-only history the first
CPU step replaced CUDA's (and the CUDA step failed). The lane count (5) is one no other test
uses, so no earlier test has typed these calls at all.
"""
import math

import numpy as np
import pytest
from numba import cuda, njit, types
from numba.core.typing.templates import _IntrinsicTemplate, builtin_registry

import dualgpu
from dualgpu.compiled.arrays import dual_array_type
from dualgpu.compiled.intrinsics import ContextKeyedIntrinsicTemplate

pytestmark = pytest.mark.compile

LANES = 5
DTYPES = {"float32": (types.float32, np.float32, 1e-5),
          "float64": (types.float64, np.float64, 1e-13)}


def _cpu_step(u, i):
    # a new function each call: numba types it anew. An element read (a template of
    # register_lowered), a rule on it (another) and a view (make_dual_array, an @intrinsic)
    def step(u, i):
        return math.sin(u[i]) + u[1:][i - 1]

    return njit(step)(u, i)


def _ptx_step(array_type):
    def kernel(u, out):
        i = cuda.grid(1)
        if 0 < i < u.shape[0]:
            out[i] = math.sin(u[i]) + u[1:][i - 1]

    ptx, _ = cuda.compile_ptx(kernel, (array_type, array_type), cc=(9, 0))
    return ptx


def _check(dual, u, i, np_dtype, tol):
    """value and lanes of sin(u_i) + u_i against the analytic ones, in the array's dtype."""
    x = u.values[i].astype(np.float64)
    assert np.asarray(dual.value).dtype == np_dtype
    assert float(dual.value) == pytest.approx(math.sin(x) + x, rel=tol, abs=tol)
    np.testing.assert_allclose(np.asarray(dual.partials, dtype=np.float64),
                               (math.cos(x) + 1.0) * u.partials[:, i].astype(np.float64),
                               rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_cpu_then_cuda_then_cpu(offline_ptx, dtype):
    numba_dtype, np_dtype, tol = DTYPES[dtype]
    rng = np.random.default_rng(39)
    u = dualgpu.DualArray(rng.uniform(-1, 1, 6).astype(np_dtype),
                          rng.uniform(-1, 1, (LANES, 6)).astype(np_dtype))
    _check(_cpu_step(u, 2), u, 2, np_dtype, tol)
    assert ".entry" in _ptx_step(dual_array_type(numba_dtype, 1, LANES))
    _check(_cpu_step(u, 3), u, 3, np_dtype, tol)


def _dualgpu_intrinsic_templates():
    registered = list(builtin_registry.functions) + [
        template for _, fnty in builtin_registry.globals
        for template in getattr(fnty, "templates", ())]
    found = set()
    for template in registered:
        # the MRO, not issubclass: numba's templates are ABCs, and an ABC's issubclass walks
        # every subclass ever made (thousands late in a test process: seconds, not a millisecond)
        if not (isinstance(template, type) and _IntrinsicTemplate in template.__mro__):
            continue
        definition = template._definition_func
        module = getattr(definition, "__module__", None) or ""
        if module.split(".")[0] == "dualgpu":
            found.add(template)
    return found


def test_every_dualgpu_intrinsic_template_is_context_keyed():
    """Every intrinsic template dualgpu registers (its @intrinsic functions and the templates
    of register_lowered) keeps one memory per typing context."""
    import dualgpu.backends.cpu.intrinsics  # noqa: F401  (the cpu backend's intrinsics)
    import dualgpu.backends.gpu.shared  # noqa: F401  (the GPU backend's)

    templates = _dualgpu_intrinsic_templates()
    assert len(templates) > 20  # the rules, the array element access, make_dual, ...
    plain = sorted(t.__name__ for t in templates
                   if ContextKeyedIntrinsicTemplate not in t.__mro__)
    assert plain == [], ("these intrinsics remember their codegen per argument types alone: "
                         "use dualgpu.compiled.intrinsics.intrinsic")
