"""A dualgpu simulation as a differentiable JAX function: :func:`to_jax`.

``to_jax(f)`` returns ``g``, a function of JAX arrays (and pytrees of them) that runs ``f``
through :func:`jax.pure_callback` and whose derivatives come from dualgpu's forward mode:

* **primal** (``g(x)``, ``jax.jit(g)(x)``): one plain run of ``f`` per call. The output
  shapes and dtypes are found by one plain run the first time ``g`` sees concrete inputs of
  a given signature (cached per input shapes, dtypes and keyword arguments), or given as
  ``result_shape_dtypes``.
* **first derivatives** (``jax.jvp``, ``jax.jacfwd``, ``jax.grad``, ``jax.vjp``,
  ``jax.jacrev``): ``g`` is a :func:`jax.custom_jvp` whose tangent map is ``J @ t``, with
  ``J`` the Jacobian of ``f`` with respect to the inputs JAX differentiates (those whose
  tangents are not symbolic zeros), computed by :func:`dualgpu.jacobian` in a callback: one
  dual run with as many lanes as differentiated input entries. JAX transposes the product,
  so a gradient with respect to p inputs costs one dual run of p lanes, whatever the number
  of outputs; ``jacfwd`` and ``jvp`` cost the same (all tangents reuse the one ``J``). With
  ``sparsity=`` the Jacobian is the colored sparse one (:func:`dualgpu.sparse.sparse_jacobian`:
  as many lanes as colors) and the product a segment sum over the pattern.
* **second derivatives** (``jax.hessian``, ``jax.jvp`` of ``jax.grad``): the Jacobian
  callback is itself a custom JVP whose tangent map contracts the second-derivative tensor,
  computed by dualgpu's nested duals (``jacobian`` of ``jacfwd``): ``p1 * p2`` lanes. Third
  derivatives are refused by name.
* **vmap**: the callbacks run once per batch member (``vmap_method="sequential"``); a
  ``vmap`` over tangents only (``jax.jacfwd``, a batch of ``jax.jvp``) reuses one Jacobian.

Reverse through forward mode costs one lane per differentiated input entry: right for
parameters, wrong for a gradient with respect to a large field without sparsity. Above
``warn_lanes`` lanes a :class:`JaxBridgeCostWarning` gives the estimate; above ``max_lanes``
the derivative is refused with it (at trace time, before anything runs).
"""
import math
import numbers
import warnings

import numpy as np

from dualgpu import jacobian, jvp_batch
from dualgpu.autodiff._protect import protect
from dualgpu.errors import DualgpuError, DualgpuWarning
from dualgpu.sparse import Coloring, color_columns, detect_sparsity, sparse_jacobian

__all__ = ["to_jax", "JaxBridgeCostWarning", "DEFAULT_MAX_LANES", "DEFAULT_WARN_LANES",
           "MAX_ORDER"]

#: Derivative lanes above which a derivative through :func:`to_jax` is refused.
DEFAULT_MAX_LANES = 16384
#: Derivative lanes above which a :class:`JaxBridgeCostWarning` is given.
DEFAULT_WARN_LANES = 1024
#: Highest derivative order through :func:`to_jax` (nested duals of two levels).
MAX_ORDER = 2
#: Lanes of one compiled dual tile (for the estimate of the number of tiles).
_TILE = 64
#: Containers longer than this are not scanned for JAX tracers on every call.
_SCAN_LIMIT = 64


class JaxBridgeCostWarning(DualgpuWarning):
    """A derivative through :func:`to_jax` needs many lanes (the estimate is in the message).

    Given when JAX asks the wrapped function for a derivative that needs more tangent lanes
    than its ``warn_lanes`` (default ``DEFAULT_WARN_LANES``), before anything runs: one
    lane per differentiated input entry (per color with ``sparsity=``), the product of two
    such counts for a second derivative. The message gives the lanes, the kernel tiles and
    the size of the derivative tensor. Above ``max_lanes`` the derivative is refused with a
    :class:`~dualgpu.DualgpuError` instead. Silence it with ``warn_lanes=None`` or a
    :mod:`warnings` filter.

    Examples
    --------
    >>> import warnings
    >>> import numpy as np, jax, jax.numpy as jnp
    >>> from dualgpu.interop import JaxBridgeCostWarning, to_jax
    >>> g = to_jax(lambda x: 2.0 * x, warn_lanes=2)
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     J = jax.jacfwd(g)(jnp.ones(3))  # 3 lanes > warn_lanes
    >>> caught[0].category is JaxBridgeCostWarning
    True
    >>> print(str(caught[0].message)[:48])
    to_jax(<lambda>): this derivative needs 3 tangen
    >>> np.asarray(J).diagonal().tolist()
    [2.0, 2.0, 2.0]
    """


