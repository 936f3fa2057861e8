"""Bad input fails loudly, with a message that says what came and how to fix it."""
import math

import numpy as np
import pytest
from numba import njit
from numba.core.errors import TypingError

import dualgpu
from dualgpu import Dual, DualArray, DualgpuError, MissingRuleError, dmath, dual_array


def test_math_function_without_rule_python():
    with pytest.raises(MissingRuleError,
                       match=r"math\.nextafter has no derivative rule.*dualgpu/rules\.py"):
        dmath.nextafter(Dual(1.5, [1.0]), 2.0)
    assert dmath.nextafter(1.5, 2.0) == math.nextafter(1.5, 2.0)  # plain numbers still work


def test_math_function_without_rule_compiled():
    f = njit(lambda d: math.nextafter(d, 2.0))
    # dualgpu's hint, short and first: not numba's page of candidate signatures; the rule to
    # add has two derivatives, as the call has two arguments
    with pytest.raises(MissingRuleError) as error:
        f(Dual(1.5, [1.0]))
    text = str(error.value)
    assert text.startswith("math.nextafter has no derivative rule") and "BINARY_RULES" in text
    assert "('<d/dx>', '<d/dy>')" in text
    assert len(text) < 400, text
    assert f(1.5) == math.nextafter(1.5, 2.0)  # plain numbers still compile


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
def test_math_function_without_rule_in_a_kernel(backend):
    from kernels_for_errors import next_after

    x, out = dual_array(np.ones(2), lanes=1), dual_array(np.zeros(2), lanes=1)
    with dualgpu.using_backend(backend), pytest.raises(MissingRuleError) as error:
        next_after[1, 2](x, out)
    assert "math.nextafter has no derivative rule" in str(error.value)
    assert len(str(error.value)) < 400


def test_float_of_dual_says_it_drops_partials():
    with pytest.raises(TypeError, match="would drop the partials"):
        float(Dual(1.0, [1.0]))
    with pytest.raises(TypingError, match="would drop the partials"):
        njit(lambda d: float(d))(Dual(1.0, [1.0]))
    # and numpy, which converts through float(), cannot swallow a dual either
    with pytest.raises(TypeError, match="would drop the partials"):
        np.zeros(2)[0] = Dual(1.0, [1.0])


def test_dual_stored_into_plain_array_compiled():
    @njit
    def store(u, out):
        out[0] = u[0] * 2.0

    with pytest.raises(TypingError, match="stored into a plain float64 array.*DualArray"):
        store(dual_array(np.ones(3), lanes=2), np.zeros(3))


def test_mismatched_lane_counts():
    a, b = Dual(1.0, [1.0, 0.0]), Dual(1.0, [1.0, 0.0, 0.0])
    with pytest.raises(DualgpuError, match=r"different lane counts \[2, 3\]"):
        a + b
    with pytest.raises(TypingError, match=r"different lane counts \[2, 3\]"):
        njit(lambda x, y: x * y)(a, b)
    u = dual_array(np.ones(3), lanes=2)
    @njit
    def store(u, d):
        u[0] = d

    with pytest.raises(TypingError, match="3 lanes into a DualArray with 2 lanes"):
        store(u, b)
    with pytest.raises(DualgpuError, match="3 lanes into a DualArray with 2 lanes"):
        u[0] = b


def test_bad_dtypes_and_shapes():
    with pytest.raises(DualgpuError, match="expected dtype float32 or float64; got int64"):
        DualArray(np.arange(3), np.zeros((1, 3), np.int64))
    with pytest.raises(DualgpuError, match=r"partials must have shape \(N, \*\(3,\)\)"):
        DualArray(np.ones(3), np.zeros((2, 4)))
    with pytest.raises(DualgpuError,
                       match="partials dtype float32 differs from values dtype float64"):
        DualArray(np.ones(3), np.zeros((2, 3), np.float32))
    with pytest.raises(DualgpuError, match="1 to 3 dimensions"):
        DualArray(np.ones((2, 2, 2, 2)), np.zeros((1, 2, 2, 2, 2)))
    with pytest.raises(DualgpuError, match="float32 or float64; got int32"):
        Dual(1.0, np.zeros(2), dtype=np.int32)
    with pytest.raises(DualgpuError, match="give either partials"):
        dual_array(np.ones(3))
    with pytest.raises(DualgpuError, match="at least one lane"):
        Dual(1.0, [])


