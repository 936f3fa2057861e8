"""The part every peer module shares: its case table, ``prepare`` and one-call case functions.

A peer module defines ``prepare_<case>(**problem)`` functions (each returns a zero-argument
callable, so a benchmark can time compile and run apart) and calls :func:`case_api` to get
``CASES``, ``prepare`` and ``heat_jacobian(...)``-style functions that compute in one call.
"""

__all__ = ["CASE_NAMES", "case_api"]

#: The cases every peer implements, in the order the benchmarks run them.
CASE_NAMES = ("heat_jacobian", "heat_jvp", "nbody_mass_jacobian", "pendulum_param_jacobian")


def _run_once(prepare_case):
    def run(**problem):
        return prepare_case(**problem)()

    run.__name__ = prepare_case.__name__.replace("prepare_", "")
    run.__doc__ = (prepare_case.__doc__ or "").replace("Return a callable giving", "Return")
    return run


def case_api(module_name, namespace):
    """Return ``(CASES, prepare, {case: one-call function})`` from ``namespace``'s prepare_*.

    A peer may implement only some of :data:`CASE_NAMES`; ``CASES`` lists those it has.
    """
    cases = {case: namespace[f"prepare_{case}"] for case in CASE_NAMES
             if f"prepare_{case}" in namespace}

    def prepare(case, **kwargs):
        """Return ``CASES[case](**kwargs)``: a zero-argument callable computing the case."""
        if case not in cases:
            known = ("unknown case" if case not in CASE_NAMES
                     else "case not implemented by this peer")
            raise KeyError(
                f"{module_name}.prepare: {known} {case!r}; expected one of {sorted(cases)}."
            )
        return cases[case](**kwargs)

    return cases, prepare, {case: _run_once(fn) for case, fn in cases.items()}
