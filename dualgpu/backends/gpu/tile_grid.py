"""Lane tiles as a grid dimension on the GPU backend: all tiles of a dual launch in one launch.

A dual launch whose DualArrays carry L lanes, for a kernel compiled for tiles of
N lanes, runs L / N tiles. :mod:`dualgpu.backends.common.tiles` runs them one launch
after another; when the tiles cannot disturb one another, this module runs them
in **one** launch whose grid gets a third dimension of L / N blocks: block
``(x, y, t)`` runs the kernel's body on lanes ``t N .. (t + 1) N - 1``. The
kernel is compiled inside a generated wrapper kernel::

    def _dg_tiles(a0_values, a0_partials, a1, ...):
        t = cuda.blockIdx.z
        body(make(a0_values, a0_partials[t * N:(t + 1) * N], N), a1, ...)

where ``body`` is the kernel's dual specialisation for N lanes compiled as a
device function (NVVM inlines it) and ``make`` builds the N-lane DualArray view.
A DualArray travels as its two arrays, so L is not bound by the 64 lanes a
compiled dual may have.

Every tile computes the same values and writes them to the same places, so this
is exact only when no tile reads what another writes. :func:`plan` therefore
keeps the one-launch-per-tile path (it returns None) when:

- an array is both read and written by the kernel, or written while sharing
  memory with another argument (:func:`dualgpu.backends.common.tiles.restore_positions`:
  in-place updates, atomics, anything the access analysis cannot see through);
- a Dual scalar is an argument (its lanes travel in the kernel's parameters);
- the kernel or a device function it calls may use the grid's third dimension
  (``blockIdx.z``, ``gridDim.z``, ``cuda.grid(3)``, ``cuda.gridsize(3)``), or
  the launch already has a third grid dimension;
- the kernel synchronises its grid, or asks for more than 48 KB of dynamic
  shared memory (both handled per tile by the GPU backend).

Examples
--------
>>> grid_with_tiles(40, 4), grid_with_tiles((8, 2), 4), grid_with_tiles((8, 2, 3), 4)
((40, 1, 4), (8, 2, 4), None)
"""
import ast
import functools
import linecache

from dualgpu.core.dual import Dual
from dualgpu.core.dualarray import DualArray
from dualgpu.errors import DualgpuError
from dualgpu.backends.common.rebind import global_names
from dualgpu.backends.common.translate import device_py_func, function_source
from dualgpu.backends.common.tiles import restore_positions
from dualgpu.compiled.arrays import make_dual_array

__all__ = ["ENABLED", "LAUNCHES", "MAX_GRID_Z", "plan", "grid_with_tiles", "uses_third_dimension",
           "tiles_source", "tiles_kernel", "flat_arguments", "dual_mask"]

#: CUDA's limit on gridDim.z.
MAX_GRID_Z = 65535

#: False: always one launch per tile (to compare the two paths, or rule this one out).
ENABLED = True

#: Tiled dual launches so far by path: ``"one"`` (all tiles in one launch) and
#: ``"per_tile"`` (benchmarks/gpu_check.py reports them).
LAUNCHES = {"one": 0, "per_tile": 0}


def grid_with_tiles(griddim, tiles):
    """``griddim`` with a third dimension of ``tiles`` blocks; None if it has one already."""
    grid = tuple(int(g) for g in griddim) if hasattr(griddim, "__len__") else (int(griddim),)
    if len(grid) == 3:
        if grid[2] != 1:
            return None
        grid = grid[:2]
    if tiles > MAX_GRID_Z:
        return None
    return grid + (1,) * (2 - len(grid)) + (int(tiles),)


