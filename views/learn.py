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
from dataclasses import replace
from urllib.parse import urlencode

import streamlit as st

from model.core.config import ModelConfig
from model.interpret.explain import lens_problem, logit_lens
from model.io.checkpoint import LoadedModel
from model.lesson.learn import CHAPTER_TITLES, Chapter, Learn, Outcomes, Question, build, by_hand
from views import class_link
from views.plot import Drawing, build_ahead

from . import chapters, stages
from .chapters import LessonRun, Reading, worked_example
from .common import cached, fail, get_decode, get_trace, lean_decoder, md, show, show_token, token_texter
from .stages import ALL
from .state import DEFAULTS, EXAMPLES, MAX_CHARS, Choices, View, number, prepare_source, to_query
from .stepping import handout_bytes, handout_inputs

SENTENCE = EXAMPLES[5]  # the lesson's first sentence: short, and every word has a clear counterpart
TOP = 10
N = len(chapters.CHAPTERS)
END = N + 1  # chapter 0: the first check; 1 … N: the chapters; N + 1: the last check


def _load_url() -> None:
    """The sentence, chapter and decode length from the link, once per session."""
    s = st.session_state
    if s.get("learn_loaded"):
        return
    s["learn_loaded"] = True
    qp = st.query_params
    s["learn_src"] = str(qp.get("src") or SENTENCE)[:MAX_CHARS]
    raw = qp.get("chapter", 0)
    chapter, ok = number(raw, int, 0)
    s["learn_chapter"] = min(max(chapter, 0), END)
    if not ok:  # said once, on the run that read the link, as Explore says of its choices
        s["learn_link_note"] = f"Chapter {str(raw)[:40]!r} is not a number; showing the first check."
    elif chapter != s["learn_chapter"]:
        s["learn_link_note"] = f"Chapter must be between 0 and {END}; showing {s['learn_chapter']}."
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


def differs(cfg: ModelConfig) -> None:
    """Say plainly when the loaded model is not the one the lesson teaches, and which chapters teach another form."""
    if not (diff := cfg.paper_differences()):
        return
    named = ", ".join(dict.fromkeys(f"“{CHAPTER_TITLES[key]}”" for _, key in diff))
    st.info(
        "This lesson teaches the paper's Transformer (post-norm LayerNorm, sinusoidal positions, scaled scores, a "
        f"ReLU feed-forward network); the loaded model ({cfg.family}) differs: {'; '.join(d for d, _ in diff)}. "
        f"Every chapter is read on this model's numbers, but {named} explain the paper's form, not this model's: "
        "Explore shows its own stages and equations."
    )


def go(chapter: int) -> None:
    st.session_state["learn_chapter"] = min(max(chapter, 0), END)


def lesson_for(lm: LoadedModel, text: str) -> tuple[Learn, LessonRun] | None:
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

    key = (str(lm.path), src.ids, max_len)

    def compute():
        labels = [int(i) for i in tr.arrays.label_ids]
        lens = None if lens_problem(lm.cfg) else logit_lens(lm.model, tr.arrays, labels, k=TOP, lean=lean_decoder(lm))
        run = LessonRun(lm, src, tr, nc, beam, lens, key)
        g = greedy.n_best[0]
        outcomes = Outcomes(
            beam=[(run.text(h.ids), h.score) for h in beam.n_best],
            beam_width=DEFAULTS.beam,
            greedy=(run.text(g.ids), g.score),
            lens_rank=lens.chosen_rank if lens else None,
        )
        learn = build(
            tr,
            nc,
            lm.cfg,
            outcomes,
            worked_example(),
            label=show_token,
            token_text=token_texter(lm),
            chapters=[c.write for c in chapters.CHAPTERS],
        )
        return learn, run

    return cached("learn", key, compute)


# ---------------------------------------------------------------------------
# The page.


def render(lm: LoadedModel | None, error: str | None) -> None:
    _load_url()
    s = st.session_state
    st.title(":material/school: Learn: how a decoder writes a translation")
    if note := s.pop("learn_link_note", None):
        st.warning(md(note))
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
    learn, run = got
    if run.src.truncated or run.src.chars_cut:
        st.caption(f"The sentence is cut to the model's {lm.cfg.max_len - 1} tokens.")
    sid = hashlib.sha256(f"{lm.path}\0{s['learn_src']}".encode()).hexdigest()[:8]  # new sentence, new answers
    lesson(learn, run, sid)


@st.fragment
def lesson(learn: Learn, run: LessonRun, sid: str) -> None:
    """The chapter shown, its question and the buttons: a fragment, so that moving between chapters and checking
    an answer rerun this part of the page alone (the sentence and the sidebar stay as they are)."""
    k = st.session_state["learn_chapter"]
    _sync_url(k)
    class_link.reached(k, st.session_state["learn_src"])
    with st.container(key=f"learn_chapter_{k}"):  # the chapter's top: a new chapter is scrolled to it (page.js)
        st.progress(k / END, text=_progress(learn, k))
    if k == 0:
        start(learn, run, sid)
    elif k == END:
        finish(learn, sid)
        take_away(run)
    else:
        chapter(learn, run, learn.chapters[k - 1], k, sid)
    class_link.flush()
    nav(learn, k)


