"""Tests of dualgpu.autodiff.sparsity and dualgpu.autodiff.coloring (patterns, column coloring,
recovery)."""
import doctest
import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import arrays

import dualgpu.autodiff.coloring as coloring_module
import dualgpu.autodiff.sparsity as sparsity_module
from dualgpu.autodiff.coloring import ORDERS, Coloring, check_coloring, color_columns
from dualgpu.errors import DualgpuError
from dualgpu.autodiff.sparsity import as_pattern, banded_pattern, stencil_pattern_2d


def dense_band(n, half_width, periodic):
    i, j = np.indices((n, n))
    distance = np.abs(i - j)
    if periodic:
        distance = np.minimum(distance, n - distance)
    return distance <= half_width


def dense_stencil(ny, nx, periodic):
    dense = np.zeros((ny * nx, ny * nx), dtype=bool)
    for y in range(ny):
        for x in range(nx):
            for dy, dx in ((0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)):
                yy, xx = y + dy, x + dx
                if periodic:
                    yy, xx = yy % ny, xx % nx
                elif not (0 <= yy < ny and 0 <= xx < nx):
                    continue
                dense[y * nx + x, yy * nx + xx] = True
    return dense


def random_jacobian(pattern, rng, dtype=np.float64):
    """A matrix with the pattern's structure and random nonzero values."""
    pattern = as_pattern(pattern)
    values = rng.uniform(0.5, 2.0, pattern.nnz) * rng.choice([-1, 1], pattern.nnz)
    return sp.csr_matrix((values.astype(dtype), pattern.indices, pattern.indptr),
                         shape=pattern.shape)


patterns = st.tuples(st.integers(1, 12), st.integers(1, 12)).flatmap(
    lambda shape: arrays(bool, shape, elements=st.booleans())
)


def test_docstring_examples():
    for module in (coloring_module, sparsity_module):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted > 0


# ---------------------------------------------------------------- as_pattern


def test_as_pattern_dense_and_sparse_inputs():
    dense = np.array([[0, 2.5, 0], [1, 0, 0]])
    from_dense = as_pattern(dense)
    assert isinstance(from_dense, sp.csr_matrix) and from_dense.dtype == bool
    assert np.array_equal(from_dense.toarray(), dense != 0)
    assert np.array_equal(as_pattern(dense.tolist()).toarray(), dense != 0)
    assert np.array_equal(as_pattern(sp.coo_array(dense)).toarray(), dense != 0)


def test_as_pattern_keeps_stored_zeros_merges_duplicates_and_copies():
    coo = sp.coo_matrix(([0.0, 1.0, 1.0], ([0, 1, 1], [2, 0, 0])), shape=(2, 3))
    pattern = as_pattern(coo)
    assert pattern.nnz == 2
    assert np.array_equal(pattern.toarray(), [[0, 0, 1], [1, 0, 0]])
    source = sp.csr_matrix(np.eye(3))
    pattern = as_pattern(source)
    pattern.indices[0] = 2
    assert source.indices[0] == 0


def test_as_pattern_shape_error_says_expected_and_got():
    with pytest.raises(DualgpuError, match=r"pattern has shape \(10, 12\) but the function has 10 "
                       r"outputs and 11 inputs"):
        as_pattern(np.ones((10, 12)), shape=(10, 11))
    with pytest.raises(DualgpuError, match="1 output and 1 input;"):
        as_pattern(sp.eye(2), shape=(1, 1))


@pytest.mark.parametrize("bad", [np.ones(3), np.ones((2, 2, 2)), np.array([["a", "b"]])])
def test_as_pattern_rejects_non_matrices(bad):
    with pytest.raises(DualgpuError, match="pattern must"):
        as_pattern(bad)


# ---------------------------------------------------------------- pattern builders


@pytest.mark.parametrize("periodic", [False, True])
@pytest.mark.parametrize("n, half_width",
                         [(1, 0), (1, 3), (5, 0), (7, 1), (7, 2), (7, 3), (6, 3), (9, 5)])
def test_banded_pattern_matches_dense(n, half_width, periodic):
    pattern = banded_pattern(n, half_width, periodic=periodic)
    assert pattern.has_canonical_format and pattern.dtype == bool
    assert np.array_equal(pattern.toarray(), dense_band(n, half_width, periodic))