def test_kernel_argument_mismatches():
    from kernels_for_errors import axpy

    x = dual_array(np.ones(8), lanes=2)
    y = dual_array(np.ones(8), lanes=3)
    with dualgpu.using_backend("cpu"):
        with pytest.raises(DualgpuError, match=r"disagree on the lane count \(x has 2, y has 3\)"):
            axpy[1, 8](x, y, 2.0)
        y32 = dual_array(np.ones(8), lanes=2, dtype=np.float32)
        axpy[1, 8](x, y32, 2.0)  # dtypes mix as plain floats do: the store casts
        assert y32.dtype == np.float32 and y32.values[0] == 3.0
        with pytest.raises(DualgpuError, match="takes 3 arguments"):
            axpy[1, 8](x, x)
        with pytest.raises(DualgpuError, match="needs a launch configuration"):
            axpy(x, x, 1.0)
        with pytest.raises(DualgpuError, match="griddim must be 1-3 positive ints"):
            axpy[0, 8](x, x, 1.0)


def test_unknown_backend():
    with pytest.raises(DualgpuError, match="unknown backend 'tpu'; expected one of"):
        dualgpu.set_backend("tpu")


def test_dual_stored_into_an_integer_array_names_the_dtype_and_the_fix():
    """An int state (u0 of ints) gives int buffers: the message says so instead of pointing at
    the allocation, which went through dualgpu.cuda."""
    from dualgpu import cuda

    @cuda.jit
    def double(u, out):
        i = cuda.grid(1)
        if i < u.shape[0]:
            out[i] = 2.0 * u[i]

    def f(u):
        out = cuda.to_device(np.zeros(u.shape[0], dtype=np.int64))
        double[1, 8](cuda.to_device(u), out)
        return out.copy_to_host()

    with dualgpu.using_backend("cpu"), pytest.raises(
            DualgpuError, match=r"integer array\(s\) out \(int64\).*float dtype.*int\(x\)"):
        dualgpu.jacobian(f, np.ones(4))


# --- complex arithmetic with duals: a plain complex array cannot hold the partials ------------

@pytest.mark.parametrize("backend", ["cpu"])  # cudasim: tests/backends/cudasim
def test_a_complex_dual_stored_into_a_plain_complex_array_in_a_kernel(backend):
    from kernels_for_errors import phase_shift

    psi = np.exp(1j * np.linspace(0, 1, 8))
    with dualgpu.using_backend(backend):
        phase_shift[1, 32](psi, np.zeros(8, complex), 0.5, 0.1)  # plain: runs
        with pytest.raises(DualgpuError, match=r"kernel phase_shift stores a dual into the host "
                                               r"numpy array out \(at \S*kernels_for_errors"
                                               r"\.py:\d+\).*Fix, one line: out = dualgpu.zeros"
                                               r"\(\(8,\), np.complex128\)"):
            phase_shift[1, 32](psi, np.zeros(8, complex), Dual(0.5, [1.0]), 0.1)


def test_complex_arithmetic_with_a_dual_makes_a_complex_dual_on_the_host_and_in_njit():
    assert (1j + Dual(0.5, [1.0])).partials.tolist() == [1.0]  # dualgpu.complex_rules
    assert (Dual(0.5, [1.0]) / 2j).partials.tolist() == [-0.5j]
    z = njit(lambda x: x * 1j)(Dual(0.5, [1.0]))
    assert z.value == 0.5j and z.partials.tolist() == [1j]


def test_a_complex_dual_stored_into_a_plain_complex_array_in_cuda_compilation(offline_ptx):
    import numba.cuda
    from numba import types

    from dualgpu.backends.gpu import kernel as gpu
    from dualgpu.compiled.types import dual_type
    from kernels_for_errors import phase_shift

    array = types.Array(types.complex128, 1, "C")
    with pytest.raises(TypingError, match=r"a Dual \(ComplexDual\(complex128, 1[^)]*\)\) is stored "
                                          r"into a plain complex128 array"):  # ", rules=..."
        numba.cuda.compile_ptx(gpu.prepare_function(phase_shift.py_func, 1),
                               (array, array, dual_type(types.float64, 1), types.float64),
                               cc=offline_ptx)


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
def test_python_list_as_a_kernel_argument_names_it_and_the_fix(backend):
    """numba.cuda's launch refuses lists; the simulators would index them, the cpu backend
    failed with a page of numba typing errors."""
    from kernels_for_errors import axpy

    x = [1.0, 2.0, 3.0]
    with dualgpu.using_backend(backend), pytest.raises(DualgpuError) as error:
        axpy[1, 8](x, np.zeros(3), 2.0)
    assert "kernel axpy: argument x is a Python list (length 3)" in str(error.value)
    assert "np.asarray(x)" in str(error.value)


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
def test_to_device_of_a_differentiated_scalar_says_what_to_do(backend):
    """A float passed where an array was expected reaches to_device as a Dual (it raised
    AttributeError: 'Dual' object has no attribute 'shape')."""
    from dualgpu import cuda

    with dualgpu.using_backend(backend):
        assert cuda.to_device(0.5).copy_to_host().shape == ()  # plain: numba's 0-d array
        with pytest.raises(DualgpuError, match=r"cuda\.to_device got a Dual \(0\.5\).*0-d.*"
                                               r"pass the scalar to the kernel"):
            dualgpu.jvp(lambda a: cuda.to_device(a).copy_to_host(), (0.5,), (1.0,))
        with pytest.raises(DualgpuError, match=r"cuda\.to_device got a scalar \(2\.0\)"):
            dualgpu.jvp(lambda a: cuda.to_device(2.0).copy_to_host() * a, (0.5,), (1.0,))


