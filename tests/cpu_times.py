"""CPU seconds per test and per test file: where the suite's time goes, on a loaded machine too.

Wall times (``--durations``) follow the machine's load; CPU time does not. As a pytest plugin
this module appends one line per test, ``seconds nodeid``, to the file named by
``DUALGPU_CPU_TIMES`` (the CPU time of the process running the test and of the subprocesses it
waited for, setup and teardown included; with xdist every worker appends to the same file)::

    DUALGPU_CPU_TIMES=/tmp/cpu.log python3 -m pytest -p tests.cpu_times tests/core
    python3 tests/cpu_times.py /tmp/cpu.log          # per file, most expensive first
    python3 tests/cpu_times.py /tmp/cpu.log --tests  # per test

The first compiling test of a process also pays numba's start-up (a few seconds).
"""
import argparse
import collections
import os
import resource
import sys
import time

import pytest

__all__ = ["cpu_seconds", "pytest_runtest_protocol", "summary", "main"]


def cpu_seconds():
    """CPU seconds (user + system) of this process and of its waited-for children."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Append the CPU seconds of one test (setup, call, teardown) to ``DUALGPU_CPU_TIMES``."""
    start = cpu_seconds()
    yield
    path = os.environ.get("DUALGPU_CPU_TIMES")
    if path:
        with open(path, "a") as log:
            log.write(f"{cpu_seconds() - start:.3f} {item.nodeid}\n")


def summary(lines, per_test=False):
    """``[(seconds, name)]``, most expensive first: per file, or per test with ``per_test``."""
    totals = collections.Counter()
    for line in lines:
        seconds, _, nodeid = line.strip().partition(" ")
        if nodeid:
            totals[nodeid if per_test else nodeid.split("::")[0]] += float(seconds)
    return sorted(((s, name) for name, s in totals.items()), reverse=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", help="the file DUALGPU_CPU_TIMES named")
    parser.add_argument("--tests", action="store_true", help="per test instead of per file")
    parser.add_argument("--top", type=int, default=40, help="how many lines (default: 40)")
    args = parser.parse_args(argv)
    with open(args.log) as log:
        rows = summary(log, per_test=args.tests)
    for seconds, name in rows[:args.top]:
        print(f"{seconds:8.1f}  {name}")
    print(f"{sum(s for s, _ in rows):8.1f}  total of {len(rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
