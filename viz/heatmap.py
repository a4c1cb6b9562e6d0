"""The one heatmap helper every matrix figure in the app goes through, and the pixel geometry that keeps
heatmaps legible: square token cells of a fixed size, or full-width matrices with fixed-height rows."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import plotly.graph_objects as go

from .common import (
    FONT,
    HIGHLIGHT_COLOR,
    MASK_COLOR,
    MASKED_HOVER,
    MIN_WIDTH,
    PAD,
    TICK_FONT,
    as_2d,
    check_len,
    check_row,
    layout_defaults,
    round_sig,
    safe_label,
    text_px,
    title_block,
    unique_labels,
)

MAX_TEXT_CELLS = 12  # cell values are printed only on heatmaps up to 12 x 12 ...
TEXT_CELL_PX = 34  # ... whose cells are wide enough for "-0.25" at 11 px
CELL_MIN = 22  # square cells up to 20 x 20 tokens
CELL_MAX = 40
WINDOW_CELL = 14  # larger matrices: cells this big (still one label per row), a window of them shown
WINDOW_TOKENS = 20
LABEL_PX = 14  # room one tick label needs along its axis (11 px text)
PLOT_MAX_W = 820  # square figures fit a MIN_WIDTH container
PLOT_MAX_H = 620
ROW_PX = 22  # wide matrices: px per token row up to 20 rows ...
ROW_MIN = 16  # ... then this
ROWS_MAX_H = 800  # beyond this many px of rows a window of rows is shown
PLOT_MIN_H = 110  # a colour bar shorter than this cannot hold its tick labels
CB_MIN = 150
CB_THICK = 14
AXIS_TITLE = 24  # an axis title and its standoff
FIG_MIN_W = 380  # square figures are at least this wide so the title has room


class Window(NamedTuple):
    start: int
    count: int


def window(total: int, count: int, focus: int | None, *, align: str = "center") -> Window:
    """The ``count`` consecutive positions out of ``total`` to show first, containing ``focus`` when given."""
    count = max(1, min(count, total))
    if focus is None or count >= total:
        return Window(0, count)
    if align == "end":  # focus near the right edge, one position of context after it
        start = focus - count + 2
    else:
        start = focus - count // 2
    return Window(int(min(max(start, 0), total - count)), count)


def label_step(px_per_item: float, need: float = LABEL_PX) -> int:
    """Label every n-th category so neighbouring labels are at least ``need`` px apart."""
    return max(1, math.ceil(need / max(px_per_item, 1e-9)))


def left_margin(row_labels: Sequence[str], y_title: str) -> int:
    """Room left of the plot for the row labels and the y-axis title (Plotly keeps about 12 px of air)."""
    return PAD + (AXIS_TITLE if y_title else 0) + int(max((text_px(s) for s in row_labels), default=0)) + 16


def colorbar_px(tick_texts: Sequence[str] | None, title: str | None) -> int:
    """Horizontal room of a vertical colour bar right of the plot: pad, bar, tick labels, rotated title."""
    ticks = max((text_px(t) for t in tick_texts), default=0) if tick_texts else text_px("-0.000")
    return int(10 + CB_THICK + 4 + ticks + (FONT * 1.6 if title else 0) + PAD)


def colorbar_dict(
    extra: dict | None, title: str, *, length: float, y: float = 1.0, x: float = 1.0, xpad: int = 10
) -> dict:
    """A vertical colour bar beside its plot (``xpad`` px right of it), top-aligned, ``length`` px long."""
    extra = dict(extra or {})
    bar = dict(thickness=CB_THICK, x=x, xanchor="left", xref="paper", xpad=int(xpad), y=y, yanchor="top", ypad=0,
               len=int(length), lenmode="pixels", outlinewidth=0, tickfont=dict(size=TICK_FONT))  # fmt: skip
    bar.update({k: v for k, v in extra.items() if k != "title"})
    bar["title"] = {"text": title, "side": "right", "font": {"size": FONT}, **extra.get("title", {})}
    return bar


class SquareGeometry(NamedTuple):
    cell: int
    rows: Window
    cols: Window
    row_step: int
    col_step: int
    col_angle: int
    margin: dict
    width: int
    height: int
    title: dict
    cb_xpad: int


def y_title_overflow(y_title: str, plot_h: float) -> int:
    """How far a (rotated, centred) y-axis title longer than its plot reaches above and below it."""
    return int(max(0, math.ceil((text_px(y_title, FONT) - plot_h) / 2) + 4)) if y_title else 0


def bottom_margin(col_px: float, col_angle: int, x_title: str) -> int:
    """Room under a plot for its column labels (horizontal, or rotated ``col_px`` long) and x-axis title."""
    return PAD + (AXIS_TITLE if x_title else 0) + int(FONT * 1.5 if col_angle == 0 else col_px + 6)


def bar_clearance(x_title: str, plot_w: float, plot_h: float) -> int:
    """How far right of a plot its colour bar goes so that, longer than a short plot, it clears the
    centred x-axis title below the plot."""
    if plot_h >= CB_MIN:
        return 10
    return int(max(10, text_px(x_title, FONT) / 2 - plot_w / 2 + 8))


def square_geometry(
    n_rows: int,
    n_cols: int,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    *,
    title: str | None,
    x_title: str,
    y_title: str,
    cb_px: int,
    highlight_row: int | None,
    same_axes: bool,
    panels: tuple[int, int] = (1, 1),
    gaps: tuple[int, int] = (0, 0),
    max_plot_h: int = PLOT_MAX_H,
    focus_col: int | None = None,
    cell_max: int = CELL_MAX,
) -> SquareGeometry:
    """Cell size, initial window and margins of a square-cell heatmap (or a grid of ``panels`` = (rows, cols)
    of them ``gaps`` px apart) that fits a ``MIN_WIDTH`` container: cells of ``CELL_MIN``..``CELL_MAX`` px
    up to ``WINDOW_TOKENS`` tokens, else at least ``WINDOW_CELL`` px with a window containing the row."""
    prow, pcol = panels
    left = left_margin(row_labels, y_title)
    budget_w = min(PLOT_MAX_W, MIN_WIDTH - left - cb_px)
    budget_w = (budget_w - gaps[1] * (pcol - 1)) / pcol
    budget_h = (max_plot_h - gaps[0] * (prow - 1)) / prow
    fit = min(budget_w / max(n_cols, 1), budget_h / max(n_rows, 1))
    small = max(n_rows, n_cols) <= WINDOW_TOKENS
    cell = int(min(cell_max, max(CELL_MIN if small else WINDOW_CELL, math.floor(fit))))
    for _ in range(2):
        nx = min(n_cols, max(1, int(budget_w // cell)))
        ny = min(n_rows, max(1, int(budget_h // cell)))
        if cell < CELL_MIN and nx <= WINDOW_TOKENS and ny <= WINDOW_TOKENS:
            cell = CELL_MIN  # a window this small is shown at the small-matrix size
            continue
        break
    rows = window(n_rows, ny, highlight_row)
    if focus_col is None and same_axes:
        focus_col = highlight_row
    cols = window(n_cols, nx, focus_col, align="end")
    col_px = max((text_px(s) for s in col_labels), default=0)
    col_angle = 0 if col_px + 4 <= cell else -90
    col_step = 1 if col_angle == 0 else label_step(cell)
    bottom = bottom_margin(col_px, col_angle, x_title)
    plot_w = cols.count * cell * pcol + gaps[1] * (pcol - 1)
    plot_h = rows.count * cell * prow + gaps[0] * (prow - 1)
    xpad = bar_clearance(x_title, plot_w / pcol, plot_h)
    width = max(FIG_MIN_W, left + plot_w + cb_px + xpad - 10)
    block, top = title_block(title, width)
    over = y_title_overflow(y_title, rows.count * cell)
    top, bottom = top + over, max(bottom, over + PAD)
    height = top + max(plot_h + bottom, CB_MIN + PAD)
    margin = dict(l=left, r=width - left - plot_w, t=top, b=height - top - plot_h, autoexpand=True)
    return SquareGeometry(cell, rows, cols, label_step(cell), col_step, col_angle, margin, width, height, block,
                          xpad)  # fmt: skip


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
    x_values: np.ndarray | None = None,
    row_step: int = 1,
    col_step: int = 1,
    col_angle: int = 0,
    cell_px: float | None = None,
) -> tuple[list[dict], dict, dict, dict, dict | None]:
    """Plain-dict pieces of one heatmap: (traces, colour axis, x axis, y axis, highlight shape or None).

    Dicts, not graph objects: a figure built from them in one go is validated once (about 10x faster
    than adding traces and updating the layout piece by piece). ``x_values`` (numeric column positions,
    e.g. true dimension numbers) replace the category column labels with a linear axis whose ticks
    Plotly thins itself; category axes label every ``row_step``-th / ``col_step``-th category.
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
    xcoord: list | np.ndarray = xs if x_values is None else np.asarray(x_values, dtype=np.int32)

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
    roomy = cell_px is None or cell_px >= TEXT_CELL_PX
    show_values = bool(show_values) and R <= MAX_TEXT_CELLS and C <= MAX_TEXT_CELLS and roomy
    trace = dict(type="heatmap", z=z, x=xcoord, y=ys, coloraxis=coloraxis, hoverongaps=False,
                 hovertemplate=hovertemplate, name=vn, textfont=dict(size=TICK_FONT))  # fmt: skip
    if text is not None:
        trace["text"] = text
    if show_values:
        trace["texttemplate"] = "%{z:.2f}"
    traces = [trace]
    if masked.any():
        overlay = np.where(masked, 1.0, np.nan).astype(np.float32)
        traces.append(dict(
            type="heatmap", z=overlay, x=xcoord, y=ys, zmin=0, zmax=1, colorscale=[[0, MASK_COLOR], [1, MASK_COLOR]],
            showscale=False, hoverongaps=False, name="masked",
            hovertemplate=f"{where}<br>{safe_label(masked_hover)}<extra></extra>",
        ))  # fmt: skip

    extra = dict(colorbar or {})
    bar = {"thickness": CB_THICK, "tickfont": {"size": TICK_FONT}, **extra,
           "title": {"text": vn, "side": "right", "font": {"size": FONT}, **extra.get("title", {})}}  # fmt: skip
    axis = dict(colorscale=colorscale, colorbar=bar)
    if zmin is not None:
        axis["cmin"] = zmin
    if zmax is not None:
        axis["cmax"] = zmax
    if zmid is not None and (zmin is None or zmax is None):
        axis["cmid"] = zmid

    def ticks(labels: list[str], show: bool, step: int) -> dict:
        if not show:
            return dict(showticklabels=False)
        shown = labels[::step]
        return dict(tickmode="array", tickvals=shown, ticktext=shown, showticklabels=True)

    tickfont = dict(size=TICK_FONT)
    title_font = dict(size=FONT)
    if x_values is None:
        xaxis = dict(type="category", tickangle=col_angle, **ticks(xs, show_col_ticks, col_step))
        x0, x1 = -0.5, C - 0.5
    else:
        x0, x1 = float(xcoord[0]) - 0.5 if C else -0.5, float(xcoord[-1]) + 0.5 if C else 0.5
        xaxis = dict(type="linear", tickformat="d", range=[x0, x1], showticklabels=show_col_ticks, tickangle=0)
    xaxis.update(title=dict(text=safe_label(x_title), font=title_font, standoff=8), showgrid=False, zeroline=False,
                 automargin=True, ticks="", tickfont=tickfont)  # fmt: skip
    yaxis = dict(type="category", title=dict(text=safe_label(y_title), font=title_font, standoff=8), showgrid=False,
                 zeroline=False, automargin=True, ticks="", autorange="reversed", tickfont=tickfont,
                 **ticks(ys, show_row_ticks, row_step))  # fmt: skip
    shape = None
    if hl is not None:
        shape = dict(type="rect", x0=x0, x1=x1, y0=hl - 0.5, y1=hl + 0.5,
                     line=dict(color=HIGHLIGHT_COLOR, width=2.5), fillcolor="rgba(0,0,0,0)", layer="above",
                     name="highlight")  # fmt: skip
    return traces, axis, xaxis, yaxis, shape


