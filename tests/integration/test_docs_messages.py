"""The error messages quoted on the troubleshooting page are checked whole, word for word.

The page (docs/help/troubleshooting.md) runs in docs/tests/test_pages.py; each of its blocks
raises an error and compares the whole message with the quote beside it (``expect``). These
tests show that the comparison fails when one word of a quote differs or when words are
missing at its end, and that the page covers every exception class a user can meet.
"""
import re
from pathlib import Path

import pytest

from docs_blocks import run_page

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "help" / "troubleshooting.md"


def _page_with(tmp_path, old, new):
    text = PAGE.read_text()
    assert old in text
    page = tmp_path / "troubleshooting.md"
    page.write_text(text.replace(old, new, 1))
    return page


def test_a_quote_with_one_word_changed_fails(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    page = _page_with(tmp_path, "expected one of ('cuda', 'cpu', 'cudasim')",
                      "expected one of ('cuda', 'cpu', 'simulator')")
    with pytest.raises(AssertionError, match="quoted: DualgpuError: unknown backend"):
        run_page(page)


def test_a_quote_cut_short_fails(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    page = _page_with(tmp_path, "dualgpu.set_backend(name) or the DUALGPU_BACKEND environment "
                      "variable).", "dualgpu.set_backend(name)")
    with pytest.raises(AssertionError, match="quoted:"):
        run_page(page)


QUOTE = re.compile(r"^> *(\w*(Error|Warning)): ", re.M)


def test_no_page_quotes_an_error_message_unchecked():
    """Quoted messages live on the troubleshooting page, where they are compared whole."""
    pages = [p for p in (ROOT / "docs").rglob("*.md") if "_build" not in p.parts]
    quoting = [str(p.relative_to(ROOT)) for p in pages if QUOTE.search(p.read_text())]
    assert not quoting, f"{quoting} quote error messages in > blocks: link the troubleshooting " \
        "page's entry instead (its quotes are checked word for word)"


def test_every_exception_class_has_an_entry():
    import dualgpu.errors

    text = PAGE.read_text()
    quoted = set(re.findall(r'^\s*(\w+Error): ', text, re.M))
    classes = {"DualgpuError", "MissingRuleError", "UnportedKernelError",
               "UnsupportedFeatureError"}
    assert all(issubclass(getattr(dualgpu.errors, c), dualgpu.errors.DualgpuBaseError)
               for c in classes)
    assert classes <= quoted, f"no quoted message of {sorted(classes - quoted)}"


def _quote_after(anchor):
    """The ```text block that follows ``anchor`` on the troubleshooting page, one line."""
    text = PAGE.read_text()
    block = text[text.index(anchor):].split("```text\n", 1)[1].split("```", 1)[0]
    return " ".join(block.split())


def test_the_launch_coverage_quote_is_the_warning(recwarn):
    import warnings

    import numpy as np

    import dualgpu
    from dualgpu import cuda
    from kernels_for_docs_messages import doubled

    with dualgpu.using_backend("cpu"), warnings.catch_warnings():
        warnings.simplefilter("always", dualgpu.errors.LaunchCoverageWarning)
        u = cuda.to_device(np.ones(8))
        doubled[1, 4](u, cuda.device_array_like(u))
    seen = {" ".join(f"LaunchCoverageWarning: {w.message}".split()) for w in recwarn.list
            if w.category is dualgpu.errors.LaunchCoverageWarning}
    assert seen == {_quote_after("(tr-launch-coverage)=")}
