"""Assemble every dual kernel of the simulations to SASS with ptxas, without a GPU.

For each simulation in :data:`benchmarks.gpu_check.SIMULATIONS` the kernels'
argument types are recorded from one small run on the cpu backend (plain, and
with the differentiated input a DualArray: every float array the simulation
allocates through ``dualgpu.cuda`` is then dual). Each kernel is then compiled
as the GPU backend prepares it (``dualgpu.backends.gpu.kernel.prepare_function``) to
PTX for sm_90 with ``numba.cuda.compile_ptx`` at 0 (plain), 1, 8 and 16 lanes,
and assembled with ``ptxas -v``, which reports registers per thread and bytes
spilled. That is GPU register pressure known without a GPU.

``ptxas`` comes from the ``nvidia-cuda-nvcc`` wheel (the ``test`` extra), found
through the installed ``nvidia`` package, else on ``PATH``.

Usage::

    python benchmarks/sass.py                 # table for every simulation
    python benchmarks/sass.py --only nbody --lanes 8 16
"""
import argparse
import contextlib
import glob
import importlib
import importlib.util
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

__all__ = [
    "ARCH", "LANES", "find_ptxas", "assemble", "offline_device", "record_kernel_types",
    "kernel_types", "sass_report", "main",
]

#: The target GPU architecture (Hopper).
ARCH = "sm_90"
CC = (9, 0)
#: Lane counts assembled (0: the plain kernel).
LANES = (0, 1, 8, 16)

_PTXAS_LINE = re.compile(r"Compiling entry function '([^']+)'")
_USED = re.compile(r"Used (\d+) registers")
_SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
_STACK = re.compile(r"(\d+) bytes stack frame")


def find_ptxas():
    """Return the path of ``ptxas`` (nvidia-cuda-nvcc wheel, else PATH), or None."""
    spec = importlib.util.find_spec("nvidia")
    roots = list(spec.submodule_search_locations or ()) if spec else []
    for root in roots:
        for candidate in sorted(glob.glob(os.path.join(root, "*", "bin", "ptxas")), reverse=True):
            if os.access(candidate, os.X_OK):
                return candidate
    from shutil import which

    return which("ptxas")


