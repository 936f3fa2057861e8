"""The simulator backend's device arrays: numba's simulated arrays with dualgpu's copies.

Outside the driver they behave as numba's simulator's (:class:`FakeCUDAArray`). Under the
driver, a DualArray copied into one (``d.copy_to_device(u0)``, ``cuda.to_device(u0, to=d)``:
an array a solver allocated in its ``__init__``) keeps its partials beside it inside
:func:`dualgpu.keep_host_buffers`, as the cpu backend's :class:`~dualgpu.porting.memory.
HostArray` does, or is refused with the buffer's name, the line and the fixes.
"""
from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

from dualgpu.core import hooks
from dualgpu.core.dualarray import DualArray, copy_into
from dualgpu.host import buffers as host_buffers

__all__ = ["SimArray"]


class SimArray(FakeCUDAArray):
    """numba's simulated device array over a numpy array, with dualgpu's copies."""

    @property
    def host_memory(self):
        """The numpy array holding the data (kept buffers are found by it)."""
        return self._ary

    def copy_to_host(self, ary=None, stream=0):
        kept = host_buffers.kept_source(self._ary)
        if isinstance(kept, DualArray):  # kept with its partials under the driver
            return kept.copy_to_host(ary, stream)
        return super().copy_to_host(ary, stream)

    def copy_to_device(self, ary, stream=0):
        hooks.device_copy("copy_to_device()")  # inside capture_graph(): refused, as on cpu
        source = host_buffers.kept_source(ary)
        if isinstance(source, DualArray):
            if not host_buffers.keep_copy(self._ary, source):  # (refused under the driver)
                copy_into(self, source, stream)  # refused, as numba's array cannot hold it
            return
        super().copy_to_device(source, stream)
