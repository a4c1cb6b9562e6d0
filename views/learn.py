"""The Learn page: a guided lesson through the decoder on the live model and the learner's sentence.

A check of five questions, the chapters in data-flow order (each: a few sentences, the equation, one figure of the
model's own numbers with a text alternative, a question to answer before the reveal, what to notice), and a second
check. Every number and every answer comes from ``model.lesson.learn``; this module only lays them out. The chapter
and the
sentence live in the URL (``/?chapter=4&src=…``); answers and scores in the session, and with a class link
(``&class=ID``) each answer is also written to the class as it is given (``views.class_link``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from functools import partial
from urllib.parse import urlencode

import numpy as np
import streamlit as st

from model.core.constants import IMPOSSIBLE
from model.core.keys import Records
from model.core.positions import POSITION_AXIS, position_labels
from model.decode.trace import Trace
from model.interpret.explain import lens_problem, logit_lens
from model.io.checkpoint import LoadedModel
from model.lesson.learn import (
    CHAPTER_KEYS,
    CHAPTER_TITLES,
    SELF_HEAD,
    SELF_LAYER,
    Learn,
    Question,
    build,
    by_hand,
    mistakes,
)
from model.lesson.lesson import EXAMPLE_TOKENS, build_lesson, causal_mask
from views import class_link
from views.plot import build_ahead
from views.plot import builders as viz  # viz, its figures built on first use (cached)

from . import stages
from .common import cached, fail, get_decode, get_trace, lean_decoder, md, show, show_token, token_texter
from .stages import ALL
from .state import DEFAULTS, EXAMPLES, MAX_CHARS, Choices, View, number, prepare_source, to_query
from .stepping import handout_bytes, handout_inputs

SENTENCE = EXAMPLES[5]  # the lesson's first sentence: short, and every word has a clear counterpart
ROWS = POSITION_AXIS
KEYS = "key position (token it reads)"
TOP = 10
N = len(CHAPTER_KEYS)
END = N + 1  # chapter 0: the first check; 1 … N: the chapters; N + 1: the last check
MISTAKE_KINDS = (  # the worked example's mistakes, in two lists: (Mistake.arithmetic, the list's heading)
    (True, "Numbers that do not follow from their formula, in the order of the steps"),
    (False, "Mistakes of set-up: the arithmetic holds, the choice is wrong"),
)


@st.cache_resource(show_spinner=False)
def worked_example():
    return build_lesson()


def _load_url() -> None:
    """The sentence, chapter and decode length from the link, once per session."""
    s = st.session_state
    if s.get("learn_loaded"):
        return
    s["learn_loaded"] = True
    qp = st.query_params
    s["learn_src"] = str(qp.get("src") or SENTENCE)[:MAX_CHARS]
    chapter, ok = number(qp.get("chapter", 0), int, 0)
    s["learn_chapter"] = min(max(chapter, 0), END)
    if "max_len" in qp:
        s["learn_max_len"] = qp.get("max_len")
    class_link.read_link()


def _sync_url(chapter: int) -> None:
    s = st.session_state
    want = {"chapter": str(chapter), "src": s["learn_src"]}
    if "learn_max_len" in s:
        want["max_len"] = str(s["learn_max_len"])
    want.update(class_link.link_query())
    if st.query_params.to_dict() != want:
        st.query_params.from_dict(want)


def differs(cfg) -> None:
    """Say plainly when the loaded model is not the one the lesson teaches, and which chapters teach another form."""
    if not (diff := cfg.paper_differences()):
        return
    chapters = ", ".join(dict.fromkeys(f"“{CHAPTER_TITLES[key]}”" for _, key in diff))
    st.info(
        "This lesson teaches the paper's Transformer (post-norm LayerNorm, sinusoidal positions, scaled scores, a "
        f"ReLU feed-forward network); the loaded model ({cfg.family}) differs: {'; '.join(d for d, _ in diff)}. "
        f"Every chapter is read on this model's numbers, but {chapters} explain the paper's form, not this model's: "
        "Explore shows its own stages and equations."
    )


def go(chapter: int) -> None:
    st.session_state["learn_chapter"] = min(max(chapter, 0), END)


def lesson_for(lm: LoadedModel, text: str) -> tuple[Learn, dict] | None:
    """The lesson on ``text`` (cached per session) and what its figures draw; None for empty text."""
    src = prepare_source(text, lm.tokenizer, lm.cfg)
    if src is None:
        return None
    limit = lm.cfg.max_len - 1
    max_len, _ = number(st.session_state.get("learn_max_len", DEFAULTS.max_len), int, DEFAULTS.max_len)
    max_len = min(max(max_len, 1), limit)
    greedy = get_decode(lm, Choices(str(lm.path), src.text, replace(DEFAULTS, max_len=max_len)), src.ids)
    beam = get_decode(lm, Choices(str(lm.path), src.text, replace(DEFAULTS, strategy="beam", max_len=max_len)), src.ids)
    target = tuple(i for i in greedy.ids if i != lm.cfg.eos_id)
    tr = get_trace(lm, src.ids, target, causal=True)
    nc = get_trace(lm, src.ids, target, causal=False)

    def compute():
        labels = [int(i) for i in tr.arrays.label_ids]
        problem = lens_problem(lm.cfg)
        L, T = lm.cfg.n_decoder_layers, len(labels)
        lens = None if problem else logit_lens(lm.model, tr.arrays, labels, k=TOP, lean=lean_decoder(lm))
        text_of = partial(_text, lm)
        g = greedy.n_best[0]
        learn = build(
            tr.arrays,
            nc.arrays,
            tr.dec_input_tokens,
            tr.label_tokens,
            tr.src_tokens,
            n_layers=L,
            activation=lm.cfg.activation,
            lens_rank=lens.chosen_rank if lens else np.ones((L, T)),
            beam=[(text_of(h.ids), h.score) for h in beam.n_best],
            beam_width=DEFAULTS.beam,
            greedy=(text_of(g.ids), g.score),
            example=worked_example(),
            label=show_token,
            token_text=token_texter(lm),
            scale_embedding=lm.cfg.scale_embedding,
            tie_output=lm.cfg.tie_output,
        )
        return learn, lens

    key = (str(lm.path), src.ids, max_len)
    learn, lens = cached("learn", key, compute)
    return learn, {"trace": tr, "nomask": nc, "beam": beam, "lens": lens, "src": src, "lm": lm, "key": key}


def _text(lm: LoadedModel, ids) -> str:
    """A decoded candidate as text, without its </s>."""
    return lm.tokenizer.decode([i for i in ids if i != lm.cfg.eos_id])


# ---------------------------------------------------------------------------
# The page.


def render(lm: LoadedModel | None, error: str | None) -> None:
    _load_url()
    s = st.session_state
    st.title(":material/school: Learn: how a decoder writes a translation")
    class_link.join_panel()
    if lm is None:
        st.error(md(error or "No model is loaded."))
        st.info("The chapters need a model; the hand-sized worked example below does not.")
        chapter(None, None, by_hand(worked_example()), N, None)
        return
    differs(lm.cfg)
    fixed = class_link.class_sentence()  # the teacher's, for the class: everyone discusses the same numbers
    if fixed and s.get("learn_src") != fixed[:MAX_CHARS]:
        s["learn_src"] = fixed[:MAX_CHARS]
    st.text_input(
        "English sentence (the whole lesson reads the model on it; press Enter to use another)",
        key="learn_src",
        max_chars=MAX_CHARS,
        disabled=bool(fixed),
    )
    if fixed:
        st.caption("Your teacher chose this sentence for the class; after the final check you can try your own.")
    try:
        got = lesson_for(lm, s["learn_src"])
    except Exception as e:
        fail("Could not compute the lesson", e)
        return
    if got is None:
        _sync_url(s["learn_chapter"])
        st.info("Type an English sentence to start the lesson.")
        return
    learn, data = got
    if data["src"].truncated or data["src"].chars_cut:
        st.caption(f"The sentence is cut to the model's {lm.cfg.max_len - 1} tokens.")
    sid = hashlib.sha256(f"{lm.path}\0{s['learn_src']}".encode()).hexdigest()[:8]  # new sentence, new answers
    lesson(learn, data, sid)


@st.fragment
def lesson(learn: Learn, data: dict, sid: str) -> None:
    """The chapter shown, its question and the buttons: a fragment, so that moving between chapters and checking
    an answer rerun this part of the page alone (the sentence and the sidebar stay as they are)."""
    k = st.session_state["learn_chapter"]
    _sync_url(k)
    class_link.reached(k, st.session_state["learn_src"])
    with st.container(key=f"learn_chapter_{k}"):  # the chapter's top: a new chapter is scrolled to it (page.js)
        st.progress(k / END, text=_progress(learn, k))
    if k == 0:
        start(learn, data, sid)
    elif k == END:
        finish(learn, sid)
        take_away(data)
    else:
        chapter(learn, data, learn.chapters[k - 1], k, sid)
    class_link.flush()
    nav(learn, k)


def _progress(learn: Learn, k: int) -> str:
    if k == 0:
        return f"Before the chapters: a five-question check · {N} chapters follow"
    if k == END:
        return f"All {N} chapters done · the final check"
    return f"Chapter {k} of {N}: {learn.chapters[k - 1].title}"


def start(learn: Learn, data: dict, sid: str) -> None:
    tr = data["trace"]
    st.markdown(
        f"This lesson follows one sentence through the decoder of a small English→French Transformer, the way the "
        f"data flows: {N} short chapters, each with a figure of the model's own numbers and a question to answer "
        f"before the answer is shown. It takes about **{learn.minutes} minutes** ({N} chapters of about "
        "50 seconds, and two checks of five questions). Move with the *Previous* and *Next* buttons, or Tab to them "
        "and press Enter."
    )
    st.markdown("**The sentence the model reads:**")
    st.text(data["src"].text)
    st.markdown("**Its translation (the model's own, decoded greedily):**")
    st.text(_text(data["lm"], [int(i) for i in tr.arrays.label_ids]) or "(empty)")
    st.markdown("**The same translation as the decoder writes it, one token at a time:**")
    st.text(" ".join(show_token(t) for t in tr.label_tokens))
    st.header("Before you start: five questions")
    st.caption("Answer what you can; the same five ideas come back, with other items, at the end.")
    quiz(learn.pre, "pre", sid)


def finish(learn: Learn, sid: str) -> None:
    st.header("The final check: five questions")
    st.caption("The same five ideas as the first check, other items.")
    quiz(learn.post, "post", sid)
    pre, post = st.session_state.get(f"learn_score_pre_{sid}"), st.session_state.get(f"learn_score_post_{sid}")
    if post is not None:
        c1, c2 = st.columns(2)
        c1.metric("Before the chapters", "not taken" if pre is None else f"{pre} / 5")
        c2.metric("After the chapters", f"{post} / 5", delta=None if pre is None else post - pre)
        st.caption(
            "Kept for your class's teacher (the answers, not the score)."
            if class_link.member()
            else "Kept in this browser tab only: nothing is stored."
        )


def take_away(data: dict) -> None:
    """The lesson's sentence as a handout to keep: Explore's, every position with all its stages' figures."""
    lm, src, max_len = data["lm"], data["src"], data["key"][2]
    st.download_button(
        "Take it away: every position of this sentence, all stages' figures (HTML handout)",
        lambda: handout_bytes(*handout_inputs(lm, {"source": src.text, "max_len": max_len, "stage": ALL})),
        file_name="decoder_lens_handout.html",
        mime="text/html",
        on_click="ignore",
        key="learn_handout",
    )
    st.caption("One web page that opens offline; each figure saves as PNG or SVG, each position's figures as a ZIP.")


