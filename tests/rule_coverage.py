"""How much of the rule table the tests check: rules x paths x dtypes, default run and full product.

Run it from the repository root (it imports the test modules, runs nothing)::

    python3 tests/rule_coverage.py           # one line per (path, dtype)
    python3 tests/rule_coverage.py --rules   # and one line per rule: default/full per column

A *case* is one form of a rule (``x + y``, ``operator.add``, ``t += y``) with one choice of
argument kinds (dual/plain) and lane count, checked in one dtype on one path. Where each path's
cases come from:

* ``python``, ``njit``, ``cudasim``: ``tests/core/test_rules.py``, every case against finite
  differences. The njit path samples its lane counts by default (one per dtype and argument
  kinds, as JAX's ``sample_product``); ``DUALGPU_TEST_CASES=all`` runs the full product.
* ``cpu`` (the cpu backend's kernels): ``tests/core/test_properties.py``, random programs whose
  instructions are the rule table's forms. A case here is an instruction the programs draw
  from; which ones a run draws is up to hypothesis. The cpu path runs in both dtypes (float32
  with each rule's primary form); ``DUALGPU_PROPERTY_ALL_PATHS=1`` adds the njit path and every
  form in float32 (its full product).
* ``host numpy``: ``tests/host/test_host_numpy.py``, every ufunc of ``rules.NUMPY_UFUNCS`` on host
  dual arrays (ufuncs with a rule of their own outside the table are not counted). Three rules
  have no numpy ufunc: ``erf``, ``erfc`` and ``remainder`` (IEEE remainder; ``np.remainder`` is
  the ``mod`` rule).
* ``PTX``: ``tests/compiled/test_rules_ptx.py``, every case compiled offline in both dtypes; the
  lane count (1 or 8) is sampled per dtype and argument kinds; ``DUALGPU_TEST_CASES=all``
  runs both.

The complex rules (``dualgpu.complex_rules``) have a table of their own, in complex64 and
complex128: ``complex python`` (``tests/core/test_complex_dual.py``: operators, attributes,
numpy ufuncs on scalars and ``dualgpu.dcmath``, each argument kind), ``complex host``
(``tests/host/test_complex_host.py``: host DualArrays, against central differences and
jax.jvp), ``complex cudasim`` (``tests/backends/cudasim/test_cudasim_complex.py``: every
rule in a simulated kernel, and whole kernels through the driver) and the compiled paths
``complex njit``, ``complex cpu`` and ``complex PTX`` (``tests/compiled/test_complex_compiled.py``:
every rule in one kernel per dtype, each argument kind, in-place and numpy forms; njit and cpu
against central differences, by default each in one dtype, ``DUALGPU_TEST_CASES=all`` both;
PTX compiles every rule in both dtypes, its other forms split between them, without the
numpy-only rules numba.cuda has no complex form of).
"""
import argparse
import collections
import importlib
import os
import sys
from pathlib import Path

__all__ = ["PATHS", "DTYPES", "coverage", "main"]

HERE = Path(__file__).resolve().parent
PATHS = ("python", "njit", "cudasim", "cpu", "host numpy", "PTX")
DTYPES = ("float32", "float64")
SOURCES = {
    "python": "tests/core/test_rules.py", "njit": "tests/core/test_rules.py",
    "cudasim": "tests/core/test_rules.py", "cpu": "tests/core/test_properties.py",
    "host numpy": "tests/host/test_host_numpy.py", "PTX": "tests/compiled/test_rules_ptx.py",
}


def _import(name):
    for path in (HERE / "fixtures", HERE, HERE.parent):
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))
    return importlib.import_module(name)


def _dtype_name(dtype):
    import numpy as np

    return np.dtype(dtype).name


def _rules_cases(counts):
    """python, njit and cudasim: ``test_rules.path_params()``, sampled and full."""
    module = _import("core.test_rules")
    saved = module.FULL_PRODUCT
    try:
        for full in (False, True):
            module.FULL_PRODUCT = full
            for param in module.path_params():
                path, dtype, _lanes, kinds, index = param.values
                rule = module.cases_for(kinds)[index][2]
                counts[full][(rule, path, _dtype_name(dtype))] += 1
    finally:
        module.FULL_PRODUCT = saved


def _ptx_cases(counts):
    """PTX: ``test_rules_ptx.ptx_params()``, sampled and full."""
    module = _import("compiled.test_rules_ptx")
    saved = module.FULL_PRODUCT
    try:
        for full in (False, True):
            module.FULL_PRODUCT = full
            for param in module.ptx_params():
                dtype, _lanes, kinds, index = param.values
                rule = module.cases_for(kinds)[index][2]
                counts[full][(rule, "PTX", dtype)] += 1
    finally:
        module.FULL_PRODUCT = saved


def _property_cases(counts):
    """cpu: the instructions of the property test's interpreters, in the dtypes it runs cpu in."""
    module = _import("core.test_properties")
    interpreter = _import("property_interpreter")
    for full in (False, True):
        for dtype in module.DTYPES:
            paths = module.PATHS if full else module.DTYPE_PATHS[dtype]
            if "cpu" not in paths:
                continue
            for code in module.CODES[dtype]:
                op = interpreter.OPERATIONS[code]
                counts[full][(op.rule, "cpu", dtype)] += 1


