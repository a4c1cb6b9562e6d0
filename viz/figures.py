"""Figures for the decoder stages: matrices, attention, positional encoding, Add & Norm, FFN, KV cache."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .common import (
    HIGHLIGHT_COLOR,
    MASKED_HOVER,
    as_2d,
    as_tokens,
    auto_height,
    check_len,
    check_row,
    finish_layout,
    round_sig,
    unique_labels,
)
from .heatmap import add_heatmap, heatmap

NEG_INF_BELOW = -1e8  # finite "minus infinity" fills (e.g. -1e9) count as masked in score/mask views

ATTENTION_KINDS = {
    # kind: colorscale, zmin, zmax, zmid, value name
    "weights": ("Viridis", 0.0, 1.0, None, "weight"),
    "scores": ("RdBu_r", None, None, 0.0, "score"),
    "masked_scores": ("RdBu_r", None, None, 0.0, "masked score"),
    "mask": ([[0, "#6baed6"], [1, "#6baed6"]], 0.0, 1.0, None, "mask"),
}


def matrix_figure(
    values: np.ndarray,
    tokens: Sequence[str],
    *,
    title: str,
    dim_label: str = "dimension",
    highlight_row: int | None = None,
    colorscale: str | list = "RdBu_r",
    value_name: str = "value",
    token_label: str = "token",
) -> go.Figure:
    """A (T, D) activation matrix: rows = tokens, columns = dimensions 0..D-1, diverging scale centred on 0.

    For embeddings, positional encodings, Q/K/V, FFN hidden units, Add & Norm outputs.
    """
    v = as_2d(values)
    tokens = as_tokens(tokens)
    check_len(v.shape[0], tokens, "rows", f"values of shape {v.shape}")
    return heatmap(
        v, tokens, [str(d) for d in range(v.shape[1])], title=title, x_title=dim_label, y_title=token_label,
        colorscale=colorscale, zmid=0.0, highlight_row=highlight_row, value_name=value_name, col_index=False,
    )  # fmt: skip


def _attention_values(weights: np.ndarray, kind: str) -> np.ndarray:
    if kind not in ATTENTION_KINDS:
        raise ValueError(f"kind must be one of {sorted(ATTENTION_KINDS)}, not {kind!r}")
    w = np.array(weights, dtype=np.float64)
    if kind != "weights":
        w[w <= NEG_INF_BELOW] = -np.inf
    if kind == "mask":
        w[np.isfinite(w)] = 0.0  # additive mask: 0 = may attend, -inf = masked
    return w


def attention_figure(
    weights: np.ndarray,
    q_tokens: Sequence[str],
    k_tokens: Sequence[str],
    *,
    title: str,
    highlight_row: int | None = None,
    kind: str = "weights",
    masked_hover: str = MASKED_HOVER,
    q_title: str = "query token",
    k_title: str = "key token",
) -> go.Figure:
    """One attention matrix (Tq, Tk): rows = queries, columns = keys.

    ``kind``: "weights" (softmax output, sequential 0..1), "scores" (QK^T/sqrt(d), diverging around 0),
    "mask" (additive mask: 0 cells coloured, -inf cells masked) or "masked_scores" (scores + mask,
    -inf masked). Values at or below -1e8 count as -inf in the non-weight kinds.
    """
    w = _attention_values(weights, kind)
    if w.ndim != 2:
        raise ValueError(f"attention {kind} must be 2-D (Tq, Tk), got shape {w.shape}")
    q_tokens, k_tokens = as_tokens(q_tokens, "q_tokens"), as_tokens(k_tokens, "k_tokens")
    check_len(w.shape[0], q_tokens, "query rows", f"attention of shape {w.shape}")
    check_len(w.shape[1], k_tokens, "key columns", f"attention of shape {w.shape}")
    cs, zmin, zmax, zmid, name = ATTENTION_KINDS[kind]
    colorbar = dict(tickvals=[0.5], ticktext=["0 (attend)"]) if kind == "mask" else None
    return heatmap(
        w, q_tokens, k_tokens, title=title, x_title=k_title, y_title=q_title, colorscale=cs, zmin=zmin, zmax=zmax,
        zmid=zmid, highlight_row=highlight_row, masked_hover=masked_hover, value_name=name, colorbar=colorbar,
    )  # fmt: skip


def alignment_figure(
    cross_weights: np.ndarray,
    tgt_tokens: Sequence[str],
    src_tokens: Sequence[str],
    *,
    title: str,
    highlight_row: int | None = None,
) -> go.Figure:
    """Cross-attention alignment (Tq, S): target tokens (queries) x source tokens (keys), weights 0..1."""
    return attention_figure(
        cross_weights, tgt_tokens, src_tokens, title=title, highlight_row=highlight_row, kind="weights",
        q_title="target token (query)", k_title="source token (key)", masked_hover="masked (padding)",
    )  # fmt: skip


def heads_grid(
    weights: np.ndarray,
    q_tokens: Sequence[str],
    k_tokens: Sequence[str],
    *,
    title: str,
    kind: str = "weights",
    highlight_row: int | None = None,
    cols: int = 4,
    masked_hover: str = MASKED_HOVER,
) -> go.Figure:
    """All heads (H, Tq, Tk) side by side (``cols`` per row), one shared colour scale and colour bar."""
    w = _attention_values(weights, kind)
    if w.ndim != 3:
        raise ValueError(f"heads_grid needs (H, Tq, Tk) weights, got shape {w.shape}")
    H, Tq, Tk = w.shape
    if H == 0:
        raise ValueError("heads_grid needs at least one head")
    q_tokens, k_tokens = as_tokens(q_tokens, "q_tokens"), as_tokens(k_tokens, "k_tokens")
    check_len(Tq, q_tokens, "query rows", f"attention of shape {w.shape}")
    check_len(Tk, k_tokens, "key columns", f"attention of shape {w.shape}")
    check_row(highlight_row, Tq)
    ncols = max(1, min(int(cols), H))
    nrows = math.ceil(H / ncols)
    fig = make_subplots(
        rows=nrows, cols=ncols, subplot_titles=[f"head {h}" for h in range(H)], shared_xaxes=True,
        shared_yaxes=True, horizontal_spacing=0.02, vertical_spacing=min(0.3 / nrows, 0.12),
    )  # fmt: skip
    cs, zmin, zmax, zmid, name = ATTENTION_KINDS[kind]
    colorbar = dict(tickvals=[0.5], ticktext=["0 (attend)"]) if kind == "mask" else None
    if zmid is not None:  # one symmetric range for every head
        finite = w[np.isfinite(w)]
        m = float(np.abs(finite).max()) if finite.size else 1.0
        zmin, zmax = -m, m
    for h in range(H):
        r, c = h // ncols + 1, h % ncols + 1
        add_heatmap(
            fig, w[h], q_tokens, k_tokens, row=r, col=c, x_title="key token" if r == nrows else "",
            y_title="query token" if c == 1 else "", x_name="key token", y_name=f"head {h} · query token",
            colorscale=cs, zmin=zmin, zmax=zmax, zmid=zmid, highlight_row=highlight_row, masked_hover=masked_hover,
            value_name=name, colorbar=colorbar, show_row_ticks=c == 1, show_col_ticks=r == nrows,
        )  # fmt: skip
    height = auto_height(nrows * max(Tq, 6), per_row=12, hi=1100) + 40 * nrows
    return finish_layout(fig, title, height=min(height, 1200))


def _sin_or_cos(pe: np.ndarray, d: int, layout: str | None) -> str | None:
    if layout == "interleaved":
        return "sin" if d % 2 == 0 else "cos"
    if layout == "half":
        return "sin" if d < pe.shape[1] // 2 else "cos"
    if pe.shape[0] == 0:
        return None
    v0 = float(pe[0, d])
    return "sin" if abs(v0) < 1e-5 else "cos" if abs(v0 - 1.0) < 1e-5 else None


def positional_curves(
    pe: np.ndarray,
    dims: Sequence[int],
    *,
    title: str,
    tokens: Sequence[str] | None = None,
    layout: str | None = None,
) -> go.Figure:
    """Selected positional-encoding dimensions over position (sinusoids): one line per dimension.

    Each line is tagged sin or cos: from ``layout`` ("interleaved": even dims sin, odd cos; "half":
    first half sin, second half cos) or, when ``layout`` is None, from row 0 (position 0: sin = 0,
    cos = 1; no tag when it is neither, e.g. for a slice that does not start at position 0).
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
    pos = np.arange(T)
    custom = unique_labels(tokens) if tokens is not None else None
    fig = go.Figure()
    for d in dims:
        kind = _sin_or_cos(p, d, layout)
        fig.add_trace(
            go.Scatter(
                x=pos, y=round_sig(p[:, d]), mode="lines+markers" if T <= 64 else "lines", marker=dict(size=4),
                name=f"dim {d} ({kind})" if kind else f"dim {d}", customdata=custom,
                hovertemplate=(f"dim {d}<br>position %{{x}}" + ("<br>token %{customdata}" if tokens is not None else "")
                               + "<br>value %{y:.4g}<extra></extra>"),
            )
        )  # fmt: skip
    fig.update_xaxes(title_text="position", showgrid=True, gridcolor="#eee", zeroline=False)
    fig.update_yaxes(title_text="PE value", showgrid=True, gridcolor="#eee", zeroline=True, zerolinecolor="#bbb")
    return finish_layout(fig, title, height=360, legend=True)


