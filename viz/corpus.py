"""Figures of a whole set: each sentence a point, the flags' counts, each signal's correlation with chrF, and what
each attention head does over the set (a layer × head grid per kind, the role written in each cell)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from . import common
from .heatmap import CELL_MAX, Framing, HeatmapSpec, heatmap

POINT_COLOR = "#4063d8"
BAR_H = 26  # px per bar of a horizontal bar chart
VALUE_ROOM = 0.3  # of the bars' span, left right of the longest bar for its written value (a phone's width)
HOVER_CHARS = 80  # a sentence in a hover is cut to this many characters


def _short(text: str, n: int = HOVER_CHARS) -> str:
    text = str(text)
    return common.safe_label(text if len(text) <= n else text[: n - 1] + "…")


def sentence_scatter(
    x: Sequence[float],
    y: Sequence[float],
    sources: Sequence[str],
    translations: Sequence[str],
    flagged: Sequence[bool],
    *,
    x_title: str,
    y_title: str,
    title: str,
) -> common.Figure:
    """One point per sentence (its index in ``customdata``, for a click to open it), flagged sentences in the
    highlight colour; the hover shows the sentence, its translation and both values. NaN points are left out."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n = len(xs)
    if not (len(ys) == len(sources) == len(translations) == len(flagged) == n):
        raise ValueError("x, y, sources, translations and flagged must have one entry per sentence")
    data = []
    for name, want, color in (("not flagged", False, POINT_COLOR), ("flagged", True, common.HIGHLIGHT_COLOR)):
        idx = [i for i in range(n) if bool(flagged[i]) == want and math.isfinite(xs[i]) and math.isfinite(ys[i])]
        data.append(
            dict(
                type="scatter",
                mode="markers",
                name=name,
                x=xs[idx].tolist(),
                y=ys[idx].tolist(),
                customdata=[[i] for i in idx],
                text=[f"#{i} {_short(sources[i])}<br>→ {_short(translations[i])}" for i in idx],
                hovertemplate=f"%{{text}}<br>{common.safe_label(x_title)} %{{x:.3g}} · "
                f"{common.safe_label(y_title)} %{{y:.3g}}<extra></extra>",
                marker=dict(color=color, size=7, opacity=0.7),
            )
        )
    layout = common.layout_defaults(title, height=380, legend=True, squeezes=True)
    layout.update(
        xaxis=dict(title=dict(text=common.safe_label(x_title)), zeroline=False, gridcolor="#eee", **_around(xs)),
        yaxis=dict(title=dict(text=common.safe_label(y_title)), zeroline=False, gridcolor="#eee", **_around(ys)),
        legend=dict(orientation="h", y=-0.2, font=dict(size=common.FONT)),
        clickmode="event+select",
    )
    layout["margin"]["b"] = 70
    # Room for the widest y tick label ("100" for chrF, "0.95" for a probability) and the axis title beside it
    finite = ys[np.isfinite(ys)]
    ticks = ["0.00"] + [f"{v:.0f}" for v in (finite.min(), finite.max())] if finite.size else ["0.00"]
    layout["margin"]["l"] = math.ceil(max(common.text_px(t, common.TICK_FONT) for t in ticks)) + common.FONT + 30
    return common.new_figure(data, layout)


def _whole_ticks(top: float) -> dict:
    """An axis of counts from 0 to ``top``: ticks on whole numbers only (a count of 0.05 sentences is no count)."""
    return dict(tick0=0, dtick=common.count_dtick(math.ceil(top)))


def _around(values: np.ndarray) -> dict:
    """An axis whose points all share one value: a range around it (0–1 for a share or a probability), where
    Plotly's own would run to values no point can take (−0.2–1.5 for one probability); else Plotly's range."""
    finite = np.unique(values[np.isfinite(values)])
    if finite.size != 1:
        return {}
    v = float(finite[0])
    return dict(range=[-0.05, 1.05] if 0.0 <= v <= 1.0 else [v - 1.0, v + 1.0])


