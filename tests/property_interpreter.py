"""A stack machine over every operation of the rule table, compiled once per execution path.

The property test draws random *programs* (rows of ``(opcode, argument)``) instead of random
Python expressions, so numba compiles one interpreter per path and dtype, not one function
per example. Every operation is written as a user writes it (``a + b``, ``math.sin(a)``,
``np.maximum(a, c)``, ``t = a; t //= b``, ``a ** 2``), generated from ``dualgpu.rules``.

Instructions:

* ``PUSH k``: push input ``k`` (a dual on the dual paths, a float on the plain ones);
* a unary operation: replace the top ``a`` with ``op(a)``;
* a binary operation on two stack entries: pop ``b``, then ``a``, push ``op(a, b)``;
* a binary operation with a constant ``c`` (a plain float): replace ``a`` with ``op(a, c)``
  (kind ``"dn"``) or ``op(c, a)`` (kind ``"nd"``).

``out[k]`` records the top of the stack after instruction ``k``.
"""
from collections import namedtuple

import numpy as np

from dualgpu import rules

from rule_harness import INPLACE_SYNTAX, OPERATOR_SYNTAX

#: One operation. ``kinds``: "d" (unary), "dd", "dn" or "nd". ``rule``: the rule it applies.
#: ``ufunc``: the numpy ufunc called (None for operators and math). ``text``: the Python line
#: computing ``r`` from ``a`` and ``b`` (a stack entry or the constant ``c``).
Op = namedtuple("Op", "name kinds rule ufunc int_power text")

PUSH = 0
MAX_STACK = 4
INT_EXPONENTS = (2, 3, -1, -2)


def _binary_text(template, kinds):
    left, right = {"dd": ("a", "b"), "dn": ("a", "c"), "nd": ("c", "a")}[kinds]
    return template.format(left, right)


def _operations():
    ops = [None]  # opcode 0 is PUSH
    for name, rule in rules.UNARY_RULES.items():
        template = OPERATOR_SYNTAX.get(rule.primal, rule.primal + "({0})")
        ops.append(Op(name, "d", name, None, False, "r = " + template.format("a")))
    binary = [(name, rule.primal) for name, rule in rules.BINARY_RULES.items()]
    binary += [(rule_name, dotted) for dotted, rule_name in rules.ALIASES.items()]
    for rule_name, dotted in binary:
        template = OPERATOR_SYNTAX.get(dotted, dotted + "({0}, {1})")
        for kinds in ("dd", "dn", "nd"):
            label = f"{dotted} {kinds}"
            ops.append(Op(label, kinds, rule_name, None, False, "r = " + _binary_text(template, kinds)))
    for dotted, rule_name in rules.INPLACE.items():
        for kinds in ("dd", "dn"):
            right = "b" if kinds == "dd" else "c"
            text = f"r = a\n{{indent}}r {INPLACE_SYNTAX[dotted]} {right}"
            ops.append(Op(f"{dotted} {kinds}", kinds, rule_name, None, False, text))
    for ufunc_name, rule_name in rules.NUMPY_UFUNCS.items():
        ufunc = getattr(np, ufunc_name)
        if rule_name in rules.UNARY_RULES:
            ops.append(Op(f"np.{ufunc_name}", "d", rule_name, ufunc, False,
                          f"r = np.{ufunc_name}(a)"))
            continue
        for kinds in ("dd", "dn", "nd"):
            text = "r = " + _binary_text(f"np.{ufunc_name}({{0}}, {{1}})", kinds)
            ops.append(Op(f"np.{ufunc_name} {kinds}", kinds, rule_name, ufunc, False, text))
    for exponent in INT_EXPONENTS:
        ops.append(Op(f"** {exponent}", "d", "pow", None, True, f"r = a ** {exponent}"))
    return ops


#: opcode -> Op (opcode 0, PUSH, is None)
OPERATIONS = _operations()


def interpreter_source(name, *, kernel, codes=None):
    """Source of the interpreter ``name(program, consts, inputs, stack, out)``.

    ``codes``: the opcodes it implements (default: all). With ``kernel=True`` it is a CUDA
    kernel that runs on thread 0 only (launch it with any grid).
    """
    codes = range(1, len(OPERATIONS)) if codes is None else codes
    head = [f"def {name}(program, consts, inputs, stack, out):"]
    if kernel:
        head += ["    if cuda.grid(1) != 0:", "        return"]
    body = [
        "    sp = 0",
        "    for k in range(program.shape[0]):",
        "        op = program[k, 0]",
        "        arg = program[k, 1]",
        f"        if op == {PUSH}:",
        "            stack[sp] = inputs[arg]",
        "            sp += 1",
    ]
    indent = " " * 12
    for code in codes:
        op = OPERATIONS[code]
        body.append(f"        elif op == {code}:  # {op.name}")
        if op.kinds == "dd":
            body.append(indent + "a = stack[sp - 2]")
            body.append(indent + "b = stack[sp - 1]")
        else:
            body.append(indent + "a = stack[sp - 1]")
        if op.kinds in ("dn", "nd"):
            body.append(indent + "c = consts[arg]")
        for line in op.text.format(indent=indent).split("\n"):
            body.append(line if line.startswith(indent) else indent + line)
        if op.kinds == "dd":
            body.append(indent + "sp -= 1")
        body.append(indent + "stack[sp - 1] = r")
    body.append("        out[k] = stack[sp - 1]")
    return "\n".join(head + body) + "\n"


def primary_codes():
    """Opcodes of each rule written once as its primal (no aliases, in-place forms, ufuncs)."""
    primals = {rule.primal for rule in {**rules.UNARY_RULES, **rules.BINARY_RULES}.values()}
    return [code for code, op in enumerate(OPERATIONS) if op is not None and op.ufunc is None
            and (op.int_power or op.name.split()[0] in primals or op.name in rules.UNARY_RULES)]


def operands(program):
    """For each instruction, where its operands came from.

    Returns a list of tuples of ``("input", k)``, ``("const", k)`` or ``("out", k)``
    (the result of instruction k), in argument order.
    """
    stack, sources = [], []
    for k, (code, arg) in enumerate(program):
        if code == PUSH:
            sources.append((("input", int(arg)),))
            stack.append(("out", k))
            continue
        op = OPERATIONS[code]
        if op.kinds == "dd":
            b, a = stack.pop(), stack.pop()
            sources.append((a, b))
        elif op.kinds == "d":
            sources.append((stack.pop(),))
        elif op.kinds == "dn":
            sources.append((stack.pop(), ("const", int(arg))))
        else:
            sources.append((("const", int(arg)), stack.pop()))
        stack.append(("out", k))
    return sources


def valid(program):
    """True when the program never pops an empty stack nor overflows it."""
    depth = 0
    for code, _ in program:
        if code == PUSH:
            depth += 1
        elif OPERATIONS[code].kinds == "dd":
            depth -= 1
            if depth < 1:
                return False
        elif depth < 1:
            return False
        if depth > MAX_STACK:
            return False
    return depth >= 1
