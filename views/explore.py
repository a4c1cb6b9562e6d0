"""The Explore page: a sentence, the decoding choices, the translation, then the step or teacher-forcing view."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import streamlit as st

from model.core.constants import IMPOSSIBLE
from model.core.tokenizer import Readability, readability
from model.decode.decoding import DecodeResult
from model.decode.steps import LOW_CONFIDENCE, ended_by_length, mean_token_prob
from model.io.checkpoint import LoadedModel
from views.plot import builders as viz  # viz, its figures built on first use (cached)

from . import session, stepping, teacher_forcing
from .common import as_read, badges, get_decode, lazy_panel, md, show_token, shown_labels
from .sidebar import sidebar
from .stages import beam, encoder
from .state import (
    EXAMPLES,
    MAX_CHARS,
    TAB_LABELS,
    TABS,
    Limits,
    Source,
    View,
    prepare_source,
)


def render(lm: LoadedModel, dirs: list[Path], url_msgs: list[str]) -> None:
    cfg = lm.cfg
    limits = session.limits_of(cfg, str(lm.path))
    name = "" if Path(lm.path) == dirs[0] else Path(lm.path).name
    view, msgs = session.load(limits, str(lm.path), name)
    msgs = url_msgs + msgs
    sidebar(lm, view)

    inputs(msgs)

    src = prepare_source(view.source, lm.tokenizer, cfg)
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

    ch = view.choices(str(lm.path))
    res = get_decode(lm, ch, src.ids)

    src_tokens = lm.tokenizer.tokens(src.ids)
    with st.container(key="translation_block"):
        translation(lm, limits, view, src, src_tokens)

    reference = view.reference.strip()[:MAX_CHARS]
    if reference and len(lm.tokenizer.encode(reference)) > cfg.max_len - 1:
        st.warning(f"The reference was cut to the model's limit of {cfg.max_len - 1} tokens.")
    tab = TABS[0]
    if reference:
        stepping.choice_control("View", TABS, "tab", TAB_LABELS, TABS[0])
        tab = view.tab
    if tab == "tf":
        teacher_forcing.view(lm, limits, view, src.ids, src_tokens, reference)
    else:
        stepping.view(lm, limits, view, src.ids, src_tokens)

    if panel := lazy_panel("Encoder (computed once per sentence)", "encoder_open"):
        with panel:
            encoder.render(lm, res, src_tokens, view)


def inputs(msgs: list[str]) -> None:
    """The page's title, the examples, the sentence and the reference, and what the link could not reproduce."""
    st.title(":material/frame_inspect: Decoder Lens")
    st.caption(
        "Type an English sentence, then step through an English→French Transformer decoder one token at a "
        "time and see every stage on the real numbers."
    )
    st.markdown("**Examples**")
    with st.container(horizontal=True, key="examples"):
        for i, ex in enumerate(EXAMPLES):
            st.button(ex, key=f"example_{i}", on_click=session.set_source, args=(ex,))
    st.text_area(
        "English sentence (press Enter to use it)", key="source", height=80, placeholder="Type an English sentence…"
    )
    st.text_input(
        "Reference French translation (optional — offers the teacher-forcing view, chosen under View below)",
        key="reference",
        placeholder="e.g. Je suis étudiant.",
    )
    for m in msgs:
        st.warning(md(m))


@st.fragment(key=session.TRANSLATION_FRAGMENT)
def translation(lm: LoadedModel, limits: Limits, v: View, src: Source, src_tokens: list[str]) -> None:
    """The source tokens, what makes the output untrustworthy, the sentence as the model reads it beside its
    translation, and the beam's candidates (in a panel). A fragment: a token forced or cleared reruns it with the
    step view (the source stays; the decoding choices are read afresh)."""
    view = session.fragment_view(v, limits, last=False)
    ch = view.choices(str(lm.path))
    res = get_decode(lm, ch, src.ids)
    st.markdown("**Source tokens** " + badges([(show_token(t), "gray") for t in src_tokens]))
    with st.container(key="honesty"):  # a note that comes or goes (a token forced) moves no element after it
        honesty(lm, res, readability(lm.tokenizer, src.ids[:-1], lm.cfg.unk_id), view.user_forced, ch.decode.strategy)
    c1, c2 = st.columns(2)
    with c1:
        st.markdown("**English**")
        st.text(src.text)
        tok = lm.tokenizer
        read = tok.decode(src.ids[:-1]) if tok.byte_fallback else as_read(src_tokens[:-1])
        if " ".join(read.split()) != " ".join(src.text.split()):
            reasons = ["cut to its limit"] if src.truncated else []
            reasons += [] if tok.byte_fallback else ["unknown pieces as <unk>"]
            why = f" ({', '.join(reasons)})" if reasons else ""
            st.markdown(f"**As the model reads it**{why}".replace("<", "\\<"))
            st.text(read)
    with c2:
        n = len(view.user_forced)
        yours = f", {n} token{'s' if n != 1 else ''} forced by you" if n else ""
        st.markdown(f"**French** ({md(ch.describe())}{yours})")
        st.text(lm.tokenizer.decode(res.ids) or "(empty)")
    if len(res.n_best) > 1 and (panel := lazy_panel(f"All {len(res.n_best)} beam candidates", "nbest_open")):
        with panel:
            beam.table(viz.beam_table(res.n_best, partial(shown_labels, lm), impossible=IMPOSSIBLE), "nbest")


def honesty(
    lm: LoadedModel, res: DecodeResult, r: Readability, forced: frozenset[int] = frozenset(), strategy: str = "greedy"
) -> None:
    """Say plainly when the output cannot be trusted: unreadable source, low confidence (of the model's own
    choices: ``forced``, the positions the user forced, left out; none said of a sampled output), or a cut-off."""
    cfg = lm.cfg
    n_unk, n_bytes, n_src, n_byte_chars, n_chars = r.n_unk, r.n_bytes, r.n_tokens, r.n_byte_chars, r.n_chars
    if r.mostly_bytes:
        st.warning(
            f"The model cannot read this text as words: {n_byte_chars} of its {n_chars} characters are outside "
            f"its vocabulary (such as emoji or Chinese) and are spelled out as raw bytes, {n_bytes} byte tokens. "
            "It can carry such characters over, for names, but it never learned their meaning: the French below "
            "is not a translation of your text."
        )
    elif r.mostly_unknown:
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
    if n_unk and not r.mostly_unknown:
        st.caption(
            f"{n_unk} source token(s) are unknown to the model (<unk>): characters outside its vocabulary.".replace(
                "<", "\\<"
            )
        )
    # over the model's own choices: a token the user forced, or one a sampler drew, is not the model's doubt
    p = mean_token_prob(res, cfg.eos_id, forced)
    if strategy != "sample" and p < LOW_CONFIDENCE:
        mine = " (the tokens you forced left out)" if forced else ""
        st.warning(
            f"The model is out of its depth here: its mean token probability for this output is {p:.2f}{mine} "
            f"(below {LOW_CONFIDENCE}). Treat the translation as a guess; the model was trained on short "
            "everyday sentences and image captions."
        )
    if ended_by_length(res, cfg.eos_id):
        st.warning(
            f"The output was cut off at the maximum length ({len(res.ids)} new tokens) before the model "
            "produced </s>. Raise *Max length* in the sidebar to let it finish.".replace("</", "\\</")
        )