def quiz(questions: tuple[Question, ...], name: str, sid: str) -> None:
    key = f"learn_score_{name}_{sid}"
    with st.form(f"learn_form_{name}_{sid}"):
        for i, q in enumerate(questions, 1):
            st.radio(f"{i}. {q.prompt}", q.options, index=None, key=f"learn_{name}_{i}_{sid}")
        sent = st.form_submit_button("Check my answers", type="primary")
    s = st.session_state
    chosen = [s.get(f"learn_{name}_{i}_{sid}") for i in range(1, len(questions) + 1)]
    if sent:
        now = sum(c == q.options[q.answer] for c, q in zip(chosen, questions))
        s.setdefault(key, now)  # the score is the first try's: a check again after the reveal does not raise it
        s[f"{key}_now"] = now
        for q, c in zip(questions, chosen):
            class_link.submit(q, c, s["learn_src"])
        if name == "post":
            class_link.final_taken()
    elif key not in s:
        class_link.unsaved(questions, chosen)
    if key in s:
        st.markdown(f"**Score: {s[key]} / {len(questions)}**")
        if s[f"{key}_now"] != s[key]:
            st.caption(f"The score of your first try; checked again, {s[f'{key}_now']} are right now.")
        for i, q in enumerate(questions, 1):
            feedback(q, s.get(f"learn_{name}_{i}_{sid}"), f"{i}. ")


