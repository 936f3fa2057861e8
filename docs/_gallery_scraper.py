"""A sphinx-gallery image scraper for figures an example saves as PNG files.

An example that saves its figures (``fig.savefig("out/name.png")``) instead of leaving them
open in pyplot gets them shown all the same: after each code block, this scraper shows the
PNGs under the example's ``out/`` folder written since the block before, in the order
written. Only files written while the running example runs count (``mark_example_start``,
called by sphinx-gallery before each example, notes the time), so the output a previous
build or another example left there never shows on this example's page.
"""
import shutil
import time
from pathlib import Path

from sphinx_gallery.scrapers import figure_rst

__all__ = ["mark_example_start", "png_files_scraper"]

_STATE = {"started": 0, "seen": {}}


def mark_example_start(gallery_conf, fname):
    """Note the time an example starts (a sphinx-gallery ``reset_modules`` callable)."""
    _STATE["started"] = time.time_ns()
    _STATE["seen"] = {}


def png_files_scraper(block, block_vars, gallery_conf):
    """Copy the example's new PNGs under ``out/`` into the gallery; return their rst."""
    out = Path(block_vars["src_file"]).parent / "out"
    new = []
    paths = out.rglob("*.png") if out.is_dir() else ()
    for path in sorted(paths, key=lambda p: (p.stat().st_mtime_ns, str(p))):
        stamp = path.stat().st_mtime_ns
        if stamp >= _STATE["started"] and _STATE["seen"].get(path) != stamp:
            _STATE["seen"][path] = stamp
            new.append(path)
    image_names = []
    for path, image_path in zip(new, block_vars["image_path_iterator"]):
        shutil.copyfile(path, image_path)
        image_names.append(image_path)
    return figure_rst(image_names, gallery_conf["src_dir"])
