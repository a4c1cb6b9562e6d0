"""viz: pure Plotly figures. Shapes, labels, masking, escaping, highlighting, tables, beam tree, payload size."""

from __future__ import annotations

import copy
import json
import math
import pickle
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace as NS

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from model.core.constants import IMPOSSIBLE as PLACEHOLDER  # the decoder's placeholder score
from viz import api as viz
from viz.heatmap import CB_TICK_PX, FIG_MIN_W, bar_ticks

TREE = viz.TreeOptions(impossible=PLACEHOLDER)  # the tree of a decode: its placeholder scores left out

ROOT = Path(__file__).resolve().parents[2]
XSS = "<img src=x onerror=alert(1)>"
TOKENS = ["<s>", "▁le", "▁chat", "▁le", XSS]  # a repeated token and an HTML payload


def main_heatmaps(fig: go.Figure) -> list[go.Heatmap]:
    return [t for t in fig.data if t.type == "heatmap" and t.name != "masked"]


def overlays(fig: go.Figure) -> list[go.Heatmap]:
    return [t for t in fig.data if t.type == "heatmap" and t.name == "masked"]


def causal_scores(T: int, seed: int = 0) -> np.ndarray:
    s = np.random.default_rng(seed).normal(size=(T, T))
    s[np.triu_indices(T, 1)] = -np.inf
    return s


def softmax_rows(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


# --- labels and escaping ---------------------------------------------------------------------------


def test_safe_label_escapes_html():
    out = viz.safe_label(XSS)
    assert "<" not in out and ">" not in out
    assert out == "&lt;img src=x onerror=alert(1)&gt;"
    assert viz.safe_label("a & b") == "a &amp; b"
    assert viz.safe_label("▁le") == "▁le"


def test_unique_labels_keeps_repeated_tokens_distinct():
    labels = viz.unique_labels(TOKENS)
    assert len(set(labels)) == len(TOKENS)
    assert labels[1] == "1:▁le" and labels[3] == "3:▁le"
    assert all("<" not in s for s in labels)
    assert viz.unique_labels(["a", "b"], index=False) == ["a", "b"]
    assert viz.unique_labels(["a", "a"], index=False) == ["0:a", "1:a"]  # falls back to the prefix


def test_no_raw_html_reaches_the_figure():
    fig = viz.attention_figure(np.full((5, 5), 0.2), TOKENS, TOKENS, title=f"title {XSS}").plotly()
    payload = fig.to_json()
    assert "<img" not in payload and "\\u003cimg" not in payload
    assert fig.layout.title.text == f"title {viz.safe_label(XSS)}"


# --- the shared heatmap helper ---------------------------------------------------------------------


def test_heatmap_z_axes_ticks_and_hover():
    v = np.arange(15, dtype=float).reshape(5, 3) / 7
    fig = viz.heatmap(
        v,
        TOKENS,
        ["k0", "k1", "k2"],
        viz.HeatmapSpec(x_title="key token", y_title="query token", value_name="weight"),
        title="t",
    ).plotly()
    (hm,) = main_heatmaps(fig)
    z = np.asarray(hm.z)
    assert z.shape == (5, 3) and z.dtype == np.float32
    np.testing.assert_allclose(z, v, rtol=1e-3)
    assert fig.layout.xaxis.title.text == "key token" and fig.layout.yaxis.title.text == "query token"
    assert list(hm.y) == viz.unique_labels(TOKENS) and list(hm.x) == viz.unique_labels(["k0", "k1", "k2"])
    assert list(fig.layout.yaxis.ticktext) == viz.unique_labels(TOKENS)
    assert fig.layout.xaxis.type == "category" and fig.layout.yaxis.type == "category"
    assert fig.layout.yaxis.range[0] > fig.layout.yaxis.range[1]  # reversed: first token on top
    assert "query token: %{y}" in hm.hovertemplate and "key token: %{x}" in hm.hovertemplate
    assert "weight: %{z" in hm.hovertemplate
    assert fig.layout.coloraxis.colorbar.title.text == "weight" and hm.coloraxis == "coloraxis"
    assert not overlays(fig)  # nothing masked, no overlay
    assert "histogram2dcontour" not in fig.to_json()  # the bare "none" template, not Plotly's default one


def test_heatmap_masks_neg_inf_and_nan_with_an_exact_overlay():
    v = causal_scores(6)
    v[5, 0] = np.nan
    fig = viz.heatmap(
        v, list("abcdef"), list("abcdef"), viz.HeatmapSpec(x_title="k", y_title="q", zmid=0.0), title="t"
    ).plotly()
    (hm,) = main_heatmaps(fig)
    (ov,) = overlays(fig)
    z, oz = np.asarray(hm.z, dtype=float), np.asarray(ov.z, dtype=float)
    masked = ~np.isfinite(v)
    assert np.array_equal(np.isnan(z), masked)
    assert np.array_equal(~np.isnan(oz), masked)  # the overlay covers exactly the masked cells
    assert ov.showscale is False and ov.hoverongaps is False and hm.hoverongaps is False
    assert "masked (future)" in ov.hovertemplate
    assert fig.layout.coloraxis.cmid == 0.0
    fig2 = viz.heatmap(
        v,
        list("abcdef"),
        list("abcdef"),
        viz.HeatmapSpec(x_title="k", y_title="q", masked_hover="padding <pad>"),
        title="t",
    ).plotly()
    assert "padding &lt;pad&gt;" in overlays(fig2)[0].hovertemplate


def test_heatmap_rounds_to_significant_digits():
    v = np.array([[1.23456789, -0.000123456789], [98765.4321, 0.0]])
    z = np.asarray(main_heatmaps(viz.heatmap(v, ["a", "b"], ["c", "d"], title="").plotly())[0].z)
    np.testing.assert_allclose(z, np.array([[1.235, -0.0001235], [98770.0, 0.0]], dtype=np.float32), rtol=1e-6)
    z2 = np.asarray(
        main_heatmaps(viz.heatmap(v, ["a", "b"], ["c", "d"], viz.HeatmapSpec(decimals=2), title="").plotly())[0].z
    )
    np.testing.assert_allclose(z2[0, 0], 1.2, rtol=1e-6)


def test_heatmap_highlight_row_rectangle():
    fig = viz.heatmap(np.zeros((4, 3)), list("abcd"), list("xyz"), title="", marks=viz.Marks(highlight_row=-1)).plotly()
    (shape,) = fig.layout.shapes
    assert shape.type == "rect" and (shape.y0, shape.y1) == (2.5, 3.5) and (shape.x0, shape.x1) == (-0.5, 2.5)
    assert shape.fillcolor == "rgba(0,0,0,0)" and shape.line.width > 0
    assert not viz.heatmap(np.zeros((4, 3)), list("abcd"), list("xyz"), title="").plotly().layout.shapes
    with pytest.raises(ValueError, match="highlight_row"):
        viz.heatmap(np.zeros((4, 3)), list("abcd"), list("xyz"), title="", marks=viz.Marks(highlight_row=4)).plotly()


def test_heatmap_payload_is_small():
    T = 40
    toks = [f"▁tok{i % 7}" for i in range(T)]  # many duplicates
    fig = viz.attention_figure(softmax_rows(causal_scores(T)), toks, toks, title="40 x 40", highlight_row=-1).plotly()
    payload = fig.to_json()
    assert len(payload) < 60_000, len(payload)
    fig = viz.attention_figure(
        causal_scores(T), toks, toks, viz.AttentionOptions(kind="masked_scores"), title="40 x 40 scores"
    ).plotly()
    assert len(fig.to_json()) < 60_000
    json.loads(payload)  # valid JSON (no bare NaN / Infinity tokens)


def test_shared_helper_no_cell_text_on_large_heatmaps():
    fig = viz.heatmap(
        np.ones((20, 20)), list(range(20)), list(range(20)), viz.HeatmapSpec(show_values=True), title=""
    ).plotly()
    assert main_heatmaps(fig)[0].texttemplate is None
    small = viz.heatmap(np.ones((3, 3)), list("abc"), list("abc"), viz.HeatmapSpec(show_values=True), title="").plotly()
    assert main_heatmaps(small)[0].texttemplate


# --- shape validation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda: viz.heatmap(np.zeros((3, 4)), list("abc"), list("abc"), title="").plotly(),
        lambda: viz.heatmap(np.zeros((3, 4)), list("ab"), list("abcd"), title="").plotly(),
        lambda: viz.heatmap(np.zeros(3), list("abc"), ["x"], title="").plotly(),
        lambda: viz.matrix_figure(np.zeros((4, 8)), list("abc"), title="").plotly(),
        lambda: viz.attention_figure(np.zeros((3, 3)), list("abc"), list("ab"), title="").plotly(),
        lambda: viz.attention_figure(
            np.zeros((3, 3)), list("abc"), list("abc"), viz.AttentionOptions(kind="nope"), title=""
        ).plotly(),
        lambda: viz.heads_grid(np.zeros((2, 3, 3)), list("abc"), list("abcd"), title="").plotly(),
        lambda: viz.heads_grid(np.zeros((3, 3)), list("abc"), list("abc"), title="").plotly(),
        lambda: viz.alignment_figure(np.zeros((3, 5)), list("abc"), list("abcd"), title="").plotly(),
        lambda: viz.ffn_figure(np.zeros((2, 16)), list("abc"), title="").plotly(),
        lambda: viz.addnorm_figure(np.zeros((3, 4)), np.zeros(3), np.zeros(3), np.zeros((3, 5)), list("abc")).plotly(),
        lambda: viz.addnorm_figure(np.zeros((3, 4)), np.zeros(2), np.zeros(3), np.zeros((3, 4)), list("abc")).plotly(),
        lambda: viz.addnorm_figure(np.zeros((3, 4)), np.zeros(3), np.zeros(3), np.zeros((3, 4)), list("ab")).plotly(),
        lambda: viz.positional_curves(np.zeros((5, 4)), [4], title="").plotly(),
        lambda: viz.positional_curves(np.zeros((5, 4)), [0], title="", tokens=list("abc")).plotly(),
        lambda: viz.topk_figure(["a", "b"], [0.5], 0, title="").plotly(),
        lambda: viz.topk_figure(["a", "b"], [0.5, 0.2], 2, title="").plotly(),
        lambda: viz.kv_cache_figure(3, 1, list("abc"), title="").plotly(),
        lambda: viz.kv_cache_figure(-1, 4, list("abc"), title="").plotly(),
        lambda: viz.loss_table(list("abc"), list("ab")),
        lambda: viz.loss_table(list("abc"), list("abc"), label_probs=[0.5, 0.5]),
    ],
)
def test_shape_mismatch_raises_value_error(call):
    with pytest.raises(ValueError):
        call()


