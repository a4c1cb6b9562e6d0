"""Figures of activation patching and of two runs compared: the maps of restored sites (decoder layer × position,
encoder layer × source position, layer × head) and a stage's matrix for runs A and B on one colour scale, with
their difference."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from .common import MAX_LABEL_LEN, Figure, as_2d, as_tokens, check_len
from .heatmap import Framing, HeatmapSpec, Marks, heatmap

PATCH_SCALE = "Viridis"  # sequential: how much of the measured quantity a restored site brings back
DIFF_SCALE = "RdBu_r"  # A − B: diverging at 0
HEAD_KINDS = ("self-attn", "cross-attn")
ROWS = Framing(cells="rows")  # the maps fill the column's width


def _shape(values, shape: tuple[int, ...], name: str) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64)
    if v.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, not {v.shape}")
    return v


@dataclass(frozen=True)
class PatchScale:
    """What a patching map's cells measure and their colour range (None: the values' own), one for the three maps
    of a measurement so that they read on one scale."""

    value_name: str
    zmin: float | None = None
    zmax: float | None = None


def _patch_spec(x_title: str, y_title: str, scale: PatchScale, **more) -> HeatmapSpec:
    """A patching map's look: the shared patching scale, every cell's value printed, rows without an index."""
    return HeatmapSpec(
        x_title=x_title,
        y_title=y_title,
        value_name=scale.value_name,
        colorscale=PATCH_SCALE,
        zmin=scale.zmin,
        zmax=scale.zmax,
        row_index=False,
        show_values=True,
        **more,
    )


def patch_decoder_figure(
    values: np.ndarray, positions: Sequence[str], scale: PatchScale, *, sublayers: Sequence[str], title: str
) -> Figure:
    """Decoder sites (L, K, P): rows = each layer's residual stream after each of its K ``sublayers`` (e.g. "after
    self-attn", top to bottom in data-flow order), columns = positions (``reads → predicts``); each cell the
    measured quantity with that one site restored from the clean run. The last column is the measured position."""
    v = np.asarray(values, dtype=np.float64)
    sublayers = as_tokens(sublayers, "sublayers")
    if v.ndim != 3 or v.shape[1] != len(sublayers):
        raise ValueError(f"decoder sites must be (layers, {len(sublayers)} sublayers, positions), not {v.shape}")
    L, K, P = v.shape
    positions = as_tokens(positions, "positions")
    check_len(P, positions, "columns", f"values of shape {v.shape}")
    rows = [f"layer {i} {s}" for i in range(L) for s in sublayers]
    spec = _patch_spec("position: reads → predicts", "decoder residual restored", scale)
    return heatmap(
        v.reshape(L * K, P), rows, positions, spec, title=title, marks=Marks(highlight_col=P - 1), framing=ROWS
    )


def patch_encoder_figure(values: np.ndarray, src_tokens: Sequence[str], scale: PatchScale, *, title: str) -> Figure:
    """Encoder sites (Le, S): rows = encoder layers (their output), columns = source tokens."""
    v = as_2d(values, "values")
    src_tokens = as_tokens(src_tokens, "src_tokens")
    check_len(v.shape[1], src_tokens, "columns", f"values of shape {v.shape}")
    rows = [f"encoder layer {i}" for i in range(v.shape[0])]
    spec = _patch_spec("source token whose encoder output is restored", "encoder layer", scale)
    return heatmap(v, rows, src_tokens, spec, title=title, framing=ROWS)


def patch_heads_figure(values: np.ndarray, scale: PatchScale, *, title: str) -> Figure:
    """Head sites (2, L, H): rows = each decoder layer's self-attention, then its cross-attention; columns = heads;
    each cell with that head's output (before W_O, at every position) restored."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 3 or v.shape[0] != 2:
        raise ValueError(f"head sites must be (2, layers, heads), not {v.shape}")
    _, L, H = v.shape
    rows = [f"layer {i} {kind}" for i in range(L) for kind in HEAD_KINDS]
    spec = _patch_spec("head whose output is restored", "decoder layer", scale, col_index=False)
    heads = [f"head {h}" for h in range(H)]
    return heatmap(v.transpose(1, 0, 2).reshape(2 * L, H), rows, heads, spec, title=title, framing=ROWS)


