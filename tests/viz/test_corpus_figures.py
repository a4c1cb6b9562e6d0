"""The Corpus page's figures (viz/corpus.py): one point per finite sentence with its index for a click, bars with
their values written, the head grid with each head's role in its cell; shapes checked."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from viz.common import TICK_FONT, text_px
from viz.corpus import bar_figure, difference_histogram, head_grid, sentence_scatter


def test_scatter_points_carry_their_sentence():
    fig = go.Figure(
        sentence_scatter(
            [0.5, 0.9, float("nan"), 0.2],
            [40.0, 80.0, 10.0, 20.0],
            ["a <b>", "b", "c", "d"],
            ["x", "y", "z", "w"],
            [False, False, False, True],
            x_title="mean probability",
            y_title="sentence chrF",
            title="chrF against mean probability",
        ).plotly()
    )
    plain, flagged = fig.data
    assert [c[0] for c in plain.customdata] == [0, 1] and list(plain.x) == [0.5, 0.9]  # the NaN point is left out
    assert [c[0] for c in flagged.customdata] == [3] and flagged.name == "flagged"
    assert "&lt;b&gt;" in plain.text[0]  # user text is never HTML
    assert fig.layout.xaxis.title.text == "mean probability" and fig.layout.yaxis.title.text == "sentence chrF"
    with pytest.raises(ValueError):
        sentence_scatter([1.0], [1.0, 2.0], ["a"], ["b"], [False], x_title="", y_title="", title="").plotly()


@pytest.mark.parametrize("ys, widest", [([12.5, 100.0], "100"), ([0.41, 0.97], "0.00"), ([float("nan")], "0.00")])
def test_scatter_leaves_room_for_its_y_tick_labels_and_title(ys, widest):
    """Its left margin holds the widest y tick label and the axis title (Plotly clips what falls outside)."""
    from viz.common import FONT, TICK_FONT, text_px

    n = len(ys)
    fig = go.Figure(
        sentence_scatter([0.5] * n, ys, ["a"] * n, ["b"] * n, [False] * n, x_title="x", y_title="y", title="").plotly()
    )
    assert fig.layout.margin.l >= text_px(widest, TICK_FONT) + FONT + 20


def test_bars_write_their_values():
    fig = go.Figure(
        bar_figure(["dropped words", "cut off"], [3, float("nan")], title="t", x_title="sentences").plotly()
    )
    assert list(fig.data[0].text) == ["3", "n/a"] and list(fig.data[0].y) == ["dropped words", "cut off"]
    with pytest.raises(ValueError):
        bar_figure(["a"], [1, 2], title="t", x_title="x").plotly()


def test_a_negative_bar_writes_its_value_beside_the_zero_line_not_over_the_labels():
    rho = [0.79, -0.57, -0.11, 0.99]
    labels = ["a", "lowest source sensitivity", "c", "d"]
    fig = go.Figure(bar_figure(labels, rho, title="t", x_title="ρ", fmt=".2f").plotly())
    assert list(fig.data[0].text) == ["0.79", "", "", "0.99"] and list(fig.data[0].customdata) == [
        "0.79",
        "-0.57",
        "-0.11",
        "0.99",
    ]
    notes = {a.y: a for a in fig.layout.annotations}
    assert set(notes) == {"lowest source sensitivity", "c"}
    assert all(a.x == 0 and a.xanchor == "left" and a.xshift > 0 for a in notes.values())
    assert notes["c"].text == "-0.11"
    lo, hi = fig.layout.xaxis.range
    assert lo == min(rho) and hi >= max(rho) + 0.25 * (max(rho) - min(rho))  # room for "0.99" right of its bar
    counts = go.Figure(bar_figure(["a", "b"], [3, 0], title="t", x_title="sentences").plotly())
    assert counts.layout.xaxis.range[0] == 0 and not counts.layout.annotations


def test_head_grid_labels_each_head_with_its_role():
    values = np.array([[0.1, 0.5], [0.2, np.nan]])
    roles = np.array([["sink", "diagonal"], ["previous token", "alignment"]])
    fig = go.Figure(
        head_grid(values, roles, title="t", value_name="loss increase", layer_name="decoder layer").plotly()
    )
    text = fig.data[0].text
    assert text[0][1] == "diagonal<br>0.50" and text[1][1] == "alignment" and text[1][0] == "previous<br>token<br>0.20"
    assert list(fig.data[0].x) == ["0", "1"] and fig.layout.xaxis.title.text == "head"
    assert list(fig.data[0].y) == ["0", "1"] and fig.layout.yaxis.title.text == "decoder layer"
    with pytest.raises(ValueError):
        head_grid(values, roles[:1], title="t", value_name="v", layer_name="l").plotly()


def test_a_four_head_grid_fits_a_phone_with_its_values_printed_instead_of_a_colour_bar():
    roles = np.array([["sharp", "previous token", "alignment", "diagonal"]] * 3)
    values = np.array([[0.01, -0.01, 0.5, 0.02]] * 3)
    fig = head_grid(
        values,
        roles,
        title="Encoder self-attention: each head's role and loss increase",
        value_name="loss increase",
        layer_name="encoder layer",
    )
    assert fig.layout["width"] <= 358  # a 390 px phone's column
    assert fig.layout["coloraxis"]["showscale"] is False
    widest = max(text_px(w, TICK_FONT) for w in ("alignment", "previous", "-0.01"))
    plot_w = fig.layout["width"] - fig.layout["margin"]["l"] - fig.layout["margin"]["r"]
    assert plot_w / 4 >= widest  # every word of a role and every value fits its cell


def test_difference_histogram_counts_each_moved_sentence_once():
    delta = [0.0, 0.0, 3.0, -12.5, 27.0, float("nan"), 0.0, -0.5]
    fig = go.Figure(
        difference_histogram(
            delta, ("run <a>", "run b"), title="Each sentence's chrF", x_title="chrF difference"
        ).plotly()
    )
    worse, better = fig.data
    assert sum(worse.y) == 2 and sum(better.y) == 2  # the unchanged (0) and the NaN are not drawn
    assert all(x < 0 for x in worse.x) and all(x > 0 for x in better.x)
    assert fig.layout.yaxis.title.text == "sentences (3 unchanged, not drawn)"
    assert fig.layout.xaxis.title.text == "chrF difference<br>(run b − run &lt;a&gt;)"  # user text is never HTML
    # the colours' key inside the plot, each word on the side its bars are drawn, above the tallest bar
    key = {a.text.split("</span> ")[1]: a for a in fig.layout.annotations}
    assert key["← worse"].x == 0 and key["better →"].x == 1 and not fig.layout.showlegend
    assert all(a.yref == "paper" and a.y == 1 and a.yanchor == "top" for a in key.values())
    assert fig.layout.yaxis.range[1] > max(max(worse.y), max(better.y))
    with pytest.raises(ValueError):
        difference_histogram([float("nan")], ("a", "b"), title="t", x_title="x").plotly()


def test_counts_are_ticked_on_whole_numbers_even_when_all_are_zero():
    """A count axis never offers 0.05 of a sentence: whole ticks from 0, and at least 0–1 when nothing was counted."""
    for values in ([0, 0, 0], [3, 1, 0], [140, 12, 0]):
        fig = bar_figure(["a", "b", "c"], values, title="t", x_title="sentences", counts=True)
        axis = fig.layout["xaxis"]
        assert axis["tick0"] == 0 and axis["dtick"] >= 1 and float(axis["dtick"]).is_integer()
        assert axis["range"][1] >= max(1, max(values))
    plain = bar_figure(["a"], [0.5], title="t", x_title="ρ", fmt=".2f").layout["xaxis"]
    assert "dtick" not in plain  # a correlation is no count
    hist = difference_histogram([1.0, 2.0, -3.0], ("greedy", "beam 5"), title="t", x_title="x").layout
    assert hist["yaxis"]["dtick"] == 1 and hist["yaxis"]["tick0"] == 0


def test_a_head_grid_never_writes_minus_zero():
    fig = head_grid(
        np.array([[-0.001, 0.5]]), np.array([["sharp", "broad"]]), title="t", value_name="v", layer_name="layer"
    )
    text = str(fig.data[0]["text"])
    assert "-0.00" not in text and "0.00" in text and "0.50" in text


def test_one_sentence_gets_an_axis_a_probability_can_take():
    fig = sentence_scatter([3.0], [0.62], ["a"], ["b"], [False], x_title="x", y_title="p", title="t")
    assert fig.layout["yaxis"]["range"] == [-0.05, 1.05] and fig.layout["xaxis"]["range"] == [2.0, 4.0]
    two = sentence_scatter([1, 2], [0.1, 0.2], ["a", "b"], ["c", "d"], [0, 1], x_title="x", y_title="p", title="t")
    assert "range" not in two.layout["yaxis"]  # Plotly's own range once the points differ