# --- figures ---------------------------------------------------------------------------------------


def test_matrix_figure_rows_are_tokens_columns_are_dims():
    v = np.random.default_rng(1).normal(size=(5, 12))
    fig = viz.matrix_figure(v, TOKENS, title="embeddings", highlight_row=2).plotly()
    (hm,) = main_heatmaps(fig)
    assert np.asarray(hm.z).shape == (5, 12)
    assert list(hm.y) == viz.unique_labels(TOKENS) and list(hm.x) == list(range(12))  # true dimension numbers
    assert fig.layout.xaxis.type == "linear" and "%{x}" in hm.hovertemplate
    assert fig.layout.xaxis.title.text == "dimension" and fig.layout.coloraxis.cmid == 0.0
    assert len(fig.layout.shapes) == 1 and fig.layout.shapes[0].name == "highlight"
    assert fig.layout.meta["cells"] == "rows" and fig.layout.width is None  # fills its container
    assert 150 <= fig.layout.height <= 900


@pytest.mark.parametrize("kind", ["weights", "scores", "mask", "masked_scores"])
def test_attention_kinds(kind):
    T = 5
    scores = causal_scores(T)
    values = {
        "weights": softmax_rows(scores),
        "scores": np.nan_to_num(scores, neginf=0.3),
        "mask": np.where(np.isfinite(scores), 0.0, -np.inf),
        "masked_scores": scores,
    }[kind]
    fig = viz.attention_figure(
        values, TOKENS, TOKENS, viz.AttentionOptions(kind=kind), title=kind, highlight_row=-1
    ).plotly()
    (hm,) = main_heatmaps(fig)
    z = np.asarray(hm.z, dtype=float)
    assert z.shape == (T, T)
    assert fig.layout.xaxis.title.text == "key token" and fig.layout.yaxis.title.text == "query token"
    ca = fig.layout.coloraxis
    if kind == "weights":
        assert ca.cmin == 0.0 and ca.cmax == pytest.approx(values.max()) and not overlays(fig)
    elif kind == "scores":
        assert ca.cmid == 0.0 and not overlays(fig)
    else:
        future = np.triu(np.ones((T, T), dtype=bool), 1)
        assert np.array_equal(np.isnan(z), future)
        (ov,) = overlays(fig)
        assert np.array_equal(~np.isnan(np.asarray(ov.z, dtype=float)), future)
        assert "masked (future)" in ov.hovertemplate
        if kind == "mask":
            assert np.all(z[~future] == 0)


def test_heads_grid_shared_scale_and_one_subplot_per_head():
    H, T = 6, 5
    w = np.stack([softmax_rows(causal_scores(T, seed=h)) for h in range(H)])
    fig = viz.heads_grid(w, TOKENS, TOKENS, title="heads", highlight_row=-1).plotly()
    hms = main_heatmaps(fig)
    assert len(hms) == H and len(overlays(fig)) == 0
    assert {t.coloraxis for t in hms} == {"coloraxis"}  # one shared colour scale
    assert (fig.layout.coloraxis.cmin, fig.layout.coloraxis.cmax) == (0.0, 1.0)
    assert len({(t.xaxis, t.yaxis) for t in hms}) == H
    for h, t in enumerate(hms):
        np.testing.assert_allclose(np.asarray(t.z), w[h], rtol=1e-3, atol=1e-6)
    assert [a.text for a in fig.layout.annotations] == [f"head {h}" for h in range(H)]
    assert len(fig.layout.shapes) == H


def test_heads_grid_masked_scores_overlay_per_head():
    w = np.stack([causal_scores(4, seed=h) for h in range(2)])
    fig = viz.heads_grid(w, list("abcd"), list("abcd"), viz.AttentionOptions(kind="masked_scores"), title="").plotly()
    assert len(main_heatmaps(fig)) == 2 and len(overlays(fig)) == 2
    assert fig.layout.coloraxis.cmin == -fig.layout.coloraxis.cmax  # symmetric shared range


def test_alignment_figure():
    w = softmax_rows(np.random.default_rng(2).normal(size=(5, 3)))
    fig = viz.alignment_figure(w, TOKENS, ["▁the", "▁cat", "</s>"], title="cross", highlight_row=4).plotly()
    (hm,) = main_heatmaps(fig)
    assert np.asarray(hm.z).shape == (5, 3)
    assert fig.layout.xaxis.title.text == "source token (key)"
    assert fig.layout.yaxis.title.text == "target token (query)"
    assert list(fig.layout.xaxis.ticktext) == viz.unique_labels(["▁the", "▁cat", "</s>"])
    assert fig.layout.shapes[0].y0 == 3.5


def test_positional_curves():
    T, D = 20, 8
    pos = np.arange(T)[:, None]
    div = np.exp(np.arange(0, D, 2) * -(np.log(10000.0) / D))
    pe = np.zeros((T, D))
    pe[:, 0::2], pe[:, 1::2] = np.sin(pos * div), np.cos(pos * div)
    fig = viz.positional_curves(pe, [0, 1, 5], title="PE").plotly()
    assert [t.name for t in fig.data] == ["dim 0 (sin)", "dim 1 (cos)", "dim 5 (cos)"]
    for t, d in zip(fig.data, [0, 1, 5]):
        np.testing.assert_allclose(np.asarray(t.y), pe[:, d], atol=1e-4)
        assert list(np.asarray(t.x)) == list(range(T))
    assert fig.layout.xaxis.title.text == "position"
    halves = np.concatenate([pe[:, 0::2], pe[:, 1::2]], axis=1)  # Marian: sin | cos halves
    names = [t.name for t in viz.positional_curves(halves, [1, 4], title="").plotly().data]
    assert names == ["dim 1 (sin)", "dim 4 (cos)"]
    assert [t.name for t in viz.positional_curves(halves, [1, 4], title="", layout="interleaved").plotly().data] == [
        "dim 1 (cos)",
        "dim 4 (sin)",
    ]
    assert [t.name for t in viz.positional_curves(pe[3:], [0], title="").plotly().data] == [
        "dim 0"
    ]  # not from position 0