def shared_range(*arrays: np.ndarray) -> tuple[float, float]:
    """(min, max) over the finite values of every array: one colour scale for figures read side by side."""
    finite = [a[np.isfinite(a)] for a in (np.asarray(x, dtype=np.float64).ravel() for x in arrays)]
    finite = [a for a in finite if a.size]
    if not finite:
        return 0.0, 1.0
    lo, hi = min(float(a.min()) for a in finite), max(float(a.max()) for a in finite)
    return (lo, hi) if hi > lo else (lo - 0.5, hi + 0.5)


def aligned_difference(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, str | None]:
    """A − B where the shapes agree; otherwise over the positions both have (the first rows and columns of each),
    with one sentence saying so."""
    a, b = as_2d(a, "a"), as_2d(b, "b")
    r, c = min(a.shape[0], b.shape[0]), min(a.shape[1], b.shape[1])
    note = None
    if a.shape != b.shape:
        note = (
            f"A is {a.shape[0]} × {a.shape[1]} and B {b.shape[0]} × {b.shape[1]}: the difference is taken "
            f"position by position over the first {r} × {c}, so a row or column of A faces B's at the same index, "
            "not the same word."
        )
    with np.errstate(invalid="ignore"):  # masked cells (−inf in both) give NaN: masked in the figure too
        return a[:r, :c] - b[:r, :c], note


def _both(a: str, b: str) -> str:
    """A label of the difference: A's and B's token at one index, once when they agree, else each named by its run
    (never read as one token)."""
    return a if a == b else f"A: {a} · B: {b}"


@dataclass(frozen=True)
class PairOptions:
    """What the matrices ``pair_figures`` draws are: the axes' titles and the values' name; ``signed``: values
    diverging about 0 (else sequential); ``col_index`` False: columns are numbers already (dimensions), not prefixed
    with their index."""

    x_title: str
    y_title: str
    value_name: str
    signed: bool = False
    col_index: bool = True
    # B's own title where it differs (another model's layer, head or stage name)
    title_b: str | None = None


def pair_figures(
    a: np.ndarray,
    b: np.ndarray,
    rows_a: Sequence[str],
    cols_a: Sequence[str],
    rows_b: Sequence[str],
    cols_b: Sequence[str],
    options: PairOptions,
    *,
    title: str,
) -> tuple[Figure, Figure, Figure]:
    """One stage's matrix for run A and run B on one colour scale (the range of both; signed: diverging and
    symmetric about 0, else sequential), and A − B on a diverging scale centred on 0 (over the common positions when
    the shapes differ, labelled by A's tokens and B's); the difference names both titles where B's differs."""
    x_title, y_title, value_name, signed = options.x_title, options.y_title, options.value_name, options.signed
    title_b = options.title_b
    a, b = as_2d(a, "a"), as_2d(b, "b")
    lo, hi = shared_range(a, b)
    colorscale = DIFF_SCALE if signed else "Blues"
    if signed:
        hi = max(abs(lo), abs(hi))
        lo = -hi
    spec = HeatmapSpec(
        x_title=x_title,
        y_title=y_title,
        value_name=value_name,
        colorscale=colorscale,
        zmin=lo,
        zmax=hi,
        col_index=options.col_index,
    )
    framing = Framing(cells="rows" if max(a.shape[1], b.shape[1]) > 64 else "square")
    fa = heatmap(a, rows_a, cols_a, spec, title=f"A: {title}", framing=framing)
    fb = heatmap(b, rows_b, cols_b, spec, title=f"B: {title_b or title}", framing=framing)
    d, _ = aligned_difference(a, b)
    r, c = d.shape
    rows = [_both(x, y) for x, y in zip(as_tokens(rows_a)[:r], as_tokens(rows_b)[:r])]
    cols = [_both(x, y) for x, y in zip(as_tokens(cols_a)[:c], as_tokens(cols_b)[:c])]
    m = float(np.nanmax(np.abs(d[np.isfinite(d)]))) if np.isfinite(d).any() else 1.0
    diff = replace(
        spec,
        colorscale=DIFF_SCALE,
        zmin=-(m or 1.0),
        zmax=m or 1.0,
        value_name=f"A − B {value_name}",
        label_len=2 * MAX_LABEL_LEN + len(_both("", "")),  # both runs' labels whole: B's is the point
    )
    both = title if title_b in (None, title) else f"{title} − {title_b}"
    fd = heatmap(d, rows, cols, diff, title=f"A − B: {both}", framing=framing)
    return fa, fb, fd
