"""Masked self-attention: Q, K, V | raw scores → causal mask → masked scores | softmax weights | α·V and W_O."""

from __future__ import annotations

import numpy as np
import streamlit as st

from model.core.keys import ATTENTION_MAPS
from model.core.positions import POSITION_AXIS
from model.decode.steps import prefix_scores, sharpest_head
from model.decode.trace import Trace

from ..common import caption, equation, head_label, show, subheading
from ..plot import Drawing
from ..plot import builders as viz  # viz, its figures built on first use (cached)
from ..state import MEAN_HEADS
from . import add_norm, numbered
from .context import RunMatrix, StageContext, attention, dimensions, over_tokens, per_head

ROWS = POSITION_AXIS
KEYS = "key position (token it reads)"


def header(ctx: StageContext) -> None:
    what = "Masked self-attention" if ctx.causal else "Self-attention WITHOUT the causal mask"
    subheading(numbered("self", f"{what} — layer {ctx.layer}, {ctx.hname}"))


def _heads_note(ctx: StageContext) -> str:
    return "all heads side by side (thin lines separate them)" if ctx.head == MEAN_HEADS else ctx.hname


def render_qkv(ctx: StageContext) -> None:
    if ctx.incremental:
        caption(
            "With the KV cache a step computes Q, K and V only for the newest position (outlined); the "
            "K and V rows of earlier positions are reused from earlier steps."
        )
    # one element for the three equations: each figure's title repeats its own
    equation(r"Q = X W_Q,\quad K = X W_K,\quad V = X W_V")
    for name in "QKV":
        show(qkv_figure(ctx, name), f"{ctx.key}_self_{name}")


def qkv_figure(ctx: StageContext, name: str) -> Drawing:
    """Q, K or V (``name``) of the view's layer: its head, or every head side by side."""
    return viz.matrix_figure(
        ctx.per_head(ctx.arrays.self_attn(ctx.layer, name)),
        ctx.rows,
        viz.MatrixOptions(
            dim_label="head · d_k dimension" if ctx.head == MEAN_HEADS else "d_k dimension",
            token_label=ROWS,
            group_size=ctx.cfg.d_k if ctx.head == MEAN_HEADS else None,
        ),
        title=f"{name} = X·W_{name}, {_heads_note(ctx)} (layer {ctx.layer})",
        highlight_row=ctx.current,
    )


def maps(ctx: StageContext) -> dict[str, np.ndarray]:
    """scores, mask, masked scores and weights (H, T, T) of the shown view. A KV-cached step never computes the
    future cells of the scores, so they are recomputed here from the recorded Q and K for display."""
    a, i = ctx.arrays, ctx.layer
    bias = a.position_bias(i)
    if ctx.incremental:
        out = prefix_scores(a.self_attn(i, "Q"), a.self_attn(i, "K"), True, ctx.cfg.scale_attention, bias)
    else:
        out = {k: a.self_attn(i, k) for k in ATTENTION_MAPS}
    return out if bias is None else {**out, "position_bias": bias}


def score_tex(ctx: StageContext) -> str:
    """The raw scores' formula of this model: QKᵀ/√d_k (T5: unscaled QKᵀ, plus its relative position bias B)."""
    qk = r"\frac{Q K^{\top}}{\sqrt{d_k}}" if ctx.cfg.scale_attention else r"Q K^{\top}"
    return qk + (" + B" if ctx.cfg.positions == "relative" else "")


def render_scores(ctx: StageContext) -> None:
    m = maps(ctx)
    st.markdown(
        ctx.reading + " The raw scores are computed for every pair, the future included; the mask then "
        "sets the future to −∞ so that the softmax gives it weight 0."
    )
    if ctx.incremental:
        caption(
            "Here the future cells are recomputed from the recorded Q and K for display: a KV-cached step "
            "never needs them, since it computes only the newest query row against the keys so far."
        )
    for kind, tex in _score_equations(ctx, m).items():
        equation(tex)
        show(score_figure(ctx, kind, m), f"{ctx.key}_{kind}")
    if ctx.head == MEAN_HEADS:
        caption(
            f"With *mean of heads* chosen, the scores above are head {_score_head(ctx, m)[0]}'s, the head whose "
            "attention weights are the most concentrated; pick a head in the sidebar, or switch on the grid to see "
            "every head's weights."
        )


