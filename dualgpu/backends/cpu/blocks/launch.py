"""Build and launch block-level kernels on the cpu backend (:class:`BlockLauncher`).

A :class:`BlockLauncher` belongs to one :class:`~dualgpu.backends.cpu.kernel.CpuKernel`
whose translation is block-level. It prepares and cuts the kernel once
(:mod:`.prepare`, :mod:`.structure`); per lane count and argument types it
learns the kernel's variable types with numba's type inference over a typing
function, then generates and compiles the team function and its launcher
(:mod:`.codegen`). Launches check their configuration (dynamic shared memory
given when the kernel declares it) and turn a barrier violation found while
running into a :class:`~dualgpu.errors.DualgpuError` naming the construct, its
line, the block and the thread.
"""
import numba
import numpy as np
from numba import njit, types
from numba.core import compiler
from numba.core.errors import TypingError
from numba.core.registry import cpu_target
from numba.core.typed_passes import type_inference_stage
from numba.extending import overload

from dualgpu.compiled.arrays import DualArrayType, make_dual_array
from dualgpu.compiled.types import DualType, type_mode
from dualgpu.core.dual import Dual
from dualgpu.core.dualarray import DualArray
from dualgpu.errors import DualgpuError
from dualgpu.backends.common import translate as _translate
from dualgpu.backends.cpu import COMPILED_CODE_ONLY, parallel as cpu_parallel
from dualgpu.backends.cpu.blocks import runtime
from dualgpu.backends.cpu.blocks import storage
from dualgpu.backends.cpu.blocks.codegen import (
    Layout, launcher_source, team_tree, typing_function_tree,
)
from dualgpu.backends.cpu.blocks.prepare import prepare
from dualgpu.backends.cpu.blocks.runtime import DIVERGENT, MASK_ABSENT, MASK_SELF, SOURCE_INACTIVE
from dualgpu.backends.cpu.blocks.structure import build
from dualgpu.backends.cpu.translation import is_nrt_error

__all__ = ["BlockLauncher", "zeros_dual"]

_ERR_SIZE = 8


def zeros_dual(shape, dtype, lanes):
    """A zeroed DualArray (``lanes`` partials); usable from compiled code."""
    shape = tuple(shape)
    return DualArray(np.zeros(shape, dtype), np.zeros((lanes,) + shape, dtype))


def zeros_tracer(shape, dtype, lanes):
    """A zeroed tracer DualArray (``lanes`` uint64 dependency lanes): sparsity detection."""
    shape = tuple(shape)
    return DualArray(np.zeros(shape, dtype), np.zeros((lanes,) + shape, np.uint64))


def zeros_global_tracer(shape, dtype, lanes):
    """A zeroed global tracer DualArray (``lanes`` int64 lanes): global sparsity detection."""
    shape = tuple(shape)
    return DualArray(np.zeros(shape, dtype), np.zeros((lanes,) + shape, np.int64))


@overload(zeros_dual, prefer_literal=True)
def _zeros_dual(shape, dtype, lanes):
    if not isinstance(lanes, types.IntegerLiteral):
        raise TypingError("zeros_dual: lanes must be a compile-time constant")

    def impl(shape, dtype, lanes):
        return make_dual_array(np.zeros(shape, dtype), np.zeros((lanes,) + shape, dtype),
                               lanes)

    return impl


@overload(zeros_tracer, prefer_literal=True)
def _zeros_tracer(shape, dtype, lanes):
    if not isinstance(lanes, types.IntegerLiteral):
        raise TypingError("zeros_tracer: lanes must be a compile-time constant")

    def impl(shape, dtype, lanes):
        return make_dual_array(np.zeros(shape, dtype),
                               np.zeros((lanes,) + shape, np.uint64), lanes)

    return impl


@overload(zeros_global_tracer, prefer_literal=True)
def _zeros_global_tracer(shape, dtype, lanes):
    if not isinstance(lanes, types.IntegerLiteral):
        raise TypingError("zeros_global_tracer: lanes must be a compile-time constant")

    def impl(shape, dtype, lanes):
        return make_dual_array(np.zeros(shape, dtype),
                               np.zeros((lanes,) + shape, np.int64), lanes)

    return impl


