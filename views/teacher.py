"""The Class page (``/class``): a teacher creates a class and gets its two links; the teacher link
(``/class?c=ID#t=SECRET``) opens the class's dashboard, refreshed while the class works.

The secret is exchanged, not carried: it travels in the address's fragment, which no server receives (so no access
log holds it); the page's script (``teacher_key.js``) takes it out of the address bar and hands it over once, and it
is traded for a teacher session's token that the browser keeps as a cookie of the class. An older link's ``t=`` is
traded the same way and removed from the address bar.

The page only orchestrates: the store (``classroom.store``) reads and writes, ``classroom.stats`` computes every
number, ``viz.classroom`` draws. Whoever lacks the class's secret sees no class data.
"""

from __future__ import annotations

import functools
import json
import secrets
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlencode, urlsplit

import streamlit as st

from classroom import stats
from classroom.errors import ClassError, DatabaseError, Forbidden
from classroom.models import NAME_CHARS
from classroom.store import FINAL, TEACHER_SESSION, ClassData, ClassInfo, Store, teaching_chapter
from model.lesson.learn import CHAPTER_KEYS, CHAPTER_TITLES
from views.learn import SENTENCE
from views.plot import builders as viz
from views.state import MAX_CHARS

from .class_link import LINK_KEY, class_store
from .common import md, show

if TYPE_CHECKING:
    from model.io.checkpoint import LoadedModel

STUDENT_ROWS_SHOWN = 40  # more students than this: their one-row-each figure waits in an expander
REFRESH_S = 5  # the dashboard's live part reruns this often while the page is open
PATH = "class"  # the page's address (views.main's registry names it "Class")
HERE = Path(__file__).parent
COOKIE = "dl_teacher_"  # + a class's id: the cookie of that class's teacher session (its token)
KEY = "class_teacher_key"  # the element that reads the secret from the address's fragment
S_TOKENS, S_ASK, S_HANDED = "class_teacher_tokens", "class_key_ask", "class_key_handed"
HARD_KEY, HARD_QUERY = "class_hard_opening", "hardest"  # the hardest questions with the opening check's: ?hardest=all
SENTENCE_LABEL = (
    "The class's sentence (optional): every student's lesson runs on it, so the class discusses the same numbers; "
    "each may try their own after the final check"
)
NO_KEY = "This page opens a class's dashboard from its teacher link (the one given when the class was made)."


def stage_name(chapter: int) -> str:
    """A short name of a place in the lesson: ``first check``, ``5. The causal mask``, ``final check``."""
    if chapter == 0:
        return "first check"
    if chapter == FINAL:
        return "final check"
    return f"{chapter}. {CHAPTER_TITLES[CHAPTER_KEYS[chapter - 1]].split(':')[0]}"


def question_name(question: str) -> str:
    part, _, idea = question.partition("_")
    if part in ("pre", "post") and question not in CHAPTER_KEYS:
        return f"{'first' if part == 'pre' else 'final'} check: {stage_name(teaching_chapter(question))}"
    return stage_name(teaching_chapter(question))


def base_url() -> str:
    """The app's root as the browser sees it (the links given to the class); relative when unknown."""
    url = getattr(st.context, "url", None) or ""
    parts = urlsplit(url)
    path = parts.path
    if path.rstrip("/").endswith(f"/{PATH}"):
        path = path.rstrip("/")[: -len(PATH)]
    return f"{parts.scheme}://{parts.netloc}{path.rstrip('/')}" if parts.netloc else ""


def render(lm: LoadedModel | None = None, error: str | None = None) -> None:
    st.title(":material/groups: Class: what your students understood")
    done = st.session_state.pop("class_done", None)
    if done:
        st.info(md(done))
    class_id = st.query_params.get("c")
    store = class_store()
    if store is None:
        st.info("A class needs its database; the other pages work as usual.")
        return
    if not class_id:
        create(store)
        return
    try:
        token = teacher_token(store, str(class_id))
        if token is None:
            st.caption("Opening the class's dashboard…")
            return
        info = store.teacher(str(class_id), token)
    except ClassError as e:
        st.error(md(e))
        st.caption("A new class can be made on this page without a link.")
        return
    dashboard(store, info, token)


@functools.cache
def _key_reader():
    """Registered once per process (registering the same name again replaces it, with a warning)."""
    return st.components.v2.component("decoder_lens_teacher_key", js=(HERE / "teacher_key.js").read_text())


def _handed() -> None:
    """The secret the page's script read from the fragment ("" for none), kept for the run it starts."""
    got = st.session_state.get(KEY) or {}
    st.session_state[S_HANDED] = got.get("secret") if hasattr(got, "get") else None


