"""``cuda.popc``, ``ffs``, ``clz``, ``brev`` and ``cbrt`` in the simulator, as on the GPU.

numba's simulator counts every integer in 32 bits (``popc(-1)`` is 1 there, ``clz(1)`` 31),
where numba.cuda types a kernel's Python int as int64 (``cuda.grid(1) + 1``) and counts its 64
bits; its ``cbrt`` is ``a ** (1 / 3)``, complex for a negative ``a``. These give numba.cuda's
results and types (:mod:`dualgpu.backends.cpu.bits` gives the same on the cpu backend): a
Python int counts as an int64, a numpy integer by its dtype; ``brev`` reverses a uint64's 64
bits and any other integer's low 32, as numba.cuda's typing picks ``brev(uint32)`` for it.

Examples
--------
>>> [int(v) for v in (popc(-1), clz(1), ffs(12), brev(1))]
[64, 63, 3, 2147483648]
"""
import numpy as np

__all__ = ["popc", "clz", "ffs", "brev", "FUNCTIONS"]


def _bits(value):
    """``(unsigned value, width, numpy type)`` of an integer as numba.cuda types it."""
    if isinstance(value, (bool, np.bool_)):
        dtype = np.dtype(np.uint8)
    elif isinstance(value, np.integer):
        dtype = value.dtype
    else:
        dtype = np.dtype(np.int64)  # a Python int in a kernel
    width = dtype.itemsize * 8
    return int(value) & ((1 << width) - 1), width, dtype.type


def popc(value):
    """The number of set bits, in the argument's type."""
    bits, _, kind = _bits(value)
    return kind(bin(bits).count("1"))


def clz(value):
    """The number of leading zero bits of the argument's width, in its type."""
    bits, width, kind = _bits(value)
    return kind(width - bits.bit_length())


def ffs(value):
    """1 + the place of the lowest set bit (0 for 0), a uint32."""
    bits, _, _ = _bits(value)
    return np.uint32((bits & -bits).bit_length())


def brev(value):
    """The bits reversed: a uint64's 64, any other integer's low 32 (as a uint32)."""
    bits, width, kind = _bits(value)
    width = 64 if kind is np.uint64 else 32
    bits &= (1 << width) - 1
    reversed_bits = int(f"{bits:0{width}b}"[::-1], 2)
    return np.uint64(reversed_bits) if width == 64 else np.uint32(reversed_bits)


#: ``cuda.<name>`` -> its simulated function (``cbrt`` is added by the launch module:
#: libdevice's formula in dual-aware math)
FUNCTIONS = {"popc": popc, "clz": clz, "ffs": ffs, "brev": brev}
