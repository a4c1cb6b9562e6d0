"""Small shared helpers: HTML-safe labels, unique axis labels, compact numbers, layout defaults."""

from __future__ import annotations

import copy
import functools
import html
import json
import math
import re
import unicodedata
from collections.abc import Sequence

import numpy as np
import plotly.colors
import plotly.graph_objects as go
import plotly.io as pio

from . import plotly_private

MASK_COLOR = "#d9d9d9"  # neutral light grey for masked (-inf / NaN) cells
MASKED_HOVER = "masked (future)"
HIGHLIGHT_COLOR = "#e4572e"
OUTLINE_W = 2.5  # px of a highlighted cell, row or column's outline on a heatmap
# Plotly's "none" template as the object it stands for (figures are not validated, which would expand the name):
# no theme, and the smallest figure JSON
TEMPLATE = {"data": {"scatter": [{"type": "scatter"}]}}
MAX_LABEL_LEN = 24
FONT = 12  # base text size
TICK_FONT = 11  # tick labels, colour-bar ticks, cell values: the smallest text in any figure
TITLE_FONT = 15
MIN_WIDTH = 860  # the narrowest container a figure is drawn in (the app's main column at 1366 x 768)
PHONE_WIDTH = 340  # a phone's column (390 px less the page's margins), to which a squeezing figure wraps its title
STRETCH_MIN_W = 600  # the least width of a stretching figure that does not squeeze (views/plot.js): a phone scrolls it
MODEBAR_W = 310  # Plotly's toolbar, top-right: up to about 300 px wide ...
MODEBAR_H = 28  # ... and 25 px high
PAD = 10


def safe_label(text: object) -> str:
    """Text for a Plotly label or hover: ``&``, ``<`` and ``>`` escaped so no user text becomes HTML."""
    return html.escape(str(text), quote=False)


def _truncate(text: str, max_len: int | None) -> str:
    if max_len is not None and len(text) > max_len:
        return text[: max(max_len - 1, 1)] + "…"
    return text


def unique_labels(labels: Sequence[object], *, index: bool = True, max_len: int | None = MAX_LABEL_LEN) -> list[str]:
    """Distinct, HTML-safe axis labels.

    Plotly merges identical category labels, so with ``index=True`` every label is prefixed with
    its position (``"3:▁le"``); with ``index=False`` labels are kept as they are unless two of them
    coincide, in which case all get the prefix. Long labels are cut to ``max_len`` characters.
    """
    raw = [_truncate(str(label), max_len) for label in labels]
    if index or len(set(raw)) != len(raw):
        raw = [f"{i}:{label}" for i, label in enumerate(raw)]
    return [safe_label(label) for label in raw]


def round_sig(values: np.ndarray, digits: int = 4) -> np.ndarray:
    """Round to ``digits`` significant digits and return float32 (non-finite values kept as they are)."""
    a = np.asarray(values, dtype=np.float64)
    if digits is None or a.size == 0:
        return a.astype(np.float32)
    if digits < 1:
        raise ValueError(f"digits must be >= 1, not {digits}")
    out = a.copy()
    ok = np.isfinite(a) & (a != 0)
    if ok.any():
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            x = a[ok]
            scale = 10.0 ** (digits - 1 - np.floor(np.log10(np.abs(x))))
            r = np.round(x * scale) / scale
        out[ok] = np.where(np.isfinite(r), r, x)
    return out.astype(np.float32)


def count_dtick(top: int) -> int:
    """The tick step of an axis of counts from 0 to ``top``: a whole, round step (1, 2 or 5 times a power of ten)
    giving at most 8 intervals, so no tick reads a fraction of a student or a sentence."""
    raw = max(top, 1) / 8
    power = 10 ** math.floor(math.log10(raw)) if raw >= 1 else 1
    return int(next(m * power for m in (1, 2, 5, 10) if m * power >= raw))


def as_tokens(tokens: Sequence[object], name: str = "tokens") -> list[str]:
    if isinstance(tokens, str | bytes):
        raise ValueError(f"{name} must be a list of token strings, not a single string")
    return [str(t) for t in tokens]


def as_2d(values: object, name: str = "values") -> np.ndarray:
    a = np.asarray(values, dtype=np.float64)
    if a.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array, got shape {a.shape}")
    return a


