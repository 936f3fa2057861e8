"""Jacobian chunks on many workers: a Dask client or any ``concurrent.futures`` executor.

Pass ``executor=`` to
:func:`dualgpu.jacobian` (or ``jacfwd``); :func:`local_cluster` starts a Dask cluster on this
machine (the ``distributed`` extra).
"""
from dualgpu.autodiff.distributed import (
    DEFAULT_RETRIES, WORKER_BACKEND_ENV, ChunkExecutor, ChunkPlan, gpu_worker_specs, local_cluster,
    run_chunks,
)

__all__ = ["local_cluster", "ChunkExecutor"]