def feedback(q: Question, chosen: str | None, prefix: str = "") -> None:
    right = q.options[q.answer]
    where = ended(f"See {q.where}: {q.why}")
    if chosen == right:
        st.success(md(f"{prefix}Right: {ended(right)} {where}"), icon=":material/check_circle:")
    elif chosen is None:
        st.info(md(f"{prefix}No answer chosen. The answer is {ended(right)} {where}"), icon=":material/info:")
    else:
        st.warning(
            md(f"{prefix}Not quite: you chose {chosen}; the answer is {ended(right)} {where}"), icon=":material/close:"
        )


def ended(text: str) -> str:
    """``text`` as one sentence: a full stop unless it ends with one already, inside a closing quote too
    (“… voisins.” rather than “… voisins.”.)."""
    return text if text.rstrip("”’)").endswith((".", "?", "!")) else f"{text}."


def chapter(learn: Learn | None, data: dict | None, c, k: int, sid: str | None) -> None:
    st.header(f"{k}. {c.title}", anchor=False)  # no link beside it: one Tab stop less before the question
    st.markdown(md(c.text))
    st.latex(c.equation)
    try:
        fig = figure(c.key, learn, data)
    except Exception as e:
        fail("Could not draw the figure", e)
        fig = None
    later = learn.chapters[k : k + 2] if learn is not None else []  # two ahead: the next one is built by now
    built = [_ahead(x.key, learn, data) for x in later]
    if fig is not None:
        # the next chapter's figure goes along, for the browser to draw while this one is read
        show(fig, f"learn_fig_{c.key}", (built[0], f"learn_fig_{later[0].key}") if built and built[0] else None)
        st.caption(md(f"The figure in words: {c.alt}"))
    if learn is not None and stages.teaching(c.key):
        st.markdown(explore_links(learn, data, c.key))
    if c.key == "mask" and data is not None:
        cheat(data)
    if c.key == "decoding" and data is not None:
        candidates(data)
    if c.key == "by_hand":
        with st.container(key="learn_mistakes"):
            st.subheader("Common mistakes to avoid")
            found = mistakes(worked_example())
            for arithmetic, heading in MISTAKE_KINDS:
                # one element, a paragraph each: every element of a chapter costs its turn a few ms in the browser
                shown = "\n\n".join(
                    f"**{md(m.title)}.** {md(m.computation)}" for m in found if m.arithmetic == arithmetic
                )
                st.markdown(f"*{heading}*\n\n{shown}")
    q = c.question
    qkey = f"learn_q_{c.key}_{sid}"
    st.radio(md(q.prompt), q.options, index=None, key=qkey)
    checked = f"learn_checked_{c.key}_{sid}"  # the answer the last Check was for, as a 1-tuple
    s = st.session_state
    if st.button("Check", key=f"learn_check_{c.key}_{sid}", type="primary"):
        s[checked] = (s.get(qkey),)
        class_link.submit(q, s.get(qkey), s["learn_src"])
    elif checked not in s:
        class_link.unsaved((q,), [s.get(qkey)])
    if checked in s and s[checked] != (s.get(qkey),):
        st.info("You changed your answer: press *Check* to see whether it is right.", icon=":material/info:")
    elif checked in s:
        feedback(q, s.get(qkey))
        st.markdown(f"**What to notice.** {md(c.notice)}")


