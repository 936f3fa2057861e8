"""Tests for dualgpu.plot: figures are made headless, centred at zero, labelled, and saved."""
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from matplotlib import colors
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.image import imread

from dualgpu import plot
from dualgpu.errors import DualgpuError
from dualgpu.plot.jacobian import _pool_max_abs

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
NAMES = ["diffusivity", "reaction_rate", "inflow_velocity", "k", "boundary_temperature"]


def _saved_png(fig, tmp_path, name="figure.png"):
    """Save ``fig`` and return the image array read back, after checking it is a PNG."""
    path = plot.save(fig, tmp_path / "sub" / name)
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    image = imread(path)
    assert image.shape[1] >= 400 and image.shape[0] >= 300
    return image


def _assert_centred(norm):
    assert norm.vmin == pytest.approx(-norm.vmax)
    assert norm.vmax > 0 and np.isfinite(norm.vmax)
    assert float(norm(0.0)) == pytest.approx(0.5)


def _colorbar_label(fig):
    return fig.axes[-1].get_ylabel()


# ---------------------------------------------------------------- jacobian_heatmap

def test_heatmap_is_centred_labelled_and_saves(tmp_path):
    rng = np.random.default_rng(0)
    J = rng.normal(size=(7, 5)) + 0.5
    fig, ax = plot.jacobian_heatmap(J, input_labels=NAMES, output_name="probe",
                                    input_name="parameter")
    norm = ax.images[0].norm
    assert isinstance(norm, colors.TwoSlopeNorm)
    _assert_centred(norm)
    assert norm.vmax == pytest.approx(np.max(np.abs(J)))
    assert [t.get_text() for t in ax.get_xticklabels()] == NAMES
    assert ax.get_xlabel() == "parameter" and "probe" in ax.get_ylabel()
    assert "∂ probe / ∂ parameter" in ax.get_title() and "7 × 5" in ax.get_title()
    assert _colorbar_label(fig) == "∂ probe / ∂ parameter"
    assert len(ax.texts) == J.size  # small matrices are annotated
    _saved_png(fig, tmp_path)


def test_heatmap_symlog_norm_is_symmetric_with_power_of_ten_threshold():
    J = np.array([[1e2, -1e-3], [5.0, -7e-5]])
    fig, ax = plot.jacobian_heatmap(J, scale="symlog")
    norm = ax.images[0].norm
    assert isinstance(norm, colors.SymLogNorm)
    _assert_centred(norm)
    # the 10th percentile of |nonzero| is 3.5e-4, rounded down to a power of ten
    assert norm.linthresh == pytest.approx(1e-4)
    assert "symlog" in ax.get_title() and "±0.0001" in ax.get_title()
    _, ax = plot.jacobian_heatmap(J, scale="symlog", linthresh=0.5)
    assert ax.images[0].norm.linthresh == pytest.approx(0.5)


def test_symlog_threshold_follows_the_data():
    rng = np.random.default_rng(4)
    # magnitudes spread evenly over 1e-6 .. 1 (log scale), signs mixed, zeros ignored
    magnitudes = 10.0 ** rng.uniform(-6, 0, size=1000)
    J = (magnitudes * rng.choice([-1.0, 1.0], size=1000)).reshape(40, 25)
    J[0, :5] = 0.0
    _, ax = plot.jacobian_heatmap(J, scale="symlog")
    assert ax.images[0].norm.linthresh == pytest.approx(1e-6)  # 10th percentile ~ 4e-6
    # a narrow spread: still at least one decade of log scale below the largest entry
    _, ax = plot.jacobian_heatmap(np.linspace(1.0, 2.0, 12).reshape(3, 4) - 3.0,
                                  scale="symlog")
    assert ax.images[0].norm.linthresh == pytest.approx(0.1)
    # a huge spread is cut at MAX_SYMLOG_DECADES below the largest magnitude
    field = np.outer(10.0 ** -np.arange(30.0), [1.0, -1.0])
    _, ax = plot.sensitivity_field(field, scale="symlog")
    assert ax.images[0].norm.linthresh == pytest.approx(10.0 ** -plot.MAX_SYMLOG_DECADES)
    _, ax = plot.sensitivity_over_time(np.arange(30.0), field[:, 0] * 1e3, logy=True)
    assert ax.get_yscale() == "log"  # all positive: a plain log axis