@pytest.mark.parametrize("periodic", [False, True])
@pytest.mark.parametrize("ny, nx", [(1, 1), (1, 4), (2, 2), (3, 1), (3, 4), (5, 3)])
def test_stencil_pattern_2d_matches_dense(ny, nx, periodic):
    pattern = stencil_pattern_2d(ny, nx, periodic=periodic)
    assert pattern.has_canonical_format
    assert np.array_equal(pattern.toarray(), dense_stencil(ny, nx, periodic))


def test_builders_reject_bad_sizes():
    with pytest.raises(DualgpuError, match="half_width must be an integer >= 0"):
        banded_pattern(5, -1)
    with pytest.raises(DualgpuError, match="nx must be"):
        stencil_pattern_2d(3, 2.5)


# ---------------------------------------------------------------- coloring validity


@settings(max_examples=60, deadline=None)
@given(dense=patterns, order=st.sampled_from(ORDERS))
def test_random_colorings_are_valid_and_recover_exactly(dense, order):
    coloring = color_columns(dense, order=order)
    coloring.validate()
    m, n = dense.shape
    assert coloring.colors.shape == (n,)
    assert coloring.lower_bound <= coloring.n_colors <= n
    for i in range(m):
        row_colors = coloring.colors[dense[i]]
        assert len(set(row_colors.tolist())) == row_colors.size
    jacobian = random_jacobian(dense, np.random.default_rng(n * 31 + m))
    compressed = jacobian @ coloring.seed_matrix()
    recovered = coloring.recover(compressed)
    assert np.array_equal(recovered.toarray(), jacobian.toarray())
    assert np.array_equal(recovered.indices, coloring.pattern.indices)
    assert np.array_equal(
        coloring.recover(compressed.T.copy(), lanes_first=True).toarray(), jacobian.toarray()
    )


@settings(max_examples=40, deadline=None)
@given(dense=patterns, seed=st.integers(0, 2**16))
def test_bit_mask_greedy_equals_neighbour_scan(dense, seed):
    """The fast greedy (row masks, with its fallback) gives exactly the plain greedy's colors."""
    pattern = as_pattern(dense)
    m, n = pattern.shape
    columns = coloring_module._transpose_indices(n, pattern.indptr, pattern.indices)
    order = np.random.default_rng(seed).permutation(n).astype(np.int64)
    scanned = np.full(n, -1, dtype=np.int64)
    coloring_module._greedy_scan(order, 0, scanned, *columns, pattern.indptr, pattern.indices)
    for max_words in (1, 4):  # 1: falls back to the scan beyond 64 colors
        masked = coloring_module._greedy_colors(
            order, *columns, pattern.indptr, pattern.indices, m, max_words
        )
        assert np.array_equal(masked, scanned)


def test_more_than_64_colors_and_the_scan_fallback():
    rng = np.random.default_rng(3)
    dense = rng.random((40, 300)) < 0.6
    pattern = as_pattern(dense)
    columns = coloring_module._transpose_indices(300, pattern.indptr, pattern.indices)
    order = np.arange(300, dtype=np.int64)
    results = [
        coloring_module._greedy_colors(order, *columns, pattern.indptr, pattern.indices, 40, words)
        for words in (1, 2, 8)
    ]
    assert results[0].max() >= 128
    for colors in results:
        assert np.array_equal(colors, results[0])
        check_coloring(pattern, colors)


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("half_width, expected", [(0, 1), (1, 3), (5, 11), (20, 41)])
def test_banded_patterns_get_the_optimal_count(half_width, expected, order):
    coloring = color_columns(banded_pattern(600, half_width), order=order)
    assert coloring.n_colors == expected == coloring.lower_bound
    coloring.validate()


def test_large_tridiagonal_and_stencil():
    tridiagonal = color_columns(banded_pattern(200_000, 1))
    assert tridiagonal.n_colors == 3
    tridiagonal.validate()
    stencil = color_columns(stencil_pattern_2d(200, 200))
    stencil.validate()
    assert 5 <= stencil.n_colors <= 7  # greedy gives 7; the optimum is 5


def test_user_coloring_is_checked():
    ny, nx = 10, 10
    pattern = stencil_pattern_2d(ny, nx, periodic=True)
    y, x = np.divmod(np.arange(ny * nx), nx)
    optimal = Coloring(pattern, (x + 2 * y) % 5)
    assert optimal.n_colors == 5
    with pytest.raises(DualgpuError, match="share the nonzero row"):
        Coloring(pattern, x % 5)