def set_window(axis: dict, win: Window, total: int, *, reverse: bool = False) -> bool:
    """Give a category (or unit-spaced) axis the initial range of ``win``; True when that is not everything.

    Always explicit: an autorange would pad for the highlight outline's line width and unsquare the cells.
    """
    lo, hi = win.start - 0.5, win.start + win.count - 0.5
    axis["range"] = [hi, lo] if reverse else [lo, hi]
    axis["autorange"] = False
    return win.count < total


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
    x_values: np.ndarray | None = None,
    row_step: int = 1,
    col_step: int = 1,
    col_angle: int = 0,
) -> go.Figure:
    """Add one heatmap (values + masked overlay + optional highlighted row) to ``fig`` (a subplot or not).

    ``values`` (R, C) rows are ``row_labels`` (y, top to bottom), columns ``col_labels`` (x).
    Non-finite cells (-inf, NaN) become NaN in the value trace and are covered by a grey overlay
    trace whose hover reads ``masked_hover``. Colours go through the layout colour axis ``coloraxis``
    so several heatmaps can share one scale (and one colour bar). Sizing is the caller's.
    """
    traces, axis, xaxis, yaxis, shape = _heatmap_parts(
        values, row_labels, col_labels, x_title=x_title, y_title=y_title, x_name=x_name, y_name=y_name,
        colorscale=colorscale, zmin=zmin, zmax=zmax, zmid=zmid, coloraxis=coloraxis, colorbar=colorbar,
        highlight_row=highlight_row, masked_hover=masked_hover, value_name=value_name, decimals=decimals,
        row_index=row_index, col_index=col_index, show_values=show_values, hover_text=hover_text,
        show_row_ticks=show_row_ticks, show_col_ticks=show_col_ticks, x_values=x_values, row_step=row_step,
        col_step=col_step, col_angle=col_angle,
    )  # fmt: skip
    for t in traces:
        fig.add_trace(go.Heatmap({k: v for k, v in t.items() if k != "type"}), row=row, col=col)
    xa, ya = _axis_ref(fig, row, col)
    fig.update_layout({coloraxis: axis, xa: xaxis, ya: yaxis})
    if shape is not None:
        fig.add_shape(**shape, row=row, col=col)
    return fig


