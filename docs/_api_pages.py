"""Write the API reference pages (reStructuredText) from the public modules' ``__all__``.

``docs/conf.py`` calls :func:`write_api_pages` with its ``API_MODULES`` list, so adding a
module to the reference is one line there. Each module gets a page (its docstring and a
table of its public names) and each name defined by dualgpu a page of its own. Names a
module re-exports from numba (``dualgpu.cuda.grid``...) are listed and left to numba's
documentation; submodules are linked to their own pages. A name a module shares with a module
earlier in the list (``dualgpu.sensitivity.dgsm_bars`` is ``dualgpu.plot.dgsm_bars``) has one
page, the earlier module's, and the later module links to it. Every page ends with a "See
also" to the guide page that teaches the name (``guides``).
"""
import importlib
import inspect
from pathlib import Path

__all__ = ["public_names", "write_api_pages"]


def public_names(module):
    """Return ``[(name, object)]`` of a module's ``__all__`` (empty when it has none)."""
    return [(name, getattr(module, name)) for name in getattr(module, "__all__", ())]


def _defined_here(obj):
    return (getattr(obj, "__module__", "") or "").startswith("dualgpu")


def _directive(obj):
    if inspect.isclass(obj):
        return "autoexception" if issubclass(obj, BaseException) else "autoclass"
    if callable(obj):
        return "autofunction"
    return "autodata"


def _title(text):
    return f"{text}\n{'=' * len(text)}\n"


def _write(path, text):
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def _see_also(guides, modname, name=None):
    """The rst "See also" of a page: the guide pages ``guides`` names for it (or its module)."""
    pages = guides.get(f"{modname}.{name}") or guides.get(modname) or ()
    if not pages:
        return ""
    return ".. seealso::\n\n   " + ", ".join(f":doc:`/{page}`" for page in pages) + "\n"


def write_api_pages(modules, folder, guides=None):
    """Write ``<folder>/<module>.rst`` and ``<folder>/names/<module>.<name>.rst``; return the
    modules.

    ``guides`` maps a module or a qualified name to the guide pages (docnames) that teach it.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    guides = guides or {}
    pages = {}                               # id(object) -> its page's qualified name
    written = set()
    for modname in modules:
        module = importlib.import_module(modname)
        documented, elsewhere, submodules, shared = [], [], [], []
        for name, obj in public_names(module):
            if inspect.ismodule(obj):  # by its public name where it has a page
                public = f"{modname}.{name}"
                submodules.append(public if public in modules else obj.__name__)
            elif (_defined_here(obj) or not callable(obj)) and id(obj) in pages:
                shared.append((name, pages[id(obj)]))
            elif _defined_here(obj) or not callable(obj):
                documented.append((name, obj))
                pages[id(obj)] = f"{modname}.{name}"
            else:
                elsewhere.append((name, obj))
        lines = [_title(modname), f".. automodule:: {modname}\n", f".. currentmodule:: {modname}\n"]
        if documented:
            lines += [".. autosummary::", "   :toctree: names", "   :nosignatures:", ""]
            lines += [f"   {name}" for name, _ in documented]
            lines.append("")
        if submodules:
            lines.append("Modules: " + ", ".join(
                f":doc:`{m}`" if m in modules else f":mod:`{m}`" for m in submodules) + ".\n")
        if shared:
            lines.append("Also here: " + ", ".join(
                f"``{name}`` (:obj:`{page}`)" for name, page in shared) + ".\n")
        if elsewhere:
            origin = sorted({(getattr(o, "__module__", None) or "numba.cuda").split(".")[0]
                             for _, o in elsewhere})
            lines.append(f"Re-exported from {' and '.join(origin)} as they are (see its own "
                         "documentation): " + ", ".join(f"``{n}``" for n, _ in elsewhere) + ".\n")
        lines.append(_see_also(guides, modname))
        _write(folder / f"{modname}.rst", "\n".join(lines))
        written.add(folder / f"{modname}.rst")
        (folder / "names").mkdir(exist_ok=True)
        for name, obj in documented:
            options = "   :members:\n" if inspect.isclass(obj) else ""
            written.add(folder / "names" / f"{modname}.{name}.rst")
            _write(folder / "names" / f"{modname}.{name}.rst",
                   f"{_title(f'{modname}.{name}')}\n.. currentmodule:: {modname}\n\n"
                   f".. {_directive(obj)}:: {name}\n{options}\n"
                   + _see_also(guides, modname, name))
    for stale in set(folder.glob("*.rst")) | set((folder / "names").glob("*.rst")):
        if stale not in written:             # a name that left an __all__: no orphan page
            stale.unlink()
    return list(modules)
