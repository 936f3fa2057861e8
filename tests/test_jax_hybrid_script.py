"""scripts/jax_hybrid_heat.py (the to_jax worked example) runs, checks its gradient against
finite differences, lowers its loss and writes its figure."""
import pytest

jax = pytest.importorskip("jax")

import dualgpu  # noqa: E402
from scripts import jax_hybrid_heat  # noqa: E402

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
