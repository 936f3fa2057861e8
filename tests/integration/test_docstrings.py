"""Every public name has a numpydoc docstring that a user can learn from.

The public names are the ``__all__`` of the modules in ``API_MODULES`` of ``docs/conf.py``
(the modules the API reference shows). For each function and class dualgpu defines there,
numpydoc's validation must find a summary, every parameter documented (and none that does
not exist), a Returns (or Yields) section where it returns something and an Examples section
with at least one doctest line; a body that raises needs a Raises section. The Examples run
as doctests in the suite (``--doctest-modules``). Names re-exported from numba are
numba's to document; data (tables, constants) need a docstring of their own.
"""
import ast
import importlib
import inspect
import sys
import textwrap
import types
from pathlib import Path

import pytest
from numpydoc.docscrape import ClassDoc, FunctionDoc
from numpydoc.validate import validate

ROOT = Path(__file__).resolve().parents[2]

# numpydoc's codes that a public docstring must not produce
REQUIRED = {
    "GL08": "no docstring",
    "SS01": "no summary",
    "PR01": "a parameter is not documented",
    "PR02": "a documented parameter does not exist",
    "RT01": "returns something but has no Returns section",
    "YD01": "is a generator but has no Yields section",
    "EX01": "no Examples section",
}


def api_modules():
    """The ``API_MODULES`` list of ``docs/conf.py``, read without running the file."""
    tree = ast.parse((ROOT / "docs" / "conf.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "API_MODULES":
            return ast.literal_eval(node.value)
    raise AssertionError("docs/conf.py has no API_MODULES list")


def public_objects():
    """``[(qualified name, object, kind)]`` for every documented public name."""
    found = {}
    for modname in api_modules():
        module = importlib.import_module(modname)
        found.setdefault(modname, (module, "module"))
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if inspect.ismodule(obj):
                found.setdefault(obj.__name__, (obj, "module"))
            elif not callable(obj):
                found.setdefault(f"{modname}.{name}", (obj, "data"))
            elif (getattr(obj, "__module__", "") or "").startswith("dualgpu"):
                found.setdefault(f"{modname}.{name}", (obj, "callable"))
    return sorted((name, obj, kind) for name, (obj, kind) in found.items())


PUBLIC = public_objects()


def _raises_directly(obj):
    """True when the function's own body (or a class's __init__) has a raise statement."""
    target = obj.__init__ if inspect.isclass(obj) else obj
    target = getattr(target, "__wrapped__", target)
    try:
        source = textwrap.dedent(inspect.getsource(target))
    except (OSError, TypeError):
        return False
    tree = ast.parse(source)
    func = tree.body[0]

    def walk(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Raise):
                return True
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                  ast.ClassDef)):
                continue
            if walk(child):
                return True
        return False

    return walk(func)


def _data_docstring(qualname):
    """The docstring written after a constant's assignment (``X = 1`` then a string)."""
    from sphinx.pycode import ModuleAnalyzer

    modname, name = qualname.rsplit(".", 1)
    docs = ModuleAnalyzer.for_module(modname).find_attr_docs()
    return "".join(docs.get(("", name), ())).strip()


@pytest.mark.parametrize("qualname,obj,kind", PUBLIC, ids=[p[0] for p in PUBLIC])
def test_public_name_has_a_numpydoc_docstring(qualname, obj, kind):
    if kind == "module":
        assert (obj.__doc__ or "").strip(), f"module {qualname} has no docstring"
        return
    if kind == "data":
        assert _data_docstring(qualname), (
            f"{qualname} has no docstring: write a string literal on the line after it")
        return
    problems = [f"{code} {REQUIRED[code]}: {text}"
                for code, text in validate(qualname)["errors"] if code in REQUIRED]
    text = inspect.getdoc(obj) or ""
    if "Examples" in text and ">>>" not in text.split("Examples", 1)[1]:
        problems.append("the Examples section has no doctest (>>>) line")
    parsed = ClassDoc(obj) if inspect.isclass(obj) else FunctionDoc(obj)
    if _raises_directly(obj) and not parsed["Raises"]:
        problems.append("its body raises, but there is no Raises section")
    assert not problems, f"{qualname}:\n  " + "\n  ".join(problems)


def test_the_api_reference_lists_every_public_module():
    import dualgpu

    modules = {obj.__name__ for name in dualgpu.__all__
               if inspect.ismodule(obj := getattr(dualgpu, name))}
    missing = modules - set(api_modules())
    assert not missing, f"add {sorted(missing)} to API_MODULES in docs/conf.py"


def test_the_check_finds_a_bad_docstring(monkeypatch):
    module = types.ModuleType("dualgpu_fake_docstrings")

    def bad(x, y):
        """Return something."""
        if x:
            raise ValueError("no")
        return x + y

    bad.__module__ = module.__name__
    module.bad = bad
    monkeypatch.setitem(sys.modules, module.__name__, module)
    codes = {code for code, _ in validate(f"{module.__name__}.bad")["errors"]}
    assert {"PR01", "RT01", "EX01"} <= codes
    assert _raises_directly(bad) and not FunctionDoc(bad)["Raises"]
