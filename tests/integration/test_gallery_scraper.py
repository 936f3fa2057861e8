"""The gallery's PNG scraper shows only what the running example wrote.

A PNG left under ``docs/examples/out/`` by an earlier build, or by another example, must not
appear on this example's page (it once put the second-order example's figures on the
calibration page).
"""
import os
import sys
import time
from pathlib import Path

import pytest

# the scraper is a sphinx-gallery plugin: the `docs` extra installs sphinx-gallery, the `test`
# extra does not (CI builds the site, scraper included, from the docs extra: nox -s docs)
pytest.importorskip("sphinx_gallery", reason="sphinx-gallery is in the docs extra")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs"))

from _gallery_scraper import mark_example_start, png_files_scraper  # noqa: E402


def _png(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x89PNG\r\n\x1a\n")
    return path


def _scrape(tmp_path, names):
    targets = iter(str(tmp_path / "gallery" / name) for name in names)
    (tmp_path / "gallery").mkdir(exist_ok=True)
    block_vars = {"src_file": str(tmp_path / "plot_example.py"), "image_path_iterator": targets}
    return png_files_scraper(None, block_vars, {"src_dir": str(tmp_path)})


def test_only_the_running_examples_new_files_are_shown(tmp_path):
    stale = _png(tmp_path / "out" / "other_example" / "old.png")
    past = time.time() - 60
    os.utime(stale, (past, past))
    mark_example_start({}, str(tmp_path / "plot_example.py"))
    _png(tmp_path / "out" / "example" / "fresh.png")
    rst = _scrape(tmp_path, ["image_1.png", "image_2.png"])
    assert "image_1.png" in rst and "image_2.png" not in rst
    assert (tmp_path / "gallery" / "image_1.png").read_bytes().startswith(b"\x89PNG")
    # the next block of the same example: nothing new, nothing shown again
    assert "image" not in _scrape(tmp_path, ["image_3.png"])
