"""The step-by-step view: the stepper, the followed hypothesis, the chips, then the chosen stage at one position.

It runs as a fragment, so a step reruns this part of the page alone.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import numpy as np
import pandas as pd
import streamlit as st

import viz
from model.checkpoint import LoadedModel
from model.constants import IMPOSSIBLE
from model.steps import chips, follow, layer_keep, live_rows, output_record, path_tokens, stack_view, token_prob

from . import export, session, stages, whatif
from .common import badges, fail, get_decode, md, path_labels, show_token, token_texter
from .stages import ablation, attribution, beam, kv_cache, lens, output
from .stages.context import StageContext
from .state import EXPLAIN_STAGES, Limits, clamp_step, move, prepare_source

STEP_BUTTONS = (  # key, icon (material icons ship with Streamlit; emoji fonts may be missing), tooltip
    ("first", ":material/skip_previous:", "⏮ first position"),
    ("prev", ":material/arrow_left:", "◀ previous position"),
    ("next", ":material/arrow_right:", "▶ next position"),
    ("last", ":material/skip_next:", "⏭ last position"),
)


def drop_stale_forced(base) -> None:
    """A forced prefix belongs to one sentence and one set of decoding choices (``base``, without the prefix)."""
    s = st.session_state
    if not s.get("forced"):
        s.pop("forced_base", None)
        return
    if s.get("forced_base") is None:  # from the link: it belongs to the link's choices
        s["forced_base"] = base
    elif s["forced_base"] != base:
        clear_forced()


def clear_forced() -> None:
    s = st.session_state
    s["forced"], s["user_forced"], s["follow"] = (), frozenset(), ()
    s.pop("forced_base", None)


def _force(prefix: tuple[int, ...], user: frozenset[int], keep_user: frozenset[int], base) -> None:
    s = st.session_state
    s["forced"], s["user_forced"] = prefix, keep_user | user
    s["forced_base"] = base
    s["follow"] = ()
    s["pending_step"] = min(len(prefix), s.get("max_len", len(prefix)) - 1)


def _move(action: str, n: int) -> None:
    s = st.session_state
    s["step"] = move(clamp_step(s.get("step", 0), n), action, n)


def _follow_pick(ids_by_row: dict[int, tuple[int, ...]]) -> None:
    s = st.session_state
    s["follow"] = ids_by_row.get(s.get("follow_pick"), ())


def _follow_row(ids: tuple[int, ...]) -> None:
    st.session_state["follow"] = ids


@st.fragment
def view(lm: LoadedModel, limits: Limits, src_tokens: list[str], stage: str) -> None:
    try:
        _view(lm, limits, src_tokens, stage)
    except Exception as e:
        fail("Could not show this position", e)


def _view(lm: LoadedModel, limits: Limits, src_tokens: list[str], stage: str) -> None:
    s = st.session_state
    tok_text, stream_text = token_texter(lm), partial(path_labels, lm)
    v = session.current(limits)
    ch = v.choices(str(lm.path))
    res = get_decode(lm, ch, src_ids(lm, ch))
    n = len(res.steps)
    if s.get("step_for") != ch:  # a new decode: start at the link's position, or at 0
        s["step_for"] = ch
        s["step"] = clamp_step(s.pop("pending_step", 0), n)
    s["step"] = clamp_step(s.get("step", 0), n)

    st.subheader("Step through the decoder")
    with st.container(horizontal=True, key="stepper", vertical_alignment="bottom"):
        for key, icon, tip in STEP_BUTTONS:
            st.button("", key=key, icon=icon, on_click=_move, args=(key, n), help=tip)
        if n > 1:
            st.slider(
                "Position",
                0,
                n - 1,
                key="step",
                width=420,
                help="Position 0 reads <s>; position t reads the token chosen at position t − 1 and "
                "predicts the next one.",
            )
    step = s["step"]
    v = session.current(limits)

    fol = follow(res, step, v.follow)
    if res.beam_steps is not None:
        live = res.beam_steps[step].live
        rows_here = live_rows(res, step)
        ids_by_row = {r: tuple(live[r].ids) for r in rows_here}

        def hyp_label(r: int) -> str:
            h = live[r]
            text = " ".join(show_token(t) for t in stream_text(h.ids)) or "<s>"
            return f"{text[:70]}  (log p {h.logprob:.2f}, row {r})"

        s["follow_pick"] = fol.row
        st.selectbox(
            "Follow hypothesis",
            rows_here,
            key="follow_pick",
            format_func=hyp_label,
            on_change=_follow_pick,
            args=(ids_by_row,),
            help="The view below follows this hypothesis by its tokens: stepping back shows its "
            "ancestors, stepping forward its best surviving continuation.",
        )
        followed = " ".join(show_token(t) for t in stream_text(fol.ids)) or "<s>"
        if fol.relation == "ended" and fol.ids:
            how = "finished (it ended with </s>)" if fol.ended_how == "finished" else "was pruned from the beam"
            st.warning(
                md(
                    f"The hypothesis you follow ({followed}) {how} at position {fol.ended_at}; this "
                    "position shows the best live hypothesis instead."
                )
            )
        elif fol.relation == "descendant" and fol.ids:
            st.caption(md(f"Showing the best surviving continuation of the hypothesis you picked ({followed})."))
        elif fol.relation == "ancestor":
            st.caption(md(f"Showing the prefix, at this position, of the hypothesis you follow ({followed})."))
    rows, r_now = fol.rows, fol.row
    inputs, chosen = path_tokens(res, rows, step)
    # each input read with what follows it, so the last one is named by its character too ("ъ 1/2")
    reads, predicts = path_labels(lm, inputs + chosen[-1:])[:-1], path_labels(lm, chosen)
    cur = res.steps[step]
    next_id = int(chosen[-1])
    p_next = token_prob(cur, r_now, next_id) if next_id >= 0 else None
    session.sync_url(v)

    cs = chips(res, rows, step, v.user_forced)
    items = [
        (f"{show_token(label)} {'' if c.prob is None else f'{c.prob:.2f}'}".strip(), "orange" if c.forced else "blue")
        for c, label in zip(cs, reads[1:])  # the chips are the decoder inputs after <s>
    ]
    with st.container(key="chips"):
        head = f"**Generated so far ({len(cs)} token{'s' if len(cs) != 1 else ''}):** "
        empty = "_nothing yet — the decoder has only seen_ " + badges([("<s>", "gray")])
        st.markdown(head + (badges(items) if items else empty))
        if any(c.forced for c in cs):
            st.caption("Orange tokens were forced by you; blue ones the model chose.")
    nxt = "∅ (this hypothesis was dropped)" if next_id < 0 else show_token(predicts[-1])
    pn = "" if p_next is None else f" (p = {p_next:.3f})"
    by_user = " — forced by you" if step in v.user_forced else ""
    with st.container(key="next_chip"):
        st.markdown(
            f"**Position {step}** of 0–{n - 1} reads {badges([(show_token(reads[-1]), 'gray')])}"
            f" → predicts {badges([(nxt + pn + by_user, 'green')])}"
        )
    if ch.prefix and st.button("Clear forced tokens", key="clear_forced", on_click=clear_forced):
        st.rerun(scope="app")  # the translation above changes too

    table = pd.DataFrame(
        {
            "position": np.arange(step + 1),
            "reads (decoder input)": [show_token(t) for t in reads],
            "predicts (chosen next token)": [show_token(t) for t in predicts],
            "p(predicted)": [
                token_prob(res.steps[i], rows[i], chosen[i]) if chosen[i] >= 0 else None for i in range(step + 1)
            ],
            "entropy (nats)": [float(res.steps[i].entropy[rows[i]]) for i in range(step + 1)],
            "forced by you": [i in v.user_forced for i in range(step + 1)],
        }
    )
    if stages.shows(stage, "inputs"):
        st.subheader("1 · Decoder inputs (the output shifted right)")
        st.caption(
            "Each position reads the token the previous position predicted; position 0 starts from <s>.".replace(
                "<", "\\<"
            )
        )
        st.dataframe(table, hide_index=True, key="shifted_table", width="stretch")

    arrays = stack_view(res.steps, rows, step, keep=layer_keep(v.layer))  # the shown layer only
    ctx = StageContext(
        cfg=lm.cfg,
        arrays=arrays,
        reads=reads,
        predicts=predicts,
        src_tokens=src_tokens,
        layer=v.layer,
        head=v.head,
        grid=v.grid,
        current=step,
        incremental=True,
        causal=True,
        key="dec",
        pe_table=lm.model.tgt_embed.pe.detach().cpu().numpy(),
    )
    stages.render(ctx, stage)

    if stage in EXPLAIN_STAGES:
        explain(ctx, lm, stage, res, rows, step, chosen, ch, v)

    live_table = None
    if stages.shows(stage, "output"):
        st.subheader("7 · Output: next-token distribution")
        output.formula()
        chosen_id = next_id if next_id >= 0 else None
        output.render(
            tok_text,
            cur.top_ids[r_now],
            np.exp(cur.top_logprobs[r_now]),
            chosen_id,
            float(cur.entropy[r_now]),
            f"Top {output.TOP_SHOWN} next tokens at position {step}",
            "dec_topk",
        )
        kv_cache.render(lm.cfg, reads, step)
        if res.beam_steps is not None:
            live = res.beam_steps[step].live
            beam.render(res, step, tok_text, stream_text, lambda r: _follow_row(tuple(live[r].ids)))
            live_table = viz.beam_table(live, stream_text, impossible=IMPOSSIBLE)

    base = replace(ch, prefix=())
    keep_user = frozenset(i for i in v.user_forced if i < step)
    whatif.render(
        lm,
        cur,
        r_now,
        [int(i) for i in inputs[1:]],
        step,
        tok_text,
        lambda prefix, user: (_force(prefix, user, keep_user, base), st.rerun(scope="app")),
    )
    export.render_decode(lm, ch, res, rows, step, reads, src_tokens, table, tok_text, live_table)


def src_ids(lm: LoadedModel, ch) -> tuple[int, ...]:
    src = prepare_source(ch.source, lm.tokenizer, lm.cfg.eos_id, lm.cfg.max_len)
    return src.ids if src else (lm.cfg.eos_id,)


def explain(ctx: StageContext, lm: LoadedModel, stage: str, res, rows, step: int, chosen, ch, v) -> None:
    """The explanation stages at this position of the followed hypothesis."""
    if stage == "lens":
        outs = stack_view(res.steps, rows, step, keep=lambda k: k.startswith("dec.") and k.endswith(".norm3.out"))
        lens.render(ctx, lm, outs, chosen, output_record(res.steps, rows, step))
    elif stage == "attribution":
        attribution.render(ctx, lm, src_ids(lm, ch), chosen, whole=list(res.ids))
    elif stage == "ablation":
        ref = v.reference.strip()
        ref_ids = lm.tokenizer.encode(ref)[: lm.cfg.max_len - 1] if ref else None
        ablation.render(ctx, lm, ch, tuple(res.ids), src_ids(lm, ch), ref_ids)