def test_non_negative_data_get_a_sequential_scale_from_zero(tmp_path):
    concentration = np.abs(np.sin(np.linspace(0, 3, 200))).reshape(10, 20)
    fig, ax = plot.sensitivity_field(concentration, colorbar_label="v(T)")
    image = ax.images[0]
    assert image.cmap.name.startswith("Reds")
    assert image.norm.vmin == 0.0 and image.norm.vmax == pytest.approx(concentration.max())
    assert min(image.cmap(image.norm(0.0))[:3]) > 0.93  # (near) white is still zero
    _saved_png(fig, tmp_path)
    # an all-positive Jacobian, and an all-negative one
    _, ax = plot.jacobian_heatmap(np.eye(4) + 0.5)
    assert ax.images[0].cmap.name.startswith("Reds") and ax.images[0].norm.vmin == 0.0
    _, ax = plot.jacobian_heatmap(-np.eye(4) - 0.5)
    image = ax.images[0]
    assert image.cmap.name.startswith("Blues_r")
    assert image.norm.vmax == 0.0 and image.norm.vmin == pytest.approx(-1.5)
    assert min(image.cmap(image.norm(0.0))[:3]) > 0.93
    # both signs: the diverging scale centred at zero; a colormap passed is kept
    _, ax = plot.jacobian_heatmap(np.eye(4) - 0.5)
    assert ax.images[0].cmap.name.startswith("RdBu_r")
    _assert_centred(ax.images[0].norm)
    _, ax = plot.jacobian_heatmap(np.eye(4) + 0.5, cmap="viridis")
    assert ax.images[0].cmap.name.startswith("viridis")
    # annotations stay readable: white on the dark end, black on the light end
    _, ax = plot.jacobian_heatmap(np.array([[0.0, 1.0]]))
    assert [t.get_color() for t in ax.texts] == ["black", "white"]


def test_robust_scale_for_a_heatmap_dominated_by_a_few_entries(tmp_path):
    rng = np.random.default_rng(2)
    J = rng.normal(size=(30, 30))
    J[3, 4] = 500.0  # one entry dominates: everything else would be white
    _, ax = plot.jacobian_heatmap(J)
    assert ax.images[0].norm.vmax == pytest.approx(500.0)
    assert "robust=True" in " ".join(ax.get_title().split())  # says how to see the rest
    fig, ax = plot.jacobian_heatmap(J, robust=True)
    norm = ax.images[0].norm
    limit = np.percentile(np.abs(J), 99)
    assert norm.vmax == pytest.approx(limit) and norm.vmin == pytest.approx(-limit)
    title = " ".join(ax.get_title().split())
    assert "clipped at" in title and "9 entries beyond" in title
    assert fig.axes[-1].get_ylabel() and fig.colorbar is not None
    _saved_png(fig, tmp_path)
    _, ax = plot.jacobian_heatmap(J, robust=90)
    assert ax.images[0].norm.vmax == pytest.approx(np.percentile(np.abs(J), 90))
    # nothing dominates: no hint
    _, ax = plot.jacobian_heatmap(rng.normal(size=(30, 30)))
    assert "robust" not in ax.get_title()
    with pytest.raises(DualgpuError, match="robust must be True"):
        plot.jacobian_heatmap(J, robust=120)
    # a 1-D field: the y axis is clipped instead
    line = np.sin(np.linspace(0, 6, 100))
    line[50] = 80.0
    _, ax = plot.sensitivity_field(line, robust=True)
    assert ax.get_ylim()[1] < 10 and "robust y scale" in " ".join(ax.get_title().split())