def bar_figure(
    labels: Sequence[str],
    values: Sequence[float],
    *,
    title: str,
    x_title: str,
    fmt: str = ".0f",
    counts: bool = False,
) -> common.Figure:
    """Horizontal bars, one a label (top to bottom in the given order), each value written at its bar: past the end
    of a bar to the right, and beside the zero line for a bar to the left (past its end, a phone's narrow axes would
    put it over the row labels). ``counts``: the values are counts, the axis ticked on whole numbers."""
    vals = np.asarray(values, dtype=float)
    if len(vals) != len(labels):
        raise ValueError("one value per label")
    names = [common.safe_label(s) for s in labels]
    left = math.ceil(max((common.text_px(s, common.TICK_FONT) for s in names), default=40)) + 12
    shown = np.where(np.isfinite(vals), vals, 0.0)
    written = [format(v, fmt) if math.isfinite(v) else "n/a" for v in vals]
    data = [
        dict(
            type="bar",
            orientation="h",
            x=shown.tolist(),
            y=names,
            text=[w if v >= 0 else "" for w, v in zip(written, shown)],
            textposition="outside",
            cliponaxis=False,
            customdata=written,
            marker=dict(color=POINT_COLOR),
            hovertemplate=f"%{{y}}: %{{customdata}}<extra>{common.safe_label(x_title)}</extra>",
        )
    ]
    layout = common.layout_defaults(title, height=BAR_H * len(names) + 110, squeezes=True)
    lo, hi = min(0.0, float(shown.min(initial=0.0))), max(0.0, float(shown.max(initial=0.0)))
    if counts:
        hi = max(hi, 1.0)
    room = VALUE_ROOM * ((hi - lo) or 1.0)  # the values written right of a bar or of the zero line, inside the axes
    layout.update(
        xaxis=dict(
            title=dict(text=common.safe_label(x_title)),
            gridcolor="#eee",
            automargin=True,
            range=[lo, hi + room],
            **(_whole_ticks(hi) if counts else {}),
        ),
        yaxis=dict(autorange="reversed", tickfont=dict(size=common.TICK_FONT)),
        annotations=[
            dict(x=0, y=n, text=w, xanchor="left", xshift=3, showarrow=False, font=dict(size=common.TICK_FONT))
            for n, w, v in zip(names, written, shown)
            if v < 0
        ],
    )
    layout["margin"].update(l=left + common.PAD, r=40, b=50)
    return common.new_figure(data, layout)


def _two(x: float) -> str:
    """Two decimals, a value that rounds to zero written 0.00 (never "-0.00")."""
    text = f"{x:.2f}"
    return "0.00" if text == "-0.00" else text


GRID_CELL_MIN = 56  # px: a head's cell holds its role a word a line and its value, at 11 px