def test_a_figure_that_squeezes_to_a_phone_wraps_its_title_to_the_phone_s_column():
    """Bars and curves squeeze to a phone's column (they keep no width of their own): each line of their title fits
    it (Plotly neither wraps a title nor shows what is wider than the figure), and the plot starts below; a short
    title keeps its line beside the toolbar."""
    from viz.common import MIN_WIDTH, PAD, PHONE_WIDTH, TITLE_FONT, text_px
    from viz.corpus import bar_figure, sentence_scatter

    long = "the dashed line marks position 12, and the reference loss change per position without layer 0 head 3"
    figures = {
        "curves": lambda t: viz.positional_curves(np.zeros((20, 8)), [0, 1], title=t, mark_position=12).plotly(),
        "top-k": lambda t: viz.topk_figure(["a", "b"], [0.6, 0.4], 0, title=t).plotly(),
        "loss": lambda t: viz.loss_delta_figure(["a", "b"], np.array([0.1, -0.2]), title=t).plotly(),
        "bars": lambda t: bar_figure(["a", "b"], [1, 2], title=t, x_title="sentences").plotly(),
        "scatter": lambda t: sentence_scatter(
            [1.0, 2.0], [2.0, 1.0], ["s", "t"], ["u", "v"], [False, True], x_title="x", y_title="y", title=t
        ).plotly(),
    }
    for name, build in figures.items():
        fig = build(long)
        wide = fig.layout.title.text.split("<br>")  # a desktop's: the lines its width needs, no more
        assert " ".join(wide) == long and len(wide) == 1 + (text_px(long, TITLE_FONT) > MIN_WIDTH - 2 * PAD - 10)
        narrow = fig.layout.meta["narrow_title"]  # a phone's: wrapped to its column, taller by its extra lines
        lines = narrow["title"]["text"].split("<br>")
        assert " ".join(lines) == long and len(lines) > len(wide), name
        assert max(text_px(line, TITLE_FONT) for line in lines) <= PHONE_WIDTH - 2 * PAD, (name, lines)
        assert fig.layout.margin.t + narrow["grow"] >= len(lines) * TITLE_FONT, name  # the plot below the lines
        assert build("Top 10 next tokens").layout.title.text == "Top 10 next tokens", name
        title = "Top 10 next tokens at position 10"  # fits a desktop's line beside the toolbar: one line there
        assert build(title).layout.title.text == title, name


def test_addnorm_figure():
    rng = np.random.default_rng(3)
    res = rng.normal(size=(5, 8))
    mean, std = res.mean(-1), res.std(-1)
    out = (res - mean[:, None]) / std[:, None]
    fig = viz.addnorm_figure(res, mean, std, out, TOKENS, highlight_row=1).plotly()
    hms = main_heatmaps(fig)
    assert [np.asarray(t.z).shape for t in hms] == [(5, 8), (5, 8)]
    assert [t.coloraxis for t in hms] == ["coloraxis", "coloraxis2"]  # two colour bars
    lines = [t for t in fig.data if t.type == "scatter"]
    assert [t.name for t in lines] == ["mean", "std"]
    np.testing.assert_allclose(np.asarray(lines[0].x), mean, rtol=1e-3, atol=1e-6)
    assert list(lines[1].y) == viz.unique_labels(TOKENS)
    assert len(fig.layout.shapes) == 3  # the row is outlined in all three panels
    legend = [a.text for a in fig.layout.annotations if "● mean" in a.text and "◆ std" in a.text]
    assert legend and legend[0].endswith("per position")  # the legend is the panel's title, above it
    assert fig.layout.meta["min_width"] <= 340  # a phone draws it in its column, the std line in view
    viz.addnorm_figure(res, mean[:, None], std[:, None], out, TOKENS).plotly()  # (T, 1) statistics are accepted


def test_ffn_sparsity_relu_and_gelu_like():
    x = np.array([[-2.0, -0.5, 0.0, 0.5], [1.0, -1e-9, 2.0, -3.0]])
    relu = np.maximum(x, 0.0)
    s = viz.ffn_sparsity(relu)
    assert s["zero"] == pytest.approx(5 / 8) and s["negative"] == 0.0 and s["near_zero"] == pytest.approx(5 / 8)
    g = viz.ffn_sparsity(x)
    assert g["zero"] == pytest.approx(1 / 8) and g["near_zero"] == pytest.approx(2 / 8)
    assert g["negative"] == pytest.approx(4 / 8) and g["count"] == 8
    fig = viz.ffn_figure(relu, ["a", "b"], title="FFN").plotly()
    assert np.asarray(main_heatmaps(fig)[0].z).shape == (2, 4)
    assert "62.5%" in fig.layout.title.text and fig.layout.xaxis.title.text == "hidden unit"


def test_kv_cache_figure():
    fig = viz.kv_cache_figure(4, 1, TOKENS, title="cache").plotly()
    (hm,) = main_heatmaps(fig)
    z = np.asarray(hm.z, dtype=float)
    assert z.shape == (3, 5) and list(hm.y) == ["Q", "K", "V"]
    np.testing.assert_array_equal(z[1:], [[0, 0, 0, 0, 1]] * 2)  # K, V: 4 cached rows, 1 new
    assert np.isnan(z[0, :4]).all() and z[0, 4] == 1  # a query only for the new position
    assert "reused from the cache" in hm.text[1][0] and "new" in hm.text[1][4]
    assert list(fig.layout.xaxis.ticktext) == viz.unique_labels(TOKENS)


def test_topk_figure_highlights_the_chosen_token():
    toks, probs = ["▁le", "▁la", XSS, "▁le"], [0.5, 0.2, 0.1, 0.05]
    fig = viz.topk_figure(toks, probs, 2, title="next").plotly()
    (bar,) = fig.data
    assert bar.type == "bar" and bar.orientation == "h"
    colors = list(bar.marker.color)
    assert colors[2] != colors[0] and len({c for i, c in enumerate(colors) if i != 2}) == 1
    assert list(bar.marker.line.width)[2] > 0 and list(bar.marker.line.width)[0] == 0
    np.testing.assert_allclose(np.asarray(bar.x), probs, rtol=1e-4)
    assert len(set(bar.y)) == 4 and all("<" not in y for y in bar.y)  # duplicates kept apart, escaped
    none = viz.topk_figure(toks, probs, None, title="").plotly()
    assert len(set(none.data[0].marker.color)) == 1


def test_entropy_in_nats():
    assert viz.entropy([0.25] * 4) == pytest.approx(math.log(4))
    assert viz.entropy(np.array([1.0, 0.0, 0.0])) == 0.0
    assert viz.entropy([0.5, 0.5]) == pytest.approx(math.log(2))
    with pytest.raises(ValueError):
        viz.entropy([0.5, -0.1])


def test_loss_table_columns():
    inp, lab = ["<s>", "▁le", "▁chat"], ["▁le", "▁chat", "</s>"]
    df = viz.loss_table(inp, lab)
    assert isinstance(df, pd.DataFrame)
    assert list(df.columns) == ["position", "decoder input", "expected output (label)"]
    assert list(df["decoder input"]) == inp and list(df["expected output (label)"]) == lab
    df = viz.loss_table(inp, lab, label_probs=[0.5, 0.25, 1.0])
    assert list(df.columns) == ["position", "decoder input", "expected output (label)", "p(label)", "loss"]
    np.testing.assert_allclose(df["loss"], [math.log(2), math.log(4), 0.0], atol=1e-12)
    df = viz.loss_table(inp, lab, losses=[math.log(2), 0.0, 1.0])
    np.testing.assert_allclose(df["p(label)"], [0.5, 1.0, math.exp(-1)])
    assert list(df["position"]) == [0, 1, 2]


# --- beam search -----------------------------------------------------------------------------------


def fake_beam_steps() -> list[NS]:
    """Beam 2: step 0 from the start; step 1 from rows (10,) and (11,), one hypothesis finishes (token 2 = </s>)."""

    def H(ids, lp, parent=-1):
        return NS(ids=tuple(ids), logprob=lp, score=lp / max(len(ids), 1), parent=parent, finished=False)

    def E(parent, tok, tlp, cum, status):
        return NS(parent=parent, token=tok, token_logprob=tlp, cum_logprob=cum, status=status)

    step0 = NS(
        position=0,
        live=[H((), 0.0), H((), -1e9)],
        finished=[],
        expansions=[E(0, 10, -0.5, -0.5, "kept"), E(0, 11, -1.0, -1.0, "kept"), E(0, 12, -2.0, -2.0, "pruned")],
    )
    step1 = NS(
        position=1,
        live=[H((10,), -0.5, 0), H((11,), -1.0, 0)],
        finished=[],
        expansions=[
            E(0, 2, -0.1, -0.6, "finished"),
            E(0, 13, -0.7, -1.2, "kept"),
            E(1, 14, -0.1, -1.1, "kept"),
            E(1, 15, -3.0, -4.0, "pruned"),
        ],
    )
    step2 = NS(
        position=2,
        live=[H((11, 14), -1.1, 1), H((10, 13), -1.2, 0)],
        finished=[],
        expansions=[E(0, 2, -0.2, -1.3, "finished"), E(1, 2, -0.3, -1.5, "pruned")],
    )
    return [step0, step1, step2]


def tree_parts(fig: go.Figure):
    nodes = {t.meta["status"]: t for t in fig.data if t.type == "scatter" and t.meta and "status" in t.meta}
    edges = [t for t in fig.data if t.type == "scatter" and t.mode == "lines"]
    points = {(s, x, y) for s, t in nodes.items() for x, y in zip(t.x, t.y)}
    segs = []
    for t in edges:
        xs, ys = list(t.x), list(t.y)
        for i in range(0, len(xs), 3):
            segs.append(((xs[i], ys[i]), (xs[i + 1], ys[i + 1])))
    return nodes, points, segs