def _jax():
    import jax
    import jax.numpy as jnp

    return jax, jnp


_TRACER_ERRORS = ("TracerArrayConversionError", "ConcretizationTypeError",
                  "TracerBoolConversionError", "TracerIntegerConversionError",
                  "UnexpectedTracerError")


def _is_tracer(x):
    jax, _ = _jax()
    return isinstance(x, jax.core.Tracer)


def _kw_key(value):
    """A hashable stand-in for a keyword argument (the output shapes are cached by it)."""
    if isinstance(value, np.ndarray):
        return ("ndarray", value.shape, value.dtype.str)
    if isinstance(value, (tuple, list)):
        return (type(value).__name__,) + tuple(_kw_key(v) for v in value)
    if isinstance(value, dict):
        return ("dict",) + tuple((k, _kw_key(v)) for k, v in sorted(value.items(), key=str))
    try:
        hash(value)
    except TypeError:
        return ("id", id(value))
    return value


def _tracers_in(obj, depth=0):
    """True when a JAX tracer is reachable from ``obj`` (containers, a function's closure)."""
    if depth > 4:
        return False
    if _is_tracer(obj):
        return True
    # long containers are not scanned (cost per call); a tracer in one is still caught when
    # the simulation touches it (the callback names the tracer error)
    if isinstance(obj, (tuple, list)) and len(obj) <= _SCAN_LIMIT:
        return any(_tracers_in(v, depth + 1) for v in obj)
    if isinstance(obj, dict) and len(obj) <= _SCAN_LIMIT:
        return any(_tracers_in(v, depth + 1) for v in obj.values())
    if callable(obj) and getattr(obj, "__closure__", None):
        for cell in obj.__closure__:
            try:
                content = cell.cell_contents
            except ValueError:  # empty cell
                continue
            if _tracers_in(content, depth + 1):
                return True
    return False


def _concrete(x):
    """The concrete value under a tracer of JAX's forward, linearize and batch traces (the
    first batch member), or None when it has none (jit, or an unknown trace).

    Used only to find the output shapes by one plain run; the values never reach a result.
    """
    for _ in range(64):
        if not _is_tracer(x):
            return np.asarray(x)
        if hasattr(x, "primal"):  # JVPTracer, linearize's tracer
            x = x.primal
        elif hasattr(x, "val") and hasattr(x, "batch_dim"):  # vmap's BatchTracer
            dim = x.batch_dim
            x = x.val if not isinstance(dim, numbers.Integral) else x.val[
                (slice(None),) * int(dim) + (0,)]
        else:
            return None
    return None


def _tracer_leak(where):
    return DualgpuError(
        f"to_jax: a JAX tracer reached the simulation ({where}). The simulation runs outside "
        "JAX's tracing (in a callback), so it can only see concrete numbers; a traced value it "
        "closes over or gets as a keyword argument would be silently frozen or fail. Fix: pass "
        "every value that JAX traces or differentiates as a positional argument of the wrapped "
        "function; keyword arguments and closures must be plain Python/numpy values."
    )


def _name(f):
    return getattr(f, "__name__", type(f).__name__)