def test_check_coloring_names_the_conflict_and_bad_input():
    pattern = np.array([[1, 0, 1], [0, 1, 1]], dtype=bool)
    assert check_coloring(pattern, [0, 0, 1]) == 2
    with pytest.raises(DualgpuError, match="columns 1 and 2 both have color 1 but share the "
                       "nonzero row 1"):
        check_coloring(pattern, [0, 1, 1])
    with pytest.raises(DualgpuError, match="one entry per column"):
        check_coloring(pattern, [0, 1])
    with pytest.raises(DualgpuError, match=">= 0"):
        check_coloring(pattern, [0, -1, 1])
    with pytest.raises(DualgpuError, match="column 2 has color 3"):
        check_coloring(pattern, [0, 1, 3])
    with pytest.raises(DualgpuError, match="integers"):
        check_coloring(pattern, [0.0, 1.0, 2.0])


def test_order_options():
    pattern = banded_pattern(30, 2)
    n = 30
    natural = color_columns(pattern, order="natural")
    assert np.array_equal(natural.colors, np.arange(n) % 5)
    explicit = color_columns(pattern, order=np.arange(n)[::-1])
    explicit.validate()
    assert explicit.colors[-1] == 0
    with pytest.raises(DualgpuError, match="order must be one of"):
        color_columns(pattern, order="random")
    with pytest.raises(DualgpuError, match="permutation"):
        color_columns(pattern, order=np.zeros(n, dtype=int))
    with pytest.raises(DualgpuError, match="permutation"):
        color_columns(pattern, order=np.arange(n - 1))


def test_color_columns_checks_shape():
    with pytest.raises(DualgpuError, match="10 outputs and 11 inputs"):
        color_columns(np.ones((10, 12), dtype=bool), shape=(10, 11))


@pytest.mark.parametrize("shape, nnz", [((0, 0), 0), ((0, 4), 0), ((3, 0), 0), ((3, 4), 0)])
def test_empty_patterns(shape, nnz):
    coloring = color_columns(np.zeros(shape, dtype=bool))
    m, n = shape
    assert coloring.n_colors == (1 if n else 0)
    recovered = coloring.recover(np.zeros((m, coloring.n_colors)))
    assert recovered.shape == shape and recovered.nnz == 0


# ---------------------------------------------------------------- seeds and recovery


def test_seed_matrix_and_chunks():
    coloring = color_columns(banded_pattern(12, 1))
    seeds = coloring.seed_matrix(np.float32)
    assert seeds.shape == (12, 3) and seeds.dtype == np.float32
    assert np.array_equal(seeds.sum(axis=1), np.ones(12))
    assert np.array_equal(np.argmax(seeds, axis=1), coloring.colors)
    padded = np.hstack([seeds, np.zeros((12, 2), np.float32)])
    for start, stop in [(0, 3), (0, 2), (1, 3), (2, 2), (2, 5), (4, 5)]:
        chunk = coloring.seed_chunk(start, stop, np.float32)
        assert chunk.dtype == np.float32
        assert np.array_equal(chunk, padded[:, start:stop].T)
    shaped = coloring.seed_chunk(0, 3, input_shape=(3, 4))
    assert shaped.shape == (3, 3, 4)
    assert np.array_equal(shaped.reshape(3, 12), seeds.T)
    with pytest.raises(DualgpuError, match="input_shape"):
        coloring.seed_chunk(0, 3, input_shape=(5, 5))
    with pytest.raises(DualgpuError, match="start <= stop"):
        coloring.seed_chunk(2, 1)


def test_recover_layouts_dtypes_and_explicit_zeros():
    ny, nx = 6, 5
    pattern = stencil_pattern_2d(ny, nx)
    coloring = color_columns(pattern)
    rng = np.random.default_rng(0)
    jacobian = random_jacobian(pattern, rng, np.float32)
    jacobian.data[::7] = 0.0  # structural entries that happen to be zero
    compressed = jacobian @ coloring.seed_matrix(np.float32)
    recovered = coloring.recover(compressed)
    assert recovered.dtype == np.float32
    assert recovered.nnz == pattern.nnz  # zeros kept in the structure
    assert np.array_equal(recovered.toarray(), jacobian.toarray())
    lane_major = compressed.T.reshape(coloring.n_colors, ny, nx)  # like DualArray partials
    assert np.array_equal(coloring.recover(lane_major, lanes_first=True).toarray(),
                          jacobian.toarray())
    recovered.data[:] = 1.0
    recovered.eliminate_zeros()
    assert np.array_equal(coloring.pattern.indices, pattern.indices)