def check_len(n: int, labels: Sequence[object], what: str, name: str) -> None:
    if len(labels) != n:
        raise ValueError(f"{name} has {n} {what} but {len(labels)} labels were given")


def check_row(highlight_row: int | None, n_rows: int) -> int | None:
    """Validate a highlighted row index; negative indices count from the end (-1 = newest position)."""
    if highlight_row is None:
        return None
    if isinstance(highlight_row, bool) or not isinstance(highlight_row, int | np.integer):
        raise ValueError(f"highlight_row must be an int or None, not {highlight_row!r}")
    r = int(highlight_row)
    if not -n_rows <= r < n_rows:
        raise ValueError(f"highlight_row {r} is out of range for {n_rows} rows")
    return r % n_rows


def outline(name: str, x: tuple[float, float], y: tuple[float, float], width: float = OUTLINE_W, **refs: str) -> dict:
    """A highlight: a rectangle from x[0] to x[1] and y[0] to y[1] outlined in the highlight colour above the
    cells, not filled; ``refs`` its xref and yref where they are not the first axes'."""
    return dict(
        type="rect",
        **refs,
        x0=x[0],
        x1=x[1],
        y0=y[0],
        y1=y[1],
        line=dict(color=HIGHLIGHT_COLOR, width=width),
        fillcolor="rgba(0,0,0,0)",
        layer="above",
        name=name,
    )


def text_px(text: str, size: float = TICK_FONT) -> float:
    """A generous estimate of the rendered width of ``text`` (HTML entities decoded) at ``size`` px:
    wide fonts such as Verdana run about 0.64 em per character, East Asian wide characters 1 em."""
    plain = html.unescape(re.sub(r"<[^>]*>", "", str(text)))
    return size * sum(1.0 if unicodedata.east_asian_width(ch) in "WF" else 0.64 for ch in plain)


def wrap_text(text: str, max_px: float, size: float) -> list[str]:
    """Greedy word wrap of (already escaped) ``text`` into lines at most ``max_px`` wide where words allow.

    "step 3", "position 3" and "layer 3" are never split: the app and its benchmarks read them from titles.
    """
    words = re.sub(r"\b(step|position|layer) (\d)", "\\1\u00a0\\2", text).split(" ")
    lines: list[str] = []
    for word in words:
        if lines and text_px(lines[-1] + " " + word, size) <= max_px:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return [line.replace("\u00a0", " ") for line in lines] or [""]


def title_block(title: str | None, width: float, narrowest: float | None = None) -> tuple[dict, int]:
    """Layout title (escaped, left-aligned) and the y, in px from the top, where the content below may start.

    The modebar (Plotly's toolbar) sits in the top-right corner; a title short enough to end before it
    shares its line, a longer one is wrapped to the full width on the lines below it. A figure that may be drawn
    ``narrowest`` px wide (a phone's column) wraps its title to that width: Plotly neither wraps a title nor shows
    what is wider than the figure.
    """
    if not title:
        return dict(text=None), MODEBAR_H + 4
    text = safe_label(title)
    line_h = int(TITLE_FONT * 1.4)
    wrap = min(width, narrowest or width) - 2 * PAD - 10
    if text_px(text, TITLE_FONT) <= min(width - MODEBAR_W - 2 * PAD, wrap):
        lines, top = [text], 3
    else:
        lines, top = wrap_text(text, wrap, TITLE_FONT), MODEBAR_H
    # Plotly draws the text about 3.5 px above pad.t, and a multi-line title another 10.5 px higher
    pad_t = top + 4 + (11 if len(lines) > 1 else 0)
    block = dict(
        text="<br>".join(lines),
        x=0.0,
        xref="container",
        xanchor="left",
        y=1.0,
        yref="container",
        yanchor="top",
        pad=dict(t=pad_t, l=PAD),
        font=dict(size=TITLE_FONT),
    )
    return block, top + line_h * len(lines) + 8