def to_jax(f, *, argnums=None, result_shape_dtypes=None, compute_dtype=None, sparsity=None,
           chunk_size=None, max_lanes=DEFAULT_MAX_LANES, warn_lanes=DEFAULT_WARN_LANES):
    """Wrap a simulation function ``f`` as a differentiable JAX function.

    Parameters
    ----------
    f : callable
        A simulation function of arrays and scalars that runs dualgpu kernels (``from dualgpu
        import cuda``): any function :func:`dualgpu.jacobian` accepts. Positional arguments
        may be pytrees (tuples, lists, dicts) of arrays and scalars; ``f`` gets them with the
        same structure as numpy arrays (0-d inputs as numpy scalars). Its result is an array,
        a scalar, or a pytree of them. Keyword arguments are passed to ``f`` as they are and
        are never differentiated (plain values only, no JAX arrays that are traced).
    argnums : int or tuple of int, optional
        The positional arguments JAX may differentiate (default: all). Every leaf of those
        must be a float array or scalar; a derivative requested with respect to another
        argument is refused.
    result_shape_dtypes : pytree of jax.ShapeDtypeStruct, optional
        ``f``'s output structure, shapes and dtypes. Needed only when ``g`` is first called
        under ``jax.jit`` or ``jax.vmap`` (otherwise one plain run finds them, cached per
        input signature).
    compute_dtype : numpy dtype, optional
        Cast float inputs to this dtype before calling ``f`` (e.g. ``np.float64`` for a
        float64 simulation fed by JAX's default float32). Outputs and derivatives are always
        returned in JAX's dtype: float32 when ``jax_enable_x64`` is off.
    sparsity : pattern, Coloring or "detect", optional
        A sparsity pattern (rows: output elements, columns: input elements, both in C order)
        or a :class:`dualgpu.sparse.Coloring` of it, for ``f`` with one output array differentiated
        with respect to one array argument: the Jacobian is then the colored sparse one
        (lanes = colors). ``"detect"`` finds the pattern with dualgpu's structural tracer
        (:func:`dualgpu.autodiff.sparse.detect_sparsity`) the first time concrete inputs are seen
        (needs ``argnums`` naming the array argument; cached per input signature; it sees
        only the branches taken at that input, so every later call seeds one more lane, the
        probe of :mod:`dualgpu.autodiff.reuse`, and raises where a branch on the state goes
        the other way). Second derivatives are not available with it. ``f`` gets writable
        copies of its array arguments.
    chunk_size : int, optional
        Lanes per kernel tile, passed to :func:`dualgpu.jacobian`.
    max_lanes : int or None
        Refuse a derivative that needs more lanes than this (None: no limit).
    warn_lanes : int or None
        Warn (:class:`JaxBridgeCostWarning`) above this many lanes (None: never).

    Returns
    -------
    callable
        ``g(*args, **kwargs)`` taking and returning JAX arrays (pytrees as ``f``), usable with
        ``jax.jit``, ``jax.vmap``, ``jax.jvp``, ``jax.jacfwd``, ``jax.grad``, ``jax.vjp``,
        ``jax.jacrev`` and ``jax.hessian``.

    Raises
    ------
    DualgpuError
        For a non-float argument named in ``argnums``, a JAX tracer reaching ``f``, an output
        whose shape changes between calls, an error inside ``f`` (named, with its type), a
        derivative beyond ``max_lanes`` or above second order.

    Examples
    --------
    >>> import numpy as np, jax, jax.numpy as jnp, dualgpu
    >>> from dualgpu.interop import to_jax
    >>> @dualgpu.cuda.jit
    ... def scale(x, a, out):
    ...     i = dualgpu.cuda.grid(1)
    ...     if i < x.shape[0]:
    ...         out[i] = a * x[i] * x[i]
    >>> def sim(x, a):
    ...     d = dualgpu.cuda.to_device(x)
    ...     out = dualgpu.cuda.device_array_like(d)
    ...     scale[1, 32](d, a, out)
    ...     return out.copy_to_host()
    >>> g = to_jax(sim)
    >>> x = jnp.array([1.0, 2.0])
    >>> float(jax.grad(lambda x, a: g(x, a).sum(), argnums=(0, 1))(x, 3.0)[1])
    5.0
    """
    if not callable(f):
        raise DualgpuError(f"to_jax: f must be callable; got {type(f).__name__}.")
    if argnums is not None:
        items = (argnums,) if isinstance(argnums, numbers.Integral) else tuple(argnums)
        if any(isinstance(a, bool) or not isinstance(a, numbers.Integral) for a in items):
            raise DualgpuError(
                f"to_jax: argnums must be an int or a tuple of ints; got {argnums!r}.")
        argnums = tuple(int(a) for a in items)
    for name, value in (("max_lanes", max_lanes), ("warn_lanes", warn_lanes)):
        if value is not None and (not isinstance(value, numbers.Integral) or value < 1):
            raise DualgpuError(f"to_jax: {name} must be a positive int or None; got {value!r}.")
    coloring = None
    if isinstance(sparsity, str):
        if sparsity != "detect":
            raise DualgpuError(
                f"to_jax: sparsity={sparsity!r}; expected a pattern, a Coloring or 'detect'.")
        if argnums is None or len(argnums) != 1:
            raise DualgpuError(
                "to_jax: sparsity='detect' needs argnums naming the one array argument whose "
                f"Jacobian is sparse; got argnums={argnums!r}. Fix: e.g. argnums=0.")
        coloring = "detect"
    elif sparsity is not None:
        coloring = sparsity if isinstance(sparsity, Coloring) else color_columns(sparsity)
    return _Wrapped(f, argnums, result_shape_dtypes, compute_dtype, coloring, chunk_size,
                    max_lanes, warn_lanes)


