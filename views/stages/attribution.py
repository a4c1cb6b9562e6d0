"""Attribution beside attention: which source words a gradient method credits, next to where cross-attention looks."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import streamlit as st

from model.core.positions import POSITION_AXIS
from model.decode.steps import mean_weights
from model.io.checkpoint import LoadedModel

from .. import session
from ..common import cached, get_trace, show, show_token
from ..plot import builders as viz  # viz, its figures built on first use (cached)
from ..state import MEAN_HEADS
from .context import StageContext

if TYPE_CHECKING:  # the module loads Captum: imported where an attribution is asked for
    from model.interpret.attribution import Attribution, BestHead

METHOD_LABELS = {"ig": "Integrated Gradients", "ixg": "Input × Gradient"}
# What each number of the table means, in one line each (shown under it, and as the columns' tooltips).
DEFINITIONS = {
    "agree": "attention's and attribution's top source word are the same word (</s> left out).",
    "Spearman ρ": "rank correlation, over the source words, of attention's weights with the attribution's shares "
    "at that position: 1 = the same order, 0 = unrelated, −1 = the reverse order.",
    "share from the source": "the part of the attribution that goes to the English tokens; the rest goes to the "
    "French tokens read before (1 = the choice rests on the source alone).",
    "completeness error": "how far the attributions' sum misses the change of the log-probability from the "
    "baseline, relative to that change: Integrated Gradients keeps it small (it takes more steps where it is "
    "not); Input × Gradient promises nothing, so large errors are expected from it.",
}


def compute(lm: LoadedModel, src_ids: tuple[int, ...], out_ids: tuple[int, ...], method: str) -> Attribution:
    from model.interpret.attribution import attribute  # loads Captum: only when an attribution is asked for

    return cached(
        "attributions",
        (str(lm.path), src_ids, out_ids, method),
        lambda: attribute(lm.model, list(src_ids), list(out_ids), method=method),
    )


def _prefix(attr: Attribution, n: int) -> Attribution:
    """The attribution of the first n output tokens: a position's attribution depends on the tokens up to it only."""
    return replace(
        attr,
        src=attr.src[:n],
        tgt=attr.tgt[:n, :n],
        raw_src=attr.raw_src[:n],
        raw_tgt=attr.raw_tgt[:n, :n],
        target_logit=attr.target_logit[:n],
        baseline_value=attr.baseline_value[:n],
        completeness=attr.completeness[:n],
        position_steps=attr.position_steps[:n],
        steps=int(attr.position_steps[:n].max()),
        refined=attr.refined[:n],
    )


def best_head(
    ctx: StageContext, lm: LoadedModel, src_ids: tuple[int, ...], out_ids: tuple[int, ...], attr: Attribution
) -> BestHead:
    """The cross-attention head (of every layer) that agrees best with ``attr``, the attribution of ``out_ids``
    (its weights from a teacher-forced pass on the same tokens)."""
    from model.interpret.attribution import best_agreeing_head

    eos = lm.cfg.eos_id
    target = out_ids[:-1] if out_ids[-1] == eos else out_ids  # the pass reads <s> y1 … and predicts … </s>
    tr = get_trace(lm, src_ids, target, ctx.causal)
    T = len(out_ids)
    cross = np.stack([tr.arrays.cross_weights(i)[:, :T] for i in range(lm.cfg.n_decoder_layers)])
    return best_agreeing_head(attr.src, cross)  # (L, H, T, S) against (T, S)


def say_best(ctx: StageContext, best: BestHead, T: int) -> None:
    """Which head agrees best, and whether the stage shows it."""
    rho = "no Spearman ρ (constant rows)" if np.isnan(best.mean_rho) else f"mean Spearman ρ {best.mean_rho:.2f}"
    which = f"layer {best.layer}, head {best.head}"
    why = (
        f"of all {best.heads} cross-attention heads, its attention agrees best with this attribution over the "
        f"sentence (the same top source word at {best.top1} of {T} positions; {rho})"
    )
    if (ctx.layer, ctx.head) == (best.layer, best.head):
        st.info(f"Showing **{which}**: {why}. Choose another layer or head in the sidebar to compare.")
    else:
        st.info(
            f"The head that agrees best is **{which}**: {why}. Shown below: the sidebar's choice, layer "
            f"{ctx.layer}, {ctx.hname}."
        )