def head_grid(values: np.ndarray, roles: np.ndarray, *, title: str, value_name: str, layer_name: str) -> common.Figure:
    """A layer × head grid of one statistic over the set, each cell labelled with the head's role (a word a line)
    and its value: the values are printed, so no colour bar takes the room that lets four heads fit a phone."""
    v = common.as_2d(values, "values")
    r = np.asarray(roles)
    if r.shape != v.shape:
        raise ValueError(f"roles {r.shape} and values {v.shape} must have one shape")
    L, H = v.shape
    finite = v[np.isfinite(v)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    words = [[str(r[i, j]).split() or [""] for j in range(H)] for i in range(L)]
    labels = [
        ["<br>".join([*words[i][j], *([_two(v[i, j])] if math.isfinite(v[i, j]) else [])]) for j in range(H)]
        for i in range(L)
    ]
    widest = max((common.text_px(w, common.TICK_FONT) for row in words for cell in row for w in cell), default=0.0)
    spec = HeatmapSpec(
        x_title="head",
        y_title=layer_name,
        value_name=value_name,
        colorscale="Blues",
        zmin=lo,
        zmax=hi if hi > lo else lo + 1.0,
        row_index=False,
        col_index=False,
        show_values=False,
        show_scale=False,
    )
    fig = heatmap(
        v,
        [str(i) for i in range(L)],  # numbers under the axes' titles: the room is the cells'
        [str(h) for h in range(H)],
        spec,
        title=title,
        framing=Framing(cells="square", cell_max=max(CELL_MAX, math.ceil(widest) + 4, GRID_CELL_MIN)),
    )
    data, layout = common.figure_parts(fig)
    cells = {**data[0], "text": labels, "texttemplate": "%{text}", "textfont": dict(size=common.TICK_FONT)}
    return common.new_figure([cells, *data[1:]], layout)


DIFF_BIN = 5.0  # chrF points per bar of a difference histogram


def difference_histogram(delta: Sequence[float], runs: tuple[str, str], *, title: str, x_title: str) -> common.Figure:
    """How many sentences moved by how much: bars of DIFF_BIN points of a per-sentence difference (second run of
    ``runs`` minus the first), those that got better in the highlight colour, those unchanged (exactly 0) counted
    in the y axis's title; the x axis's title names the runs on a line of their own (a phone's width)."""
    d = np.asarray(delta, dtype=float)
    d = d[np.isfinite(d)]
    if d.size == 0:
        raise ValueError("no finite difference to draw")
    edge = DIFF_BIN * max(1.0, math.ceil(np.abs(d).max() / DIFF_BIN))
    bins = np.arange(-edge, edge + DIFF_BIN / 2, DIFF_BIN)
    moved = d[d != 0]
    counts, _ = np.histogram(moved, bins)
    mids = (bins[:-1] + bins[1:]) / 2
    same = int((d == 0).sum())
    data = []
    for name, keep, color in (("worse", mids < 0, POINT_COLOR), ("better", mids > 0, common.HIGHLIGHT_COLOR)):
        data.append(
            dict(
                type="bar",
                name=name,
                x=mids[keep].tolist(),
                y=counts[keep].tolist(),
                width=DIFF_BIN * 0.9,
                marker=dict(color=color),
                hovertemplate=f"%{{y}} sentences {name} by %{{customdata}}<extra></extra>",
                customdata=[f"{abs(m) - DIFF_BIN / 2:.0f}–{abs(m) + DIFF_BIN / 2:.0f}" for m in mids[keep]],
            )
        )
    layout = common.layout_defaults(title, height=400, squeezes=True)
    # the key inside the plot's top corners, on the side each colour is drawn: a legend below the axis title met it
    # once a phone's width wrapped the title and shortened the plot
    key = [
        dict(text=f"<span style='color:{color}'>■</span> {words}", x=x, xanchor=x_anchor)
        for words, color, x, x_anchor in (
            ("← worse", POINT_COLOR, 0, "left"),
            ("better →", common.HIGHLIGHT_COLOR, 1, "right"),
        )
    ]
    layout.update(
        xaxis=dict(
            title=dict(
                text=f"{common.safe_label(x_title)}<br>({common.safe_label(runs[1])} − {common.safe_label(runs[0])})"
            ),
            zeroline=True,
            zerolinecolor="#888",
            gridcolor="#eee",
        ),
        yaxis=dict(
            title=dict(text=f"sentences ({same:,} unchanged, not drawn)"),
            gridcolor="#eee",
            range=[0, 1.25 * max(int(counts.max()), 1)],  # room for the key above the tallest bar
            **_whole_ticks(int(counts.max())),
        ),
        annotations=[
            dict(a, xref="paper", yref="paper", y=1, yanchor="top", showarrow=False, font=dict(size=common.FONT))
            for a in key
        ],
        showlegend=False,
        bargap=0.05,
    )
    layout["margin"].update(l=common.FONT + 50, b=common.FONT * 2 + 50)
    return common.new_figure(data, layout)