def layout_defaults(
    title: str | None,
    *,
    height: int,
    legend: bool = False,
    width: int | None = None,
    cells: str | None = None,
    squeezes: bool = False,
) -> dict:
    """Shared look as a plain layout dict: tiny template, 11 px minimum text, escaped title clear of the modebar.

    ``width`` set: the figure is drawn exactly that wide (render it ``width="content"``); None: it fills its
    container (``width="stretch"``), assumed at least ``MIN_WIDTH`` px, or, when it ``squeezes`` to a phone's column
    (bars, lines and curves do; heatmaps and figures with ``meta.min_width`` keep 600 px and scroll in their frame,
    ``views/plot.js``), its title as wrapped to ``PHONE_WIDTH`` (else to ``STRETCH_MIN_W``) in
    ``layout.meta.narrow_title``, which the browser draws below MIN_WIDTH (a desktop keeps its title on the lines
    its width needs). ``cells`` goes to ``layout.meta``.
    """
    block, top = title_block(title, width or MIN_WIDTH)
    meta: dict = {} if cells is None else {"cells": cells}
    if not width:  # the title as a phone draws the figure (its column, or STRETCH_MIN_W), taller by ``grow`` px
        narrow, narrow_top = title_block(title, MIN_WIDTH, PHONE_WIDTH if squeezes else STRETCH_MIN_W)
        if narrow["text"] != block["text"]:
            meta["narrow_title"] = {"title": narrow, "grow": narrow_top - top}
    out = dict(
        template=copy.deepcopy(TEMPLATE),  # a figure may change its own
        title=block,
        height=int(height),
        margin=dict(l=10, r=10, t=top, b=10),
        font=dict(size=FONT),
        paper_bgcolor="white",
        plot_bgcolor="white",
        showlegend=legend,
        hoverlabel=dict(namelength=-1, font=dict(size=FONT)),
        legend=dict(font=dict(size=FONT)),
    )
    if width is not None:
        out["width"] = int(width)
    if meta:
        out["meta"] = meta
    return out


def new_figure(data: Sequence[dict] | None = None, layout: dict | None = None) -> Figure:
    """A figure from the builders' own trace and layout dicts, not checked again against Plotly's schema: the
    checks cost more than the rest of a figure (the All stages view builds ~25 a step). What the checks would
    change is done here (Plotly's colour-scale names, which plotly.js does not all know, become their colours);
    the tests check every figure the app sends against the schema, and that checking it changes nothing
    (``harness.audit.figures``)."""
    # unchecked, a figure without a template would take Plotly's default theme, which a later update merges into
    layout = dict(layout or {})
    if "template" not in layout:  # layout_defaults gives every builder's layout its own copy already
        layout["template"] = copy.deepcopy(TEMPLATE)
    for trace in data or ():
        for owner in (trace, trace.get("marker")):
            if isinstance(owner, dict) and isinstance(owner.get("colorscale"), str):
                owner["colorscale"] = named_colorscale(owner["colorscale"])
    for key, axis in layout.items():
        if key.startswith("coloraxis") and isinstance(axis, dict) and isinstance(axis.get("colorscale"), str):
            axis["colorscale"] = named_colorscale(axis["colorscale"])
    return Figure(list(data or ()), layout)


class Figure:
    """A figure as its builder made it: Plotly's trace dicts ``data`` and layout dict ``layout``, which are what its
    JSON holds. The app writes it straight to JSON (``figure_json``), without building Plotly's objects: building
    them costs more than the builder's own work. ``plotly()`` is the same figure as Plotly's ``go.Figure`` (built
    from the dicts without checking them again, a new one on each call), to read it the Plotly way (the tests) or
    hand it to Plotly."""

    __slots__ = ("data", "layout")

    def __init__(self, data: list[dict], layout: dict) -> None:
        self.data = data
        self.layout = layout

    def plotly(self) -> go.Figure:
        return plotly_private.unchecked(self.data, self.layout)

    def to_json(self) -> str:
        return figure_json(self)


def figure_parts(fig: Figure | go.Figure) -> tuple[list[dict], dict]:
    """The figure's trace dicts and layout dict as its JSON holds them (a ``Figure``'s own; a ``go.Figure``'s read
    without copying them). Not to be changed."""
    return (fig.data, fig.layout) if isinstance(fig, Figure) else plotly_private.parts(fig)


