"""Host code that turns a Dual into a float: the message names the line, the operation and
the fix that keeps the partials; ``dualgpu.float32``/``float64`` cast lists of duals."""
import math
import os
from math import sqrt as imported_sqrt

import numpy as np
import pytest

import dualgpu
from dualgpu import Dual, DualArray
from dualgpu.core._host_lines import describe_host_line

HERE = os.path.basename(__file__)


def _message(f, p=2.0):
    with pytest.raises(TypeError) as error:
        dualgpu.jvp(f, (p,), (1.0,))
    return str(error.value)


def _assert_common(message, source):
    assert message.startswith("float(Dual) would drop the partials")  # kernel.py matches this
    assert HERE in message and source in message, message
    assert "Use d.value for the value alone" not in message  # .value drops the derivative


def test_math_sqrt_names_the_call_and_the_replacements():
    def f(p):
        return math.sqrt(p) * np.ones(3)

    message = _message(f)
    _assert_common(message, "return math.sqrt(p) * np.ones(3)")
    assert "math.sqrt" in message
    assert "np.sqrt(p)" in message and "dualgpu.dmath.sqrt(p)" in message
    # and both replacements the message names keep the derivative
    for fixed in (lambda p: np.sqrt(p) * np.ones(3), lambda p: dualgpu.dmath.sqrt(p) * np.ones(3)):
        _, tangent = dualgpu.jvp(fixed, (2.0,), (1.0,))
        np.testing.assert_allclose(tangent, 0.5 / math.sqrt(2.0), rtol=1e-15)


def test_math_function_imported_by_name_and_two_arguments():
    def f(p):
        return imported_sqrt(p) + math.atan2(p, 1.0) * np.ones(2)

    message = _message(f)
    _assert_common(message, "imported_sqrt(p)")
    assert "math.sqrt" in message and "np.sqrt(p)" in message

    def g(p):
        return math.atan2(p, 1.0) * np.ones(2)

    message = _message(g)
    assert "math.atan2" in message
    assert "np.arctan2(p, 1.0)" in message and "dualgpu.dmath.atan2(p, 1.0)" in message


def test_math_function_without_a_rule_says_so():
    def f(p):
        return math.nextafter(p, 2.0) * np.ones(2)

    message = _message(f)
    assert "math.nextafter" in message and "no derivative rule" in message


def test_float_call():
    def f(p):
        scale = float(p)
        return scale * np.ones(2)

    message = _message(f)
    _assert_common(message, "scale = float(p)")
    assert "dualgpu.float64(p)" in message


def test_numpy_scalar_cast():
    def f(p):
        return np.float32(p) * np.ones(2, np.float32)

    message = _message(f)
    _assert_common(message, "np.float32(p)")
    assert "dualgpu.float32(p)" in message


def test_numpy_buffer_store_names_the_array():
    def f(p):
        state = np.zeros((2, 3))
        state[0, 1] = p
        return state

    message = _message(f)
    _assert_common(message, "state[0, 1] = p")
    assert "numpy array 'state'" in message and "state = dualgpu.zeros((2, 3)" in message


class _Solver:
    def __init__(self):
        self.state = np.zeros((2, 3))


def test_numpy_buffer_held_by_an_object_is_named_too():
    # `self.state[...] = dual` got the generic message, without the line or the buffer
    # (only bare names were looked up; found by an unseen round)
    def f(p):
        solver = _Solver()
        solver.state[0, 1] = p
        return solver.state

    message = _message(f)
    _assert_common(message, "solver.state[0, 1] = p")
    assert "numpy array 'solver.state'" in message
    assert "solver.state = dualgpu.zeros((2, 3)" in message


def test_numpy_array_with_float_dtype():
    def f(p):
        return np.array([p, 2.0 * p], dtype=np.float64)

    message = _message(f)
    _assert_common(message, "np.array([p, 2.0 * p], dtype=np.float64)")
    assert "dualgpu.float64([" in message


def test_outside_the_driver_too():
    p = Dual(1.0, [1.0])
    with pytest.raises(TypeError) as error:
        math.exp(p)
    _assert_common(str(error.value), "math.exp(p)")


def test_describe_host_line_of_a_frame():
    import sys

    line = describe_host_line(sys._getframe())
    assert line.filename == __file__ and line.source == "line = describe_host_line(sys._getframe())"
    assert line.kind == "call" and line.callee == "describe_host_line"
    assert f"{HERE}:" in line.location


# -- dualgpu.float32 / float64 of lists of duals --------------------------------------
@pytest.mark.parametrize("cast, dtype", [(dualgpu.float32, np.float32),
                                         (dualgpu.float64, np.float64)])
def test_cast_of_a_list_of_duals(cast, dtype):
    p = Dual(0.5, [1.0, 0.0])
    q = Dual(2.0, [0.0, 1.0])
    out = cast([p, q, 3.0])
    assert isinstance(out, DualArray) and out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out.values, np.array([0.5, 2.0, 3.0], dtype))
    np.testing.assert_array_equal(out.partials, np.array([[1, 0, 0], [0, 1, 0]], dtype))
    nested = cast(((p, 1.0), (q, p)))
    assert nested.shape == (2, 2) and nested.partials[0].tolist() == [[1, 0], [0, 1]]
    # plain lists stay numpy's
    plain = cast([1.0, 2.0])
    assert type(plain) is np.ndarray and plain.dtype == np.dtype(dtype)


def test_cast_of_a_list_under_the_driver_differentiates():
    def f(p):
        parts = dualgpu.float32([p, p * p])
        return parts * np.float32(3.0)

    jac = np.asarray(dualgpu.jacobian(f, np.float32(1.5)))
    np.testing.assert_allclose(jac.reshape(-1), [3.0, 9.0], rtol=1e-6)
    assert jac.dtype == np.float32


@pytest.mark.parametrize("name", ["mean", "std", "var", "average"])
def test_numpy_reductions_of_a_list_of_duals_name_the_stack_fix(name):
    """np.mean (std, var, average) of a list of Duals, energies collected per step: numpy
    converts the object array's result with float(); the message gave the general fix, which
    does not apply. It names the working one, which the derivative then confirms."""
    def energies(c):
        return [c * (k + 1.0) for k in range(3)]  # c, 2c, 3c

    c = Dual(2.0, [1.0])
    with pytest.raises(TypeError, match=rf"numpy's {name} of a list .* of Duals.*"
                                        rf"np\.stack\(values\)\.{name}\(\)"):
        getattr(np, name)(energies(c))
    fixed = getattr(np, name)(np.stack(energies(c))) if name == "average" else \
        getattr(np.stack(energies(c)), name)()
    expected = {"mean": 2.0, "std": math.sqrt(2.0 / 3.0), "var": 2.0 / 3.0, "average": 2.0}
    assert float(fixed.value) == pytest.approx(2.0 * expected[name] if name != "var"
                                               else 4.0 * expected[name])
    assert float(fixed.partials[0]) == pytest.approx(expected[name] if name != "var"
                                                     else 2 * 2.0 * expected[name])
