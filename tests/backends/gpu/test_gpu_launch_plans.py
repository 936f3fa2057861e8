"""The GPU backend's launch plans (issue 41), checked offline: numba.cuda compiles the kernels
to PTX for real and the CUDA driver's launch is a stub that records what it receives
(:func:`benchmarks.gpu_launch_python.driver_stubs`). A planned launch must hand the driver
exactly what the full launch path hands it, and a plan must not be reused across kinds of
arguments (plain then dual, other lanes, another dtype).
"""
import warnings

import numpy as np
import pytest

import dualgpu
from dualgpu import Dual, DualArray
from dualgpu.porting import launch_plan

from benchmarks.gpu_launch_python import LAUNCHES, device_array, driver_stubs
import kernels_launch_plans as K

pytestmark = pytest.mark.compile


def _recorded(launch, args, planned):
    """What the driver received for one launch of ``launch(*args)``."""
    previous, launch_plan.ENABLED = launch_plan.ENABLED, planned
    try:
        del LAUNCHES[:]
        launch(*args)
        return LAUNCHES[-1] if LAUNCHES else None
    finally:
        launch_plan.ENABLED = previous


def _kinds():
    def dual(lanes, dtype=np.float64):
        return (DualArray(device_array((16,), dtype), device_array((lanes, 16), dtype)),
                DualArray(device_array((16,), dtype), device_array((lanes, 16), dtype)),
                Dual(0.25, np.arange(1.0, lanes + 1.0)))

    return [
        ("plain", (device_array((16,)), device_array((16,)), 0.25)),
        ("dual 1", dual(1)),
        ("dual 3", dual(3)),
        ("plain f32", (device_array((16,), np.float32), device_array((16,), np.float32),
                       np.float32(0.25))),
        ("dual 2 f32", dual(2, np.float32)),
        ("plain again", (device_array((16,)), device_array((16,)), 0.5)),
    ]


def test_planned_launches_hand_the_driver_what_full_launches_do():
    with warnings.catch_warnings(), driver_stubs(record=True), \
            dualgpu.using_backend("cuda"):
        warnings.simplefilter("ignore")
        launch = K.stencil[1, 16]
        launch.plans.clear()
        kinds = _kinds()
        expected = {name: _recorded(launch, args, planned=False) for name, args in kinds}
        for _ in range(2):  # the first pass plans, the second reuses
            for name, args in kinds:
                assert _recorded(launch, args, planned=True) == expected[name], name
        assert sum(bool(p) for p in launch.plans.values()) == 5  # "plain again": same kinds
        # lanes and dtypes reach the driver as they should: each kind its own argument list
        lengths = {name: len(values) for name, values in expected.items()}
        assert lengths["dual 3"] == lengths["dual 1"] + 2  # the Dual's partials, by value
        assert expected["dual 3"][-3:] == [1.0, 2.0, 3.0]


def test_a_planned_launch_keeps_its_stream():
    """The plan calls numba.cuda's dispatcher with the launch's own stream (a recorder
    stands in for the dispatcher here)."""
    seen = []

    class Recorder:
        def __getitem__(self, config):
            return lambda *args: seen.append((config, args))

    with warnings.catch_warnings(), driver_stubs(), dualgpu.using_backend("cuda"):
        warnings.simplefilter("ignore")
        gpu = K.stencil.compiled("cuda")
        args = (device_array((16,)), device_array((16,)), 0.25)
        previous = gpu._dispatchers.get(0)
        gpu._dispatchers[0] = Recorder()
        try:
            plan = gpu.plan((1,), (16,), args, 0)
            stream = object()
            assert plan(args, 0) and plan(args, stream)
        finally:
            gpu._dispatchers[0] = previous
    assert seen == [(((1,), (16,), 0, 0), args), (((1,), (16,), stream, 0), args)]