def _score_equations(ctx: StageContext, m: dict[str, np.ndarray]) -> dict[str, str]:
    """The panels of the scores stage, in order, each with its equation: the position bias (a model that has
    one), the raw scores, the mask and the masked scores."""
    qk = score_tex(ctx)
    mask_tex = (
        r"M_{ij} = \begin{cases} 0 & j \le i \\ -\infty & j > i \end{cases}"
        if ctx.causal
        else r"M_{ij} = 0 \text{ (no mask)}"
    )
    bias = {"position_bias": r"B_{ij} = b_h\big(\text{bucket}(j - i)\big)"} if "position_bias" in m else {}
    masked = r"\text{masked} = " + qk + " + M" if ctx.causal else qk
    return {**bias, "scores": r"\text{scores} = " + qk, "mask": mask_tex, "masked_scores": masked}


def _score_head(ctx: StageContext, m: dict[str, np.ndarray]) -> tuple[int, str]:
    """The head whose scores are drawn, and its name: no head computes a mean of scores, so for the mean of heads
    one head's own, the sharpest."""
    if ctx.head == MEAN_HEADS:
        h = sharpest_head(m["weights"])
        return h, f"head {h}, the sharpest (scores are per head: none is averaged)"
    return int(ctx.head), ctx.hname


def score_figure(ctx: StageContext, kind: str, m: dict[str, np.ndarray] | None = None) -> Drawing:
    """One panel of the scores stage (``kind``: "position_bias", "scores", "mask" or "masked_scores") of the
    view's layer and head; ``m``: the view's ``maps``, when computed already."""
    m = maps(ctx) if m is None else m
    h, which = _score_head(ctx, m)
    raw = "QKᵀ/√d_k" if ctx.cfg.scale_attention else "QKᵀ (unscaled)"
    titles = {
        "position_bias": "Relative position bias B, learned per head and distance j − i (no positional encoding)",
        "scores": f"Raw scores {raw}{' + B' if 'position_bias' in m else ''}, every cell",
        "mask": "Causal mask M (grey = −∞)" if ctx.causal else "No mask: every cell may be attended",
        "masked_scores": "Masked scores (grey = −∞)" if ctx.causal else "Scores without a mask (nothing is −∞)",
    }
    where = "the same for every head" if kind == "mask" else which
    return _over_keys(
        ctx,
        m[kind][h],
        "scores" if kind == "position_bias" else kind,
        f"{titles[kind]}, {where} (layer {ctx.layer})",
        "masked: −∞ (the future)",
    )


def _over_keys(ctx: StageContext, values: np.ndarray, kind: str, title: str, masked_hover: str) -> Drawing:
    """A (T, T) map of the view's self-attention, rows the positions, columns the keys they read."""
    return viz.attention_figure(
        values,
        ctx.rows,
        ctx.keys,
        viz.AttentionOptions(kind=kind, q_title=ROWS, k_title=KEYS, masked_hover=masked_hover),
        highlight_row=ctx.current,
        title=title,
    )


def render_weights(ctx: StageContext) -> None:
    m = maps(ctx)
    mask = " + M" if ctx.causal else ""
    equation(r"\alpha = \operatorname{softmax}\!\left(" + score_tex(ctx) + mask + r"\right)")
    if ctx.causal:
        st.markdown(
            ctx.reading + " Row *i* spreads its attention over positions 0…*i* (each row sums to 1); the "
            "grey cells are the future, masked to −∞ before the softmax, so their weight is exactly 0."
        )
    else:
        st.markdown(
            ctx.reading + " **The causal mask is removed**: every position may attend to every other, "
            "the future included (cells right of the diagonal), so a position can see the very token it "
            "must predict."
        )
    show(weights_figure(ctx, m), f"{ctx.key}_weights")
    if ctx.grid:
        show(
            viz.heads_grid(
                _weights(ctx, m),
                ctx.rows,
                ctx.keys,
                highlight_row=ctx.current,
                title=f"Self-attention weights, every head (layer {ctx.layer})",
            ),
            f"{ctx.key}_self_grid",
        )


