"""The Explore page: a sentence, the decoding choices, the translation, then the step or teacher-forcing view."""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from pathlib import Path

import streamlit as st

import viz
from model.checkpoint import LoadedModel
from model.constants import IMPOSSIBLE, MAX_BEAM
from model.steps import ended_by_length, mean_token_prob, mean_weights
from model.tokenizer import byte_characters

from . import session, stepping, teacher_forcing
from .common import as_read, badges, get_decode, head_label, md, path_labels, show, show_token
from .stages import beam
from .state import (
    EXAMPLES,
    MAX_CHARS,
    MAX_LENGTH_PENALTY,
    MAX_SEED,
    MAX_TEMPERATURE,
    MEAN_HEADS,
    STAGE_LABELS,
    STAGES,
    STRATEGIES,
    STRATEGY_LABELS,
    TAB_LABELS,
    TABS,
    prepare_source,
)

UNK_SHARE = 0.5  # warn when at least this share of the source is unreadable: <unk> tokens, or characters in bytes
LOW_CONFIDENCE = 0.45  # bundled model: good translations score 0.64-0.87, garbled output 0.22-0.40


def _set_source(text: str) -> None:
    st.session_state["source"] = text


def _keep_stage() -> None:
    """Clicking the selected stage again would deselect it: keep the last one instead."""
    s = st.session_state
    if s.get("stage") in STAGES:
        s["stage_last"] = s["stage"]
    else:
        s["stage"] = s.get("stage_last", STAGES[3])


def sidebar(lm: LoadedModel) -> None:
    cfg, s, sb = lm.cfg, st.session_state, st.sidebar
    sb.subheader("Decoding")
    sb.radio("Strategy", STRATEGIES, key="strategy", format_func=STRATEGY_LABELS.get, horizontal=True)
    if s["strategy"] == "beam":
        sb.slider("Beam width", 1, MAX_BEAM, key="beam")
        sb.number_input(
            "Length penalty",
            0.0,
            MAX_LENGTH_PENALTY,
            step=0.1,
            key="length_penalty",
            help="score = log p / length^penalty (as in transformers)",
        )
    elif s["strategy"] == "sample":
        sb.number_input(
            "Temperature", 0.0, MAX_TEMPERATURE, step=0.1, key="temperature", help="0 = always the most likely token"
        )
        sb.number_input("Top-k (0 = off)", 0, cfg.vocab_size, step=1, key="top_k")
        sb.slider("Top-p (1 = off)", 0.0, 1.0, step=0.01, key="top_p")
        sb.number_input("Seed", 0, MAX_SEED, step=1, key="seed")
    cap = max(1, cfg.max_len - 1)
    if cap > 1:
        sb.slider("Max length (new tokens)", 1, cap, key="max_len")
    sb.subheader("View")
    sb.selectbox("Decoder layer", list(range(cfg.n_decoder_layers)), key="layer", on_change=session.layer_head_chosen)
    sb.selectbox("Attention head", [MEAN_HEADS, *range(cfg.n_heads)], key="head", format_func=head_label,
                 on_change=session.layer_head_chosen)  # fmt: skip
    sb.toggle("Show every head (grid)", key="grid")


def stage_selector() -> str:
    s = st.session_state
    st.segmented_control(
        "Decoder stage to show",
        STAGES,
        key="stage",
        format_func=STAGE_LABELS.get,
        on_change=_keep_stage,
        help="Each step redraws only the figures of the chosen stage; "
        "All stages shows every figure of the decoder at once (slower to step through; a figure below the "
        "window is redrawn as you scroll to it); the three explanations "
        "(logit lens, head ablation, attribution) are shown one at a time.",
    )
    stage = s.get("stage") if s.get("stage") in STAGES else STAGES[3]
    s["stage_last"] = stage
    return stage