def _bar_ticks(colorbar: dict | None) -> list[str] | None:
    return [str(t) for t in (colorbar or {}).get("ticktext") or []] or None


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
    cells: str | None = None,
    x_values: np.ndarray | None = None,
    same_axes: bool | None = None,
    focus_col: int | None = None,
) -> go.Figure:
    """A labelled heatmap of ``values`` (R, C): rows = ``row_labels`` (top to bottom), columns = ``col_labels``.

    -inf and NaN cells are masked (grey, hover ``masked_hover``); ``highlight_row`` (negative counts
    from the end) is outlined; values are sent as float32 rounded to ``decimals`` significant digits.
    ``row_index`` / ``col_index`` prefix labels with their position ("3:▁le") so repeated tokens stay
    distinct (without the prefix, labels are kept unless two coincide). ``show_values`` prints the
    values in the cells (only on heatmaps up to 12 x 12 whose cells are wide enough).

    ``cells`` (also ``layout.meta["cells"]``): "square" = square cells of a fixed size, ``layout.width``
    set (render ``width="content"``), a window of the matrix when it is large; "rows" = full container
    width (no ``layout.width``: render ``width="stretch"``), fixed px per row. None: "rows" for more than
    64 columns, else "square". ``x_values``: numeric column positions (a linear x axis, "rows" figures).
    ``same_axes``: rows and columns are the same positions (self-attention): the column window follows
    the highlighted row; ``focus_col``: a column the initial window must show. ``height`` caps a square
    figure's height, fixes a "rows" figure's.
    """
    v = as_2d(values)
    cells = cells or ("rows" if v.shape[1] > 64 else "square")
    if cells not in ("square", "rows"):
        raise ValueError(f"cells must be 'square' or 'rows', not {cells!r}")
    check_len(v.shape[0], row_labels, "rows", f"values of shape {v.shape}")
    check_len(v.shape[1], col_labels, "columns", f"values of shape {v.shape}")
    hl = check_row(highlight_row, v.shape[0])
    R, C = v.shape
    ys = unique_labels(row_labels, index=row_index)
    cb_px = colorbar_px(_bar_ticks(colorbar), value_name)
    if cells == "square":
        xs = unique_labels(col_labels, index=col_index)
        same = R == C if same_axes is None else same_axes
        g = square_geometry(R, C, ys, xs, title=title, x_title=x_title, y_title=y_title, cb_px=cb_px,
                            highlight_row=hl, same_axes=same, focus_col=focus_col,
                            max_plot_h=PLOT_MAX_H if height is None else max(CELL_MIN, height - 150))  # fmt: skip
        traces, axis, xaxis, yaxis, shape = _heatmap_parts(
            v, row_labels, col_labels, x_title=x_title, y_title=y_title, x_name=None, y_name=None,
            colorscale=colorscale, zmin=zmin, zmax=zmax, zmid=zmid, coloraxis="coloraxis", colorbar=colorbar,
            highlight_row=hl, masked_hover=masked_hover, value_name=value_name, decimals=decimals,
            row_index=row_index, col_index=col_index, show_values=show_values, hover_text=hover_text,
            show_row_ticks=True, show_col_ticks=True, row_step=g.row_step, col_step=g.col_step,
            col_angle=g.col_angle, cell_px=g.cell,
        )  # fmt: skip
        axis["colorbar"] = colorbar_dict(axis["colorbar"], axis["colorbar"]["title"]["text"],
                                         length=max(g.rows.count * g.cell, CB_MIN), xpad=g.cb_xpad)  # fmt: skip
        moved = set_window(xaxis, g.cols, C) | set_window(yaxis, g.rows, R, reverse=True)
        layout = layout_defaults(title, height=g.height, width=g.width, cells="square")
        layout.update(margin=g.margin, title=g.title)
    else:
        geo = rows_geometry(R, ys, title=title, x_title=x_title, y_title=y_title, cb_px=cb_px, highlight_row=hl,
                            height=height)  # fmt: skip
        traces, axis, xaxis, yaxis, shape = _heatmap_parts(
            v, row_labels, col_labels, x_title=x_title, y_title=y_title, x_name=None, y_name=None,
            colorscale=colorscale, zmin=zmin, zmax=zmax, zmid=zmid, coloraxis="coloraxis", colorbar=colorbar,
            highlight_row=hl, masked_hover=masked_hover, value_name=value_name, decimals=decimals,
            row_index=row_index, col_index=col_index, show_values=show_values, hover_text=hover_text,
            show_row_ticks=True, show_col_ticks=True, x_values=x_values, row_step=geo.row_step,
            col_step=1 if x_values is not None else col_label_step(C, col_labels, col_index, geo.margin),
            cell_px=min(geo.row_px, (MIN_WIDTH - geo.margin["l"] - geo.margin["r"]) / max(C, 1)),
        )  # fmt: skip
        axis["colorbar"] = colorbar_dict(axis["colorbar"], axis["colorbar"]["title"]["text"], length=geo.plot_h)
        moved = set_window(yaxis, geo.rows, R, reverse=True)
        if x_values is None:
            set_window(xaxis, Window(0, C), C)
        layout = layout_defaults(title, height=geo.height, cells="rows")
        layout.update(margin=geo.margin, title=geo.title)
    if moved:
        layout["dragmode"] = "pan"  # the rest of the matrix is a drag away
    layout.update(coloraxis=axis, xaxis=xaxis, yaxis=yaxis, shapes=[shape] if shape else [])
    return go.Figure(data=traces, layout=layout)


