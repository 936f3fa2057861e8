"""Which lane layout and tile width suit a kernel: a model read from its source, not a timing.

A dual launch computes ``N`` lanes of partials beside each value. Two kinds of kernels
want opposite things from the cpu backend:

*memory-bound* (stencils, elementwise updates)
    Each thread loads a few dual elements, does a few operations on them and stores
    the result. The launch loop over threads is straight-line code, which LLVM's loop
    vectoriser runs several threads at a time; the lane-major partials ``(N, *shape)``
    give it stride-1 rows per lane. Narrow tiles (8 lanes) keep the rows in cache.
*compute-bound* (pair loops, per-thread time loops, matrix rows)
    Each thread runs a loop whose body does many dual operations per element it
    loads. The loop over threads cannot be vectorised, so the lanes must be: the
    partials of one tile are laid out lanes-last (``(*shape, N)`` in memory: a Fortran
    array of shape ``(N, *shape)``), so one element's lanes are contiguous, and LLVM's
    SLP vectoriser turns every lane operation of the tile into packed instructions
    (``vfmadd...pd`` on ymm). Wide tiles amortise the value computation, which each
    tile repeats (:func:`compute_tile_width`: 32 lanes with AVX, AVX2 or AVX-512).

:func:`kernel_profile` decides from the kernel's translated source (device functions
followed): a kernel is compute-bound when a loop with a trip count known only at run
time (``range(n)``, ``while``) does at least :data:`OPS_PER_ACCESS` arithmetic
operations per array element it reads or writes. Loops over a literal range
(``for d in range(3)``) count as their body repeated. A grid-stride loop over a
stencil reads as many elements as it computes with, so it stays memory-bound.

Examples
--------
>>> import ast
>>> pair = ast.parse('''
... def k(pos, out, n):
...     i = 0
...     a = 0.0
...     for j in range(n):
...         d = pos[j] - pos[i]
...         a += d / (d * d + 0.01) ** 1.5
...     out[i] = a
... ''').body[0]
>>> profile_tree(pair).kind
'compute'
>>> stencil = ast.parse('''
... def k(u, v, a, n):
...     for i in range(1, n - 1):
...         v[i] = u[i] + a * (u[i - 1] - 2 * u[i] + u[i + 1])
... ''').body[0]
>>> profile_tree(stencil).kind
'memory'
"""
import ast
import collections

__all__ = ["OPS_PER_ACCESS", "TILE_WIDTH", "Profile", "kernel_profile",
           "profile_tree", "vector_bytes", "vector_registers", "compute_tile_width"]

#: Arithmetic operations per array access in a run-time loop from which a kernel counts
#: as compute-bound. The dual N-body pair loop does about 5 (20 operations on 4 loaded
#: elements), a 3-point stencil in a grid-stride loop about 1.
OPS_PER_ACCESS = 3.0


def vector_bytes(features=None):
    """Bytes in one SIMD register of the CPU numba compiles for: 64 with AVX-512, 32 with
    AVX or AVX2, 16 otherwise (SSE, NEON). ``features``: LLVM's feature string
    (``+avx2,-avx512f,...``); default the host's, or ``NUMBA_CPU_FEATURES`` when set."""
    return _isa(features)[0]


def vector_registers(features=None):
    """How many SIMD registers x86-64 code may use: 32 with AVX-512, else 16."""
    return _isa(features)[1]


def _isa(features):
    if features is None:
        from numba.core import config

        features = config.CPU_FEATURES or ""
        if not features and (config.CPU_NAME or "host") == "host":
            try:
                import llvmlite.binding as llvm

                features = llvm.get_host_cpu_features().flatten()
            except Exception:  # pragma: no cover - llvmlite without host detection
                features = ""
    enabled = {f[1:] for f in features.split(",") if f.startswith("+")}
    if "avx512f" in enabled:
        return 64, 32
    if "avx" in enabled:
        return 32, 16
    return 16, 16


def compute_tile_width(vector=None):
    """Lanes per tile of a compute-bound kernel: 32 where SIMD registers hold 32 or 64 bytes
    (AVX, AVX2, AVX-512), 16 with 16-byte registers (SSE, NEON: not measured).

    Every tile repeats the kernel's value computation (in the pair loop a square root and
    divisions per pair), so the wider the tile, the less of it each lane pays; the lanes'
    accumulators that do not fit the registers live in L1, which costs less than
    recomputing the values. Measured on the dual N-body pair loop, 1,024 bodies and 32
    lanes, each width in its own process: with AVX2 (2 cores, 2026-12-03) 8 lanes per tile
    cost 1.25-1.30 ns per pair and lane, 16 lanes 0.91-0.97 and 32 lanes 0.77-0.91, the
    first launch compiling in 0.8, 1.1 and 1.4 s; with AVX-512 (one thread) 2.7 ns at 16
    lanes and 1.5 at 32.
    """
    vector = vector_bytes() if vector is None else vector
    return 32 if vector >= 32 else 16


