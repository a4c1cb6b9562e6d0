"""Small shared helpers: HTML-safe labels, unique axis labels, compact numbers, layout defaults."""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

MASK_COLOR = "#d9d9d9"  # neutral light grey for masked (-inf / NaN) cells
MASKED_HOVER = "masked (future)"
HIGHLIGHT_COLOR = "#e4572e"
TEMPLATE = "none"  # the smallest template: keeps the figure JSON small
MAX_LABEL_LEN = 24


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


def auto_height(n_rows: int, *, per_row: int = 18, base: int = 150, lo: int = 260, hi: int = 900) -> int:
    return int(min(hi, max(lo, base + per_row * n_rows)))


def layout_defaults(title: str | None, *, height: int, legend: bool = False) -> dict:
    """Shared look as a plain layout dict: tiny template, compact margins, escaped title, given height."""
    return dict(
        template=TEMPLATE,
        title=dict(text=safe_label(title) if title else None, x=0.0, xanchor="left", font=dict(size=15)),
        height=height,
        margin=dict(l=10, r=10, t=60 if title else 30, b=10),
        font=dict(size=12),
        paper_bgcolor="white",
        plot_bgcolor="white",
        showlegend=legend,
        hoverlabel=dict(namelength=-1),
    )


def finish_layout(fig: go.Figure, title: str | None, *, height: int, legend: bool = False) -> go.Figure:
    """Shared look (``layout_defaults``) applied to a figure built piece by piece."""
    fig.update_layout(layout_defaults(title, height=height, legend=legend))
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True)
    return fig