def teacher_token(store: Store, class_id: str) -> str | None:
    """This session's key to the class: a teacher session's token, traded for the secret handed over (the link's
    fragment, or an older link's ``t=``, which leaves the address bar at once) or kept from an earlier visit (this
    session's, or the browser's cookie). None while the page's script has not yet said whether the address holds
    a secret; ``Forbidden`` or ``NotFound`` when no key opens the class."""
    s = st.session_state
    tokens = s.setdefault(S_TOKENS, {})
    secret = s.pop(S_HANDED, None)
    if "t" in st.query_params:
        secret = str(st.query_params.pop("t"))
    if secret:
        tokens[class_id] = store.open_teacher_session(class_id, secret)
    elif secret is not None:
        s[S_ASK] = ""  # the script has answered: the address held no secret
    got = _key_reader()(
        data=json.dumps(
            {"ask": s.setdefault(S_ASK, secrets.token_hex(8)), "token": tokens.get(class_id, ""),
             "cookie": COOKIE + class_id, "max_age": int(TEACHER_SESSION.total_seconds())}
        ).encode(),
        key=KEY,
        on_secret_change=_handed,
    )  # fmt: skip
    handed = got.get("secret")
    if secret is None and handed is not None:  # handed over without its callback
        if handed:
            s[S_HANDED] = handed  # traded on the next run
            st.rerun()
        s[S_ASK] = ""
    token = tokens.get(class_id) or _cookies().get(COOKIE + class_id)
    if token:
        return token
    if s.get(S_ASK):
        return None
    raise Forbidden(NO_KEY)


def _cookies() -> dict:
    try:
        return dict(st.context.cookies)
    except Exception:  # no browser behind this session (a test's)
        return {}


def create(store: Store) -> None:
    st.markdown(
        "Make a class for your students: they join it from the **student link** with a nickname (no account, no "
        "personal data) and take the Learn lesson; every answer is kept for you. The **teacher link** opens the "
        "class's dashboard: who is where, which questions the class found hard and which wrong answers it chose, "
        "and how far it moved from the first check to the final one."
    )
    with st.form("class_create_form"):
        st.text_input("Class name", key="class_name", placeholder="e.g. NLP lecture, Monday 9:00", max_chars=NAME_CHARS)
        st.text_input(SENTENCE_LABEL, key="class_sentence_new", placeholder=f"e.g. {SENTENCE}", max_chars=MAX_CHARS)
        st.form_submit_button("Create the class", type="primary", key="class_create", on_click=_create, args=(store,))
    s = st.session_state
    if s.get("class_create_error"):
        st.warning(md(s.pop("class_create_error")))
    made = s.get("class_made")
    if made:
        links(*made)


def _create(store: Store) -> None:
    s = st.session_state
    try:
        new = store.create_class(s.get("class_name") or "", s.get("class_sentence_new") or "")
    except ClassError as e:
        s["class_create_error"] = str(e)
        return
    s["class_made"] = (new.id, new.name, new.secret)


def links(class_id: str, name: str, secret: str) -> None:
    base = base_url()
    student = f"{base}/?{urlencode({LINK_KEY: class_id})}"
    teacher = f"{base}/{PATH}?{urlencode({'c': class_id})}#{urlencode({'t': secret})}"  # a fragment: sent nowhere
    st.success(md(f"The class “{name}” is ready."), icon=":material/check_circle:")
    st.markdown("**Student link** (share it with the class):")
    st.code(student, language=None)
    st.markdown("**Teacher link** (keep it to yourself: it is the only key to the class's answers, shown once):")
    st.code(teacher, language=None)
    st.link_button("Open the dashboard", teacher, type="primary")


# ---------------------------------------------------------------------------
# The dashboard.


def dashboard(store: Store, info: ClassInfo, secret: str) -> None:
    st.header(info.name, anchor=False)
    st.caption(
        md(
            f"Created {info.created_at:%Y-%m-%d %H:%M} UTC · "
            + ("closed: no more students or answers" if info.closed else "open: students can join and answer")
            + f" · the figures refresh every {REFRESH_S} s"
        )
    )
    live(store, info.id, secret)
    sentence_form(store, info, secret)
    manage(store, info, secret)


