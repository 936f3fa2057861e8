"""numba.cuda's device and context API on every backend: device queries off the GPU.

Real codes size their launches from the device (``blocks = 4 *
get_current_device().MULTIPROCESSOR_COUNT``, ``threads = dev.WARP_SIZE * 8``) and pick
a GPU with ``select_device(i)`` or ``with cuda.gpus[i]:``. On the ``cuda`` backend
every function here is numba.cuda's own. On ``cpu`` and ``cudasim`` numba.cuda's
versions ask for a CUDA driver and raise ``CudaSupportError``, so here they answer as
numba's CUDA simulator does, for one device (id 0):

* :class:`HostDevice`: ``id`` 0, ``compute_capability`` ``(5, 2)`` and ``uuid`` as the
  simulator's device; ``name`` says which backend; the CUDA device attributes real
  codes read (``WARP_SIZE``, ``MAX_THREADS_PER_BLOCK``, ``MAX_SHARED_MEMORY_PER_BLOCK``,
  ``MAX_BLOCK_DIM_X``, ``MAX_GRID_DIM_X``, ...) carry the limits of a compute
  capability 5.2 GPU, the simulator's, which both host backends accept.
  ``MULTIPROCESSOR_COUNT`` is 1 on ``cudasim`` (the simulator runs one block at a
  time) and numba's thread count on ``cpu`` (the cores its parallel launches use).
* ``select_device(0)``, ``get_current_device()``, ``list_devices()``, ``gpus`` (a list
  of one; ``with cuda.gpus[0]:`` works), ``current_context()`` (a :class:`HostContext`
  whose ``get_memory_info()`` gives the host's free and total memory in bytes) and
  ``detect()`` (prints the device, returns True).
* ``close()``, ``synchronize()``, ``device.reset()``, ``context.reset()``: no-ops (no
  context to destroy, and every launch has finished when it returns).
"""
import os
from collections import namedtuple

from numba import cuda as _cuda

from dualgpu.core.selection import backend
from dualgpu.errors import DualgpuError

__all__ = ["HostContext", "HostDevice", "close", "current_context", "detect",
           "get_current_device", "gpus", "list_devices", "select_device"]

#: numba's simulator device's compute capability
COMPUTE_CAPABILITY = (5, 2)

MemoryInfo = namedtuple("MemoryInfo", "free,total")

#: CUDA device attributes (numba's ``Device.<NAME>``) of a compute capability 5.2 GPU
_ATTRIBUTES = {
    "WARP_SIZE": 32,
    "MAX_THREADS_PER_BLOCK": 1024,
    "MAX_BLOCK_DIM_X": 1024, "MAX_BLOCK_DIM_Y": 1024, "MAX_BLOCK_DIM_Z": 64,
    "MAX_GRID_DIM_X": 2 ** 31 - 1, "MAX_GRID_DIM_Y": 65535, "MAX_GRID_DIM_Z": 65535,
    "MAX_SHARED_MEMORY_PER_BLOCK": 48 * 1024, "SHARED_MEMORY_PER_BLOCK": 48 * 1024,
    "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": 48 * 1024,
    "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR": 96 * 1024,
    "RESERVED_SHARED_MEMORY_PER_BLOCK": 0,
    "TOTAL_CONSTANT_MEMORY": 64 * 1024,
    "MAX_REGISTERS_PER_BLOCK": 65536, "REGISTERS_PER_BLOCK": 65536,
    "MAX_REGISTERS_PER_MULTIPROCESSOR": 65536,
    "MAX_THREADS_PER_MULTIPROCESSOR": 2048, "MAX_BLOCKS_PER_MULTIPROCESSOR": 32,
    "COMPUTE_CAPABILITY_MAJOR": COMPUTE_CAPABILITY[0],
    "COMPUTE_CAPABILITY_MINOR": COMPUTE_CAPABILITY[1],
    # host memory is the device's memory: mapped, managed and unified, as an integrated GPU
    "INTEGRATED": 1, "CAN_MAP_HOST_MEMORY": 1, "UNIFIED_ADDRESSING": 1, "MANAGED_MEMORY": 1,
    "CONCURRENT_MANAGED_ACCESS": 1, "PAGEABLE_MEMORY_ACCESS": 1,
    "COOPERATIVE_LAUNCH": 1,  # grid.sync() works on both host backends
    "CONCURRENT_KERNELS": 0, "ASYNC_ENGINE_COUNT": 0,  # launches run one after the other
    "KERNEL_EXEC_TIMEOUT": 0, "TCC_DRIVER": 0, "ECC_ENABLED": 0, "MULTI_GPU_BOARD": 0,
    "COMPUTE_MODE": 0,  # default: any process may use the device
    "PCI_BUS_ID": 0, "PCI_DEVICE_ID": 0, "PCI_DOMAIN_ID": 0,
    "SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO": 2,
}


