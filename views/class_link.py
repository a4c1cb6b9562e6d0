"""A class, on the student's side and the store's: the class database opened once per process, joining a class from
the student link (``/?class=ID``), and the Learn page's answers written to it as they are given.

Nothing here runs without a class link (or the Class page): the lesson then works exactly as without classes. An
answer goes into the session's queue first and is sent from there, with its idempotency key
(``student:question:n``, n numbering the student's attempts at that question: a repeat of an attempt is stored once,
the same attempt with another option, from another tab, is refused and said), so an answer the database could
not take is sent again, under the same key, on the student's next run; the student is told which happened.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import streamlit as st

from classroom.db import database_url
from classroom.errors import BadInput, ClassError, Closed, Conflict, DatabaseError, NicknameTaken, NotFound
from classroom.models import NICK_CHARS, SENTENCE_CHARS
from classroom.store import NO_ANSWER, NO_ANSWER_INDEX, Answer, Store, draw_nickname
from model.lesson.learn import Question

from .common import md

RETRY_S = 30  # a database that could not be opened is tried again after this long
DRAWS = 8  # nicknames drawn before giving up (each may be taken)
LINK_KEY = "class"  # the student link's query parameter
# once joined, the student's id joins the class in the URL: a new session (the page reloaded, or a replica that went
# away and the browser sent to another) goes on as the same student; the id is random (128 bits) and only there
STUDENT_KEY = "student"
S_LINK, S_MEMBER, S_QUEUE, S_TRIES, S_LAST, S_SAID, S_RESUME = (
    "class_link", "class_member", "class_queue", "class_tries", "class_last", "class_said", "class_resume",
)  # fmt: skip
S_SAVED, S_ACKED, S_RESUMED, S_DOWN = "class_saved", "class_acked", "class_resumed", "class_down"
S_BEFORE = "class_before"  # the answers checked on a class link before joining: sent on joining
S_SENTENCE, S_FINAL = "class_sentence", "class_final_taken"  # the class's sentence as last read; the final check taken


@dataclass(frozen=True)
class Failure:
    message: str
    at: float


@dataclass(frozen=True)
class Member:
    class_id: str
    class_name: str
    student_id: str
    nickname: str


def _fresh(value) -> bool:
    return not isinstance(value, Failure) or time.monotonic() - value.at < RETRY_S


@st.cache_resource(show_spinner=False, validate=_fresh)
def _open(url: str) -> Store | Failure:
    """The store, migrated (once per process); a failure is kept ``RETRY_S`` seconds, then tried again."""
    try:
        return Store.open(url)
    except ClassError as e:
        return Failure(str(e), time.monotonic())


def class_store() -> Store | None:
    """The process's class store, or None when the database cannot be used: said once per session, in one
    sentence, and the app runs on without a class."""
    got = _open(database_url())
    if isinstance(got, Failure):
        say_once("db", f"Classes are unavailable: {got.message} The lesson works as usual, without a class.")
        return None
    return got


def say_once(what: str, text: str) -> None:
    said = st.session_state.setdefault(S_SAID, set())
    if what not in said:
        said.add(what)
        st.warning(md(text), icon=":material/cloud_off:")


# ---------------------------------------------------------------------------
# Joining.


def read_link() -> None:
    """The class of the link, once per session (kept in the URL by the Learn page), and the student it names."""
    got, student = st.query_params.get(LINK_KEY), st.query_params.get(STUDENT_KEY)
    if got:
        st.session_state[S_LINK] = str(got)[:64]
        if student:
            st.session_state[S_RESUME] = str(student)[:64]


def link_query() -> dict[str, str]:
    link = st.session_state.get(S_LINK)
    if not link:
        return {}
    m, waiting = member(), st.session_state.get(S_RESUME)
    student = m.student_id if m else waiting  # a student the database could not be asked about yet stays named
    return {LINK_KEY: link, STUDENT_KEY: student} if student else {LINK_KEY: link}


def member() -> Member | None:
    s = st.session_state
    if s.get(S_MEMBER) is None and s.get(S_RESUME) and s.get(S_LINK):
        _resume(s[S_LINK], s[S_RESUME])
    m = s.get(S_MEMBER)
    return m if m is not None and m.class_id == s.get(S_LINK) else None


def _resume(cid: str, student_id: str) -> None:
    """The student the link names, as the store knows them, in this new session; the number and the last option
    of their stored answers to each question, so the next answer's key follows the stored ones (a key used before
    would be taken for a repeat and not stored). A database that cannot be reached is tried again on the next run;
    a student the class does not have (a deleted class, a mistyped link) gets the join form. The session is marked
    resumed: an option the browser still shows chosen and the database does not hold is said to be not saved."""
    s = st.session_state
    store = class_store()
    if store is None:
        return
    try:
        info, stu = store.class_info(cid), store.student(cid, student_id)
        s[S_MEMBER] = Member(cid, info.name, stu.id, stu.nickname)
        _sync(store, s[S_MEMBER])
    except DatabaseError:
        s.pop(S_MEMBER, None)
        return
    except ClassError:
        s.pop(S_MEMBER, None)
        s.pop(S_RESUME, None)
        return
    s[S_QUEUE], s[S_RESUMED] = [], True
    s.pop(S_RESUME, None)
    for q, chosen, sentence in s.pop(S_BEFORE, []):  # checked while the database could not be reached
        submit(q, chosen, sentence)


def resuming() -> bool:
    """Whether the link names a student this session could not look up yet (the database unreachable): the
    student's answers are kept in the page and sent once it is back. Read after ``member()`` has tried."""
    s = st.session_state
    return s.get(S_MEMBER) is None and bool(s.get(S_RESUME)) and bool(s.get(S_LINK))