def candidates(data: dict) -> None:
    """Beam search's finished candidates under its tree, best first: the list the chapter's answer points to."""
    text_of = partial(_text, data["lm"])
    st.markdown(
        "**The finished candidates, best score first** (the first is the translation beam search returns):\n\n"
        + "\n".join(f"{i}. {md(text_of(h.ids))} (score {h.score:.3f})" for i, h in enumerate(data["beam"].n_best, 1))
    )


def explore_links(learn: Learn, data: dict, key: str) -> str:
    """Links to the stages chapter ``key`` teaches (the registry says which) on the Explore page, on this sentence
    at the chapter's row."""
    view = View(source=data["src"].text, step=learn.focus.row)
    links = (f"[{md(s.label)}](explore?{urlencode(to_query(replace(view, stage=s.id)))})" for s in stages.teaching(key))
    return f"**See it in Explore**, at position {learn.focus.row}: " + " · ".join(links)


def _ahead(key: str, learn: Learn, data: dict):
    """A later chapter's figure (a ``Drawing``), built in the background while the learner reads this one; None
    when that chapter has no figure."""
    try:
        fig = figure(key, learn, data)
    except Exception:  # that chapter's own run reports it
        return None
    if fig is not None:
        build_ahead(fig)
    return fig


def cheat(data: dict) -> None:
    """The loss with and without the causal mask, on the live model."""
    on, off = float(data["trace"].arrays.loss.mean()), float(data["nomask"].arrays.loss.mean())
    c1, c2 = st.columns(2)
    c1.metric("Mean loss with the causal mask", f"{on:.3f}")
    c2.metric("Mean loss without it", f"{off:.3f}", delta=f"{off - on:+.3f}", delta_color="inverse")


