"""The guide links to the reference and the reference back to the guide.

Every public API name a docs page writes as code (```dualgpu.jacobian```) outside code blocks
must be a link (``{func}`dualgpu.jacobian```), so a reader can reach its reference page; and
every module of the API reference names the guide pages that teach it (its "See also").
"""
import ast
import importlib
import inspect
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SPAN = re.compile(r"(?<![`}])`(dualgpu(?:\.\w+)+)(?:\(\))?`(?!`)")


def _conf_value(name):
    tree = ast.parse((ROOT / "docs" / "conf.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == name:
            return ast.literal_eval(node.value)
    raise AssertionError(f"docs/conf.py has no {name}")


def _api_names():
    names = set()
    for modname in _conf_value("API_MODULES"):
        module = importlib.import_module(modname)
        names.add(modname)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if inspect.ismodule(obj):
                continue
            if callable(obj) and not (getattr(obj, "__module__", "") or "").startswith(
                    "dualgpu"):
                continue                         # numba's own: documented by numba
            names.add(f"{modname}.{name}")
    return names


def _unlinked(text, names):
    found, fence = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        if fence or line.startswith("#"):        # code blocks and headings stay code
            continue
        found += [(number, m.group(1)) for m in SPAN.finditer(line) if m.group(1) in names]
    return found


def test_api_names_in_the_guide_are_links():
    names = _api_names()
    pages = [p for p in (ROOT / "docs").rglob("*.md") if "_build" not in p.parts]
    missing = {str(p.relative_to(ROOT)): found for p in pages
               if (found := _unlinked(p.read_text(), names))}
    assert not missing, ("write these as roles ({func}`dualgpu.x`, {class}`...`, {mod}`...`) "
                         f"so they link the reference: {missing}")


def test_the_check_finds_an_unlinked_name():
    text = "Call `dualgpu.jacobian` or {func}`dualgpu.jvp`.\n\n```python\ndualgpu.hessian\n```\n"
    assert _unlinked(text, {"dualgpu.jacobian", "dualgpu.jvp", "dualgpu.hessian"}) == [
        (1, "dualgpu.jacobian")]


def test_every_api_module_names_its_guide_pages():
    guides = _conf_value("API_GUIDES")
    modules = _conf_value("API_MODULES")
    assert not [m for m in modules if not guides.get(m)], "add the module to API_GUIDES"
    docs = {str(p.relative_to(ROOT / "docs").with_suffix(""))
            for p in (ROOT / "docs").rglob("*.md")}
    missing = sorted({page for pages in guides.values() for page in pages} - docs)
    assert not missing, f"API_GUIDES names pages that do not exist: {missing}"


def _conf_function(name, **namespace):
    tree = ast.parse((ROOT / "docs" / "conf.py").read_text())
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    exec(compile(ast.Module(body=[node], type_ignores=[]), "conf.py", "exec"), namespace)
    return namespace[name]


def test_a_new_user_page_joins_the_guide_by_itself(tmp_path):
    (tmp_path / "user").mkdir()
    for page in ("index", "porting", "brand-new"):
        (tmp_path / "user" / f"{page}.md").write_text(f"# {page}\n")
    add_pages = _conf_function("_list_new_user_pages", DOCS=tmp_path)
    source = ["# User guide\n\n```{toctree}\n:caption: Porting kernels\n\nporting\n```\n"]
    add_pages(None, "user/index", source)
    assert source[0].endswith(":caption: More topics\n\nbrand-new\n```\n")
    untouched = ["# Other\n"]
    add_pages(None, "install", untouched)
    assert untouched == ["# Other\n"]
