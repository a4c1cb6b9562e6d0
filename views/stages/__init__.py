"""One module per decoder stage section, in the data-flow order of the paper's figure.

``render(ctx, stage)`` draws the sections the stage selector's choice includes, for the step view and the
teacher-forcing view alike.
"""

from __future__ import annotations

from ..state import DECODER_STAGES
from . import add_norm, cross_attention, ffn, inputs, self_attention
from .context import StageContext

__all__ = ["StageContext", "render", "shows"]


def shows(stage: str, group: str) -> bool:
    """Whether the stage selector's choice ``stage`` includes the group ``group`` ("all": every decoder stage)."""
    return stage == group or (stage == "all" and group in DECODER_STAGES)


def render(ctx: StageContext, stage: str) -> None:
    """Sections 2-6 for the chosen stage (or all of them)."""
    if shows(stage, "inputs"):
        inputs.render(ctx)
    if any(shows(stage, g) for g in ("qkv", "scores", "self", "self_out")):
        self_attention.header(ctx)
    if shows(stage, "qkv"):
        self_attention.render_qkv(ctx)
    if shows(stage, "scores"):
        self_attention.render_scores(ctx)
    if shows(stage, "self"):
        self_attention.render_weights(ctx)
    if shows(stage, "self_out"):
        self_attention.render_output(ctx)
        add_norm.render(ctx, 1, "self-attention")
    if shows(stage, "cross"):
        cross_attention.render(ctx)
    if shows(stage, "ffn"):
        ffn.render(ctx)
