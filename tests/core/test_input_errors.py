"""Bad input to Dual, DualArray and dual_array: a clear error, never a silent conversion."""
import numpy as np
import pytest

import dualgpu
from dualgpu import Dual, DualArray, DualgpuError, UnportedKernelError, dual_array


@pytest.mark.parametrize("value, message", [
    ("1.5", "expected a real number.*got str '1.5'"),
    (None, "got NoneType"),
    ([1.0], "got list"),
])
def test_dual_value_must_be_a_real_number(value, message):
    with pytest.raises(DualgpuError, match=message):
        Dual(value, [1.0])


def test_complex_input_makes_a_complex_dual_unless_a_real_dtype_is_asked():
    assert Dual(1 + 2j, [1.0]).dtype == np.complex128  # a complex dual (dualgpu.complex_rules)
    assert Dual(1.0, np.ones(1, np.complex64)).dtype == np.complex64
    with pytest.raises(DualgpuError, match="complex; the imaginary parts would be dropped"):
        Dual(1.0, [1.0 + 2j], dtype=np.float64)
    with pytest.raises(DualgpuError, match="complex; the imaginary parts would be dropped"):
        Dual(1 + 2j, [1.0], dtype=np.float32)
    with pytest.raises(DualgpuError, match="as real numbers"):
        Dual(1.0, ["a"])
    assert Dual(np.array(2.5), [1]).value == 2.5  # a 0-d array is a number (documented)


def test_dual_array_members_must_be_arrays():
    with pytest.raises(DualgpuError, match="values must be a numpy or device array; got list.*"
                       "dualgpu.dual_array"):
        DualArray([1.0, 2.0], np.zeros((1, 2)))
    with pytest.raises(DualgpuError, match=r"got shape \(\)\. Fix: for a single number use "
                       r"dualgpu\.Dual"):
        DualArray(np.array(1.0), np.zeros(1))
    lists = dual_array([1.0, 2.0], [[1.0, 0.0]])  # documented conversion: copies into arrays
    assert lists.values.dtype == np.float64 and lists.partials.shape == (1, 2)


@pytest.mark.parametrize("lanes", [2.7, "2", True, 0, -1])
def test_dual_array_lanes_must_be_a_positive_int(lanes):
    with pytest.raises(DualgpuError, match="lanes must be a positive int"):
        dual_array([1.0, 2.0], lanes=lanes)


def test_dual_array_never_drops_imaginary_parts():
    assert dual_array([1.0 + 1j], lanes=1).dtype == np.complex128  # a complex dual array
    with pytest.raises(DualgpuError, match="values are complex.*imaginary parts would be dropped"):
        dual_array([1.0 + 1j], lanes=1, dtype=np.float64)
    with pytest.raises(DualgpuError, match="partials are complex and the values real"):
        dual_array([1.0], [[1j]])


@pytest.mark.filterwarnings("ignore:.*Grid size 1 will likely")  # numba.cuda, before typing
def test_unported_numba_kernel_says_how_to_port_it():
    from kernels_numba_original import doubled as unported  # plain numba.cuda, as written

    x, out = dual_array(np.ones(4), [np.ones(4)]), dual_array(np.zeros(4), lanes=1)
    with pytest.raises(UnportedKernelError) as error:
        unported[1, 4](x, out)
    text = str(error.value)
    assert "plain numba.cuda kernel" in text and "from dualgpu import cuda" in text
    assert "dualgpu.jit(doubled)" in text
    assert type(unported).__module__.startswith("numba.cuda")  # it really is numba's
    with dualgpu.using_backend("cpu"):  # and ported it runs
        dualgpu.jit(unported)[1, 4](x, out)
    np.testing.assert_array_equal(out.partials, [[2.0] * 4])