def test_heatmap_all_zero_has_finite_limits_and_no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, ax = plot.jacobian_heatmap(np.zeros((4, 3)))
    _assert_centred(ax.images[0].norm)
    assert "all entries are zero" in ax.get_title()


def test_heatmap_nan_is_masked_warned_and_titled(tmp_path):
    J = np.arange(12.0).reshape(3, 4) - 5
    J[1, 2] = np.nan
    with pytest.warns(RuntimeWarning, match="1 NaN"):
        fig, ax = plot.jacobian_heatmap(J)
    image = ax.images[0]
    assert image.get_array().mask[1, 2] and image.get_array().mask.sum() == 1
    assert colors.same_color(image.cmap.get_bad(), plot.NAN_COLOR)
    assert "NaN" in ax.get_title() and "green" in ax.get_title()
    _assert_centred(image.norm)
    assert image.norm.vmax == pytest.approx(6.0)
    _saved_png(fig, tmp_path)


def test_heatmap_many_labels_are_thinned_and_rotated():
    labels = [f"parameter_number_{i}" for i in range(200)]
    _, ax = plot.jacobian_heatmap(np.ones((10, 200)), input_labels=labels)
    shown = [t.get_text() for t in ax.get_xticklabels()]
    assert 2 <= len(shown) <= plot.MAX_TICK_LABELS["x"]
    assert shown[0] == "parameter_number_0" and shown[-1] == "parameter_number_199"
    assert ax.get_xticklabels()[0].get_rotation() == pytest.approx(45)
    assert not ax.texts  # too large to annotate


def test_heatmap_small_sparse_matches_dense():
    dense = np.array([[0.0, 2.0, 0.0], [-1.0, 0.0, 3.0]])
    _, ax = plot.jacobian_heatmap(sp.csr_matrix(dense))
    np.testing.assert_array_equal(ax.images[0].get_array(), dense)


def test_heatmap_large_sparse_is_pooled_without_densifying(tmp_path):
    m, n = 20000, 9000
    J = sp.eye(m, n, format="csr") * -2.0
    J = J.tolil()
    J[12345, 10] = 5.0  # an isolated entry must survive pooling
    fig, ax = plot.jacobian_heatmap(J.tocsr())
    image = ax.images[0].get_array()
    assert max(image.shape) <= plot.MAX_PIXELS
    assert image.max() == 5.0 and image.min() == -2.0
    assert ax.images[0].get_extent() == [-0.5, n - 0.5, m - 0.5, -0.5]
    assert "pooled" in ax.get_title()
    _assert_centred(ax.images[0].norm)
    _saved_png(fig, tmp_path)


def test_pool_keeps_sign_of_largest_magnitude_and_nan():
    rows = np.array([0, 0, 1, 3, 3])
    cols = np.array([0, 1, 1, 2, 3])
    vals = np.array([1.0, -4.0, 2.0, np.nan, 9.0])
    grid = _pool_max_abs(rows, cols, vals, (4, 4), (2, 2))
    assert grid[0, 0] == -4.0 and np.isnan(grid[1, 1]) and grid[0, 1] == 0 and grid[1, 0] == 0


def test_heatmap_column_as_output_field():
    ny, nx = 6, 9
    column = np.linspace(-2, 1, ny * nx)
    J = np.stack([column, 3 * column], axis=1)
    fig, ax = plot.jacobian_heatmap(J, output_shape=(ny, nx), input_index=1,
                                    input_labels=["a", "diffusivity"], output_name="T")
    image = ax.images[0]
    np.testing.assert_allclose(image.get_array(), 3 * column.reshape(ny, nx))
    _assert_centred(image.norm)
    assert "∂ T / ∂ diffusivity" in ax.get_title()
    assert _colorbar_label(fig) == "∂ T / ∂ diffusivity"
    # a 1-D J is a column once output_shape names its length
    _, ax = plot.jacobian_heatmap(column, output_shape=(ny, nx))
    assert ax.images[0].get_array().shape == (ny, nx)


