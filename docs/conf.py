"""Sphinx configuration of the dualgpu documentation.

Build: ``python -m sphinx -W -b html docs docs/_build/html`` (the ``docs`` extra installs
the tools). The build runs every gallery example (``docs/examples/plot_*.py``) and writes
the API pages from ``API_MODULES`` below. It needs no network: intersphinx links to numpy,
scipy, numba and matplotlib are made only when ``DUALGPU_DOCS_INTERSPHINX=1`` says the
network is there (see ``dev/contributing.md``).
"""
import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
REPO = DOCS.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(DOCS))           # _gallery_scraper, _api_pages

os.environ.setdefault("DUALGPU_BACKEND", "cpu")
os.environ.setdefault("MPLBACKEND", "Agg")

import dualgpu  # noqa: E402

from _api_pages import write_api_pages  # noqa: E402
from _gallery_scraper import mark_example_start, png_files_scraper  # noqa: E402

project = "dualgpu"
author = "the dualgpu authors"
copyright = "2026, the dualgpu authors"
release = version = dualgpu.__version__


def _repository_url():
    """The ``url`` of setup.cfg's [metadata], else CITATION.cff's ``repository-code`` (or "")."""
    import configparser
    import re

    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    url = config.get("metadata", "url", fallback="").strip()
    citation = REPO / "CITATION.cff"
    if not url and citation.exists():
        found = re.search(r"^repository-code:\s*[\"']?([^\"'\s]+)", citation.read_text(), re.M)
        url = found.group(1) if found else ""
    return url


REPOSITORY_URL = _repository_url()

extensions = [
    "myst_parser",
    "numpydoc",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx_gallery.gen_gallery",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "tests", "examples/README.rst", "**/.ipynb_checkpoints",
                    "auto_examples/*.ipynb", "auto_examples/*.py", "auto_examples/*.zip",
                    "auto_examples/*.json"]
templates_path = []
# The gallery's configuration holds the PNG scraper (a function), which Sphinx cannot pickle.
suppress_warnings = ["config.cache"]

# ---------------------------------------------------------------- MyST
myst_enable_extensions = ["colon_fence", "deflist", "dollarmath", "substitution"]
myst_heading_anchors = 3
# {{ version }} and {{ repository }} in the Markdown pages (install page, landing page)
myst_substitutions = {
    "version": version,
    "repository": (f"[{REPOSITORY_URL}]({REPOSITORY_URL})" if REPOSITORY_URL
                   else "the project's repository"),
    "clone_url": REPOSITORY_URL or "<repository URL>",
}

# ---------------------------------------------------------------- cross-references
# Every reference must resolve (-W makes an unresolved one an error). While intersphinx is
# off (the default, offline build) the names of other projects cannot resolve: the few that
# docstrings name in their types and prose are listed here, each as what it is.
nitpicky = True
nitpick_ignore = [
    ("py:class", "numpy.ndarray"),             # numpy: intersphinx only
    ("py:class", "matplotlib.figure.Figure"),  # matplotlib: intersphinx only
    ("py:class", "matplotlib.axes.Axes"),      # matplotlib: intersphinx only
    ("py:mod", "math"),                        # the standard library: intersphinx only
    ("py:mod", "warnings"),
    ("py:mod", "contextvars"),
]

