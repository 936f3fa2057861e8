"""Every dual kernel of the simulations assembles to SASS for sm_90 (ptxas, no GPU needed).

``benchmarks/sass.py`` records each simulation kernel's argument types from a small cpu run,
compiles it as the GPU backend prepares it to PTX and assembles it with ``ptxas -v`` plain and
at 8 and 16 lanes (the N-body kernel at 1 too). Stencils must not spill at 8 lanes. The
block-level kernels of tests/fixtures/block_kernels.py are assembled too, plain and dual (dual
shared tiles, dual shuffles).
"""
import functools
import os
import sys
from unittest import mock

import pytest
from numba import types

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks import sass  # noqa: E402

pytestmark = [
    pytest.mark.compile,
    pytest.mark.skipif(
        sass.find_ptxas() is None,
        reason="ptxas not found: install the test extra (pip install 'nvidia-cuda-nvcc>=13,<14')",
    ),
]

SIMULATIONS = ["heat1d", "heat2d", "gray_scott", "wave2d", "mass_spring", "nbody", "pendulums"]
STENCILS = {"heat1d", "heat2d", "gray_scott", "wave2d"}


@pytest.fixture(scope="module")
def kernels():
    """``sass.kernel_types`` of every simulation, its launches recorded but not run.

    The argument types are all SASS needs: the recorder wraps ``CpuKernel.launch``, here a
    no-op, so the cpu backend compiles nothing (the simulations' cpu runs are tested in
    tests/integration).
    """
    from dualgpu.backends.cpu.kernel import CpuKernel

    with mock.patch.object(CpuKernel, "launch", lambda self, *args, **kwargs: None):
        return {name: sass.kernel_types(name) for name in SIMULATIONS}


@pytest.fixture(scope="module")
def sass_of(kernels):
    """``sass_of(simulation, kernel, lanes)``: ptxas's numbers, each kernel assembled once."""

    @functools.lru_cache(maxsize=None)
    def assembled(simulation, kernel, lanes):
        py_func, plain, dual = kernels[simulation][kernel]
        return sass.kernel_sass(py_func, plain if lanes == 0 else dual, lanes)

    return assembled


#: plain, the default tile and a wide one (one lane is assembled for the N-body kernel below,
#: and every rule at one lane in tests/compiled/test_rules_ptx.py)
LANES = [0, 8, 16]


@pytest.mark.parametrize("lanes", LANES)
@pytest.mark.parametrize("simulation", SIMULATIONS)
def test_simulation_kernels_assemble(kernels, sass_of, simulation, lanes):
    for kernel, (py_func, plain, dual) in kernels[simulation].items():
        assert dual is not None, f"{simulation}.{kernel} was not launched with duals"
        entry = sass_of(simulation, kernel, lanes)
        assert 0 < entry["registers"] <= 255, (simulation, kernel, lanes, entry)
        if simulation in STENCILS and lanes <= 8:
            assert entry["spill_stores"] == 0 and entry["spill_loads"] == 0, (
                f"{simulation}.{kernel} spills at {lanes} lanes: {entry}")


def test_more_lanes_need_more_registers(sass_of):
    registers = [sass_of("nbody", "accelerations", n)["registers"] for n in (0, 1, 8)]
    assert registers == sorted(registers) and registers[0] < registers[2]


def test_ptxas_errors_are_reported():
    with pytest.raises(RuntimeError, match="ptxas failed"):
        sass.assemble(".version 8.0\n.target sm_90\nnot ptx at all\n")


# --- block-level kernels (shared memory, syncthreads, warp shuffles) --------------------------
def _block_signatures(lanes):
    from dualgpu.compiled.arrays import dual_array_type

    f64 = types.float64

    def a(ndim, dual=True):
        return dual_array_type(f64, ndim, lanes) if lanes and dual else types.Array(f64, ndim, "C")

    return {
        "nbody_accel_tiled": (a(2), a(1), a(2), f64),
        "kinetic_energy_partial": (a(2), a(1), a(1)),
        "heat2d_halo_step": (a(2), a(2), f64),
        "block_jacobi_smooth": (a(1), a(1), types.int64, f64),
        "neighbour_average_tiled": (a(1), a(1)),
        "warp_sum_of_squares": (a(1), a(1)),
    }


@pytest.mark.parametrize("lanes", LANES)
@pytest.mark.parametrize("name", list(_block_signatures(0)))
def test_block_kernels_assemble(name, lanes):
    import numba.cuda

    import block_kernels
    from dualgpu.backends.gpu import kernel as gpu

    kernel = getattr(block_kernels, name)

    def compile_at(n):
        with sass.offline_device():
            return numba.cuda.compile_ptx(gpu.prepare_function(kernel.py_func, n),
                                          _block_signatures(n)[name], cc=sass.CC)[0]

    ptx = compile_at(lanes)
    (entry,) = sass.assemble(ptx).values()
    assert 0 < entry["registers"] <= 255
