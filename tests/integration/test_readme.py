"""The README starts with the two commands (its examples run in test_docs_examples.py)."""
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_begins_with_the_two_commands():
    lines = [line for line in README.read_text().splitlines() if line.strip()]
    assert lines[1].strip().startswith(
        "$ python3 -m pip install -e \".[test]\" && python3 scripts/")
    # the test suite on every core (pytest-xdist, from the test extra), as .ci/run runs it
    assert lines[2].strip() == "$ python3 -m pytest -q -n auto --maxprocesses 8 --dist loadfile"
    script = lines[1].split("&&")[1].split()[1]
    assert (README.parent / script).is_file()