def test_heatmap_row_as_input_field_with_tuple_index():
    J = np.arange(2 * 12, dtype=float).reshape(2, 12) - 10
    _, ax = plot.jacobian_heatmap(J, input_shape=(3, 4), output_index=1, output_name="drag",
                                  input_name="shape")
    np.testing.assert_array_equal(ax.images[0].get_array(), J[1].reshape(3, 4))
    assert "∂ drag[1] / ∂ shape" in ax.get_title()
    _, ax = plot.jacobian_heatmap(J.T.copy(), output_shape=(3, 4), input_index=(0, 1),
                                  input_shape=(1, 2))
    np.testing.assert_array_equal(ax.images[0].get_array(), J[1].reshape(3, 4))


def test_heatmap_sparse_column_as_field():
    J = sp.random(50, 4, density=0.3, random_state=2, format="csr")
    _, ax = plot.jacobian_heatmap(J, output_shape=(5, 10), input_index=2)
    np.testing.assert_allclose(ax.images[0].get_array(), J.toarray()[:, 2].reshape(5, 10))


def test_heatmap_draws_into_given_axes():
    fig = Figure()
    FigureCanvasAgg(fig)
    left, right = fig.subplots(1, 2)
    got_fig, got_ax = plot.jacobian_heatmap(np.eye(3), ax=right)
    assert got_fig is fig and got_ax is right and right.images and not left.images


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"J": np.ones((10, 2)), "output_shape": (3, 4), "input_index": 0},
         r"expected 10 cells, got output_shape=\(3, 4\)"),
        ({"J": np.ones((4, 2)), "input_labels": ["a"]}, "expected 2, got 1"),
        ({"J": np.ones((4, 2)), "output_labels": list("abcde")}, "expected 4, got 5"),
        ({"J": np.ones((12, 3)), "output_shape": (3, 4)}, "Pass input_index=k"),
        ({"J": np.ones((12, 3)), "output_shape": (3, 4), "input_index": 3}, "from 0 to 2"),
        ({"J": np.ones((2, 3, 4))}, r"must be 2-D.*J\[:, None\]"),
        ({"J": np.ones(5)}, "must be 2-D"),
        ({"J": np.ones((2, 2)), "scale": "log"}, "scale must be one of"),
        ({"J": np.ones((2, 2)), "scale": "symlog", "linthresh": -1}, "positive number"),
        ({"J": "abc"}, "real numbers"),
        ({"J": np.ones((4, 2)), "input_index": 0}, r"needs output_shape=\(ny, nx\)"),
        ({"J": np.ones((4, 2)), "output_shape": (2, 2), "input_shape": (2,), "input_index": 0,
          "output_index": 0}, "not both"),
        ({"J": np.ones((40, 40)), "annotate": True}, r"unreadable.*J\[:20, :20\]"),
    ],
)
def test_heatmap_errors_say_what_was_expected(kwargs, match):
    J = kwargs.pop("J")
    with pytest.raises(DualgpuError, match=match):
        plot.jacobian_heatmap(J, **kwargs)
    assert issubclass(DualgpuError, ValueError)


# ---------------------------------------------------------------- sensitivity_field

def test_field_2d_is_centred_with_extent_and_labels(tmp_path):
    y, x = np.mgrid[0:20, 0:30]
    field = np.sin(x / 5.0) * np.cos(y / 4.0) + 0.3
    fig, ax = plot.sensitivity_field(field, extent=(0, 3, 0, 2), xlabel="x [m]", ylabel="y [m]",
                                     colorbar_label="∂T/∂D [K s/m²]")
    image = ax.images[0]
    _assert_centred(image.norm)
    assert image.norm.vmax == pytest.approx(np.max(np.abs(field)))
    assert image.origin == "lower" and image.get_extent() == [0, 3, 0, 2]
    assert ax.get_xlabel() == "x [m]" and ax.get_ylabel() == "y [m]"
    assert _colorbar_label(fig) == "∂T/∂D [K s/m²]"
    assert "∂T/∂D" in ax.get_title() and "20 × 30" in ax.get_title()
    _saved_png(fig, tmp_path)


