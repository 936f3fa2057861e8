"""The package's shape: floors that import only downward, no cycles, small modules.

A reader names a module's floor from its path (``dualgpu/core/...`` is floor 1) and nothing
imports a floor above its own, deferred imports included; see ``docs/dev/architecture.md``.
"""
import ast
from pathlib import Path

import import_graph as ig

ROOT = Path(__file__).resolve().parents[2]
GRAPH = ig.imports(ig.modules())
MAX_LINES = 800
MAX_FLAT = 16


def test_no_import_cycle_in_the_package():
    found = ig.cycles(GRAPH)
    assert not found, "import cycles (deferred imports count too):\n" + "\n".join(
        " -> ".join(c) for c in found)


def test_imports_only_go_down_the_floors():
    bad = ig.upward(GRAPH)
    assert not bad, "imports that go up a floor:\n" + "\n".join(
        f"{m}:{line} imports {t} ({ig.floor_of(m)} -> {ig.floor_of(t)})" for m, line, t in bad)


def test_the_checks_find_a_cycle_and_an_upward_import():
    graph = {"dualgpu.core.a": {"dualgpu.core.b": 1}, "dualgpu.core.b": {"dualgpu.core.a": 2},
             "dualgpu.core.c": {"dualgpu.autodiff.d": 3}, "dualgpu.autodiff.d": {}}
    assert ig.cycles(graph) == [["dualgpu.core.a", "dualgpu.core.b"]]
    assert ig.upward(graph) == [("dualgpu.core.c", 3, "dualgpu.autodiff.d")]


def test_no_module_is_longer_than_800_lines():
    long = {str(p.relative_to(ROOT)): n for p in ig.modules().values()
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines (split them along their concerns): {long}"


def test_few_modules_sit_flat_in_the_package():
    flat = sorted(p.name for p in ig.PACKAGE.glob("*.py"))
    assert len(flat) <= MAX_FLAT, f"{len(flat)} flat modules (at most {MAX_FLAT}): {flat}"


def _private_imports(path):
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] != "dualgpu" or len(parts) == 1:
                continue
            module = ".".join(parts[:2])
            if (module in ig.modules() and ig.floor_of(module) == "facade"
                    and not parts[1].startswith("_")):
                continue  # dualgpu.cuda, dualgpu.sparse, ... (or a name from dualgpu itself)
            if module not in ig.modules() and not parts[1].startswith("_"):
                continue  # from dualgpu import jacobian
            if module in ig.FOUNDATION and not module.endswith("_moved"):
                continue  # dualgpu.rules, dualgpu.errors, dualgpu.nansafe
            yield node.lineno, name


def test_scripts_import_only_public_modules():
    bad = [f"{p.relative_to(ROOT)}:{line} {name}" for p in sorted((ROOT / "scripts").glob("*.py"))
           for line, name in _private_imports(p)]
    assert not bad, "scripts import private names:\n" + "\n".join(bad)


#: deferred imports of dualgpu's own modules that stay deferred, and why
LAZY = {
    "dualgpu.backends.cpu.kernel": "a backend is loaded when a kernel first launches on it",
    "dualgpu.backends.cudasim.kernel": "a backend is loaded when a kernel first launches on it",
    "dualgpu.backends.gpu.kernel": "a backend is loaded when a kernel first launches on it",
    "dualgpu.backends.cudasim.arrays": "numba's simulator, when the cudasim backend makes arrays",
    "dualgpu.plot.dgsm": "matplotlib, only when a figure is asked for",
    "dualgpu.sensitivity.plots": "matplotlib, only when a figure is asked for",
}


def _deferred_imports(path):
    tree = ast.parse(path.read_text(), str(path))
    top = set()

    def mark(body):
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                top.add(id(node))
            elif isinstance(node, (ast.If, ast.Try)):
                mark(node.body)
                mark(node.orelse)
                mark(getattr(node, "finalbody", []))
                for handler in getattr(node, "handlers", []):
                    mark(handler.body)

    mark(tree.body)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and id(node) not in top:
            yield from ((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and id(node) not in top:
            base = node.module or ""
            for alias in node.names:
                yield node.lineno, (f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES
                                    else base)


MODULES = ig.modules()


def test_deferred_imports_only_load_backends_or_figures_lazily():
    bad = []
    for name, path in MODULES.items():
        for line, target in _deferred_imports(path):
            if target.split(".")[0] == "dualgpu" and target not in LAZY:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {target} inside a function")
    assert not bad, ("dualgpu's own modules are imported at the top of a module (a deferred "
                     "import hides a cycle from the reader); only these load lazily: "
                     f"{sorted(LAZY)}\n" + "\n".join(bad))
