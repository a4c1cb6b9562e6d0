"""The encoder, computed once per sentence: its self-attention and its output (the memory cross-attention reads)."""

from __future__ import annotations

from model.core.keys import Records
from model.decode.decoding import DecodeResult
from model.decode.steps import mean_weights
from model.io.checkpoint import LoadedModel

from ..common import head_label, show, show_token
from ..plot import builders as viz  # viz, its figures built on first use (cached)
from ..state import MEAN_HEADS, View


def render(lm: LoadedModel, res: DecodeResult, src_tokens: list[str], view: View) -> None:
    """``res``: the page's decode (its ``encoder`` records)."""
    cfg = lm.cfg
    layer = min(view.layer, cfg.n_encoder_layers - 1)
    if not res.encoder:  # an unrecorded decode keeps no encoder records
        return
    enc = Records(res.encoder)
    w, mem = enc.enc_weights(layer)[0], enc.memory[0]
    rows = [show_token(t) for t in src_tokens]
    show(
        viz.attention_figure(
            mean_weights(w) if view.head == MEAN_HEADS else w[int(view.head)],
            rows,
            rows,
            viz.AttentionOptions(q_title="source token (query)", k_title="source token (key)"),
            title=f"Encoder self-attention, layer {layer}, {head_label(view.head)}",
        ),
        "enc_self",
    )
    show(
        viz.matrix_figure(
            mem,
            rows,
            viz.MatrixOptions(token_label="source token"),
            title="Encoder output (memory) read by cross-attention",
        ),
        "enc_memory",
    )