def render(ctx: StageContext) -> None:
    """Attributes the run's token chosen (or the label) at each shown position, -1 where there is none; a decode's
    whole output is attributed once and cut to the shown positions, so stepping does not redo it."""
    lm, src_ids, out_ids, whole = ctx.lm, ctx.run.src_ids, ctx.run.chosen_ids, ctx.run.whole_ids
    st.subheader("Attribution vs attention — which source words drove each choice")
    st.radio(
        "Attribution method", list(METHOD_LABELS), key="attribution", format_func=METHOD_LABELS.get, horizontal=True
    )
    method = ctx.view.attribution
    from model.interpret.attribution import BASELINES, baseline_for  # Captum's import, as the attribution's

    st.markdown(
        "The attribution credits each input token with its share in the log-probability of the chosen token, by "
        "the gradient of that log-probability with respect to the token's embedding (Integrated Gradients "
        "integrates it along a path from a baseline; Input × Gradient takes it at the input). Attention says "
        "where a head *looked*, attribution what *moved the output*; neither proves the other, and attribution "
        f"depends on its baseline (here: the {BASELINES[baseline_for(lm.cfg)]})."
    )
    T = len(out_ids)
    valid = T if min(out_ids) >= 0 else out_ids.index(min(out_ids))
    if valid == 0:
        st.info("Nothing is chosen at this position (the beam row died): there is no choice to explain.")
        return
    with st.spinner("Attributing…"):
        prefix = tuple(int(i) for i in out_ids[:valid])
        full = tuple(int(i) for i in whole or ())
        sentence = full if full[:valid] == prefix else prefix  # the best head is chosen over the whole sentence
        attr_all = compute(lm, tuple(src_ids), sentence, method)
        attr = _prefix(attr_all, valid) if sentence != prefix else attr_all
        best = best_head(ctx, lm, tuple(src_ids), sentence, attr_all)
    # The stage opens on that head, once per attribution of a whole sentence (not of a prefix, which grows as one
    # steps), unless a layer or head was chosen (link or sidebar).
    opened = (str(lm.path), tuple(src_ids), sentence, method)
    if (whole is None or sentence == full) and st.session_state.get("attribution_opened") != opened:
        st.session_state["attribution_opened"] = opened
        if session.open_on(ctx.view, best.layer, best.head):
            st.rerun(scope="app")
    say_best(ctx, best, len(sentence))
    attn, who = _source_maps(ctx, attr, valid, method)
    _agreement(ctx, attr, attn, who, valid)
    _target_map(ctx, attr, valid)
    if method == "ig":
        st.caption(
            f"Integrated Gradients with {attr.position_steps.min()} to {attr.steps} steps per position (more "
            "where fewer were not exact enough): the attributions of each row add up to the "
            f"log-probability's change from the baseline within {attr.completeness.max():.1%} "
            f"(completeness).{_refined_note(attr)}"
        )


def _refined_note(attr: Attribution) -> str:
    """A sentence naming the positions whose path was too steep for Gauss-Legendre's steps, if any."""
    n = int(attr.refined.sum())
    if not n:
        return ""
    which = "1 position" if n == 1 else f"{n} positions"
    return (
        f" At {which} the prediction flips too steeply along the path for evenly weighted steps: "
        "there the steps are path points placed where it flips (the trapezoid rule)."
    )