def _on_gpu():
    return backend() == "cuda"


def _multiprocessors(name):
    if name == "cudasim":
        return 1
    import numba

    return int(numba.config.NUMBA_NUM_THREADS)


class HostDevice:
    """The device of the ``cpu`` or ``cudasim`` backend, answering as numba's ``Device``.

    Attributes are those of :data:`_ATTRIBUTES` (a compute capability 5.2 GPU's
    limits) plus ``MULTIPROCESSOR_COUNT``; it is also the context manager
    ``with cuda.gpus[0]:`` enters.

    Examples
    --------
    >>> import dualgpu
    >>> from dualgpu import cuda
    >>> with dualgpu.using_backend("cpu"):
    ...     dev = cuda.get_current_device()
    >>> dev.id, dev.compute_capability, dev.WARP_SIZE, dev.MAX_THREADS_PER_BLOCK
    (0, (5, 2), 32, 1024)
    """

    id = 0
    compute_capability = COMPUTE_CAPABILITY
    uuid = "GPU-00000000-0000-0000-0000-000000000000"  # numba's simulator device's
    supports_float16 = True
    supports_bfloat16 = False
    supports_fp8 = False

    def __init__(self, backend_name):
        self.backend = backend_name
        self.name = ("SIMULATOR (dualgpu cudasim backend)" if backend_name == "cudasim"
                     else "CPU (dualgpu cpu backend)")
        self.MULTIPROCESSOR_COUNT = _multiprocessors(backend_name)

    def __getattr__(self, attr):
        if attr in _ATTRIBUTES:
            return _ATTRIBUTES[attr]
        if attr.startswith("__") or not attr.isupper():
            raise AttributeError(f"{type(self).__name__!s} has no attribute {attr!r}")
        known = _is_cuda_attribute(attr)
        why = {True: "has no value off the GPU",
               False: "is not a CUDA device attribute (CU_DEVICE_ATTRIBUTE_<NAME>)",
               None: "is not answered off the GPU"}[known]
        raise AttributeError(
            f"get_current_device().{attr}: {why} on the {self.backend} backend. Answered "
            f"here: MULTIPROCESSOR_COUNT, {', '.join(sorted(_ATTRIBUTES))}. Fix: use one of "
            "those, or read it where the code runs on a GPU (backend 'cuda').")

    def __repr__(self):
        return f"<CUDA device {self.id:d} '{self.name}'>"

    def __eq__(self, other):
        return isinstance(other, HostDevice) and other.backend == self.backend

    def __hash__(self):
        return hash((self.id, self.backend))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def reset(self):
        """Nothing to reset: off the GPU no context holds device memory (a no-op)."""

    def get_device_identity(self):
        """The PCI identity numba's ``Device`` gives (all 0 off the GPU)."""
        return {"pci_domain_id": 0, "pci_bus_id": 0, "pci_device_id": 0}

    def get_primary_context(self):
        """The device's context (:func:`current_context`)."""
        return HostContext(self)

    @property
    def device(self):
        """The device itself (``cuda.gpus[0].device``, as numba's list entries give)."""
        return self