def render(lm: LoadedModel, dirs: list[Path], url_msgs: list[str]) -> None:
    s = st.session_state
    cfg = lm.cfg
    limits = session.limits_of(cfg)
    msgs = url_msgs + session.load(limits)
    s["model"] = "" if Path(lm.path) == dirs[0] else Path(lm.path).name
    sidebar(lm)

    st.title(":material/frame_inspect: Decoder Lens")
    st.caption(
        "Type an English sentence, then step through an English→French Transformer decoder one token at a "
        "time and see every stage on the real numbers."
    )
    st.markdown("**Examples**")
    with st.container(horizontal=True, key="examples"):
        for i, ex in enumerate(EXAMPLES):
            st.button(ex, key=f"example_{i}", on_click=_set_source, args=(ex,))
    st.text_area("English sentence", key="source", height=80, placeholder="Type an English sentence…")
    st.text_input(
        "Reference French translation (optional — turns on the teacher-forcing view)",
        key="reference",
        placeholder="e.g. Je suis étudiant.",
    )
    for m in msgs:
        st.warning(md(m))

    view = session.current(limits)
    src = prepare_source(view.source, lm.tokenizer, cfg.eos_id, cfg.max_len)
    if src is None:
        st.info("Type a sentence above (or click an example) to start: the box is empty.")
        session.sync_url(view)
        return
    if src.chars_cut:
        st.warning(f"The text is longer than {MAX_CHARS} characters; only the first {MAX_CHARS} are used.")
    if src.truncated:
        st.warning(
            f"The sentence has {src.n_tokens} tokens but this model reads at most {cfg.max_len - 1}; "
            f"only the first {cfg.max_len - 1} are used."
        )

    stepping.drop_stale_forced(replace(view.choices(str(lm.path)), prefix=()))
    view = session.current(limits)
    ch = view.choices(str(lm.path))
    res = get_decode(lm, ch, src.ids)

    src_tokens = lm.tokenizer.tokens(src.ids)
    st.markdown("**Source tokens** " + badges([(show_token(t), "gray") for t in src_tokens]))
    n_unk = sum(1 for i in src.ids[:-1] if i == cfg.unk_id)
    n_bytes = sum(1 for i in src.ids[:-1] if i in lm.tokenizer.byte_ids)
    # characters, not tokens: one name in another script is many byte tokens but a small part of the sentence
    n_byte_chars = byte_characters([lm.tokenizer.id_to_token(i) for i in src.ids[:-1]]) if n_bytes else 0
    n_chars = sum(not c.isspace() for c in lm.tokenizer.decode(src.ids[:-1])) if n_bytes else 0
    honesty(lm, res, n_unk, n_bytes, len(src.ids) - 1, n_byte_chars, n_chars)
    c1, c2 = st.columns(2)
    with c1:
        st.markdown("**English**")
        st.text(src.text)
        tok = lm.tokenizer
        read = tok.decode(src.ids[:-1]) if tok.byte_fallback else as_read(src_tokens[:-1])
        if " ".join(read.split()) != " ".join(src.text.split()):
            why = ["cut to its limit"] if src.truncated else []
            why += [] if tok.byte_fallback else ["unknown pieces as <unk>"]
            why = f" ({', '.join(why)})" if why else ""
            st.markdown(f"**As the model reads it**{why}".replace("<", "\\<"))
            st.text(read)
    with c2:
        st.markdown(f"**French** ({md(ch.describe())})")
        st.text(lm.tokenizer.decode(res.ids) or "(empty)")
    if len(res.n_best) > 1:
        with st.expander(f"All {len(res.n_best)} beam candidates"):
            table = viz.beam_table(res.n_best, partial(path_labels, lm), impossible=IMPOSSIBLE)
            st.dataframe(
                table,
                hide_index=True,
                key="nbest",
                width="stretch",
                column_config=beam.COLUMNS,
                column_order=beam.ORDER,
            )

    reference = view.reference.strip()[:MAX_CHARS]
    if reference and len(lm.tokenizer.encode(reference)) > cfg.max_len - 1:
        st.warning(f"The reference was cut to the model's limit of {cfg.max_len - 1} tokens.")
    stage = stage_selector()
    if reference:
        st.segmented_control("View", TABS, key="tab", format_func=TAB_LABELS.get, on_change=_keep_tab)
        tab = s.get("tab") if s.get("tab") in TABS else TABS[0]
    else:
        tab = TABS[0]
    if tab == "tf":
        teacher_forcing.view(lm, limits, src.ids, src_tokens, reference, stage)
    else:
        stepping.view(lm, limits, src_tokens, stage)

    with st.expander("Encoder (computed once per sentence)"):
        encoder(lm, res, src_tokens, view)