def nav(learn: Learn, k: int) -> None:
    prev_name = "the first check" if k == 1 else learn.chapters[k - 2].title if k > 1 else None
    next_name = "the final check" if k == N else learn.chapters[k].title if k < N else None
    with st.container(horizontal=True, key="learn_nav"):
        if prev_name:
            st.button(f"◀ Previous: {prev_name}", key="learn_prev", on_click=go, args=(k - 1,))
        if next_name:
            st.button(f"Next: {next_name} ▶", key="learn_next", on_click=go, args=(k + 1,), type="primary")
    if st.session_state.get("learn_goto") != k:  # one widget for every chapter, showing the chapter shown
        st.session_state["learn_goto"] = k
    st.selectbox("Or go to", range(END + 1), key="learn_goto", format_func=lambda i: _name(learn, i), on_change=_goto)


def _name(learn: Learn, i: int) -> str:
    return "The first check" if i == 0 else "The final check" if i == END else f"{i}. {learn.chapters[i - 1].title}"


def _goto() -> None:
    go(st.session_state["learn_goto"])


# ---------------------------------------------------------------------------
# One figure per chapter, from the ``viz`` builders.


@dataclass(frozen=True)
class _Drawn:
    """What a chapter's figure reads: the teacher-forced trace ``tr`` (``a``: its arrays), the focus row ``f``, the
    rows' labels and the tokens each position reads, and the self-attention the chapters read (``layer``, ``h``)."""

    learn: Learn
    data: dict
    tr: Trace
    f: int
    reads: list[str]
    rows: list[str]
    layer: int = SELF_LAYER
    h: int = SELF_HEAD
    where: str = f"layer {SELF_LAYER}, head {SELF_HEAD}"

    @property
    def a(self) -> Records[np.ndarray]:
        return self.tr.arrays


def figure(key: str, learn: Learn | None, data: dict | None):
    if key == "by_hand":
        return _by_hand_figure()
    tr = data["trace"]
    reads = [show_token(t) for t in tr.dec_input_tokens]
    rows = position_labels(tr.dec_input_tokens, tr.label_tokens, show_token)
    return FIGURES[key](_Drawn(learn, data, tr, learn.focus.row, reads, rows))


def _by_hand_figure():
    ex = worked_example()
    w = ex.stage("weights").ours
    n = w.shape[0]
    rows = list(EXAMPLE_TOKENS[:n])
    return viz.attention_figure(
        np.where(np.isfinite(causal_mask(n)), w, -np.inf),
        rows,
        rows,
        title="Attention weights α of the worked example, recomputed",
        q_title="row: the token it reads",
        k_title="key token",
        masked_hover="masked (the future): weight 0",
    )


def _tokens_figure(d: _Drawn):
    a, rows = d.a, d.rows
    p = a.probs[np.arange(len(rows)), a.label_ids]
    return viz.layer_position_figure(
        p[None, :],
        rows,
        highlight_col=d.f,
        value_name="p(label)",
        layer_labels=["p(label)"],
        y_title="teacher forcing",
        title="Probability of each label, one column per decoder position",
    )


def _embed_figure(d: _Drawn):
    return viz.matrix_figure(
        d.a.embedding("dec", "input"),
        d.rows,
        highlight_row=d.f,
        token_label=ROWS,
        title="X = token embedding · √d_model + positional encoding",
    )


def _qkv_figure(d: _Drawn):
    return viz.matrix_figure(
        d.a.self_attn(d.layer, "Q")[d.h],
        d.rows,
        highlight_row=d.f,
        token_label=ROWS,
        dim_label="d_k dimension",
        title=f"Queries Q = X·W_Q, {d.where}",
    )


def _scores_figure(d: _Drawn, key: str):
    kind = "scores" if key == "scores" else "masked_scores"
    title = "Raw scores QKᵀ/√d_k, every cell" if key == "scores" else "Masked scores (grey = −∞)"
    return viz.attention_figure(
        d.a.self_attn(d.layer, kind)[d.h],
        d.rows,
        d.reads,
        kind=kind,
        highlight_row=d.f,
        title=f"{title}, {d.where}",
        q_title=ROWS,
        k_title=KEYS,
        masked_hover="masked: −∞ (the future)",
    )


