"""When progress bars are shown: on an interactive terminal or in a notebook, or when asked.

``progress=None`` (the default everywhere in dualgpu and in ``scripts/``) shows a bar only
when someone is watching: standard error is a terminal, or the code runs in a Jupyter
notebook. Logs, pipes, CI and test runs stay quiet. ``progress=True`` always shows one,
``progress=False`` never.
"""
import numbers
import sys

import numpy as np

from dualgpu.errors import DualgpuError

__all__ = ["interactive", "wants_progress", "progress_bar"]


def _in_notebook():
    """True inside a Jupyter kernel (where tqdm.auto draws a notebook widget)."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:  # an IPython without get_ipython, or one that fails: not a notebook
        return False
    return type(shell).__name__ == "ZMQInteractiveShell"


def interactive(stream=None):
    """Return True when ``stream`` (default ``sys.stderr``) is a terminal or we run in a
    notebook."""
    stream = sys.stderr if stream is None else stream
    try:
        tty = bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        tty = False
    return tty or _in_notebook()


def wants_progress(progress):
    """Return whether to show progress for the ``progress`` option (None, True or False).

    Raises
    ------
    DualgpuError
        For anything but None, True and False.
    """
    if progress is None:
        return interactive()
    if isinstance(progress, (numbers.Integral, np.bool_)) and progress in (0, 1):
        return bool(progress)  # True/False, numpy bools, 1/0
    raise DualgpuError(
        f"progress must be None (show a bar only on an interactive terminal or in a "
        f"notebook), True (always) or False (never); got {progress!r}."
    )


def progress_bar(total, progress, desc, unit="chunk", minimum=0):
    """Return a tqdm bar over ``total`` items, or None when none should be shown.

    With ``progress=None`` the bar is shown only when :func:`interactive` and ``total``
    exceeds ``minimum``; ``True`` always shows it, ``False`` never.
    """
    if not wants_progress(progress):
        return None
    if progress is None and total <= minimum:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, leave=False)
