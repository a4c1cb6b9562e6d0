"""The one heatmap helper every matrix figure in the app goes through."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from .common import (
    HIGHLIGHT_COLOR,
    MASK_COLOR,
    MASKED_HOVER,
    as_2d,
    auto_height,
    check_len,
    check_row,
    layout_defaults,
    round_sig,
    safe_label,
    unique_labels,
)

MAX_TICKS = 60  # label every category up to this many; beyond, Plotly thins the ticks itself
MAX_TEXT_CELLS = 12  # cell values are printed only on heatmaps up to 12 x 12
CHAR_PX = 7.5  # a generous width of one 12 px tick-label character


def _margins(xaxis: dict, yaxis: dict, title: str | None) -> dict:
    """Margins wide enough for the tick labels, axis titles and colour bar that Plotly would otherwise
    push out with automargin, which costs a second layout pass on every redraw (automargin stays on, so
    a label longer than estimated still fits). Category axes: the longest label (rotated up to 90° on x)."""

    def room(axis: dict) -> float:
        labels = axis.get("ticktext") or []
        if axis.get("showticklabels") is False:
            return 0.0
        return CHAR_PX * max((len(str(t)) for t in labels), default=4)

    title_px = 28  # an axis title and its standoff
    return dict(l=int(20 + title_px + room(yaxis)), r=110, t=60 if title else 30, b=int(20 + title_px + room(xaxis)))


def _axis_ref(fig: go.Figure, row: int | None, col: int | None) -> tuple[str, str]:
    """Layout names ("xaxis2", "yaxis2") of the subplot at (row, col), or of the only axes."""
    if row is None or col is None:
        return "xaxis", "yaxis"
    ref = fig.get_subplot(row, col)
    return ref.xaxis.plotly_name, ref.yaxis.plotly_name


def _heatmap_parts(
    values: np.ndarray,
    row_labels: Sequence[object],
    col_labels: Sequence[object],
    *,
    x_title: str,
    y_title: str,
    x_name: str | None,
    y_name: str | None,
    colorscale: str | list,
    zmin: float | None,
    zmax: float | None,
    zmid: float | None,
    coloraxis: str,
    colorbar: dict | None,
    highlight_row: int | None,
    masked_hover: str,
    value_name: str,
    decimals: int,
    row_index: bool,
    col_index: bool,
    show_values: bool | None,
    hover_text: np.ndarray | None,
    show_row_ticks: bool,
    show_col_ticks: bool,
) -> tuple[list[dict], dict, dict, dict, dict | None]:
    """Plain-dict pieces of one heatmap: (traces, colour axis, x axis, y axis, highlight shape or None).

    Dicts, not graph objects: a figure built from them in one go is validated once (about 10x faster
    than adding traces and updating the layout piece by piece).
    """
    v = as_2d(values)
    R, C = v.shape
    check_len(R, row_labels, "rows", f"values of shape {v.shape}")
    check_len(C, col_labels, "columns", f"values of shape {v.shape}")
    hl = check_row(highlight_row, R)
    ys = unique_labels(row_labels, index=row_index)
    xs = unique_labels(col_labels, index=col_index)
    masked = ~np.isfinite(v)
    z = round_sig(np.where(masked, np.nan, v), decimals)

    xn = safe_label(x_name if x_name is not None else x_title or "column")
    yn = safe_label(y_name if y_name is not None else y_title or "row")
    vn = safe_label(value_name)
    where = f"{yn}: %{{y}}<br>{xn}: %{{x}}"
    if hover_text is not None:
        ht = np.asarray(hover_text, dtype=object)
        if ht.shape != v.shape:
            raise ValueError(f"hover_text has shape {ht.shape} but values have shape {v.shape}")
        text = [[safe_label(t) for t in r] for r in ht]
        hovertemplate = f"{where}<br>%{{text}}<extra></extra>"
    else:
        text = None
        hovertemplate = f"{where}<br>{vn}: %{{z:.{decimals}g}}<extra></extra>"
    show_values = bool(show_values) and R <= MAX_TEXT_CELLS and C <= MAX_TEXT_CELLS
    trace = dict(type="heatmap", z=z, x=xs, y=ys, coloraxis=coloraxis, hoverongaps=False,
                 hovertemplate=hovertemplate, name=vn, textfont=dict(size=10))  # fmt: skip
    if text is not None:
        trace["text"] = text
    if show_values:
        trace["texttemplate"] = "%{z:.2f}"
    traces = [trace]
    if masked.any():
        overlay = np.where(masked, 1.0, np.nan).astype(np.float32)
        traces.append(dict(
            type="heatmap", z=overlay, x=xs, y=ys, zmin=0, zmax=1, colorscale=[[0, MASK_COLOR], [1, MASK_COLOR]],
            showscale=False, hoverongaps=False, name="masked",
            hovertemplate=f"{where}<br>{safe_label(masked_hover)}<extra></extra>",
        ))  # fmt: skip

    extra = dict(colorbar or {})
    bar = {"thickness": 12, **extra, "title": {"text": vn, "side": "right", **extra.get("title", {})}}
    axis = dict(colorscale=colorscale, colorbar=bar)
    if zmin is not None:
        axis["cmin"] = zmin
    if zmax is not None:
        axis["cmax"] = zmax
    if zmid is not None and (zmin is None or zmax is None):
        axis["cmid"] = zmid

    def ticks(labels: list[str], show: bool, every: bool) -> dict:
        if not show:
            return dict(showticklabels=False)
        if every and len(labels) <= MAX_TICKS:  # token axes: one label per token
            return dict(tickmode="array", tickvals=labels, ticktext=labels, showticklabels=True)
        return dict(tickmode="auto", showticklabels=True)

    xaxis = dict(type="category", title=dict(text=safe_label(x_title)), showgrid=False, zeroline=False,
                 automargin=True, ticks="", **ticks(xs, show_col_ticks, col_index))  # fmt: skip
    yaxis = dict(type="category", title=dict(text=safe_label(y_title)), showgrid=False, zeroline=False,
                 automargin=True, ticks="", autorange="reversed", **ticks(ys, show_row_ticks, row_index))  # fmt: skip
    shape = None
    if hl is not None:
        shape = dict(type="rect", x0=-0.5, x1=C - 0.5, y0=hl - 0.5, y1=hl + 0.5,
                     line=dict(color=HIGHLIGHT_COLOR, width=2.5), fillcolor="rgba(0,0,0,0)", layer="above",
                     name="highlight")  # fmt: skip
    return traces, axis, xaxis, yaxis, shape


def add_heatmap(
    fig: go.Figure,
    values: np.ndarray,
    row_labels: Sequence[object],
    col_labels: Sequence[object],
    *,
    row: int | None = None,
    col: int | None = None,
    x_title: str = "",
    y_title: str = "",
    x_name: str | None = None,
    y_name: str | None = None,
    colorscale: str | list = "RdBu_r",
    zmin: float | None = None,
    zmax: float | None = None,
    zmid: float | None = None,
    coloraxis: str = "coloraxis",
    colorbar: dict | None = None,
    highlight_row: int | None = None,
    masked_hover: str = MASKED_HOVER,
    value_name: str = "value",
    decimals: int = 4,
    row_index: bool = True,
    col_index: bool = True,
    show_values: bool | None = None,
    hover_text: np.ndarray | None = None,
    show_row_ticks: bool = True,
    show_col_ticks: bool = True,
) -> go.Figure:
    """Add one heatmap (values + masked overlay + optional highlighted row) to ``fig`` (a subplot or not).

    ``values`` (R, C) rows are ``row_labels`` (y, top to bottom), columns ``col_labels`` (x).
    Non-finite cells (-inf, NaN) become NaN in the value trace and are covered by a grey overlay
    trace whose hover reads ``masked_hover``. Colours go through the layout colour axis ``coloraxis``
    so several heatmaps can share one scale (and one colour bar).
    """
    traces, axis, xaxis, yaxis, shape = _heatmap_parts(
        values, row_labels, col_labels, x_title=x_title, y_title=y_title, x_name=x_name, y_name=y_name,
        colorscale=colorscale, zmin=zmin, zmax=zmax, zmid=zmid, coloraxis=coloraxis, colorbar=colorbar,
        highlight_row=highlight_row, masked_hover=masked_hover, value_name=value_name, decimals=decimals,
        row_index=row_index, col_index=col_index, show_values=show_values, hover_text=hover_text,
        show_row_ticks=show_row_ticks, show_col_ticks=show_col_ticks,
    )  # fmt: skip
    for t in traces:
        fig.add_trace(go.Heatmap({k: v for k, v in t.items() if k != "type"}), row=row, col=col)
    xa, ya = _axis_ref(fig, row, col)
    fig.update_layout({coloraxis: axis, xa: xaxis, ya: yaxis})
    if shape is not None:
        fig.add_shape(**shape, row=row, col=col)
    return fig


def heatmap(
    values: np.ndarray,
    row_labels: Sequence[object],
    col_labels: Sequence[object],
    *,
    title: str,
    x_title: str,
    y_title: str,
    colorscale: str | list = "RdBu_r",
    zmid: float | None = None,
    zmin: float | None = None,
    zmax: float | None = None,
    highlight_row: int | None = None,
    masked_hover: str = MASKED_HOVER,
    value_name: str = "value",
    decimals: int = 4,
    row_index: bool = True,
    col_index: bool = True,
    show_values: bool | None = None,
    hover_text: np.ndarray | None = None,
    colorbar: dict | None = None,
    height: int | None = None,
) -> go.Figure:
    """A labelled heatmap of ``values`` (R, C): rows = ``row_labels`` (top to bottom), columns = ``col_labels``.

    -inf and NaN cells are masked (grey, hover ``masked_hover``); ``highlight_row`` (negative counts
    from the end) is outlined; values are sent as float32 rounded to ``decimals`` significant digits.
    ``row_index`` / ``col_index`` prefix labels with their position ("3:▁le") so repeated tokens stay
    distinct (without the prefix, labels are kept unless two coincide). ``show_values`` prints the
    values in the cells (only on heatmaps up to 12 x 12).
    """
    traces, axis, xaxis, yaxis, shape = _heatmap_parts(
        values, row_labels, col_labels, x_title=x_title, y_title=y_title, x_name=None, y_name=None,
        colorscale=colorscale, zmin=zmin, zmax=zmax, zmid=zmid, coloraxis="coloraxis", colorbar=colorbar,
        highlight_row=highlight_row, masked_hover=masked_hover, value_name=value_name, decimals=decimals,
        row_index=row_index, col_index=col_index, show_values=show_values, hover_text=hover_text,
        show_row_ticks=True, show_col_ticks=True,
    )  # fmt: skip
    layout = layout_defaults(title, height=height or auto_height(len(row_labels)))
    layout.update(coloraxis=axis, xaxis=xaxis, yaxis=yaxis, shapes=[shape] if shape else [],
                  margin=_margins(xaxis, yaxis, title))  # fmt: skip
    return go.Figure(data=traces, layout=layout)