def _source_maps(ctx: StageContext, attr, valid: int, method: str) -> tuple[np.ndarray, str]:
    """The attribution to the source beside the chosen cross-attention (and the mean of heads, for one head), on
    the same source tokens; the attention drawn and what it is."""
    rows = ctx.rows[:valid]
    hl = min(ctx.current, valid - 1)
    cw = ctx.arrays.cross_weights(ctx.layer)[:, :valid]  # (H, T, S)
    attn = mean_weights(cw) if ctx.head == MEAN_HEADS else cw[int(ctx.head)]
    who = "mean of heads" if ctx.head == MEAN_HEADS else f"head {ctx.head}"
    focus = int(np.argmax(attr.src[hl]))  # both maps show the same source tokens: around the attribution's top one
    show(
        viz.alignment_figure(
            attr.src,
            rows,
            ctx.src_rows,
            replace(viz.ALIGNMENT, value_name="share"),
            highlight_row=hl,
            focus_col=focus,
            title=f"Attribution to the source ({METHOD_LABELS[method]}), share per row",
        ),
        f"{ctx.key}_attr_src",
    )
    show(
        viz.alignment_figure(
            attn,
            rows,
            ctx.src_rows,
            highlight_row=hl,
            focus_col=focus,
            title=f"Cross-attention, {who} (layer {ctx.layer})",
        ),
        f"{ctx.key}_attr_attn",
    )
    if ctx.head != MEAN_HEADS:  # the chosen head, and the mean of heads beside it
        show(
            viz.alignment_figure(
                mean_weights(cw),
                rows,
                ctx.src_rows,
                highlight_row=hl,
                focus_col=focus,
                title=f"Cross-attention, mean of heads (layer {ctx.layer})",
            ),
            f"{ctx.key}_attr_attn_mean",
        )
    return attn, who


def _agreement(ctx: StageContext, attr, attn: np.ndarray, who: str, valid: int) -> None:
    """Where attention and attribution agree, row by row, with each number defined."""
    from model.interpret.attribution import agreement

    rows = ctx.rows[:valid]
    agree = agreement(attr.src, attn)
    st.markdown(f"**{agree.summary[:1].upper() + agree.summary[1:]}** (cross-attention: layer {ctx.layer}, {who}).")
    src = ctx.src_rows
    words = slice(0, max(len(src) - 1, 1))  # the top token is a word: </s> is left out, as agreement() does
    table = pd.DataFrame(
        {
            "reads → predicts": rows,
            "attention's top word": [src[int(np.nanargmax(np.nan_to_num(a[words], nan=-1.0)))] for a in attn],
            "attribution's top word": [src[int(np.argmax(a[words]))] for a in attr.src],
            "agree": agree.top1,
            "Spearman ρ": agree.spearman,
            "share from the source": attr.src.sum(1),
            "completeness error": attr.completeness,
        }
    )
    number, d = st.column_config.NumberColumn, DEFINITIONS
    columns = {
        "agree": st.column_config.CheckboxColumn(help=d["agree"]),
        "Spearman ρ": number(format="%.2f", help=d["Spearman ρ"]),
        "share from the source": number(format="%.2f", help=d["share from the source"]),
        "completeness error": number(format="percent", help=d["completeness error"]),
    }
    st.dataframe(table, hide_index=True, key=f"{ctx.key}_attr_table", width="stretch", column_config=columns)
    st.markdown("\n".join(f"- **{name}**: {text}" for name, text in DEFINITIONS.items()).replace("<", "\\<"))


def _target_map(ctx: StageContext, attr, valid: int) -> None:
    """The attribution to the earlier target tokens (the decoder's own inputs)."""
    show(
        viz.attention_figure(
            np.where(np.tril(np.ones_like(attr.tgt, bool)), attr.tgt, -np.inf),
            ctx.rows[:valid],
            [show_token(t) for t in ctx.reads[:valid]],
            viz.AttentionOptions(
                kind="weights",
                q_title=POSITION_AXIS,
                k_title="decoder input (token read)",
                masked_hover="the future: no influence",
                value_name="share",
            ),
            highlight_row=min(ctx.current, valid - 1),
            title="Attribution to the earlier target tokens, share per row",
        ),
        f"{ctx.key}_attr_tgt",
    )
