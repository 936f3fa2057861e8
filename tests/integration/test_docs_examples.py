"""Every python block of README.md and of every docs/**/*.md page runs, page by page.

Blocks of one page run in order in one namespace (a page reads as one session). A block is
skipped only with a visible reason (``<!-- skip: reason -->`` on the line before it), and
the skip shows in the test report. ``test_a_broken_block_fails`` shows that the check can
fail.
"""
from pathlib import Path

import pytest

from docs_blocks import python_blocks, run_page

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ALL_PAGES = sorted([ROOT / "README.md"] + [p for p in (ROOT / "docs").rglob("*.md")
                                           if "_build" not in p.parts])
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


def test_a_broken_block_fails(tmp_path):
    page = tmp_path / "broken.md"
    page.write_text("# A page\n\n```python\nx = 1\n```\n\ntext\n\n```python\n"
                    "assert x == 2, 'the second block sees the first block and fails'\n```\n")
    with pytest.raises(AssertionError, match="the second block sees the first block"):
        run_page(page)


def test_a_skip_needs_a_reason_and_is_reported(tmp_path):
    page = tmp_path / "skips.md"
    page.write_text("<!-- skip: needs a GPU -->\n```python\nraise RuntimeError\n```\n\n"
                    "```python\ny = 2\n```\n")
    ran, skipped = run_page(page)
    assert skipped == [(2, "needs a GPU")] and ran == [6]


def test_kernels_defined_on_a_page_run_on_the_cpu_backend(tmp_path, restore_backend):
    page = tmp_path / "kernel.md"
    page.write_text("""```python
import numpy as np
import dualgpu
from dualgpu import cuda

dualgpu.set_backend("cpu")

@cuda.jit
def double(u, out):
    i = cuda.grid(1)
    if i < u.shape[0]:
        out[i] = 2.0 * u[i]
```

```python
def f(u):
    out = cuda.device_array_like(u)
    double[1, 32](cuda.to_device(u), out)
    return out.copy_to_host()

assert np.allclose(dualgpu.jacobian(f, np.ones(3)), 2.0 * np.eye(3))
```
""")
    assert run_page(page)[0] == [1, 15]
