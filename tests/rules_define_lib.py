"""Rules added with ``dualgpu.rules.define`` at import, as a user's module adds them.

Checked by tests/test_rules_define.py with the generated rule harness on every path.
"""
import math

import numba
import numpy as np

from dualgpu import rules

__all__ = ["softplus", "logaddexp", "softsign", "exp2", "NAMES"]


@rules.define("rules_define_lib.softplus", "1 / (1 + exp(-x))", domain=((-4, 4),))
def softplus(x):
    """A plain Python function: log(1 + e^x)."""
    return math.log1p(math.exp(x))


@rules.define("rules_define_lib.logaddexp", ("exp(x - ans)", "exp(y - ans)"),
              domain=((-3, 3), (-3, 3)))
def logaddexp(x, y):
    """A function of two arguments: log(e^x + e^y), without overflow."""
    big = max(x, y)
    return big + math.log1p(math.exp(-abs(x - y)))


@rules.define("rules_define_lib.softsign", "1 / ((1 + sqrt(x * x)) * (1 + sqrt(x * x)))")
@numba.njit
def softsign(x):
    """A @njit function: x / (1 + |x|)."""
    return x / (1 + abs(x))


#: a math function without a built-in rule (its numpy ufunc too)
exp2 = rules.define("math.exp2", "ans * 0.6931471805599453", ufunc=np.exp2)

NAMES = ("rules_define_lib.softplus", "rules_define_lib.logaddexp", "rules_define_lib.softsign",
         "math.exp2")