def _weights(ctx: StageContext, m: dict[str, np.ndarray]) -> np.ndarray:
    """Every head's weights (H, T, T); with the mask, its cells (exactly 0) drawn as masked (grey)."""
    return np.where(np.isfinite(m["mask"]), m["weights"], -np.inf) if ctx.causal else m["weights"]


def weights_figure(ctx: StageContext, m: dict[str, np.ndarray] | None = None) -> Drawing:
    """The attention weights α of the view's layer and head (or their mean)."""
    title = "Attention weights α" if ctx.causal else "Attention weights α without the mask"
    w = ctx.attention(_weights(ctx, maps(ctx) if m is None else m))
    return _over_keys(ctx, w, "weights", f"{title}, {ctx.hname} (layer {ctx.layer})", "masked (the future): weight 0")


def render_output(ctx: StageContext) -> None:
    a, i = ctx.arrays, ctx.layer
    equation(r"\text{head}_h = \alpha_h V_h")
    show(context_figure(ctx), f"{ctx.key}_context")
    equation(r"\text{MultiHead} = \operatorname{Concat}(\text{head}_1, \dots, \text{head}_h)\, W_O")
    show(
        viz.matrix_figure(
            a.self_attn(i, "out"),
            ctx.rows,
            viz.MatrixOptions(token_label=ROWS),
            highlight_row=ctx.current,
            title=f"Output after W_O: every head mixed back into d_model (layer {ctx.layer})",
        ),
        f"{ctx.key}_self_out",
    )
    add_norm.render(ctx, 1, "self-attention")


def context_figure(ctx: StageContext, row: int | None = None) -> Drawing:
    """α·V of the view's layer and head (or every head side by side), row ``row`` outlined (the view's
    position when None)."""
    outlined = "" if row is None else f", row {row} outlined"
    return viz.matrix_figure(
        ctx.per_head(ctx.arrays.self_attn(ctx.layer, "context")),
        ctx.rows,
        viz.MatrixOptions(
            token_label=ROWS,
            dim_label="head · d_k dimension" if ctx.head == MEAN_HEADS else "d_k dimension",
            group_size=ctx.cfg.d_k if ctx.head == MEAN_HEADS else None,
        ),
        title=f"α·V, {_heads_note(ctx)} (layer {ctx.layer}{outlined})",
        highlight_row=ctx.current if row is None else row,
    )


# ---------------------------------------------------------------------------
# What each of these stages shows for one run, for Compare (rows: the decoder positions of layer ``layer``).


def compared_qkv(trace: Trace, layer: int, head: int | str) -> RunMatrix:
    q = per_head(trace.arrays.dec(layer, "self", "Q"), head)
    side = " (heads side by side)" if head == MEAN_HEADS else ""
    return RunMatrix(q, dimensions(q), f"dimension of Q{side}", "value", True, f", layer {layer}, {head_label(head)}")


def compared_scores(trace: Trace, layer: int, head: int | str) -> RunMatrix:
    s = trace.arrays.dec(layer, "self", "masked_scores")
    s = s.mean(0) if head == MEAN_HEADS else s[int(head)]
    return over_tokens(s, trace.dec_input_tokens, "key: token read", "score", True, layer, head)


def compared_weights(trace: Trace, layer: int, head: int | str) -> RunMatrix:
    w = attention(trace.arrays.dec(layer, "self", "weights"), head)
    return over_tokens(w, trace.dec_input_tokens, "key: token read", "weight", False, layer, head)


def compared_output(trace: Trace, layer: int, head: int | str) -> RunMatrix:
    out = trace.arrays.dec(layer, "norm1", "out")
    return RunMatrix(out, dimensions(out), "dimension", "value", True, f", layer {layer}")
