"""Figures that explain a choice: the logit lens, head importance, the loss change of an ablation, attribution."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from . import common
from .heatmap import AXIS_TITLE, CELL_MAX, Framing, HeatmapSpec, Marks, heatmap

BAR_PX = 18  # px per position bar: one 11 px tick label each


def lens_figure(
    top_tokens: Sequence[Sequence[str]],
    top_probs: np.ndarray,
    *,
    title: str,
    chosen: str | None = None,
    layer_labels: Sequence[str] | None = None,
) -> common.Figure:
    """What each layer would predict at one position: rows = layers, columns = rank 1..k, the token written in
    its cell, the colour its probability; cells holding ``chosen`` (the token finally chosen) are outlined."""
    p = common.as_2d(top_probs, "top_probs")
    L, k = p.shape
    toks = [common.as_tokens(row, "top_tokens row") for row in top_tokens]
    if len(toks) != L or any(len(r) != k for r in toks):
        raise ValueError(f"top_tokens must be {L} rows of {k} tokens")
    rows = list(layer_labels) if layer_labels is not None else [f"layer {i}" for i in range(L)]
    common.check_len(L, rows, "rows", f"top_probs of shape {p.shape}")
    spec = HeatmapSpec(
        x_title="rank of the token at this layer",
        y_title="decoder layer",
        value_name="probability",
        colorscale="Blues",
        zmin=0.0,
        zmax=1.0,
        row_index=False,
        col_index=False,
    )
    # the tokens written in the cells, not the column labels ("#1"), set a column's width: a phone scrolls to it
    widest = max((common.text_px(t, common.TICK_FONT + 1) for r in toks for t in r), default=0.0)
    framing = Framing(cells="rows", text_px=widest)
    fig = heatmap(p, rows, [f"#{j + 1}" for j in range(k)], spec, title=title, framing=framing)
    text = [[common.safe_label(t) for t in r] for r in toks]
    for trace in fig.data:
        if trace.get("name") == "probability":
            trace.update(
                text=text,
                texttemplate="%{text}",
                textfont=dict(size=common.TICK_FONT + 1),
                hovertemplate="%{y}, rank %{x}<br>token: %{text}<br>p = %{z:.3f}<extra></extra>",
            )
    if chosen is not None:
        fig.layout["shapes"] = [
            *fig.layout.get("shapes", []),
            *(
                common.outline("chosen", (j - 0.5, j + 0.5), (i - 0.5, i + 0.5))
                for i, r in enumerate(toks)
                for j, t in enumerate(r)
                if t == chosen
            ),
        ]
    return fig


@dataclass(frozen=True)
class LayerOptions:
    """What ``layer_position_figure``'s numbers are: ``value_name``, coloured by ``colorscale`` from ``zmin`` to
    ``zmax`` (None: the largest value, so that small probabilities still differ); its rows' labels (None: "layer
    0", "layer 1", …), named by ``y_title`` when they are not layers."""

    value_name: str = "p(chosen token)"
    layer_labels: tuple[str, ...] | None = None
    colorscale: str = "Viridis"
    zmin: float | None = 0.0
    zmax: float | None = None
    y_title: str = "decoder layer"


def layer_position_figure(
    values: np.ndarray,
    positions: Sequence[str],
    options: LayerOptions = LayerOptions(),
    *,
    title: str,
    highlight_col: int | None = None,
) -> common.Figure:
    """One number per decoder layer (rows) and position (columns), e.g. the chosen token's lens probability, as
    ``options`` says.

    Full container width (``width="stretch"``), at least 22 px per layer, every position shown (labels thinned
    and upright when they do not fit side by side), the column ``highlight_col`` outlined; the numbers are
    printed in the cells when they fit."""
    layer_labels, zmax = options.layer_labels, options.zmax
    v = common.as_2d(values)
    L, T = v.shape
    positions = common.as_tokens(positions, "positions")
    common.check_len(T, positions, "columns", f"values of shape {v.shape}")
    rows = list(layer_labels) if layer_labels is not None else [f"layer {i}" for i in range(L)]
    spec = HeatmapSpec(
        x_title="position: reads → predicts",
        y_title=options.y_title,
        value_name=options.value_name,
        colorscale=options.colorscale,
        zmin=options.zmin,
        zmax=zmax,
        row_index=False,
        show_values=True,
    )
    framing = Framing(cells="rows", zmax_shown=zmax is None)
    return heatmap(v, rows, positions, spec, title=title, marks=Marks(highlight_col=highlight_col), framing=framing)


def importance_figure(loss_delta: np.ndarray, *, title: str, kind: str) -> common.Figure:
    """Head importance: rows = layers, columns = heads, the loss increase when that head alone is removed."""
    d = common.as_2d(loss_delta, "loss_delta")
    L, H = d.shape
    m = float(np.nanmax(np.abs(d))) if np.isfinite(d).any() else 1.0
    heads = [f"head {h}" for h in range(H)]
    wide = math.ceil(max(common.text_px(h) for h in heads) + 6) if heads else CELL_MAX  # "head k" written across
    spec = HeatmapSpec(
        x_title=f"{kind}-attention head",
        y_title="decoder layer",
        value_name="loss increase",
        zmin=-m or -1.0,
        zmax=m or 1.0,
        row_index=False,
        col_index=False,
        show_values=True,
    )
    framing = Framing(cells="square", cell_max=max(CELL_MAX, wide))
    return heatmap(d, [f"layer {i}" for i in range(L)], heads, spec, title=title, framing=framing)


def loss_delta_figure(positions: Sequence[str], delta: np.ndarray, *, title: str) -> common.Figure:
    """Per-position change of the cross-entropy (ablated − baseline), one horizontal bar per position (first on
    top): right (red) = the ablation made that token less likely, left (blue) = more likely."""
    positions = common.as_tokens(positions, "positions")
    d = np.asarray(delta, dtype=np.float64).ravel()
    if d.shape[0] != len(positions):
        raise ValueError(f"{d.shape[0]} loss changes for {len(positions)} positions")
    labels = common.unique_labels(positions)
    bars = dict(
        type="bar",
        x=common.round_sig(d),
        y=labels,
        orientation="h",
        marker=dict(color=np.where(d > 0, "#d6604d", "#4393c3").tolist()),
        hovertemplate="%{y}<br>loss change %{x:+.3f} nats<extra></extra>",
    )
    layout = common.layout_defaults(title, height=0, squeezes=True)
    top, bottom = layout["margin"]["t"], common.PAD + AXIS_TITLE + int(common.FONT * 1.6)
    left = common.PAD + AXIS_TITLE + 16 + int(max(map(common.text_px, labels), default=0))
    y_title = "position: reads → predicts"
    plot_h = max(
        len(labels) * BAR_PX, int(common.text_px(y_title, common.FONT)) + 20
    )  # room for the rotated axis title
    layout.update(
        height=top + plot_h + bottom,
        margin=dict(l=left, r=30, t=top, b=bottom),
        xaxis=dict(
            title=dict(text="loss change (nats)", standoff=8),
            zeroline=True,
            zerolinecolor="#888",
            gridcolor="#eee",
            tickfont=dict(size=common.TICK_FONT),
        ),
        yaxis=dict(
            title=dict(text=y_title, standoff=8),
            type="category",
            autorange="reversed",
            tickmode="array",
            tickvals=labels,
            ticktext=labels,
            tickfont=dict(size=common.TICK_FONT),
        ),
    )
    return common.new_figure([bars], layout)
