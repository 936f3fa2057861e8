"""LLVM options for the cpu backend's loops (the one place dualgpu sets any), and inlining.

A dual kernel's launch loop reads and writes ``1 + N`` rows per array (the
values and N lanes of partials). LLVM vectorises such a loop across threads
only after checking at run time that the rows it stores to do not overlap the
ones it loads from; by default it gives up beyond 8 such checks ("loop not
vectorized: too many memory checks needed"), which a dual stencil reaches at
N = 8. Measured on the 1-D heat stencil, 10^5 cells (2-core AMD EPYC,
AVX-512): 0.91 ns per cell and lane at N = 8 with the default limits, 0.38 ns
with the limits below (N = 16: 1.67 and 0.6 ns). The checks run once per loop
entry, not per iteration.

These are process-wide LLVM command-line options, so they also apply to any
other numba code compiled in the process (they only allow more loops to be
vectorised, with run-time checks that keep them correct). Set the
environment variable ``DUALGPU_LLVM_TUNING=0`` before importing dualgpu's cpu
backend to leave LLVM's defaults alone.

:func:`slp_vectorize` turns on LLVM's SLP vectoriser (numba leaves it off) while a
compute-bound kernel's lanes-last launcher compiles: it is what packs a tile's lane
operations into vector instructions (see :mod:`dualgpu.backends.cpu.lanes_last`).

:func:`inline_every_overload` marks a thread function's compiled code for LLVM to
inline into the launcher's loop. It and :func:`slp_vectorize` (a wrapper around numba's
final-module optimisation) are the two places the cpu backend reaches into numba's
internals (numba 0.68).
"""
import contextlib
import os
import threading

__all__ = ["LOOP_OPTIONS", "tune", "inline_every_overload", "function_attributes_apply",
           "slp_vectorize"]

#: ``-option=value`` strings passed to LLVM (llvmlite's ``set_option``).
LOOP_OPTIONS = (
    "-runtime-memory-check-threshold=1024",
    "-vectorize-memory-check-threshold=1024",
    "-memory-check-merge-threshold=1024",
)

_DONE = []


def tune():
    """Set :data:`LOOP_OPTIONS` once per process (unless ``DUALGPU_LLVM_TUNING=0``); return them."""
    if _DONE:
        return _DONE[0]
    applied = ()
    if os.environ.get("DUALGPU_LLVM_TUNING", "1").strip() not in ("0", "false", "no"):
        try:
            import llvmlite.binding as llvm

            for option in LOOP_OPTIONS:
                llvm.set_option("dualgpu", option)
            applied = LOOP_OPTIONS
        except Exception:  # pragma: no cover - another llvmlite: loops just vectorise less
            applied = ()
    _DONE.append(applied)
    return applied


def inline_every_overload(dispatcher):
    """Ask LLVM to inline every compiled overload of ``dispatcher`` into its callers.

    LLVM inlines a small thread function into the launcher's loop by itself,
    but not a large one (a kernel with many array arguments, or any dual
    kernel): a call per CUDA thread then costs 5-10 ns and blocks
    vectorisation. Each new overload's linkable LLVM module gets the
    ``alwaysinline`` attribute before any launcher links it in. If numba's
    internals change, or where llvmlite cannot add the attribute
    (:func:`function_attributes_apply`), this does nothing (launches stay correct, only
    slower); tests/backends/cpu/test_cpu_backend.py checks that it still works.
    """
    if not function_attributes_apply():
        return  # llvmlite 0.47: the launches stay correct, the thread function is a call
    original = dispatcher.add_overload

    def add_overload(cres, *args, **kwargs):
        try:
            module = cres.library._get_module_for_linking()
            function = module.get_function(cres.fndesc.llvm_func_name)
            if b"noinline" not in list(function.attributes):  # (str() of it is a repr)
                function.add_function_attribute("alwaysinline")
        except Exception:  # pragma: no cover - only with other numba versions
            pass
        return original(cres, *args, **kwargs)

    try:
        dispatcher.add_overload = add_overload
    except AttributeError:  # pragma: no cover - only with other numba versions
        pass


_ATTRIBUTES_APPLY = []


def function_attributes_apply():
    """True where llvmlite's ``add_function_attribute`` marks the function itself.

    llvmlite 0.47 (numba 0.65) puts the attribute on the function's return value, and the
    module then fails LLVM's verifier (``RuntimeError: Attribute 'alwaysinline' does not apply
    to function return values``): there :func:`inline_every_overload` does nothing. Checked
    once per process on a one-function module.
    """
    if not _ATTRIBUTES_APPLY:
        try:
            import llvmlite.binding as llvm

            module = llvm.parse_assembly("define void @probe() {\n  ret void\n}\n")
            function = module.get_function("probe")
            function.add_function_attribute("alwaysinline")
            module.verify()
            _ATTRIBUTES_APPLY.append(b"alwaysinline" in list(function.attributes))
        except Exception:  # noqa: BLE001  (a verifier error or another llvmlite)
            _ATTRIBUTES_APPLY.append(False)
    return _ATTRIBUTES_APPLY[0]


#: Function names whose final LLVM module the SLP vectoriser runs on inside
#: :func:`slp_vectorize` (the cpu backend's launchers).
SLP_FUNCTIONS = ("_dg_launch",)

_SLP = threading.local()
_HOOK = []


def _install_final_module_hook():
    """Wrap numba's final-module optimisation so that :func:`slp_vectorize` reaches only
    the launcher's own module (once per process; False if numba's internals changed)."""
    if _HOOK:
        return _HOOK[0]
    try:
        from numba.core import codegen, config

        original = codegen.CPUCodeLibrary._optimize_final_module

        def optimize_final_module(self):
            if getattr(_SLP, "depth", 0) and any(f in self.name for f in SLP_FUNCTIONS):
                previous = config.SLP_VECTORIZE
                config.SLP_VECTORIZE = 1
                try:
                    return original(self)
                finally:
                    config.SLP_VECTORIZE = previous
            return original(self)

        codegen.CPUCodeLibrary._optimize_final_module = optimize_final_module
        _HOOK.append(True)
    except Exception:  # pragma: no cover - another numba: lane loops stay scalar
        _HOOK.append(False)
    return _HOOK[0]


@contextlib.contextmanager
def slp_vectorize():
    """Within the block, a cpu-backend launcher compiles with LLVM's SLP vectoriser on.

    numba leaves the SLP vectoriser off (``NUMBA_SLP_VECTORIZE``). Here it runs on the
    launcher's final module only, after LLVM has inlined the thread function and the
    dual operations into it: the functions and overloads numba compiles meanwhile (and
    keeps for later callers) stay scalar, so they never carry packed lane operations
    into a memory-bound kernel, whose loop over threads LLVM vectorises instead. Calls
    that compile nothing cost a thread-local counter.
    """
    _install_final_module_hook()
    _SLP.depth = getattr(_SLP, "depth", 0) + 1
    try:
        yield
    finally:
        _SLP.depth -= 1