def _softmax_figure(d: _Drawn):
    a, h = d.a, d.h
    w = np.where(np.isfinite(a.self_attn(d.layer, "mask")[h]), a.self_weights(d.layer)[h], -np.inf)
    return viz.attention_figure(
        w,
        d.rows,
        d.reads,
        kind="weights",
        highlight_row=d.f,
        q_title=ROWS,
        k_title=KEYS,
        title=f"Attention weights α, {d.where}",
        masked_hover="masked (the future): weight 0",
    )


def _output_proj_figure(d: _Drawn):
    return viz.matrix_figure(
        d.a.self_attn(d.layer, "context")[d.h],
        d.rows,
        highlight_row=0,
        token_label=ROWS,
        dim_label="d_k dimension",
        title=f"α·V, {d.where} (row 0 outlined)",
    )


def _addnorm_figure(d: _Drawn):
    a = d.a
    return viz.addnorm_figure(
        a.norm(d.layer, 1, "residual"),
        a.norm(d.layer, 1, "mean"),
        a.norm(d.layer, 1, "std"),
        a.norm(d.layer, 1, "out"),
        d.rows,
        highlight_row=d.f,
        token_label=ROWS,
        title=f"Add & Norm after self-attention, layer {SELF_LAYER}",
    )


def _cross_figure(d: _Drawn):
    cl = d.learn.focus.cross_layer
    return viz.alignment_figure(
        d.a.cross_weights(cl).mean(axis=0),
        d.rows,
        [show_token(t) for t in d.tr.src_tokens],
        highlight_row=d.f,
        q_title="target position: reads → predicts",
        title=f"Cross-attention, layer {cl}, mean of heads",
    )


def _ffn_figure(d: _Drawn):
    return viz.ffn_figure(
        d.a.ffn(d.layer, "hidden"),
        d.rows,
        highlight_row=d.f,
        token_label=ROWS,
        title=f"FFN hidden units, layer {SELF_LAYER}",
    )


def _output_figure(d: _Drawn):
    a, f = d.a, d.f
    probs = a.probs[f]
    order = np.argsort(-probs, kind="stable")[:TOP]
    label = int(a.label_ids[f])
    chosen = [int(i) for i in order].index(label) if label in order else None
    text = token_texter(d.data["lm"])
    return viz.topk_figure(
        [show_token(text(int(i))) for i in order],
        probs[order],
        chosen,
        title=f"Top {TOP} next tokens at row {f} ({d.rows[f]}); the label outlined",
    )


def _decoding_figure(d: _Drawn):
    res, text = d.data["beam"], token_texter(d.data["lm"])
    answer = tuple(res.n_best[0].ids)
    end = len(answer) - 1  # the position that predicted the answer's last token: the tree up to there
    return viz.beam_tree_figure(
        res.beam_steps[: end + 1],
        token_text=lambda i: show_token(text(i)),
        impossible=IMPOSSIBLE,
        title=f"Beam search, width {DEFAULTS.beam}, up to position {end}, where the translation it returns "
        "finished: what it kept, finished, and the best it dropped from each",
        paths={"the translation beam search returns": answer},
        max_pruned=1,  # the lesson's tree: one dropped candidate per hypothesis (Explore's shows three)
        x_title="position that predicted the token (position 0 reads <s>, as in chapter 1)",
        whole=True,  # every position of the answer's path in view
    ).keyed(*d.data["key"])  # the decode it draws: its model, source and length


def _lens_figure(d: _Drawn):
    if d.data["lens"] is None:
        return None
    return viz.layer_position_figure(
        d.data["lens"].chosen_prob,
        d.rows,
        highlight_col=d.f,
        value_name="p(label)",
        y_title="layer",
        title="p(the label) after each decoder layer, every position",
    )


FIGURES = {  # every chapter on the live model, by its key (the hand-sized example draws ``_by_hand_figure``)
    "tokens": _tokens_figure,
    "embed": _embed_figure,
    "qkv": _qkv_figure,
    "scores": partial(_scores_figure, key="scores"),
    "mask": partial(_scores_figure, key="mask"),
    "softmax": _softmax_figure,
    "output_proj": _output_proj_figure,
    "addnorm": _addnorm_figure,
    "cross": _cross_figure,
    "ffn": _ffn_figure,
    "output": _output_figure,
    "decoding": _decoding_figure,
    "lens": _lens_figure,
}
