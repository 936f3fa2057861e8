"""Run the python code blocks of a Markdown page, in order, in one namespace.

Used by ``tests/test_docs_examples.py`` for README.md and every ``docs/**/*.md`` page. Each
block is written to a file of its own before it runs, so kernels defined in a block have
their source on disk (the cpu backend reads it). A block is skipped only when the line
before its fence is an HTML comment ``<!-- skip: the reason -->``; the reason shows on the
page's source and in the test's output.
"""
import re
import tempfile
from pathlib import Path

__all__ = ["BLOCK", "SKIP", "python_blocks", "run_page"]

BLOCK = re.compile(r"^(?P<before>.*\n)?```python[ \t]*\n(?P<code>.*?)^```[ \t]*$", re.S | re.M)
SKIP = re.compile(r"<!--\s*skip:\s*(?P<reason>.+?)\s*-->\s*$")
FENCE = re.compile(r"^```python[ \t]*$", re.M)


def python_blocks(text):
    """Return ``[(line, code, skip_reason_or_None)]`` of the ```python blocks of ``text``."""
    blocks = []
    lines = text.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        if FENCE.match(lines[i].rstrip("\n")):
            start = i
            j = i + 1
            while j < len(lines) and lines[j].rstrip() != "```":
                j += 1
            if j == len(lines):
                raise ValueError(f"line {start + 1}: a ```python block is never closed")
            before = lines[start - 1] if start else ""
            skip = SKIP.search(before)
            blocks.append((start + 1, "".join(lines[start + 1:j]),
                           skip.group("reason") if skip else None))
            i = j + 1
        else:
            i += 1
    return blocks


def run_page(path, label=None):
    """Execute the page's blocks in order in one namespace; return ``(ran, skipped)`` lists.

    An exception in a block propagates with a traceback that names the page, the block's
    first line and the line inside it.
    """
    path = Path(path)
    label = label or path.name
    namespace = {"__name__": "docs_page"}
    ran, skipped = [], []
    folder = Path(tempfile.mkdtemp(prefix="dualgpu_docs_"))
    for number, (line, code, reason) in enumerate(python_blocks(path.read_text())):
        if reason is not None:
            skipped.append((line, reason))
            continue
        stem = re.sub(r"\W", "_", f"{label}_line{line}")
        source = folder / f"{stem}.py"
        source.write_text(code)
        exec(compile(code, str(source), "exec"), namespace)
        ran.append(line)
    return ran, skipped
