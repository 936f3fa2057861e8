"""A drop-in namespace for ``numba.cuda``: change ``from numba import cuda`` to
``from dualgpu import cuda``.

Kernel-side names (``grid``, ``threadIdx``, ``local.array`` ...) are numba.cuda's
own; each backend makes them mean the right thing. Host-side names allocate and
copy on the active backend, for plain and dual arrays alike:

* ``to_device(dual_array)`` and ``device_array_like(dual_array)`` give DualArrays;
* while the driver runs a function, every float array created here is a
  DualArray with the driver's lane count (zero partials), so host code written
  for plain arrays needs no change to be differentiated;
* outside the driver, allocation follows the argument (plain stays plain);
* every DualArray allocated here (``device_array``/``device_array_like``) starts
  as zeros, values and partials, on every backend (a device memset on the GPU):
  a kernel that reads a buffer before writing it sees the same zeros on
  ``cuda``, ``cpu`` and ``cudasim``, never uninitialised tangents. Plain arrays
  keep numba's behaviour (uninitialised on ``cuda`` and ``cudasim``, zeros on
  ``cpu``).

Launch graphs: ``capture_graph()`` records a block's kernel launches once, and
``graph.launch()`` replays them (a CUDA graph on the GPU; see ``dualgpu.porting.graphs``).

Device queries (``get_current_device()``, ``select_device``, ``gpus``,
``current_context()``, ``detect``, ``close``) answer on every backend. Random numbers:
:mod:`dualgpu.cuda.random` (numba.cuda's xoroshiro128+ generator, on every backend).

On the ``cpu`` backend "device" arrays are host arrays that also have numba's
device-array methods (``copy_to_host``, ``copy_to_device``).

This module only re-exports: the host side lives in the ``dualgpu/porting/`` package
(``memory``: copies, allocation, streams; ``host_api``: events and pinned memory; ``devices``;
``kernel``: ``jit``; ``vectorize``; ``random``), and nothing in dualgpu imports it back.
See also the user guide's porting page.
"""
import sys

from numba import cuda as _cuda

from dualgpu.porting import devices as _devices
from dualgpu.porting import random
from dualgpu.porting.devices import (  # numba.cuda's device API, on every backend
    close, current_context, detect, get_current_device, list_devices, select_device,
)
from dualgpu.porting.driver_api import (  # noqa: F401 (compile: not in __all__, see below)
    as_cuda_array, compile, compile_all, compile_for_current_device, compile_ptx,
    compile_ptx_for_current_device, cuda_error, declare_device, external_stream,
    from_cuda_array_interface, is_bfloat16_supported, is_cuda_array, is_float16_supported,
    is_fp8_supported, is_supported_version, legacy_default_stream, open_ipc_array,
    per_thread_default_stream, profile_start, profile_stop, profiling, require_context,
)
from dualgpu.porting.host_api import (  # numba.cuda's names, working on every backend
    defer_cleanup, event, event_elapsed_time, managed_array, mapped, mapped_array,
    mapped_array_like, pinned, pinned_array, pinned_array_like,
)
from dualgpu.porting.graphs import LaunchGraph, capture_graph
from dualgpu.porting.kernel import jit
from dualgpu.porting.memory import (
    HostArray, HostStream, default_stream, device_array, device_array_like, is_available,
    stream, synchronize, to_device,
)
from dualgpu.porting.reduction import Reduce, reduce
from dualgpu.porting.vectorize import guvectorize, vectorize

__dualgpu_cuda__ = True

# (``compile`` is defined here, as in numba.cuda, but left out of __all__ so that
# ``from dualgpu.cuda import *`` does not hide the builtin compile)

__all__ = [
    "jit", "grid", "gridsize", "threadIdx", "blockIdx", "blockDim", "gridDim", "local",
    "shared", "const", "atomic", "syncthreads", "laneid", "warpsize", "to_device",
    "device_array", "device_array_like", "synchronize", "is_available", "HostArray",
    "HostStream", "stream", "default_stream", "event", "event_elapsed_time", "pinned",
    "pinned_array", "pinned_array_like", "mapped", "mapped_array", "managed_array",
    "defer_cleanup", "vectorize", "guvectorize", "select_device", "get_current_device",
    "current_context", "list_devices", "gpus", "detect", "close", "random", "reduce", "Reduce",
    "mapped_array_like", "legacy_default_stream", "per_thread_default_stream",
    "external_stream", "profile_start", "profile_stop", "profiling", "require_context",
    "cuda_error", "is_supported_version", "is_float16_supported", "is_bfloat16_supported",
    "is_fp8_supported", "is_cuda_array", "as_cuda_array", "from_cuda_array_interface",
    "open_ipc_array", "compile_ptx", "compile_all", "compile_for_current_device",
    "compile_ptx_for_current_device", "declare_device", "In", "Out", "InOut",
    "capture_graph", "LaunchGraph",
]

gpus = _devices.gpus
"""The devices, as numba.cuda's ``gpus``: ``len(cuda.gpus)``, ``cuda.gpus[i]``, iteration.

On the ``cuda`` backend it is numba.cuda's device list; on ``cpu`` and ``cudasim`` a list
of one ``HostDevice`` (id 0; another index raises
:class:`~dualgpu.DualgpuError`). Either way an entry is a context manager, so the
multi-GPU idiom ``with cuda.gpus[i]: ...`` runs everywhere, and ``cuda.gpus.current`` is
the current device (the same object as ``dualgpu.porting.devices.gpus``).

Examples
--------
>>> import dualgpu
>>> from dualgpu import cuda
>>> with dualgpu.using_backend("cpu"):
...     with cuda.gpus[0] as dev:
...         print(len(cuda.gpus), dev.id, cuda.gpus.current.WARP_SIZE)
1 0 32
"""

# kernel-side names: numba.cuda's own objects (backends give them meaning). With
# NUMBA_ENABLE_CUDASIM=1 numba.cuda has none of them outside a launch.
_KERNEL_SIDE = (
    "grid", "gridsize", "threadIdx", "blockIdx", "blockDim", "gridDim", "local", "shared",
    "const", "atomic", "syncthreads", "laneid", "warpsize",
)
globals().update({name: getattr(_cuda, name, None) for name in _KERNEL_SIDE})

# numba.cuda.random with host-side states off the GPU: ``from dualgpu.cuda import random``
# and ``import dualgpu.cuda.random`` both give dualgpu.porting.random
sys.modules.setdefault(__name__ + ".random", random)


def __getattr__(name):
    # numba.cuda's kernel-side names, types and internals (dualgpu.porting.numba_names says
    # which); the host API is defined above, so none of these asks for the CUDA driver
    return getattr(_cuda, name)


def __dir__():
    return sorted(set(globals()) | {n for n in dir(_cuda) if not n.startswith("_")})