class _Wrapped:
    """The function returned by :func:`to_jax`."""

    def __init__(self, f, argnums, result_shape_dtypes, compute_dtype, coloring, chunk_size,
                 max_lanes, warn_lanes):
        self.f = f
        self.argnums = argnums
        self.given = result_shape_dtypes
        self.compute_dtype = None if compute_dtype is None else np.dtype(compute_dtype)
        self.coloring = coloring
        self.chunk_size = chunk_size
        self.max_lanes = max_lanes
        self.warn_lanes = warn_lanes
        self.specs = {}  # input signature -> (out_tree, [(shape, dtype)]) of f's output
        self.colorings = {}  # input signature -> Coloring detected (sparsity="detect")
        self.last_error = None
        self.__name__ = f"to_jax_{_name(f)}"
        self.__doc__ = getattr(f, "__doc__", None)
        self.__wrapped__ = f

    def __repr__(self):
        return f"to_jax({_name(self.f)})"

    def __call__(self, *args, **kwargs):
        jax, jnp = _jax()
        if _tracers_in(kwargs):
            raise _tracer_leak("a keyword argument of the wrapped function is a JAX tracer")
        if _tracers_in(self.f):
            raise _tracer_leak(f"{_name(self.f)} closes over a JAX tracer")
        # concrete JAX arrays among the keyword arguments reach f as numpy arrays
        kwargs = {k: jax.tree_util.tree_map(
            lambda v: np.asarray(v) if isinstance(v, jax.Array) else v, value)
            for k, value in kwargs.items()}
        leaves, treedef = jax.tree_util.tree_flatten(args)
        leaves = [x if _is_tracer(x) else jnp.asarray(x) for x in leaves]
        call = _Call(self, args, treedef, leaves, kwargs)
        concrete = [_concrete(x) for x in leaves]
        if all(c is not None for c in concrete):
            call.ensure_spec(concrete)
            if self.coloring == "detect":
                call.detect(concrete)
        self.last_error = None
        try:
            outs = _tensor(call, ())(*leaves)
        except jax.errors.JaxRuntimeError as error:
            raised, self.last_error = self.last_error, None
            if raised is not None:
                raise raised from error
            raise
        return jax.tree_util.tree_unflatten(call.out_tree, list(outs))


