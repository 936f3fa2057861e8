"""Floor 1, the core: the Python dual number and the dual array, in plain Python and numpy.

``dual`` (:class:`~dualgpu.Dual`, generated from :mod:`dualgpu.rules`), ``dualarray``
(:class:`~dualgpu.DualArray`), ``nested`` (perturbation tags, duals of duals), ``dmath`` (the
dual-aware :mod:`math`), ``casting``, ``lanes`` (tile and chunk sizes), ``selection`` (which
backend runs kernels) and the small pieces they share. Nothing here imports
:mod:`dualgpu.host`, :mod:`dualgpu.compiled`, :mod:`dualgpu.backends`, :mod:`dualgpu.porting`
or :mod:`dualgpu.autodiff`: the floors above install themselves into the hooks that
:mod:`dualgpu.core.hooks` offers.
"""