def _progress(learn: Learn, k: int) -> str:
    if k == 0:
        return f"Before the chapters: a five-question check · {N} chapters follow"
    if k == END:
        return f"All {N} chapters done · the final check"
    return f"Chapter {k} of {N}: {learn.chapters[k - 1].title}"


def start(learn: Learn, run: LessonRun, sid: str) -> None:
    tr = run.trace
    st.markdown(
        f"This lesson follows one sentence through the decoder of a small English→French Transformer, the way the "
        f"data flows: {N} short chapters, each with a figure of the model's own numbers and a question to answer "
        f"before the answer is shown. It takes about **{learn.minutes} minutes** ({N} chapters of about "
        "50 seconds, and two checks of five questions). Move with the *Previous* and *Next* buttons, or Tab to them "
        "and press Enter."
    )
    st.markdown("**The sentence the model reads:**")
    st.text(run.src.text)
    st.markdown("**Its translation (the model's own, decoded greedily):**")
    st.text(run.text(tr.arrays.label_ids) or "(empty)")
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
            if class_link.member() or class_link.resuming()
            else "Kept in this browser tab only: nothing is stored."
        )


def take_away(run: LessonRun) -> None:
    """The lesson's sentence as a handout to keep: Explore's, every position with all its stages' figures."""
    lm, src, max_len = run.lm, run.src, run.max_len
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


def chapter(learn: Learn | None, run: LessonRun | None, c: Chapter, k: int, sid: str | None) -> None:
    """Chapter ``k`` (written: ``c``; declared: ``chapters.CHAPTERS[k - 1]``), without a model the worked example
    alone (``learn`` and ``run`` None)."""
    unit = chapters.CHAPTERS[k - 1]
    qkey, check = f"learn_q_{c.key}_{sid}", f"learn_check_{c.key}_{sid}"
    checked = f"learn_checked_{c.key}_{sid}"  # the answer the last Check was for, as a 1-tuple
    st.header(f"{k}. {c.title}", anchor=False)  # no link beside it: one Tab stop less before the question
    st.markdown(md(c.text))
    st.latex(c.equation)
    reading = None if learn is None or run is None else unit.reading(learn, run)
    try:
        fig = unit.figure(reading)
    except Exception as e:
        fail("Could not draw the figure", e)
        fig = None
    later = _later(learn, run, k)
    if fig is not None:
        # the next chapter's figure goes along, for the browser to draw while this one is read
        nxt = later[0] if later else None
        show(fig, f"learn_fig_{c.key}", (nxt[1], f"learn_fig_{nxt[0]}") if nxt and nxt[1] else None)
        words = md(f"The figure in words: {c.alt}")
        if checked in st.session_state or st.session_state.get(check):  # Check pressed, now or before
            st.caption(words)
        else:  # it reads the answer off the figure: there for whoever cannot see the figure, not read by chance
            with st.expander("The figure in words (it gives the answer)"):
                st.caption(words)
    if learn is not None and reading is not None and unit.stages:
        st.markdown(explore_links(learn, reading, unit.stages))
    if unit.below is not None:
        unit.below(reading)
    q = c.question
    st.radio(md(q.prompt), q.options, index=None, key=qkey)
    s = st.session_state
    if st.button("Check", key=check, type="primary"):
        s[checked] = (s.get(qkey),)
        class_link.submit(q, s.get(qkey), s["learn_src"])
    elif checked not in s:
        class_link.unsaved((q,), [s.get(qkey)])
    if checked in s and s[checked] != (s.get(qkey),):
        st.info("You changed your answer: press *Check* to see whether it is right.", icon=":material/info:")
    elif checked in s:
        feedback(q, s.get(qkey))
        st.markdown(f"**What to notice.** {md(c.notice)}")


def explore_links(learn: Learn, reading: Reading, taught: tuple[str, ...]) -> str:
    """Links to the stages a chapter teaches (``taught``, their ids) on the Explore page, on this sentence at the
    chapter's row."""
    view = View(source=reading.run.src.text, step=learn.focus.row)
    links = (
        f"[{md(s.label)}](explore?{urlencode(to_query(replace(view, stage=s.id)))})" for s in map(stages.by_id, taught)
    )
    return f"**See it in Explore**, at position {learn.focus.row}: " + " · ".join(links)


def _later(learn: Learn | None, run: LessonRun | None, k: int) -> list[tuple[str, Drawing | None]]:
    """The two chapters after chapter ``k`` and their figures, built in the background while the learner reads
    this one (the next one is built by the time it is asked for)."""
    if learn is None or run is None:
        return []
    return [(c.key, _ahead(chapters.CHAPTERS[i], learn, run)) for i, c in enumerate(learn.chapters[k : k + 2], k)]


def _ahead(unit: chapters.Chapter, learn: Learn, run: LessonRun) -> Drawing | None:
    """A later chapter's figure, its building started; None when that chapter has no figure."""
    try:
        fig = unit.figure(unit.reading(learn, run))
    except Exception:  # that chapter's own run reports it
        return None
    if fig is not None:
        build_ahead(fig)
    return fig


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
