"""Figures of activation patching and of two runs compared (viz/patching.py): shapes checked, labels true, one
colour scale for A and B, legible in Chromium."""

from __future__ import annotations

import numpy as np
import pytest

from harness.legibility import figures_violations
from viz import api as viz

SUBLAYERS = ("after self-attn", "after cross-attn", "after FFN")  # as model.core.constants.PATCH_SUBLAYERS
PROB = viz.PatchScale("p(▁fille)", 0.0, 1.0)
P = viz.PatchScale("p")
HEADS_TITLE = "logit ▁fille − logit ▁garçon with one head's output restored (every position)"


def figures(S: int, P: int, L: int = 3, H: int = 4) -> list:
    rng = np.random.default_rng(S * 100 + P)
    src = [f"▁src{i}" for i in range(S)]
    pos = [f"▁w{i} → ▁x{i}" for i in range(P)]
    a, b = rng.random((P, S)), rng.random((P + 1, S))
    return [
        viz.patch_decoder_figure(
            rng.random((L, 3, P)), pos, PROB, sublayers=SUBLAYERS, title="p(▁fille) with one decoder site restored"
        ).plotly(),
        viz.patch_encoder_figure(
            rng.random((L, S)), src, PROB, title="p(▁fille) with one encoder output restored"
        ).plotly(),
        viz.patch_heads_figure(
            rng.normal(size=(2, L, H)), viz.PatchScale("logit difference"), title=HEADS_TITLE
        ).plotly(),
        *(
            f.plotly()
            for f in viz.pair_figures(
                a,
                b,
                pos,
                src,
                [*pos, "▁y → </s>"],
                src,
                viz.PairOptions(x_title="source token", y_title="position: reads → predicts", value_name="weight"),
                title="cross-attention, layer 0",
            )
        ),
    ]


def test_decoder_rows_are_layers_and_sublayers_and_the_measured_column_is_outlined():
    fig = viz.patch_decoder_figure(
        np.arange(2 * 3 * 4).reshape(2, 3, 4), list("abcd"), P, sublayers=SUBLAYERS, title="t"
    ).plotly()
    assert list(fig.layout.yaxis.ticktext)[:3] == [
        "layer 0 after self-attn",
        "layer 0 after cross-attn",
        "layer 0 after FFN",
    ]
    z = np.asarray(fig.data[0].z)
    assert z.shape == (6, 4) and z[1, 2] == 6  # layer 0, cross-attention, position 2
    (col,) = [s for s in fig.layout.shapes if s.name == "highlight_col"]
    assert (col.x0, col.x1) == (2.5, 3.5)
    with pytest.raises(ValueError):
        viz.patch_decoder_figure(np.zeros((2, 2, 4)), list("abcd"), P, sublayers=SUBLAYERS, title="t").plotly()
    with pytest.raises(ValueError):
        viz.patch_encoder_figure(np.zeros((2, 3)), list("ab"), P, title="t").plotly()


def test_heads_rows_pair_self_and_cross_per_layer():
    v = np.zeros((2, 3, 4))
    v[1, 2, 3] = 1.0  # cross-attention, layer 2, head 3
    fig = viz.patch_heads_figure(v, P, title="t").plotly()
    rows = list(fig.layout.yaxis.ticktext)
    z = np.asarray(fig.data[0].z)
    assert rows[int(np.argmax(z.max(1)))] == "layer 2 cross-attn" and int(np.argmax(z.max(0))) == 3
    with pytest.raises(ValueError):
        viz.patch_heads_figure(np.zeros((3, 3, 4)), P, title="t").plotly()


def test_pair_shares_one_scale_and_aligns_by_position():
    a, b = np.array([[0.0, 1.0], [0.5, 0.5]]), np.array([[2.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
    fa, fb, fd = (
        f.plotly()
        for f in viz.pair_figures(
            a, b, ["x", "y"], ["s", "t"], ["x", "z", "w"], ["s", "t"], viz.PairOptions("k", "q", "w"), title="t"
        )
    )
    assert fa.layout.coloraxis.cmin == fb.layout.coloraxis.cmin == 0.0
    assert fa.layout.coloraxis.cmax == fb.layout.coloraxis.cmax == 2.0
    np.testing.assert_allclose(np.asarray(fd.data[0].z, dtype=float), a - b[:2])
    assert list(fd.layout.yaxis.ticktext) == ["0:x", "1:A: y · B: z"]  # each run named
    d, note = viz.aligned_difference(a, b)
    assert d.shape == (2, 2) and "position by position" in note and "first 2 × 2" in note
    assert viz.aligned_difference(a, a)[1] is None


@pytest.mark.parametrize("width", [860, 1450])
def test_patching_figures_are_legible_in_chromium(browser, width):
    assert (
        figures_violations(browser, [f for S, P in ((3, 1), (8, 8), (16, 16), (60, 40)) for f in figures(S, P)], width)
        == []
    )


def test_a_map_of_few_positions_asks_only_the_width_its_columns_need():
    """One position's map on a phone: drawn 600 px wide it cut every printed value to "0." in a 358 px column; it now
    asks for its margins and one column that holds its label and its values, and wraps its title to a phone."""
    from viz.common import STRETCH_MIN_W, TICK_FONT, text_px

    v = np.array([[[0.0]], [[0.81]], [[0.0]]])
    fig = viz.patch_decoder_figure(v, ["0:<s> → ▁La"], P, sublayers=SUBLAYERS[:1], title="p(▁La) restored " * 4)
    meta, margin = fig.layout["meta"], fig.layout["margin"]
    column = meta["min_width"] - margin["l"] - margin["r"]
    assert meta["min_width"] < STRETCH_MIN_W and column >= max(text_px("0:<s> → ▁La"), text_px("0.81", TICK_FONT))
    assert "narrow_title" in meta  # wrapped to a phone's column, not to 600 px
    wide = viz.patch_decoder_figure(
        np.zeros((3, 1, 40)), [f"{i}:a → b" for i in range(40)], P, sublayers=SUBLAYERS[:1], title="t"
    )
    assert "min_width" not in wide.layout.get("meta", {})  # 40 columns keep the 600 px that scrolls


def test_the_difference_names_both_runs_tokens_whole():
    """ "1:A: ▁La → ▁fille · B: ▁…" hid B's token, the point of the figure, behind the labels' 24-character cut."""
    rows_a, rows_b = ["0:<s> → ▁La", "1:▁La → ▁fille"], ["0:<s> → ▁Les", "1:▁Les → ▁filles"]
    cols = ["▁The", "▁girl"]
    *_, diff = viz.pair_figures(
        np.ones((2, 2)),
        np.zeros((2, 2)),
        rows_a,
        cols,
        rows_b,
        cols,
        viz.PairOptions(x_title="source token", y_title="position", value_name="weight"),
        title="cross-attention",
    )
    labels = list(diff.plotly().data[0].y)
    assert labels[1].endswith("B: 1:▁Les → ▁filles") and "…" not in labels[1], labels
