"""Sessions that check dualgpu the way its users and packagers meet it (``python3 -m nox -l``).

Each session makes a fresh virtual environment and installs from the project's own files.

* ``tests``: the README's test command on the newest numba pair (numba 0.68, numba-cuda 0.30).
* ``smoke-0.66``: the oldest numba release dualgpu declares (setup.cfg), with
  the test extra only: every test module collects, then a smoke subset runs (every derivative
  rule on every path, a one-line port, a Jacobian, PTX). CI runs the oldest.
  ``smoke-0.67``: the same on the release between (not run by default).
* ``benchmarks``: the benchmarks' own tests (``benchmarks/tests``): the runner and every case
  at tiny sizes, the peers' problems. They test the benchmark code, not dualgpu, and start
  fresh interpreters, so they run apart from the README's test command.
* ``wheel``: builds the sdist and the wheel, checks what each holds, installs the wheel (not
  editable) and, from a folder outside the checkout, imports it, runs the flagship script and
  a smoke subset against the installed package.
* ``docs``: the ``docs`` extra alone, then the site with warnings as errors.
* ``pages``: every python block of every page of the site runs (``docs/tests``), with the
  ``test`` extra (the pages use Dask, JAX and SALib); README.md's blocks run in the test suite.
* ``lint``: ruff (its configuration is in pyproject.toml). ``typecheck``: mypy on the public
  modules (configuration in pyproject.toml).

``.ci/run`` runs the README's commands, then ``smoke-0.66``, ``benchmarks``, ``wheel``, ``lint``,
``typecheck``, ``docs`` and ``pages``.
"""
import shutil
import tarfile
import zipfile
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
nox.options.default_venv_backend = "venv"
nox.options.sessions = ["smoke-0.66", "benchmarks", "wheel", "lint", "typecheck"]

# every derivative rule on every path (python, njit, cudasim, cpu, host numpy, PTX), a port
# of unchanged kernels, the Jacobian driver, intrinsics typed by the CPU, CUDA, the CPU again
# (what numba 0.66 got wrong), launch plans and traced runs (they call numba's compiled entry
# points, a dispatcher's internals)
SMOKE_TESTS = [
    "tests/core/test_rules.py",
    "tests/core/test_properties.py",
    "tests/host/test_host_numpy.py",
    "tests/compiled/test_rules_ptx.py",
    "tests/compiled/test_intrinsics_across_targets.py",
    "tests/porting/test_one_line_port.py",
    "tests/porting/test_launch_plans.py",
    "tests/porting/test_trace.py",
    "tests/autodiff/test_driver.py",
]
# against the installed wheel: the rules compiled to PTX, the port, the driver
WHEEL_TESTS = [
    "tests/compiled/test_rules_ptx.py",
    "tests/porting/test_one_line_port.py",
    "tests/autodiff/test_driver.py",
]
# the README's test command (README.md's third line; tests/integration/test_readme.py keeps
# the two in step)
README_TESTS = ["-q", "-n", "auto", "--maxprocesses", "8", "--dist", "loadfile"]


@nox.session
def tests(session):
    """The whole suite on the newest numba pair, as the README runs it."""
    session.install("-e", ".[test]")
    session.run("python", "-m", "pytest", *README_TESTS, *session.posargs)


@nox.session
def benchmarks(session):
    """The benchmarks' own tests (benchmarks/tests: the runner and every case at tiny sizes,
    the peers' problems); no timing is asserted. CI runs it."""
    session.install("-e", ".[test]")
    session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
                "benchmarks/tests", *session.posargs)


def _smoke(session, numba):
    """An older numba: every test module collects with the test extra alone; a smoke run."""
    session.install("-e", ".[test]", f"numba=={numba}.*", "numba-cuda==0.30.*")
    session.run("python", "-c", "import numba, numba.cuda; print('numba', numba.__version__)")
    # every module imports with the test extra alone (an optional package must skip, not error)
    session.run("python", "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider",
                silent=True)
    session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
                *SMOKE_TESTS, *session.posargs)