def _functions(py_func, seen):
    """``py_func`` and every dualgpu device function it calls (None: one dualgpu cannot read)."""
    if py_func in seen:
        return seen
    seen.add(py_func)
    names = global_names(py_func.__code__)
    values = [py_func.__globals__.get(n) for n in names]
    for cell in py_func.__closure__ or ():
        try:
            values.append(cell.cell_contents)
        except ValueError:
            pass
    for value in values:
        if getattr(value, "__dualgpu_device__", False) is True:
            inner = device_py_func(value)
            if inner is None:
                return None
            if _functions(inner, seen) is None:
                return None
        elif type(value).__module__.startswith("numba") and hasattr(value, "py_func"):
            # a function compiled by numba itself (cuda.jit(device=True), njit): read its source
            if not callable(value.py_func) or _functions(value.py_func, seen) is None:
                return None
    return seen


@functools.lru_cache(maxsize=None)
def uses_third_dimension(py_func):
    """True if ``py_func`` or a device function it calls may read the grid's third dimension."""
    functions = _functions(py_func, set())
    if functions is None:
        return True
    for fn in functions:
        names = global_names(fn.__code__)
        if "z" in names and names & {"blockIdx", "gridDim"}:
            return True
        if names & {"grid", "gridsize"} and _grid_call_beyond_two(fn):
            return True
    return False


def _grid_call_beyond_two(fn):
    """True if ``fn`` may call ``grid(n)`` / ``gridsize(n)`` with n other than 1 or 2."""
    try:
        tree = function_source(fn, "kernel or device function", "cuda").tree
    except DualgpuError:
        return True
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            callee = node.func.attr if isinstance(node.func, ast.Attribute) else (
                node.func.id if isinstance(node.func, ast.Name) else None)
            if callee in ("grid", "gridsize"):
                if not (len(node.args) == 1 and isinstance(node.args[0], ast.Constant)
                        and node.args[0].value in (1, 2)):
                    return True
    return False


def plan(kernel, args, griddim, tiles, sharedmem, static_limit):
    """The 3-D grid that runs all ``tiles`` at once, or None to run them one launch each.

    ``kernel`` is the :class:`dualgpu.backends.gpu.kernel.GpuKernel`.
    """
    if not ENABLED or tiles < 2 or sharedmem > static_limit or kernel.grid_group:
        return None
    if any(isinstance(a, Dual) for a in args):
        return None
    grid = grid_with_tiles(griddim, tiles)
    if grid is None or uses_third_dimension(kernel.py_func):
        return None
    if restore_positions(kernel.py_func, args):
        return None
    return grid


def dual_mask(args):
    """Which arguments are DualArrays (a tuple of bools: the wrapper's shape)."""
    return tuple(isinstance(a, DualArray) for a in args)


def flat_arguments(args):
    """The wrapper kernel's arguments: each DualArray as its values and its partials."""
    flat = []
    for arg in args:
        if isinstance(arg, DualArray):
            flat += [arg.values, arg.partials]
        else:
            flat.append(arg)
    return flat


def tiles_source(mask, name="_dg_tiles"):
    """Source of the wrapper kernel for arguments whose DualArrays are marked in ``mask``."""
    params, call = [], []
    for k, dual in enumerate(mask):
        if dual:
            params += [f"a{k}_values", f"a{k}_partials"]
            call.append(f"make(a{k}_values, a{k}_partials[t * N:(t + 1) * N], N)")
        else:
            params.append(f"a{k}")
            call.append(f"a{k}")
    return (f"def {name}({', '.join(params)}):\n"
            f"    t = cuda.blockIdx.z\n"
            f"    body({', '.join(call)})\n")


def tiles_kernel(body, mask, lanes, cuda_module, name="_dg_tiles"):
    """The wrapper (a plain Python function) calling ``body`` on lane tiles of ``lanes`` lanes.

    ``body`` is the kernel's N-lane dual specialisation compiled as a device function and
    ``cuda_module`` the module the wrapper reads ``blockIdx`` from (numba.cuda on the GPU).
    Compile the result with that module's ``jit``.
    """
    source = tiles_source(mask, name)
    filename = f"<dualgpu lane tiles {name} {''.join('d' if d else 'p' for d in mask)} {lanes}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"cuda": cuda_module, "body": body, "make": make_dual_array, "N": int(lanes)}
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]