def check_tree(fig: go.Figure, steps) -> None:
    nodes, points, segs = tree_parts(fig)
    n_exp = sum(len(s.expansions) for s in steps)
    assert sum(len(t.x) for s, t in nodes.items() if s != "start") == n_exp  # one node per expansion
    assert len(segs) == n_exp  # one edge into each expansion
    xy = {(x, y) for _, x, y in points}
    assert len(xy) == len(points)  # no two nodes drawn on top of each other
    for a, b in segs:
        assert a in xy and b in xy  # every edge joins two drawn nodes
        assert b[0] == a[0] + 1  # parent one step to the left
    symbols = {s: t.marker.symbol for s, t in nodes.items()}
    assert len(set(symbols.values())) == len(symbols)  # statuses are told apart by symbol
    assert fig.layout.coloraxis.colorbar.title.text  # colour = cumulative log-prob, with a colour bar


def test_beam_tree_figure_structure():
    steps = fake_beam_steps()
    fig = viz.beam_tree_figure(steps, TREE, token_text=lambda i: f"<t{i}>", title="beam").plotly()
    check_tree(fig, steps)
    nodes, points, segs = tree_parts(fig)
    assert set(nodes) == {"start", "kept", "pruned", "finished"}
    assert len(nodes["start"].x) == 1 and len(nodes["finished"].x) == 2
    pos = {}
    for s, t in nodes.items():  # node position by hover ("hypothesis: ...")
        for x, y, h in zip(t.x, t.y, t.hovertext):
            pos[(s, h.split("hypothesis: ")[1].split("<br>")[0] if "hypothesis" in h else "start")] = (x, y)
    ok = {(a, b) for a, b in segs}
    # step 1 expansions of live row 1 (= hypothesis <t11>) hang under the kept node <t11> of step 0
    assert (pos[("kept", "&lt;t11&gt;")], pos[("kept", "&lt;t11&gt; &lt;t14&gt;")]) in ok
    # step 2 row 0 is (11, 14): its finished child hangs under the kept node "<t11> <t14>"
    assert (pos[("kept", "&lt;t11&gt; &lt;t14&gt;")], pos[("finished", "&lt;t11&gt; &lt;t14&gt; &lt;t2&gt;")]) in ok
    assert (pos[("kept", "&lt;t10&gt; &lt;t13&gt;")], pos[("pruned", "&lt;t10&gt; &lt;t13&gt; &lt;t2&gt;")]) in ok
    assert "<t" not in fig.to_json()
    colors = {float(c) for t in fig.data if t.meta and t.meta.get("status") == "kept" for c in t.marker.color}
    assert colors == {-0.5, -1.0, -1.2, -1.1}


def test_beam_tree_from_real_beam_search(tiny_model, tiny_tokenizer):
    from model.decode.decoding import DecodeOptions, decode

    opts = DecodeOptions(strategy="beam", beam=3, max_len=6, record=True)
    res = decode(tiny_model, tiny_tokenizer.encode("I like pizza."), opts)
    fig = viz.beam_tree_figure(res.beam_steps, TREE, token_text=tiny_tokenizer.id_to_token, title="beam").plotly()
    check_tree(fig, res.beam_steps)
    table = viz.beam_table(res.beam_steps[-1].live, tiny_tokenizer.tokens, impossible=PLACEHOLDER)
    assert 1 <= len(table) <= 3


def test_beam_tree_numbers_positions_as_the_step_view_and_draws_its_paths():
    """x = the position that predicted a node's token (the start left of 0); at most 3 pruned candidates per node
    (the rest counted in its hover); every kept and finished node in view labelled; the paths drawn through the
    nodes of their prefixes."""
    steps = synthetic_beam(8, 20, seed=3)
    winner = next(e for e in steps[-1].expansions if e.status != "pruned")
    path = steps[-1].live[winner.parent].ids + (winner.token,)
    fig = viz.beam_tree_figure(
        steps, TREE, token_text=lambda i: f"t{i}", title="beam", paths={"the translation shown": path}
    ).plotly()
    nodes, points, segs = tree_parts(fig)
    assert list(nodes["start"].x) == [-1]
    xa = fig.layout.xaxis
    assert dict(zip(xa.tickvals, xa.ticktext))[-1] == "start" and all(
        str(v) == t for v, t in zip(xa.tickvals, xa.ticktext) if v >= 0
    )
    for t in range(20):  # the token predicted at position t sits at x = t
        tokens = {
            int(h.split("token: t")[1].split("<br>")[0])
            for s_, tr in nodes.items()
            if s_ != "start"
            for x, h in zip(tr.x, tr.hovertext)
            if x == t
        }
        drawn = {e.token for e in steps[t].expansions}
        assert tokens <= drawn and {e.token for e in steps[t].expansions if e.status != "pruned"} <= tokens
        parents = [
            h.split("hypothesis: ")[1].rsplit(" ", 1)[0]
            for x, h in zip(nodes["pruned"].x, nodes["pruned"].hovertext)
            if x == t
        ]
        assert all(parents.count(p) <= 3 for p in parents)
    assert any("more pruned candidates not drawn" in h for tr in nodes.values() for h in tr.hovertext)
    x0, x1 = fig.layout.xaxis.range
    assert x1 >= 19 and x0 > -1.5  # 20 positions do not fit at 860 px: the latest are in view
    assert all(abs(x - x0) >= 0.5 for tr in nodes.values() for x in tr.x)  # no marker cut in half at the edge
    for s_ in ("kept", "finished"):
        for x, text in zip(nodes[s_].x, nodes[s_].text):
            assert bool(text) == (x >= x0 + 0.25), (s_, x, text)
    line = next(t for t in fig.data if t.meta and t.meta.get("path"))
    assert line.name == "the translation shown" and line.showlegend and len(line.x) == len(path) + 1
    assert list(line.x) == list(range(-1, len(path)))


def test_beam_table():
    live = fake_beam_steps()[0].live + [
        NS(ids=(10, 2), logprob=-0.6, score=-0.3, parent=0, finished=True),
        NS(ids=(11,), logprob=-1.0, score=-1.0, parent=0, finished=False),
    ]
    names = {10: "▁le", 11: "▁la", 2: "</s>"}
    df = viz.beam_table(live, lambda ids: [names[i] for i in ids], impossible=PLACEHOLDER)
    assert list(df.columns) == ["rank", "row", "tokens", "cumulative log-prob", "length-normalized score", "finished"]
    assert list(df["rank"]) == [1, 2, 3] and list(df["row"]) == [0, 2, 3]  # the -1e9 placeholder is dropped
    assert len(viz.beam_table(live, lambda ids: [names[i] for i in ids])) == 4  # kept without a threshold
    assert list(df["length-normalized score"]) == [0.0, -0.3, -1.0]
    assert df.iloc[1]["tokens"] == "▁le </s>" and bool(df.iloc[1]["finished"])


# --- house rules -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_viz_imports_neither_torch_nor_streamlit():
    code = "import sys, viz.api; bad = {'torch', 'streamlit'} & set(sys.modules); assert not bad, bad"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
    for path in (ROOT / "viz").glob("*.py"):
        text = path.read_text()
        assert "import torch" not in text and "import streamlit" not in text and "from model" not in text, path


# --- legibility: sizes from the layout ------------------------------------------------------------


def plot_box(fig: go.Figure, xa: str = "xaxis", ya: str = "yaxis") -> tuple[float, float]:
    """Pixel width and height of one subplot, from the figure size, margins and axis domains."""
    lay = fig.layout
    assert lay.width is not None and lay.height is not None
    w = lay.width - lay.margin.l - lay.margin.r
    h = lay.height - lay.margin.t - lay.margin.b
    dx, dy = lay[xa].domain or (0, 1), lay[ya].domain or (0, 1)
    return w * (dx[1] - dx[0]), h * (dy[1] - dy[0])


def span(axis) -> tuple[float, float]:
    lo, hi = sorted(axis.range)
    return lo, hi


def square_cells(fig: go.Figure, xa: str = "xaxis", ya: str = "yaxis") -> tuple[float, float, int, int]:
    """(cell width px, cell height px, visible columns, visible rows) of a square-cell heatmap subplot."""
    pw, ph = plot_box(fig, xa, ya)
    (x0, x1), (y0, y1) = span(fig.layout[xa]), span(fig.layout[ya])
    return pw / (x1 - x0), ph / (y1 - y0), round(x1 - x0), round(y1 - y0)


def check_square(fig: go.Figure, n_rows: int, n_cols: int, hl: int | None, xa: str = "xaxis", ya: str = "yaxis"):
    assert fig.layout.meta["cells"] == "square"
    cw, ch, vx, vy = square_cells(fig, xa, ya)
    assert abs(cw - ch) < 0.01, (cw, ch)
    assert vx <= n_cols and vy <= n_rows
    if max(n_rows, n_cols) <= 20:
        assert cw >= 22 - 1e-6 and (vx, vy) == (n_cols, n_rows), (cw, vx, vy)  # everything, at >= 22 px
    else:
        assert cw >= 10, cw
        if (vx, vy) != (n_cols, n_rows):
            assert vx > 20 or vy > 20 or cw >= 22
    if hl is not None:
        lo, hi = span(fig.layout[ya])
        assert lo < hl < hi  # the highlighted row is in the initial window
    pw, _ = plot_box(fig)
    assert fig.layout.width <= 860 or pw <= 820


