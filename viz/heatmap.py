"""The one heatmap helper every matrix figure in the app goes through, and the pixel geometry that keeps
heatmaps legible: square token cells of a fixed size, or full-width matrices with fixed-height rows."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple, overload

import numpy as np

from .common import (
    FONT,
    MASK_COLOR,
    MASKED_HOVER,
    MAX_LABEL_LEN,
    MIN_WIDTH,
    PAD,
    STRETCH_MIN_W,
    TICK_FONT,
    Figure,
    as_2d,
    check_len,
    check_row,
    layout_defaults,
    new_figure,
    outline,
    round_sig,
    safe_label,
    text_px,
    title_block,
    unique_labels,
    wrap_text,
)

MAX_TEXT_CELLS = 12  # cell values are printed only on heatmaps up to 12 x 12 whose cells are wide enough
DIGIT_EM = 0.6  # width of a digit, point or minus sign (printed cell values), generously
CELL_MIN = 22  # square cells up to 20 x 20 tokens
CELL_MAX = 40
WINDOW_CELL = 15  # larger matrices: cells this big (still one label per row), a window of them shown
WINDOW_TOKENS = 20
LABEL_PX = 15  # room one tick label needs along its axis (11 px text: a 15 px box in Source Sans)
PLOT_MAX_W = 820  # square figures fit a MIN_WIDTH container
SQUARE_FIT_W = 700  # ... and, where CELL_MIN allows, a tablet's column (768 px screen; 736 px, less in an expander)
PLOT_MAX_H = 620
ROW_PX = 22  # wide matrices: px per token row up to 20 rows ...
ROW_MIN = 16  # ... then this
ROWS_MAX_H = 800  # beyond this many px of rows a window of rows is shown
PLOT_MIN_H = 110  # a rows figure's plot is at least this tall
CB_MIN = 40  # a colour bar at least this long; its ticks are thinned to one per CB_TICK_PX
CB_TICK_PX = 30
CB_THICK = 14
AXIS_TITLE = 24  # an axis title and its standoff
AXIS_LINE = 16  # each further line of a wrapped axis title
FIG_MIN_W = 340  # square figures are at least this wide so the title has room, and fit a phone (358 px at 390)
NOTE_H = 18  # a line of the note under the title that says which window of a large matrix is shown ...
NOTE_GAP = 6  # ... and the room between it and the plot
NOTE_COLOR = "#555"


@dataclass(frozen=True)
class HeatmapSpec:
    """What a heatmap's cells hold and how they are drawn, apart from the data and the figure's size: one per kind
    of figure, shared by the figures of that kind (``dataclasses.replace`` makes a variant).

    ``x_title`` / ``y_title`` name the axes, and in the hover a column and a row (unless ``x_name`` / ``y_name``
    name them there); ``value_name`` titles the colour bar and the hover's value. Colours: ``colorscale`` from
    ``zmin`` to ``zmax`` (None: the data's), centred on ``zmid`` when a bound is open; ``colorbar``: more colour
    bar properties (e.g. ``tickvals`` / ``ticktext``). Values are sent rounded to ``decimals`` significant digits;
    non-finite cells are masked (grey, hover ``masked_hover``). ``row_index`` / ``col_index`` prefix labels with
    their position ("3:▁le") so repeated tokens stay distinct (without the prefix, labels are kept unless two
    coincide). ``show_values`` prints the values in the cells (only up to 12 x 12 cells wide enough for them);
    ``show_scale`` False leaves the colour bar out, and its room, where every cell prints its value; ``label_len``:
    the characters a row or column label keeps (longer ones are cut with "…")."""

    x_title: str = ""
    y_title: str = ""
    value_name: str = "value"
    colorscale: str | list = "RdBu_r"
    zmin: float | None = None
    zmax: float | None = None
    zmid: float | None = None
    colorbar: dict | None = None
    masked_hover: str = MASKED_HOVER
    decimals: int = 4
    row_index: bool = True
    col_index: bool = True
    show_values: bool = False
    show_scale: bool = True
    label_len: int = MAX_LABEL_LEN
    x_name: str | None = None
    y_name: str | None = None


@dataclass(frozen=True)
class Window:
    """The part of an axis in view at first: ``count`` categories from ``start``."""

    start: int
    count: int


def window(total: int, count: int, focus: int | None, *, align: str = "center") -> Window:
    """The ``count`` consecutive positions out of ``total`` to show first, containing ``focus`` when given."""
    count = max(1, min(count, total))
    if focus is None or count >= total:
        return Window(0, count)
    if align == "end":  # the focus is the last position shown (self-attention: the diagonal)
        start = focus - count + 1
    else:
        start = focus - count // 2
    return Window(int(min(max(start, 0), total - count)), count)


def value_px(z: np.ndarray) -> float:
    """The width of the widest finite value of ``z`` printed with two decimals at 11 px (0 when there is none)."""
    finite = np.asarray(z, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    if finite.size == 0:
        return 0.0
    return max(len(f"{x:.2f}") for x in (finite.min(), finite.max())) * DIGIT_EM * TICK_FONT


def values_fit(z: np.ndarray, cell_px: float | None) -> bool:
    """Whether every finite value of ``z``, printed with two decimals at 11 px, fits a ``cell_px`` wide cell."""
    return cell_px is None or value_px(z) + 4 <= cell_px


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
    """A vertical colour bar beside its plot (``xpad`` px right of it), top-aligned, ``length`` px long, with
    at most one tick label per ``CB_TICK_PX``."""
    extra = dict(extra or {})
    bar = dict(
        thickness=CB_THICK,
        x=x,
        xanchor="left",
        xref="paper",
        xpad=int(xpad),
        y=y,
        yanchor="top",
        ypad=0,
        len=int(length),
        lenmode="pixels",
        outlinewidth=0,
        tickfont=dict(size=TICK_FONT),
        nticks=max(3, int(length // CB_TICK_PX)),
    )
    bar.update({k: v for k, v in extra.items() if k != "title"})
    bar["title"] = {"text": title, "side": "right", "font": {"size": FONT}, **extra.get("title", {})}
    return bar


NICE = (5.0, 2.5, 2.0, 1.0)  # colour-bar tick steps, times a power of ten
BAR_TICKS = 6  # labels a colour bar aims at, where its length holds them


def shown_range(v: np.ndarray, spec: HeatmapSpec) -> tuple[float, float] | None:
    """The colour axis's range as Plotly draws it: ``spec``'s bounds, else the finite values', an open bound
    made symmetric about ``zmid``; None when there is no finite value."""
    finite = v[np.isfinite(v)]
    if not finite.size:
        return None
    lo = spec.zmin if spec.zmin is not None else float(finite.min())
    hi = spec.zmax if spec.zmax is not None else float(finite.max())
    if spec.zmid is not None and (spec.zmin is None or spec.zmax is None):
        half = max(abs(lo - spec.zmid), abs(hi - spec.zmid))
        lo, hi = spec.zmid - half, spec.zmid + half
    return lo, hi


def bar_ticks(lo: float, hi: float, length: float) -> dict:
    """Linear colour-bar ticks from 0 at a round step (5, 2.5, 2, 1 times a power of ten) that labels at least two
    values in [lo, hi], ``CB_TICK_PX`` apart at least on a ``length`` px bar, as near ``BAR_TICKS`` values as that
    allows (ties: the larger step): Plotly's own choice can label a short bar once ("0" alone on a diverging bar).
    Empty (Plotly's choice) when no step does, or the range is a point."""
    span = hi - lo
    if not (math.isfinite(span) and span > 0):
        return {}
    top = 10.0 ** math.ceil(math.log10(span))
    steps = [top * f / 10**k for k in range(0, 4) for f in NICE]
    count = lambda step: math.floor(hi / step + 1e-9) - math.ceil(lo / step - 1e-9) + 1  # noqa: E731
    fits = [st for st in steps if count(st) >= 2 and length * st / span >= CB_TICK_PX]
    if not fits:
        return {}
    aim = min(BAR_TICKS, max(2, int(length // CB_TICK_PX)))
    step = min(fits, key=lambda st: abs(count(st) - aim))
    return dict(tickmode="linear", tick0=0, dtick=float(f"{step:.6g}"))


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
    y_title: str  # escaped, wrapped with <br> when longer than a short plot
    note: dict | None  # the annotation that says which window is shown, when it is not everything


def axis_title_lines(title: str, plot_px: float, max_lines: int = 3) -> list[str]:
    """An axis title, escaped, in lines no longer than its plot where words allow (at most ``max_lines``)."""
    if not title:
        return []
    text = safe_label(title)
    full = text_px(text, FONT)
    if full <= plot_px:
        return [text]
    return wrap_text(text, max(plot_px, full / max_lines, 60), FONT)


def y_title_overflow(y_title: str | Sequence[str], plot_h: float) -> int:
    """How far a (rotated, centred) y-axis title, or its wrapped lines, longer than its plot reaches above and
    below it."""
    lines = [y_title] if isinstance(y_title, str) else list(y_title)
    need = max((text_px(line, FONT) for line in lines if line), default=0)
    return int(max(0, math.ceil((need - plot_h) / 2) + 4)) if need else 0


def bottom_margin(col_px: float, col_angle: int, x_title: str) -> int:
    """Room under a plot for its column labels (horizontal, or rotated ``col_px`` long) and x-axis title."""
    return PAD + (AXIS_TITLE if x_title else 0) + int(FONT * 1.5 if col_angle == 0 else col_px + 6)


def bar_clearance(x_title: str, plot_w: float, plot_h: float) -> int:
    """How far right of a plot its colour bar goes so that, longer than a short plot, it clears the
    centred x-axis title below the plot."""
    if plot_h >= CB_MIN:
        return 10
    return int(max(10, text_px(x_title, FONT) / 2 - plot_w / 2 + 8))


def x_title_overflow(x_title: str, plot_w: float) -> int:
    """How far a centred x-axis title wider than its plot reaches left and right of it."""
    return int(max(0, math.ceil((text_px(safe_label(x_title), FONT) - plot_w) / 2) + 4)) if x_title else 0


def span_text(win: Window, total: int) -> str:
    return f"{win.start}–{win.start + win.count - 1} of 0–{total - 1}"


def window_note(rows: Window, n_rows: int, cols: Window | None = None, n_cols: int = 0) -> str | None:
    """The note "showing rows a–b of 0–n, columns c–d of 0–m · drag to pan" for the axes that show a window; None
    when everything is shown."""
    cols = cols or Window(0, n_cols)
    parts = [
        f"{what} {span_text(win, n)}"
        for what, win, n in (("rows", rows, n_rows), ("columns", cols, n_cols))
        if win.count < n
    ]
    return f"showing {', '.join(parts)} · drag to pan" if parts else None


def note_annotation(text: str, *, note_top: int, plot_top: int, left: int, width: int) -> dict:
    """The window note as an annotation ``note_top`` px below the figure's top edge (the plot starts at
    ``plot_top``, ``left`` px from the left edge), aligned with the title and wrapped to the figure width
    (``note_height`` px tall)."""
    lines = wrap_text(safe_label(text), width - 2 * PAD, FONT)
    note = dict(
        text="<br>".join(lines),
        xref="paper",
        x=0,
        xanchor="left",
        xshift=-(left - PAD),
        yref="paper",
        y=1,
        yanchor="top",
        yshift=plot_top - note_top,
        showarrow=False,
        align="left",
        font=dict(size=FONT, color=NOTE_COLOR),
        name="window",
    )
    return note


def note_height(text: str | None, width: int) -> int:
    return NOTE_H * len(wrap_text(safe_label(text), width - 2 * PAD, FONT)) + NOTE_GAP if text else 0


def _square_cells(n_rows: int, n_cols: int, budget_w: float, budget_h: float, cell_max: int) -> tuple[int, int, int]:
    """The cell size of a square-cell heatmap in a ``budget_w`` × ``budget_h`` px plot (see ``square_geometry``),
    and how many columns and rows of cells its window shows."""
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
    return cell, nx, ny


class Frame(NamedTuple):
    """What surrounds a heatmap's plot, which its geometry makes room for: the title, the axes' titles, the colour
    bar's width ``cb_px``, and the highlighted row that a window of rows keeps in view."""

    title: str | None
    x_title: str
    y_title: str
    cb_px: int
    highlight_row: int | None


def square_geometry(
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    frame: Frame,
    *,
    same_axes: bool,
    max_plot_h: int = PLOT_MAX_H,
    focus_col: int | None = None,
    cell_max: int = CELL_MAX,
) -> SquareGeometry:
    """Cell size, initial window and margins of a square-cell heatmap of one cell per row and column label that
    fits a ``SQUARE_FIT_W`` container: cells of ``CELL_MIN``..``CELL_MAX`` px up to ``WINDOW_TOKENS`` tokens, else
    at least ``WINDOW_CELL`` px with a window of as many rows and columns as the height and width budgets hold. The
    row window is centred on ``frame.highlight_row``; the column window ends at it when ``same_axes``
    (self-attention: the diagonal), else is centred on ``focus_col``.

    The figure is at least ``FIG_MIN_W`` wide; extra room is right margin, never wider cells. A y title longer
    than a short plot is wrapped; a window that is not everything is named in a note under the title."""
    title, x_title, y_title, cb_px, highlight_row = frame
    n_rows, n_cols = len(row_labels), len(col_labels)
    left = left_margin(row_labels, y_title)
    budget_w = min(PLOT_MAX_W, SQUARE_FIT_W - left - cb_px)
    budget_h = max_plot_h
    cell, nx, ny = _square_cells(n_rows, n_cols, budget_w, budget_h, cell_max)
    rows = window(n_rows, ny, highlight_row)
    if same_axes:
        cols = window(n_cols, nx, highlight_row if focus_col is None else focus_col, align="end")
    else:
        cols = window(n_cols, nx, focus_col)
    col_px = max((text_px(s) for s in col_labels), default=0.0)
    col_angle = 0 if col_px + 4 <= cell else -90
    col_step = 1 if col_angle == 0 else label_step(cell)
    bottom = bottom_margin(col_px, col_angle, x_title)
    pw, ph = cols.count * cell, rows.count * cell
    plot_w, plot_h = pw, ph
    y_lines = axis_title_lines(y_title, ph)
    left += AXIS_LINE * max(0, len(y_lines) - 1)
    x_over = x_title_overflow(x_title, pw)
    left = max(left, x_over + PAD)
    if col_angle == 0:  # the first and last horizontal labels are centred on their cells
        left = max(left, int((text_px(col_labels[cols.start]) - cell) / 2) + PAD if col_labels else 0)
    xpad = 10
    if ph < CB_MIN:  # a colour bar longer than the plot clears the labels and title under it
        last = text_px(col_labels[cols.start + cols.count - 1]) if col_labels and col_angle == 0 else 0
        xpad = int(max(10, x_over + 8, (last - cell) / 2 + 8))
    right = max(cb_px + xpad - 10, x_over + PAD)
    width = int(max(FIG_MIN_W, left + plot_w + right))
    block, top = title_block(title, width)
    text = window_note(rows, n_rows, cols, n_cols)
    note_top = top
    over = y_title_overflow(y_lines, ph)
    top, bottom = top + note_height(text, width) + over, max(bottom, over + PAD)
    height = top + max(plot_h + bottom, CB_MIN + PAD)
    margin = dict(l=left, r=width - left - plot_w, t=top, b=height - top - plot_h, autoexpand=False)
    note = note_annotation(text, note_top=note_top, plot_top=top, left=left, width=width) if text else None
    return SquareGeometry(
        cell,
        rows,
        cols,
        label_step(cell),
        col_step,
        col_angle,
        margin,
        width,
        height,
        block,
        xpad,
        "<br>".join(y_lines),
        note,
    )


@dataclass(frozen=True)
class Framing:
    """How ``heatmap`` sizes its figure and which part of a large matrix it shows first.

    ``cells`` (also ``layout.meta["cells"]``): "square" = square cells of a fixed size (at most ``cell_max`` px),
    ``layout.width`` set (render ``width="content"``), a window of the matrix when it is large, named in a note
    under the title; "rows" = full container width (no ``layout.width``: render ``width="stretch"``), fixed px per
    row, column labels thinned (and turned upright) to fit. None: "rows" for more than 64 columns, else "square".
    ``height`` caps a square figure's height, fixes a "rows" figure's. ``same_axes``: rows and columns are the same
    positions (self-attention; None: when the matrix is square): the column window ends at the highlighted row's
    diagonal; ``focus_col``: a column the initial window is centred on. ``zmax_shown``: the colour scale ends at the
    largest value of the initial window (weights and shares: their differences stay visible when all are small).
    ``text_px``: the widest text the figure writes in its cells itself (tokens), which a "rows" column must hold:
    such a figure asks that width (``layout.meta.min_width``, at most ``MIN_WIDTH``), and a phone scrolls to it
    rather than squeezing."""

    cells: str | None = None
    height: int | None = None
    cell_max: int = CELL_MAX
    same_axes: bool | None = None
    focus_col: int | None = None
    zmax_shown: bool = False
    text_px: float = 0.0


class Ticks(NamedTuple):
    """Which tick labels an axis shows: every ``row_step``-th row and ``col_step``-th column label (category axes),
    the column labels turned by ``col_angle``; ``rows`` / ``cols`` False hide an axis' labels (inner panels)."""

    row_step: int = 1
    col_step: int = 1
    col_angle: int = 0
    rows: bool = True
    cols: bool = True


class Marks(NamedTuple):
    """What a heatmap's cells carry besides their values: the highlighted row (negative counts from the end), the
    hover's text of each cell (R, C) instead of its value, numeric column positions (e.g. true dimension numbers:
    a linear x axis), the highlighted column."""

    highlight_row: int | None = None
    hover_text: np.ndarray | None = None
    x_values: np.ndarray | None = None
    highlight_col: int | None = None


# Long on purpose: the one place a heatmap's traces, colour axis, axes and highlight are made, each step feeding
# the next (sizes, labels, masked cells, hover); split, its pieces would pass a dozen values between them.
def _heatmap_parts(
    values: np.ndarray,
    row_labels: Sequence[object],
    col_labels: Sequence[object],
    spec: HeatmapSpec,
    marks: Marks = Marks(),
    *,
    ticks: Ticks = Ticks(),
    coloraxis: str = "coloraxis",
    cell_px: float | None = None,
) -> tuple[list[dict], dict, dict, dict, dict | None]:
    """Plain-dict pieces of one heatmap drawn as ``spec`` says: (traces, colour axis ``coloraxis``, x axis, y axis,
    highlight shape or None).

    Dicts, not graph objects: a figure built from them in one go is validated once (about 10x faster
    than adding traces and updating the layout piece by piece). ``marks.hover_text`` (R, C): what the hover says of each
    cell instead of its value. ``marks.x_values`` (numeric column positions, e.g. true dimension numbers) replace the
    category column labels with a linear axis whose ticks Plotly thins itself; category axes are labelled as
    ``ticks`` says. ``cell_px``: a cell's width, for whether printed values fit.
    """
    v = as_2d(values)
    R, C = v.shape
    check_len(R, row_labels, "rows", f"values of shape {v.shape}")
    check_len(C, col_labels, "columns", f"values of shape {v.shape}")
    hl = check_row(marks.highlight_row, R)
    ys = unique_labels(row_labels, index=spec.row_index, max_len=spec.label_len)
    xs = unique_labels(col_labels, index=spec.col_index, max_len=spec.label_len)
    masked = ~np.isfinite(v)
    z = round_sig(np.where(masked, np.nan, v), spec.decimals)
    xcoord: list | np.ndarray = xs if marks.x_values is None else np.asarray(marks.x_values, dtype=np.int32)

    xn = safe_label(spec.x_name if spec.x_name is not None else spec.x_title or "column")
    yn = safe_label(spec.y_name if spec.y_name is not None else spec.y_title or "row")
    vn = safe_label(spec.value_name)
    where = f"{yn}: %{{y}}<br>{xn}: %{{x}}"
    if marks.hover_text is not None:
        ht = np.asarray(marks.hover_text, dtype=object)
        if ht.shape != v.shape:
            raise ValueError(f"hover_text has shape {ht.shape} but values have shape {v.shape}")
        text = [[safe_label(t) for t in r] for r in ht]
        hovertemplate = f"{where}<br>%{{text}}<extra></extra>"
    else:
        text = None
        hovertemplate = f"{where}<br>{vn}: %{{z:.{spec.decimals}g}}<extra></extra>"
    show_values = spec.show_values and R <= MAX_TEXT_CELLS and C <= MAX_TEXT_CELLS and values_fit(z, cell_px)
    trace = dict(
        type="heatmap",
        z=z,
        x=xcoord,
        y=ys,
        coloraxis=coloraxis,
        hoverongaps=False,
        hovertemplate=hovertemplate,
        name=vn,
        textfont=dict(size=TICK_FONT),
    )
    if text is not None:
        trace["text"] = text
    if show_values:
        trace["texttemplate"] = "%{z:.2f}"
    traces = [trace]
    if masked.any():
        overlay = np.where(masked, 1.0, np.nan).astype(np.float32)
        traces.append(
            dict(
                type="heatmap",
                z=overlay,
                x=xcoord,
                y=ys,
                zmin=0,
                zmax=1,
                colorscale=[[0, MASK_COLOR], [1, MASK_COLOR]],
                showscale=False,
                hoverongaps=False,
                name="masked",
                hovertemplate=f"{where}<br>{safe_label(spec.masked_hover)}<extra></extra>",
            )
        )

    extra = dict(spec.colorbar or {})
    bar = {
        "thickness": CB_THICK,
        "tickfont": {"size": TICK_FONT},
        **extra,
        "title": {"text": vn, "side": "right", "font": {"size": FONT}, **extra.get("title", {})},
    }
    axis: dict[str, Any] = dict(colorscale=spec.colorscale, colorbar=bar)
    if not spec.show_scale:
        axis["showscale"] = False
    if spec.zmin is not None:
        axis["cmin"] = spec.zmin
    if spec.zmax is not None:
        axis["cmax"] = spec.zmax
    if spec.zmid is not None and (spec.zmin is None or spec.zmax is None):
        axis["cmid"] = spec.zmid

    def tick_labels(labels: list[str], show: bool, step: int) -> dict:
        if not show:
            return dict(showticklabels=False)
        shown = labels[::step]
        return dict(tickmode="array", tickvals=shown, ticktext=shown, showticklabels=True)

    tickfont = dict(size=TICK_FONT)
    title_font = dict(size=FONT)
    if marks.x_values is None:
        xaxis = dict(type="category", tickangle=ticks.col_angle, **tick_labels(xs, ticks.cols, ticks.col_step))
        x0, x1 = -0.5, C - 0.5
    else:
        x0, x1 = float(xcoord[0]) - 0.5 if C else -0.5, float(xcoord[-1]) + 0.5 if C else 0.5
        xaxis = dict(type="linear", tickformat="d", range=[x0, x1], showticklabels=ticks.cols, tickangle=0)
    xaxis.update(
        title=dict(text=safe_label(spec.x_title), font=title_font, standoff=8),
        showgrid=False,
        zeroline=False,
        automargin=True,
        ticks="",
        tickfont=tickfont,
    )
    yaxis = dict(
        type="category",
        title=dict(text=safe_label(spec.y_title), font=title_font, standoff=8),
        showgrid=False,
        zeroline=False,
        automargin=True,
        ticks="",
        autorange="reversed",
        tickfont=tickfont,
        **tick_labels(ys, ticks.rows, ticks.row_step),
    )
    shape = None
    if hl is not None:
        shape = outline("highlight", (x0, x1), (hl - 0.5, hl + 0.5))
    return traces, axis, xaxis, yaxis, shape


def set_window(axis: dict, win: Window, total: int, *, reverse: bool = False) -> bool:
    """Give a category (or unit-spaced) axis the initial range of ``win``; True when that is not everything.

    Always explicit: an autorange would pad for the highlight outline's line width and unsquare the cells.
    """
    lo, hi = win.start - 0.5, win.start + win.count - 0.5
    axis["range"] = [hi, lo] if reverse else [lo, hi]
    axis["autorange"] = False
    return win.count < total


def label_bar(bar: dict, v: np.ndarray, spec: HeatmapSpec) -> None:
    """Give a colour bar ``bar_ticks`` over the range it shows, unless its figure names its own ticks."""
    shown = None if _bar_ticks(spec.colorbar) else shown_range(v, spec)
    if shown is not None:
        bar.update(bar_ticks(*shown, bar["len"]))


def _bar_ticks(colorbar: dict | None) -> list[str] | None:
    return [str(t) for t in (colorbar or {}).get("ticktext") or []] or None


# Long on purpose: the one heatmap builder every figure goes through: validation, geometry, parts and layout in
# the order a reader checks them.
def heatmap(
    values: np.ndarray,
    row_labels: Sequence[object],
    col_labels: Sequence[object],
    spec: HeatmapSpec = HeatmapSpec(),
    *,
    title: str,
    marks: Marks = Marks(),
    framing: Framing = Framing(),
) -> Figure:
    """A labelled heatmap of ``values`` (R, C), drawn as ``spec`` says and sized as ``framing`` says: rows =
    ``row_labels`` (top to bottom), columns = ``col_labels``; ``marks``: the highlighted row and column (outlined),
    the hover's text, numeric column positions ("rows" figures).
    """
    highlight_row, hover_text, x_values, highlight_col = marks
    v = as_2d(values)
    cells = framing.cells or ("rows" if v.shape[1] > 64 else "square")
    if cells not in ("square", "rows"):
        raise ValueError(f"cells must be 'square' or 'rows', not {cells!r}")
    check_len(v.shape[0], row_labels, "rows", f"values of shape {v.shape}")
    check_len(v.shape[1], col_labels, "columns", f"values of shape {v.shape}")
    hl = check_row(highlight_row, v.shape[0])
    hc = check_row(highlight_col, v.shape[1]) if highlight_col is not None else None
    R, C = v.shape
    ys = unique_labels(row_labels, index=spec.row_index, max_len=spec.label_len)
    xs = unique_labels(col_labels, index=spec.col_index, max_len=spec.label_len)
    cb_px = colorbar_px(_bar_ticks(spec.colorbar), spec.value_name) if spec.show_scale else 0
    x_title, y_title, height = spec.x_title, spec.y_title, framing.height
    notes = []
    if cells == "square":
        same = R == C if framing.same_axes is None else framing.same_axes
        g = square_geometry(
            ys,
            xs,
            Frame(title, x_title, y_title, cb_px, hl),
            same_axes=same,
            focus_col=framing.focus_col,
            cell_max=framing.cell_max,
            max_plot_h=PLOT_MAX_H if height is None else max(CELL_MIN, height - 150),
        )
        if framing.zmax_shown:
            spec = replace(spec, zmax=shown_max(v, g.rows, g.cols, spec.zmax))
        traces, axis, xaxis, yaxis, shape = _heatmap_parts(
            v,
            row_labels,
            col_labels,
            spec,
            Marks(hl, hover_text),
            ticks=Ticks(g.row_step, g.col_step, g.col_angle),
            cell_px=g.cell,
        )
        yaxis["title"]["text"] = g.y_title
        axis["colorbar"] = colorbar_dict(
            axis["colorbar"],
            axis["colorbar"]["title"]["text"],
            length=max(g.rows.count * g.cell, CB_MIN),
            xpad=g.cb_xpad,
        )
        label_bar(axis["colorbar"], v, spec)
        moved = set_window(xaxis, g.cols, C) | set_window(yaxis, g.rows, R, reverse=True)
        layout = layout_defaults(title, height=g.height, width=g.width, cells="square")
        layout.update(margin=g.margin, title=g.title)
        if g.note:
            notes.append(g.note)
    else:
        col_angle, col_step, col_px = 0, 1, 0.0
        if x_values is None:
            col_angle, col_step, col_px = col_label_layout(C, xs, left_margin(ys, y_title) + cb_px)
        geo = rows_geometry(
            ys,
            Frame(title, x_title, y_title, cb_px, hl),
            height=height,
            col_px=col_px if col_angle else 0.0,
        )
        plot_w = MIN_WIDTH - geo.margin["l"] - geo.margin["r"]
        if framing.zmax_shown:
            spec = replace(spec, zmax=shown_max(v, geo.rows, Window(0, C), spec.zmax))
        traces, axis, xaxis, yaxis, shape = _heatmap_parts(
            v,
            row_labels,
            col_labels,
            spec,
            Marks(hl, hover_text, x_values),
            ticks=Ticks(geo.row_step, col_step, col_angle),
            cell_px=plot_w / max(C, 1),
        )
        axis["colorbar"] = colorbar_dict(axis["colorbar"], axis["colorbar"]["title"]["text"], length=geo.plot_h)
        label_bar(axis["colorbar"], v, spec)
        moved = set_window(yaxis, geo.rows, R, reverse=True)
        if x_values is None:
            set_window(xaxis, Window(0, C), C)
        least = geo.margin["l"] + geo.margin["r"] + C * column_px(v, xs, spec, col_angle, framing.text_px)
        # a few columns: a phone's column holds them, no sideways scroll; text in the cells: its width, scrolled to
        asks = least < STRETCH_MIN_W or framing.text_px > 0
        layout = layout_defaults(title, height=geo.height, cells="rows", squeezes=asks)
        layout.update(margin=geo.margin, title=geo.title)
        if asks:  # never more than the narrowest desktop column: a desktop never scrolls a figure sideways
            layout["meta"]["min_width"] = int(min(least, MIN_WIDTH))
        if geo.note:
            notes.append(geo.note)
    if moved:
        layout["dragmode"] = "pan"  # the rest of the matrix is a drag away
    shapes = [shape] if shape else []
    if hc is not None:
        x = float(x_values[hc]) if x_values is not None else hc
        shapes.append(outline("highlight_col", (x - 0.5, x + 0.5), (0, 1), yref="paper"))
    layout.update(coloraxis=axis, xaxis=xaxis, yaxis=yaxis, shapes=shapes, annotations=notes)
    return new_figure(traces, layout)


@overload
def shown_max(v: np.ndarray, rows: Window, cols: Window, default: float) -> float: ...
@overload
def shown_max(v: np.ndarray, rows: Window, cols: Window, default: None) -> float | None: ...
def shown_max(v: np.ndarray, rows: Window, cols: Window, default: float | None) -> float | None:
    """The largest finite value in the initial window (``default`` when there is none above 0)."""
    part = v[rows.start : rows.start + rows.count, cols.start : cols.start + cols.count]
    part = part[np.isfinite(part)]
    top = float(part.max()) if part.size else 0.0
    return top if top > 0 else default


def column_px(v: np.ndarray, col_labels: Sequence[str], spec: HeatmapSpec, col_angle: int, text: float = 0.0) -> int:
    """The least width of a full-width matrix's column: its label (horizontal, or an upright one's line), the
    widest value where the cells print their values, and ``text``, the widest text the figure writes in them."""
    label = max((text_px(s) for s in col_labels), default=0.0) + 8 if col_angle == 0 else LABEL_PX
    shown = spec.show_values and max(v.shape) <= MAX_TEXT_CELLS
    value = value_px(v) + 8 if shown else 0.0
    return int(math.ceil(max(label, value, text + 8 if text else 0.0, CELL_MIN)))


def col_label_layout(n_cols: int, labels: Sequence[str], side_px: float) -> tuple[int, int, float]:
    """(angle, every n-th label, label length px) of a full-width category x axis at the narrowest container:
    horizontal labels when they all fit, else upright (-90°) ones, thinned to one per ``LABEL_PX``."""
    per = (MIN_WIDTH - side_px) / max(n_cols, 1)
    widest = max((text_px(s) for s in labels), default=0.0)
    if widest + 8 <= per:
        return 0, 1, widest
    return -90, label_step(per), widest


class RowsGeometry(NamedTuple):
    row_px: float
    rows: Window
    row_step: int
    plot_h: int
    margin: dict
    height: int
    title: dict
    note: dict | None = None  # names the window of rows when it is not all of them


def rows_geometry(
    row_labels: Sequence[str],
    frame: Frame,
    *,
    height: int | None = None,
    extra_top: int = 0,
    col_px: float = 0.0,
) -> RowsGeometry:
    """Rows, window and margins of a full-width matrix of one row per label: ``ROW_PX`` px per row up to 20 rows,
    else ``ROW_MIN``, at most ``ROWS_MAX_H`` px of rows (a window containing the highlighted row, named in a note
    under the title), at least ``PLOT_MIN_H``, with room above and below for a y title longer than that.
    ``col_px``: the length of upright column labels (0: horizontal ones)."""
    title, x_title, y_title, cb_px, highlight_row = frame
    n_rows = len(row_labels)
    left = left_margin(row_labels, y_title)
    block, top = title_block(title, MIN_WIDTH)
    row_px = ROW_PX if n_rows <= WINDOW_TOKENS else ROW_MIN
    rows = window(n_rows, int(ROWS_MAX_H // row_px), highlight_row)
    text = window_note(rows, n_rows)
    note_top = top
    top += note_height(text, MIN_WIDTH) + extra_top
    bottom = PAD + (AXIS_TITLE if x_title else 0) + int(col_px + 6 if col_px else FONT * 1.6)
    plot_h = max(PLOT_MIN_H, rows.count * row_px)
    if height is not None:
        plot_h = max(PLOT_MIN_H, height - top - bottom)
    over = y_title_overflow(safe_label(y_title), plot_h) if y_title else 0  # a y title longer than a short plot
    top, bottom = top + over, max(bottom, over + PAD)
    eff = plot_h / rows.count
    margin = dict(l=left, r=cb_px, t=top, b=bottom, autoexpand=True)
    note = note_annotation(text, note_top=note_top, plot_top=top, left=left, width=MIN_WIDTH) if text else None
    return RowsGeometry(eff, rows, label_step(eff), int(plot_h), margin, int(top + plot_h + bottom), block, note)