#: Lanes per tile each kind wants (the largest candidate dividing the launch's lanes
#: that does not exceed this is taken); the compute width follows the machine's SIMD
#: register width (:func:`compute_tile_width`).
TILE_WIDTH = {"compute": compute_tile_width(), "memory": 8}

#: What one call to these math functions costs, in operations (a division or square
#: root is several multiplies' worth; their derivative rules add more).
CALL_WEIGHT = 4

Profile = collections.namedtuple("Profile", "kind ops accesses")
Profile.__doc__ = """``kind`` ("compute" or "memory") and the operations and array accesses
counted in the kernel's run-time loops (both 0 without such a loop)."""


class _Counter(ast.NodeVisitor):
    """Operations and array accesses in a body, device calls inlined, literal loops unrolled."""

    def __init__(self, devices, active):
        self.ops = 0.0
        self.accesses = 0.0
        self.devices = devices
        self.active = active

    def visit_BinOp(self, node):
        self.ops += CALL_WEIGHT if isinstance(node.op, (ast.Div, ast.Pow, ast.Mod)) else 1
        self.generic_visit(node)

    def visit_AugAssign(self, node):
        self.ops += CALL_WEIGHT if isinstance(node.op, (ast.Div, ast.Pow, ast.Mod)) else 1
        if isinstance(node.target, ast.Subscript):
            self.accesses += 2  # read and write
            self.generic_visit(node.target.slice)
        self.visit(node.value)

    def visit_UnaryOp(self, node):
        if isinstance(node.op, ast.USub):
            self.ops += 1
        self.generic_visit(node)

    def visit_Subscript(self, node):
        self.accesses += 1
        self.visit(node.slice)  # the array itself is a name

    def visit_Call(self, node):
        callee = _device_of(node, self.devices)
        if callee is not None and id(callee) not in self.active:
            inner = _count(callee.tree.body, _devices_of(callee), self.active | {id(callee)})
            self.ops += inner.ops
            self.accesses += inner.accesses
        elif isinstance(node.func, ast.Attribute) or isinstance(node.func, ast.Name):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
            if name not in ("range", "len", "int", "float", "min", "max", "abs") and not (
                name.startswith("_dg_")
            ):
                self.ops += CALL_WEIGHT
        for arg in node.args:
            self.visit(arg)

    def visit_For(self, node):
        trips = _literal_trips(node)
        inner = _count(node.body, self.devices, self.active)
        repeat = trips if trips is not None else 1
        self.ops += repeat * inner.ops
        self.accesses += repeat * inner.accesses

    visit_While = visit_For


def _count(body, devices, active):
    counter = _Counter(devices, active)
    for statement in body:
        counter.visit(statement)
    return counter


def _literal_trips(node):
    """The trip count of ``for _ in range(<int literals>)``; None if not known before run time."""
    if not isinstance(node, ast.For):
        return None
    call = node.iter
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
            and call.func.id == "range" and call.args):
        return None
    values = []
    for arg in call.args:
        if not (isinstance(arg, ast.Constant) and isinstance(arg.value, int)):
            return None
        values.append(arg.value)
    return len(range(*values))


def _devices_of(translation):
    return getattr(translation, "devices", None) or {}


def _device_of(call, devices):
    if isinstance(call.func, ast.Name):
        callee = devices.get(call.func.id)
        if callee is not None and getattr(callee, "tree", None) is not None:
            return callee
    return None


class _Loops(ast.NodeVisitor):
    """The densest run-time loop: most operations per access (device calls followed)."""

    def __init__(self, devices, active):
        self.best = None
        self.devices = devices
        self.active = active

    def _consider(self, ops, accesses):
        if ops <= 0:
            return
        if self.best is None or ops / max(accesses, 1) > self.best[0] / max(self.best[1], 1):
            self.best = (ops, accesses)

    def visit_For(self, node):
        if _literal_trips(node) is None:
            inner = _count(node.body, self.devices, self.active)
            self._consider(inner.ops, inner.accesses)
        self.generic_visit(node)

    visit_While = visit_For

    def visit_Call(self, node):
        callee = _device_of(node, self.devices)
        if callee is not None and id(callee) not in self.active:
            inner = _Loops(_devices_of(callee), self.active | {id(callee)})
            for statement in callee.tree.body:
                inner.visit(statement)
            if inner.best is not None:
                self._consider(*inner.best)
        self.generic_visit(node)


def profile_tree(tree, devices=None):
    """The :class:`Profile` of a function's AST (``devices``: name -> translation)."""
    loops = _Loops(devices or {}, frozenset())
    for statement in tree.body:
        loops.visit(statement)
    if loops.best is None:
        return Profile("memory", 0, 0)
    ops, accesses = loops.best
    kind = "compute" if ops >= OPS_PER_ACCESS * max(accesses, 1) else "memory"
    return Profile(kind, ops, accesses)


def kernel_profile(translation):
    """The :class:`Profile` of a cpu-backend kernel's translation (cached on it)."""
    found = getattr(translation, "_lane_profile", None)
    if found is None:
        tree = translation.tree
        found = Profile("memory", 0, 0) if tree is None else profile_tree(
            tree, _devices_of(translation))
        translation._lane_profile = found
    return found
