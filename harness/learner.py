"""A student of a class without a browser: the Learn page driven over Streamlit's protocol (``harness/protocol.py``)
from the class's student link, for ``benchmarks/class_answers.py``.

The student joins with a nickname, answers the opening check (five questions, one form), then for each chapter
picks an option and presses *Check* (a wrong first pick is sometimes tried again with the answer the feedback
gives), goes on with *Next*, and answers the closing check. Each answer sent is recorded (``Sent``) with what the
page said about it: ``saved`` (the acknowledgment the app shows only after its transaction committed), ``refused``
(the app said it was not saved) or ``unknown`` (no answer came back: the server died under it). A student whose
server dies reconnects as a browser does, through the same address with the same cookie (nginx sends it to a
survivor), reopens the page from its URL and carries on.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlencode

from streamlit.proto.WidgetStates_pb2 import WidgetState

from harness.protocol import Connection, Run, key_of, route_cookie
from model.lesson.learn import CHECK_CONCEPTS

# What the class's pages are called and what they show (views/classroom.py).
STUDENT_PATH = ""  # the student link opens Learn, the site's root: /?class=ID
TEACHER_PATH = "class"  # the teacher link: /class?c=ID&t=SECRET
NICK_KEY, JOIN_KEY = "class_nick", "class_join"
# the answers' line under the question: "Saved to the class …" (this run's answers committed), "In the class … as
# …: N answers saved" (nothing new to send: an answer given again is the one already stored) or "Not saved: …"
SAVED, NOTHING_NEW, NOT_SAVED = "Saved", "In the class", "Not saved"
LINES = (SAVED, NOTHING_NEW, NOT_SAVED)
CHECK_LABEL = "Check my answers"
FINAL_CHECK = "The final check"  # the chapter list's last entry
RETRY_SHARE = 0.3  # of the wrong first picks, tried again with the right option
# a student who answers the opening check before joining (the page carries the answers and sends them on joining);
# a student with the lesson open in two tabs, who answers one chapter's question differently in each
PRE_JOIN, TWO_TABS = "pre-join", "two tabs"
TIMEOUT_S = 60.0
T = TypeVar("T")  # what an attempt returns
RECONNECT_S = 120.0  # how long a client waits for a restarted server (it loads its model first) before giving up
BACKOFF_S = (0.25, 4.0)  # the first wait between reconnection attempts, doubled each time up to the second


def with_backoff(attempt: Callable[[], T], deadline_s: float = RECONNECT_S, stop: threading.Event | None = None) -> T:
    """``attempt()`` until it returns, as a browser reconnects to a server that is starting again: the waits between
    attempts double from ``BACKOFF_S[0]`` up to ``BACKOFF_S[1]``; after ``deadline_s`` (or once ``stop`` is set)
    the last error is raised."""
    deadline, wait = time.monotonic() + deadline_s, BACKOFF_S[0]
    while True:
        try:
            return attempt()
        except Exception:
            if time.monotonic() + wait > deadline or (stop is not None and stop.is_set()):
                raise
            if stop is not None:
                stop.wait(wait)
            else:
                time.sleep(wait)
            wait = min(2 * wait, BACKOFF_S[1])


@dataclass
class Sent:
    """One answer given: the question, the option, and what the student was told about it."""

    student: str  # nickname
    question: str
    option: str
    status: str  # saved | refused | unknown
    seconds: float  # the server's time for the run that carried it (NaN when none came back)
    sends: int = 1  # messages that carried it: 2 for the duplicate fault, more when it was given again
    fault: str = ""  # the fault active when it was sent: "", "replica" or "database"
    said: str = ""  # the answers' line as the page showed it
    at: float = 0.0  # when it was given (time.monotonic())


@dataclass
class Tally:
    """What every student shares: their answers, their runs, their problems; the fault now active."""

    sent: list[Sent] = field(default_factory=list)
    runs: list[tuple[str, float]] = field(default_factory=list)  # (kind, server seconds)
    problems: list[str] = field(default_factory=list)
    reconnects: int = 0
    reconnect_causes: list[str] = field(default_factory=list)  # why each reconnecting run failed
    two_tabs: list[str] = field(default_factory=list)  # what the second tab's conflicting answer was told
    fault: str = ""
    faults_at: dict[str, float] = field(default_factory=dict)  # when each fault began (time.monotonic())
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, what: str, item: object) -> None:
        with self.lock:
            getattr(self, what).append(item)


def told(run: Run) -> str | None:
    """What a run said about the answers it carried: ``refused`` if any was not saved, else ``saved`` if the
    acknowledgment is there, else None."""
    texts = [getattr(el, "body", "") for _, el, _ in run.elements.values()]
    if any(t.startswith(NOT_SAVED) for t in texts):
        return "refused"
    if any(t.startswith((SAVED, NOTHING_NEW)) for t in texts):
        return "saved"
    return None


def pending(run: Run) -> bool:
    """Whether the page says some answer is still waiting to be saved."""
    return any(getattr(el, "body", "").startswith(NOT_SAVED) for _, el, _ in run.elements.values())


class LearnStudent:
    """One simulated student of a class: its nickname, its own websocket, its answers recorded in ``tally``."""

    def __init__(
        self,
        index: int,
        base_url: str,
        class_id: str,
        tally: Tally,
        rng: random.Random,
        think: float,
        resend: bool = False,
        case: str = "",
    ):
        self.index, self.base_url, self.class_id, self.tally = index, base_url, class_id, tally
        self.rng, self.think, self.resend = rng, think, resend
        self.case = case  # "": the usual lesson; PRE_JOIN or TWO_TABS (CASES)
        self.nickname = f"student {index:03d}"
        self.cookie = ""
        self.given: dict[str, Sent] = {}  # the last answer given to each question
        self.conn: Connection | None = None
        self.last: Run | None = None

    # -- the connection -----------------------------------------------------

    @property
    def connection(self) -> Connection:
        if self.conn is None:
            raise RuntimeError(f"{self.nickname} has not connected")
        return self.conn

    @property
    def page(self) -> Run:
        """The last run: the page as the student sees it now."""
        if self.last is None:
            raise RuntimeError(f"{self.nickname} has no page yet")
        return self.last

    def connect(self, query: str) -> Run:
        if not self.cookie:
            self.cookie = route_cookie(self.base_url, query, STUDENT_PATH, timeout=TIMEOUT_S)
        self.conn = Connection(self.base_url, query, self.cookie, timeout=TIMEOUT_S, path=STUDENT_PATH)
        return self.run("open", [])

    def run(self, kind: str, states: list[WidgetState], fragment: str = "") -> Run:
        run = self.connection.run(states, fragment)
        self.tally.add("runs", (kind, run.seconds))
        who = f"{self.nickname} ({kind})"
        for e in run.exceptions:
            self.tally.add("problems", f"{who}: exception {e}")
        for e in run.error_boxes:
            self.tally.add("problems", f"{who}: error box {e}")
        self.last = run
        return run

    def reconnect(self) -> Run:
        """The server went away: a new websocket through the same address and cookie, the page from its URL."""
        query = self.connection.query
        self.connection.close()
        run = with_backoff(lambda: self.connect(query))
        with self.tally.lock:
            self.tally.reconnects += 1
        if self.widget(NICK_KEY):  # the new server does not know this student: join again
            run = self.run("join", *self.join_states())
        return run

    def widget(self, key: str) -> tuple[str, str] | None:
        """A widget of the last run (the page as the student sees it now, not the chapters before)."""
        return self.page.widgets.get(key)

    def widget_with(self, prefix: str) -> list[tuple[str, tuple[str, str]]]:
        """The last run's widgets whose key starts with ``prefix`` (the lesson's keys end with the sentence's
        digest)."""
        return sorted((k, v) for k, v in self.page.widgets.items() if k.startswith(prefix))

    def element(self, widget_id: str) -> Any:  # the page's protobuf element, None when not shown
        return next((el for _, el, _ in self.page.elements.values() if getattr(el, "id", "") == widget_id), None)

    def pause(self) -> None:
        time.sleep(self.think * self.rng.uniform(0.5, 1.5))

    # -- the lesson ---------------------------------------------------------

    def needed(self, key: str) -> tuple[str, str]:
        """A widget the page must show now (its id and fragment)."""
        found = self.widget(key)
        if found is None:
            raise RuntimeError(f"{self.nickname}: no widget {key!r} on the page")
        return found

    def join_states(self) -> tuple[list[WidgetState], str]:
        wid, frag = self.needed(NICK_KEY)
        jid, _ = self.needed(JOIN_KEY)
        return [WidgetState(id=wid, string_value=self.nickname), WidgetState(id=jid, trigger_value=True)], frag

    def lesson(self, chapters: int) -> None:
        """Join, the opening check, ``chapters`` chapters, the closing check; then one more look at the page."""
        self.connect(urlencode({"class": self.class_id}))
        self.pause()
        if self.case == PRE_JOIN:
            if not self.quiz_then_join():
                return
        else:
            if self.safely("join", *self.join_states()) is not None and self.widget(NICK_KEY):
                self.tally.add("problems", f"{self.nickname}: could not join the class")
                return
            self.pause()
            self.quiz("learn_pre_")
        for k in range(chapters + 1):
            self.next()
            self.pause()
            if self.widget_with("learn_q_"):
                if k == 0 and self.case == TWO_TABS:
                    self.two_tabs()
                else:
                    self.chapter()
                self.pause()
        if not self.widget_with("learn_post_"):  # fewer chapters than the lesson's: on to the final check
            self.goto(FINAL_CHECK)
        self.quiz("learn_post_")

    def _picks(self, prefix: str) -> dict[str, str]:
        return {key: self.rng.choice(list(self.element(wid).options)) for key, (wid, _) in self.widget_with(prefix)}

    def _quiz_states(self, prefix: str, picks: dict[str, str]) -> tuple[list[WidgetState], str]:
        submit = next(
            (el.id for _, el, _ in self.page.elements.values() if getattr(el, "label", "") == CHECK_LABEL), ""
        )
        states = [WidgetState(id=wid, string_value=picks[key]) for key, (wid, _) in self.widget_with(prefix)]
        return [*states, WidgetState(id=submit, trigger_value=True)], self.widget_with(prefix)[0][1][1]

    def quiz_then_join(self) -> bool:
        """The opening check answered on the class link before joining, then the join: what the join's reply says
        is what the student was told of those answers (the page sends them on joining)."""
        picks = self._picks("learn_pre_")
        if not picks:
            self.tally.add("problems", f"{self.nickname}: no opening check before joining")
            return False
        t0, given = time.perf_counter(), time.monotonic()
        join = self.join_states()  # the join form is outside the lesson's part, which the check reruns alone
        self.safely("pre-join check", *self._quiz_states("learn_pre_", picks))
        self.pause()
        run = self.safely("join", *join)
        if run is None or self.widget(NICK_KEY):
            self.tally.add("problems", f"{self.nickname}: could not join the class")
            return False
        status = told(run) or "unknown"
        line = next((t for t in _texts(run).splitlines() if t.startswith(LINES)), "")
        for key, option in picks.items():
            q = question_of(key)
            self.given[q] = Sent(self.nickname, q, option, status, time.perf_counter() - t0, 1, self.tally.fault,
                                 line[:200], given)  # fmt: skip
            self.tally.add("sent", self.given[q])
        return True

    def two_tabs(self) -> None:
        """The chapter's question answered in a second tab (the same student link, opened from this page's URL)
        with one option, then here with another: this tab must be told its answer was not saved, never "Saved";
        checked again, it is saved as a new try. Each tab's answers recorded as the page told them."""
        other = LearnStudent(self.index, self.base_url, self.class_id, self.tally, self.rng, self.think)
        other.cookie = self.cookie
        try:
            with_backoff(lambda: other.connect(self.connection.query))
            if not other.widget_with("learn_q_"):
                self.tally.add("problems", f"{self.nickname}: the second tab shows no chapter question")
                return
            key, (wid, _) = other.widget_with("learn_q_")[0]
            options = list(other.element(wid).options)
            first, second = self.rng.sample(options, 2)

            def build(tab: LearnStudent, pick: str):
                (_, (qid, frag)), (_, (cid, _)) = tab.widget_with("learn_q_")[0], tab.widget_with("learn_check_")[0]
                return [WidgetState(id=qid, string_value=pick), WidgetState(id=cid, trigger_value=True)], frag

            q = question_of(key)
            other.answer([q], [first], lambda: build(other, first))
            run = self.answer([q], [second], lambda: build(self, second))
            if run is not None and told(run) != "refused":
                self.tally.add("problems", f"{self.nickname}: a second tab's other answer to one attempt not refused")
            with self.tally.lock:
                self.tally.two_tabs.append((told(run) if run is not None else None) or "unknown")
            self.pause()
            self.answer([q], [second], lambda: build(self, second))  # checked again: a new try, saved
        finally:
            other.close()

    def safely(self, kind: str, states: list[WidgetState], fragment: str) -> Run | None:
        """A run whose server may die under it: None when no answer came back (the student then reconnects)."""
        try:
            return self.run(kind, states, fragment)
        except Exception as e:
            cause = f"{self.tally.fault or 'no fault'}, {kind}: {type(e).__name__}: {e}"
            self.tally.add("reconnect_causes", cause[:200])
            self.reconnect()
            return None

    def answer(
        self, questions: list[str], options: list[str], build: Callable[[], tuple[list[WidgetState], str]]
    ) -> Run | None:
        """Send an answer (``build()``: its widget states and fragment, from the page as it is now) and record what
        the page said. When no reply comes (its server died), the student reconnects and gives the same answer
        again on the page that comes back; a resending student sends the same message twice."""
        fault = self.tally.fault
        t0, t_given = time.perf_counter(), time.monotonic()
        runs, sends = [], 0
        for _ in range(2):
            states, frag = build()
            run = self.safely("answer", states, frag)
            sends += 1
            if run is not None:
                runs.append(run)
                break
        if runs and self.resend:  # the same message again, as a browser resends one whose reply was lost
            self.resend = False
            run = self.safely("answer", *build())
            sends += 1
            runs += [run] if run is not None else []
        said = [told(r) for r in runs]
        if runs and not any(said):  # a reply that says nothing of the answer: the student was not told
            shown = " | ".join(t for t in _texts(runs[-1]).splitlines() if t.strip())[:300]
            self.tally.add("problems", f"{self.nickname}: {questions[0]}: the reply says nothing of it: {shown}")
        status = "refused" if "refused" in said else "saved" if "saved" in said else "unknown"
        seconds = runs[0].seconds if runs else time.perf_counter() - t0
        line = next((t for t in _texts(runs[-1]).splitlines() if t.startswith(LINES)), "") if runs else ""
        for q, o in zip(questions, options):
            before = self.given.get(q)
            if before is not None and before.option == o:  # the option it last gave there: the same answer again
                before.sends += sends
                if status == "saved" or before.status == "unknown":
                    before.status, before.said = status, line[:200]
                continue
            self.given[q] = Sent(self.nickname, q, o, status, seconds, sends, fault, line[:200], t_given)
            self.tally.add("sent", self.given[q])
        return runs[-1] if runs else None

    def quiz(self, prefix: str) -> None:
        """A check: one option picked for each of its questions, sent with its submit button."""
        picks = self._picks(prefix)
        if not picks:
            self.tally.add("problems", f"{self.nickname}: no {prefix.strip('_')} check on the page")
            return
        self.answer([question_of(k) for k in picks], list(picks.values()), lambda: self._quiz_states(prefix, picks))

    def chapter(self) -> None:
        """The chapter's question: an option picked and checked; a wrong pick sometimes tried again."""
        key, (wid, _) = self.widget_with("learn_q_")[0]
        options = list(self.element(wid).options)
        option = self.rng.choice(options)

        def build(pick: str):
            (_, (qid, frag)), (_, (cid, _)) = self.widget_with("learn_q_")[0], self.widget_with("learn_check_")[0]
            return [WidgetState(id=qid, string_value=pick), WidgetState(id=cid, trigger_value=True)], frag

        q = question_of(key)
        run = self.answer([q], [option], lambda: build(option))
        if run is None or self.rng.random() > RETRY_SHARE:
            return
        right = next((o for o in options if o != option and f"the answer is {o}" in _texts(run)), None)
        if right is not None:  # a wrong first pick, tried again with the answer the feedback gave
            self.pause()
            self.answer([q], [right], lambda: build(right))

    def next(self) -> None:
        nxt = self.widget("learn_next")
        if nxt is not None:
            self.safely("next", [WidgetState(id=nxt[0], trigger_value=True)], nxt[1])

    def goto(self, label: str) -> None:
        """The chapter list's choice ("Or go to")."""
        got = self.widget("learn_goto")
        if got is not None:
            self.safely("goto", [WidgetState(id=got[0], string_value=label)], got[1])

    def look(self) -> bool:
        """One more run of the page as it is (a student who looks again): whether it still says an answer waits."""
        run = self.safely("look", [], "")
        return run is not None and pending(run)

    def close(self) -> None:
        if self.conn:
            self.conn.close()


def _texts(run: Run) -> str:
    return "\n".join(getattr(el, "body", "") for _, el, _ in run.elements.values())


def question_of(widget_key: str) -> str:
    """The store's name of the question a lesson widget asks: ``learn_pre_3_<digest>`` → ``pre_softmax`` (the checks
    ask their concepts in order), ``learn_q_output_proj_<digest>`` → ``output_proj``."""
    name = key_of(widget_key).removeprefix("learn_").rsplit("_", 1)[0]
    part, _, rest = name.partition("_")
    if part in ("pre", "post"):
        return f"{part}_{CHECK_CONCEPTS[int(rest) - 1]}" if rest.isdigit() else name
    return rest if part == "q" else name
