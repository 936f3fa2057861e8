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

from dualgpu import Dual, _primals

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