def _is_cuda_attribute(attr):
    """True/False: whether CUDA names a device attribute ``attr``; None: cannot tell."""
    try:
        from numba.cuda.cudadrv.driver import binding

        return hasattr(binding.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{attr}")
    except Exception:  # noqa: BLE001  (no bindings, e.g. numba's simulator enabled)
        return None


def _host_memory():
    """Free and total host memory in bytes (the device memory of the host backends)."""
    try:
        page = os.sysconf("SC_PAGE_SIZE")
        return MemoryInfo(int(os.sysconf("SC_AVPHYS_PAGES") * page),
                          int(os.sysconf("SC_PHYS_PAGES") * page))
    except (AttributeError, ValueError, OSError):  # no sysconf: numba simulator's answer
        return MemoryInfo(float("inf"), float("inf"))


class HostContext:
    """The context of the ``cpu`` or ``cudasim`` backend, as numba's ``Context``."""

    def __init__(self, device):
        self.device = device

    @property
    def id(self):
        """The device's id (0)."""
        return self.device.id

    @property
    def compute_capability(self):
        """The device's compute capability."""
        return self.device.compute_capability

    def get_memory_info(self):
        """``(free, total)`` memory in bytes: the host's (a named tuple, as numba's).

        Examples
        --------
        >>> import dualgpu
        >>> from dualgpu import cuda
        >>> with dualgpu.using_backend("cpu"):
        ...     free, total = cuda.current_context().get_memory_info()
        >>> 0 < free <= total
        True
        """
        return _host_memory()

    def synchronize(self):
        """Nothing to wait for: launches have finished when they return (a no-op)."""

    def reset(self):
        """Nothing to reset off the GPU (a no-op)."""

    def push(self):
        """Nothing to push off the GPU (a no-op)."""

    def pop(self):
        """Nothing to pop off the GPU (a no-op)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __repr__(self):
        return f"<dualgpu host context of {self.device!r}>"


def _host_device():
    return HostDevice(backend())


def _check_id(device_id, what):
    if isinstance(device_id, bool) or not isinstance(device_id, int) and not hasattr(
            device_id, "__index__"):
        raise DualgpuError(f"{what}: the device id is {device_id!r}; expected an int (0).")
    if int(device_id) != 0:
        raise DualgpuError(
            f"{what}: the {backend()} backend has one device (id 0); got id {device_id!r}. "
            "Fix: use device 0 off the GPU (len(cuda.gpus) is 1, so a loop over "
            "range(len(cuda.gpus)) runs once), or run on a machine with that GPU "
            "(backend 'cuda').")


def select_device(device_id=0):
    """Make device ``device_id`` current and return it (numba.cuda's on the GPU).

    Parameters
    ----------
    device_id : int
        Off the GPU only 0 exists.

    Returns
    -------
    numba Device or HostDevice

    Raises
    ------
    DualgpuError
        Off the GPU, for an id other than 0 (the message names the fix).

    Examples
    --------
    >>> import dualgpu
    >>> from dualgpu import cuda
    >>> with dualgpu.using_backend("cudasim"):
    ...     cuda.select_device(0).MULTIPROCESSOR_COUNT
    1
    """
    if _on_gpu():
        return _cuda.select_device(device_id)
    _check_id(device_id, f"select_device({device_id!r})")
    return _host_device()


def get_current_device():
    """The current device: numba.cuda's on the GPU, a ``HostDevice`` elsewhere.

    Returns
    -------
    numba Device or HostDevice

    Examples
    --------
    >>> import dualgpu
    >>> from dualgpu import cuda
    >>> with dualgpu.using_backend("cpu"):
    ...     cuda.get_current_device().WARP_SIZE
    32
    """
    return _cuda.get_current_device() if _on_gpu() else _host_device()


def current_context(devnum=None):
    """The current context: numba.cuda's on the GPU, a ``HostContext`` elsewhere.

    Parameters
    ----------
    devnum : int, optional
        The device; off the GPU only 0 exists.

    Returns
    -------
    numba Context or HostContext
        ``get_memory_info()`` of either gives ``(free, total)`` bytes.

    Raises
    ------
    DualgpuError
        Off the GPU, for a device other than 0.

    Examples
    --------
    >>> import dualgpu
    >>> from dualgpu import cuda
    >>> with dualgpu.using_backend("cpu"):
    ...     ctx = cuda.current_context()
    >>> ctx.id, ctx.compute_capability
    (0, (5, 2))
    >>> free, total = ctx.get_memory_info()
    >>> 0 < free <= total
    True
    """
    if _on_gpu():
        return _cuda.current_context() if devnum is None else _cuda.current_context(devnum)
    if devnum is not None:
        _check_id(devnum, f"current_context({devnum!r})")
    return HostContext(_host_device())


class _DeviceList:
    """``cuda.gpus``: numba.cuda's device list on the GPU, one ``HostDevice`` elsewhere."""

    def _items(self):
        return _cuda.gpus if _on_gpu() else (_host_device(),)

    def __getitem__(self, devnum):
        if _on_gpu():
            return _cuda.gpus[devnum]
        _check_id(devnum, f"cuda.gpus[{devnum!r}]")
        return _host_device()

    def __len__(self):
        return len(self._items())

    def __iter__(self):
        return iter(self._items())

    @property
    def current(self):
        """The current device (numba's ``gpus.current``)."""
        return _cuda.gpus.current if _on_gpu() else _host_device()

    def __repr__(self):
        return repr(list(self._items()))


gpus = _DeviceList()
"""The devices (``cuda.gpus``): numba.cuda's list on the GPU, one ``HostDevice`` elsewhere.

Indexable (only 0 off the GPU), with ``len``, iteration and ``.current``; its entries are
context managers (``with cuda.gpus[0]:``).
"""


def list_devices():
    """All devices: numba.cuda's list on the GPU, ``cuda.gpus`` (one device) elsewhere.

    Returns
    -------
    sequence
        Indexable, with ``len``; its entries are context managers (``with gpus[0]:``).

    Examples
    --------
    >>> import dualgpu
    >>> from dualgpu import cuda
    >>> with dualgpu.using_backend("cpu"):
    ...     len(cuda.list_devices())
    1
    """
    return _cuda.list_devices() if _on_gpu() else gpus


def close():
    """numba.cuda's ``close`` on the GPU; a no-op elsewhere (no context to destroy).

    Returns
    -------
    None

    Examples
    --------
    >>> import dualgpu
    >>> from dualgpu import cuda
    >>> with dualgpu.using_backend("cpu"):
    ...     print(cuda.close())
    None
    """
    if _on_gpu():
        return _cuda.close()
    return None


def detect():
    """Print the devices and return whether one is supported (numba.cuda's on the GPU).

    Off the GPU it prints the backend's one device, as numba's simulator does, and
    returns True (kernels run on it).

    Returns
    -------
    bool

    Examples
    --------
    >>> import dualgpu
    >>> from dualgpu import cuda
    >>> with dualgpu.using_backend("cudasim"):
    ...     found = cuda.detect()  # doctest: +ELLIPSIS
    Found 1 CUDA devices
    ...
    >>> found
    True
    """
    if _on_gpu():
        return _cuda.detect()
    device = _host_device()
    print("Found 1 CUDA devices")
    print("id %d    %20s %40s" % (device.id, device.name, "[SUPPORTED]"))
    print("%40s: %d.%d" % ("Compute Capability", *device.compute_capability))
    print("%40s: %d" % ("Multiprocessors", device.MULTIPROCESSOR_COUNT))
    print("Summary:")
    print("\t1/1 devices are supported")
    return True
