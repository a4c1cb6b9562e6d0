"""Figures for the decoder stages: matrices, attention, positional encoding, Add & Norm, FFN, KV cache.

Two kinds of heatmap figure (``layout.meta["cells"]``): "square" token x token matrices with a fixed
``layout.width`` (render them ``width="content"``) and "rows" matrices of dimensions that fill their
container (``width="stretch"``) with a fixed height per token row.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import numpy as np

from .common import (
    FONT,
    HIGHLIGHT_COLOR,
    MASKED_HOVER,
    MIN_WIDTH,
    PAD,
    PHONE_WIDTH,
    TICK_FONT,
    Figure,
    as_2d,
    as_tokens,
    check_len,
    check_row,
    layout_defaults,
    new_figure,
    outline,
    round_sig,
    safe_label,
    text_px,
    unique_labels,
)
from .heatmap import (
    AXIS_TITLE,
    CB_MIN,
    CELL_MAX,
    CELL_MIN,
    FIG_MIN_W,
    SQUARE_FIT_W,
    Frame,
    Framing,
    HeatmapSpec,
    Marks,
    RowsGeometry,
    SquareGeometry,
    Ticks,
    _heatmap_parts,
    bar_clearance,
    bottom_margin,
    colorbar_dict,
    colorbar_px,
    heatmap,
    label_bar,
    left_margin,
    note_annotation,
    note_height,
    rows_geometry,
    set_window,
    shown_max,
    square_geometry,
    window_note,
    x_title_overflow,
    y_title_overflow,
)

GROUP_LABEL_H = 20  # the row of "head k" labels above a matrix of concatenated heads
PANEL_TITLE_H = 22  # a subplot title above its panel
TOKEN_LABEL = "token"  # Add & Norm's rows
MASK_BAR: dict[str, list[Any]] = dict(tickvals=[0.5], ticktext=["0 (attend)"])


class AttentionKind(NamedTuple):
    colorscale: str | list[Any]
    zmin: float | None
    zmax: float | None
    zmid: float | None
    value_name: str


ATTENTION_KINDS = {
    # kind: colorscale, zmin, zmax, zmid, value name
    "weights": AttentionKind("Viridis", 0.0, 1.0, None, "weight"),
    "scores": AttentionKind("RdBu_r", None, None, 0.0, "score"),
    "masked_scores": AttentionKind("RdBu_r", None, None, 0.0, "masked score"),
    "mask": AttentionKind([[0, "#6baed6"], [1, "#6baed6"]], 0.0, 1.0, None, "mask"),
}


@dataclass(frozen=True)
class AttentionOptions:
    """How an attention matrix is drawn (``attention_figure``, ``heads_grid``, ``alignment_figure``).

    ``kind``: "weights" (softmax output or shares: sequential from 0 to the largest value shown), "scores"
    (QK^T/sqrt(d), diverging around 0), "mask" (additive mask: 0 cells coloured, -inf cells masked) or
    "masked_scores" (scores + mask, -inf masked). ``q_title`` / ``k_title`` name the rows (queries) and columns
    (keys); ``masked_hover`` is what a masked cell's hover says; ``value_name`` names the values in the colour bar
    and hover (None: the kind's, e.g. "weight"). ``same_axes`` (None: Tq == Tk): queries and keys are the same
    positions, so the key window ends at the highlighted row's diagonal."""

    kind: str = "weights"
    q_title: str = "query token"
    k_title: str = "key token"
    masked_hover: str = MASKED_HOVER
    value_name: str | None = None
    same_axes: bool | None = None


# cross-attention: target tokens (queries) x source tokens (keys), every source token a key of every query
ALIGNMENT = AttentionOptions(
    q_title="target token (query)",
    k_title="source token (key)",
    masked_hover="masked (padding)",
    value_name="weight",
    same_axes=False,
)


@dataclass(frozen=True)
class MatrixOptions:
    """How ``matrix_figure`` names and colours a (T, D) matrix: ``dim_label`` names the columns and
    ``token_label`` the rows, ``value_name`` the values, coloured by ``colorscale`` (diverging at 0); ``group_size``
    (e.g. d_k for concatenated heads) draws a line between groups of columns and labels them "head 0", "head 1";
    ``limit`` bounds the colour scale at ±limit, larger values drawn as its ends (None: the data's range)."""

    dim_label: str = "dimension"
    token_label: str = "token"
    value_name: str = "value"
    colorscale: str | list = "RdBu_r"
    group_size: int | None = None
    limit: float | None = None


def _domain(a: float, b: float) -> list[float]:
    """A subplot domain in paper fractions, rounding noise clipped to [0, 1]."""
    return [min(max(round(a, 9), 0.0), 1.0), min(max(round(b, 9), 0.0), 1.0)]


def dim_range(dims: tuple[int, int] | None, n: int) -> tuple[int, int]:
    """The half-open column range ``dims`` of an n-column matrix (all of it when None), validated."""
    if dims is None:
        return 0, n
    try:
        lo, hi = (int(d) for d in dims)
    except (TypeError, ValueError):
        raise ValueError(f"dims must be a (start, stop) pair of ints, not {dims!r}") from None
    if not 0 <= lo < hi <= n:
        raise ValueError(f"dims {dims!r} must satisfy 0 <= start < stop <= {n}")
    return lo, hi


def _group_marks(lo: int, hi: int, size: int, plot_px: float) -> tuple[list[dict], list[dict]]:
    """Boundary lines and "head k" labels of the column groups of ``size`` within columns [lo, hi).

    Labels are sized for the narrowest container: "head k", else "hk", else every n-th group.
    """
    shapes = [
        dict(
            type="line",
            xref="x",
            yref="paper",
            x0=b - 0.5,
            x1=b - 0.5,
            y0=0,
            y1=1,
            name="group",
            line=dict(color="#222", width=1.5),
            layer="above",
        )
        for b in range((lo // size + 1) * size, hi, size)
    ]
    groups = list(range(lo // size, (hi - 1) // size + 1))
    px_per_col = plot_px / (hi - lo)
    spans = {k: (max(k * size, lo), min((k + 1) * size, hi)) for k in groups}
    widest = max(text_px(f"head {k}", FONT) for k in groups) + 8
    narrow = min((b - a) * px_per_col for a, b in spans.values())
    fmt, step = "head {}", 1
    if widest > narrow:
        fmt = "h{}"
        widest = max(text_px(f"h{k}", FONT) for k in groups) + 6
        step = max(1, math.ceil(widest / (size * px_per_col))) if widest > narrow else 1
    notes = []
    for k in groups[::step]:
        a, b = spans[k]
        if b - a < size and (b - a) * px_per_col < widest and len(groups) > 1:
            continue  # a sliver of a group at the edge of the range: the line marks it
        notes.append(
            dict(
                text=fmt.format(k),
                x=(a + b - 1) / 2,
                xref="x",
                y=1,
                yref="paper",
                yanchor="bottom",
                yshift=2,
                showarrow=False,
                font=dict(size=FONT, color="#222"),
                name="group",
            )
        )
    return shapes, notes


def matrix_figure(
    values: np.ndarray,
    tokens: Sequence[str],
    options: MatrixOptions = MatrixOptions(),
    *,
    title: str,
    highlight_row: int | None = None,
    dims: tuple[int, int] | None = None,
) -> Figure:
    """A (T, D) activation matrix: rows = tokens (free strings), columns = dimensions, diverging scale at 0, named
    and grouped as ``options`` says.

    For embeddings, positional encodings, Q/K/V, α·V, W_O output, FFN hidden units. Full container width
    (``meta.cells == "rows"``, render ``width="stretch"``), ``ROW_PX``/``ROW_MIN`` px per row. ``dims``
    (start, stop) shows only those columns; the x axis and hover keep the true dimension numbers, and
    Plotly's zoom reads single dimensions.
    """
    dim_label, token_label, value_name, group_size = (
        options.dim_label,
        options.token_label,
        options.value_name,
        options.group_size,
    )
    v = as_2d(values)
    tokens = as_tokens(tokens)
    check_len(v.shape[0], tokens, "rows", f"values of shape {v.shape}")
    lo, hi = dim_range(dims, v.shape[1])
    if group_size is not None and (isinstance(group_size, bool) or int(group_size) < 1):
        raise ValueError(f"group_size must be a positive int or None, not {group_size!r}")
    hl = check_row(highlight_row, v.shape[0])
    ys = unique_labels(tokens)
    cb_px = colorbar_px(None, value_name)
    geo = rows_geometry(
        ys, Frame(title, dim_label, token_label, cb_px, hl), extra_top=GROUP_LABEL_H if group_size else 0
    )
    spec = HeatmapSpec(
        x_title=dim_label,
        y_title=token_label,
        value_name=value_name,
        colorscale=options.colorscale,
        zmin=None if options.limit is None else -options.limit,
        zmax=options.limit,
        zmid=0.0,
        col_index=False,
    )
    traces, axis, xaxis, yaxis, shape = _heatmap_parts(
        v[:, lo:hi],
        tokens,
        [str(d) for d in range(lo, hi)],
        spec,
        Marks(hl, x_values=np.arange(lo, hi)),
        ticks=Ticks(row_step=geo.row_step),
    )
    axis["colorbar"] = colorbar_dict(axis["colorbar"], axis["colorbar"]["title"]["text"], length=geo.plot_h)
    label_bar(axis["colorbar"], v[:, lo:hi], spec)
    moved = set_window(yaxis, geo.rows, len(tokens), reverse=True)
    layout = layout_defaults(title, height=geo.height, cells="rows")
    layout.update(margin=geo.margin, title=geo.title, coloraxis=axis, xaxis=xaxis, yaxis=yaxis)
    shapes = [shape] if shape else []
    notes = [geo.note] if geo.note else []
    if group_size:
        plot_px = MIN_WIDTH - geo.margin["l"] - geo.margin["r"]
        lines, marks = _group_marks(lo, hi, int(group_size), plot_px)
        shapes += lines
        notes += marks
    layout.update(shapes=shapes, annotations=notes)
    if moved:
        layout["dragmode"] = "pan"
    return new_figure(traces, layout)


def _attention_values(weights: np.ndarray, kind: str) -> np.ndarray:
    if kind not in ATTENTION_KINDS:
        raise ValueError(f"kind must be one of {sorted(ATTENTION_KINDS)}, not {kind!r}")
    w = np.array(weights, dtype=np.float64)
    if kind == "mask":
        w[np.isfinite(w)] = 0.0  # additive mask: 0 = may attend, -inf = masked
    return w


def attention_figure(
    weights: np.ndarray,
    q_tokens: Sequence[str],
    k_tokens: Sequence[str],
    options: AttentionOptions = AttentionOptions(),
    *,
    title: str,
    highlight_row: int | None = None,
    focus_col: int | None = None,
) -> Figure:
    """One attention matrix (Tq, Tk): rows = queries, columns = keys, drawn as ``options`` says.

    Square cells (``meta.cells == "square"``, fixed ``layout.width``: render ``width="content"``); beyond 20 tokens
    a window containing the highlighted row, the rest a pan away: the key window ends at the highlighted row's
    diagonal when queries and keys are the same positions, else it is centred on ``focus_col``.
    """
    kind = options.kind
    w = _attention_values(weights, kind)
    if w.ndim != 2:
        raise ValueError(f"attention {kind} must be 2-D (Tq, Tk), got shape {w.shape}")
    q_tokens, k_tokens = as_tokens(q_tokens, "q_tokens"), as_tokens(k_tokens, "k_tokens")
    check_len(w.shape[0], q_tokens, "query rows", f"attention of shape {w.shape}")
    check_len(w.shape[1], k_tokens, "key columns", f"attention of shape {w.shape}")
    cs, zmin, zmax, zmid, name = ATTENTION_KINDS[kind]
    spec = HeatmapSpec(
        x_title=options.k_title,
        y_title=options.q_title,
        value_name=options.value_name or name,
        colorscale=cs,
        zmin=zmin,
        zmax=zmax,
        zmid=zmid,
        colorbar=MASK_BAR if kind == "mask" else None,
        masked_hover=options.masked_hover,
    )
    framing = Framing(cells="square", same_axes=options.same_axes, focus_col=focus_col, zmax_shown=kind == "weights")
    return heatmap(w, q_tokens, k_tokens, spec, title=title, marks=Marks(highlight_row), framing=framing)


def alignment_figure(
    cross_weights: np.ndarray,
    tgt_tokens: Sequence[str],
    src_tokens: Sequence[str],
    options: AttentionOptions = ALIGNMENT,
    *,
    title: str,
    highlight_row: int | None = None,
    focus_col: int | None = None,
) -> Figure:
    """Cross-attention alignment (Tq, S): target tokens (queries) x source tokens (keys), weights (or
    ``options.value_name``, e.g. attribution shares) coloured from 0 to the largest shown. Every source token when
    they fit, else a window around ``focus_col`` (default: the highlighted row's largest weight; give two
    figures compared side by side the same one)."""
    w = as_2d(cross_weights, "cross_weights")
    hl = check_row(highlight_row, w.shape[0]) if w.shape[0] else None
    focus = focus_col
    if focus is None and hl is not None and np.isfinite(w[hl]).any():
        focus = int(np.nanargmax(np.where(np.isfinite(w[hl]), w[hl], np.nan)))
    options = replace(options, kind="weights", same_axes=False)
    return attention_figure(
        w, tgt_tokens, src_tokens, options, title=title, highlight_row=highlight_row, focus_col=focus
    )


@dataclass(frozen=True)
class _Grid:
    """Where ``heads_grid`` puts its heads: ``ncols`` per row, each ``pw`` × ``ph`` px with the gaps between them,
    in a plot area of ``plot_w`` × ``plot_h`` px; ``over``: how far the query title overflows one head (then drawn
    once, on the first row)."""

    ncols: int
    pw: int
    ph: int
    gap_x: int
    gap_y: int
    plot_w: int
    plot_h: int
    over: int


@dataclass(frozen=True)
class _Room:
    """What ``heads_grid`` fits its heads into: ``avail`` px across, at most ``cols`` heads per row (None: as many
    as fit), a colour bar ``cb_px`` wide on the right, and at least ``gap_x`` × ``gap_y`` px between two heads."""

    avail: float
    cols: int | None
    cb_px: int
    gap_x: int
    gap_y: int


def _grid_panels(
    layout: dict,
    w: np.ndarray,
    labels: tuple[Sequence[str], Sequence[str]],
    spec: HeatmapSpec,
    one: SquareGeometry,
    grid: _Grid,
    options: AttentionOptions,
    hl: int | None,
) -> tuple[dict, list[dict], list[dict], list[dict]]:
    """Every head of ``w`` (H, Tq, Tk) as one panel of the grid, its axes into ``layout``; axis titles only on the
    grid's edges. The colour axis they share, and their traces, shapes (the highlight) and notes (each head's
    title)."""
    H, Tq, Tk = w.shape
    q_tokens, k_tokens = labels
    q_title, k_title = options.q_title, options.k_title
    wide = text_px(k_title, FONT) > grid.pw + grid.gap_x - 8  # the key title is wider than a head: once per row
    traces: list[dict] = []
    shapes: list[dict] = []
    notes: list[dict] = []
    for h in range(H):
        r, c = divmod(h, grid.ncols)
        bottom_most = h + grid.ncols >= H  # nothing below it: its column's key labels go here
        left_bottom = c > 0 and h - 1 + grid.ncols >= H  # the head to its left is the bottom of its column too
        n = "" if h == 0 else str(h + 1)
        x0 = c * (grid.pw + grid.gap_x) / grid.plot_w
        y1 = 1 - r * (grid.ph + grid.gap_y) / grid.plot_h
        panel = replace(
            spec,
            x_title=k_title if bottom_most and not (wide and left_bottom) else "",
            y_title=q_title if c == 0 and (r == 0 or not grid.over) else "",
            y_name=f"head {h} · {q_title}",
        )
        parts, axis, xaxis, yaxis, shape = _heatmap_parts(
            w[h],
            q_tokens,
            k_tokens,
            panel,
            Marks(hl),
            ticks=Ticks(one.row_step, one.col_step, one.col_angle, rows=c == 0, cols=bottom_most),
        )
        if yaxis["title"]["text"]:
            yaxis["title"]["text"] = one.y_title
        for t in parts:
            t.update(xaxis=f"x{n}", yaxis=f"y{n}")
        traces += parts
        xaxis.update(domain=_domain(x0, x0 + grid.pw / grid.plot_w), anchor=f"y{n}")
        yaxis.update(domain=_domain(y1 - grid.ph / grid.plot_h, y1), anchor=f"x{n}")
        set_window(xaxis, one.cols, Tk)
        set_window(yaxis, one.rows, Tq, reverse=True)
        if h:
            xaxis["matches"], yaxis["matches"] = "x", "y"
        layout[f"xaxis{n}"], layout[f"yaxis{n}"] = xaxis, yaxis
        if shape:
            shapes.append({**shape, "xref": f"x{n}", "yref": f"y{n}"})
        notes.append(
            dict(
                text=f"head {h}",
                x=x0 + grid.pw / grid.plot_w / 2,
                xref="paper",
                y=y1,
                yref="paper",
                yanchor="bottom",
                yshift=3,
                showarrow=False,
                font=dict(size=FONT),
            )
        )
    return axis, traces, shapes, notes


def _grid_colours(w: np.ndarray, kind: str):
    """The colour scale of every head of ``w`` as ``ATTENTION_KINDS[kind]`` has it (one symmetric range for all
    heads, for signed values), and the mask's two-colour bar."""
    cs, zmin, zmax, zmid, name = ATTENTION_KINDS[kind]
    colorbar = MASK_BAR if kind == "mask" else None
    if zmid is not None:  # one symmetric range for every head
        finite = w[np.isfinite(w)]
        m = float(np.abs(finite).max()) if finite.size else 1.0
        zmin, zmax = -m, m
    return cs, zmin, zmax, zmid, name, colorbar


def _grid_layout(
    title: str, one: SquareGeometry, shape: tuple[int, int, int], room: _Room, k_title: str, xs: Sequence[str]
) -> tuple[dict, _Grid, int, dict | None]:
    """How many heads per row fit the ``room``, and the grid's figure size and margins (the window note and the
    head titles above, the key labels below, the colour bar right); the layout, the grid, the colour bar's
    clearance, and the note naming the window shown (or None)."""
    H, Tq, Tk = shape
    left = one.margin["l"]
    pw, ph = one.cols.count * one.cell, one.rows.count * one.cell
    gap_x, gap_y = max(room.gap_x, int(text_px(f"head {H - 1}", FONT) + 16 - pw)), room.gap_y  # room for head titles
    fits = max(1, int((room.avail + gap_x) // (pw + gap_x)))
    ncols = max(1, min(H, fits, int(room.cols) if room.cols else H))
    nrows = math.ceil(H / ncols)
    plot_w, plot_h = ncols * pw + (ncols - 1) * gap_x, nrows * ph + (nrows - 1) * gap_y
    over = y_title_overflow(one.y_title.split("<br>"), ph)  # a y title taller than its head: drawn once, first row
    grid = _Grid(ncols, pw, ph, gap_x, gap_y, plot_w, plot_h, over)
    xpad = bar_clearance(k_title, pw, plot_h)
    right = max(room.cb_px + xpad - 10, x_title_overflow(k_title, pw) + PAD)
    width = max(FIG_MIN_W, left + plot_w + right)
    layout = layout_defaults(title, height=0, width=width, cells="square")
    note_top = layout["margin"]["t"]
    text = window_note(one.rows, Tq, one.cols, Tk)
    top = note_top + note_height(text, width) + PANEL_TITLE_H + over
    col_px = max((text_px(x) for x in xs), default=0)
    bottom = max(bottom_margin(col_px, one.col_angle, k_title), over + PAD)
    height = top + max(plot_h + bottom, CB_MIN + PAD)
    layout.update(
        height=height, margin=dict(l=left, r=width - left - plot_w, t=top, b=height - top - plot_h, autoexpand=False)
    )
    window = note_annotation(text, note_top=note_top, plot_top=top, left=left, width=width) if text else None
    return layout, grid, xpad, window


# Long on purpose: one figure of every head, its layout (cells, titles, colour bar) sized from the head count in one
# place so the panels stay aligned.
def heads_grid(
    weights: np.ndarray,
    q_tokens: Sequence[str],
    k_tokens: Sequence[str],
    options: AttentionOptions = AttentionOptions(),
    *,
    title: str,
    highlight_row: int | None = None,
    cols: int | None = None,
) -> Figure:
    """All heads (H, Tq, Tk) in a grid, one shared colour scale and colour bar, square cells, drawn as ``options``
    says (as in ``attention_figure``).

    As many heads per row as fit a ``SQUARE_FIT_W`` container (at most ``cols`` when given); every head
    shows the same window of a large matrix (named in a note under the title), and panning one pans all.
    Fixed ``layout.width``: render ``width="content"``.
    """
    kind, q_title, k_title = options.kind, options.q_title, options.k_title
    w = _attention_values(weights, kind)
    if w.ndim != 3:
        raise ValueError(f"heads_grid needs (H, Tq, Tk) weights, got shape {w.shape}")
    H, Tq, Tk = w.shape
    if H == 0:
        raise ValueError("heads_grid needs at least one head")
    q_tokens, k_tokens = as_tokens(q_tokens, "q_tokens"), as_tokens(k_tokens, "k_tokens")
    check_len(Tq, q_tokens, "query rows", f"attention of shape {w.shape}")
    check_len(Tk, k_tokens, "key columns", f"attention of shape {w.shape}")
    hl = check_row(highlight_row, Tq)
    cs, zmin, zmax, zmid, name, colorbar = _grid_colours(w, kind)
    name = options.value_name or name
    ys, xs = unique_labels(q_tokens), unique_labels(k_tokens)
    cb_px = colorbar_px(colorbar and colorbar["ticktext"], name)
    room = _Room(SQUARE_FIT_W - left_margin(ys, q_title) - cb_px, cols, cb_px, 16, PANEL_TITLE_H + 8)
    want = max(1, min(H, int(cols) if cols else 4))  # cells shrink (not below CELL_MIN) to fit this many per row
    cell_max = max(CELL_MIN, min(CELL_MAX, int((room.avail - room.gap_x * (want - 1)) / want / max(Tk, 1))))
    same = Tq == Tk if options.same_axes is None else options.same_axes
    one = square_geometry(
        ys,
        xs,
        Frame(None, k_title, q_title, cb_px, hl),
        same_axes=same,
        max_plot_h=440,
        cell_max=cell_max,
    )
    if kind == "weights":
        zmax = max((shown_max(w[h], one.rows, one.cols, 0.0) for h in range(H)), default=0.0) or zmax
    layout, grid, xpad, window = _grid_layout(title, one, (H, Tq, Tk), room, k_title, xs)
    spec = HeatmapSpec(
        value_name=name,
        colorscale=cs,
        zmin=zmin,
        zmax=zmax,
        zmid=zmid,
        colorbar=colorbar,
        masked_hover=options.masked_hover,
        x_name=k_title,
    )
    axis, traces, shapes, notes = _grid_panels(layout, w, (q_tokens, k_tokens), spec, one, grid, options, hl)
    axis["colorbar"] = colorbar_dict(
        axis["colorbar"], axis["colorbar"]["title"]["text"], length=max(CB_MIN, min(grid.plot_h, 400)), xpad=xpad
    )
    label_bar(axis["colorbar"], w, spec)
    layout.update(coloraxis=axis, shapes=shapes, annotations=[window, *notes] if window else notes)
    if one.rows.count < Tq or one.cols.count < Tk:
        layout["dragmode"] = "pan"
    return new_figure(traces, layout)


def _sin_or_cos(pe: np.ndarray, d: int, layout: str | None) -> str | None:
    if layout == "interleaved":
        return "sin" if d % 2 == 0 else "cos"
    if layout == "half":
        return "sin" if d < pe.shape[1] // 2 else "cos"
    if pe.shape[0] == 0:
        return None
    v0 = float(pe[0, d])
    return "sin" if abs(v0) < 1e-5 else "cos" if abs(v0 - 1.0) < 1e-5 else None


def _mark_position(layout: dict, mark: int, T: int, tokens) -> None:
    """A dashed vertical line at position ``mark`` of ``T``, labelled with the position (and its token), the label
    on the side with more room."""
    label = f"position {mark}" + (f" · {unique_labels(tokens, index=False, max_len=16)[mark]}" if tokens else "")
    right = mark > (T - 1) / 2
    layout["shapes"] = [
        dict(
            type="line",
            x0=mark,
            x1=mark,
            xref="x",
            y0=0,
            y1=1,
            yref="paper",
            name="mark",
            line=dict(color=HIGHLIGHT_COLOR, width=2, dash="dash"),
            layer="above",
        )
    ]
    note = dict(
        text=label,
        x=mark,
        xref="x",
        y=1,
        yref="paper",
        yanchor="top",
        showarrow=False,
        xanchor="right" if right else "left",
        xshift=-4 if right else 4,
        name="mark",
        font=dict(size=FONT, color=HIGHLIGHT_COLOR),
        bgcolor="rgba(255,255,255,0.9)",
    )
    layout["annotations"] = [note]


def positional_curves(
    pe: np.ndarray,
    dims: Sequence[int],
    *,
    title: str,
    tokens: Sequence[str] | None = None,
    layout: str | None = None,
    mark_position: int | None = None,
) -> Figure:
    """Selected positional-encoding dimensions over position (sinusoids): one line per dimension.

    Each line is tagged sin or cos: from ``layout`` ("interleaved": even dims sin, odd cos; "half":
    first half sin, second half cos) or, when ``layout`` is None, from row 0 (position 0: sin = 0,
    cos = 1; no tag when it is neither, e.g. for a slice that does not start at position 0).
    ``mark_position`` draws a vertical line labelled "position N" there. Full width (``width="stretch"``).
    """
    p = as_2d(pe, "pe")
    T, D = p.shape
    dims = [int(d) for d in dims]
    if not dims:
        raise ValueError("give at least one dimension to plot")
    bad = [d for d in dims if not 0 <= d < D]
    if bad:
        raise ValueError(f"dimensions {bad} are out of range for a positional encoding with {D} dimensions")
    if tokens is not None:
        tokens = as_tokens(tokens)
        check_len(T, tokens, "positions", f"pe of shape {p.shape}")
    if layout not in (None, "interleaved", "half"):
        raise ValueError(f"layout must be 'interleaved', 'half' or None, not {layout!r}")
    mark = check_row(mark_position, T) if mark_position is not None else None
    if mark_position is not None and mark_position < 0:
        raise ValueError(f"mark_position must be a position 0..{T - 1}, not {mark_position}")
    pos = np.arange(T)
    custom = unique_labels(tokens) if tokens is not None else None
    traces = [
        dict(
            type="scatter",
            x=pos,
            y=round_sig(p[:, d]),
            mode="lines+markers" if T <= 64 else "lines",
            marker=dict(size=5),
            name=f"dim {d} ({kind})" if kind else f"dim {d}",
            customdata=custom,
            hovertemplate=(
                f"dim {d}<br>position %{{x}}"
                + ("<br>token %{customdata}" if tokens is not None else "")
                + "<br>value %{y:.4g}<extra></extra>"
            ),
        )
        for d in dims
        for kind in [_sin_or_cos(p, d, layout)]
    ]
    bounded = np.all(np.abs(p[:, dims]) <= 1.0 + 1e-6)
    fig_layout = layout_defaults(title, height=380, legend=True, squeezes=True)
    fig_layout.setdefault("meta", {})["cells"] = None
    fig_layout["legend"].update(x=1.02, xanchor="left", y=1, yanchor="top")
    tick = dict(automargin=True, tickfont=dict(size=TICK_FONT))
    fig_layout["xaxis"] = dict(
        title=dict(text="position"),
        showgrid=True,
        gridcolor="#eee",
        zeroline=False,
        range=[-0.5, max(T - 0.5, 0.5)],
        **tick,
    )
    fig_layout["yaxis"] = dict(
        title=dict(text="PE value"),
        showgrid=True,
        gridcolor="#eee",
        zeroline=True,
        zerolinecolor="#bbb",
        **({"range": [-1.25, 1.25]} if bounded else {}),
        **tick,
    )
    if mark is not None:
        _mark_position(fig_layout, mark, T, tokens)
    return new_figure(traces, fig_layout)


def _per_token(T: int, **values) -> dict[str, np.ndarray]:
    """Each of ``values`` as a (T,) array (a (T, 1) column is taken as one), or ``ValueError`` naming it."""
    out = {}
    for name, a in values.items():
        a = np.asarray(a, dtype=np.float64)
        if a.ndim == 2 and a.shape[1] == 1:
            a = a[:, 0]
        if a.shape != (T,):
            raise ValueError(f"{name} must have shape ({T},) (one value per token), got {a.shape}")
        out[name] = a
    return out


def _stats_panel(stats: dict, labels: list[str], token_label: str, geo, T: int, hl: int | None, domain):
    """Add & Norm's middle panel: the mean and std of each row as two lines over the rows (on ``domain`` of the
    figure's height, rows matching the heatmaps'); its traces, x and y axes, and the outline of the highlighted row
    (or None)."""
    traces = []
    for name, color, symbol in (("mean", "#4c78a8", "circle"), ("std", "#f58518", "diamond")):
        traces.append(
            dict(
                type="scatter",
                x=round_sig(stats[name]),
                y=labels,
                mode="lines+markers",
                name=name,
                showlegend=False,
                marker=dict(color=color, symbol=symbol, size=7),
                line=dict(color=color, width=1),
                xaxis="x2",
                yaxis="y2",
                hovertemplate=f"token: %{{y}}<br>{name}: %{{x:.4g}}<extra></extra>",
            )
        )
    tickfont = dict(size=TICK_FONT)
    xaxis = dict(
        domain=[0, 1],
        anchor="y2",
        title=dict(text="mean, std", font=dict(size=FONT)),
        showgrid=True,
        gridcolor="#eee",
        zeroline=True,
        zerolinecolor="#bbb",
        tickfont=tickfont,
        automargin=True,
    )
    yaxis = dict(
        domain=domain,
        anchor="x2",
        type="category",
        matches="y",
        autorange="reversed",
        title=dict(text=safe_label(token_label), font=dict(size=FONT)),
        tickmode="array",
        tickvals=labels[:: geo.row_step],
        ticktext=labels[:: geo.row_step],
        tickfont=tickfont,
        showgrid=True,
        gridcolor="#f3f3f3",
        automargin=True,
    )
    set_window(yaxis, geo.rows, T, reverse=True)
    shape = None
    if hl is not None:
        shape = outline("highlight", (0, 1), (hl - 0.5, hl + 0.5), 2, xref="x2 domain", yref="y2")
    return traces, xaxis, yaxis, shape


def _norm_heatmaps(
    layout: dict,
    panels: tuple[np.ndarray, np.ndarray],
    tokens: list[str],
    dims: tuple[int, int],
    hl: int | None,
    geo: RowsGeometry,
    tops: list[float],
    plot_h: int,
) -> tuple[list[dict], list[dict]]:
    """Add & Norm's first and last panels (``panels``: the residual sum, the LayerNorm output) into ``layout``, each
    with its colour bar beside it, rows and dimensions matching; their traces and shapes."""
    res, o = panels
    token_label = TOKEN_LABEL
    lo, hi = dims
    ph, T = geo.plot_h, len(tokens)
    traces: list[dict] = []
    shapes: list[dict] = []
    dim_ids = np.arange(lo, hi)
    for i, (vals, cax, vname) in enumerate(((res, "coloraxis", "residual"), (o, "coloraxis2", "normalized"))):
        n = "" if i == 0 else "3"
        spec = HeatmapSpec(x_title="dimension", y_title=token_label, value_name=vname, zmid=0.0, col_index=False)
        parts, axis, xaxis, yaxis, shape = _heatmap_parts(
            vals[:, lo:hi],
            tokens,
            [str(d) for d in dim_ids],
            spec,
            Marks(hl, x_values=dim_ids),
            ticks=Ticks(row_step=geo.row_step),
            coloraxis=cax,
        )
        top = tops[0 if i == 0 else 2]
        for t in parts:
            t.update(xaxis=f"x{n}", yaxis=f"y{n}")
        traces += parts
        axis["colorbar"] = colorbar_dict(axis["colorbar"], vname, length=ph, y=top)
        label_bar(axis["colorbar"], vals[:, lo:hi], spec)
        xaxis.update(domain=[0, 1], anchor=f"y{n}")
        yaxis.update(domain=_domain(top - ph / plot_h, top), anchor=f"x{n}")
        set_window(yaxis, geo.rows, T, reverse=True)
        if n:
            xaxis["matches"], yaxis["matches"] = "x", "y"
        layout.update({cax: axis, f"xaxis{n}": xaxis, f"yaxis{n}": yaxis})
        if shape:
            shapes.append({**shape, "xref": f"x{n}", "yref": f"y{n}"})
    return traces, shapes


def addnorm_figure(
    residual: np.ndarray,
    mean: np.ndarray,
    std: np.ndarray,
    out: np.ndarray,
    tokens: Sequence[str],
    *,
    highlight_row: int | None = None,
    title: str = "Add & Norm",
    dims: tuple[int, int] | None = None,
) -> Figure:
    """Residual sum (T, D), per-position mean and std, LayerNorm output (T, D): three full-width panels
    stacked top to bottom, rows aligned on the tokens, each heatmap's colour bar beside it.

    ``dims`` (start, stop) shows only those dimensions. Full width: render ``width="stretch"``.
    """
    res, o = as_2d(residual, "residual"), as_2d(out, "out")
    tokens = as_tokens(tokens)
    T = len(tokens)
    check_len(res.shape[0], tokens, "rows", f"residual of shape {res.shape}")
    if o.shape != res.shape:
        raise ValueError(f"out has shape {o.shape} but residual has shape {res.shape}")
    stats = _per_token(T, mean=mean, std=std)
    hl = check_row(highlight_row, T)
    lo, hi = dim_range(dims, res.shape[1])
    labels = unique_labels(tokens)
    cb_px = colorbar_px(None, "normalized")
    geo = rows_geometry(labels, Frame(title, "dimension", TOKEN_LABEL, cb_px, hl), extra_top=PANEL_TITLE_H)
    ph = geo.plot_h
    gap = int(FONT * 1.6) + AXIS_TITLE + PANEL_TITLE_H + 12  # x ticks, x title, next panel's title
    plot_h = 3 * ph + 2 * gap
    m = geo.margin
    height = m["t"] + plot_h + m["b"]
    # A phone draws it whole in its column: its heatmaps of hundreds of dimensions are a texture at any width, and
    # scrolling would hide the std line, which the middle panel is for.
    layout = layout_defaults(title, height=height, cells="rows", squeezes=True)
    layout.update(margin=m, title=geo.title)
    layout["meta"] = {**layout.get("meta", {}), "min_width": PHONE_WIDTH}
    tops = [1 - i * (ph + gap) / plot_h for i in range(3)]
    legend = '<span style="color:#4c78a8">● mean</span>, <span style="color:#f58518">◆ std</span>'
    panel_titles = ["residual: x + sublayer(x)", f"{legend} per position", "LayerNorm output"]
    traces, shapes = _norm_heatmaps(layout, (res, o), tokens, (lo, hi), hl, geo, tops, plot_h)
    stat_traces, layout["xaxis2"], layout["yaxis2"], stat_shape = _stats_panel(
        stats, labels, TOKEN_LABEL, geo, T, hl, _domain(tops[1] - ph / plot_h, tops[1])
    )
    traces += stat_traces
    if stat_shape is not None:
        shapes.insert(1, stat_shape)
    notes = [
        dict(
            text=t,
            x=0,
            xref="paper",
            xanchor="left",
            y=top,
            yref="paper",
            yanchor="bottom",
            yshift=4,
            showarrow=False,
            font=dict(size=FONT + 1),
        )
        for t, top in zip(panel_titles, tops)
    ]
    if geo.note:
        notes.append(geo.note)
    layout.update(shapes=shapes, annotations=notes)
    if geo.rows.count < T:
        layout["dragmode"] = "pan"
    return new_figure(traces, layout)


NEAR_ZERO, NEAR_ZERO_TEXT = 1e-6, "10⁻⁶"  # an FFN unit this close to 0 counts as switched off (the title says so)


def ffn_sparsity(hidden: np.ndarray, *, tol: float = NEAR_ZERO) -> dict[str, float]:
    """Fractions of FFN hidden activations that are exactly 0, at most ``tol`` in magnitude, and negative.

    ReLU gives exact zeros and no negatives; GELU / Swish give small negatives and almost no exact zeros.
    Non-finite entries are ignored. Keys: ``zero``, ``near_zero``, ``negative``, ``count``.
    """
    h = np.asarray(hidden, dtype=np.float64).ravel()
    h = h[np.isfinite(h)]
    n = h.size
    if n == 0:
        return {"zero": 0.0, "near_zero": 0.0, "negative": 0.0, "count": 0}
    return {
        "zero": float(np.count_nonzero(h == 0) / n),
        "near_zero": float(np.count_nonzero(np.abs(h) <= tol) / n),
        "negative": float(np.count_nonzero(h < 0) / n),
        "count": int(n),
    }


def ffn_figure(
    hidden: np.ndarray,
    tokens: Sequence[str],
    *,
    title: str,
    highlight_row: int | None = None,
    dims: tuple[int, int] | None = None,
    token_label: str = "token",
) -> Figure:
    """FFN hidden activations (T, d_ff) after the non-linearity; the title notes the sparsity (of all units).

    A full-width ``matrix_figure`` (``width="stretch"``); ``dims`` (start, stop) shows only those units.
    """
    h = as_2d(hidden, "hidden")
    s = ffn_sparsity(h)
    clauses = (
        f"exactly 0: {s['zero']:.1%}",
        f"within {NEAR_ZERO_TEXT} of 0: {s['near_zero']:.1%}",
        f"negative: {s['negative']:.1%}",
    )
    # each clause on one line (no-break spaces, which the title's wrapping keeps together and then writes as spaces)
    sub = f"{title} — " + ", ".join(c.replace(" ", "\u00a0") for c in clauses)
    options = MatrixOptions(dim_label="hidden unit", token_label=token_label, value_name="activation")
    return matrix_figure(h, tokens, options, title=sub, highlight_row=highlight_row, dims=dims)


def kv_cache_figure(n_cached: int, n_new: int, tokens: Sequence[str], *, title: str) -> Figure:
    """Which K / V rows come from the cache and which are computed at this step (Q only for the new ones).

    Rows Q, K, V across the full container width (``width="stretch"``), every position shown; the position
    labels are thinned and turned upright when they do not fit side by side.
    """
    tokens = as_tokens(tokens)
    for name, n in (("n_cached", n_cached), ("n_new", n_new)):
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
            raise ValueError(f"{name} must be a non-negative int, not {n!r}")
    n_cached, n_new = int(n_cached), int(n_new)
    if n_cached + n_new != len(tokens):
        raise ValueError(f"n_cached + n_new = {n_cached + n_new} but {len(tokens)} tokens were given")
    state = np.array([0.0] * n_cached + [1.0] * n_new)
    q = np.where(state == 1.0, 1.0, np.nan)
    values = np.stack([q, state, state])
    hover = np.array(
        [["computed now" if s else "not needed" for s in state]]
        + [["new: computed now" if s else "reused from the cache" for s in state]] * 2
    )
    cs = [[0, "#9ecae1"], [0.5, "#9ecae1"], [0.5, "#e4572e"], [1, "#e4572e"]]
    spec = HeatmapSpec(
        x_title="position (token)",
        value_name="state",
        colorscale=cs,
        zmin=0.0,
        zmax=1.0,
        colorbar=dict(tickvals=[0.25, 0.75], ticktext=["cached", "new"]),
        masked_hover="no query needed (cached position)",
        row_index=False,
    )
    return heatmap(
        values, ["Q", "K", "V"], tokens, spec, title=title, marks=Marks(hover_text=hover), framing=Framing(cells="rows")
    )
