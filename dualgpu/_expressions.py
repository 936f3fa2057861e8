"""Compile the rule table's derivative expressions for one value dtype.

Both the compiled duals (numba, CPU and CUDA) and the pure-Python dual build
their derivative code from :mod:`dualgpu.rules` through this module, so an
expression is parsed in one place.
"""
import ast
import functools

from . import rules

__all__ = ["Expression", "expression", "UNIT_FACTORS"]

#: Factors the generators special-case: no multiplication is emitted.
UNIT_FACTORS = {"1": 1, "-1": -1, "0": 0}

_ARGUMENT_NAMES = {"x", "y", "ans"}


class Expression:
    """A derivative expression with its numeric literals lifted out.

    Attributes
    ----------
    text : str
        The expression as written in the rule table.
    source : str
        The same expression with each literal replaced by a name ``_cK``.
    constants : dict
        ``{"_cK": float}``: bind each name to the literal in the target dtype.
    unit : int or None
        1, -1 or 0 when the expression is exactly that literal, else None.
    """

    def __init__(self, text):
        self.text = text
        self.unit = UNIT_FACTORS.get(text.strip())
        tree = ast.parse(text, mode="eval")
        constants = {}

        class _Lift(ast.NodeTransformer):
            def visit_Constant(self, node):
                if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
                    raise ValueError(f"unsupported literal {node.value!r} in {text!r}")
                name = f"_c{len(constants)}"
                constants[name] = float(node.value)
                return ast.copy_location(ast.Name(id=name, ctx=ast.Load()), node)

            def visit_Name(self, node):
                if node.id not in _ARGUMENT_NAMES and node.id not in rules.EXPRESSION_FUNCTIONS:
                    raise ValueError(
                        f"derivative expression {text!r} uses {node.id!r}; expected the "
                        f"arguments x, y, ans or one of {rules.EXPRESSION_FUNCTIONS} "
                        "(add new functions to rules.EXPRESSION_FUNCTIONS)"
                    )
                return node

        tree = ast.fix_missing_locations(_Lift().visit(tree))
        self.source = ast.unparse(tree)
        self.constants = constants

    def __repr__(self):
        return f"Expression({self.text!r})"


@functools.lru_cache(maxsize=None)
def expression(text):
    """Return the parsed :class:`Expression` for ``text`` (cached)."""
    return Expression(text)
