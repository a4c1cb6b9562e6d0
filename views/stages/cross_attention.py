"""Cross-attention: queries from the decoder stream, keys and values from the encoder output (memory)."""

from __future__ import annotations

import streamlit as st

from model.decode.steps import mean_weights, sharpest_head
from model.decode.trace import Trace

from ..common import heading, show
from ..plot import Drawing
from ..plot import builders as viz  # viz, its figures built on first use (cached)
from ..state import MEAN_HEADS
from . import add_norm, numbered
from .context import RunMatrix, StageContext, attention, over_tokens

ROWS = "target position: reads → predicts"
SOURCE = "source token (key)"


def render(ctx: StageContext) -> None:
    a, i = ctx.arrays, ctx.layer
    heading(
        numbered("cross", f"Cross-attention to the source — layer {ctx.layer}"),
        r"\operatorname{Attention}(Q_{\text{dec}}, K_{\text{enc}}, V_{\text{enc}}) = "
        r"\operatorname{softmax}\!\left(\frac{Q_{\text{dec}} K_{\text{enc}}^{\top}}{\sqrt{d_k}}\right)"
        r" V_{\text{enc}}",
    )
    st.markdown(
        "Each row is one decoder position, labelled *token it reads → token it predicts*; each column is a "
        "source token. A row shows where the decoder looks in the English sentence while it predicts the "
        "token after the arrow."
    )
    cw = a.cross_weights(i)
    if ctx.head == MEAN_HEADS:  # a mean blurs the heads: beside it, the head that aligns most sharply
        h0 = sharpest_head(cw)
        what = f"head {h0}, the sharpest (its rows put the most weight on one source token)"
    else:
        h0, what = int(ctx.head), f"head {int(ctx.head)}"
    show(
        viz.alignment_figure(
            cw[h0], ctx.rows, ctx.src_rows, highlight_row=ctx.current, title=f"Alignment, {what}, layer {ctx.layer}"
        ),
        f"{ctx.key}_align_head",
    )
    show(mean_figure(ctx), f"{ctx.key}_align_mean")
    if ctx.grid:
        show(
            viz.heads_grid(
                cw,
                ctx.rows,
                ctx.src_rows,
                viz.AttentionOptions(same_axes=False),
                highlight_row=ctx.current,
                title=f"Cross-attention weights, every head (layer {ctx.layer})",
            ),
            f"{ctx.key}_cross_grid",
        )
    group = ctx.cfg.d_k if ctx.head == MEAN_HEADS else None
    dim = "head · d_k dimension" if ctx.head == MEAN_HEADS else "d_k dimension"
    note = "all heads side by side" if ctx.head == MEAN_HEADS else ctx.hname
    for name, who, labels, label_title in (
        ("Q", "from the decoder", ctx.rows, ROWS),
        ("K", "from the encoder output", ctx.src_rows, "source token"),
        ("V", "from the encoder output", ctx.src_rows, "source token"),
    ):
        show(
            viz.matrix_figure(
                ctx.per_head(a.cross(i, name)),
                labels,
                viz.MatrixOptions(dim_label=dim, token_label=label_title, group_size=group),
                title=f"Cross {name} ({who}, {note}, layer {ctx.layer})",
                highlight_row=ctx.current if name == "Q" else None,
            ),
            f"{ctx.key}_cross_{name}",
        )
    add_norm.render(ctx, 2, "cross-attention")


def mean_figure(ctx: StageContext) -> Drawing:
    """The alignment of the view's layer, the mean of its heads: where each position reads the source."""
    return viz.alignment_figure(
        mean_weights(ctx.arrays.cross_weights(ctx.layer)),
        ctx.rows,
        ctx.src_rows,
        highlight_row=ctx.current,
        title=f"Alignment, mean of heads (layer {ctx.layer})",
    )


def compared(trace: Trace, layer: int, head: int | str) -> RunMatrix:
    """Compare's matrix of one run: the cross-attention weights of layer ``layer``, head ``head`` (or their mean)."""
    w = attention(trace.arrays.cross_weights(layer), head)
    return over_tokens(w, trace.src_tokens, "source token", "weight", False, layer, head)