def test_field_1d_is_a_line_with_zero_line(tmp_path):
    field = np.sin(np.linspace(0, 6, 50))
    fig, ax = plot.sensitivity_field(field[None, :], extent=(0.0, 6.0), xlabel="x [m]",
                                     colorbar_label="∂u/∂k")
    data_lines = [line for line in ax.lines if len(line.get_xdata()) == 50]
    assert len(data_lines) == 1
    np.testing.assert_allclose(data_lines[0].get_xdata(), np.linspace(0, 6, 50))
    assert any(np.all(np.asarray(line.get_ydata()) == 0) for line in ax.lines)  # zero line
    assert ax.get_ylabel() == "∂u/∂k" and ax.get_xlabel() == "x [m]"
    _saved_png(fig, tmp_path)
    _, ax = plot.sensitivity_field(field, scale="symlog")
    assert ax.get_yscale() == "symlog" and "sample index" in ax.get_xlabel()


def test_field_zero_and_nan():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, ax = plot.sensitivity_field(np.zeros((4, 5)))
    _assert_centred(ax.images[0].norm)
    field = np.ones((4, 5))
    field[0, 0] = np.inf
    with pytest.warns(RuntimeWarning, match="NaN or infinite"):
        _, ax = plot.sensitivity_field(field)
    assert ax.images[0].norm.vmax == pytest.approx(1.0) and "NaN/inf" in ax.get_title()


@pytest.mark.parametrize(
    ("field", "kwargs", "match"),
    [
        (np.ones((2, 3, 4)), {}, r"1-D or 2-D.*field\[k\]"),
        (np.ones(1), {}, "at least 2"),
        (np.ones((3, 4)), {"extent": (0, 1)}, r"\(xmin, xmax, ymin, ymax\)"),
        (np.ones(5), {"extent": (0, 1, 0, 1)}, r"\(xmin, xmax\)"),
    ],
)
def test_field_errors(field, kwargs, match):
    with pytest.raises(DualgpuError, match=match):
        plot.sensitivity_field(field, **kwargs)


# ---------------------------------------------------------------- parameter_ranking

def test_ranking_sorts_by_magnitude_colours_and_annotates(tmp_path):
    values = np.array([0.5, -3.0, 0.01, 2.0, -0.2])
    fig, ax = plot.parameter_ranking(NAMES, values)
    ticks = [t.get_text() for t in ax.get_yticklabels()]
    positions = ax.get_yticks()
    top_down = [name for _, name in sorted(zip(positions, ticks), reverse=True)]
    assert top_down == ["reaction_rate", "k", "diffusivity", "boundary_temperature",
                        "inflow_velocity"]
    widths = {round(bar.get_width(), 6): bar.get_facecolor() for bar in ax.patches}
    assert colors.same_color(widths[-3.0], plot.NEGATIVE_COLOR)
    assert colors.same_color(widths[2.0], plot.POSITIVE_COLOR)
    texts = [t.get_text().strip() for t in ax.texts]
    assert "-3" in texts and "0.01" in texts
    assert "sensitivity" in ax.get_xlabel() and "|sensitivity|" in ax.get_title()
    low, high = ax.get_xlim()
    assert low < -3.0 and high > 2.0
    _saved_png(fig, tmp_path)


