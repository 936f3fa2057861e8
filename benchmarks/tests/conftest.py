"""The benchmarks' own tests: the runner, its cases at tiny sizes and the peers' problems.

They check the benchmark code, not dualgpu (tests/ does that), and start fresh interpreters
for most cases, so they run apart from the README's test command: ``python3 -m nox -s
benchmarks`` (CI runs it) or ``python3 -m pytest benchmarks/tests`` from the repository root.
No test here asserts a timing.
"""
import os
import tempfile

os.environ.setdefault("MPLBACKEND", "Agg")
# a fresh compile cache per run, as tests/conftest.py gives the test suite
os.environ.setdefault("DUALGPU_CACHE_DIR", tempfile.mkdtemp(prefix="dualgpu-bench-cache-"))