def sentence_form(store: Store, info: ClassInfo, secret: str) -> None:
    """The class's sentence: shown, and changed (or removed) by the teacher at any time."""
    st.subheader("The class's sentence", anchor=False)
    st.markdown(
        f"Every student's lesson runs on **{md(info.sentence)}**"
        if info.sentence
        else "None chosen: each student's lesson runs on the sentence they type."
    )
    with st.form("class_sentence_form"):
        st.text_input(SENTENCE_LABEL, value=info.sentence, key="class_sentence_set", max_chars=MAX_CHARS)
        st.form_submit_button("Use this sentence", key="class_sentence_use", on_click=_act,
                              args=(store, info, secret, "sentence"))  # fmt: skip


@st.fragment(run_every=REFRESH_S)
def live(store: Store, class_id: str, secret: str) -> None:
    """Everything that changes while the class works, read again every ``REFRESH_S`` seconds."""
    try:
        data = store.snapshot(class_id, secret)
    except DatabaseError:
        st.warning(md(OUTAGE), icon=":material/cloud_off:")
        return
    except ClassError as e:
        st.warning(md(e))
        return
    questions = stats.question_stats(data)
    gain = stats.class_gain(data)
    c1, c2, c3 = st.columns(3)
    c1.metric("Students", len(data.students))
    c2.metric("Answers", len(data.answers))
    c3.metric("Normalised gain g", "–" if gain.g is None else f"{gain.g:.2f}", help=GAIN_HELP)
    st.caption(md(gain_line(gain)))
    if not data.students:
        st.info("No student has joined yet: share the student link.")
        return
    st.subheader("Where the class is now", anchor=False)
    counts = stats.progress(data)
    show(
        viz.progress_figure(
            [stage_name(k) for k in range(FINAL + 1)], counts, title="Students at each chapter (their furthest)"
        ),
        "class_progress",
    )
    hard(questions, data)
    if questions:
        st.subheader("Each question: right at the first try, and the wrong answers chosen", anchor=False)
        show(
            viz.first_try_figure(
                [question_name(q.question) for q in questions],
                [q.first_right for q in questions],
                [q.students for q in questions],
                [q.wrong[0][0] if q.wrong else "" for q in questions],
                title="Share of students right at their first try, per question",
            ),
            "class_questions",
        )
        wrong = sorted(((question_name(q.question), o, n) for q in questions for o, n in q.wrong), key=lambda w: -w[2])
        if wrong:
            st.markdown("**The wrong options chosen, most common first** (what the class misunderstood):")
            rows = [{"question": q, "wrong option": o, "times chosen": n} for q, o, n in wrong]
            st.dataframe(rows, hide_index=True, key="class_wrong")
    checks(data)
    sentences(data)


def sentences(data: ClassData) -> None:
    """Which sentence each answer was given on: the class's own, or a student's."""
    by = Counter(a.sentence for a in data.answers)
    if not by:
        return
    who: dict[str, set[str]] = {}
    for a in data.answers:
        who.setdefault(a.sentence, set()).add(a.student_id)
    st.subheader("The sentences the answers were given on", anchor=False)
    rows = [
        {"sentence": text or "(none)", "class's sentence": "yes" if text and text == data.info.sentence else "",
         "answers": n, "students": len(who[text])}
        for text, n in by.most_common()
    ]  # fmt: skip
    st.dataframe(rows, hide_index=True, key="class_sentences")


OUTAGE = (
    f"The class's database cannot be reached right now: these figures come back by themselves once it can (they "
    f"are read again every {REFRESH_S} s). Your students' pages keep the answers they could not save and send "
    "them again."
)
GAIN_HELP = (
    "Hake's normalised gain: (mean final-check score − mean first-check score) / (5 − mean first-check score), "
    "over the students who took both checks; the share of the possible improvement the class made."
)


def students(n: int) -> str:
    return f"{n} student" if n == 1 else f"{n} students"


def gain_line(gain: stats.Gain) -> str:
    if gain.g is None:
        if gain.students:
            return (
                f"No gain to measure: the {students(gain.students)} who took both checks had full marks on the "
                "first one."
            )
        return "The class's gain appears once students have taken both checks."
    return (
        f"g = {gain.g:.2f} (bootstrap 95 % interval {gain.low:.2f} to {gain.high:.2f}) over {students(gain.students)} "
        f"who took both checks: mean {gain.pre_mean:.2f} / {gain.max_score} before the chapters, "
        f"{gain.post_mean:.2f} / {gain.max_score} after."
    )


