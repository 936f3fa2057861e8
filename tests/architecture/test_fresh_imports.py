"""What importing dualgpu pulls in, and what it installs when, checked in fresh processes.

Two processes run every check (each fresh process costs seconds of imports):

- ``dualgpu first``: ``from dualgpu import *`` pulls in neither matplotlib, Dask nor JAX, nor
  scipy.fft (it costs import time); scipy.fft imported afterwards takes duals (dualgpu's
  backend is installed when scipy.fft is imported);
- ``scipy.fft first``: scipy.fft imported before dualgpu takes duals too; then ``dualgpu.plot``
  makes and saves a figure without importing pyplot or choosing a backend (no ``DISPLAY``,
  no ``MPLBACKEND`` in either process).
"""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

FFT_CHECK = textwrap.dedent("""
    import numpy as np
    u = dualgpu.dual_array(np.arange(4.0), np.eye(4))
    results["fft"] = bool(np.allclose(scipy.fft.fft(u).partials, np.fft.fft(np.eye(4))))
""")

SCRIPTS = {
    "dualgpu first": textwrap.dedent("""
        import json, sys
        from dualgpu import *
        results = {"heavy": sorted(m for m in ("matplotlib", "distributed", "jax")
                                   if m in sys.modules),
                   "scipy.fft": "scipy.fft" in sys.modules}
        import dualgpu
        import scipy.fft
    """) + FFT_CHECK + "print(json.dumps(results))\n",
    "scipy.fft first": textwrap.dedent("""
        import json, sys
        import scipy.fft
        import dualgpu
        results = {}
    """) + FFT_CHECK + textwrap.dedent("""
        import dualgpu.plot as p
        p.save(p.jacobian_heatmap([[1.0]])[0], sys.argv[1])
        results["pyplot"] = "matplotlib.pyplot" in sys.modules
        print(json.dumps(results))
    """),
}


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """``{order: (results, the PNG written)}``, one fresh process per order."""
    folder = tmp_path_factory.mktemp("fresh_imports")
    env = {key: value for key, value in os.environ.items() if key not in ("DISPLAY", "MPLBACKEND")}
    env["PYTHONPATH"] = str(ROOT)
    runs = {}
    for order, script in SCRIPTS.items():
        target = folder / f"{order.replace(' ', '_')}.png"
        out = subprocess.run([sys.executable, "-c", script, str(target)], capture_output=True,
                             text=True, cwd=ROOT, env=env, timeout=300)
        assert out.returncode == 0, (order, out.stderr[-3000:])
        runs[order] = (json.loads(out.stdout.strip().splitlines()[-1]), target)
    return runs


def test_star_import_does_not_pull_in_matplotlib_or_dask(fresh):
    assert fresh["dualgpu first"][0]["heavy"] == []


@pytest.mark.slow
@pytest.mark.parametrize("order", ["dualgpu first", "scipy.fft first"])
def test_scipy_fft_takes_duals_whichever_is_imported_first(fresh, order):
    """dualgpu does not import scipy.fft (it costs import time); its backend is installed
    when scipy.fft is imported, before or after dualgpu."""
    results = fresh[order][0]
    if order == "dualgpu first":
        assert results["scipy.fft"] is False
    assert results["fft"] is True


@pytest.mark.slow
def test_import_does_not_touch_pyplot_or_backend(fresh):
    results, target = fresh["scipy.fft first"]
    assert results["pyplot"] is False, "pyplot was imported"
    assert target.read_bytes()[:8] == PNG_SIGNATURE
