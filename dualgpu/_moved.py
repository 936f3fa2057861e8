"""Old module paths, kept importable for one release: ``import dualgpu.driver`` still works.

dualgpu 0.2 moved its modules into floors (``core``, ``host``, ``compiled``, ``backends``,
``porting``, ``autodiff``; see the architecture page). Importing a module by its old path
gives the module at its new path, with a :class:`DeprecationWarning` that names the new path.
The finder below answers only for the names in :data:`MOVED`; it creates no module.
"""
import importlib
import importlib.abc
import importlib.util
import sys
import warnings

__all__ = ["MOVED", "install"]

#: old module path (under ``dualgpu.``) -> new module path (under ``dualgpu.``). ``backend`` and
#: ``hessian`` are not here: ``dualgpu.backend`` and ``dualgpu.hessian`` are the functions; nor are
#: ``backends.cpu``, ``backends.gpu`` and ``backends.cudasim``, which are packages now (their
#: kernels are in ``backends.<name>.kernel``).
MOVED = {
    "dual": "core.dual",
    "dualarray": "core.dualarray",
    "nested": "core.nested",
    "_expressions": "core._expressions",
    "_primals": "core._primals",
    "object_arrays": "core.object_arrays",
    "casting": "core.casting",
    "_context": "core._context",
    "lanes": "core.lanes",
    "_transfer": "core._transfer",
    "_host_lines": "core._host_lines",
    "dbuiltins": "core.dbuiltins",
    "float_to_int": "core.float_to_int",
    "int_power": "core.int_power",
    "array_protocol": "host.protocol",
    "host_operands": "host.operands",
    "host_indexing": "host.indexing",
    "host_linalg": "host.linalg",
    "host_quantiles": "host.quantiles",
    "host_reductions": "host.reductions",
    "host_shapes": "host.shapes",
    "host_solve": "host.solve",
    "host_tracer": "host.tracer",
    "host_ufuncs": "host.ufuncs",
    "host_buffers": "host.buffers",
    "numba_types": "compiled.types",
    "numba_arrays": "compiled.arrays",
    "numba_array_iter": "compiled.array_iter",
    "numba_attributes": "compiled.attributes",
    "numba_casts": "compiled.casts",
    "numba_cpu_math": "compiled.cpu_math",
    "numba_libdevice": "compiled.libdevice",
    "numba_nested": "compiled.nested",
    "numba_rules": "compiled.rules",
    "backends._cpu_first": "compiled.cpu_first",
    "backends._access": "backends.common.access",
    "backends._rebind": "backends.common.rebind",
    "backends._translate": "backends.common.translate",
    "backends._local_array_types": "backends.common.local_array_types",
    "backends.gpu_tiles": "backends.common.tiles",
    "backends.cpu_cache": "backends.cpu.cache",
    "backends.cpu_launchers": "backends.cpu.launchers",
    "backends.cpu_parallel": "backends.cpu.parallel",
    "backends.cpu_tiles": "backends.cpu.tiles",
    "backends._cpu_fused": "backends.cpu.fused",
    "backends._llvm": "backends.cpu.llvm",
    "backends.blocks": "backends.cpu.blocks",
    "backends.blocks.codegen": "backends.cpu.blocks.codegen",
    "backends.blocks.launch": "backends.cpu.blocks.launch",
    "backends.blocks.markers": "backends.cpu.blocks.markers",
    "backends.blocks.prepare": "backends.cpu.blocks.prepare",
    "backends.blocks.runtime": "backends.cpu.blocks.runtime",
    "backends.blocks.storage": "backends.cpu.blocks.storage",
    "backends.blocks.structure": "backends.cpu.blocks.structure",
    "backends._gpu_dual_ops": "backends.gpu.dual_ops",
    "backends._gpu_shared": "backends.gpu.shared",
    "backends.gpu_tile_grid": "backends.gpu.tile_grid",
    "backends._sim_casts": "backends.cudasim.casts",
    "backends._sim_module": "backends.cudasim.module",
    "backends._sim_threads": "backends.cudasim.threads",
    "kernel": "porting.kernel",
    "tuple_arguments": "porting.tuple_arguments",
    "signatures": "porting.signatures",
    "vectorize": "porting.vectorize",
    "captured_duals": "porting.captured_duals",
    "host_api": "porting.host_api",
    "host_devices": "porting.devices",
    "cuda_random": "porting.random",
    "driver": "autodiff.api",
    "_protect": "autodiff._protect",
    "_results": "autodiff._results",
    "_non_finite": "autodiff._non_finite",
    "_progress": "autodiff._progress",
    "coloring": "autodiff.coloring",
    "sparsity": "autodiff.sparsity",
    "sparse_probe": "autodiff.reuse",
    "ensemble": "autodiff.ensemble",
    "uncertainty": "autodiff.uncertainty",
    "fd_error": "autodiff.fd_error",
}


class _Alias(importlib.abc.Loader):
    def __init__(self, new):
        self.new = new

    def create_module(self, spec):
        module = importlib.import_module(self.new)
        self.spec = module.__spec__
        return module

    def exec_module(self, module):
        module.__spec__ = self.spec  # the module keeps its own spec (import set the alias's)


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith("dualgpu."):
            return None
        new = MOVED.get(fullname[len("dualgpu."):])
        if new is None:
            return None
        warnings.warn(
            f"{fullname} moved to dualgpu.{new}; the old path works until the next release. "
            f"Fix: import dualgpu.{new}, or better the public names in dualgpu, dualgpu.cuda, "
            f"dualgpu.sparse or dualgpu.distributed.", DeprecationWarning, stacklevel=3)
        spec = importlib.util.spec_from_loader(fullname, _Alias("dualgpu." + new))
        return spec


_FINDER = _MovedFinder()


def install():
    """Put the finder of moved modules on :data:`sys.meta_path` (once)."""
    # first on the path: an old package path (backends.blocks) must not be found again by the
    # path finder through its alias's __path__, which would load its modules twice
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