def _runtime_globals(lanes, tracer=False):
    values = {
        "_dg_np": np, "_dg_slot_put": storage.slot_put, "_dg_slot_get": storage.slot_get,
        "_dg_slots_new": storage.slots_new, "_dg_slots_release": storage.slots_release,
        "_dg_check_sync": runtime.check_sync, "_dg_vote_block": runtime.vote_block,
        "_dg_warp_op": runtime.warp_op, "_dg_to_i32": runtime.to_i32,
        "_dg_value_of": runtime.value_of, "_dg_lanemask_lt": runtime.lanemask_lt,
        "_dg_zeros_dual": (zeros_global_tracer if tracer == "global" else zeros_tracer)
        if tracer else zeros_dual, "_dg_lanes": lanes,
        "_dg_lane_dtype": (np.int64 if tracer == "global" else np.uint64) if tracer else None,
    }
    if lanes:
        values["_dg_make_dual_array"] = make_dual_array
    return values


def _infer_types(function, argtypes):
    """numba's type of every variable of ``function`` for ``argtypes`` (type inference only)."""
    typingctx = cpu_target.typing_context
    targetctx = cpu_target.target_context
    typingctx.refresh()
    targetctx.refresh()
    func_ir = compiler.run_frontend(function)
    result = type_inference_stage(typingctx, targetctx, func_ir, tuple(argtypes), None)
    return result.typemap


def _layout(a):
    flags = a.flags
    return "C" if flags.c_contiguous else "F" if flags.f_contiguous else "A", flags.writeable


def _fingerprint(arg):
    """A cheap hashable stand-in for ``numba.typeof(arg)`` (None: use numba.typeof)."""
    if isinstance(arg, np.ndarray):
        return ("array", arg.dtype, arg.ndim) + _layout(arg)
    kind = type(arg)
    if kind in (int, float, bool, complex) or isinstance(arg, np.generic):
        return (kind,)
    # a dual's numba type also holds the type mode (the defined rules, NaN-safe): a launcher
    # built (its per-thread storage typed) under another mode must not be reused
    if kind is Dual:
        return (Dual, arg.dtype, arg.lanes, type_mode())
    values, partials = getattr(arg, "values", None), getattr(arg, "partials", None)
    if isinstance(values, np.ndarray) and isinstance(partials, np.ndarray):  # a host DualArray
        return ("dual array", values.dtype, partials.dtype, values.ndim, partials.shape[0],
                type_mode()) + _layout(values) + _layout(partials)
    return None


class _Built:
    def __init__(self, launcher, nrt):
        self.launcher = launcher
        self.nrt = nrt
        self.compiled = False  # compiled before helper threads may call it


