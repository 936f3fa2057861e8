"""The ``docs`` extra alone builds the site: what the gallery examples import, it installs.

``pip install -e ".[docs]"`` then the build command runs every gallery example, so each
package an example imports (or needs through dualgpu: JAX for ``to_jax``, SALib for
``salib_sobol``) must come with the base install or the ``docs`` extra of setup.cfg.
"""
import ast
import configparser
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "docs" / "examples").glob("plot_*.py"))
# what dualgpu functions need beyond the base install
NEEDS = {"to_jax": "jax", "salib_sobol": "salib"}


def _requirements():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    lines = (config.get("options", "install_requires") + "\n"
             + config.get("options.extras_require", "docs")).splitlines()
    return {re.split(r"[\[<>=!~; ]", line.strip(), maxsplit=1)[0].lower().replace("_", "-")
            for line in lines if line.strip() and not line.strip().startswith("#")}


def _needed(source):
    tree = ast.parse(source)
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
        elif isinstance(node, (ast.Name, ast.Attribute)):
            word = node.id if isinstance(node, ast.Name) else node.attr
            if word in NEEDS:
                names.add(NEEDS[word])
    return {n.lower() for n in names} - set(sys.stdlib_module_names) - {"dualgpu"}


def test_the_docs_extra_installs_what_the_gallery_imports():
    have = _requirements()
    missing = {path.name: sorted(_needed(path.read_text()) - have) for path in EXAMPLES}
    missing = {name: packages for name, packages in missing.items() if packages}
    assert not missing, ("add these to the docs extra of setup.cfg (or to the base install): "
                         f"{missing}")


def test_the_check_sees_imports_and_indirect_needs():
    source = "import numpy as np\nfrom jax import numpy\nimport math\nsensitivity.salib_sobol(f)\n"
    assert _needed(source) == {"numpy", "jax", "salib"}
