"""Python time of a GPU-backend launch up to the CUDA driver call, measured without a GPU.

Usage::

    python benchmarks/gpu_launch_python.py

The CUDA driver's entry points that a launch reaches are replaced by stubs
(:func:`driver_stubs`): the current device (compute capability 9.0, as the ``offline_ptx``
test fixture does), loading the compiled module, and the launch itself, which records its
arguments and returns. Kernels compile to PTX for real (NVVM); device arrays are
``DeviceNDArray`` objects over a fake device pointer. So everything numba.cuda and dualgpu
do in Python before the driver runs, and nothing after it, is timed: thread CPU time per
launch (other processes on the machine do not count), median of interleaved rounds, for a
16-cell heat step with plain arrays and with DualArrays of 1 lane, through the full launch
path (launch plans off), with launch plans (issue 41), and as a bare numba.cuda dispatcher
call.
"""
import contextlib
import ctypes
import os
import statistics
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

__all__ = ["driver_stubs", "device_array", "LAUNCHES", "STREAMS", "FakeStream", "main"]

#: what the stubbed driver launch received: (kernel arguments after numba's marshalling)
LAUNCHES = []

#: with ``record``, each launch's stream, grid and block, beside :data:`LAUNCHES`
STREAMS = []


class FakeStream:
    """A stand-in for a ``cuda.core`` stream: launches name it, the stubs pass it through."""

    def __init__(self, name="stream"):
        self.name = name
        self.waits = []

    def wait(self, other):
        self.waits.append(other)

    def __repr__(self):
        return f"<FakeStream {self.name}>"


class _Device:
    compute_capability = (9, 0)
    id = 0


class _Module:
    initialized = True


class _Cufunc:
    kernel = object()
    name = "stub"
    module = _Module()


class _Memory:
    """A fake device allocation: numba.cuda reads its pointer and size, never its bytes."""

    def __init__(self, nbytes):
        self.nbytes = self.size = nbytes
        self.handle = self.device_ctypes_pointer = ctypes.c_void_p(0x10000)
        self.ptr = 0x10000

    def view(self, start, stop=None):
        return self


@contextlib.contextmanager
def driver_stubs(record=False):
    """Within the block, numba.cuda launches stop at the driver: no GPU is needed.

    With ``record``, each launch appends its marshalled kernel arguments to
    :data:`LAUNCHES`. The cuda backend is allowed (``dualgpu.core.selection``'s GPU check).
    """
    import numba.cuda.dispatcher as dispatcher
    from numba.cuda import codegen

    from dualgpu.core import selection

    def launch(stream, config, kernel, *args):
        if record:
            LAUNCHES.append([getattr(a, "value", a) for a in args])
            STREAMS.append((stream, tuple(config.grid), tuple(config.block)))

    from numba.cuda.cudadrv import driver

    core_stream = driver._to_core_stream

    def to_core_stream(stream):
        return stream if isinstance(stream, FakeStream) else core_stream(stream)

    saved = [(dispatcher, "get_current_device"), (dispatcher, "launch"),
             (codegen.CUDACodeLibrary, "get_cufunc"), (codegen.CUDACodeLibrary, "_ensure_cc"),
             (selection, "_gpu_available"), (driver, "_to_core_stream")]
    previous = [(owner, name, getattr(owner, name)) for owner, name in saved]
    dispatcher.get_current_device = lambda: _Device()
    dispatcher.launch = launch
    codegen.CUDACodeLibrary.get_cufunc = lambda self: _Cufunc()
    codegen.CUDACodeLibrary._ensure_cc = lambda self, cc: cc if cc is not None else (9, 0, "a")
    selection._gpu_available = lambda: True
    driver._to_core_stream = to_core_stream
    try:
        yield
    finally:
        for owner, name, value in previous:
            setattr(owner, name, value)


def device_array(shape, dtype=np.float64):
    """A numba.cuda ``DeviceNDArray`` of ``shape`` over a fake device pointer."""
    from numba.cuda.cudadrv import devicearray

    dtype = np.dtype(dtype)
    shape = tuple(shape)
    strides = tuple(int(s) for s in np.empty(shape, dtype).strides)
    return devicearray.DeviceNDArray(shape, strides, dtype,
                                     gpu_data=_Memory(int(np.prod(shape)) * dtype.itemsize))


def _per_launch(fn, launches):
    start = time.thread_time()
    for _ in range(launches):
        fn()
    return (time.thread_time() - start) / launches * 1e6


def main(launches=2000, rounds=7):
    import warnings

    import dualgpu
    from dualgpu import Dual, DualArray
    from dualgpu.porting import launch_plan
    from benchmarks.cases_launch import plan_step

    warnings.filterwarnings("ignore", message=".*under-utilization.*")
    with driver_stubs(), dualgpu.using_backend("cuda"):
        u, u_new = device_array((16,)), device_array((16,))
        du = DualArray(device_array((16,)), device_array((1, 16)))
        du_new = DualArray(device_array((16,)), device_array((1, 16)))
        r = Dual(0.25, [1.0])
        launch = plan_step[1, 16]
        gpu = plan_step.compiled("cuda")
        plain_dispatch, dual_dispatch = gpu.dispatcher_for(0), gpu.dispatcher_for(1)

        def planned(enabled, args):
            def run():
                launch_plan.ENABLED = enabled
                launch(*args)
            return run

        fns = {
            ("full path", "plain"): planned(False, (u, u_new, 0.25)),
            ("full path", "dual"): planned(False, (du, du_new, r)),
            ("launch plans", "plain"): planned(True, (u, u_new, 0.25)),
            ("launch plans", "dual"): planned(True, (du, du_new, r)),
            ("numba.cuda dispatcher", "plain"):
                lambda: plain_dispatch[(1,), (16,), 0, 0](u, u_new, 0.25),
            ("numba.cuda dispatcher", "dual"):
                lambda: dual_dispatch[(1,), (16,), 0, 0](du, du_new, r),
        }
        for fn in fns.values():  # compile, plan
            fn()
            fn()
        times = {key: [] for key in fns}
        for _ in range(rounds):
            for key, fn in fns.items():
                times[key].append(_per_launch(fn, launches))
        launch_plan.ENABLED = True
    with open("/proc/loadavg") as fh:
        load = fh.read().strip()
    print("GPU backend (driver stubbed), Python us per launch up to the driver call, thread CPU "
          f"time, median of {rounds} interleaved rounds of {launches}; loadavg {load}")
    print(f"  {'':24s} {'plain':>8s} {'dual (1 lane)':>14s}")
    for path in ("full path", "launch plans", "numba.cuda dispatcher"):
        print(f"  {path:24s} {statistics.median(times[(path, 'plain')]):8.2f} "
              f"{statistics.median(times[(path, 'dual')]):14.2f}")


if __name__ == "__main__":
    main()
