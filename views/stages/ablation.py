"""Head ablation: switch attention heads off, decode again, and see what changes."""

from __future__ import annotations

import streamlit as st

from model.core.ablation import format_heads, parse_heads
from model.interpret.explain import ablated_decode, ablation_of, head_importance, position_loss_delta, same_positions

from .. import session
from ..common import badges, cached, lean_decoder, md, show, show_token
from ..plot import builders as viz  # viz, its figures built on first use (cached)
from .context import StageContext

IMPORTANCE = "head importance"
IMPORTANCE_DEFINITION = (
    "the mean cross-entropy per token (nats) with that head alone removed minus with every head: above 0, "
    "the translation needs the head; near 0, it does as well without it; below 0, it does better without it."
)
MODE_LABELS = {"zero": "zero (the head outputs nothing)", "mean": "mean (the head outputs its average)"}


def _pill_key(kind: str, layer: int) -> str:
    return f"ablate_{kind}_{layer}"


def _sync_pills(cfg, ablate: str) -> None:
    """The head pickers show the view's ablation (the link's, or the session's) the first time they are drawn."""
    s = st.session_state
    if s.get("ablate_pills_for") == ablate:
        return
    heads = parse_heads(ablate)
    for kind in ("self", "cross"):
        for layer in range(cfg.n_decoder_layers):
            s[_pill_key(kind, layer)] = sorted(h for k, l_, h in heads if k == kind and l_ == layer)
    s["ablate_pills_for"] = ablate


def _from_pills(cfg) -> None:
    """The callback of the head pickers: their heads are the view's ablation."""
    s = st.session_state
    heads = {
        (kind, layer, int(h))
        for kind in ("self", "cross")
        for layer in range(cfg.n_decoder_layers)
        for h in s.get(_pill_key(kind, layer)) or ()
    }
    s["ablate_pills_for"] = session.set_ablation(format_heads(heads))


def _marked(ids: list[int], other: list[int], text) -> str:
    """The tokens as badges, red where they differ from ``other`` (aligned by difflib)."""
    same = same_positions(ids, other)
    return badges([(show_token(text(i)), "blue" if k in same else "red") for k, i in enumerate(ids)]) or "∅"


def _pickers(cfg) -> None:
    """One row of head pills per decoder layer, self-attention beside cross-attention."""
    c1, c2 = st.columns(2)
    for col, kind, name in ((c1, "self", "Masked self-attention"), (c2, "cross", "Cross-attention")):
        with col:
            st.markdown(f"**{name} heads to switch off**")
            for layer in range(cfg.n_decoder_layers):
                st.pills(
                    f"layer {layer}",
                    list(range(cfg.n_heads)),
                    selection_mode="multi",
                    key=_pill_key(kind, layer),
                    format_func=lambda h: f"head {h}",
                    on_change=_from_pills,
                    args=(cfg,),
                )


def _without(ctx: StageContext, heads, mode: str, target: list[int]) -> None:
    """The sentence decoded again without ``heads``, beside the translation with every head, and (with a
    reference) the reference loss change per position."""
    lm, run = ctx.lm, ctx.run
    cfg, ch, base_ids, src_ids, reference_ids = lm.cfg, run.choices, run.base_ids, run.src_ids, run.reference_ids
    text = lm.tokenizer.id_to_token
    ablation = cached(
        "ablations",
        (str(lm.path), src_ids, tuple(target), format_heads(heads), mode),
        lambda: ablation_of(lm.model, heads, mode, list(src_ids), target),
    )
    res = cached(
        "ablated",
        (str(lm.path), src_ids, ch.decode, ablation),
        lambda: ablated_decode(lm.model, src_ids, ch.decode, ablation, lean_decoder(lm)),
    )
    ids = list(res.ids)
    st.markdown(
        f"**Without {md(format_heads(heads))}** ({len(heads)} head{'s' if len(heads) > 1 else ''}, "
        f"{mode} ablation): " + _marked(ids, list(base_ids), text)
    )
    st.markdown("**All heads** (as decoded above): " + _marked(list(base_ids), ids, text))
    st.caption("Red tokens differ between the two translations.")
    st.text(lm.tokenizer.decode(ids) or "(empty)")
    if reference_ids is not None:
        delta = cached(
            "position_loss",
            (str(lm.path), src_ids, tuple(target), ablation),
            lambda: position_loss_delta(lm.model, list(src_ids), target, ablation),
        )
        labels = [show_token(t) for t in lm.tokenizer.tokens([*target, cfg.eos_id])]
        show(
            viz.loss_delta_figure(
                labels, delta, title=f"Reference loss change per position without {format_heads(heads)}"
            ),
            f"{ctx.key}_ablation_loss",
        )


def render(ctx: StageContext) -> None:
    """The run's decode choices (the ablated decode uses the same) and output; the importance map is measured on
    the reference, or without one on the model's own output."""
    lm, run = ctx.lm, ctx.run
    cfg, base_ids, src_ids, reference_ids = lm.cfg, run.base_ids, run.src_ids, run.reference_ids
    st.subheader("Head ablation — which heads does this translation need?")
    st.markdown(
        "Pick heads to switch off (their output is replaced before W_O) and the sentence is decoded again with the "
        "same settings. Removing a head is one intervention among several: a head that can be removed without "
        "harm may still matter together with others, and a large change shows the model depends on that head "
        "here, not what the head computes."
    )
    _sync_pills(cfg, ctx.view.ablate)
    _pickers(cfg)
    st.radio("Ablation", list(MODE_LABELS), key="ablate_mode", format_func=MODE_LABELS.get, horizontal=True)
    heads, mode = parse_heads(ctx.view.ablate), ctx.view.ablate_mode
    target = list(reference_ids) if reference_ids is not None else [i for i in base_ids if i != cfg.eos_id]
    if heads:
        _without(ctx, heads, mode, target)
    else:
        st.info("No head is switched off: pick heads above to decode without them.")
    what = "the reference" if reference_ids is not None else "the model's own translation"
    st.markdown(
        f"**Importance map**: the mean loss increase on {what} when each head alone is removed "
        f"({mode} ablation), teacher-forced."
    )
    st.markdown(f"- **{IMPORTANCE}**: {IMPORTANCE_DEFINITION}")
    with st.spinner("Removing each head in turn…"):
        imp = cached(
            "importance",
            (str(lm.path), src_ids, tuple(target), mode),
            lambda: head_importance(lm.model, list(src_ids), target, mode=mode),
        )
    show(
        viz.importance_figure(imp.self_loss_delta, kind="self", title="Masked self-attention heads: loss increase"),
        f"{ctx.key}_importance_self",
    )
    show(
        viz.importance_figure(imp.cross_loss_delta, kind="cross", title="Cross-attention heads: loss increase"),
        f"{ctx.key}_importance_cross",
    )
    st.caption(f"Mean loss with every head: {imp.base_loss:.3f} nats per token.")
