"""A class, on the student's side and the store's: the class database opened once per process, joining a class from
the student link (``/?class=ID``), and the Learn page's answers written to it as they are given.

Nothing here runs without a class link (or the Class page): the lesson then works exactly as without classes. An
answer goes into the session's queue first and is sent from there, with its idempotency key
(``student:question:n``, n counting the student's submissions of that question), so an answer the database could
not take is sent again, under the same key, on the student's next run; the student is told which happened.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import streamlit as st

from classroom.db import database_url
from classroom.errors import BadInput, ClassError, Closed, DatabaseError, NicknameTaken, NotFound
from classroom.models import SENTENCE_CHARS
from classroom.store import Answer, Store, draw_nickname
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
    m = member()
    return {LINK_KEY: link, STUDENT_KEY: m.student_id} if m else {LINK_KEY: link}


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
    a student the class does not have (a deleted class, a mistyped link) gets the join form."""
    s = st.session_state
    store = class_store()
    if store is None:
        return
    try:
        info, stu, given = store.class_info(cid), store.student(cid, student_id), store.answers_of(cid, student_id)
    except DatabaseError:
        return
    except ClassError:
        s.pop(S_RESUME, None)
        return
    tries, last = {}, {}
    for question, option in given:
        tries[question], last[question] = tries.get(question, 0) + 1, option
    s[S_MEMBER], s[S_QUEUE], s[S_TRIES], s[S_LAST] = Member(cid, info.name, stu.id, stu.nickname), [], tries, last
    s["class_saved"] = len(given)  # the answers' line counts them all, these too
    s.pop(S_RESUME, None)


def join_panel() -> None:
    """Above the lesson, with a class link: the class's name and the join form, or who the student is in it."""
    cid = st.session_state.get(S_LINK)
    if not cid:
        return
    m = member()
    if m is not None:
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
            "your sentence, under your nickname."
        )
        with st.form("class_join_form", border=False):
            st.text_input(
                "Your nickname (letters, digits, spaces, - _ .; not your name if you prefer)",
                key="class_nick",
                placeholder="e.g. swift otter",
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
        s[S_QUEUE], s[S_TRIES], s[S_LAST] = [], {}, {}
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
    """Queue the student's answer to ``q`` (nothing for no answer, or for the option last sent for it)."""
    m = member()
    if m is None or chosen is None or chosen not in q.options:
        return
    s = st.session_state
    last, tries = s.setdefault(S_LAST, {}), s.setdefault(S_TRIES, {})
    if last.get(q.key) == chosen:
        return
    n = tries.get(q.key, 0) + 1
    tries[q.key], last[q.key] = n, chosen
    answer = Answer(
        f"{m.student_id}:{q.key}:{n}", m.class_id, m.student_id, q.key, chosen, q.options.index(chosen),
        chosen == q.options[q.answer], sentence[:SENTENCE_CHARS],
    )  # fmt: skip
    s.setdefault(S_QUEUE, []).append(answer)


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
    the database committed them, ``Not saved …`` when it could not, the answers kept for the next run."""
    m = member()
    if m is None:
        return
    s = st.session_state
    queue: list[Answer] = s.setdefault(S_QUEUE, [])
    sent, problem = 0, None
    store = class_store()
    while queue and store is not None:
        try:
            store.answer(queue[0])
        except DatabaseError as e:
            problem = f"Not saved: {e} {answers(len(queue))} kept here and sent again with your next step."
            break
        except (Closed, NotFound, BadInput) as e:
            problem = f"Not saved: {e}"
            queue.pop(0)
            if not isinstance(e, BadInput):
                queue.clear()
            continue
        queue.pop(0)
        sent += 1
        s["class_saved"] = s.get("class_saved", 0) + 1
    if queue and store is None:
        problem = f"Not saved: the class's database cannot be reached. {answers(len(queue))} kept here and sent again."
    total = s.get("class_saved", 0)
    with st.container(key="class_ack"):
        if problem:
            st.warning(md(problem), icon=":material/sync_problem:")
        elif sent:
            st.caption(md(f"Saved to the class “{m.class_name}”: {answers(sent)} just now, {total} in all."))
        else:
            st.caption(md(f"In the class “{m.class_name}” as {m.nickname}: {answers(total)} saved."))


def answers(n: int) -> str:
    return f"{n} answer{'' if n == 1 else 's'}"
