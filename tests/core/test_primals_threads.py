"""Simulated threads resolving result dtypes together (a cold ``_primals`` typing cache).

numba's ``typing_context.refresh()`` advances generators shared by the process; two
threads inside it at once raise ``ValueError: generator already executing``. The
CUDA simulator runs one Python thread per CUDA thread, so the first kernel that
meets a new operand type combination had every thread of a block resolve it at once.
"""
import math
import operator
import sys
import threading

import numpy as np
import pytest

import dualgpu
from dualgpu import Dual, cuda
from dualgpu.core import _primals

_FNS = (operator.mul, operator.add, operator.truediv, operator.pow, operator.sub,
        math.atan2, math.hypot, math.copysign, math.fmod, operator.mod, operator.floordiv)
_OPERANDS = (np.float32(1), np.float64(1), 1.0, 2, np.int32(2))


@pytest.fixture
def tiny_switch_interval():
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as CPython allows
    yield
    sys.setswitchinterval(old)


def _cold_cache_round(n_threads):
    """All threads resolve the same cold keys at once; return the errors they raised."""
    _primals.clear_typing_cache()
    d32 = Dual(np.float32(1.0), np.ones(1, np.float32))
    d64 = Dual(1.0, np.ones(1))
    barrier = threading.Barrier(n_threads)
    errors, results = [], {}

    def work(i):
        barrier.wait()
        try:
            for fn in _FNS:
                for b in _OPERANDS:
                    a = d32 if i % 2 else d64
                    results.setdefault((fn, i % 2, repr(b)), set()).add(
                        _primals.numba_result_dtype(fn, (a, b)))
        except Exception as exc:  # noqa: BLE001  (collected and asserted below)
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors, results


def test_cold_typing_cache_under_many_threads(tiny_switch_interval):
    # before the lock, 4 rounds of 10 failed here; 20 rounds make a pass by luck unlikely
    for _ in range(20):
        errors, results = _cold_cache_round(16)
        assert not errors, f"{len(errors)} threads failed: {errors[0]!r}"
        # every thread got the same answer, and it is numba's typing
        assert all(len(dtypes) == 1 for dtypes in results.values())
    assert results[(operator.mul, 1, repr(np.float32(1)))] == {np.dtype(np.float32)}
    assert results[(operator.mul, 1, repr(1.0))] == {np.dtype(np.float64)}
    assert results[(operator.mul, 0, repr(np.float32(1)))] == {np.dtype(np.float64)}


@cuda.jit
def _mixed_operands(u, a, out):
    i = cuda.grid(1)
    if i < u.shape[0]:
        x = u[i]
        y = x * a + a / x - x ** 2 + math.atan2(x, a) + math.hypot(x, a) + x % a + x // a
        out[i] = y * np.float32(2) + 1.0


def _launch(u, a):
    out = cuda.device_array(u.shape[0], np.float32)
    _mixed_operands[1, u.shape[0]](cuda.to_device(u), a, out)
    return out.copy_to_host()


def test_cudasim_block_on_a_cold_cache(tiny_switch_interval):
    """The path users hit: 64 simulated threads meet new operand types together.

    (Before the lock this failed in about 1 launch of 5; the thread test above is the
    one that fails reliably.) The derivative is checked against a central difference.
    """
    u = np.linspace(0.5, 1.5, 64).astype(np.float32)
    a = np.float32(0.7)
    with dualgpu.using_backend("cudasim"):
        for _ in range(4):
            _primals.clear_typing_cache()
            _, tangent = dualgpu.jvp(_launch, (u, a), (None, np.float32(1.0)))
        h = np.float32(1e-2)
        fd = (_launch(u, a + h).astype(np.float64) - _launch(u, a - h)) / float((a + h) - (a - h))
    # away from the jumps of % and // (x/a near an integer), FD and forward mode agree
    smooth = np.abs(np.asarray(u / a) - np.round(u / a)) > 0.05
    np.testing.assert_allclose(np.asarray(tangent)[smooth], fd[smooth], rtol=2e-2, atol=2e-2)
