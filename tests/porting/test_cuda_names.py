"""Every public name of ``dualgpu.cuda`` on the cpu and cudasim backends: none reaches the driver.

Off the GPU, numba.cuda's host functions ask the CUDA driver and fail with
``CudaSupportError`` (``@cuda.reduce`` did, through the module's forwarding). Here the driver is
replaced by a trap, and every host name of ``dualgpu.cuda`` is called: it must answer, or raise
a dualgpu error that names it. Every other public name (kernel-side, types, numba internals) is
only looked up. A name that numba.cuda adds later is in no table of
:mod:`dualgpu.porting.numba_names`, and the first test fails until it is classified.
"""
import contextlib
import io
import re

import numpy as np
import pytest
from numba import cuda as numba_cuda
from numba.cuda.cudadrv import driver as numba_driver

import dualgpu
from dualgpu import cuda
from dualgpu.errors import DualgpuBaseError
from dualgpu.porting import numba_names

BACKENDS = ["cpu", "cudasim"]


class DriverReached(Exception):
    """numba.cuda asked the CUDA driver for something."""


@pytest.fixture
def driver_trap(monkeypatch):
    """Any use of numba.cuda's driver raises DriverReached (also on a machine with a GPU)."""
    def trap(self, *args, **kwargs):
        raise DriverReached(f"the CUDA driver was reached ({args[:1]})")

    monkeypatch.setattr(numba_driver.Driver, "__getattr__", trap)
    monkeypatch.setattr(numba_driver.Driver, "ensure_initialized", trap)
    monkeypatch.setattr(numba_driver.Driver, "is_available", property(trap))


def _public(module):
    return {name for name in dir(module) if not name.startswith("_")}


def test_every_public_name_is_classified():
    import numba.cuda.fp16  # noqa: F401  submodules other code imports become attributes
    names = _public(numba_cuda) | _public(cuda) | set(cuda.__all__)
    names -= {"annotations"}
    unknown = sorted(n for n in names if n not in vars(cuda)
                     and numba_names.classify(n, getattr(numba_cuda, n, None)) is None)
    assert not unknown, (
        f"numba.cuda names in no table of dualgpu.porting.numba_names: {unknown}. Give each "
        "an off-GPU version in dualgpu.porting when it asks for the CUDA driver, then list it."
    )


def test_host_names_are_dualgpus_own():
    """The host API is defined by dualgpu.cuda, not forwarded (the launch hints excepted)."""
    forwarded = sorted(n for n in numba_names.HOST - {"In", "Out", "InOut"}
                       if n not in vars(cuda))
    assert not forwarded


@cuda.jit
def _add_one(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] += 1.0


_external = cuda.declare_device("external_scale", "float64(float64)")


@cuda.jit
def _calls_external(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] = _external(a[i])


def _launch(hint):
    a = np.zeros(4)
    _add_one[1, 4](hint(a))
    assert a.tolist() == [1.0] * 4  # written back as numba.cuda does for In/InOut hints


def _with(manager):
    with manager:
        pass


def _events():
    start, stop = cuda.event(), cuda.event()
    start.record()
    stop.record()
    stop.synchronize()
    assert cuda.event_elapsed_time(start, stop) >= 0.0


def _detect():
    with contextlib.redirect_stdout(io.StringIO()):
        assert cuda.detect()


def _square(x):
    return x * x


def _add(a, b):
    return a + b


def _vectorize():
    square = cuda.vectorize(["float64(float64)"])(_square)
    assert square(np.arange(3.0)).tolist() == [0.0, 1.0, 4.0]


def _guvectorize():
    @cuda.guvectorize(["void(float64[:], float64[:])"], "(n)->(n)")
    def copy(x, out):
        for i in range(x.shape[0]):
            out[i] = x[i]

    out = np.zeros(3)
    copy(np.ones(3), out)


def _reduce(name):
    reducer = getattr(cuda, name)(_add)
    assert reducer(np.arange(4.0)) == 6.0