def assemble(ptx, arch=ARCH, ptxas=None):
    """Assemble ``ptx`` with ``ptxas -v``; return ``{entry: {"registers", "spill_stores",
    "spill_loads", "stack"}}`` (bytes for the last three).

    Raises ``RuntimeError`` with ptxas's message when it does not assemble.
    """
    ptxas = ptxas or find_ptxas()
    if ptxas is None:
        raise RuntimeError("ptxas not found: pip install 'nvidia-cuda-nvcc>=13,<14' "
                           "(the test extra of dualgpu).")
    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, "kernel.ptx")
        with open(source, "w") as fh:
            fh.write(ptx)
        proc = subprocess.run([ptxas, f"-arch={arch}", "-v", "-O3", source, "-o",
                               os.path.join(tmp, "kernel.cubin")],
                              capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"ptxas failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    entries = {}
    current = None
    for line in proc.stderr.splitlines():
        match = _PTXAS_LINE.search(line)
        if match:
            current = entries.setdefault(match.group(1), {"registers": 0, "spill_stores": 0,
                                                          "spill_loads": 0, "stack": 0})
            continue
        if current is None:
            continue
        if (m := _USED.search(line)):
            current["registers"] = int(m.group(1))
        if (m := _SPILL.search(line)):
            current["spill_stores"], current["spill_loads"] = int(m.group(1)), int(m.group(2))
        if (m := _STACK.search(line)):
            current["stack"] = int(m.group(1))
    return entries


@contextlib.contextmanager
def offline_device(cc=CC):
    """Let ``compile_ptx`` compile kernels that call device functions without a GPU.

    numba-cuda asks the driver for the current device's compute capability when
    it compiles a device function; this makes that lookup answer ``cc`` within
    the block (the same shim as the tests' ``offline_ptx`` fixture).
    """
    import numba.cuda.dispatcher as dispatcher

    class Device:
        compute_capability = cc

    original = dispatcher.get_current_device
    dispatcher.get_current_device = lambda: Device()
    try:
        yield cc
    finally:
        dispatcher.get_current_device = original


def _typeof(arg):
    import numba

    return numba.typeof(arg)


@contextlib.contextmanager
def record_kernel_types(seen):
    """Within the block, every cpu-backend launch adds ``{py_func: argument types}`` to ``seen``."""
    from dualgpu.backends.cpu.kernel import CpuKernel

    original = CpuKernel.launch

    def launch(self, griddim, blockdim, args, sharedmem=0):
        seen.setdefault(self.py_func, tuple(_typeof(a) for a in args))
        return original(self, griddim, blockdim, args, sharedmem)

    CpuKernel.launch = launch
    try:
        yield seen
    finally:
        CpuKernel.launch = original


def kernel_types(name, lanes=8, size=1):
    """Return ``{kernel name: (py_func, plain types, dual types)}`` of simulation ``name``.

    The dual types come from a run with ``lanes`` lanes; :func:`retype` changes
    the lane count.
    """
    import dualgpu
    from dualgpu import DualArray
    from dualgpu.core import _context  # internal: duals of a given lane count while compiling

    from benchmarks.gpu_check import SIMULATIONS

    module_name, build, kwargs = SIMULATIONS[name]
    module = importlib.import_module(module_name)
    args, argnum = build(module, size)
    kwargs = dict(kwargs, n_steps=1)
    plain, dual = {}, {}
    with dualgpu.using_backend("cpu"):
        with record_kernel_types(plain):
            module.simulate(*args, **kwargs)
        seeded = list(args)
        value = np.asarray(args[argnum], dtype=np.float64)
        seeded[argnum] = DualArray(value.copy(), np.zeros((lanes,) + value.shape))
        with record_kernel_types(dual), _context.dual_allocation(lanes):
            module.simulate(*seeded, **kwargs)
    return {py_func.__name__: (py_func, plain[py_func], dual.get(py_func))
            for py_func in plain}


def retype(types_, lanes):
    """The argument types with every dual (array or scalar) given ``lanes`` lanes; 0: plain."""
    from numba import types as nt

    from dualgpu.compiled.arrays import DualArrayType
    from dualgpu.compiled.types import DualType, dual_type

    out = []
    for t in types_:
        if isinstance(t, DualArrayType):
            out.append(t.values_type if lanes == 0 else DualArrayType(
                t.values_type, nt.Array(t.partials_type.dtype, t.partials_type.ndim,
                                        t.partials_type.layout), lanes))
        elif isinstance(t, DualType):
            out.append(t.dtype if lanes == 0 else dual_type(t.dtype, lanes, t.tracer))
        else:
            out.append(t)
    return tuple(out)


def kernel_sass(py_func, types_, lanes):
    """Assemble the GPU backend's kernel for ``py_func`` at ``lanes``; return its ptxas numbers."""
    import numba.cuda

    from dualgpu.backends.gpu import kernel as gpu

    with offline_device():
        ptx, _ = numba.cuda.compile_ptx(gpu.prepare_function(py_func, lanes), retype(types_, lanes),
                                        cc=CC)
    entries = assemble(ptx)
    (entry,) = entries.values()
    return entry


def tiles_sass(py_func, types_, lanes):
    """ptxas numbers of the GPU backend's one-launch lane-tile wrapper of ``py_func`` at
    ``lanes`` lanes per tile (:mod:`dualgpu.backends.gpu.tile_grid`); None where a launch
    with these types never takes that path (a Dual scalar argument)."""
    import numba.cuda
    from numba import types as nt

    from dualgpu.backends.gpu import kernel as gpu
    from dualgpu.compiled.arrays import DualArrayType
    from dualgpu.compiled.types import DualType

    mask, flat = [], []
    for t in retype(types_, lanes):
        if isinstance(t, DualType):
            return None
        mask.append(isinstance(t, DualArrayType))
        if isinstance(t, DualArrayType):
            flat += [t.values_type, nt.Array(t.dtype, t.ndim + 1, "C")]
        else:
            flat.append(t)
    with offline_device():
        wrapper = gpu.compile_kernel(py_func).tiles_dispatcher(tuple(mask), lanes)
        ptx, _ = numba.cuda.compile_ptx(wrapper.py_func, tuple(flat), cc=CC)
    (entry,) = assemble(ptx).values()
    return entry


def sass_report(names=None, lanes=LANES):
    """Return rows ``{"simulation", "kernel", "lanes", "registers", "spill_stores", ...}``;
    a dual row also has ``"one_launch"``: the same for the one-launch tile wrapper (or None)."""
    from benchmarks.gpu_check import SIMULATIONS

    rows = []
    for name in names or SIMULATIONS:
        for kernel, (py_func, plain, dual) in kernel_types(name).items():
            for n in lanes:
                types_ = plain if n == 0 or dual is None else dual
                row = {"simulation": name, "kernel": kernel, "lanes": n}
                try:
                    row.update(kernel_sass(py_func, types_, n))
                    if n and dual is not None:
                        row["one_launch"] = tiles_sass(py_func, types_, n)
                except Exception as exc:  # reported, the others still run
                    row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                rows.append(row)
    return rows


def format_rows(rows):
    """The report as text: registers (spilled bytes) per kernel and lane count."""
    lanes = sorted({r["lanes"] for r in rows})
    head = f"{'simulation':12s} {'kernel':22s}" + "".join(
        f" {('plain' if n == 0 else f'N={n}'):>14s}" for n in lanes)
    lines = [f"ptxas -arch={ARCH}: registers per thread (bytes spilled)", head]
    by_kernel = {}
    for r in rows:
        by_kernel.setdefault((r["simulation"], r["kernel"]), {})[r["lanes"]] = r
    for (sim, kernel), per in by_kernel.items():
        cells = []
        for n in lanes:
            r = per.get(n)
            if r is None:
                cells.append(f" {'-':>14s}")
            elif "error" in r:
                cells.append(f" {'FAILED':>14s}")
            else:
                spill = r["spill_stores"] + r["spill_loads"]
                cells.append(f" {r['registers']:>7d} ({spill:>4d})")
        lines.append(f"{sim:12s} {kernel:22s}" + "".join(cells))
    dual_lanes = [n for n in lanes if n]
    lines += ["", "the same kernels inside the one-launch lane-tile wrapper (all tiles of a "
                  "launch over a third grid dimension, where the kernel allows it; '-': a launch "
                  "with a Dual scalar, never on that path)",
              f"{'simulation':12s} {'kernel':22s}" + "".join(f" {f'N={n}':>14s}"
                                                          for n in dual_lanes)]
    for (sim, kernel), per in by_kernel.items():
        cells = []
        for n in dual_lanes:
            entry = per.get(n, {}).get("one_launch")
            if entry is None:
                cells.append(f" {'-':>14s}")
            else:
                spill = entry["spill_stores"] + entry["spill_loads"]
                cells.append(f" {entry['registers']:>7d} ({spill:>4d})")
        lines.append(f"{sim:12s} {kernel:22s}" + "".join(cells))
    return "\n".join(lines)


def main(argv=None):
    from benchmarks.gpu_check import SIMULATIONS

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", action="append", choices=sorted(SIMULATIONS))
    parser.add_argument("--lanes", nargs="+", type=int, default=list(LANES))
    args = parser.parse_args(argv)
    if find_ptxas() is None:
        print("sass: ptxas not found; pip install 'nvidia-cuda-nvcc>=13,<14'", file=sys.stderr)
        return 1
    rows = sass_report(args.only, tuple(args.lanes))
    print(format_rows(rows))
    failed = [r for r in rows if "error" in r]
    for r in failed:
        print(f"FAILED {r['simulation']}.{r['kernel']} N={r['lanes']}: {r['error']}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
