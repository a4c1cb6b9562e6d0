"""Teacher forcing: the whole reference in one parallel pass, its loss, and the causal mask removed on demand."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import streamlit as st

from model.decode.steps import future_weight
from model.io.checkpoint import LoadedModel
from views.plot import builders as viz  # viz, its figures built on first use (cached)

from . import export, session, stages
from .common import fail, get_trace, lazy_panel, md, show_token
from .stages import numbered
from .stages.context import StageContext, TeacherForced
from .state import MEAN_HEADS, Limits, View
from .stepping import stage_selector, stepper

if TYPE_CHECKING:
    import pandas as pd

    from model.decode.trace import Trace

LOSS = r"\mathcal{L} = -\frac{1}{T}\sum_{t} \log p(y_t \mid y_{<t}, x)"


@st.fragment
def view(
    lm: LoadedModel, limits: Limits, v: View, src_ids: tuple[int, ...], src_tokens: list[str], reference: str
) -> None:
    try:
        _view(lm, session.fragment_view(v, limits), src_ids, src_tokens, reference)
    except Exception as e:
        fail("Could not show the teacher-forcing view", e)


def _view(lm: LoadedModel, v: View, src_ids, src_tokens, reference: str) -> None:
    stage = stage_selector(v, lm.cfg)
    tr = get_trace(lm, src_ids, reference, causal=True)
    T = len(tr.dec_input_tokens)
    st.header("Teacher forcing: the whole reference in one parallel pass")
    st.caption(
        "Training feeds the reference shifted right and predicts every position at once; the causal mask "
        "stops position i from seeing positions after i."
    )
    pos = session.at_position(v.step, T)
    stepper(T, help="The query position the figures outline.")
    st.toggle("Remove the causal mask (let the decoder look at future tokens — “cheating”)", key="no_mask")
    session.sync_url(replace(v, step=pos))

    label_ids = tr.arrays.label_ids
    table = viz.loss_table(
        [show_token(t) for t in tr.dec_input_tokens],
        [show_token(t) for t in tr.label_tokens],
        tr.arrays.probs[np.arange(T), label_ids],
        tr.arrays.loss,
    )
    mean_loss = float(tr.arrays.loss.mean())
    shown = tr
    if v.no_mask:
        nc = get_trace(lm, src_ids, reference, causal=False)
        shown = nc
        compare_without_mask(lm, tr, nc, table, v, pos)
    else:
        st.metric("Mean loss (cross-entropy per token)", f"{mean_loss:.3f}", help=f"perplexity {np.exp(mean_loss):.2f}")

    if not v.no_mask:  # without the mask, the comparison above holds this table's columns
        st.subheader(numbered("inputs", "Shifted inputs, labels and the loss"))
        st.latex(LOSS)
        st.dataframe(table, hide_index=True, key="tf_table", width="stretch")
    run = TeacherForced(lm, v.choices(str(lm.path)), shown, src_ids, pos)
    ctx = StageContext(
        lm,
        v,
        run,
        shown.arrays,
        shown.dec_input_tokens,
        shown.label_tokens,
        src_tokens,
        pos,
        incremental=False,
        causal=not v.no_mask,
        key="tf",
    )
    stages.render(ctx, stage)

    if panel := lazy_panel(export.LABEL, "export_open"):
        with panel:
            export.downloads(
                [
                    (
                        "Trace (NPZ)",
                        lambda: export.save_to_bytes(shown.save_npz),
                        "teacher_forced_trace.npz",
                        export.NPZ,
                        "dl_tf_npz",
                    ),
                    (
                        "Loss table (CSV)",
                        lambda: table.to_csv(index=False),
                        "teacher_forcing_loss.csv",
                        export.CSV,
                        "dl_tf_csv",
                    ),
                ]
            )


def compare_without_mask(lm: LoadedModel, tr: Trace, nc: Trace, table: pd.DataFrame, v: View, pos: int) -> None:
    """The loss and the attention with and without the causal mask, side by side in numbers."""
    T = len(tr.dec_input_tokens)
    label_ids = tr.arrays.label_ids
    w = nc.arrays.self_weights(v.layer)
    leak = future_weight(w.mean(axis=0) if v.head == MEAN_HEADS else w[int(v.head)])
    mean_loss, nc_loss = float(tr.arrays.loss.mean()), float(nc.arrays.loss.mean())
    m1, m2, m3 = st.columns(3)
    m1.metric("Mean loss with the mask", f"{mean_loss:.3f}")
    m2.metric(
        "Mean loss without the mask", f"{nc_loss:.3f}", delta=f"{nc_loss - mean_loss:+.3f}", delta_color="inverse"
    )
    m3.metric("Attention on future tokens", f"{leak:.1%}", help=md(f"layer {v.layer}, mean over positions"))
    cmp = table.rename(columns={"p(label)": "p(label), masked", "loss": "loss, masked"})
    cmp["p(label), no mask"] = nc.arrays.probs[np.arange(T), label_ids]
    cmp["loss, no mask"] = nc.arrays.loss
    st.subheader(numbered("inputs", "Shifted inputs, labels and the loss, with and without the mask"))
    st.latex(LOSS)
    st.dataframe(cmp, hide_index=True, key="tf_cmp_table", width="stretch")
    st.info(
        "The causal mask is removed in every figure below: position i can see token i+1 — the very label it "
        "must predict. A model trained that way learns to copy it: its training loss collapses while it learns "
        "nothing usable at inference, where the future does not exist. This model was trained with the mask, "
        "so it was never taught to copy: the figures show where its attention leaks (right of the diagonal) "
        "and the table how much the loss moves (it can go either way)."
    )
