"""Shared pieces of the sensitivity scripts: options, forward-mode Jacobians, tables, figures.

Each script in ``scripts/`` differentiates one simulation from ``simulations/`` with respect to
its physical parameters (and sometimes its initial state), prints a table of the sensitivities
of one named scalar output and saves PNG figures. This module holds what they share.
"""
import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # `python3 scripts/x.py` from a checkout finds simulations/
    sys.path.insert(0, str(REPO))

import dualgpu  # noqa: E402
from dualgpu import Dual, DualArray, plot  # noqa: E402
from dualgpu.core._context import dual_allocation  # noqa: E402
from dualgpu.autodiff._progress import progress_bar, wants_progress  # noqa: E402

__all__ = ["MAX_LANES", "parser", "setup", "jacfwd", "segments", "print_table", "Figures",
           "elapsed"]

MAX_LANES = 64
"""Most tangent lanes one compiled pass carries (the compiled dual types support 1..64)."""


# ---------------------------------------------------------------- command line

class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default, except None (whose help says what happens instead)."""

    def _get_help_string(self, action):
        if action.default is None:
            return action.help
        return super()._get_help_string(action)


def parser(script, description):
    """Return an ArgumentParser with the options every script shares.

    ``--backend``, ``--out`` (default ``out/<script>``), ``--progress/--no-progress`` (default:
    bars only on an interactive terminal) and ``--chunk-size``; the script adds its
    problem-size and parameter options.
    """
    p = argparse.ArgumentParser(
        prog=f"{script}.py", description=description,
        formatter_class=_HelpFormatter)
    p.add_argument("--backend", choices=("cpu", "cudasim", "cuda"), default=dualgpu.backend(),
                   help="where the kernels run: compiled CPU, the CUDA simulator, or a GPU")
    p.add_argument("--out", type=Path, default=Path("out") / script,
                   help="folder for the PNG figures")
    p.add_argument("--progress", dest="progress", action=argparse.BooleanOptionalAction,
                   default=None,
                   help="show (--progress) or hide (--no-progress) the progress bars on stderr; "
                        "default: shown only when stderr is an interactive terminal")
    p.add_argument("--chunk-size", type=int, default=None,
                   help="tangent lanes per pass (1..64); default: the driver's choice")
    p.set_defaults(script=script)
    return p


def setup(args):
    """Select ``args.backend``, create ``args.out`` and return a :class:`Figures` for it.

    A backend that cannot run here (``--backend cuda`` without a GPU) ends the script with a
    one-line message on stderr and exit status 2, as argparse does for a bad option.
    """
    try:
        dualgpu.set_backend(args.backend)
    except dualgpu.DualgpuError as error:
        name = getattr(args, "script", None) or Path(sys.argv[0]).stem
        print(f"{name}.py: error: --backend {args.backend}: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    args.out.mkdir(parents=True, exist_ok=True)
    return Figures(args.out)


def elapsed(start):
    """Return the seconds since ``start`` (a ``time.perf_counter()`` reading)."""
    return time.perf_counter() - start


# ---------------------------------------------------------------- derivatives

def _driver_jacfwd():
    try:
        from dualgpu import jacfwd
    except ImportError:
        return None
    return jacfwd


def jacfwd(f, argnums=0, *, chunk_size=None, progress=None):
    """Return a function computing the forward-mode Jacobian of ``f`` (the driver's API).

    Uses :func:`dualgpu.jacfwd` when the package has it; otherwise an equivalent
    in-script version: the inputs named by ``argnums`` (floats or float arrays) are seeded
    ``chunk_size`` lanes at a time, ``f`` runs with dual inputs inside
    ``dualgpu.core._context.dual_allocation`` and the partials of its outputs are collected.
    The Jacobian has shape ``output.shape + input.shape``; a tuple ``argnums`` gives a tuple,
    and a tuple of outputs gives a tuple of those.
    """
    driver = _driver_jacfwd()
    if driver is not None:
        return driver(f, argnums, chunk_size=chunk_size, progress=progress)

    def jacobian(*args):
        numbers = (argnums,) if np.isscalar(argnums) else tuple(argnums)
        inputs = [np.asarray(args[i], dtype=np.float64) for i in numbers]
        sizes = [x.size for x in inputs]
        total = sum(sizes)
        lanes = min(total, chunk_size or MAX_LANES)
        starts = range(0, total, lanes)
        if wants_progress(progress) and len(starts) > 1:
            from tqdm.auto import tqdm
            starts = tqdm(starts, desc="tangent chunks", unit="chunk", leave=False)
        offsets = np.cumsum([0] + sizes)
        columns = None
        for start in starts:
            seeds = np.zeros((lanes, total))  # same lane count every pass: one compilation
            width = min(lanes, total - start)
            seeds[np.arange(width), start + np.arange(width)] = 1.0
            dual_args = list(args)
            for x, i, lo, hi in zip(inputs, numbers, offsets[:-1], offsets[1:]):
                part = seeds[:, lo:hi].reshape((lanes,) + x.shape)
                dual_args[i] = (Dual(float(x), part.reshape(lanes)) if x.ndim == 0
                                else DualArray(x.copy(), part.copy()))
            with dual_allocation(lanes):
                out = f(*dual_args)
            outs = out if isinstance(out, tuple) else (out,)
            if columns is None:
                columns = [np.zeros((total,) + np.shape(o.value if isinstance(o, Dual)
                                                        else o.values)) for o in outs]
            for o, c in zip(outs, columns):
                c[start:start + width] = np.asarray(o.partials)[:width]
        results = []
        for c in columns:
            J = np.moveaxis(c, 0, -1)  # output.shape + (total,)
            per_input = tuple(J[..., lo:hi].reshape(J.shape[:-1] + x.shape)
                              for x, lo, hi in zip(inputs, offsets[:-1], offsets[1:]))
            results.append(per_input if not np.isscalar(argnums) else per_input[0])
        return tuple(results) if isinstance(out, tuple) else results[0]

    return jacobian


def segments(n_steps, count, progress, desc="time steps"):
    """Yield the step counts of ``count`` near-equal segments of ``n_steps``, with a bar.

    A simulation run segment by segment (each continuing from the last one's state) gives a
    progress bar and a history of the sensitivities at the segment ends.
    """
    count = max(1, min(count, n_steps))
    bounds = np.linspace(0, n_steps, count + 1).round().astype(int)
    lengths = [int(b - a) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]
    bar = progress_bar(n_steps, progress, desc, unit="step")
    if bar is None:
        yield from lengths
        return
    with bar:
        for length in lengths:
            yield length
            bar.update(length)


# ---------------------------------------------------------------- output

def print_table(output_name, output_value, names, values, sensitivities, units=None):
    """Print and return rows ``(name, value, dy/dp, p/y dy/dp)`` for the scalar output ``y``.

    The relative sensitivity (elasticity) ``p / y * dy/dp`` is the percentage change of the
    output per percent change of the parameter; it compares parameters of different units.
    When ``|y|`` is near zero it is meaningless and is not printed (NaN in the rows); the rule
    is :func:`dualgpu.plot.elasticities`', the one the ranking figures use.
    """
    sensitivities = np.asarray(sensitivities, dtype=float)
    values = np.asarray(values, dtype=float)
    relative, reason = plot.elasticities(sensitivities, values, output_value)
    if relative is None:
        relative = np.full(values.shape, np.nan)
    units = units or [""] * len(names)
    print(f"\nSensitivity of {output_name} = {output_value:.10g}")
    header = f"{'parameter':<22} {'value':>12} {'d y / d p':>17} {'p/y * dy/dp':>13}"
    print(header)
    print("-" * len(header))
    rows = []
    for name, unit, p, s, r in zip(names, units, values, sensitivities, relative):
        label = f"{name} [{unit}]" if unit else name
        shown = f"{r:>13.4g}" if np.isfinite(r) else f"{'n/a':>13}"
        print(f"{label:<22} {p:>12.6g} {s:>17.10e} {shown}")
        rows.append((name, float(p), float(s), float(r)))
    if reason:
        print(f"(p/y * dy/dp not shown: y is near zero, {reason})")
    return rows


class Figures:
    """Saves figures into one folder and remembers the paths, for the closing message."""

    def __init__(self, folder):
        self.folder = Path(folder)
        self.paths = []

    def save(self, fig, name):
        """Save ``fig`` (or a ``(fig, ax)`` pair) as ``<folder>/<name>.png``; return the path."""
        path = plot.save(fig, self.folder / f"{name}.png")
        self.paths.append(path)
        return path

    def report(self):
        """Print where the figures are."""
        print(f"\nFigures ({len(self.paths)}) in {self.folder}/:")
        for path in self.paths:
            print(f"  {path}")


def figure(rows=1, cols=1, size=(7.5, 4.5)):
    """Return ``(fig, axes)``: a headless constrained-layout figure with a grid of axes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=size, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, cols, squeeze=False)
    return fig, axes
