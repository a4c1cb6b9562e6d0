"""The final linear + softmax: the next-token distribution at one position."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import streamlit as st

from ..common import heading, md, show, show_token, shown_labels, token_texter
from ..plot import Drawing
from ..plot import builders as viz  # viz, its figures built on first use (cached)
from . import beam, kv_cache, numbered
from .context import TOP_SHOWN, Decoded, NextTokens, StageContext

FORMULA = r"p(y_{t+1} \mid y_{\le t}, x) = \operatorname{softmax}(h_t W_E^{\top} + b),\qquad H = -\sum_v p_v \log p_v"


def render(ctx: StageContext) -> None:
    """The next-token distribution at the view's position; in the step view, what the KV cache holds and, for beam
    search, the hypotheses."""
    run, token_text = ctx.run, token_texter(ctx.lm)
    nt = run.next_tokens()
    heading(numbered("output", nt.heading), FORMULA)
    bars(token_text, nt)
    if ctx.incremental:
        kv_cache.render(ctx.cfg, ctx.reads, ctx.current)
    if isinstance(run, Decoded) and run.beam_steps is not None:
        beam.render(run.res, run.line, ctx.current, token_text, lambda ids: shown_labels(ctx.lm, ids))


def bars(token_text: Callable[[int], str], nt: NextTokens) -> None:
    """Top-k bars (the chosen token outlined when it is among them) beside the entropy and the chosen token, whose
    probability is its own when given (a token outside the bars), else its bar's; named as its stream names it
    (a byte piece by its character) when given, else alone."""
    ids = [int(i) for i in nt.ids[:TOP_SHOWN]]
    probs = np.asarray(nt.probs[:TOP_SHOWN], dtype=np.float64)
    chosen_id, chosen_label = nt.chosen_id, nt.chosen_label
    chosen = ids.index(chosen_id) if chosen_id is not None and chosen_id in ids else None
    c1, c2 = st.columns([3, 1])
    with c1:
        show(topk_figure(token_text, nt), nt.key)
    with c2:
        st.metric("Entropy", f"{nt.entropy:.3f} nats")
        name = (
            nt.chosen_name if nt.chosen_name is not None else token_text(chosen_id) if chosen_id is not None else None
        )
        st.metric(chosen_label, md(show_token(name)) if name is not None else "∅")
        p = nt.chosen_p if nt.chosen_p is not None else float(probs[chosen]) if chosen is not None else None
        st.metric(f"p({chosen_label.lower()})", "—" if p is None else f"{p:.3f}")


def topk_figure(token_text: Callable[[int], str], nt: NextTokens) -> Drawing:
    """The top-k bars of ``nt``, the chosen token outlined when it is among them."""
    ids = [int(i) for i in nt.ids[:TOP_SHOWN]]
    chosen = ids.index(nt.chosen_id) if nt.chosen_id is not None and nt.chosen_id in ids else None
    probs = np.asarray(nt.probs[:TOP_SHOWN], dtype=np.float64)
    return viz.topk_figure([show_token(token_text(i)) for i in ids], probs, chosen, title=nt.title)


def label_figure(ctx: StageContext) -> Drawing:
    """The probability a teacher-forced run gives each position's label, one column per position."""
    a = ctx.arrays
    return viz.layer_position_figure(
        a.probs[np.arange(len(ctx.rows)), a.label_ids][None, :],
        ctx.rows,
        viz.LayerOptions(value_name="p(label)", layer_labels=("p(label)",), y_title="teacher forcing"),
        highlight_col=ctx.current,
        title="Probability of each label, one column per decoder position",
    )
