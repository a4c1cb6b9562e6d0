"""The position-wise feed-forward network."""

from __future__ import annotations

import streamlit as st

from model.decode.trace import Trace

from ..common import heading, show
from ..plot import Drawing
from ..plot import builders as viz  # viz, its figures built on first use (cached)
from . import add_norm, numbered
from .context import RunMatrix, StageContext, dimensions

ACTIVATIONS = {"relu": r"\max(0,\, x W_1 + b_1)", "gelu": r"\operatorname{GELU}(x W_1 + b_1)"}


def render(ctx: StageContext) -> None:
    cfg = ctx.cfg
    act = ACTIVATIONS.get(cfg.activation, r"\operatorname{swish}(x W_1 + b_1)")
    heading(
        numbered("ffn", f"Feed-forward network — layer {ctx.layer}"),
        r"\operatorname{FFN}(x) = " + act + r"\, W_2 + b_2",
    )
    hidden = ctx.arrays.ffn(ctx.layer, "hidden")
    sp = viz.ffn_sparsity(hidden)
    row = viz.ffn_sparsity(hidden[ctx.current])
    m1, m2, m3 = st.columns(3)
    m1.metric("Exact zeros (all positions)", f"{sp['zero']:.1%}")
    m2.metric(f"Exact zeros (position {ctx.current})", f"{row['zero']:.1%}")
    m3.metric("Negative activations", f"{sp['negative']:.1%}", help=f"activation: {cfg.activation}")
    show(hidden_figure(ctx), f"{ctx.key}_ffn")
    add_norm.render(ctx, 3, "the feed-forward network")


def hidden_figure(ctx: StageContext) -> Drawing:
    """The FFN's hidden activations of the view's layer, every position."""
    cfg = ctx.cfg
    return viz.ffn_figure(
        ctx.arrays.ffn(ctx.layer, "hidden"),
        ctx.rows,
        highlight_row=ctx.current,
        title=f"FFN hidden activations ({cfg.activation}, {cfg.d_ff} units, layer {ctx.layer})",
    )


def compared(trace: Trace, layer: int, head: int | str) -> RunMatrix:
    """Compare's matrix of one run: the FFN's hidden units of layer ``layer`` (every head feeds them)."""
    hidden = trace.arrays.ffn(layer, "hidden")
    return RunMatrix(hidden, dimensions(hidden), "FFN hidden unit", "activation", False, f", layer {layer}")