def test_sparsity_tracer_element_read_on_the_host_says_what_to_do():
    """It said 'use the cpu backend', where detection always runs on the cpu backend."""
    from dualgpu.core.dualarray import TRACER_DTYPE

    tracer = DualArray(np.zeros(3), np.zeros((1, 3), TRACER_DTYPE))
    with pytest.raises(DualgpuError) as error:
        tracer[1]
    message = str(error.value)
    assert "host code read the element [1]" in message and "sparsity='detect'" in message
    assert "u[0:1]" in message and "use the cpu backend" not in message


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
def test_launch_configuration_mistakes_numba_cuda_refuses(backend):
    """Floats as dimensions (n / 32), more than 1024 threads, keyword arguments: numba.cuda
    refuses each. A float equal to an int used to find that int's cached launcher and run."""
    from kernels_for_errors import axpy

    x, y = np.ones(8), np.zeros(8)
    with dualgpu.using_backend(backend):
        axpy[1, 8](x, y, 2.0)  # caches the launcher of (1, 8)
        for config in ((1.0, 8), (np.float64(1.0), 8), (1, 8.0), ((1.0, 1), 8)):
            with pytest.raises(DualgpuError, match=r"must be an int or a tuple of 1-3 ints; "
                                                   r"got .*a float\. Fix: integer division"):
                axpy[config](x, y, 2.0)
        with pytest.raises(DualgpuError, match=r"blockdim \(32, 64\) has 2048 threads; CUDA "
                                               r"allows at most 1024 per block"):
            axpy[1, (32, 64)](x, y, 2.0)
        with pytest.raises(DualgpuError, match=r"keyword argument\(s\) a; .*positionally.*"
                                               r"axpy\[griddim, blockdim\]\(x, y, a\)"):
            axpy[1, 8](x, y, a=2.0)
    np.testing.assert_array_equal(y, 2.0 * x)  # only the first launch ran


@pytest.mark.parametrize("name", ["modf", "frexp"])
def test_functions_with_tuple_answers_name_the_forms_that_have_rules(name):
    """math.modf and math.frexp return two numbers: the message proposed a one-line rule,
    which cannot describe them; it writes them with functions that have rules, and those
    forms differentiate in a kernel (against central differences)."""
    from kernels_for_errors import split_number

    message = str(MissingRuleError(dualgpu.errors.missing_rule_message(f"math.{name}")))
    assert "returns two numbers" in message
    assert ("math.fmod(x, 1.0)" if name == "modf" else "math.floor(math.log2(abs(x)))") \
        in message

    def f(a):
        x = dualgpu.cuda.to_device(np.array([1.3, 2.7, 5.5, -3.2]))
        frac, mantissa = dualgpu.cuda.device_array(4), dualgpu.cuda.device_array(4)
        split_number[1, 4](x, a, frac, mantissa)
        return frac.copy_to_host(), mantissa.copy_to_host()

    with dualgpu.using_backend("cpu"):
        J = dualgpu.jacobian(f, 1.1)
    h = 1e-7
    for got, ahead, behind in zip(J, f(1.1 + h), f(1.1 - h)):
        np.testing.assert_allclose(np.ravel(got), (ahead - behind) / (2 * h), rtol=1e-6)


def test_a_kernel_factory_cached_by_its_parameter_gets_the_fix():
    """``functools.lru_cache`` on a kernel factory: under the driver its parameter is a Dual,
    which was unhashable with Python's bare message; a hashable Dual would hand one chunk's
    kernel (its closure's partials) to the next. The message says what to do."""
    import functools

    @functools.lru_cache(maxsize=None)
    def make(tau):
        return tau

    with pytest.raises(TypeError, match=r"unhashable type: 'Dual'.*kernel factory cached by "
                                        r"its parameter.*Fix: pass the parameter"):
        make(Dual(0.4, [1.0]))
    assert make(0.4) == 0.4  # plain numbers are cached as before