def figure_json(fig: Figure | go.Figure) -> str:
    """The figure's JSON as ``plotly.io.to_json`` writes it (numpy arrays as Plotly's typed arrays), from the
    figure's own dicts (``figure_parts``): Plotly's way deep-copies the whole figure and walks every value first,
    about five times as slow (the All stages view writes ~25 figures a step). A value only Plotly's encoder knows
    (NaN as null, a date) takes Plotly's way."""
    if isinstance(fig, Figure) or not plotly_private.has_frames(fig):
        data, layout = figure_parts(fig)
        try:
            return json.dumps(
                _set_only({"data": data, "layout": layout}),
                default=_typed_array,
                allow_nan=False,
                separators=(",", ":"),
            )
        except (TypeError, ValueError):
            pass
    return pio.to_json(fig.plotly() if isinstance(fig, Figure) else fig, validate=False)


def _set_only(obj):
    """``obj`` without its properties set to None: for Plotly, None leaves a property unset (a builder's
    ``customdata=None``), so a figure it built holds no such key. ``meta`` is the figure's own data, kept whole."""
    if isinstance(obj, dict):
        return {k: v if k == "meta" else _set_only(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list | tuple) and obj and isinstance(obj[0], dict | list | tuple):  # arrays are of one kind
        return [_set_only(x) for x in obj]
    return obj


def _typed_array(obj):
    if isinstance(obj, np.ndarray):
        return plotly_private.typed_array(obj)
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"{type(obj).__name__} is not JSON")


def named_colorscale(name: str) -> list[list]:
    """Plotly's colour scale ``name`` ("RdBu_r": reversed) as [position, colour] pairs."""
    return [list(pair) for pair in _colorscale(name)]


@functools.cache
def _colorscale(name: str) -> tuple[tuple, ...]:
    return tuple(tuple(pair) for pair in plotly.colors.get_colorscale(name))


def _plain(label: object, index: int | None = None) -> str:
    """A label as read aloud: markup and entities of an escaped Plotly label undone, line breaks as spaces, and
    the ``index:`` prefix ``unique_labels`` gives a category (its position is said anyway) left out."""
    text = html.unescape(str(label).replace("<br>", " ")).strip()
    return text.removeprefix(f"{index}:") if index is not None else text


def describe_heatmap(
    z: np.ndarray, rows: Sequence[object], cols: Sequence[object], title: str | None, value_name: str = "value"
) -> str:
    """One line that says what a heatmap shows, computed from its data (a text alternative for screen readers):
    its title, its shape and its strongest cell, e.g. "…: 5 rows × 7 columns; row 3 'petite → fille' attends
    most to 'girl' (0.62)". Attention weights ("weight") are read as where a row attends; other values by their
    largest magnitude. Rows with a single finite cell (the first position of a causal mask, weight 1 on <s>)
    are passed over while another row has a choice. Masked cells (NaN, ±inf) never count."""
    a = as_2d(z, "z")
    R, C = a.shape
    check_len(R, rows, "rows", f"z of shape {a.shape}")
    check_len(C, cols, "columns", f"z of shape {a.shape}")
    head = f"{_plain(title)}: " if title else ""
    shape = f"heatmap of {R} row{'s' if R != 1 else ''} × {C} column{'s' if C != 1 else ''}"
    finite = np.isfinite(a)
    if not finite.any():
        return f"{head}{shape}; every cell is masked."
    choice = finite & (finite.sum(1, keepdims=True) > 1)
    pool = choice if choice.any() else finite
    score = np.where(pool, np.abs(a), -np.inf)
    i, j = (int(n) for n in np.unravel_index(int(np.argmax(score)), a.shape))
    row, col, v = _plain(rows[i], i), _plain(cols[j], j), float(a[i, j])
    name = _plain(value_name)
    if np.ptp(a[pool]) == 0:  # nothing stands out (the causal mask's open cells)
        masked = int((~finite).sum())
        return f"{head}{shape}; every open cell is {v:.3g}, {masked} cell{'s' if masked != 1 else ''} masked."
    if name == "weight":
        return f"{head}{shape}; row {i} '{row}' attends most to '{col}' ({v:.2f})."
    what = "largest" if (a[finite] >= 0).all() else "largest in magnitude"
    return f"{head}{shape}; {what} {name}: {v:.3g} at row {i} '{row}', column '{col}'."