# ---------------------------------------------------------------- API reference
# One line per public module: the API pages are written from each module's __all__.
API_MODULES = [
    "dualgpu",
    "dualgpu.cuda",
    "dualgpu.cuda.random",
    "dualgpu.sparse",
    "dualgpu.rules",
    "dualgpu.dmath",
    "dualgpu.dcmath",
    "dualgpu.testing",
    "dualgpu.errors",
    "dualgpu.plot",
    "dualgpu.distributed",
    "dualgpu.nansafe",
    "dualgpu.interop",
    "dualgpu.sensitivity",
]
# The guide pages that teach each module (or name): the "See also" of its API pages.
API_GUIDES = {
    "dualgpu": ["getting-started"],
    "dualgpu.Dual": ["user/duals"], "dualgpu.DualArray": ["user/duals"],
    "dualgpu.dual_array": ["user/duals"], "dualgpu.astype": ["user/duals"],
    "dualgpu.float32": ["user/duals"], "dualgpu.float64": ["user/duals"],
    "dualgpu.jvp": ["user/jacobians"], "dualgpu.jvp_batch": ["user/jacobians"],
    "dualgpu.jacfwd": ["user/jacobians"], "dualgpu.jacobian": ["user/jacobians", "user/sparse"],
    "dualgpu.hvp": ["user/second-order"], "dualgpu.hessian": ["user/second-order"],
    "dualgpu.ensemble_jacobian": ["user/ensembles"], "dualgpu.propagate": ["user/calibration"],
    "dualgpu.jit": ["user/porting"], "dualgpu.backend": ["install"],
    "dualgpu.set_backend": ["install"], "dualgpu.using_backend": ["install"],
    "dualgpu.zeros": ["user/host-buffers-and-factories"],
    "dualgpu.keep_host_buffers": ["user/host-buffers-and-factories"],
    "dualgpu.cuda": ["user/porting", "user/block-level"],
    "dualgpu.cuda.random": ["user/porting"],
    "dualgpu.sparse": ["user/sparse", "user/sparse-reuse"],
    "dualgpu.rules": ["user/rules"],
    "dualgpu.dmath": ["user/duals"],
    "dualgpu.dcmath": ["user/complex"],
    "dualgpu.testing": ["getting-started"],
    "dualgpu.errors": ["help/troubleshooting"],
    "dualgpu.DualgpuError": ["help/troubleshooting"],
    "dualgpu.MissingRuleError": ["help/troubleshooting", "user/rules"],
    "dualgpu.UnportedKernelError": ["help/troubleshooting", "user/porting"],
    "dualgpu.UnsupportedFeatureError": ["help/troubleshooting", "limitations"],
    "dualgpu.plot": ["user/figures"],
    "dualgpu.distributed": ["user/dask"],
    "dualgpu.nansafe": ["user/duals"],
    "dualgpu.interop": ["user/jax"],
    "dualgpu.sensitivity": ["user/global-sensitivity"],
}
write_api_pages(API_MODULES, DOCS / "api" / "generated", API_GUIDES)

autosummary_generate = False           # the stubs come from write_api_pages
autodoc_default_options = {}  # class pages list their members with :members: (_api_pages)
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False        # types are words, not links: no warnings offline

# ---------------------------------------------------------------- intersphinx (offline-safe)
if os.environ.get("DUALGPU_DOCS_INTERSPHINX") == "1":
    intersphinx_mapping = {
        "python": ("https://docs.python.org/3", None),
        "numpy": ("https://numpy.org/doc/stable", None),
        "scipy": ("https://docs.scipy.org/doc/scipy", None),
        "numba": ("https://numba.readthedocs.io/en/stable", None),
        "matplotlib": ("https://matplotlib.org/stable", None),
    }
else:
    intersphinx_mapping = {}
intersphinx_timeout = 10

# ---------------------------------------------------------------- gallery
sphinx_gallery_conf = {
    "examples_dirs": "examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    # matplotlib: the figures an example leaves open in pyplot; png_files_scraper: the PNG
    # files it writes under out/ while it runs (only its own: see _gallery_scraper)
    "image_scrapers": ("matplotlib", png_files_scraper),
    "reset_modules": ("matplotlib", mark_example_start),
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "abort_on_example_error": True,
    "show_memory": False,
    "capture_repr": (),            # no trailing reprs: a cell shows its printout and figures
    "plot_gallery": "True",
}

# ---------------------------------------------------------------- HTML
html_theme = "pydata_sphinx_theme"
html_title = f"dualgpu {version}"
html_static_path = []
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "header_links_before_dropdown": 6,   # the sections of index.md: short names, one line
    "logo": {"text": f"dualgpu {version}"},  # the version on every page, in the header
    "icon_links": ([{"name": "Repository", "url": REPOSITORY_URL,
                     "icon": "fa-brands fa-git-alt", "type": "fontawesome"}]
                   if REPOSITORY_URL else []),
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}


# ---------------------------------------------------------------- new user-guide pages
def _list_new_user_pages(app, docname, source):
    """Append a "More topics" toctree of the docs/user pages user/index.md does not name."""
    if docname != "user/index":
        return
    import re

    named = set(re.findall(r"^([\w-]+)\s*$", source[0], re.M))
    new = sorted(p.stem for p in (DOCS / "user").glob("*.md")
                 if p.stem != "index" and p.stem not in named)
    if new:
        source[0] += ("\n```{toctree}\n:maxdepth: 1\n:caption: More topics\n\n"
                      + "\n".join(new) + "\n```\n")


def setup(app):
    app.connect("source-read", _list_new_user_pages)
