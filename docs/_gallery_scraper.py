"""A sphinx-gallery image scraper for figures saved as PNG files.

The gallery examples run the scripts of ``scripts/``, which draw headless matplotlib figures
and save them as ``out/<script>/<name>.png`` (relative to the working directory, which
sphinx-gallery sets to the example's folder) instead of leaving them open in pyplot. This
scraper shows every PNG written there since the last code block, in the order written.
"""
import shutil
from pathlib import Path

from sphinx_gallery.scrapers import figure_rst

__all__ = ["png_files_scraper"]

_SEEN = {}


def png_files_scraper(block, block_vars, gallery_conf):
    """Copy the PNGs new under the example's ``out/`` into the gallery; return their rst."""
    out = Path(block_vars["src_file"]).parent / "out"
    new = []
    for path in sorted(out.rglob("*.png"), key=lambda p: (p.stat().st_mtime_ns, str(p))):
        stamp = path.stat().st_mtime_ns
        if _SEEN.get(path) != stamp:
            _SEEN[path] = stamp
            new.append(path)
    image_names = []
    for path, image_path in zip(new, block_vars["image_path_iterator"]):
        shutil.copyfile(path, image_path)
        image_names.append(image_path)
    return figure_rst(image_names, gallery_conf["src_dir"])
