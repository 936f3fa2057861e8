"""The README starts with the two commands, and its python blocks run (as the site's pages do in
docs/tests/test_pages.py, with the same runner: tests/fixtures/docs_blocks.py)."""
from pathlib import Path

import pytest

from docs_blocks import run_page

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_begins_with_the_two_commands():
    lines = [line for line in README.read_text().splitlines() if line.strip()]
    assert lines[1].strip().startswith(
        "$ python3 -m pip install -e \".[test]\" && python3 scripts/")
    # the test suite on every core (pytest-xdist, from the test extra), as .ci/run runs it
    assert lines[2].strip() == "$ python3 -m pytest -q -n auto --maxprocesses 8 --dist loadfile"
    script = lines[1].split("&&")[1].split()[1]
    assert (README.parent / script).is_file()


@pytest.fixture
def restore_backend():
    import dualgpu

    yield
    dualgpu.set_backend(None)


def test_readme_examples_run(restore_backend, monkeypatch):
    monkeypatch.chdir(README.parent)
    ran, skipped = run_page(README, label="README.md")
    for line, reason in skipped:
        print(f"README.md:{line}: block skipped: {reason}")
    assert ran, "every block of README.md is skipped"


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