def test_ranking_relative_modes_and_top():
    values = np.array([1.0, -2.0, 4.0])
    params = np.array([10.0, 1.0, 0.1])
    _, ax = plot.parameter_ranking("abc", values, relative=True)
    assert sorted(bar.get_width() for bar in ax.patches) == [-0.5, 0.25, 1.0]
    _, ax = plot.parameter_ranking("abc", values, relative=params)
    assert sorted(bar.get_width() for bar in ax.patches) == pytest.approx([-2.0, 0.4, 10.0])
    assert "p × ∂ output / ∂ p" in ax.get_xlabel()
    _, ax = plot.parameter_ranking("abc", values, relative=params, output_value=2.0)
    assert sorted(bar.get_width() for bar in ax.patches) == pytest.approx([-1.0, 0.2, 5.0])
    assert "elasticity" in ax.get_xlabel() and "elasticity" in ax.get_title()
    _, ax = plot.parameter_ranking([f"p{i}" for i in range(100)], np.arange(100.0))
    assert len(ax.patches) == plot.MAX_RANKED and "largest 30 of 100" in ax.get_title()
    _, ax = plot.parameter_ranking("abc", values, top=1)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["c"]


def _bar_colours(ax):
    """{bar width: face colour} of a ranking's bars."""
    return {round(bar.get_width(), 9): bar.get_facecolor() for bar in ax.patches}


def test_ranking_colour_is_the_sign_of_the_derivative_for_a_negative_output():
    # a chain hanging below its pin: mean height y = -2 m. Raising k lifts it (dy/dk > 0),
    # raising gravity lowers it (dy/dg < 0). Elasticities p/y dy/dp flip both signs.
    dy = np.array([0.5, -1.0])
    params = np.array([1.0, 1.0])
    _, ax = plot.parameter_ranking(["k", "gravity"], dy, relative=params, output_value=-2.0,
                                   output_name="y")
    widths = _bar_colours(ax)
    assert set(widths) == {-0.25, 0.5}  # the elasticities, with their flipped signs
    assert colors.same_color(widths[-0.25], plot.POSITIVE_COLOR)  # k raises y: red
    assert colors.same_color(widths[0.5], plot.NEGATIVE_COLOR)  # gravity lowers y: blue
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert legend == ["∂y/∂p > 0: y rises with p", "∂y/∂p < 0: y falls as p rises"]
    assert "sign of ∂y/∂p" in ax.get_legend().get_title().get_text()
    assert "(y < 0: elasticities have the opposite sign to p ∂y/∂p)" in ax.get_title()
    # a negative parameter value flips p * dy/dp; the colour stays with dy/dp
    _, ax = plot.parameter_ranking(["charge"], [2.0], relative=[-3.0])
    (colour,) = _bar_colours(ax).values()
    assert list(_bar_colours(ax)) == [-6.0] and colors.same_color(colour, plot.POSITIVE_COLOR)
    # no effect at all: grey, and said so
    _, ax = plot.parameter_ranking(["a", "b"], [0.0, 1.0])
    assert colors.same_color(_bar_colours(ax)[0.0], plot.ZERO_COLOR)
    assert "∂output/∂p = 0" in [t.get_text() for t in ax.get_legend().get_texts()]


def test_elasticities_of_a_near_zero_output_are_not_shown():
    dy = np.array([0.5, -1.0])
    params = np.array([2.0, 1.0])  # p dy/dp = 1 and -1
    _, ax = plot.parameter_ranking("ab", dy, relative=params, output_value=1e-3,
                                   output_name="θ̄")
    assert set(_bar_colours(ax)) == {1.0, -1.0}  # p * dy/dp instead
    title = " ".join(ax.get_title().split())  # long notes are wrapped
    assert "elasticities not shown: |θ̄| = 0.001 is below 0.01 × max |p ∂θ̄/∂p| = 0.01" in title
    assert "p × ∂ θ̄ / ∂ p" in ax.get_xlabel()
    # the same output is fine against a smaller scale of the user's, and for a larger |y|
    _, ax = plot.parameter_ranking("ab", dy, relative=params, output_value=1e-3,
                                   output_scale=0.05)
    assert set(_bar_colours(ax)) == {1000.0, -1000.0}
    _, ax = plot.parameter_ranking("ab", dy, relative=params, output_value=-0.5)
    assert set(_bar_colours(ax)) == {-2.0, 2.0} and "not shown" not in ax.get_title()
    values, reason = plot.elasticities(dy, params, 0.0)
    assert values is None and "|y| = 0 is below" in reason