def test_recover_shape_errors():
    coloring = color_columns(banded_pattern(8, 1))
    with pytest.raises(DualgpuError, match=r"shape \(8, 3\) for layout \(outputs, lanes\); got "
                       r"\(3, 8\).*lanes_first=True"):
        coloring.recover(np.zeros((3, 8)))
    with pytest.raises(DualgpuError, match="keep only the first 3 lanes"):
        coloring.recover(np.zeros((4, 8)), lanes_first=True)
    with pytest.raises(DualgpuError, match="lanes_first=False"):
        coloring.recover(np.zeros((8, 3)), lanes_first=True)
    with pytest.raises(DualgpuError):
        coloring.recover(np.zeros(24), lanes_first=True)


def test_coloring_is_reusable_and_picklable():
    pattern = banded_pattern(50, 3, periodic=True)
    coloring = color_columns(pattern, order="smallest_last")
    clone = pickle.loads(pickle.dumps(coloring))
    assert np.array_equal(clone.colors, coloring.colors) and clone.n_colors == coloring.n_colors
    rng = np.random.default_rng(5)
    for _ in range(3):
        jacobian = random_jacobian(pattern, rng)
        for c in (coloring, clone):
            recovered = c.recover(jacobian @ c.seed_matrix())
            assert np.array_equal(recovered.toarray(), jacobian.toarray())
    assert "colors for 50 inputs" in repr(coloring)


# --- structured colorings and the "best" order ----------------------------------------
def test_periodic_heat_jacobian_gets_250_colors_where_greedy_needs_about_400():
    # periodic heat, 1000 cells, 100 steps: every row couples 201 consecutive cells (mod n)
    pattern = banded_pattern(1000, 100, periodic=True)
    best = color_columns(pattern)
    best.validate()
    assert best.lower_bound == 201
    assert best.n_colors == 250  # ceil(1000 / floor(1000 / 201)): the optimum
    assert color_columns(pattern, order="largest_first").n_colors > 390


@pytest.mark.parametrize("n, half_width",
                         [(7, 1), (10, 1), (11, 2), (30, 4), (31, 4), (64, 7), (20, 9)])
def test_cyclic_band_coloring_is_valid_and_optimal(n, half_width):
    pattern = banded_pattern(n, half_width, periodic=True)
    coloring = color_columns(pattern, order="cyclic_band")
    coloring.validate()
    span = min(2 * half_width, n - 1)
    optimum = n if n <= span + 1 else -(-n // (n // (span + 1)))
    assert coloring.n_colors == optimum
    assert color_columns(pattern).n_colors <= optimum


def test_lattice_coloring_of_stencils_needs_the_grid():
    pattern = stencil_pattern_2d(40, 30)
    assert color_columns(pattern).n_colors == 7  # greedy, no grid
    lattice = color_columns(pattern, grid=(40, 30))
    assert lattice.n_colors == 5 == lattice.lower_bound
    lattice.validate()
    assert color_columns(stencil_pattern_2d(20, 20, periodic=True), grid=(20, 20)).n_colors == 5
    with pytest.raises(DualgpuError, match="order='lattice' needs grid="):
        color_columns(pattern, order="lattice")


def test_best_is_never_worse_than_any_greedy_order(rng):
    for trial in range(5):
        dense = rng.random((30, 40)) < 0.12
        best = color_columns(dense)
        best.validate()
        for order in ORDERS:
            assert best.n_colors <= color_columns(dense, order=order).n_colors


def test_structured_colorings_are_checked_before_use():
    # not a band: the band coloring of its spans is valid, but a forced lattice on the wrong
    # grid is refused, never returned
    pattern = np.eye(6, dtype=bool)
    pattern[0, 5] = pattern[5, 0] = True
    assert color_columns(pattern, order="band").n_colors == 6
    coloring = color_columns(pattern)
    coloring.validate()
    assert coloring.n_colors == 2