class RowsGeometry(NamedTuple):
    row_px: float
    rows: Window
    row_step: int
    plot_h: int
    margin: dict
    height: int
    title: dict


def rows_geometry(
    n_rows: int,
    row_labels: Sequence[str],
    *,
    title: str | None,
    x_title: str,
    y_title: str,
    cb_px: int,
    highlight_row: int | None,
    height: int | None = None,
    extra_top: int = 0,
) -> RowsGeometry:
    """Rows, window and margins of a full-width matrix: ``ROW_PX`` px per row up to 20 rows, else ``ROW_MIN``,
    at most ``ROWS_MAX_H`` px of rows (a window containing the highlighted row), at least ``PLOT_MIN_H``."""
    left = left_margin(row_labels, y_title)
    block, top = title_block(title, MIN_WIDTH)
    top += extra_top
    bottom = PAD + (AXIS_TITLE if x_title else 0) + int(FONT * 1.6)
    row_px = ROW_PX if n_rows <= WINDOW_TOKENS else ROW_MIN
    rows = window(n_rows, int(ROWS_MAX_H // row_px), highlight_row)
    plot_h = max(PLOT_MIN_H, rows.count * row_px)
    if height is not None:
        plot_h = max(PLOT_MIN_H, height - top - bottom)
    eff = plot_h / rows.count
    margin = dict(l=left, r=cb_px, t=top, b=bottom, autoexpand=True)
    return RowsGeometry(eff, rows, label_step(eff), int(plot_h), margin, int(top + plot_h + bottom), block)


def col_label_step(n_cols: int, col_labels: Sequence[object], col_index: bool, margin: dict) -> int:
    """Every n-th horizontal column label of a full-width category axis, at the narrowest container."""
    labels = unique_labels(col_labels, index=col_index)
    per = (MIN_WIDTH - margin["l"] - margin["r"]) / max(n_cols, 1)
    return label_step(per, max((text_px(s) for s in labels), default=0) + 8)
