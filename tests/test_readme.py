"""Every Python example in README.md runs, and the README starts with the two commands."""
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def python_blocks():
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_begins_with_the_two_commands():
    lines = [line for line in README.read_text().splitlines() if line.strip()]
    assert lines[1].strip().startswith("$ python3 -m pip install -e \".[test]\" && python3 scripts/")
    # the test suite on every core (pytest-xdist, from the test extra), as .ci/run runs it
    assert lines[2].strip() == "$ python3 -m pytest -q -n auto --maxprocesses 8 --dist loadfile"
    script = lines[1].split("&&")[1].split()[1]
    assert (README.parent / script).is_file()


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_readme_example_runs(index):
    import dualgpu

    source = python_blocks()[index]
    if "local_cluster" in source or "dask" in source:
        pytest.importorskip("distributed", reason="Dask is the optional extra 'distributed'")
    try:
        exec(compile(source, f"README.md example {index}", "exec"), {"__name__": "readme"})
    finally:
        dualgpu.set_backend(None)