def _sync(store: Store, m: Member) -> list[tuple[str, str, str]]:
    """What the database holds of this student, taken as the truth: each question's attempts and last option, the
    count of answers saved, and the keys stored (the page's acknowledged keys are compared with them)."""
    s = st.session_state
    given = store.answers_of(m.class_id, m.student_id)
    tries: dict[str, int] = {}
    last: dict[str, str] = {}
    for question, option, _ in given:
        tries[question], last[question] = tries.get(question, 0) + 1, option
    s[S_TRIES], s[S_LAST], s[S_SAVED] = tries, last, len(given)
    if any(q.startswith("post_") for q in tries):
        s[S_FINAL] = True
    return given


def final_taken() -> None:
    """The final check was just taken: the sentence box unlocks, on a run of the whole page (the box is outside
    the lesson's part, which reran alone); the answers queued are sent on that run."""
    s = st.session_state
    if s.get(S_LINK) and not s.get(S_FINAL):
        s[S_FINAL] = True
        if s.get(S_SENTENCE):
            st.rerun(scope="app")


def class_sentence() -> str | None:
    """The sentence the class's teacher chose, which the lesson runs on for a student on the class's link until
    they have taken the final check (then they may try their own); None without one. Read on every run (the
    teacher may change it); the last one read while the database cannot be reached."""
    s = st.session_state
    cid = s.get(S_LINK)
    if not cid or s.get(S_FINAL):
        return None
    store = class_store()
    if store is not None:
        try:
            s[S_SENTENCE] = store.class_info(cid).sentence
        except ClassError:
            pass
    return s.get(S_SENTENCE) or None