@nox.session(name="smoke-0.66")
def smoke_066(session):
    """The oldest numba declared, numba 0.66 with numba-cuda 0.30 (CI runs it)."""
    _smoke(session, "0.66")


@nox.session(name="smoke-0.67")
def smoke_067(session):
    """numba 0.67 with numba-cuda 0.30, between the two ends."""
    _smoke(session, "0.67")


@nox.session
def wheel(session):
    """Build sdist and wheel; test the installed wheel from outside the checkout."""
    dist = Path(session.create_tmp()) / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    session.install("build")
    session.run("python", "-m", "build", "--outdir", str(dist), ".")
    (whl,) = dist.glob("dualgpu-*.whl")
    (sdist,) = dist.glob("dualgpu-*.tar.gz")
    _check_wheel(session, whl)
    _check_sdist(session, sdist)

    session.install(f"{whl}[test]")
    outside = Path(session.create_tmp()) / "outside"
    shutil.rmtree(outside, ignore_errors=True)
    outside.mkdir()
    # what a user of the wheel downloads beside it: the scripts, the example simulations and
    # the tests (no dualgpu/: the import must find the installed package)
    for folder in ("scripts", "simulations", "tests"):
        shutil.copytree(ROOT / folder, outside / folder,
                        ignore=shutil.ignore_patterns("__pycache__"))
    (outside / "pytest.ini").write_text(
        "[pytest]\npythonpath = . tests tests/fixtures\naddopts = -ra\n"
        "markers =\n    slow: s\n    compile: c\n    gpu: g\n    peers: p\n")
    session.chdir(outside)
    session.run("python", "-c",
                "import dualgpu, pathlib, sys; p = pathlib.Path(dualgpu.__file__).resolve(); "
                "print('dualgpu', dualgpu.__version__, 'from', p); "
                "sys.exit(0 if 'site-packages' in p.parts else 'not the installed wheel')")
    session.run("python", "scripts/heat_sensitivity.py", "--cells", "41", "--steps", "100",
                "--no-progress", "--out", str(outside / "out"))
    session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
                *WHEEL_TESTS, *session.posargs)


def _check_wheel(session, whl):
    names = zipfile.ZipFile(whl).namelist()
    tops = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    if tops != {"dualgpu"}:
        session.error(f"the wheel must hold the dualgpu package only; it holds {sorted(tops)}")
    for needed in ("dualgpu/py.typed", "dualgpu/__init__.py"):
        if needed not in names:
            session.error(f"the wheel lacks {needed}")
    licenses = [n for n in names if n.endswith("/LICENSE") and ".dist-info/" in n]
    if not licenses:
        session.error("the wheel's metadata lacks the LICENSE file")
    session.log(f"{whl.name}: {len(names)} files, top level {sorted(tops)}, with py.typed")


def _check_sdist(session, sdist):
    with tarfile.open(sdist) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    needed = ["LICENSE", "CITATION.cff", "README.md", "setup.cfg", "pyproject.toml",
              "tests/conftest.py", "docs/conf.py", "simulations/heat1d.py",
              "scripts/heat_sensitivity.py", "dualgpu/py.typed"]
    missing = [name for name in needed if name not in names]
    if missing:
        session.error(f"the sdist lacks {missing}")
    session.log(f"{sdist.name}: {len(names)} files, with tests, docs and LICENSE")


@nox.session
def docs(session):
    """The site, from the ``docs`` extra alone, with warnings as errors."""
    session.install("-e", ".[docs]")
    session.run("python", "-m", "sphinx", "-W", "-b", "html", "docs", "docs/_build/html")


@nox.session
def pages(session):
    """Every python block of every page of the site runs (docs/tests), page by page."""
    session.install("-e", ".[test]")
    session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
                "--dist", "loadfile", "docs/tests", *session.posargs)


@nox.session
def lint(session):
    """ruff, configured in pyproject.toml."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")


@nox.session
def typecheck(session):
    """mypy on the public modules (the list and the options are in pyproject.toml)."""
    session.install("-e", ".", "mypy>=1.10")
    session.run("mypy")