@pytest.mark.parametrize("T", [*range(1, 21), 21, 25, 33, 40, 60, 64, 90, 127])
@pytest.mark.parametrize("kind", ["weights", "scores", "mask", "masked_scores"])
def test_attention_cells_square_and_big_enough(T, kind):
    s = causal_scores(T)
    values = softmax_rows(s) if kind == "weights" else s
    toks = [f"▁tok{i}" for i in range(T)]
    for hl in (-1, 0, T // 2):
        fig = viz.attention_figure(
            values, toks, toks, viz.AttentionOptions(kind=kind), title=f"step {T}", highlight_row=hl
        ).plotly()
        check_square(fig, T, T, hl % T)
        assert fig.layout.width <= 860


@pytest.mark.parametrize("T", [1, 3, 8, 20, 21, 40, 127])
def test_alignment_and_kv_cache_cells(T):
    src = [f"src{i}" for i in range(T + 2)]
    fig = viz.alignment_figure(
        softmax_rows(np.ones((T, T + 2))), [f"t{i}" for i in range(T)], src, title="a", highlight_row=-1
    ).plotly()
    check_square(fig, T, T + 2, T - 1)
    kv = viz.kv_cache_figure(T - 1, 1, [f"t{i}" for i in range(T)], title="cache").plotly()
    check_rows_figure(kv, 3)
    assert span(kv.layout.xaxis) == (-0.5, T - 0.5)  # every position, the newest included


def check_rows_figure(fig: go.Figure, n_rows: int) -> None:
    """A full-width figure: rows of >= 16 px, every column, its labels at least 15 px apart at 860 px."""
    lay = fig.layout
    assert lay.meta["cells"] == "rows" and lay.width is None
    lo, hi = span(lay.yaxis)
    assert (lay.height - lay.margin.t - lay.margin.b) / (hi - lo) >= 16
    xs = list(main_heatmaps(fig)[0].x)
    per = (860 - lay.margin.l - lay.margin.r) / len(xs)
    ticks = list(lay.xaxis.tickvals)
    step = xs.index(ticks[1]) - xs.index(ticks[0]) if len(ticks) > 1 else len(xs)
    if lay.xaxis.tickangle == 0:
        assert per * step >= max(len(t) for t in lay.xaxis.ticktext) * 0.64 * 11
    else:
        assert lay.xaxis.tickangle == -90 and per * step >= 15 - 1e-6


@pytest.mark.parametrize("T", [1, 2, 20, 60, 128])
def test_kv_cache_is_a_full_width_strip_with_every_position(T):
    toks = [f"▁tok{i} → ▁x" for i in range(T)]
    fig = viz.kv_cache_figure(T - 1, 1, toks, title=f"Position {T - 1}: K, V rows reused vs computed now").plotly()
    check_rows_figure(fig, 3)
    assert fig.layout.title.text.startswith(f"Position {T - 1}:")
    assert not [a for a in fig.layout.annotations if a.name == "window"]  # nothing hidden, nothing to say


def note(fig: go.Figure) -> str | None:
    found = [a.text for a in fig.layout.annotations if a.name == "window"]
    return found[0] if found else None


def test_self_attention_window_ends_at_the_diagonal_and_says_so():
    T = 61
    toks = [f"▁tok{i}" for i in range(T)]
    rows = [f"{t} → x" for t in toks]  # row and column labels differ; the positions are the same
    w = softmax_rows(causal_scores(T))
    for hl in (T - 1, 30, 0):
        fig = viz.attention_figure(
            np.where(np.isfinite(causal_scores(T)), w, -np.inf), rows, toks, title="α", highlight_row=hl
        ).plotly()
        check_square(fig, T, T, hl)
        c0, c1 = span(fig.layout.xaxis)
        r0, r1 = span(fig.layout.yaxis)
        assert c1 == max(hl, round(c1 - c0) - 1) + 0.5  # the window ends at the diagonal (or shows 0.. from the left)
        assert round(c1 - c0) < T and round(r1 - r0) < T
        assert note(fig) == (
            f"showing rows {round(r0 + 0.5)}–{round(r1 - 0.5)} of 0–{T - 1}, "
            f"columns {round(c0 + 0.5)}–{round(c1 - 0.5)} of 0–{T - 1} · drag to pan"
        )
        assert fig.layout.dragmode == "pan"
        shown = w[round(r0 + 0.5) : round(r1 + 0.5), round(c0 + 0.5) : round(c1 + 0.5)]
        assert fig.layout.coloraxis.cmax == pytest.approx(shown.max())  # colours span the shown weights
    # figures of one view show the same rows
    kinds = {"scores": causal_scores(T), "mask": np.where(np.isfinite(causal_scores(T)), 0.0, -np.inf), "weights": w}
    windows = {
        tuple(
            span(
                viz.attention_figure(v, rows, toks, viz.AttentionOptions(kind=k), title="", highlight_row=-1)
                .plotly()
                .layout.yaxis
            )
        )
        for k, v in kinds.items()
    }
    src = [f"s{i}" for i in range(51)]
    windows.add(
        tuple(
            span(
                viz.alignment_figure(softmax_rows(np.ones((T, 51))), rows, src, title="", highlight_row=-1)
                .plotly()
                .layout.yaxis
            )
        )
    )
    assert len(windows) == 1
    small = viz.attention_figure(
        softmax_rows(causal_scores(8)), toks[:8], toks[:8], title="", highlight_row=-1
    ).plotly()
    assert note(small) is None and small.layout.dragmode is None


def test_alignment_shows_every_source_token_that_fits_else_the_largest_weight():
    T = 61
    rows = [f"{i} → x" for i in range(T)]
    few = [f"s{i}" for i in range(12)]
    fig = viz.alignment_figure(softmax_rows(np.ones((T, 12))), rows, few, title="a", highlight_row=-1).plotly()
    assert span(fig.layout.xaxis) == (-0.5, 11.5) and "columns" not in (note(fig) or "")
    many = [f"▁source{i}" for i in range(120)]
    w = softmax_rows(np.random.default_rng(0).normal(size=(T, 120)))
    w[T - 1] = 0.001
    w[T - 1, 5] = 0.9
    fig = viz.alignment_figure(
        w, rows, many, replace(viz.ALIGNMENT, value_name="share"), title="a", highlight_row=-1
    ).plotly()
    lo, hi = span(fig.layout.xaxis)
    assert lo < 5 < hi and hi - lo < 120 and "columns" in note(fig)
    assert fig.layout.coloraxis.colorbar.title.text == "share" and "share: %{z" in main_heatmaps(fig)[0].hovertemplate
    other = viz.alignment_figure(
        w, rows, many, title="a", highlight_row=-1, focus_col=100
    ).plotly()  # e.g. from a twin figure
    lo, hi = span(other.layout.xaxis)
    assert lo < 100 < hi


def test_tiny_matrices_keep_square_cells_and_a_short_bar_beside_them():
    toks = ["<s> → ▁un", "▁un → </s>"]
    fig = viz.attention_figure(
        softmax_rows(causal_scores(2)),
        toks,
        ["<s>", "▁un"],
        viz.AttentionOptions(
            kind="scores", q_title="position: reads → predicts", k_title="key position (token it reads)"
        ),
        title="Raw scores " + "x" * 40,
        highlight_row=-1,
    ).plotly()
    cw, ch, _, _ = square_cells(fig)
    assert cw == ch == 40 and fig.layout.width >= FIG_MIN_W
    assert fig.layout.margin.autoexpand is False  # Plotly may not take room from the plot
    bar = fig.layout.coloraxis.colorbar
    assert bar.len == 80 and bar.xpad == 10 and bar.y == 1 and bar.yanchor == "top"  # as tall as the plot, beside it
    assert "<br>" in fig.layout.yaxis.title.text  # the y title is wrapped instead of reaching far above the plot
    assert fig.layout.margin.t < 120


def test_cell_values_only_when_they_fit():
    small = viz.heatmap(
        np.full((3, 3), 0.25), list("abc"), list("abc"), viz.HeatmapSpec(show_values=True), title=""
    ).plotly()
    assert main_heatmaps(small)[0].texttemplate
    wide = viz.heatmap(
        np.full((3, 3), -12345.5), list("abc"), list("abc"), viz.HeatmapSpec(show_values=True), title=""
    ).plotly()
    assert main_heatmaps(wide)[0].texttemplate is None


@pytest.mark.parametrize("T", [1, 4, 8, 12, 20, 30, 60])
@pytest.mark.parametrize("H", [1, 4, 8])
def test_heads_grid_cells_and_columns(T, H):
    w = np.stack([softmax_rows(causal_scores(T, seed=h)) for h in range(H)])
    toks = [f"▁tok{i}" for i in range(T)]
    fig = viz.heads_grid(w, toks, toks, title="heads (layer 0)", highlight_row=-1).plotly()
    assert fig.layout.width <= 860
    for h in range(H):
        n = "" if h == 0 else str(h + 1)
        check_square(fig, T, T, T - 1, f"xaxis{n}", f"yaxis{n}")
    if T <= 8 and H >= 4:
        doms = {tuple(fig.layout[f"xaxis{'' if h == 0 else h + 1}"].domain) for h in range(H)}
        assert len(doms) >= 2  # several heads per row when they fit
    boxes = [(a.x, a.y) for a in fig.layout.annotations if a.name != "window"]
    assert len(set(boxes)) == H
    _, _, vx, vy = square_cells(fig)
    assert (note(fig) or "").startswith("showing rows") == (vy < T)


@pytest.mark.parametrize("T", [1, 2, 5, 19, 20, 21, 40, 64, 127])
def test_wide_matrices_have_tall_enough_rows(T):
    toks = [f"petite → fille {i}" for i in range(T)]
    rng = np.random.default_rng(T)
    res = rng.normal(size=(T, 256))
    figs = [
        viz.matrix_figure(res, toks, title="E", highlight_row=-1).plotly(),
        viz.ffn_figure(rng.normal(size=(T, 1024)), toks, title="FFN", highlight_row=-1).plotly(),
        viz.addnorm_figure(res, res.mean(-1), res.std(-1), res, toks, highlight_row=-1).plotly(),
    ]
    for fig in figs:
        assert fig.layout.meta["cells"] == "rows" and fig.layout.width is None
        lay = fig.layout
        total = lay.height - lay.margin.t - lay.margin.b
        for ya in [k for k in lay.to_plotly_json() if k.startswith("yaxis")]:
            dom = lay[ya].domain or (0, 1)
            lo, hi = span(lay[ya])
            assert total * (dom[1] - dom[0]) / (hi - lo) >= 16 - 1e-6
            assert lo < T - 1 < hi  # the highlighted (last) row is shown
    assert [s.name for s in figs[2].layout.shapes].count("highlight") == 3


def test_matrix_dims_range_keeps_true_dimension_numbers():
    v = np.arange(5 * 256, dtype=float).reshape(5, 256)
    fig = viz.matrix_figure(v, TOKENS, title="Q", dims=(40, 72)).plotly()
    (hm,) = main_heatmaps(fig)
    np.testing.assert_allclose(np.asarray(hm.z), v[:, 40:72], rtol=1e-3)
    assert list(hm.x) == list(range(40, 72)) and tuple(fig.layout.xaxis.range) == (39.5, 71.5)
    assert "dimension: %{x}" in hm.hovertemplate
    ffn = viz.ffn_figure(np.ones((5, 1024)), TOKENS, title="FFN", dims=(1000, 1024)).plotly()
    assert list(main_heatmaps(ffn)[0].x)[0] == 1000 and "100.0%" not in ffn.layout.title.text
    add = viz.addnorm_figure(v, v.mean(-1), v.std(-1), v, TOKENS, dims=(0, 8)).plotly()
    assert [np.asarray(t.z).shape for t in main_heatmaps(add)] == [(5, 8), (5, 8)]
    for bad in [(0, 0), (-1, 5), (10, 300), (5, 2), "ab"]:
        with pytest.raises(ValueError):
            viz.matrix_figure(v, TOKENS, title="Q", dims=bad).plotly()


def test_matrix_group_boundaries_and_labels():
    fig = viz.matrix_figure(
        np.zeros((3, 256)), list("abc"), viz.MatrixOptions(group_size=32), title="Q", highlight_row=0
    ).plotly()
    lines = [s for s in fig.layout.shapes if s.name == "group"]
    assert sorted(s.x0 for s in lines) == [32 * k - 0.5 for k in range(1, 8)]
    assert all(s.x0 == s.x1 and s.yref == "paper" for s in lines)
    notes = [a for a in fig.layout.annotations if a.name == "group"]
    assert [a.text for a in notes] == [f"head {k}" for k in range(8)]
    assert [a.x for a in notes] == [32 * k + 15.5 for k in range(8)]
    # labels sit in the top margin, below the title, and do not overlap at the narrowest container
    assert all(a.yref == "paper" and a.y == 1 and a.yanchor == "bottom" for a in notes)
    pw = 860 - fig.layout.margin.l - fig.layout.margin.r
    assert 32 * pw / 256 > max(len(a.text) for a in notes) * 0.64 * 12
    part = viz.matrix_figure(
        np.zeros((3, 256)), list("abc"), viz.MatrixOptions(group_size=32), title="Q", dims=(40, 72)
    ).plotly()
    assert [s.x0 for s in part.layout.shapes if s.name == "group"] == [63.5]
    many = viz.matrix_figure(np.zeros((3, 1024)), list("abc"), viz.MatrixOptions(group_size=4), title="Q").plotly()
    texts = [a for a in many.layout.annotations if a.name == "group"]
    px_per_dim = (860 - many.layout.margin.l - many.layout.margin.r) / 1024
    xs = sorted(a.x for a in texts)
    assert min(b - a for a, b in zip(xs, xs[1:])) * px_per_dim >= max(len(a.text) for a in texts) * 0.64 * 12
    with pytest.raises(ValueError):
        viz.matrix_figure(np.zeros((3, 8)), list("abc"), viz.MatrixOptions(group_size=0), title="Q").plotly()


def test_positional_curves_mark_position():
    pe = np.sin(np.arange(12)[:, None] / (1 + np.arange(4)))
    fig = viz.positional_curves(pe, [0, 1], title="PE", mark_position=7, tokens=[f"t{i}" for i in range(12)]).plotly()
    (mark,) = [s for s in fig.layout.shapes if s.name == "mark"]
    assert mark.x0 == mark.x1 == 7 and (mark.y0, mark.y1) == (0, 1) and mark.yref == "paper"
    (label,) = [a for a in fig.layout.annotations if a.name == "mark"]
    assert label.text.startswith("position 7") and "t7" in label.text and label.font.size >= 11
    assert fig.layout.legend.x >= 1.0 and fig.layout.legend.xanchor == "left"  # the legend is right of the plot
    assert not viz.positional_curves(pe, [0], title="PE").plotly().layout.shapes
    for bad in (12, -1):
        with pytest.raises(ValueError):
            viz.positional_curves(pe, [0], title="PE", mark_position=bad).plotly()


def all_font_sizes(node, inside_font: bool = False):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "size" and inside_font:
                yield v
            yield from all_font_sizes(v, "font" in k.lower())
    elif isinstance(node, list):
        for v in node:
            yield from all_font_sizes(v, inside_font)


def every_figure(T: int) -> list[go.Figure]:
    """One figure of every kind for T tokens (free-string labels, HTML, a long one, repeats)."""
    base = ["petite → fille", "<s>", "▁le", "▁chat", "une_très_longue_étiquette_qui_déborde", "▁le", XSS, "</s>"]
    toks = [base[i % len(base)] for i in range(T)]
    src = [base[(i + 3) % len(base)] for i in range(T + 1)]
    rng = np.random.default_rng(T)
    s = causal_scores(T)
    res = rng.normal(size=(T, 256))
    pos = np.arange(max(T, 2))[:, None]
    pe = np.zeros((max(T, 2), 256))
    pe[:, 0::2] = np.sin(pos * np.exp(np.arange(0, 256, 2) * -(np.log(10000.0) / 256)))
    pe[:, 1::2] = np.cos(pos * np.exp(np.arange(0, 256, 2) * -(np.log(10000.0) / 256)))
    p = np.sort(rng.random(10))[::-1]
    figs = [
        viz.attention_figure(
            softmax_rows(s), toks, toks, title=f"Self-attention weights (layer 1), step {T}", highlight_row=-1
        ).plotly()
    ]
    for kind, vals in (
        ("scores", np.nan_to_num(s, neginf=0.3)),
        ("mask", np.where(np.isfinite(s), 0.0, -np.inf)),
        ("masked_scores", s),
    ):
        figs.append(
            viz.attention_figure(
                vals, toks, toks, viz.AttentionOptions(kind=kind), title=f"{kind}, step {T}", highlight_row=-1
            ).plotly()
        )
    figs += [
        viz.alignment_figure(
            softmax_rows(rng.normal(size=(T, T + 1))), toks, src, title="Alignment", highlight_row=-1
        ).plotly(),
        viz.heads_grid(
            np.stack([softmax_rows(causal_scores(T, h)) for h in range(8)]),
            toks,
            toks,
            title="Self-attention weights, every head (layer 1)",
            highlight_row=-1,
        ).plotly(),
        viz.heads_grid(
            np.stack([causal_scores(T, h) for h in range(4)]),
            toks,
            toks,
            viz.AttentionOptions(kind="masked_scores"),
            title="Scores, every head",
            highlight_row=-1,
        ).plotly(),
        viz.matrix_figure(res, toks, title="Token embeddings E[y]·√d", highlight_row=-1).plotly(),
        viz.matrix_figure(
            res, toks, viz.MatrixOptions(group_size=32), title="Q, heads concatenated", highlight_row=-1
        ).plotly(),
        viz.matrix_figure(
            res[:, :32], toks, viz.MatrixOptions(dim_label="d_k"), title="α·V, head 0", highlight_row=-1
        ).plotly(),
        viz.ffn_figure(
            np.maximum(rng.normal(size=(T, 1024)), 0), toks, title="FFN hidden activations (relu)", highlight_row=-1
        ).plotly(),
        viz.addnorm_figure(
            res,
            res.mean(-1),
            res.std(-1),
            res,
            toks,
            highlight_row=-1,
            title="Add & Norm after self-attention (layer 1)",
        ).plotly(),
        viz.positional_curves(
            pe,
            [0, 1, 6, 7, 64, 65],
            title="The model's positional encoding",
            tokens=toks[:1] * 2 if T < 2 else toks,
            mark_position=max(T, 2) - 1,
        ).plotly(),
        viz.kv_cache_figure(T - 1, 1, toks, title=f"Step {T}: K, V rows reused vs computed now").plotly(),
        viz.topk_figure(base + ["a", "b"], p / p.sum(), 0, title=f"Next token, step {T}").plotly(),
        viz.heatmap(
            rng.normal(size=(T, 3)),
            toks,
            ["x", "y", "z"],
            viz.HeatmapSpec(x_title="col", y_title="row"),
            title="Generic",
        ).plotly(),
    ]
    steps = fake_beam_steps() if T <= 8 else synthetic_beam(8, 40)
    figs.append(
        viz.beam_tree_figure(
            steps, TREE, token_text=lambda i: f"<t{i}>", title=f"Beam search, step {len(steps)}"
        ).plotly()
    )
    return figs


def synthetic_beam(beam: int, steps: int, seed: int = 0) -> list[NS]:
    """Beam steps in the shape model.decode.decoding records: each live row's ``beam`` continuations, the best kept."""
    rng = np.random.default_rng(seed)

    def H(ids, lp, parent):
        return NS(ids=tuple(ids), logprob=lp, score=lp / max(len(ids), 1), parent=parent, finished=False)

    live = [H((), 0.0, -1)] + [H((), -1e9, -1) for _ in range(beam - 1)]
    out = []
    for t in range(steps):
        exps = [
            NS(
                parent=r,
                token=int(rng.integers(3, 500)),
                token_logprob=(tl := float(-rng.exponential())),
                cum_logprob=h.logprob + tl,
                status="pruned",
            )
            for r, h in enumerate(live)
            if h.logprob > -1e8
            for _ in range(beam)
        ]
        exps.sort(key=lambda e: -e.cum_logprob)
        nxt = []
        for e in exps[:beam]:
            e.status = "finished" if t > 2 and rng.random() < 0.1 else "kept"
            if e.status == "kept":
                nxt.append(H(live[e.parent].ids + (e.token,), e.cum_logprob, e.parent))
        out.append(NS(position=t, live=live, expansions=exps, finished=[]))
        live = nxt + [H((), -1e9, -1)] * (beam - len(nxt))
    return out


@pytest.mark.parametrize("T", [1, 8, 20, 60])
def test_no_text_below_11_px(T):
    for fig in every_figure(T):
        sizes = list(all_font_sizes(fig.to_plotly_json()))
        assert sizes and min(sizes) >= 11, (fig.layout.title.text, sizes)
        assert fig.layout.font.size >= 11


def test_beam_tree_colours_are_valid():
    from _plotly_utils.basevalidators import ColorValidator

    named = set(ColorValidator.named_colors)

    def css(c) -> bool:
        c = str(c).strip().lower()
        return bool(
            re.fullmatch(r"#([0-9a-f]{3}|[0-9a-f]{6}|[0-9a-f]{8})", c)
            or c in named
            or re.fullmatch(r"(rgb|rgba|hsl|hsla)\([^()]*\)", c)
        )

    for steps in (fake_beam_steps(), synthetic_beam(8, 40)):
        fig = viz.beam_tree_figure(steps, TREE, token_text=lambda i: f"t{i}", title="beam").plotly()
        assert fig.layout.coloraxis.colorscale
        for t in fig.data:
            m = t.marker
            colors = m.color if isinstance(m.color, tuple | list | np.ndarray) else [m.color]
            for c in colors:
                if c is None:
                    continue
                if isinstance(c, int | float | np.floating):
                    assert t.marker.coloraxis == "coloraxis" and math.isfinite(c) and not t.showlegend
                else:
                    assert css(c), (t.name, c)
            if m.line and m.line.color is not None:
                assert css(m.line.color), (t.name, m.line.color)
            if t.showlegend:  # a legend entry needs a single CSS colour (numbers draw black, with warnings)
                assert isinstance(m.color, str) and css(m.color)
        assert {t.name for t in fig.data if t.showlegend} >= {"kept", "pruned"}


def test_beam_tree_labels_do_not_collide():
    for steps, n_labels in ((fake_beam_steps(), 1), (synthetic_beam(8, 40), 0)):
        fig = viz.beam_tree_figure(steps, TREE, token_text=lambda i: f"tok{i}", title="beam").plotly()
        nodes, points, _ = tree_parts(fig)
        assert fig.layout.meta["min_width"] == 860  # laid out for 860 px: a phone scrolls it rather than squeeze it
        pw = 860 - fig.layout.margin.l - fig.layout.margin.r
        x0, x1 = fig.layout.xaxis.range
        y0, y1 = sorted(fig.layout.yaxis.range)
        ph = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
        assert ph / (y1 - y0) >= 16  # px between two hypotheses
        boxes = []
        for t in nodes.values():
            for x, y, text in zip(t.x, t.y, t.text or [""] * len(t.x)):
                if text:
                    px, py = (x - x0) * pw / (x1 - x0), (y - y0) * ph / (y1 - y0)
                    boxes.append((px + 9, py - 7, px + 11 + len(text) * 7, py + 7))
        assert len(boxes) >= n_labels
        for i, a in enumerate(boxes):
            for b in boxes[i + 1 :]:
                assert not (a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]), (a, b)
        assert all(len(t.hovertext) == len(t.x) for t in nodes.values())  # unlabelled nodes keep their hover


