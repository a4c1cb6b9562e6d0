"""viz: pure Plotly figures. Shapes, labels, masking, escaping, highlighting, tables, beam tree, payload size."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace as NS

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

import viz

ROOT = Path(__file__).resolve().parents[1]
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
    fig = viz.attention_figure(np.full((5, 5), 0.2), TOKENS, TOKENS, title=f"title {XSS}")
    payload = fig.to_json()
    assert "<img" not in payload and "\\u003cimg" not in payload
    assert fig.layout.title.text == f"title {viz.safe_label(XSS)}"


# --- the shared heatmap helper ---------------------------------------------------------------------


def test_heatmap_z_axes_ticks_and_hover():
    v = np.arange(15, dtype=float).reshape(5, 3) / 7
    fig = viz.heatmap(v, TOKENS, ["k0", "k1", "k2"], title="t", x_title="key token", y_title="query token",
                      value_name="weight")  # fmt: skip
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
    fig = viz.heatmap(v, list("abcdef"), list("abcdef"), title="t", x_title="k", y_title="q", zmid=0.0)
    (hm,) = main_heatmaps(fig)
    (ov,) = overlays(fig)
    z, oz = np.asarray(hm.z, dtype=float), np.asarray(ov.z, dtype=float)
    masked = ~np.isfinite(v)
    assert np.array_equal(np.isnan(z), masked)
    assert np.array_equal(~np.isnan(oz), masked)  # the overlay covers exactly the masked cells
    assert ov.showscale is False and ov.hoverongaps is False and hm.hoverongaps is False
    assert "masked (future)" in ov.hovertemplate
    assert fig.layout.coloraxis.cmid == 0.0
    fig2 = viz.heatmap(v, list("abcdef"), list("abcdef"), title="t", x_title="k", y_title="q",
                       masked_hover="padding <pad>")  # fmt: skip
    assert "padding &lt;pad&gt;" in overlays(fig2)[0].hovertemplate


def test_heatmap_rounds_to_significant_digits():
    v = np.array([[1.23456789, -0.000123456789], [98765.4321, 0.0]])
    z = np.asarray(main_heatmaps(viz.heatmap(v, ["a", "b"], ["c", "d"], title="", x_title="", y_title=""))[0].z)
    np.testing.assert_allclose(z, np.array([[1.235, -0.0001235], [98770.0, 0.0]], dtype=np.float32), rtol=1e-6)
    z2 = np.asarray(main_heatmaps(viz.heatmap(v, ["a", "b"], ["c", "d"], title="", x_title="", y_title="",
                                              decimals=2))[0].z)  # fmt: skip
    np.testing.assert_allclose(z2[0, 0], 1.2, rtol=1e-6)


def test_heatmap_highlight_row_rectangle():
    fig = viz.heatmap(np.zeros((4, 3)), list("abcd"), list("xyz"), title="", x_title="", y_title="", highlight_row=-1)
    (shape,) = fig.layout.shapes
    assert shape.type == "rect" and (shape.y0, shape.y1) == (2.5, 3.5) and (shape.x0, shape.x1) == (-0.5, 2.5)
    assert shape.fillcolor == "rgba(0,0,0,0)" and shape.line.width > 0
    assert not viz.heatmap(np.zeros((4, 3)), list("abcd"), list("xyz"), title="", x_title="", y_title="").layout.shapes
    with pytest.raises(ValueError, match="highlight_row"):
        viz.heatmap(np.zeros((4, 3)), list("abcd"), list("xyz"), title="", x_title="", y_title="", highlight_row=4)


def test_heatmap_payload_is_small():
    T = 40
    toks = [f"▁tok{i % 7}" for i in range(T)]  # many duplicates
    fig = viz.attention_figure(softmax_rows(causal_scores(T)), toks, toks, title="40 x 40", highlight_row=-1)
    payload = fig.to_json()
    assert len(payload) < 60_000, len(payload)
    fig = viz.attention_figure(causal_scores(T), toks, toks, title="40 x 40 scores", kind="masked_scores")
    assert len(fig.to_json()) < 60_000
    json.loads(payload)  # valid JSON (no bare NaN / Infinity tokens)


def test_shared_helper_no_cell_text_on_large_heatmaps():
    fig = viz.heatmap(np.ones((20, 20)), list(range(20)), list(range(20)), title="", x_title="", y_title="",
                      show_values=True)  # fmt: skip
    assert main_heatmaps(fig)[0].texttemplate is None
    small = viz.heatmap(np.ones((3, 3)), list("abc"), list("abc"), title="", x_title="", y_title="", show_values=True)
    assert main_heatmaps(small)[0].texttemplate


# --- shape validation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda: viz.heatmap(np.zeros((3, 4)), list("abc"), list("abc"), title="", x_title="", y_title=""),
        lambda: viz.heatmap(np.zeros((3, 4)), list("ab"), list("abcd"), title="", x_title="", y_title=""),
        lambda: viz.heatmap(np.zeros(3), list("abc"), ["x"], title="", x_title="", y_title=""),
        lambda: viz.matrix_figure(np.zeros((4, 8)), list("abc"), title=""),
        lambda: viz.attention_figure(np.zeros((3, 3)), list("abc"), list("ab"), title=""),
        lambda: viz.attention_figure(np.zeros((3, 3)), list("abc"), list("abc"), title="", kind="nope"),
        lambda: viz.heads_grid(np.zeros((2, 3, 3)), list("abc"), list("abcd"), title=""),
        lambda: viz.heads_grid(np.zeros((3, 3)), list("abc"), list("abc"), title=""),
        lambda: viz.alignment_figure(np.zeros((3, 5)), list("abc"), list("abcd"), title=""),
        lambda: viz.ffn_figure(np.zeros((2, 16)), list("abc"), title=""),
        lambda: viz.addnorm_figure(np.zeros((3, 4)), np.zeros(3), np.zeros(3), np.zeros((3, 5)), list("abc")),
        lambda: viz.addnorm_figure(np.zeros((3, 4)), np.zeros(2), np.zeros(3), np.zeros((3, 4)), list("abc")),
        lambda: viz.addnorm_figure(np.zeros((3, 4)), np.zeros(3), np.zeros(3), np.zeros((3, 4)), list("ab")),
        lambda: viz.positional_curves(np.zeros((5, 4)), [4], title=""),
        lambda: viz.positional_curves(np.zeros((5, 4)), [0], title="", tokens=list("abc")),
        lambda: viz.topk_figure(["a", "b"], [0.5], 0, title=""),
        lambda: viz.topk_figure(["a", "b"], [0.5, 0.2], 2, title=""),
        lambda: viz.kv_cache_figure(3, 1, list("abc"), title=""),
        lambda: viz.kv_cache_figure(-1, 4, list("abc"), title=""),
        lambda: viz.loss_table(list("abc"), list("ab")),
        lambda: viz.loss_table(list("abc"), list("abc"), label_probs=[0.5, 0.5]),
        lambda: viz.steps_to_matrix([np.ones(1), np.ones(3)]),
    ],
)
def test_shape_mismatch_raises_value_error(call):
    with pytest.raises(ValueError):
        call()


# --- figures ---------------------------------------------------------------------------------------


def test_matrix_figure_rows_are_tokens_columns_are_dims():
    v = np.random.default_rng(1).normal(size=(5, 12))
    fig = viz.matrix_figure(v, TOKENS, title="embeddings", highlight_row=2)
    (hm,) = main_heatmaps(fig)
    assert np.asarray(hm.z).shape == (5, 12)
    assert list(hm.y) == viz.unique_labels(TOKENS) and list(hm.x) == list(range(12))  # true dimension numbers
    assert fig.layout.xaxis.type == "linear" and "%{x}" in hm.hovertemplate
    assert fig.layout.xaxis.title.text == "dimension" and fig.layout.coloraxis.cmid == 0.0
    assert len(fig.layout.shapes) == 1 and fig.layout.shapes[0].name == "highlight"
    assert fig.layout.meta == {"cells": "rows"} and fig.layout.width is None  # fills its container
    assert 150 <= fig.layout.height <= 900


@pytest.mark.parametrize("kind", ["weights", "scores", "mask", "masked_scores"])
def test_attention_kinds(kind):
    T = 5
    scores = causal_scores(T)
    values = {"weights": softmax_rows(scores), "scores": np.nan_to_num(scores, neginf=0.3),
              "mask": np.where(np.isfinite(scores), 0.0, -np.inf), "masked_scores": scores}[kind]  # fmt: skip
    fig = viz.attention_figure(values, TOKENS, TOKENS, title=kind, kind=kind, highlight_row=-1)
    (hm,) = main_heatmaps(fig)
    z = np.asarray(hm.z, dtype=float)
    assert z.shape == (T, T)
    assert fig.layout.xaxis.title.text == "key token" and fig.layout.yaxis.title.text == "query token"
    ca = fig.layout.coloraxis
    if kind == "weights":
        assert (ca.cmin, ca.cmax) == (0.0, 1.0) and not overlays(fig)
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


def test_finite_fill_counts_as_masked_in_scores():
    s = np.where(np.isfinite(causal_scores(4)), causal_scores(4), -1e9)
    fig = viz.attention_figure(s, list("abcd"), list("abcd"), title="", kind="masked_scores")
    z = np.asarray(main_heatmaps(fig)[0].z)
    assert np.isnan(z[0, 1]) and np.isfinite(z[1, 0])


def test_heads_grid_shared_scale_and_one_subplot_per_head():
    H, T = 6, 5
    w = np.stack([softmax_rows(causal_scores(T, seed=h)) for h in range(H)])
    fig = viz.heads_grid(w, TOKENS, TOKENS, title="heads", highlight_row=-1)
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
    fig = viz.heads_grid(w, list("abcd"), list("abcd"), title="", kind="masked_scores")
    assert len(main_heatmaps(fig)) == 2 and len(overlays(fig)) == 2
    assert fig.layout.coloraxis.cmin == -fig.layout.coloraxis.cmax  # symmetric shared range


def test_alignment_figure():
    w = softmax_rows(np.random.default_rng(2).normal(size=(5, 3)))
    fig = viz.alignment_figure(w, TOKENS, ["▁the", "▁cat", "</s>"], title="cross", highlight_row=4)
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
    fig = viz.positional_curves(pe, [0, 1, 5], title="PE")
    assert [t.name for t in fig.data] == ["dim 0 (sin)", "dim 1 (cos)", "dim 5 (cos)"]
    for t, d in zip(fig.data, [0, 1, 5]):
        np.testing.assert_allclose(np.asarray(t.y), pe[:, d], atol=1e-4)
        assert list(np.asarray(t.x)) == list(range(T))
    assert fig.layout.xaxis.title.text == "position"
    halves = np.concatenate([pe[:, 0::2], pe[:, 1::2]], axis=1)  # Marian: sin | cos halves
    names = [t.name for t in viz.positional_curves(halves, [1, 4], title="").data]
    assert names == ["dim 1 (sin)", "dim 4 (cos)"]
    assert [t.name for t in viz.positional_curves(halves, [1, 4], title="", layout="interleaved").data] == [
        "dim 1 (cos)", "dim 4 (sin)"]  # fmt: skip
    assert [t.name for t in viz.positional_curves(pe[3:], [0], title="").data] == ["dim 0"]  # not from position 0


def test_addnorm_figure():
    rng = np.random.default_rng(3)
    res = rng.normal(size=(5, 8))
    mean, std = res.mean(-1), res.std(-1)
    out = (res - mean[:, None]) / std[:, None]
    fig = viz.addnorm_figure(res, mean, std, out, TOKENS, highlight_row=1)
    hms = main_heatmaps(fig)
    assert [np.asarray(t.z).shape for t in hms] == [(5, 8), (5, 8)]
    assert [t.coloraxis for t in hms] == ["coloraxis", "coloraxis2"]  # two colour bars
    lines = [t for t in fig.data if t.type == "scatter"]
    assert [t.name for t in lines] == ["mean", "std"]
    np.testing.assert_allclose(np.asarray(lines[0].x), mean, rtol=1e-3, atol=1e-6)
    assert list(lines[1].y) == viz.unique_labels(TOKENS)
    assert len(fig.layout.shapes) == 3  # the row is outlined in all three panels
    viz.addnorm_figure(res, mean[:, None], std[:, None], out, TOKENS)  # (T, 1) statistics are accepted


def test_ffn_sparsity_relu_and_gelu_like():
    x = np.array([[-2.0, -0.5, 0.0, 0.5], [1.0, -1e-9, 2.0, -3.0]])
    relu = np.maximum(x, 0.0)
    s = viz.ffn_sparsity(relu)
    assert s["zero"] == pytest.approx(5 / 8) and s["negative"] == 0.0 and s["near_zero"] == pytest.approx(5 / 8)
    g = viz.ffn_sparsity(x)
    assert g["zero"] == pytest.approx(1 / 8) and g["near_zero"] == pytest.approx(2 / 8)
    assert g["negative"] == pytest.approx(4 / 8) and g["count"] == 8
    fig = viz.ffn_figure(relu, ["a", "b"], title="FFN")
    assert np.asarray(main_heatmaps(fig)[0].z).shape == (2, 4)
    assert "62.5%" in fig.layout.title.text and fig.layout.xaxis.title.text == "hidden unit"


def test_steps_to_matrix_lower_triangular():
    rows = [softmax_rows(np.random.default_rng(t).normal(size=(1, t + 1)))[0] for t in range(5)]
    m = viz.steps_to_matrix(rows)
    assert m.shape == (5, 5)
    lower = np.tril(np.ones((5, 5), dtype=bool))
    assert np.all(np.isfinite(m[lower])) and np.all(m[~lower] == -np.inf)
    for t, r in enumerate(rows):
        np.testing.assert_array_equal(m[t, : t + 1], r)
    assert viz.steps_to_matrix([]).shape == (0, 0)
    fig = viz.attention_figure(m, list("abcde"), list("abcde"), title="", kind="masked_scores")
    assert np.array_equal(~np.isnan(np.asarray(overlays(fig)[0].z, dtype=float)), ~lower)


def test_kv_cache_figure():
    fig = viz.kv_cache_figure(4, 1, TOKENS, title="cache")
    (hm,) = main_heatmaps(fig)
    z = np.asarray(hm.z, dtype=float)
    assert z.shape == (3, 5) and list(hm.y) == ["Q", "K", "V"]
    np.testing.assert_array_equal(z[1:], [[0, 0, 0, 0, 1]] * 2)  # K, V: 4 cached rows, 1 new
    assert np.isnan(z[0, :4]).all() and z[0, 4] == 1  # a query only for the new position
    assert "reused from the cache" in hm.text[1][0] and "new" in hm.text[1][4]
    assert list(fig.layout.xaxis.ticktext) == viz.unique_labels(TOKENS)


def test_topk_figure_highlights_the_chosen_token():
    toks, probs = ["▁le", "▁la", XSS, "▁le"], [0.5, 0.2, 0.1, 0.05]
    fig = viz.topk_figure(toks, probs, 2, title="next")
    (bar,) = fig.data
    assert bar.type == "bar" and bar.orientation == "h"
    colors = list(bar.marker.color)
    assert colors[2] != colors[0] and len({c for i, c in enumerate(colors) if i != 2}) == 1
    assert list(bar.marker.line.width)[2] > 0 and list(bar.marker.line.width)[0] == 0
    np.testing.assert_allclose(np.asarray(bar.x), probs, rtol=1e-4)
    assert len(set(bar.y)) == 4 and all("<" not in y for y in bar.y)  # duplicates kept apart, escaped
    none = viz.topk_figure(toks, probs, None, title="")
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

    step0 = NS(position=0, live=[H((), 0.0), H((), -1e9)], finished=[],
               expansions=[E(0, 10, -0.5, -0.5, "kept"), E(0, 11, -1.0, -1.0, "kept"),
                           E(0, 12, -2.0, -2.0, "pruned")])  # fmt: skip
    step1 = NS(position=1, live=[H((10,), -0.5, 0), H((11,), -1.0, 0)], finished=[],
               expansions=[E(0, 2, -0.1, -0.6, "finished"), E(0, 13, -0.7, -1.2, "kept"), E(1, 14, -0.1, -1.1, "kept"),
                           E(1, 15, -3.0, -4.0, "pruned")])  # fmt: skip
    step2 = NS(position=2, live=[H((11, 14), -1.1, 1), H((10, 13), -1.2, 0)], finished=[],
               expansions=[E(0, 2, -0.2, -1.3, "finished"), E(1, 2, -0.3, -1.5, "pruned")])  # fmt: skip
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
    fig = viz.beam_tree_figure(steps, token_text=lambda i: f"<t{i}>", title="beam")
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
    from model.decoding import DecodeOptions, decode

    opts = DecodeOptions(strategy="beam", beam=3, max_len=6, record=True)
    res = decode(tiny_model, tiny_tokenizer.encode("I like pizza."), opts)
    fig = viz.beam_tree_figure(res.beam_steps, token_text=tiny_tokenizer.id_to_token, title="beam")
    check_tree(fig, res.beam_steps)
    table = viz.beam_table(res.beam_steps[-1].live, tiny_tokenizer.id_to_token)
    assert 1 <= len(table) <= 3


def test_beam_table():
    live = fake_beam_steps()[0].live + [NS(ids=(10, 2), logprob=-0.6, score=-0.3, parent=0, finished=True),
                                        NS(ids=(11,), logprob=-1.0, score=-1.0, parent=0, finished=False)]  # fmt: skip
    df = viz.beam_table(live, lambda i: {10: "▁le", 11: "▁la", 2: "</s>"}[i])
    assert list(df.columns) == ["rank", "row", "tokens", "cumulative log-prob", "length-normalized score", "finished"]
    assert list(df["rank"]) == [1, 2, 3] and list(df["row"]) == [0, 2, 3]  # the -1e9 placeholder is dropped
    assert list(df["length-normalized score"]) == [0.0, -0.3, -1.0]
    assert df.iloc[1]["tokens"] == "▁le </s>" and bool(df.iloc[1]["finished"])


# --- house rules -----------------------------------------------------------------------------------


def test_viz_imports_neither_torch_nor_streamlit():
    code = "import sys, viz; bad = {'torch', 'streamlit'} & set(sys.modules); assert not bad, bad"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
    for path in (ROOT / "viz").glob("*.py"):
        text = path.read_text()
        assert "import torch" not in text and "import streamlit" not in text and "from model" not in text, path
