"""Figures of the explanations (viz/explain.py): shapes checked, sizes from the token count, legible in Chromium."""

from __future__ import annotations

import numpy as np
import pytest

from harness.legibility import figures_violations
from viz import api as viz


def figures(T: int) -> list:
    rng = np.random.default_rng(T)
    toks = [[f"▁tok{i}{j}" for j in range(10)] for i in range(3)]
    probs = np.sort(rng.random((3, 10)))[:, ::-1]
    pos = [f"▁w{i} → ▁x{i}" for i in range(T)]
    return [
        viz.lens_figure(
            toks, probs, title=f"What each layer would predict at position {T - 1}", chosen="▁tok13"
        ).plotly(),
        viz.layer_position_figure(
            rng.random((3, T)), pos, title="p(chosen token) per layer", highlight_col=T - 1
        ).plotly(),
        viz.loss_delta_figure(pos, rng.normal(size=T), title="Loss change per position").plotly(),
        viz.importance_figure(
            rng.normal(size=(3, 8)), title="Self-attention heads: loss increase", kind="self"
        ).plotly(),
    ]


def test_lens_figure_writes_tokens_and_outlines_the_chosen_one():
    fig = figures(4)[0]
    main = next(t for t in fig.data if t.name == "probability")
    assert main.text[1][3] == "▁tok13" and main.texttemplate == "%{text}"
    outlined = [s for s in fig.layout.shapes if s.name == "chosen"]
    assert len(outlined) == 1 and (outlined[0].x0, outlined[0].y0) == (2.5, 0.5)
    with pytest.raises(ValueError):
        viz.lens_figure([["a"]], np.ones((2, 1)), title="x").plotly()


@pytest.mark.parametrize("T", [1, 8, 61, 128])
@pytest.mark.parametrize("L", [2, 6])
def test_layer_position_is_full_width_with_tall_layer_rows(T, L):
    pos = [f"{i}:▁tok → ▁x" for i in range(T)]
    fig = viz.layer_position_figure(np.full((L, T), 0.25), pos, title="p", highlight_col=T - 1).plotly()
    lay = fig.layout
    assert lay.meta["cells"] == "rows" and lay.width is None
    assert (lay.height - lay.margin.t - lay.margin.b) / L >= 22
    assert span(lay.xaxis) == (-0.5, T - 0.5)  # every position
    (col,) = [s for s in lay.shapes if s.name == "highlight_col"]
    assert (col.x0, col.x1) == (T - 1.5, T - 0.5)
    per = (860 - lay.margin.l - lay.margin.r) / T
    assert bool(fig.data[0].texttemplate) == (T <= 12 and per >= 4 * 0.6 * 11 + 4)  # numbers only where they fit
    ticks = list(lay.xaxis.tickvals)
    if lay.xaxis.tickangle == -90 and len(ticks) > 1:
        assert per * (pos.index(ticks[1].split(":", 1)[1]) - pos.index(ticks[0].split(":", 1)[1])) >= 15 - 1e-6


def test_importance_writes_heads_across():
    fig = viz.importance_figure(np.ones((2, 8)), title="x", kind="self").plotly()
    assert fig.layout.xaxis.tickangle == 0 and list(fig.layout.xaxis.ticktext) == [f"head {h}" for h in range(8)]


def span(axis) -> tuple[float, float]:
    lo, hi = sorted(axis.range)
    return lo, hi


def test_loss_delta_rows_follow_the_positions():
    small, mid, big = (figures(T)[2] for T in (4, 20, 60))
    assert big.layout.height - mid.layout.height == 40 * 18  # one 18 px row per position
    assert list(small.data[0].marker.color) == ["#d6604d" if d > 0 else "#4393c3" for d in small.data[0].x]
    with pytest.raises(ValueError):
        viz.loss_delta_figure(["a", "b"], np.zeros(3), title="x").plotly()


@pytest.mark.parametrize("width", [860, 1450])
def test_explanation_figures_are_legible_in_chromium(browser, width):
    assert figures_violations(browser, [f for T in (1, 8, 20, 60) for f in figures(T)], width) == []


def test_the_lens_figure_asks_the_width_its_tokens_need():
    """Ten tokens a row squeezed to 30 px cells on a phone ran into each other ("▁lit▁connaît-t-il"): the figure
    asks for its margins and ten cells as wide as its widest token, and a phone scrolls to it."""
    from viz.common import TICK_FONT, text_px

    toks = [["▁connaît-t-il", "▁un", "▁une"], ["▁livre.", "▁lit", "▁certainement"]]
    fig = viz.lens_figure(toks, np.full((2, 3), 0.3), title="What each layer would predict at position 4")
    margin = fig.layout["margin"]
    column = (fig.layout["meta"]["min_width"] - margin["l"] - margin["r"]) / 3
    assert column >= text_px("▁certainement", TICK_FONT + 1)


def test_the_lens_figure_never_asks_more_than_a_desktop_column():
    """Ten long tokens asked 1,278 px, and a 1366 px window with its sidebar open scrolled away ranks 8–10 and the
    colour bar: the ask stops at the narrowest desktop column."""
    from viz.common import MIN_WIDTH

    toks = [["▁certainement"] * 10] * 3
    fig = viz.lens_figure(toks, np.full((3, 10), 0.1), title="What each layer would predict at position 3")
    assert fig.layout["meta"]["min_width"] == MIN_WIDTH
