"""Compile the rule table's derivative expressions for one value dtype.

Both the compiled duals (numba, CPU and CUDA) and the pure-Python dual build
their derivative code from :mod:`dualgpu.rules` through this module, so an
expression is parsed in one place.
"""
import ast
import threading

from dualgpu import rules

__all__ = ["Expression", "Gate", "expression", "UNIT_FACTORS"]

#: Factors the generators special-case: no multiplication is emitted.
UNIT_FACTORS = {"1": 1, "-1": -1, "0": 0}

_ARGUMENT_NAMES = {"x", "y", "ans"}


class Gate:
    """The test of a gated factor ``A if test else 0``: active when ``test == when``.

    Attributes
    ----------
    test, source : str
        The test and ``A``, with literals lifted as in :class:`Expression`.
    when : bool
    unit : int or None
        1, -1 or 0 when ``A`` is exactly that literal.
    """

    __slots__ = ("test", "when", "source", "unit")

    def __init__(self, test, when, source, unit):
        self.test, self.when, self.source, self.unit = test, when, source, unit

    def __repr__(self):
        return f"Gate({self.source!r} when ({self.test}) is {self.when})"


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
    gate : Gate or None
        For ``A if test else 0`` (or ``0 if test else A``): the test, when the
        term is active, and ``A``. An inactive term contributes nothing at all
        -- not ``0 * partials``, which is NaN for infinite partials: ``max(0,
        log(0))`` takes the first argument's partials exactly. None otherwise.
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

        body = tree.body
        gated = isinstance(body, ast.IfExp) and any(
            isinstance(branch, ast.Constant) and branch.value == 0
            for branch in (body.body, body.orelse))
        if gated:
            active_when = isinstance(body.orelse, ast.Constant) and body.orelse.value == 0
            active_node = body.body if active_when else body.orelse
            active_unit = UNIT_FACTORS.get(ast.unparse(active_node).strip())
        tree = ast.fix_missing_locations(_Lift().visit(tree))
        self.source = ast.unparse(tree)
        self.constants = constants
        self.gate = None
        if gated:
            active = tree.body.body if active_when else tree.body.orelse
            self.gate = Gate(ast.unparse(tree.body.test), active_when, ast.unparse(active),
                             active_unit)

    def __repr__(self):
        return f"Expression({self.text!r})"


_CACHE = {}
#: ``ast.parse`` is not thread-safe in CPython 3.11 ("AST constructor recursion depth
#: mismatch"): the cudasim backend's simulated threads meet a rule first together
_PARSE = threading.Lock()


def expression(text):
    """Return the parsed :class:`Expression` for ``text`` (cached; parsed by one thread at
    a time)."""
    found = _CACHE.get(text)
    if found is None:
        with _PARSE:
            found = _CACHE.get(text)
            if found is None:
                found = _CACHE[text] = Expression(text)
    return found