def addnorm_figure(
    residual: np.ndarray,
    mean: np.ndarray,
    std: np.ndarray,
    out: np.ndarray,
    tokens: Sequence[str],
    *,
    highlight_row: int | None = None,
    title: str = "Add & Norm",
) -> go.Figure:
    """Residual sum (T, D) | per-position mean and std | LayerNorm output (T, D), rows aligned on the tokens."""
    res, o = as_2d(residual, "residual"), as_2d(out, "out")
    tokens = as_tokens(tokens)
    T = len(tokens)
    check_len(res.shape[0], tokens, "rows", f"residual of shape {res.shape}")
    if o.shape != res.shape:
        raise ValueError(f"out has shape {o.shape} but residual has shape {res.shape}")
    stats = {}
    for name, a in (("mean", mean), ("std", std)):
        a = np.asarray(a, dtype=np.float64)
        if a.ndim == 2 and a.shape[1] == 1:
            a = a[:, 0]
        if a.shape != (T,):
            raise ValueError(f"{name} must have shape ({T},) (one value per token), got {a.shape}")
        stats[name] = a
    hl = check_row(highlight_row, T)
    fig = make_subplots(
        rows=1, cols=3, shared_yaxes=True, column_widths=[0.42, 0.16, 0.42], horizontal_spacing=0.08,
        subplot_titles=["residual: x + sublayer(x)", "mean / std", "LayerNorm output"],
    )  # fmt: skip
    dims = [str(d) for d in range(res.shape[1])]
    x_end = fig.layout.xaxis.domain[1]
    add_heatmap(
        fig, res, tokens, dims, row=1, col=1, x_title="dimension", y_title="token", colorscale="RdBu_r", zmid=0.0,
        coloraxis="coloraxis", colorbar=dict(x=x_end + 0.005, xanchor="left", len=0.9, title=dict(side="top")),
        highlight_row=hl,
        value_name="residual", col_index=False,
    )  # fmt: skip
    labels = unique_labels(tokens)
    for name, color, symbol in (("mean", "#4c78a8", "circle"), ("std", "#f58518", "diamond")):
        fig.add_trace(
            go.Scatter(
                x=round_sig(stats[name]), y=labels, mode="lines+markers", name=name, showlegend=False,
                marker=dict(color=color, symbol=symbol, size=6), line=dict(color=color, width=1),
                hovertemplate=f"token: %{{y}}<br>{name}: %{{x:.4g}}<extra></extra>",
            ),
            row=1, col=2,
        )  # fmt: skip
    axis_title = '<span style="color:#4c78a8">● mean</span>  <span style="color:#f58518">◆ std</span>'
    fig.update_xaxes(title_text=axis_title, showgrid=True, gridcolor="#eee", zeroline=True, zerolinecolor="#bbb",
                     row=1, col=2)  # fmt: skip
    if hl is not None:
        fig.add_hrect(y0=hl - 0.5, y1=hl + 0.5, line=dict(color=HIGHLIGHT_COLOR, width=2), row=1, col=2)
    add_heatmap(
        fig, o, tokens, dims, row=1, col=3, x_title="dimension", colorscale="RdBu_r", zmid=0.0,
        coloraxis="coloraxis2", colorbar=dict(len=0.9), highlight_row=hl, value_name="normalized",
        col_index=False, show_row_ticks=False,
    )  # fmt: skip
    return finish_layout(fig, title, height=auto_height(T))