def test_ranking_nan_goes_last_and_warns():
    with pytest.warns(RuntimeWarning):
        _, ax = plot.parameter_ranking("abc", [np.nan, 1.0, -2.0])
    ticks = dict(zip(ax.get_yticks(), (t.get_text() for t in ax.get_yticklabels())))
    assert ticks[min(ticks)] == "a" and len(ax.patches) == 2


@pytest.mark.parametrize(
    ("names", "values", "kwargs", "match"),
    [
        ("ab", [1.0, 2.0, 3.0], {}, "expected 3, got 2"),
        ("ab", [[1.0, 2.0]], {}, r"1-D.*g\.ravel\(\)"),
        ("ab", [1.0, 2.0], {"relative": [1.0]}, "expected 2, got 1"),
        ("ab", [1.0, 2.0], {"output_value": 3.0}, "relative=parameter_values"),
        ("ab", [1.0, 2.0], {"top": 0}, "positive"),
    ],
)
def test_ranking_errors(names, values, kwargs, match):
    with pytest.raises(DualgpuError, match=match):
        plot.parameter_ranking(names, values, **kwargs)


# ---------------------------------------------------------------- sensitivity_over_time

def test_over_time_one_line_per_parameter_with_legend(tmp_path):
    t = np.linspace(0, 5, 40)
    values = np.stack([np.sin(t), 0.1 * np.cos(t), -t], axis=1)
    fig, ax = plot.sensitivity_over_time(t, values, labels=NAMES[:3], xlabel="time [s]",
                                         ylabel="∂T/∂p [K]")
    curves = [line for line in ax.lines if len(line.get_xdata()) == t.size]
    assert len(curves) == 3
    assert [text.get_text() for text in ax.get_legend().get_texts()] == NAMES[:3]
    assert ax.get_xlabel() == "time [s]" and ax.get_ylabel() == "∂T/∂p [K]"
    _saved_png(fig, tmp_path)
    _, ax = plot.sensitivity_over_time(t, values, logy=True)
    assert ax.get_yscale() == "symlog"
    _, ax = plot.sensitivity_over_time(t, np.exp(t), logy=True)
    assert ax.get_yscale() == "log" and ax.get_legend() is None
    _, ax = plot.sensitivity_over_time(t, np.ones((40, 15)))
    assert len(ax.get_legend().get_texts()) == 15


@pytest.mark.parametrize(
    ("times", "values", "kwargs", "match"),
    [
        (np.arange(5.0), np.ones((3, 5)), {}, r"sensitivities\.T"),
        (np.arange(5.0), np.ones(4), {}, "one row per time"),
        (np.ones((5, 1)), np.ones(5), {}, "times must be 1-D"),
        (np.arange(5.0), np.ones((5, 2)), {"labels": ["a"]}, "expected 2, got 1"),
    ],
)
def test_over_time_errors(times, values, kwargs, match):
    with pytest.raises(DualgpuError, match=match):
        plot.sensitivity_over_time(times, values, **kwargs)


# ---------------------------------------------------------------- save and headless use

def test_module_examples_run():
    import doctest

    assert doctest.testmod(plot, raise_on_error=False).failed == 0


def test_save_creates_folders_appends_suffix_and_accepts_pairs(tmp_path):
    pair = plot.parameter_ranking("ab", [1.0, -1.0])
    path = plot.save(pair, tmp_path / "a" / "b" / "ranking", dpi=80)
    assert path.name == "ranking.png" and path.read_bytes()[:8] == PNG_SIGNATURE
    assert plot.save(pair[1], tmp_path / "axes.png").exists()
    with pytest.raises(DualgpuError, match="matplotlib Figure"):
        plot.save(object(), tmp_path / "x.png")


# dualgpu.plot saves a figure without pyplot or a backend (a fresh process):
# tests/architecture/test_fresh_imports.py
