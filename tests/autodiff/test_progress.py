"""When progress bars show: only on a terminal or in a notebook unless asked
(dualgpu.autodiff._progress)."""
import io
import sys
import types

import pytest

from dualgpu import DualgpuError
from dualgpu.autodiff._progress import interactive, progress_bar, wants_progress


class Terminal(io.StringIO):
    def isatty(self):
        return True


class ZMQInteractiveShell:  # the name IPython gives a Jupyter kernel's shell
    pass


def test_pipes_and_files_are_not_interactive():
    assert not interactive(io.StringIO())
    assert interactive(Terminal())
    closed = io.StringIO()
    closed.close()
    assert not interactive(closed)  # isatty raises ValueError on a closed stream
    assert not interactive(object())  # no isatty at all


def test_default_follows_the_terminal(monkeypatch):
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert wants_progress(None) is False and wants_progress(True) is True
    assert progress_bar(10, None, "x") is None
    monkeypatch.setattr(sys, "stderr", Terminal())
    assert wants_progress(None) is True and wants_progress(False) is False
    bar = progress_bar(10, None, "x")
    assert bar is not None
    bar.close()
    assert progress_bar(3, None, "x", minimum=4) is None  # too short to bother
    bar = progress_bar(3, True, "x", minimum=4)  # asked for: shown anyway
    assert bar is not None
    bar.close()


def test_a_notebook_counts_as_interactive(monkeypatch):
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    fake = types.SimpleNamespace(get_ipython=lambda: ZMQInteractiveShell())
    monkeypatch.setitem(sys.modules, "IPython", fake)
    assert wants_progress(None) is True
    terminal_ipython = types.SimpleNamespace(get_ipython=lambda: object())
    monkeypatch.setitem(sys.modules, "IPython", terminal_ipython)
    assert wants_progress(None) is False


def test_bool_like_values_are_accepted():
    import numpy as np

    assert wants_progress(1) is True and wants_progress(np.False_) is False


@pytest.mark.parametrize("value", ["yes", 2, 0.5])
def test_other_values_are_rejected(value):
    with pytest.raises(DualgpuError, match="progress must be None"):
        wants_progress(value)
