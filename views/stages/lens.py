"""Logit lens: what each decoder layer would predict if decoding stopped there."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import streamlit as st

from model.core.config import ModelConfig
from model.interpret.explain import LogitLens, lens_problem, lens_reads_final_norm, logit_lens

from ..common import lean_decoder, show, show_token
from ..plot import Drawing
from ..plot import builders as viz  # viz, its figures built on first use (cached)
from .context import StageContext

TOP = 10


def head_words(cfg: ModelConfig) -> str:
    """What this model's output head is, in words."""
    linear = "the transposed token embedding, shared with the input" if cfg.tie_output else "the final linear layer"
    return f"{linear}, plus the final logits bias" if cfg.final_logits_bias else linear


def read_as(cfg: ModelConfig) -> str:
    """How a layer's output reaches the head, in words: as it is (post-norm) or through the final norm (a model with
    one: pre-norm)."""
    if not lens_reads_final_norm(cfg):
        return "this post-norm model's layer outputs are already normalised, so nothing else is applied"
    scale = f" and scaled by {cfg.output_scale:.4g}" if cfg.output_scale != 1.0 else ""
    why = "this pre-norm model hands on unnormalised residuals, so " if cfg.norm_position == "pre" else ""
    return f"{why}each layer's output first goes through the final norm{scale}, as the last layer's does"


def render(ctx: StageContext) -> None:
    """Reads the run's ``dec.{l}.norm3.out`` (T, D) of every layer and the token chosen (or the label) at each
    position, -1 where there is none; a decode's ``steps.output_record`` of the same positions, if there is one (the
    last layer is then read from it)."""
    lm, chosen_ids = ctx.lm, ctx.run.chosen_ids
    st.subheader("Logit lens — what each layer would predict")
    problem = lens_problem(lm.cfg)
    if problem:
        st.info(f"The logit lens is not shown for this model: {problem}.")
        return
    st.markdown(
        f"Each decoder layer's output is sent through the model's own output head ({head_words(lm.cfg)}), as if "
        f"decoding stopped after that layer; {read_as(lm.cfg)}. It shows *when* the choice becomes clear across "
        "the layers, not *why*: the earlier layers were never trained to be read this way."
    )
    lens = logit_lens(
        lm.model, ctx.run.layer_outputs(), chosen_ids, k=TOP, lean=lean_decoder(lm), record=ctx.run.lens_record()
    )
    text = lm.tokenizer.id_to_token
    t = ctx.current
    L = lens.top_ids.shape[0]
    show(top_figure(lens, text, int(chosen_ids[t]), t), f"{ctx.key}_lens_top")
    table = pd.DataFrame(
        {
            "layer": np.arange(L),
            "top token": [show_token(text(int(i))) for i in lens.top_ids[:, t, 0]],
            "p(top)": lens.top_probs[:, t, 0],
            "rank of the chosen token": lens.chosen_rank[:, t],
            "p(chosen token)": lens.chosen_prob[:, t],
            "entropy (nats)": lens.entropy[:, t],
        }
    )
    st.dataframe(table, hide_index=True, key=f"{ctx.key}_lens_table", width="stretch")
    show(positions_figure(lens.chosen_prob, ctx.rows, t), f"{ctx.key}_lens_positions")


def top_figure(lens: LogitLens, text: Callable[[int], str], chosen_id: int, t: int) -> Drawing:
    """What each layer would predict at position ``t``: its top tokens after each layer, the token chosen
    (``chosen_id``, -1: none) outlined."""
    tokens = [[show_token(text(int(i))) for i in lens.top_ids[layer, t]] for layer in range(lens.top_ids.shape[0])]
    return viz.lens_figure(
        tokens,
        lens.top_probs[:, t],
        chosen=show_token(text(chosen_id)) if chosen_id >= 0 else None,
        title=f"What each layer would predict at position {t} (outlined: the token chosen)",
    )


def positions_figure(chosen_prob: np.ndarray, rows: list[str], current: int) -> Drawing:
    """p(the token finally chosen) (L, T) after each layer at positions 0..T-1 shown, ``current`` outlined."""
    title = f"p(token finally chosen) after each layer, positions 0–{len(rows) - 1}"
    return viz.layer_position_figure(chosen_prob, rows, highlight_col=current, title=title)