# --- legibility: measured in Chromium -------------------------------------------------------------


@pytest.mark.parametrize("width", [860, 1450])
def test_every_figure_is_legible_in_chromium(browser, width):
    from harness.legibility import show_figures, violations

    page = browser.new_page(viewport={"width": width + 40, "height": 1000})
    warnings = []
    page.on("console", lambda m: warnings.append(m.text))
    figs = [f for T in (1, 8, 20, 60) for f in every_figure(T)]
    show_figures(page, figs, width)
    assert violations(page) == []
    assert warnings == []  # e.g. no "Invalid color specifier"
    page.close()


def test_the_checker_flags_illegible_figures(browser):
    from harness.legibility import show_figures, violations

    rows = [f"row {i}" for i in range(60)]
    layout = dict(
        height=40 + 60,
        width=500,
        margin=dict(t=30, b=30),
        meta={"cells": "rows"},
        title=dict(text="squashed"),
        yaxis=dict(tickmode="array", tickvals=rows),
    )
    squashed = go.Figure(go.Heatmap(z=np.random.default_rng(0).normal(size=(60, 60)), x=rows, y=rows), layout=layout)
    tiny = viz.attention_figure(np.full((4, 4), 0.25), list("abcd"), list("abcd"), title="tiny").plotly()
    tiny.update_layout(width=200, height=170, margin=dict(l=60, r=60, t=40, b=40))
    small_text = viz.topk_figure(["a", "b"], [0.6, 0.4], 0, title="small text").plotly()
    small_text.update_yaxes(tickfont=dict(size=8))
    long_title = viz.matrix_figure(np.zeros((2, 8)), ["a", "b"], title="x" * 60).plotly()
    long_title.update_layout(title=dict(x=1.0, xanchor="right", pad=dict(t=0), y=1.0, yanchor="top"))
    page = browser.new_page(viewport={"width": 900, "height": 1000})
    show_figures(page, [squashed, tiny, small_text, long_title], 860)
    found = violations(page)
    page.close()
    text = "\n".join(found)
    assert "'squashed'" in text and "rows" in text and "tick label" in text
    assert "'tiny'" in text and "cells" in text
    assert "'small text'" in text and "8 px" in text
    assert "modebar covers title" in text


