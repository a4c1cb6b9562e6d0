"""Figures of the explanations (viz/explain.py): shapes checked, sizes from the token count, legible in Chromium."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import viz
from harness.legibility import BROWSER_ARGS, CHROMIUM, show_figures, violations


def figures(T: int) -> list:
    rng = np.random.default_rng(T)
    toks = [[f"▁tok{i}{j}" for j in range(10)] for i in range(3)]
    probs = np.sort(rng.random((3, 10)))[:, ::-1]
    pos = [f"▁w{i} → ▁x{i}" for i in range(T)]
    return [
        viz.lens_figure(toks, probs, title=f"What each layer would predict at position {T - 1}", chosen="▁tok13"),
        viz.layer_position_figure(rng.random((3, T)), pos, title="p(chosen token) per layer", highlight_col=T - 1),
        viz.loss_delta_figure(pos, rng.normal(size=T), title="Loss change per position"),
        viz.importance_figure(rng.normal(size=(3, 8)), title="Self-attention heads: loss increase", kind="self"),
    ]


def test_lens_figure_writes_tokens_and_outlines_the_chosen_one():
    fig = figures(4)[0]
    main = next(t for t in fig.data if t.name == "probability")
    assert main.text[1][3] == "▁tok13" and main.texttemplate == "%{text}"
    outlined = [s for s in fig.layout.shapes if s.name == "chosen"]
    assert len(outlined) == 1 and (outlined[0].x0, outlined[0].y0) == (2.5, 0.5)
    with pytest.raises(ValueError):
        viz.lens_figure([["a"]], np.ones((2, 1)), title="x")


def test_loss_delta_rows_follow_the_positions():
    small, mid, big = (figures(T)[2] for T in (4, 20, 60))
    assert big.layout.height - mid.layout.height == 40 * 18  # one 18 px row per position
    assert list(small.data[0].marker.color) == ["#d6604d" if d > 0 else "#4393c3" for d in small.data[0].x]
    with pytest.raises(ValueError):
        viz.loss_delta_figure(["a", "b"], np.zeros(3), title="x")


@pytest.mark.parametrize("width", [860, 1450])
def test_explanation_figures_are_legible_in_chromium(width):
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        try:
            page = browser.new_page(viewport={"width": width + 40, "height": 900})
            show_figures(page, [f for T in (1, 8, 20, 60) for f in figures(T)], width)
            assert violations(page) == []
        finally:
            browser.close()