def hard(questions: list[stats.QuestionStats], data: ClassData) -> None:
    s = st.session_state
    if HARD_KEY not in s:  # once per session, from the address
        s[HARD_KEY] = st.query_params.get(HARD_QUERY) == "all"
    opening = bool(s[HARD_KEY])
    worst = stats.hardest(questions, opening=opening)
    if not worst and not opening:
        return
    st.subheader("The three hardest questions", anchor=False)
    st.toggle(
        "Include the first check (asked before any teaching: naturally the lowest)", key=HARD_KEY, on_change=_hard_url
    )
    sentence = Counter(s.sentence for s in data.students if s.sentence).most_common(1)
    for q in worst:
        k = q.teaches
        query = {"chapter": k, **({"src": sentence[0][0]} if sentence else {})}
        top = f"; most common wrong answer: {q.wrong[0][0]}" if q.wrong else ""
        st.markdown(
            f"**{md(question_name(q.question))}**: {q.first_right:.0%} of {q.students} right at the first try"
            f"{md(top)}. [Open chapter {k}: {md(stage_name(k).split('. ', 1)[1])}](/?{urlencode(query)})"
        )


def _hard_url() -> None:
    if st.session_state[HARD_KEY]:
        st.query_params[HARD_QUERY] = "all"
    else:
        st.query_params.pop(HARD_QUERY, None)


def checks(data: ClassData) -> None:
    scores = [c for c in stats.check_scores(data) if c.pre is not None or c.post is not None]
    if not scores:
        return
    st.subheader("The first check against the final one", anchor=False)
    pre, post = [c.pre for c in scores], [c.post for c in scores]
    class_scores = viz.CheckScores([c.nickname for c in scores], pre, post, stats.CHECK_MAX)
    both = sum(a is not None and b is not None for a, b in zip(pre, post))
    if both:
        show(
            viz.transitions_figure(
                class_scores,
                title=f"Where the {students(both)} who took both checks went: on the "
                "dotted line the same score, right of it a better one",
            ),
            "class_transitions",
        )  # fmt: skip
    per_student = viz.checks_figure(class_scores, title="Each student's score: first check (grey) → final check (blue)")
    if len(scores) <= STUDENT_ROWS_SHOWN:
        show(per_student, "class_checks")
    else:  # a row per student: drawn when opened, so a large class's dashboard opens at once
        with st.expander("Each student's scores, one row each"):
            show(per_student, "class_checks")
    concepts = stats.concept_checks(data)
    show(
        viz.concepts_figure(
            [stage_name(CHAPTER_KEYS.index(c.concept) + 1) for c in concepts],
            [c.pre for c in concepts],
            [c.post for c in concepts],
            title="Per idea: share right at the first try, first check and final check",
        ),
        "class_concepts",
    )


def manage(store: Store, info: ClassInfo, secret: str) -> None:
    st.subheader("Downloads and the class", anchor=False)

    def snapshot() -> ClassData:
        return store.snapshot(info.id, secret)

    with st.container(horizontal=True):
        st.download_button(
            "Every answer (CSV)", lambda: stats.answers_csv(snapshot()), file_name=f"class-{info.id}-answers.csv",
            mime="text/csv", on_click="ignore", key="class_csv",
        )  # fmt: skip
        st.download_button(
            "Summary (JSON)", lambda: stats.summary_json(snapshot()), file_name=f"class-{info.id}-summary.json",
            mime="application/json", on_click="ignore", key="class_json",
        )  # fmt: skip
    with st.container(horizontal=True):
        if not info.closed:
            st.button(
                "Close the class to new answers", key="class_close", on_click=_act, args=(store, info, secret, "close")
            )
        else:
            st.button(
                "Reopen the class to new students and answers", key="class_reopen", on_click=_act,
                args=(store, info, secret, "reopen"),
            )  # fmt: skip
        sure = st.checkbox("I want to delete this class and all its answers", key="class_delete_sure")
        st.button(
            "Delete the class",
            key="class_delete",
            disabled=not sure,
            on_click=_act,
            args=(store, info, secret, "delete"),
        )


def _act(store: Store, info: ClassInfo, secret: str, what: str) -> None:
    s = st.session_state
    try:
        if what == "close":
            store.close_class(info.id, secret)
            s["class_done"] = f"The class “{info.name}” is closed: its answers stay here; it takes no new ones."
        elif what == "sentence":
            chosen = store.set_sentence(info.id, secret, s.get("class_sentence_set") or "")
            s["class_done"] = (
                f"The class's lessons now run on “{chosen}”."
                if chosen
                else "Each student's lesson runs on their own sentence again."
            )
        elif what == "reopen":
            store.reopen_class(info.id, secret)
            s["class_done"] = f"The class “{info.name}” is open again: its students can answer, new ones can join."
        else:
            store.delete_class(info.id, secret)
            st.query_params.clear()
            s["class_done"] = f"The class “{info.name}” and all its data are deleted."
    except ClassError as e:
        s["class_done"] = str(e)