# ---------------------------------------------------------------------------
# Text alternatives of heatmaps (the line a screen reader reads, views.plot).


def test_describe_heatmap_names_the_shape_and_the_strongest_cell():
    from viz.common import describe_heatmap

    w = np.array([[1.0, -np.inf, -np.inf], [0.38, 0.62, -np.inf], [0.2, 0.5, 0.3]])
    rows, cols = ["<s> → la", "la → petite", "petite → fille"], ["<s>", "la", "petite"]
    line = describe_heatmap(w, rows, cols, "Weights, head 0 (layer 0)", "weight")
    # row 0 has no choice (one open cell): the strongest cell among rows with a choice
    assert line == (
        "Weights, head 0 (layer 0): heatmap of 3 rows × 3 columns; row 1 'la → petite' attends most to 'la' (0.62)."
    )
    signed = describe_heatmap(np.array([[0.5, -3.25], [1.0, 2.0]]), ["a", "b"], ["0", "1"], None, "score")
    assert signed == "heatmap of 2 rows × 2 columns; largest in magnitude score: -3.25 at row 0 'a', column '1'."
    assert describe_heatmap(np.array([[0.1, 0.7]]), ["x"], ["p", "q"], "t", "share").endswith(
        "largest share: 0.7 at row 0 'x', column 'q'."
    )
    mask = describe_heatmap(np.array([[0.0, -np.inf], [0.0, 0.0]]), ["a", "b"], ["a", "b"], "Causal mask", "mask")
    assert mask == "Causal mask: heatmap of 2 rows × 2 columns; every open cell is 0, 1 cell masked."
    assert describe_heatmap(np.full((1, 2), np.nan), ["a"], ["b", "c"], None).endswith("every cell is masked.")
    with pytest.raises(ValueError, match="rows"):
        describe_heatmap(w, rows[:2], cols, None)


