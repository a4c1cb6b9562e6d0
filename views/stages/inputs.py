"""Token embeddings + sinusoidal positional encoding: the decoder's input X."""

from __future__ import annotations

import streamlit as st

from model.core.config import ModelConfig
from model.core.positions import POSITION_AXIS
from model.decode.trace import Trace

from ..common import caption, equation, heading, show, subheading
from ..plot import Drawing
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
    cfg = ctx.cfg
    relative = cfg.positions == "relative"
    x = (r"E[y]\,\sqrt{d_{\text{model}}}" if cfg.scale_embedding else "E[y]") + ("" if relative else " + PE")
    x = rf"\operatorname{{LayerNorm}}({x})" if cfg.embed_norm else x
    heading(numbered("embeddings", "Token embeddings" + ("" if relative else " + positional encoding")), "X = " + x)
    if relative:
        caption(
            "This model adds no positional encoding to its embeddings: a learned bias per relative distance is "
            "added to the self-attention scores instead (see masked self-attention, its bias B as a heatmap)."
        )
    elif cfg.embed_norm:
        caption("This model normalises embedding + PE with a LayerNorm before the first layer (X below).")
    caption(
        f"One row per decoder position ({cfg.d_model} dimensions each). Zoom into a figure (drag a box) "
        "to read single dimensions; hover shows the exact value."
    )
    hl = ctx.current
    for key in embedding_titles(cfg):
        show(embedding_figure(ctx, key), f"{ctx.key}_{key}")
    if relative:
        return
    pe = ctx.pe_table
    n_pos = int(min(pe.shape[0], max(50, len(ctx.reads))))
    D = pe.shape[1]
    dims = sorted({0, 1, 6, 7, D // 2, D // 2 + 1} & set(range(D)))
    layout = {"interleaved": "sin/cos interleaved", "half": "sin | cos halves", "fairseq": "fairseq's sin | cos"}
    layout_name = "a learned table" if cfg.positions == "learned" else layout[cfg.pe_layout]
    if cfg.positions == "learned":
        caption(f"PE is a learned table: row pos + {cfg.position_offset} of the model's position embeddings.")
    elif cfg.pe_layout == "fairseq":
        equation(
            r"PE_{(pos,i)} = \sin\!\left(p / 10000^{i/(d/2-1)}\right),\quad "
            r"PE_{(pos,d/2+i)} = \cos\!\left(p / 10000^{i/(d/2-1)}\right),\quad p = pos + " + str(cfg.position_offset)
        )
    else:
        equation(
            r"PE_{(pos,2i)} = \sin\!\left(pos / 10000^{2i/d_{\text{model}}}\right),\quad "
            r"PE_{(pos,2i+1)} = \cos\!\left(pos / 10000^{2i/d_{\text{model}}}\right)"
        )
    show(
        viz.positional_curves(
            pe[:n_pos],
            dims,
            title=f"The model's positional encoding ({layout_name}); the dashed line marks position {hl}",
            mark_position=hl,
        ),
        f"{ctx.key}_pe_curves",
    )


def embedding_titles(cfg: ModelConfig) -> dict[str, str]:
    """The embedding figures this model has, in order, by record ("embed", "pe", "input"), with their titles."""
    embed_title = "Token embeddings E[y]·√d_model" if cfg.scale_embedding else "Token embeddings E[y]"
    if cfg.positions == "relative":
        return {"embed": embed_title}
    x = "X = LayerNorm(embedding + PE)" if cfg.embed_norm else "Sum X = embedding + PE"
    return {"embed": embed_title, "pe": "Positional encoding PE", "input": x}


def embedding_figure(ctx: StageContext, key: str | None = None) -> Drawing:
    """One embedding figure (``key``; None: the last, what the first layer reads)."""
    titles = embedding_titles(ctx.cfg)
    key = list(titles)[-1] if key is None else key
    return viz.matrix_figure(
        ctx.arrays.embedding("dec", key),
        ctx.rows,
        viz.MatrixOptions(token_label=ROWS),
        title=titles[key],
        highlight_row=ctx.current,
    )


def compared(trace: Trace, layer: int, head: int | str) -> RunMatrix:
    """Compare's matrix of one run: the decoder's input X (before any layer, for every head)."""
    x = trace.arrays.embedding("dec", "input")
    return RunMatrix(x, dimensions(x), "dimension", "value", True)