#: a call of every host name; each must answer, or raise a dualgpu error naming the name
CALLS = {
    "to_device": lambda: cuda.to_device(np.ones(3)),
    "device_array": lambda: cuda.device_array(3),
    "device_array_like": lambda: cuda.device_array_like(np.ones(3)),
    "pinned_array": lambda: cuda.pinned_array(3),
    "pinned_array_like": lambda: cuda.pinned_array_like(np.ones(3)),
    "mapped_array": lambda: cuda.mapped_array(3),
    "mapped_array_like": lambda: cuda.mapped_array_like(np.ones((2, 3))),
    "managed_array": lambda: cuda.managed_array(3),
    "pinned": lambda: _with(cuda.pinned(np.ones(3))),
    "mapped": lambda: _with(cuda.mapped(np.ones(3))),
    "defer_cleanup": lambda: _with(cuda.defer_cleanup()),
    "stream": lambda: cuda.stream().synchronize(),
    "default_stream": lambda: cuda.default_stream().synchronize(),
    "legacy_default_stream": lambda: cuda.legacy_default_stream().synchronize(),
    "per_thread_default_stream": lambda: cuda.per_thread_default_stream().synchronize(),
    "external_stream": lambda: cuda.external_stream(0),
    "synchronize": lambda: cuda.synchronize(),
    "event": _events,
    "event_elapsed_time": _events,
    "select_device": lambda: cuda.select_device(0),
    "get_current_device": lambda: cuda.get_current_device().compute_capability,
    "list_devices": lambda: cuda.list_devices(),
    "gpus": lambda: len(cuda.gpus),
    "current_context": lambda: cuda.current_context().get_memory_info(),
    "close": lambda: cuda.close(),
    "detect": _detect,
    "is_available": lambda: cuda.is_available(),
    "require_context": lambda: cuda.require_context(lambda: 1)(),
    "cuda_error": lambda: cuda.cuda_error(),
    "is_supported_version": lambda: cuda.is_supported_version(),
    "is_float16_supported": lambda: cuda.is_float16_supported(),
    "is_bfloat16_supported": lambda: cuda.is_bfloat16_supported(),
    "is_fp8_supported": lambda: cuda.is_fp8_supported(),
    "profile_start": lambda: cuda.profile_start(),
    "profile_stop": lambda: cuda.profile_stop(),
    "profiling": lambda: _with(cuda.profiling()),
    "is_cuda_array": lambda: cuda.is_cuda_array(cuda.to_device(np.ones(3))),
    "as_cuda_array": lambda: cuda.as_cuda_array(object()),
    "from_cuda_array_interface": lambda: cuda.from_cuda_array_interface({}),
    "open_ipc_array": lambda: cuda.open_ipc_array(None, 3, np.float64),
    "jit": lambda: _launch(lambda a: a),
    "In": lambda: _launch(cuda.In),
    "Out": lambda: _launch(cuda.Out),
    "InOut": lambda: _launch(cuda.InOut),
    "declare_device": lambda: _calls_external[1, 4](np.ones(4)),
    "vectorize": _vectorize,
    "guvectorize": _guvectorize,
    "reduce": lambda: _reduce("reduce"),
    "Reduce": lambda: _reduce("Reduce"),
    "random": lambda: cuda.random.create_xoroshiro128p_states(4, seed=1),
    "compile": lambda: cuda.compile(lambda x: x, "float64(float64)", device=True),
    "compile_ptx": lambda: cuda.compile_ptx(lambda x: x, "float64(float64)", device=True),
    "compile_all": lambda: cuda.compile_all(lambda x: x, "float64(float64)", device=True),
    "compile_for_current_device":
        lambda: cuda.compile_for_current_device(lambda x: x, "float64(float64)"),
    "compile_ptx_for_current_device":
        lambda: cuda.compile_ptx_for_current_device(lambda x: x, "float64(float64)"),
}

#: host names that cannot work without a GPU: they must be refused, naming the fix
REFUSED = {"external_stream", "as_cuda_array", "from_cuda_array_interface", "open_ipc_array",
           "declare_device", "guvectorize", "compile", "compile_ptx", "compile_all",
           "compile_for_current_device", "compile_ptx_for_current_device"}


def test_the_trap_catches_numbas_driver_calls(driver_trap):
    with pytest.raises(DriverReached):
        numba_cuda.legacy_default_stream()
    with pytest.raises(DriverReached):
        numba_cuda.Reduce(_add)(np.arange(4.0))


def test_every_host_name_has_a_call():
    assert sorted(numba_names.HOST - set(CALLS)) == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_public_name_reaches_the_driver(backend, driver_trap):
    answered, refused = [], []
    with dualgpu.using_backend(backend):
        for name in sorted(_public(cuda)):
            value = getattr(cuda, name)  # looking a name up never asks the driver
            if numba_names.classify(name, value) != "host":
                assert value is not None or name in numba_names.KERNEL_SIDE, name
                continue
            try:
                CALLS[name]()
            except DriverReached as exc:
                pytest.fail(f"cuda.{name} on {backend} reached the CUDA driver: {exc}")
            except DualgpuBaseError as exc:
                assert name.split("_for_")[0] in str(exc) or name in str(exc), (name, str(exc))
                assert re.search(r"Fix|instead|[Ww]rite", str(exc)), exc
                refused.append(name)
            else:
                answered.append(name)
    assert sorted(refused) == sorted(REFUSED)
    assert len(answered) == len(numba_names.HOST) - len(REFUSED)


_WEIGHTS = np.array([0.25, 0.5, 0.25])


@cuda.jit
def _smooth_with_constants(u, out):
    c = cuda.const.array_like(_WEIGHTS)  # a kernel-side name of the brief's list
    i = cuda.grid(1)
    if 0 < i < u.shape[0] - 1:
        out[i] = c[0] * u[i - 1] + c[1] * u[i] + c[2] * u[i + 1]


def _smooth(u):
    out = cuda.to_device(np.zeros_like(u))
    _smooth_with_constants[1, 8](cuda.to_device(u), out)
    return out.copy_to_host()


@pytest.mark.parametrize("backend", BACKENDS)
def test_const_array_like_runs_and_differentiates(backend, driver_trap):
    u = np.linspace(0.0, 1.0, 8)
    with dualgpu.using_backend(backend):
        assert dualgpu.testing.check_jacobian(_smooth, u) < 1e-8
        jac = np.asarray(dualgpu.jacobian(_smooth, u))
    assert jac[3, 2:5].tolist() == [0.25, 0.5, 0.25]


@pytest.mark.parametrize("backend", BACKENDS)
def test_launch_hints_wrapping_dual_arrays(backend):
    u = dualgpu.dual_array(np.zeros(4), np.eye(4)[:2])
    with dualgpu.using_backend(backend):
        _add_one[1, 4](cuda.InOut(u))
    assert u.values.tolist() == [1.0] * 4 and u.partials.tolist() == np.eye(4)[:2].tolist()