def test_figures_carry_their_text_alternative_with_labels_as_written():
    """What plot() sends with a heatmap: the figure's own title and axis labels, unescaped and without the index
    prefixes that keep category labels distinct; a bar chart's bars largest first; no line for a figure of lines."""
    from views.plot import text_alternative

    w = np.array([[1.0, -np.inf], [0.3, 0.7]])
    fig = viz.attention_figure(w, ["<s> → a&b", "a&b → c"], ["<s>", "a&b"], title="Weights <b>x</b>").plotly()
    assert text_alternative(fig) == (
        "Weights <b>x</b>: heatmap of 2 rows × 2 columns; row 1 'a&b → c' attends most to 'a&b' (0.70)."
    )
    grid = viz.heads_grid(np.stack([w, w[::-1]]), ["r0", "r1"], ["c0", "c1"], title="Every head").plotly()
    assert text_alternative(grid).endswith("(the first of 2 panels).")
    bars = go.Figure(go.Bar(x=["a", "b"], y=[0.3, 0.6]), layout=dict(title="Top 2"))  # bars: largest first
    assert text_alternative(bars) == "Top 2: 2 bars, largest first: ‘b’ 0.6, ‘a’ 0.3."
    assert text_alternative(go.Figure(go.Scatter(x=[1, 2], y=[1, 2], mode="lines"))) is None  # no points


def test_figure_json_is_plotly_s_own_json():
    """The app writes figures from their own dicts (viz.common.figure_json); Plotly's to_json must read the same,
    typed arrays (int64 narrowed, 2-d with its shape) and NaN in a plain list (Plotly's way: null) included."""
    import plotly.io as pio

    from viz.common import Figure, figure_json

    v = causal_scores(6)
    v[5, 0] = np.nan
    figs = [
        viz.heatmap(v, TOKENS + ["x"], list("abcdef"), viz.HeatmapSpec(x_title="k", y_title="q", zmid=0.0), title="t"),
        viz.attention_figure(
            softmax_rows(causal_scores(5)), TOKENS, TOKENS, viz.AttentionOptions(kind="weights"), title="w"
        ),
        viz.positional_curves(
            np.random.default_rng(0).normal(size=(7, 16)).astype(np.float32), dims=(0, 1, 4), title="p"
        ),
        go.Figure(go.Scatter(x=np.arange(5, dtype=np.int64), y=[1.0, float("nan"), 2.0, 3.0, np.float32(4.0)])),
        go.Figure(go.Bar(x=np.array(["a", "b"]), y=np.array([2**40, 1])), layout={"width": np.int64(300)}),
    ]
    for fig in figs:
        ours = figure_json(fig)
        plotly_own = pio.to_json(fig.plotly() if isinstance(fig, Figure) else fig, validate=False)
        assert json.loads(ours) == json.loads(plotly_own)
        assert "NaN" not in ours and "Infinity" not in ours
    assert '"bdata"' in figure_json(figs[0]) and '"shape"' in figure_json(figs[0])  # typed arrays, not lists


def test_a_figure_is_an_ordinary_value_of_its_builder_s_dicts():
    """viz.common.Figure is not Plotly's: its builder's trace and layout dicts, written to JSON as they are;
    ``plotly()`` is Plotly's own figure of them, which writes the same JSON and is a copy (changing it leaves the
    figure as it was)."""
    import plotly.io as pio

    from viz.common import Figure, figure_json

    figs = [
        viz.attention_figure(
            softmax_rows(causal_scores(5)), TOKENS, TOKENS, viz.AttentionOptions(kind=kind), title=kind
        )
        for kind in ("weights", "scores", "mask", "masked_scores")
    ]
    figs.append(viz.positional_curves(np.random.default_rng(1).normal(size=(6, 8)), dims=(0, 3), title="pe"))
    figs.append(viz.lens_figure([["a", "b"], ["b", "a"]], np.array([[0.6, 0.4], [0.7, 0.3]]), title="l", chosen="b"))
    figs.append(viz.loss_delta_figure(["a", "b", "c"], np.array([0.5, -0.2, 0.0]), title="d"))
    for fig in figs:
        assert type(fig) is Figure and not isinstance(fig, go.Figure)
        assert all(isinstance(t, dict) for t in fig.data) and isinstance(fig.layout, dict)
        built = fig.plotly()
        assert isinstance(built, go.Figure) and built.layout.title.text == fig.layout["title"]["text"]
        ours = json.loads(figure_json(fig))
        assert ours == json.loads(pio.to_json(built, validate=False)) == json.loads(figure_json(built))
        go.Figure(ours)  # valid for Plotly: a property it does not know raises
        built.update_layout(height=123)
        assert fig.layout["height"] != 123 and json.loads(figure_json(fig)) == ours
        for copied in (copy.deepcopy(fig), pickle.loads(pickle.dumps(fig))):
            assert json.loads(figure_json(copied)) == ours


def _labels(bar, lo: float, hi: float) -> list[float]:
    """The values a linear colour bar labels within [lo, hi]."""
    step = bar.dtick
    return [k * step for k in range(math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9) + 1)]


@pytest.mark.parametrize(
    "lo, hi, length", [(-0.45, 0.45, 120), (0, 1, 120), (-3.2, 3.2, 400), (-12, 37, 200), (0, 0.013, 200)]
)
def test_a_colour_bar_labels_round_values_at_least_a_tick_room_apart(lo, hi, length):
    ticks = bar_ticks(lo, hi, length)
    shown = _labels(NS(**ticks), lo, hi)
    assert len(shown) >= 2 and length * ticks["dtick"] / (hi - lo) >= CB_TICK_PX, shown
    mantissa = ticks["dtick"] / 10 ** math.floor(math.log10(ticks["dtick"]))
    assert round(mantissa, 6) in (1.0, 2.0, 2.5, 5.0)


def test_a_colour_bar_too_short_for_two_round_labels_keeps_plotly_s_own():
    assert bar_ticks(0.028, 0.95, 80) == {} and bar_ticks(2.0, 2.0, 100) == {}


def test_a_short_diverging_score_bar_is_labelled_on_both_sides_of_zero():
    """Three positions' raw scores within ±0.45: Plotly's own ticks labelled the bar with "0" alone."""
    scores = np.array([[0.1, -0.45, 0.3], [0.2, 0.45, -0.4], [0.0, -0.1, 0.25]])
    fig = viz.attention_figure(
        scores, ["a", "b", "c"], ["a", "b", "c"], viz.AttentionOptions(kind="scores"), title="Raw scores"
    ).plotly()
    bar = fig.layout.coloraxis.colorbar
    shown = _labels(bar, -0.45, 0.45)
    assert bar.tickmode == "linear" and min(shown) < 0 < max(shown) and 0 in shown
    mask = viz.attention_figure(
        np.zeros((2, 2)), ["a", "b"], ["a", "b"], viz.AttentionOptions(kind="mask"), title="Mask"
    ).plotly()
    assert mask.layout.coloraxis.colorbar.tickmode != "linear"  # a bar that names its own ticks keeps them


def test_a_bar_s_percent_is_the_exact_probability_s():
    """p = exp(−0.200227) = 0.81854 was sent rounded to 0.8185 and printed "81.8%" beside a chip's 0.819."""
    p = float(np.exp(-0.200227))
    fig = viz.topk_figure(["▁un", "▁une"], [p, 1 - p], 0, title="Next token").plotly()
    assert list(fig.data[0].text) == ["81.9%", "18.1%"] and fig.data[0].texttemplate == "%{text}"
    assert f"{round(p, 3):.3f}" == "0.819"  # the chip's number, the same to its precision