def _host_cases(counts):
    """host numpy: ``test_host_numpy``'s ufunc cases x dtypes x lanes (no sampling)."""
    from dualgpu import rules

    module = _import("host.test_host_numpy")
    for name in module.UFUNC_CASES:
        rule = rules.NUMPY_UFUNCS.get(name.split("(")[0])
        if rule is None:
            continue
        for dtype in module.DTYPES:
            for full in (False, True):
                counts[full][(rule, "host numpy", _dtype_name(dtype))] += len(module.LANES)


COMPLEX_PATHS = ("complex python", "complex host", "complex cudasim", "complex njit",
                 "complex cpu", "complex PTX")
COMPLEX_DTYPES = ("complex64", "complex128")
COMPLEX_SOURCES = {"complex python": "tests/core/test_complex_dual.py",
                   "complex host": "tests/host/test_complex_host.py",
                   "complex cudasim": "tests/backends/cudasim/test_cudasim_complex.py",
                   **{f"complex {path}": "tests/compiled/test_complex_compiled.py"
                      for path in ("njit", "cpu", "PTX")}}


def _complex_compiled_cases(counts):
    """complex njit, cpu and PTX: ``test_complex_compiled``'s cases in the dtypes each runs."""
    import numpy as np

    module = _import("compiled.test_complex_compiled")
    for path, by_dtype in module.PATH_CASES.items():
        for dtype in module.PATH_DTYPES[path]:
            for key, _kinds, _form in by_dtype[np.dtype(dtype)]:
                counts[(key, f"complex {path}", np.dtype(dtype).name)] += 1


def complex_coverage():
    """``(rules, counts)``: the complex rule keys and a Counter keyed (rule, path, dtype)."""
    from dualgpu import complex_rules

    counts = collections.Counter()
    _complex_compiled_cases(counts)
    python = _import("core.test_complex_dual")
    host = _import("host.test_complex_host")
    cudasim = _import("backends.cudasim.test_cudasim_complex")
    for dtype in COMPLEX_DTYPES:
        for _form, key, _kinds in python.CASES:
            counts[(key, "complex python", dtype)] += 1
        for key in host.UNARY:
            counts[(key, "complex host", dtype)] += 2  # central differences and jax.jvp
        for key in host.BINARY:
            counts[(key, "complex host", dtype)] += len(host.BINARY_KINDS) + 1
    for key in cudasim.RULES:
        for dtype in COMPLEX_DTYPES:
            counts[(key, "complex cudasim", dtype)] += 1
    return list(complex_rules.COMPLEX_RULES), counts


def coverage():
    """``(rules, default, full)``: the rule names and two Counters keyed (rule, path, dtype)."""
    os.environ.setdefault("DUALGPU_PROPERTY_JAX", "0")  # no need to import JAX to count
    os.environ.pop("DUALGPU_PROPERTY_ALL_PATHS", None)  # the property test's default paths
    from dualgpu import rules

    counts = {False: collections.Counter(), True: collections.Counter()}
    _rules_cases(counts)
    _ptx_cases(counts)
    _property_cases(counts)
    _host_cases(counts)
    names = list(rules.UNARY_RULES) + list(rules.BINARY_RULES)
    return names, counts[False], counts[True]


def _percent(part, whole):
    return f"{100 * part / whole:5.1f}%" if whole else "    -"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rules", action="store_true", help="one line per rule as well")
    args = parser.parse_args(argv)
    names, default, full = coverage()
    print(f"rule table: {len(names)} rules; a case = (rule form, argument kinds, lanes) in one "
          f"dtype on one path")
    print(f"{'path':<11} {'dtype':<8} {'rules':>7} {'default':>8} {'full':>7} {'share':>6}  source")
    total_default = total_full = 0
    for path in PATHS:
        for dtype in DTYPES:
            d = sum(v for (r, p, t), v in default.items() if p == path and t == dtype)
            f = sum(v for (r, p, t), v in full.items() if p == path and t == dtype)
            covered = len({r for (r, p, t), v in default.items() if p == path and t == dtype and v})
            total_default, total_full = total_default + d, total_full + f
            print(f"{path:<11} {dtype:<8} {covered:>3}/{len(names):<3} {d:>8} {f:>7} "
                  f"{_percent(d, f)}  {SOURCES[path]}")
    print(f"{'total':<20} {'':>7} {total_default:>8} {total_full:>7} "
          f"{_percent(total_default, total_full)}")
    complex_names, complex_counts = complex_coverage()
    print()
    print(f"complex rules: {len(complex_names)} rules (dualgpu.complex_rules)")
    for path in COMPLEX_PATHS:
        for dtype in COMPLEX_DTYPES:
            cases = sum(v for (r, p, t), v in complex_counts.items() if p == path and t == dtype)
            covered = len({r for (r, p, t), v in complex_counts.items()
                           if p == path and t == dtype and v})
            print(f"{path:<16} {dtype:<10} {covered:>3}/{len(complex_names):<3} {cases:>6}  "
                  f"{COMPLEX_SOURCES[path]}")
    if args.rules:
        columns = [(path, dtype) for path in PATHS for dtype in DTYPES]
        print()
        print("default/full cases per rule (columns: " + ", ".join(
            f"{path} {dtype[-2:]}" for path, dtype in columns) + ")")
        for name in names:
            cells = [f"{default[(name, p, t)]}/{full[(name, p, t)]}" for p, t in columns]
            print(f"{name:<12} " + " ".join(f"{cell:>7}" for cell in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
