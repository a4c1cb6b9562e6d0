"""The final linear + softmax: the next-token distribution at one position."""

from __future__ import annotations

import numpy as np
import streamlit as st

from ..common import md, show, show_token
from ..plot import builders as viz  # viz, its figures built on first use (cached)

TOP_SHOWN = 10  # bars in the next-token chart / alternatives offered in the what-if box


def formula() -> None:
    st.latex(
        r"p(y_{t+1} \mid y_{\le t}, x) = \operatorname{softmax}(h_t W_E^{\top} + b),\qquad "
        r"H = -\sum_v p_v \log p_v"
    )


def render(
    token_text,
    ids,
    probs,
    chosen_id: int | None,
    entropy: float,
    title: str,
    key: str,
    chosen_label: str = "Chosen token",
    chosen_p: float | None = None,
    chosen_name: str | None = None,
) -> None:
    """Top-k bars (``chosen_id`` outlined when it is among them) beside the entropy and the chosen token, whose
    probability is ``chosen_p`` when given (a token outside the bars), else its bar's; ``chosen_name`` names it as
    its stream does (a byte piece by its character), else it is named alone."""
    ids = [int(i) for i in ids[:TOP_SHOWN]]
    probs = np.asarray(probs[:TOP_SHOWN], dtype=np.float64)
    chosen = ids.index(chosen_id) if chosen_id is not None and chosen_id in ids else None
    c1, c2 = st.columns([3, 1])
    with c1:
        show(viz.topk_figure([show_token(token_text(i)) for i in ids], probs, chosen, title=title), key)
    with c2:
        st.metric("Entropy", f"{entropy:.3f} nats")
        name = chosen_name if chosen_name is not None else token_text(chosen_id) if chosen_id is not None else None
        st.metric(chosen_label, md(show_token(name)) if name is not None else "∅")
        p = chosen_p if chosen_p is not None else float(probs[chosen]) if chosen is not None else None
        st.metric(f"p({chosen_label.lower()})", "—" if p is None else f"{p:.3f}")
