"""The compiled CPU backend: run an unchanged numba.cuda kernel with numba on the CPU.

How it works
------------
The kernel's Python source is rewritten (see :mod:`dualgpu.backends.common.translate`)
into a *thread function*: ``cuda.grid``, ``cuda.gridsize``, ``cuda.threadIdx.x``,
``cuda.blockIdx.y`` ... become expressions in fifteen extra parameters (global
index, thread index, block index, block size, grid size; x/y/z each). A
generated *launcher* with the kernel's own parameter names, compiled with
``numba.njit``, runs the thread function once per CUDA thread:

- kernels that only use ``cuda.grid``/``cuda.gridsize`` get "flat" launchers
  that loop over the global index directly, innermost over the axis that the
  kernel's last array index uses (``i, j = cuda.grid(2)``; ``u[i, j]``: y), so
  LLVM can vectorise the loop;
- kernels that start with a bounds guard (``i = cuda.grid(1)``, ``n = u.shape[0]``,
  then ``if i < n: <body>`` or ``if i >= n: return``; in 2-D and 3-D
  ``if i >= nx or j >= ny: return`` and the like) get "bounded" launchers: the
  bounds are computed once per launch and the thread function, without the guard,
  runs for ``min(threads, n)`` indices per axis, with the bound stated to LLVM
  (``llvm.assume``). A guard inside the loop made LLVM emit masked vector loads and
  stores, up to 2.5x slower at some relative buffer alignments; a 2-D stencil's step
  ran 1.27x slower. Only integer bounds made of parameters and array sizes qualify
  (see :func:`~dualgpu.backends.cpu.guards.find_guard`);
- kernels that read ``threadIdx``/``blockIdx``/``laneid`` loop over blocks,
  then over the threads of each block;
- launches whose measured cost is large enough run on several cores
  (:mod:`dualgpu.backends.cpu.parallel`); kernels with atomics always run
  serially, so their results are exact. No launcher divides per thread;
- a dual launch with more lanes than the kernel's tile size (the driver
  seeds many directions at once) runs the lane tiles inside one compiled call
  (:mod:`dualgpu.backends.cpu.launchers`).

The thread function is compiled without numba's reference counting (NRT) and
marked for LLVM to inline into the launcher's loop; a kernel that turns out to
allocate is recompiled with NRT once. Device functions (numba.cuda ones with
``device=True``, or objects flagged ``__dualgpu_device__``) are translated the
same way, cached per function object, and inlined. ``cuda.local.array``
becomes ``_dg_local_array(shape, dtype, _dg_lanes)``: a stack array in plain
runs, a DualArray (``dualgpu.compiled.arrays.empty_dual_array``) for float scratch
in dual runs. Arguments are passed to the launcher unchanged, so duals work
wherever numba can type them; the lane count is read from the arguments'
``.lanes`` and each lane count gets its own compiled translation.

Kernels that need the threads of a block to cooperate (``cuda.shared.array``,
``cuda.syncthreads`` and its ``_count/_and/_or`` forms, ``cuda.syncwarp``, the
warp shuffles, votes and matches, ``cuda.cg.this_grid().sync()``), directly or
in a device function they call, take another path: :mod:`dualgpu.backends.cpu.blocks`
cuts them at every barrier into regions that loop over the threads of a block
(of the grid for grid sync), inlining the device functions that synchronise.
Here the rewriter only turns those calls into markers, and
:meth:`~dualgpu.backends.cpu.kernel.CpuKernel.launch` hands such kernels to a
:class:`~dualgpu.backends.cpu.blocks.launch.BlockLauncher`.
Constant memory other than ``cuda.const.array_like(host_array)`` is refused by
:func:`~dualgpu.backends.cpu.kernel.compile_kernel` with a message that says so.

Modules
-------
kernel
    :class:`~.kernel.CpuKernel` and :func:`~.kernel.compile_kernel`: launching,
    tiles of lanes, retries with NRT, block-level kernels handed to :mod:`.blocks`.
translation
    One function's rewritten source (:class:`~.translation.Translation`), its
    device functions and the njit dispatchers built from it per lane count.
rewrite
    The source rewriter: ``cuda.*`` references become thread-function code.
guards
    Hoisting a kernel's bounds guard out of the launch loops ("bounded").
intrinsics
    What the rewritten source calls: local arrays, atomics, saturating
    float-to-int conversions, ``cuda.fma``.
launchers, parallel, tiles
    The launchers' sources, running them on several cores, lane tiles.
cache, llvm, fused
    The compile cache on disk, LLVM options and numba internals, fused multiply-add.
blocks
    Kernels with shared memory, barriers or warp intrinsics.

Imports go one way: ``kernel`` -> ``blocks.launch`` -> ``blocks.prepare`` ->
``translation`` -> ``rewrite``, ``guards``, ``intrinsics``.
"""

__all__ = ["BACKEND", "COMPILED_CODE_ONLY"]

#: This backend's name (as :func:`dualgpu.set_backend` spells it).
BACKEND = "cpu"

#: ``numba.njit`` options of a function only compiled code calls (thread and device
#: functions, block team functions, the block runtime's helpers): numba builds and compiles
#: no CPython or C wrapper for it.
COMPILED_CODE_ONLY = {"no_cpython_wrapper": True, "no_cfunc_wrapper": True}
