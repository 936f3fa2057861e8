"""Block-level CUDA features on the cpu backend: shared memory, barriers, warp intrinsics.

A kernel that uses ``cuda.shared.array``, ``cuda.syncthreads`` (and its
``_count/_and/_or`` forms), ``cuda.syncwarp``, the warp shuffles and votes or
``cuda.cg.this_grid().sync()`` cannot run one CUDA thread after another: a
thread must stop at a barrier until the others of its block (or grid) arrive.
This package runs such kernels with the *work-group transformation* (MCUDA,
POCL): the kernel body is cut at every barrier into *regions*, each region is a
loop over the threads of a block (or of the whole grid for grid sync), and the
variables that live across a barrier are kept per thread. Control flow that
contains a barrier (``if``, ``for ... in range``, ``while``, also nested) runs
the way a GPU runs it, with a per-thread *active mask*: a branch or a loop
iteration runs the regions inside it for the threads that take it; a thread
that returns leaves for good. A block barrier reached by some but not all of
the live threads of a block is undefined behaviour in CUDA and raises an error
naming the kernel, the line and the block.

Examples
--------
The two-stage shared-memory reduction of ``simulations/kinetic_energy.py`` (a tree
reduction with ``syncthreads`` in a ``while`` loop), and its gradient:

>>> import numpy as np
>>> import dualgpu
>>> from simulations.kinetic_energy import kinetic_energy
>>> vel, mass = np.ones((20, 3)), np.full(20, 2.0)
>>> with dualgpu.using_backend("cpu"):
...     energy = kinetic_energy(vel, mass)
...     d_mass = dualgpu.jacobian(kinetic_energy, vel, mass, argnums=1, progress=False)
>>> energy.tolist(), d_mass[0, :3].tolist()
([60.0], [1.5, 1.5, 1.5])

Modules
-------
markers
    What the cpu rewriter emits for each block-level ``cuda`` call.
prepare
    Inlines device functions that synchronise, resolves grid groups, hoists
    barriers out of expressions: one statement list per kernel.
structure
    Cuts the statements into regions and barrier operations (the SIMT tree)
    and finds the variables that must be kept per thread.
codegen
    Writes the team function (one block, or the whole grid) and its launcher.
storage, runtime
    numba intrinsics for typed per-thread storage; barrier checks, warp
    shuffles and votes run between regions.
launch
    :class:`BlockLauncher`: typing, building and launching, per argument types.

The package has two floors. :mod:`.markers` and :mod:`.runtime` sit below the cpu
backend's rewriter and intrinsics (:mod:`dualgpu.backends.cpu.rewrite`,
:mod:`dualgpu.backends.cpu.intrinsics`), which import them; :mod:`.prepare` and
:mod:`.launch` sit above its translations (:mod:`dualgpu.backends.cpu.translation`)
and below :mod:`dualgpu.backends.cpu.kernel`, which imports :mod:`.launch`. This
``__init__`` imports nothing, so that the lower floor loads without the upper one.
"""
