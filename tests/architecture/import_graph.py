"""The import graph of ``dualgpu/``, read from the source (AST): every import, deferred ones too.

Used by ``test_layers.py`` and runnable by hand: ``python3 tests/architecture/import_graph.py``
prints the cycles and the imports that go up a floor.
"""
import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "dualgpu"

#: floors, bottom up: a module may import its own floor and those below, never above.
#: ``host`` and ``compiled`` share floor 2 and do not import each other.
FLOORS = {
    "foundation": 0,  # dualgpu.rules, dualgpu.errors, dualgpu.nansafe, dualgpu._moved
    "core": 1,
    "host": 2,
    "compiled": 2,
    "backends": 3,
    "porting": 4,
    "autodiff": 5,
    "facade": 6,  # dualgpu/__init__, cuda, sparse, distributed, dmath, testing, plot, ...
}
FOUNDATION = {"dualgpu.rules", "dualgpu.complex_rules", "dualgpu.errors", "dualgpu.nansafe",
              "dualgpu._moved"}


def module_name(path):
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def modules():
    """``{module name: path}`` of every module under ``dualgpu/``."""
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports(mods):
    """``{module: {imported module: line}}``: imports of dualgpu's own modules, at any depth."""
    edges = {}
    for name, path in mods.items():
        tree = ast.parse(path.read_text(), str(path))
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = {}
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    parts = parts[: len(parts) - (node.level - 1)]
                    base = ".".join(parts) + ("." + node.module if node.module else "")
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in mods else base)
            for target in targets:
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    found.setdefault(target, node.lineno)
        edges[name] = found
    return edges


def floor_of(name):
    """The floor name of module ``name``."""
    if name in FOUNDATION:
        return "foundation"
    parts = name.split(".")
    if len(parts) >= 2 and parts[1] in FLOORS and parts[1] not in ("foundation", "facade"):
        return parts[1]
    return "facade"


def cycles(edges):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def upward(edges):
    """``[(module, line, imported module)]`` for every import that goes up a floor or sideways
    between ``host`` and ``compiled``."""
    bad = []
    for name, targets in sorted(edges.items()):
        mine = floor_of(name)
        for target, line in sorted(targets.items(), key=lambda kv: kv[1]):
            theirs = floor_of(target)
            if FLOORS[theirs] > FLOORS[mine] or (
                    mine != theirs and FLOORS[mine] == FLOORS[theirs] == 2):
                bad.append((name, line, target))
    return bad


if __name__ == "__main__":
    graph = imports(modules())
    for component in cycles(graph):
        print("cycle:", " ".join(component))
        members = set(component)
        for m in component:
            print("   ", m, "->",
                  ", ".join(f"{t}:{l}" for t, l in graph[m].items() if t in members))
    for name, line, target in upward(graph):
        print(f"up: {name}:{line} imports {target} ({floor_of(name)} -> {floor_of(target)})")