class _Call:
    """One call of the wrapped function: the input structure, kwargs and output spec."""

    def __init__(self, wrapped, args, treedef, leaves, kwargs):
        jax, _ = _jax()
        self.w = wrapped
        self.treedef = treedef
        self.kwargs = kwargs
        self.in_shapes = [tuple(x.shape) for x in leaves]
        self.in_dtypes = [np.dtype(x.dtype) for x in leaves]
        for i, dt in enumerate(self.in_dtypes):
            if dt.kind not in "biuf":
                raise DualgpuError(
                    f"to_jax({_name(wrapped.f)}): input leaf {i} has dtype {dt}; expected "
                    "real numbers (bool, int or float arrays and scalars). Fix: pass other "
                    "objects as keyword arguments, the real and imaginary parts separately.")
        # which leaves may be differentiated
        owner = []
        for p, a in enumerate(args):
            owner += [p] * len(jax.tree_util.tree_leaves(a))
        self.owner = owner
        nargs = len(args)
        if wrapped.argnums is None:
            allowed = set(range(nargs))
        else:
            allowed = set()
            for a in wrapped.argnums:
                if not -nargs <= a < nargs:
                    raise DualgpuError(
                        f"to_jax({_name(wrapped.f)}): argnums={wrapped.argnums} names argument "
                        f"{a}, but the wrapped function got {nargs} positional argument(s).")
                allowed.add(a % nargs)
            for i, p in enumerate(owner):
                if p in allowed and self.in_dtypes[i].kind != "f":
                    raise DualgpuError(
                        f"to_jax({_name(wrapped.f)}): argument {p} is marked differentiable "
                        f"(argnums={wrapped.argnums}) but its leaf {i} has dtype "
                        f"{self.in_dtypes[i]}; expected float32 or float64. Fix: pass floats "
                        "(e.g. jnp.asarray(x, jnp.float32)) or leave the argument out of "
                        "argnums.")
        self.allowed = allowed
        self.key = (treedef, tuple(zip(self.in_shapes, [d.str for d in self.in_dtypes])),
                    _kw_key(kwargs))
        self.out_tree = self.out_specs = None  # found by ensure_spec, where JAX is concrete
        self.memo = {}  # chain -> (leaves, tensor) of the last run's values

    def ensure_spec(self, leaves):
        if self.out_specs is None:
            self.out_tree, self.out_specs = self._output_spec(leaves)

    # ------------------------------------------------------------ output spec
    def _output_spec(self, leaves):
        jax, _ = _jax()
        w = self.w
        if self.key in w.specs:
            return w.specs[self.key]
        if w.given is not None:
            out_leaves, out_tree = jax.tree_util.tree_flatten(w.given)
            specs = [(tuple(s.shape), np.dtype(s.dtype)) for s in out_leaves]
        elif any(_is_tracer(x) for x in leaves):
            raise DualgpuError(
                f"to_jax({_name(w.f)}): the output shapes of {_name(w.f)} are not known yet for "
                f"inputs of shapes {self.in_shapes}, and JAX is tracing (jax.jit or jax.vmap) so "
                "no plain run can find them. Fix: call the wrapped function once outside "
                "jit/vmap with inputs of these shapes (the shapes are then cached), or pass "
                "result_shape_dtypes=jax.ShapeDtypeStruct(shape, dtype) (a pytree of them) to "
                "to_jax.")
        else:
            fleaves = self.to_f([np.asarray(x) for x in leaves])
            result = self.run_plain(fleaves)
            out_leaves, out_tree = jax.tree_util.tree_flatten(result)
            # the callback with these inputs reuses this run
            self.memo[()] = ([np.array(x, copy=True) for x in fleaves], tuple(out_leaves))
            specs = [(np.shape(v), np.asarray(v).dtype) for v in out_leaves]
        for o, (shape, dtype) in enumerate(specs):
            if dtype.kind not in "biuf":
                raise DualgpuError(
                    f"to_jax({_name(w.f)}): output {o} of {_name(w.f)} has dtype {dtype}; "
                    "expected real numbers (float arrays or scalars).")
            if dtype.kind != "f":
                raise DualgpuError(
                    f"to_jax({_name(w.f)}): output {o} of {_name(w.f)} has dtype {dtype}; "
                    "to_jax returns float outputs only (they carry derivatives). Fix: return "
                    "floats (e.g. u.astype(np.float64)), or count outside the simulation.")
        if not specs:
            raise DualgpuError(f"to_jax({_name(w.f)}): {_name(w.f)} returned no arrays.")
        jax_specs = [(shape, np.dtype(jax.dtypes.canonicalize_dtype(dtype)))
                     for shape, dtype in specs]
        w.specs[self.key] = (out_tree, jax_specs)
        return out_tree, jax_specs

    # ------------------------------------------------------------ numerics
    def to_f(self, leaves):
        """The leaves as ``f`` gets them: numpy, 0-d as scalars, floats in compute_dtype.

        Each is a writable copy: JAX hands read-only views, and a simulation may update its
        input in place (``x *= 2``); a copy keeps that from failing or reaching the caller.
        """
        out = []
        for x in leaves:
            x = np.array(x, copy=True)
            if self.w.compute_dtype is not None and x.dtype.kind == "f":
                x = x.astype(self.w.compute_dtype)
            out.append(x[()] if x.ndim == 0 else x)
        return out

    def flat_f(self, *leaves):
        jax, _ = _jax()
        args = jax.tree_util.tree_unflatten(self.treedef, list(leaves))
        result = self.w.f(*args, **protect(self.kwargs))
        return tuple(jax.tree_util.tree_leaves(result))

    def run_plain(self, fleaves):
        jax, _ = _jax()
        args = jax.tree_util.tree_unflatten(self.treedef, list(fleaves))
        return self._guarded(lambda: self.w.f(*args, **protect(self.kwargs)))

    def _guarded(self, thunk):
        try:
            return thunk()
        except DualgpuError as error:
            raise error
        except Exception as error:
            if type(error).__name__ in _TRACER_ERRORS:
                raise _tracer_leak(f"{type(error).__name__} inside {_name(self.w.f)}: "
                                   f"{str(error).splitlines()[0]}") from error
            raise DualgpuError(
                f"to_jax({_name(self.w.f)}): the simulation raised {type(error).__name__}: "
                f"{error}") from error

    def expected(self, chain):
        """[(shape, dtype)] of the derivative tensor of order len(chain), in (o, d1, ..) order."""
        specs = list(self.out_specs)
        for level in chain:
            if level == "sparse":
                specs = [((self.coloring_nnz,), dt) for shape, dt in specs]
                continue
            specs = [(shape + self.in_shapes[d], dt) for shape, dt in specs for d in level]
        return specs

    @property
    def coloring_nnz(self):
        return int(self.coloring.pattern.nnz)

    @property
    def coloring(self):
        """The Coloring of the sparse Jacobian (None: dense)."""
        if self.w.coloring != "detect":
            return self.w.coloring
        if self.key not in self.w.colorings:
            raise DualgpuError(
                f"to_jax({_name(self.w.f)}): sparsity='detect' finds the pattern by one traced "
                "run on concrete inputs, and JAX is tracing under jax.jit with none. Fix: call "
                "the derivative once outside jit (the pattern is then cached per input "
                "shapes), or pass the pattern itself as sparsity=.")
        return self.w.colorings[self.key]

    def detect(self, concrete):
        """Detect the sparsity pattern of the one output w.r.t. the argnums leaf (cached)."""
        if self.key in self.w.colorings:
            return
        positions = [i for i, p in enumerate(self.owner) if p in self.allowed]
        if len(positions) != 1 or len(self.in_shapes[positions[0]]) == 0:
            raise DualgpuError(
                f"to_jax({_name(self.w.f)}): sparsity='detect' takes one array argument "
                f"(argnums={self.w.argnums}); it holds {len(positions)} leaves here.")
        fleaves = self.to_f(concrete)
        pattern = self._guarded(lambda: detect_sparsity(lambda *a: self.flat_f(*a)[0],
                                                        fleaves, positions[0], progress=False))
        coloring = color_columns(pattern)
        # detected at these inputs only: every later call seeds the probe lane of
        # dualgpu.autodiff.reuse, refusing inputs where a branch on the state goes the other way
        coloring.local = True
        self.w.colorings[self.key] = coloring

    def numeric(self, chain):
        """The numpy function of the leaves computing the tensor of ``chain``.

        The outermost level runs :func:`dualgpu.jvp_batch` with unit seeds, which gives the
        tensor of ``chain[:-1]`` too (the values of the dual run): it is kept in ``memo`` so
        that the callback of ``chain[:-1]`` with the same inputs does not run ``f`` again.
        """
        fn = self.flat_f
        for depth, level in enumerate(chain):
            if level == "sparse":
                fn = self._sparse_values(fn)
            elif depth == len(chain) - 1:
                fn = self._values_and_jacobian(fn, level, chain[:-1])
            else:
                def fn(*leaves, _inner=fn, _level=level):
                    J = jacobian(_inner, *leaves, argnums=tuple(_level),
                                 chunk_size=self.w.chunk_size, progress=False)
                    return tuple(block for per_output in J for block in per_output)
        return fn

    def _values_and_jacobian(self, fn, level, inner_chain):
        sizes = [int(np.prod(self.in_shapes[d], dtype=np.int64)) for d in level]
        total = sum(sizes)

        def run(*leaves):
            tangents = [None] * len(leaves)
            offset = 0
            for d, size in zip(level, sizes):
                seed = np.zeros((total, size), dtype=np.asarray(leaves[d]).dtype)
                seed[offset + np.arange(size), np.arange(size)] = 1.0
                tangents[d] = seed.reshape((total,) + self.in_shapes[d])
                offset += size
            values, columns = jvp_batch(fn, leaves, tangents, chunk_size=self.w.chunk_size,
                                        progress=False)
            self.memo[inner_chain] = ([np.array(x, copy=True) for x in leaves], values)
            blocks = []
            for column in columns:
                column = np.asarray(column)
                out_shape = column.shape[1:]
                offset = 0
                for d, size in zip(level, sizes):
                    block = column[offset:offset + size].reshape(size, -1).T
                    blocks.append(block.reshape(out_shape + self.in_shapes[d]))
                    offset += size
            return tuple(blocks)

        return run

    def remembered(self, chain, leaves):
        """The tensor of ``chain`` at ``leaves`` if a dual run just gave it, else None."""
        kept = self.memo.pop(chain, None)
        if kept is None:
            return None
        kept_leaves, values = kept
        if len(kept_leaves) != len(leaves) or not all(
                a.shape == np.shape(b) and np.array_equal(a, b)
                for a, b in zip(kept_leaves, leaves)):
            return None
        return values

    def _sparse_values(self, fn):
        coloring = self.coloring
        pattern = coloring.pattern.tocoo()
        rows, cols = pattern.row, pattern.col

        def values(*leaves):
            d = self.sparse_leaf
            J = sparse_jacobian(lambda *a: fn(*a)[0], leaves, d, sparsity=coloring,
                                chunk_size=self.w.chunk_size, progress=False)
            return (np.asarray(J[rows, cols]).ravel(),)

        return values

    def callback(self, chain):
        expected = self.expected(chain)
        numeric = self.numeric(chain)

        def run(*leaves):
            try:
                fleaves = self.to_f(leaves)
                result = self.remembered(chain, fleaves)
                if result is None:
                    result = self._guarded(lambda: numeric(*fleaves))
                if len(result) != len(expected):
                    raise DualgpuError(
                        f"to_jax({_name(self.w.f)}): {_name(self.w.f)} returned {len(result)} "
                        f"array(s) in this call; the wrapper was set up for {len(expected)} "
                        "(found by the first run or given as result_shape_dtypes). The output "
                        "structure must depend only on the input shapes and keyword arguments.")
                out = []
                for o, (value, (shape, dtype)) in enumerate(zip(result, expected)):
                    value = np.asarray(value)
                    if value.shape != shape:
                        what = "output" if not chain else f"derivative block {o} of the output"
                        raise DualgpuError(
                            f"to_jax({_name(self.w.f)}): {what} has shape {value.shape} in this "
                            f"call; the wrapper was set up for {shape} (found by the first run "
                            "or given as result_shape_dtypes). JAX needs output shapes fixed by "
                            "the input shapes and keyword arguments. Fix: make the output shape "
                            "depend only on those, or wrap each shape variant separately.")
                    out.append(value.astype(dtype, copy=False))
                return tuple(out)
            except DualgpuError as error:
                self.w.last_error = error
                raise

        return run

    # ------------------------------------------------------------ cost guard
    def guard(self, chain):
        """Warn or refuse a derivative tensor by its lanes (before anything runs)."""
        w = self.w
        lanes = 1
        for level in chain:
            lanes *= (self.coloring.n_colors if level == "sparse"
                      else sum(int(np.prod(self.in_shapes[d], dtype=np.int64)) for d in level))
        out_size = sum(int(np.prod(s, dtype=np.int64)) for s, _ in self.expected(chain))
        runs = math.ceil(lanes / _TILE)
        estimate = (f"{lanes} tangent lanes (about {runs} kernel tile(s) of {_TILE} lanes per "
                    f"kernel launch, in as few dual runs as memory allows) and a derivative "
                    f"tensor of {out_size:,} values ({out_size * 8 / 1e9:.3g} GB in float64)")
        if w.max_lanes is not None and lanes > w.max_lanes:
            raise DualgpuError(
                f"to_jax({_name(w.f)}): this derivative needs {estimate}. It exceeds "
                f"max_lanes={w.max_lanes}: reverse mode through forward mode costs one lane "
                "per differentiated input entry, the wrong tool for a gradient with respect "
                "to a large field. Fix: differentiate with respect to fewer inputs (a few "
                "parameters of the field), pass sparsity= (a pattern or Coloring), or raise "
                "max_lanes (None: no limit) if you mean to pay this.")
        if w.warn_lanes is not None and lanes > w.warn_lanes:
            warnings.warn(
                f"to_jax({_name(w.f)}): this derivative needs {estimate}.",
                JaxBridgeCostWarning, stacklevel=4)


