"""Every public name of numba.cuda, and what ``dualgpu.cuda`` makes of it off the GPU.

``dualgpu.cuda`` defines the host API itself (:data:`HOST`: each name works on every backend
or, off the GPU, raises an error that names it and the replacement) and forwards the rest
to numba.cuda unchanged: names that only mean something inside a kernel (each backend gives
them their meaning or refuses them), numba types, and numba.cuda's internal modules and
classes, which reach no driver until used. A name that numba.cuda adds in a later version
is in none of these tables: ``tests/porting/test_cuda_names.py`` then fails, so that the
new name is looked at (and given an off-GPU version when it asks for the driver) before it
can reach the driver silently.
"""

import types

__all__ = ["HOST", "KERNEL_SIDE", "TYPES", "INTERNALS", "classify"]

#: host names that dualgpu.cuda defines: numba.cuda's on the GPU; the cpu and cudasim
#: backends answer them or refuse them naming the fix (``dualgpu.porting.*``)
HOST = frozenset({
    # memory, streams, synchronisation (porting.memory, porting.host_api)
    "to_device", "device_array", "device_array_like", "pinned_array", "pinned_array_like",
    "mapped_array", "mapped_array_like", "managed_array", "pinned", "mapped",
    "defer_cleanup", "stream", "default_stream", "legacy_default_stream",
    "per_thread_default_stream", "external_stream", "synchronize", "event",
    "event_elapsed_time",
    # devices and contexts (porting.devices, porting.driver_api)
    "select_device", "get_current_device", "list_devices", "gpus", "current_context",
    "close", "detect", "is_available", "require_context", "cuda_error",
    "is_supported_version", "is_float16_supported", "is_bfloat16_supported",
    "is_fp8_supported",
    # profiling (porting.driver_api)
    "profile_start", "profile_stop", "profiling",
    # arrays of other CUDA libraries (porting.driver_api)
    "is_cuda_array", "as_cuda_array", "from_cuda_array_interface", "open_ipc_array",
    # kernels, compiling, reductions (porting.kernel, porting.vectorize, porting.reduction)
    "jit", "declare_device", "vectorize", "guvectorize", "reduce", "Reduce", "random",
    "compile", "compile_ptx", "compile_all", "compile_for_current_device",
    "compile_ptx_for_current_device",
    # launch-argument hints: numba.cuda's classes; kernels unwrap them off the GPU
    "In", "Out", "InOut",
})

#: names used inside kernels: numba.cuda's objects, given their meaning by each backend
KERNEL_SIDE = frozenset({
    "grid", "gridsize", "threadIdx", "blockIdx", "blockDim", "gridDim", "laneid", "warpsize",
    "local", "shared", "const", "atomic", "syncthreads", "syncthreads_and",
    "syncthreads_count", "syncthreads_or", "syncwarp", "threadfence", "threadfence_block",
    "threadfence_system", "shfl_sync", "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync",
    "all_sync", "any_sync", "eq_sync", "ballot_sync", "match_any_sync", "match_all_sync",
    "activemask", "lanemask_lt", "nanosleep", "selp", "popc", "brev", "clz", "ffs", "fma",
    "cbrt", "cg", "grid_group", "libdevice", "ldca", "ldcg", "ldcs", "ldcv", "ldlu", "stcg",
    "stcs", "stwb", "stwt", "literal_unroll",
})

#: numba types (scalars, CUDA vector types, dim3): plain values, no driver
_VECTOR_BASES = ("char", "short", "int", "long", "longlong", "uchar", "ushort", "uint",
                 "ulong", "ulonglong", "float", "double")
_VECTOR_PREFIXES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                    "float32", "float64")
TYPES = frozenset({
    "b1", "bool", "bool_", "boolean", "bfloat16", "byte", "char", "short", "int_", "intc",
    "intp", "long_", "longlong", "size_t", "ssize_t", "uchar", "ushort", "uint", "uintc",
    "uintp", "ulong", "ulonglong", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f4",
    "f8", "c8", "c16", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
    "uint64", "float32", "float64", "double", "complex64", "complex128", "none", "void",
    "optional", "deferred_type", "Dim3", "dim3", "GridGroup",
    *(f"{base}{n}" for base in _VECTOR_BASES for n in range(1, 5)),
    *(f"{prefix}x{n}" for prefix in _VECTOR_PREFIXES for n in range(1, 5)),
})

#: numba.cuda's modules, classes, errors and constants: forwarded unchanged; they are
#: numba.cuda's internals (or plug-in interfaces for the GPU) and reach no driver until used
INTERNALS = frozenset({
    # modules
    "api", "api_util", "args", "cache_hints", "cext", "cgutils", "cloudpickle", "codegen",
    "compiler", "config", "contextlib", "core", "cpython", "cuda_paths", "cudadecl",
    "cudadrv", "cudaimpl",
    "datamodel", "debuginfo", "decorators", "descriptor", "device_init", "devicearray",
    "devices", "deviceufunc", "dispatcher", "driver", "errors", "extending", "flags",
    "importlib", "initialize", "intrinsics", "itanium_mangler", "kernels", "launchconfig",
    "literal", "locks", "lowering", "mathimpl", "memory_management", "misc", "models", "np",
    "nvvm", "nvvmutils", "os", "reduction", "serialize", "simulator", "stubs", "sys",
    "target", "typeconv", "types", "typing", "ufuncs", "utils", "vectorizers", "warnings",
    "runtime",
    # errors
    "CudaSupportError", "KernelRuntimeError",
    # code to link into GPU kernels (``cuda.jit(link=...)``; not run off the GPU)
    "Archive", "CUSource", "Cubin", "Fatbin", "LTOIR", "LinkableCode", "Object", "PTXSource",
    # the GPU's external memory-management plug-in interface
    "BaseCUDAMemoryManager", "HostOnlyCUDAMemoryManager", "GetIpcHandleMixin", "IpcHandle",
    "MappedMemory", "MemoryInfo", "MemoryPointer", "PinnedMemory", "set_memory_manager",
    # constants and helpers
    "HAS_NUMBA", "alias", "implementation", "config_default_cc", "numba_cuda_default_ptx_cc",
    "ffi", "ffi_forced_object", "prepare_shape_strides_dtype",
})


def classify(name, value=None):
    """Which table holds ``name``: ``"host"``, ``"kernel"``, ``"type"``, ``"internal"`` or None.

    Parameters
    ----------
    name : str
        A public name of numba.cuda or dualgpu.cuda.
    value : object, optional
        What the name is bound to: a submodule of numba.cuda (``cuda.fp16``, ``cuda.cudamath``,
        which appear as attributes once something imports them) is ``"internal"``.

    Returns
    -------
    str or None
        None for a name in no table (a name numba.cuda added since this table was written).

    Examples
    --------
    >>> from dualgpu.porting.numba_names import classify
    >>> classify("reduce"), classify("shfl_sync"), classify("float32"), classify("driver")
    ('host', 'kernel', 'type', 'internal')
    """
    for kind, table in (("host", HOST), ("kernel", KERNEL_SIDE), ("type", TYPES),
                        ("internal", INTERNALS)):
        if name in table:
            return kind
    if isinstance(value, types.ModuleType) and value.__name__.startswith("numba."):
        return "internal"
    return None
