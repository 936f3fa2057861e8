"""The pages name files that exist, and the architecture page names every floor's package."""
import re
from pathlib import Path

import pytest

import import_graph as ig

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
PAGES = [p for p in PAGES if "_build" not in p.parts and "changelog" not in p.name]
PATH = re.compile(r"`((?:dualgpu|tests|scripts|benchmarks|simulations)/[\w/.\-]*)`")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_a_page_names_exists(page):
    missing = [m for m in PATH.findall(page.read_text())
               if "*" not in m and "{" not in m and not (ROOT / m).exists()]
    assert not missing, f"{page.relative_to(ROOT)} names paths that do not exist: {missing}"


def test_the_architecture_page_names_every_subpackage():
    text = (ROOT / "docs" / "dev" / "architecture.md").read_text()
    packages = sorted({str(p.parent.relative_to(ROOT)) for p in ig.PACKAGE.rglob("__init__.py")})
    missing = [p for p in packages if p.removeprefix("dualgpu/").split("/")[0] + "/" not in text
               and p != "dualgpu"]
    assert not missing, f"docs/dev/architecture.md does not name {missing}"