def _tensor(call, chain):
    """The JAX function of the leaves returning the derivative tensor of ``chain``."""
    jax, jnp = _jax()
    from jax.custom_derivatives import SymbolicZero


    def specs():
        return [jax.ShapeDtypeStruct(shape, dtype) for shape, dtype in call.expected(chain)]

    @jax.custom_jvp
    def tensor(*leaves):
        call.ensure_spec(leaves)
        return tuple(jax.pure_callback(call.callback(chain), tuple(specs()), *leaves,
                                       vmap_method="sequential"))

    def rule(primals, tangents):
        call.ensure_spec(primals)
        live = tuple(i for i, t in enumerate(tangents) if not isinstance(t, SymbolicZero))
        if not live:
            return tensor(*primals), tuple(jnp.zeros(s.shape, s.dtype) for s in specs())
        fname = _name(call.w.f)
        for i in live:
            p = call.owner[i]
            if p not in call.allowed:
                raise DualgpuError(
                    f"to_jax({fname}): a derivative with respect to argument {p} was asked, "
                    f"but argnums={call.w.argnums} leaves it out. Fix: add {p} to argnums, or "
                    "differentiate only the arguments it names (e.g. jax.grad(..., "
                    "argnums=...)).")
            if call.in_dtypes[i].kind != "f":
                raise DualgpuError(
                    f"to_jax({fname}): a derivative with respect to input leaf {i} (argument "
                    f"{p}, dtype {call.in_dtypes[i]}) was asked; expected a float input.")
        if len(chain) >= MAX_ORDER:
            raise DualgpuError(
                f"to_jax({fname}): derivatives of order {len(chain) + 1} are not available; "
                f"to_jax gives derivatives up to order {MAX_ORDER} (dualgpu's nested duals). "
                "Fix: differentiate at most twice through the wrapped function.")
        sparse = call.w.coloring is not None and not chain
        if call.w.coloring is not None and chain:
            raise DualgpuError(
                f"to_jax({fname}): second derivatives are not available with sparsity=; wrap "
                "the function without sparsity for jax.hessian.")
        if sparse:
            if call.w.coloring == "detect" and call.key not in call.w.colorings:
                concrete = [_concrete(x) for x in primals]
                if all(c is not None for c in concrete):
                    call.detect(concrete)
            if len(live) != 1 or len(call.in_shapes[live[0]]) == 0 or len(specs()) != 1:
                raise DualgpuError(
                    f"to_jax({fname}): sparsity= takes one array output differentiated with "
                    f"respect to one array input; here {len(specs())} output(s) and inputs "
                    f"{list(live)} (leaf numbers) are differentiated. Fix: differentiate only "
                    "the one array (others as keyword arguments), or drop sparsity=.")
            pattern_shape = call.coloring.pattern.shape
            n_in = int(np.prod(call.in_shapes[live[0]], dtype=np.int64))
            n_out = int(np.prod(specs()[0].shape, dtype=np.int64))
            if pattern_shape != (n_out, n_in):
                raise DualgpuError(
                    f"to_jax({fname}): the sparsity pattern has shape {pattern_shape}; expected "
                    f"(output size, input size) = ({n_out}, {n_in}).")
            call.sparse_leaf = live[0]
            call.guard(("sparse",))
            (values,) = _tensor(call, ("sparse",))(*primals)
            out = tensor(*primals)
            coo = call.coloring.pattern.tocoo()
            t = jnp.asarray(tangents[live[0]], values.dtype).reshape(-1)
            product = jax.ops.segment_sum(values * t[coo.col], coo.row, num_segments=n_out)
            return out, (product.reshape(specs()[0].shape),)
        level = chain + (live,)
        call.guard(level)
        derivative = _tensor(call, level)(*primals)
        out = tensor(*primals)  # after the dual run, whose values it reuses (call.memo)
        products = []
        for k, s in enumerate(specs()):
            total = jnp.zeros(s.shape, s.dtype)
            for j, i in enumerate(live):
                block = derivative[k * len(live) + j]
                t = jnp.asarray(tangents[i], s.dtype)
                total = total + jnp.tensordot(block, t, axes=len(call.in_shapes[i]))
            products.append(total)
        return out, tuple(products)

    tensor.defjvp(rule, symbolic_zeros=True)
    return tensor