def _keep_tab() -> None:
    s = st.session_state
    if s.get("tab") not in TABS:
        s["tab"] = TABS[0]


def honesty(lm: LoadedModel, res, n_unk: int, n_bytes: int, n_src: int, n_byte_chars: int, n_chars: int) -> None:
    """Say plainly when the output cannot be trusted: unreadable source, low confidence, or a cut-off."""
    cfg = lm.cfg
    if n_chars and n_byte_chars / n_chars >= UNK_SHARE:
        st.warning(
            f"The model cannot read this text as words: {n_byte_chars} of its {n_chars} characters are outside "
            f"its vocabulary (such as emoji or Chinese) and are spelled out as raw bytes, {n_bytes} byte tokens. "
            "It can carry such characters over, for names, but it never learned their meaning: the French below "
            "is not a translation of your text."
        )
    elif n_src and n_unk / n_src >= UNK_SHARE:
        st.warning(
            f"The model cannot read this text: {n_unk} of its {n_src} source tokens are unknown to it "
            "(<unk>: characters outside its vocabulary, such as emoji or Chinese). The French below is "
            "not a translation of your text; it is what the model makes of unknown tokens.".replace("<", "\\<")
        )
    elif n_bytes:
        st.caption(
            f"{n_bytes} source token(s) are raw bytes: characters outside the vocabulary, spelled out byte by byte "
            "(labelled by the character and the byte's place in it)."
        )
    if n_unk and not (n_src and n_unk / n_src >= UNK_SHARE):
        st.caption(
            f"{n_unk} source token(s) are unknown to the model (<unk>): characters outside its vocabulary.".replace(
                "<", "\\<"
            )
        )
    p = mean_token_prob(res)
    if p < LOW_CONFIDENCE:
        st.warning(
            f"The model is out of its depth here: its mean token probability for this output is {p:.2f} "
            f"(below {LOW_CONFIDENCE}). Treat the translation as a guess; the model was trained on short "
            "everyday sentences and image captions."
        )
    if ended_by_length(res, cfg.eos_id):
        st.warning(
            f"The output was cut off at the maximum length ({len(res.ids)} new tokens) before the model "
            "produced </s>. Raise *Max length* in the sidebar to let it finish.".replace("</", "\\</")
        )


def encoder(lm: LoadedModel, res, src_tokens: list[str], view) -> None:
    cfg = lm.cfg
    layer = min(view.layer, cfg.n_encoder_layers - 1)
    w = res.encoder.get(f"enc.{layer}.self.weights")
    mem = res.encoder.get("memory")
    rows = [show_token(t) for t in src_tokens]
    if w is not None:
        w = w[0]
        show(
            viz.attention_figure(
                mean_weights(w) if view.head == MEAN_HEADS else w[int(view.head)],
                rows,
                rows,
                title=f"Encoder self-attention, layer {layer}, {head_label(view.head)}",
                q_title="source token (query)",
                k_title="source token (key)",
            ),
            "enc_self",
        )
    if mem is not None:
        show(
            viz.matrix_figure(
                mem[0], rows, title="Encoder output (memory) read by cross-attention", token_label="source token"
            ),
            "enc_memory",
        )