class BlockLauncher:
    """Runs one block-level kernel (a :class:`~dualgpu.backends.cpu.kernel.CpuKernel`'s
    translation).

    Parameters
    ----------
    translation : dualgpu.backends.cpu.translation.Translation
        The kernel's translation (``block_level`` true).
    runtime_names, context_names : iterable of str
        The cpu backend's runtime helper names and thread-context parameter names.
    fastmath : bool
    """

    def __init__(self, translation, runtime_names, context_names, fastmath=False):
        self.translation = translation
        self.name = translation.py_func.__qualname__
        self.context_names = tuple(context_names)
        self.fastmath = fastmath
        self.prepared = prepare(translation, runtime_names, context_names)
        self.structure = build(self.prepared)
        self.grid = self.prepared.uses_grid_sync
        self.dynamic = [s for s in self.prepared.of_kind("shared") if s.shape == (0,)]
        self._built = {}
        self._nrt = set()
        self._fast = {}  # (lanes, argument fingerprints, parallel) -> compiled launcher

    # -- building ----------------------------------------------------------------------
    def _values(self, lanes, tracer=False):
        values = dict(self.prepared.values)
        values.update(_runtime_globals(lanes, tracer))
        for name, device in self.prepared.devices.items():
            values[name] = device.build(lanes, self.fastmath, tracer=tracer)
        return values

    def _types(self, layout, values, argtypes):
        tree, extra = typing_function_tree(layout, self.context_names)
        typing_values = dict(values)
        typing_values.update(runtime.typing_stubs())
        function = _translate.compile_function(tree, typing_values, self.prepared.filename)
        typemap = _infer_types(function, list(argtypes) + extra)
        found = {}
        for name in self.structure.kept:
            ty = typemap.get(name)
            if ty is not None and ty is not types.undefined:
                found[name] = types.unliteral(ty)
        for site in layout.payloads:
            ty = types.unliteral(typemap[site.operands[1]])
            if site.kind in ("match_any", "match_all"):
                ty = getattr(ty, "dtype", ty) if _is_dual(ty) else ty
            found[f"xv{site.index}"] = ty
        return found

    def _build(self, lanes, argtypes, nrt):
        tracer = _traces(argtypes) if lanes else False
        layout = Layout(self.prepared, self.structure, self.grid, lanes, tracer)
        values = self._values(lanes, tracer)
        found = self._types(layout, values, argtypes)
        layout.types = {k: v for k, v in found.items() if not k.startswith("xv")}
        for name, ty in found.items():
            values[f"_dg_T_{name}"] = ty
        layout.team_arrays()  # registers the dtype globals
        values.update(layout.globals)
        team = _translate.compile_function(team_tree(layout), values, self.prepared.filename)
        # called by the block launcher only
        team = njit(fastmath=self.fastmath, error_model="numpy", _nrt=nrt,
                    **COMPILED_CODE_ONLY)(team)
        launcher_values = dict(values)
        launcher_values["_dg_team"] = team
        source = launcher_source(layout, release=nrt)
        launcher_values["_dg_claim"] = cpu_parallel.claim
        launcher_values["_dg_finish"] = cpu_parallel.finish
        function = _translate.compile_source(
            source, launcher_values, "_dg_launch", f"cpu block launcher of {self.name}")
        # serial and parallel launches share it: nogil, so helper threads run it beside
        # the caller (numba's prange compiled a second launcher, as long to build again)
        # (called from Python only: no C wrapper)
        return _Built(njit(error_model="numpy", nogil=True, no_cfunc_wrapper=True)(function),
                      nrt)

    def _launcher(self, lanes, argtypes):
        nrt = (lanes, argtypes) in self._nrt
        key = (lanes, argtypes, nrt)
        built = self._built.get(key)
        if built is None:
            built = self._built[key] = self._build(lanes, argtypes, nrt)
        return built

    # -- launching ---------------------------------------------------------------------
    def launch(self, g, b, sharedmem, args, lanes, parallel):
        """Run the kernel over grid ``g`` and block ``b`` (3-tuples) with ``args``.

        ``sharedmem``: bytes of dynamic shared memory per block; ``parallel``:
        whether blocks may run on several cores (grid-sync kernels never do).
        """
        sharedmem = self._check_sharedmem(sharedmem)
        blocks = g[0] * g[1] * g[2]
        workers = 1
        if parallel and not self.grid and blocks > 1:
            workers = max(1, min(blocks, cpu_parallel.available_threads()))
        errs = np.zeros((workers, _ERR_SIZE), np.int64)
        # launches are frequent: find the launcher by a cheap fingerprint of the arguments
        fingerprint = tuple(_fingerprint(a) for a in args)
        fast = None if None in fingerprint else (lanes, fingerprint)
        built = self._fast.get(fast) if fast is not None else None
        if built is None:
            argtypes = tuple(numba.typeof(a) for a in args)
            built = self._launcher(lanes, argtypes)
        try:
            self._run(built, args, g, b, sharedmem, workers, errs)
        except numba.core.errors.NumbaError as exc:
            argtypes = tuple(numba.typeof(a) for a in args)
            if (lanes, argtypes) in self._nrt or not is_nrt_error(exc):
                raise
            self._nrt.add((lanes, argtypes))  # something in the kernel allocates
            self._fast.clear()
            errs[:] = 0
            built = self._launcher(lanes, argtypes)
            self._run(built, args, g, b, sharedmem, workers, errs)
        if fast is not None:
            self._fast[fast] = built
        for row in errs:
            if row[0]:
                raise DualgpuError(self._message(row, g, b))

    @staticmethod
    def _run(built, args, g, b, sharedmem, workers, errs):
        """Run ``built``'s launcher, its workers claimed by the caller and ``workers - 1``
        helper threads (:func:`dualgpu.backends.cpu.parallel.run_parallel`)."""
        control = cpu_parallel.control_array()
        arguments = (*args, *g, *b, sharedmem, workers, errs, control)
        if workers > 1 and not built.compiled:  # compile before helpers may call it
            cpu_parallel.compile_here(built.launcher, arguments)
        cpu_parallel.run_parallel(built.launcher, arguments, control, workers)
        built.compiled = True  # (a serial launch compiled it on this thread)

    def _check_sharedmem(self, sharedmem):
        if isinstance(sharedmem, bool) or not isinstance(sharedmem, (int, np.integer)) \
                or sharedmem < 0:
            raise DualgpuError(
                f"kernel {self.name!r}: the dynamic shared memory size (the 4th launch "
                f"parameter) must be a number of bytes >= 0; got {sharedmem!r}."
            )
        sharedmem = int(sharedmem)
        if self.dynamic and sharedmem == 0:
            site = self.dynamic[0]
            raise DualgpuError(
                f"kernel {self.name!r} declares dynamic shared memory ({site.text} at line "
                f"{site.line} of {site.where}) but was launched without any: give its size in "
                "bytes as the 4th launch parameter, kernel[blocks, threads, 0, nbytes](...), "
                "as numba.cuda needs too."
            )
        return sharedmem

    def _message(self, row, g, b):
        code, index, t, a, c = (int(v) for v in row[:5])
        site = self.prepared.sites[index]
        bs = b[0] * b[1] * b[2]
        block_linear = t // bs if self.grid else None
        if block_linear is None:
            block = (int(row[5]), int(row[6]), int(row[7]))
        else:
            bz, rest = divmod(block_linear, g[0] * g[1])
            by, bx = divmod(rest, g[0])
            block = (bx, by, bz)
        local = t % bs
        thread = (local % b[0], (local // b[0]) % b[1], local // (b[0] * b[1]))
        lane = local % 32
        if code == DIVERGENT:
            scope = "grid" if site.kind == "grid_sync" else f"block {block}"
            return (
                f"{site.describe()} was reached by {a} of the {c} threads of the {scope} that "
                f"have not returned; thread {thread} of block {block} did not reach it (it took "
                "another branch or loop iteration). CUDA requires every thread that has not "
                "returned to reach a barrier together (anything else is undefined behaviour, "
                "and hangs or gives wrong results on a GPU). Make the branch or loop around the "
                "barrier the same for all threads, and keep the per-thread work inside it."
            )
        if code == MASK_SELF:
            return (
                f"{site.describe()}: lane {lane} (thread {thread} of block {block}) passes the "
                f"mask {a & 0xFFFFFFFF:#010x}, which leaves the lane itself out. The mask names "
                "the lanes that call together and must include the caller (0xFFFFFFFF for a "
                "whole warp)."
            )
        if code == MASK_ABSENT:
            other = a % bs % 32
            return (
                f"{site.describe()}: lane {other} is named in the mask {c & 0xFFFFFFFF:#010x} of "
                f"lane {lane} (thread {thread} of block {block}) but does not make this call "
                "(it took another branch, or waits at another one). CUDA requires every "
                "named lane that has not returned to call it together; leave lanes that do not "
                "call out of the mask."
            )
        if code == SOURCE_INACTIVE:
            return (
                f"{site.describe()}: lane {lane} (thread {thread} of block {block}) reads lane "
                f"{c}, which does not take part in the shuffle (it has returned, lies beyond the "
                f"block's {bs} threads, or is elsewhere in the kernel); on a GPU the value read "
                "is undefined. Keep every lane a shuffle reads alive (compute with a neutral "
                "value instead of returning early) and launch whole warps."
            )
        # pragma: no cover - every code is handled above
        return f"{site.describe()}: error {code} in the cpu backend's block runner."


def _traces(argtypes):
    """The tracer mode of the launch's dual arguments (True: local, "global", or False)."""
    for ty in argtypes:
        if isinstance(ty, (DualType, DualArrayType)) and getattr(ty, "tracer", False):
            return ty.tracer
    return False


def _is_dual(ty):
    return isinstance(ty, DualType)
