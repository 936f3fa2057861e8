"""Every python block of every docs/**/*.md page runs, page by page.

The site's pages are checked with the site (``python3 -m nox -s pages``, run by CI after the
README's test command): ``python3 -m pytest -q docs/tests``. README.md's blocks run in the test
suite (tests/integration/test_readme.py), with the same runner (tests/fixtures/docs_blocks.py).

Blocks of one page run in order in one namespace (a page reads as one session). A block is
skipped only with a visible reason (``<!-- skip: reason -->`` on the line before it), and
the skip shows in the test report. tests/integration/test_readme.py shows that the runner
can fail.
"""
from pathlib import Path

import pytest

from docs_blocks import python_blocks, run_page

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ALL_PAGES = sorted(p for p in (ROOT / "docs").rglob("*.md") if "_build" not in p.parts)
PAGES = [p for p in ALL_PAGES if python_blocks(p.read_text())]  # pages with code to run


@pytest.fixture
def restore_backend():
    import dualgpu

    yield
    dualgpu.set_backend(None)


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_page_examples_run(page, restore_backend, monkeypatch):
    text = page.read_text()
    if "local_cluster" in text or "import dask" in text:
        pytest.importorskip("distributed", reason="Dask is the optional extra 'distributed'")
    monkeypatch.chdir(ROOT)
    ran, skipped = run_page(page, label=str(page.relative_to(ROOT)))
    for line, reason in skipped:
        print(f"{page.relative_to(ROOT)}:{line}: block skipped: {reason}")
    assert ran, f"every block of {page.name} is skipped"
