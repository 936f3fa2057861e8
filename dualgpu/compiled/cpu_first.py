"""Install numba's CPU typing and lowering before anything is compiled for CUDA.

numba creates the templates of ``overload_attribute`` / ``overload_method`` /
``overload_classmethod`` extensions (numba's own ``Array._allocate`` behind ``np.empty``,
for one) when a typing context installs its registries, and registers their lowering in the
registry of the target active at that moment. When the CPU typing context first installs them
during a CUDA compile, their CPU lowering lands in the CUDA registry, and for the rest of the
process ``np.empty`` (and so every dual ``cuda.local.array`` on the cpu backend) fails with
``Unknown attribute '_allocate'``. Refreshing the CPU contexts under the CPU target first,
once, when dualgpu is imported (before anything can be compiled for CUDA), keeps them
where they belong.
"""
import functools

__all__ = ["cpu_registries_first"]


@functools.lru_cache(maxsize=None)
def cpu_registries_first():
    """Refresh numba's CPU typing and target contexts under the CPU target (once)."""
    from numba.core.registry import cpu_target
    from numba.core.target_extension import target_override

    with target_override("cpu"):
        # the target context first: its refresh imports numba's lowering modules
        # (numba.np.arrayobj...), which register typing templates the typing refresh installs
        cpu_target.target_context.refresh()
        cpu_target.typing_context.refresh()
