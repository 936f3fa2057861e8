"""Jacobian chunks on many workers: a Dask client or any ``concurrent.futures`` executor.

Pass ``executor=`` to
:func:`dualgpu.jacobian` (or ``jacfwd``); :func:`local_cluster` starts a Dask cluster on this
machine (the ``distributed`` extra).
"""
from dualgpu.autodiff.distributed import ChunkExecutor, local_cluster
# reachable here for tests and worker set-up, not part of the public surface
from dualgpu.autodiff.distributed import (  # noqa: F401
    DEFAULT_RETRIES, WORKER_BACKEND_ENV, ChunkPlan, gpu_worker_specs, run_chunks,
)

__all__ = ["local_cluster", "ChunkExecutor"]
