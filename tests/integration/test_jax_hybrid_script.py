"""scripts/jax_hybrid_heat.py (the to_jax worked example) runs, checks its gradient against
finite differences, lowers its loss and writes its figure."""
import pytest

jax = pytest.importorskip("jax")

import dualgpu  # noqa: E402
from scripts import jax_hybrid_heat  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.peers]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def restore_global_state():
    """The script selects a backend and turns JAX's x64 flag on: both are global."""
    backend, x64 = dualgpu.backend(), jax.config.jax_enable_x64
    yield
    dualgpu.set_backend(backend)
    jax.config.update("jax_enable_x64", x64)


def test_quick_run(tmp_path, restore_global_state):
    result = jax_hybrid_heat.main(["--quick", "--backend", "cpu", "--out", str(tmp_path),
                                   "--no-progress"])
    assert result["gradient_check"] < 1e-6  # jax.grad through to_jax vs central differences
    assert result["losses"][-1] < 0.7 * result["losses"][0]
    assert 100 < result["n_params"] <= 400
    (path,) = result["figures"]
    assert path.read_bytes()[:8] == PNG_SIGNATURE and path.stat().st_size > 20_000


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_variable_diffusivity_kernel_compiles_to_ptx(offline_ptx, dtype):
    """The example's kernel (simulations.heat1d_variable.step) on the GPU path: dual state and
    dual diffusivity field, 4 lanes, compiled offline to PTX."""
    from numba import cuda as numba_cuda, types

    from dualgpu.backends.gpu import kernel as gpu
    from dualgpu.compiled.arrays import dual_array_type
    from dualgpu.compiled.types import dual_type
    from simulations import heat1d_variable

    kernel = heat1d_variable.step
    dt = getattr(types, dtype)
    arr = dual_array_type(dt, 1, 4)
    ptx, _ = numba_cuda.compile_ptx(
        gpu.prepare_function(kernel.py_func, 6),
        (arr, arr, arr, dt, dual_type(dt, 4), dual_type(dt, 4)), cc=offline_ptx)
    assert ".entry" in ptx
