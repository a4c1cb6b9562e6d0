"""Token embeddings + sinusoidal positional encoding: the decoder's input X."""

from __future__ import annotations

import streamlit as st

from model.core.positions import POSITION_AXIS

from ..common import caption, equation, heading, show, subheading
from ..plot import builders as viz  # viz, its figures built on first use (cached)
from . import numbered
from .context import RunMatrix, StageContext, dimensions

ROWS = POSITION_AXIS


def render(ctx: StageContext) -> None:
    if ctx.run.table is not None:  # the step view's decoder inputs (teacher forcing shows its loss table instead)
        subheading(numbered("inputs", "Decoder inputs (the output shifted right)"))
        caption(
            "Each position reads the token the previous position predicted; position 0 starts from <s>.".replace(
                "<", "\\<"
            )
        )
        st.dataframe(ctx.run.table(), hide_index=True, key="shifted_table", width="stretch")
    cfg, a = ctx.cfg, ctx.arrays
    heading(
        numbered("embeddings", "Token embeddings + positional encoding"),
        r"X = E[y]\,\sqrt{d_{\text{model}}} + PE" if cfg.scale_embedding else r"X = E[y] + PE",
    )
    caption(
        f"One row per decoder position ({cfg.d_model} dimensions each). Zoom into a figure (drag a box) "
        "to read single dimensions; hover shows the exact value."
    )
    hl = ctx.current
    for key, title in (
        ("embed", "Token embeddings E[y]·√d_model"),
        ("pe", "Positional encoding PE"),
        ("input", "Sum X = embedding + PE"),
    ):
        show(
            viz.matrix_figure(a.embedding("dec", key), ctx.rows, title=title, highlight_row=hl, token_label=ROWS),
            f"{ctx.key}_{key}",
        )
    pe = ctx.pe_table
    n_pos = int(min(pe.shape[0], max(50, len(ctx.reads))))
    D = pe.shape[1]
    dims = sorted({0, 1, 6, 7, D // 2, D // 2 + 1} & set(range(D)))
    layout = "sin/cos interleaved" if cfg.pe_layout == "interleaved" else "sin | cos halves"
    equation(
        r"PE_{(pos,2i)} = \sin\!\left(pos / 10000^{2i/d_{\text{model}}}\right),\quad "
        r"PE_{(pos,2i+1)} = \cos\!\left(pos / 10000^{2i/d_{\text{model}}}\right)"
    )
    show(
        viz.positional_curves(
            pe[:n_pos],
            dims,
            title=f"The model's positional encoding ({layout}); the dashed line marks position {hl}",
            mark_position=hl,
        ),
        f"{ctx.key}_pe_curves",
    )


def compared(trace, layer: int, head) -> RunMatrix:
    """Compare's matrix of one run: the decoder's input X (before any layer, for every head)."""
    x = trace.arrays.embedding("dec", "input")
    return RunMatrix(x, dimensions(x), "dimension", "value", True)