def ffn_sparsity(hidden: np.ndarray, *, tol: float = 1e-6) -> dict[str, float]:
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
) -> go.Figure:
    """FFN hidden activations (T, d_ff) after the non-linearity; the title notes the sparsity."""
    h = as_2d(hidden, "hidden")
    s = ffn_sparsity(h)
    sub = f"{title} — exact zeros {s['zero']:.1%}, |h| ≤ 1e-6 {s['near_zero']:.1%}, negative {s['negative']:.1%}"
    return matrix_figure(h, tokens, title=sub, dim_label="hidden unit", highlight_row=highlight_row,
                         value_name="activation")  # fmt: skip


def steps_to_matrix(rows: Sequence[np.ndarray]) -> np.ndarray:
    """Stack per-step attention rows (row t has length t + 1) into a (T, T) matrix, -inf above the diagonal."""
    T = len(rows)
    arrs = []
    for t, r in enumerate(rows):
        a = np.asarray(r)
        if a.ndim != 1 or a.shape[0] != t + 1:
            raise ValueError(f"row {t} must be 1-D with {t + 1} values (one per key so far), got shape {a.shape}")
        arrs.append(a)
    dtype = np.result_type(np.float32, *[a.dtype for a in arrs]) if arrs else np.float32
    if not np.issubdtype(dtype, np.floating):
        dtype = np.float64
    out = np.full((T, T), -np.inf, dtype=dtype)
    for t, a in enumerate(arrs):
        out[t, : t + 1] = a
    return out


def kv_cache_figure(n_cached: int, n_new: int, tokens: Sequence[str], *, title: str) -> go.Figure:
    """Which K / V rows come from the cache and which are computed at this step (Q only for the new ones)."""
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
    hover = np.array([["computed now" if s else "not needed" for s in state]]
                     + [["new: computed now" if s else "reused from the cache" for s in state]] * 2)  # fmt: skip
    cs = [[0, "#9ecae1"], [0.5, "#9ecae1"], [0.5, "#e4572e"], [1, "#e4572e"]]
    return heatmap(
        values, ["Q", "K", "V"], tokens, title=title, x_title="position (token)", y_title="", colorscale=cs,
        zmin=0.0, zmax=1.0, masked_hover="no query needed (cached position)", value_name="state", row_index=False,
        hover_text=hover, colorbar=dict(tickvals=[0.25, 0.75], ticktext=["cached", "new"]), height=240,
    )  # fmt: skip
