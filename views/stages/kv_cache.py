"""What the KV cache holds at a step."""

from __future__ import annotations

import streamlit as st

from model.core.config import ModelConfig

from ..common import show, show_token, subheading
from ..plot import builders as viz  # viz, its figures built on first use (cached)
from . import numbered


def render(cfg: ModelConfig, reads: list[str], step: int) -> None:
    subheading(numbered("kv_cache", "What the KV cache holds"))
    show(
        viz.kv_cache_figure(
            step, 1, [show_token(t) for t in reads], title=f"Position {step}: K, V rows reused vs computed now"
        ),
        "kv_cache",
    )
    per = 2 * cfg.n_decoder_layers * cfg.n_heads * cfg.d_k
    st.markdown(
        f"At this step the decoder computes Q, K and V for **1 new position** in each of the "
        f"{cfg.n_decoder_layers} layers and reuses the cached K and V of **{step} earlier position"
        f"{'s' if step != 1 else ''}** ({step * per:,} cached numbers; {per:,} per position). "
        "Cross-attention K and V come from the encoder output and are computed once per sentence."
    )