def join_panel() -> None:
    """Above the lesson, with a class link: the class's name and the join form, or who the student is in it."""
    cid = st.session_state.get(S_LINK)
    if not cid or member() is not None or resuming():  # a student the link names is no new student
        return
    store = class_store()
    if store is None:
        return
    try:
        info = store.class_info(cid)
    except ClassError as e:
        say_once(f"link:{cid}", f"{e} The lesson works as usual; your answers are not kept.")
        return
    if info.closed:
        say_once(f"link:{cid}", f"The class “{info.name}” is closed: the lesson works as usual; answers are not kept.")
        return
    with st.container(border=True, key="class_join_box"):
        st.markdown(
            f"**Join the class “{md(info.name)}”**: your teacher then sees your answers, the chapter you reached and "
            "your sentence, under your nickname. Answers you check before joining are sent when you join."
        )
        with st.form("class_join_form", border=False):
            st.text_input(
                "Your nickname (letters, digits, spaces, - _ .; not your name if you prefer)",
                key="class_nick",
                placeholder="e.g. swift otter",
                max_chars=NICK_CHARS,
            )
            with st.container(horizontal=True):
                st.form_submit_button("Join", key="class_join", type="primary", on_click=_join, args=(cid, False))
                st.form_submit_button("Draw a nickname and join", key="class_draw", on_click=_join, args=(cid, True))
        problem = st.session_state.pop("class_join_error", None)
        if problem:
            st.warning(md(problem))


def _join(cid: str, draw: bool) -> None:
    s = st.session_state
    store = class_store()
    if store is None:
        return
    try:
        if draw:
            st_ = _join_drawn(store, cid)
        else:
            st_ = store.join(cid, s.get("class_nick") or "")
        s[S_MEMBER] = Member(cid, store.class_info(cid).name, st_.id, st_.nickname)
        s[S_QUEUE], s[S_TRIES], s[S_LAST], s[S_SAVED] = [], {}, {}, 0
        for q, chosen, sentence in s.pop(S_BEFORE, []):  # in the order given: a blank check then its answer stays so
            submit(q, chosen, sentence)
    except ClassError as e:
        s["class_join_error"] = str(e)


def _join_drawn(store: Store, cid: str):
    for _ in range(DRAWS - 1):
        try:
            return store.join(cid, draw_nickname())
        except NicknameTaken:
            continue
    return store.join(cid, draw_nickname())


# ---------------------------------------------------------------------------
# Answers.


def submit(q: Question, chosen: str | None, sentence: str) -> None:
    """Queue the student's answer to ``q`` (nothing for the option last sent for it). A check with nothing chosen is
    a wrong answer (``NO_ANSWER``) when the question has none yet: the answer it reveals is then a second try."""
    m, s = member(), st.session_state
    if chosen is not None and chosen not in q.options:
        return
    if m is None:
        if s.get(S_LINK):  # not joined yet, or not looked up yet: carried, and sent on joining or once looked up
            s.setdefault(S_BEFORE, []).append((q, chosen, sentence))
        return
    s.pop(S_RESUMED, None)  # the student acts on this page now: what it sends next is what it says
    last, tries = s.setdefault(S_LAST, {}), s.setdefault(S_TRIES, {})
    if chosen is None and q.key in last:
        return
    option, index = (NO_ANSWER, NO_ANSWER_INDEX) if chosen is None else (chosen, q.options.index(chosen))
    if last.get(q.key) == option:
        return
    n = tries.get(q.key, 0) + 1
    tries[q.key], last[q.key] = n, option
    answer = Answer(
        f"{m.student_id}:{q.key}:{n}", m.class_id, m.student_id, q.key, option, index,
        chosen is not None and chosen == q.options[q.answer], sentence[:SENTENCE_CHARS],
    )  # fmt: skip
    s.setdefault(S_QUEUE, []).append(answer)


def unsaved(questions: tuple[Question, ...], chosen: list[str | None]) -> None:
    """In a session that came back after its connection was lost (a new server, the old one gone): an option the
    browser still shows chosen that the database does not hold as the question's answer is said to be not saved,
    in one line, until the student checks again."""
    m, s = member(), st.session_state
    if m is None or not s.get(S_RESUMED):
        return
    last = s.get(S_LAST, {})
    missing = [f"“{c}”" for q, c in zip(questions, chosen) if c is not None and last.get(q.key) != c]
    if missing:
        st.warning(
            md(
                f"Not saved: your answer {', '.join(missing)} is not in the class's database (the connection was "
                "lost before it was stored). Check it again to save it."
            ),
            icon=":material/sync_problem:",
        )


def reached(chapter: int, sentence: str) -> None:
    """Tell the class where the student is (when it changed); a failure is tried again on the next run."""
    m = member()
    s = st.session_state
    if m is None or s.get("class_reached") == (m.class_id, chapter, sentence):
        return
    store = class_store()
    if store is None:
        return
    try:
        store.reach(m.class_id, m.student_id, chapter, sentence[:SENTENCE_CHARS])
        s["class_reached"] = (m.class_id, chapter, sentence)
    except ClassError:
        pass  # the answers' line says what is wrong


def flush() -> None:
    """Send the queued answers, oldest first, and say in one line what happened (``class_ack``): ``Saved …`` once
    the database committed them, ``Not saved …`` when it could not, the answers kept for the next run, or when the
    attempt was answered with another option elsewhere (the page then takes the database's answers as its own).
    When the database comes back after an outage, the answers the page was told were saved are compared with the
    stored ones, and any that is missing is said."""
    m = member()
    if m is None:
        if resuming() and st.session_state.get(S_BEFORE):
            with st.container(key="class_ack"):
                st.warning(md(_unreachable(len(st.session_state[S_BEFORE]))), icon=":material/sync_problem:")
        return
    s = st.session_state
    queue: list[Answer] = s.setdefault(S_QUEUE, [])
    acked: set[str] = s.setdefault(S_ACKED, set())
    s.setdefault(S_LAST, {})
    s.setdefault(S_TRIES, {})
    sent, problem = 0, None
    store = class_store()
    lost = _reconcile(store, m, acked) if store is not None and s.get(S_DOWN) else None
    while queue and store is not None:
        try:
            store.answer(queue[0])
        except DatabaseError as e:
            s[S_DOWN] = True
            problem = f"Not saved: {e} {answers(len(queue))} kept here and sent again with your next step."
            break
        except Conflict as e:
            queue.pop(0)
            _sync(store, m)
            problem = f"Not saved: {e} Check again to save your answer as a new try."
            continue
        except (Closed, NotFound, BadInput) as e:
            problem = f"Not saved: {e}"
            queue.pop(0)
            if not isinstance(e, BadInput):
                queue.clear()
            continue
        done = queue.pop(0)
        acked.add(done.key)
        s[S_LAST][done.question] = done.option  # the stored answer (the database's own may have been read since)
        s[S_TRIES][done.question] = max(s[S_TRIES].get(done.question, 0), int(done.key.rsplit(":", 1)[1]))
        sent += 1
        s[S_SAVED] = s.get(S_SAVED, 0) + 1
    if queue and store is None:
        s[S_DOWN] = True
        problem = _unreachable(len(queue))
    _ack_line(m, problem or lost, sent, s.get(S_SAVED, 0))


def _unreachable(n: int) -> str:
    return f"Not saved: the class's database cannot be reached. {answers(n)} kept here and sent again."


def _reconcile(store: Store, m: Member, acked: set[str]) -> str | None:
    """After an outage: the keys this page acknowledged that the database does not hold, in one sentence."""
    try:
        stored = {k for *_, k in _sync(store, m)}
    except ClassError:
        return None  # still down: the queue's send says so
    st.session_state.pop(S_DOWN, None)
    gone = sorted(acked - stored)
    acked.difference_update(gone)
    if not gone:
        return None
    names = ", ".join(k.split(":")[1] for k in gone)
    verb = "is" if len(gone) == 1 else "are"
    return (
        f"Not saved: {answers(len(gone))} said to be saved {verb} not in the class's database ({names}): answer again."
    )


def _ack_line(m: Member, problem: str | None, sent: int, total: int) -> None:
    with st.container(key="class_ack"):
        if problem:
            st.warning(md(problem), icon=":material/sync_problem:")
        elif sent:
            st.caption(md(f"Saved to the class “{m.class_name}”: {answers(sent)} just now, {total} in all."))
        else:
            st.caption(md(f"In the class “{m.class_name}” as {m.nickname}: {answers(total)} saved."))


def answers(n: int) -> str:
    return f"{n} answer{'' if n == 1 else 's'}"
