"""Nothing a class answers is lost: simulated students answer the lesson of one class at once, then the database
itself is counted against what the students were told.

    python benchmarks/class_answers.py [--students 100] [--database URL] [--configs sqlite,postgres] [--think 2]
                                       [--chapters 14] [--first-paint 300] [--model DIR] [--json OUT] [--smoke]
                                       [--no-faults]

Each student (``harness/learner.py``) is one websocket speaking the browser's protocol to the Learn page, opened
from the class's student link: it joins with a nickname, answers the opening check, goes through the chapters
(answering each chapter's question, a wrong first pick sometimes tried again), and answers the closing check, with a
think time of ``--think`` × 0.5–1.5 s between actions. The students join over the first seconds and work at once.
Every answer is recorded with what the page told the student: saved (the acknowledgment, shown only once its
transaction committed), not saved, or nothing (its server died under it). A teacher's dashboard is open
meanwhile and refreshed as its page does (its fragment rerun every few seconds), each refresh timed.

Configurations (``--configs``): ``sqlite``, one ``streamlit run app.py`` on a SQLite file; ``postgres``, nginx in
front of 2 replicas (as ``deploy/serve.py`` runs them) on one PostgreSQL, a throwaway server started in a temporary
folder (``harness/pgserver.py``). ``--database URL`` uses that database instead (sqlite:// for the first,
postgresql:// for the second; then the database restart is not tried: it is not ours to restart). Faults:

- the same answer sent twice: every fifth student sends one answer's message again, as a browser resends one whose
  reply was lost (both configurations);
- one replica killed (SIGKILL) while its students answer, when a third of the answers are in (postgres): its
  students reconnect through nginx to the survivor, reopen their page from its URL and go on; an answer whose reply
  never came is either stored or shown as not saved when the page comes back;
- the one server killed (SIGKILL) at the same moment (sqlite) and started again a second later on the same port and
  database file, as a supervisor restarts it: every student reconnects to it, and the same rule holds;
- the database restarted mid-class, when two thirds are in (postgres): stopped at once (as a crash), down for
  ``--down`` seconds, started again; the pages must go on working, and an answer given meanwhile is either stored
  once the database is back (the app sends it again) or the student is told it was not.

``--no-faults`` leaves the servers and the database alone (answers are still sent twice): the load's own times, for
the answer and refresh targets, apart from the faults'.

After the class every student looks at its page once more (a student who reloads), then the answers are counted
in the database (the ``answers`` table, by student and question): **sent** (answers given), **acknowledged**
(shown as saved), **stored**, **lost** (not stored, though acknowledged or left without a word), **duplicated**
(stored more than once, or stored and never sent), **told not saved** (and how many of those the app stored later,
and how many pages still said an answer waits when the class ended).
Server time per answer (p50, p95: the run that carried it), the dashboard's refresh at that load, and the
dashboard's first paint for a class of ``--first-paint`` students with every answer given: a class made from this
run's own answers (each of the 300 students copies one of the simulated students'), opened in Chromium, from the
request to every figure drawn. Targets: 0 lost, 0 duplicated, answer p95 ≤ 1.0 s, refresh p95 ≤ 1.0 s, first paint
≤ 2 s. Prints tables and verdict lines; exit status 0 either way; ``--json OUT`` writes every figure and every
answer sent as strict JSON, which ``--recount OUT --database URL`` counts again against the database as it is now.

``--smoke``: the tests' tiny random model, 4 students over 3 chapters, a 30-student first paint.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from urllib.parse import urlencode

# Run as a script, this folder comes first on the import path, and its classroom.py (the browsers' benchmark) would
# hide the classroom package: the folder is left out (every import here is a package's).
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from sqlalchemy import select

from benchmarks.replicas import read_log, served_by
from classroom.models import AnswerRow, StudentRow
from classroom.store import Answer, Store
from deploy.serve import Nginx, find_nginx, start_replicas
from harness.browser import (
    BROWSER_ARGS,
    CHROMIUM,
    DEFAULT_MODEL,
    benchmark_model,
    free_port,
    median,
    p95,
    require_chromium,
    row,
)
from harness.learner import (
    PRE_JOIN,
    RECONNECT_S,
    TEACHER_PATH,
    TWO_TABS,
    LearnStudent,
    Sent,
    Tally,
    with_backoff,
)
from harness.pgserver import TempPostgres
from harness.protocol import Connection, route_cookie
from model.core import jsonio
from model.lesson.learn import CHAPTER_KEYS

ROOT = Path(__file__).resolve().parents[1]
FULL = dict(students=100, think=2.0, chapters=len(CHAPTER_KEYS), first_paint=300, down=8.0)
SMOKE = dict(students=4, think=0.3, chapters=3, first_paint=30, down=2.0)
CONFIGS = ("sqlite", "postgres")
REPLICAS = 2
JOIN_S = 0.25  # between two students joining
RESEND_EVERY = 5  # every fifth student sends one answer twice
CASES = {1: PRE_JOIN, 2: TWO_TABS}  # students who answer before joining, and who answer in two tabs
REFRESH_S = 5.0  # the dashboard's refresh period (its fragment's run_every)
KILL_AT, RESTART_AT = 1 / 3, 2 / 3  # share of the expected answers in when each fault starts
ANSWERS_PER_STUDENT_MIN = 10  # 5 + 5 checks' answers, at least
TARGET_ANSWER_S = 1.0
TARGET_REFRESH_S = 1.0
TARGET_PAINT_S = 2.0
PAINTS = 5  # first paints measured, each in a fresh browser context; the verdict takes their median
SHOWN = 10


# ---------------------------------------------------------------------------
# The count: what the students were told against what the database holds.


def stored_rows(url: str, class_id: str) -> list[tuple[str, str, str]]:
    """(nickname, question, option) of every answer the class holds, read from the database itself."""
    store = Store.open(url, run_migrations=False)
    try:
        with store.engine.connect() as c:
            q = (
                select(StudentRow.nickname, AnswerRow.question, AnswerRow.option)
                .join(StudentRow, AnswerRow.student_id == StudentRow.id)
                .where(AnswerRow.class_id == class_id)
            )
            return [tuple(r) for r in c.execute(q)]
    finally:
        store.close_connections()


ORDER = {"saved": 0, "unknown": 1, "refused": 2}  # which answers of one (student, question, option) a row covers first


def count(sent: list[Sent], rows: list[tuple[str, str, str]]) -> dict:
    """``sent``: every answer given; ``rows``: what the database holds, both as (student, question, option). A
    student may give one option to one question more than once (a page that came back a chapter early asks it
    again), so answers and rows are matched per (student, question, option): the rows there cover its answers, the
    acknowledged ones first. Lost: an answer no row covers though the student was told it was saved, or told nothing
    (its server died under it). Duplicated: rows beyond the answers given there (stored twice, or never sent)."""
    held = Counter(rows)
    by_key: dict[tuple[str, str, str], list[Sent]] = {}
    for s in sent:
        by_key.setdefault((s.student, s.question, s.option), []).append(s)
    stored, lost, refused_stored = [], [], 0
    for key, answers in by_key.items():
        answers = sorted(answers, key=lambda s: ORDER[s.status])
        covered, rest = answers[: held[key]], answers[held[key] :]
        stored += covered
        refused_stored += sum(s.status == "refused" for s in covered)
        lost += [s for s in rest if s.status != "refused"]
    extra = [(k, n - len(by_key.get(k, ()))) for k, n in held.items() if n > len(by_key.get(k, ()))]
    return {
        "sent": len(sent),
        "sends": sum(s.sends for s in sent),
        "acknowledged": sum(s.status == "saved" for s in sent),
        "told_not_saved": sum(s.status == "refused" for s in sent),
        "no_reply": sum(s.status == "unknown" for s in sent),
        "stored": len(stored),
        "rows": len(rows),
        "lost": len(lost),
        "duplicated": sum(n for _, n in extra),
        "stored_never_sent": sum(n for k, n in extra if k not in by_key),
        "refused_then_stored": refused_stored,
        "lost_answers": [asdict(s) for s in lost[:SHOWN]],
        "duplicated_answers": [[*k, n] for k, n in extra[:SHOWN]],
    }


# ---------------------------------------------------------------------------
# The configurations' servers.


class Servers:
    """The app (one server, or replicas behind nginx) on ``url``, the database on ``db_url``; each server as
    ``deploy/serve.py`` runs it, so that it can be killed and started again."""

    def __init__(self, name: str, model: Path, db_url: str, run_dir: Path):
        self.name, self.nginx = name, None
        env = {"DATABASE_URL": db_url, "DECODER_LENS_MODEL": str(model)}
        if name == "sqlite":
            self.replicas = start_replicas([free_port()], run_dir, model, env)
            self.url, self.logs = self.replicas[0].url, [self.replicas[0].log]
            return
        ports = []
        while len(ports) < REPLICAS:
            if (p := free_port()) not in ports:
                ports.append(p)
        self.replicas = start_replicas(ports, run_dir, model, env)
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.nginx = Nginx(run_dir, f"127.0.0.1:{port}", ports)
        self.logs = [r.log for r in self.replicas]
        try:
            self.nginx.start(self.url)
        except BaseException:
            self.stop()
            raise

    def tracebacks(self) -> tuple[int, str]:
        """How many tracebacks the servers' logs hold, and the first one's first lines."""
        texts = [p.read_text(errors="replace") for p in self.logs if p.exists()]
        first = next((t[t.index("Traceback") :] for t in texts if "Traceback" in t), "")
        return sum(t.count("Traceback") for t in texts), "\n".join(first.splitlines()[:40])

    def stop(self) -> None:
        if self.nginx:
            self.nginx.stop()
        for r in self.replicas:
            r.stop()


# ---------------------------------------------------------------------------
# The teacher's dashboard.


class Dashboard:
    """The teacher's page over the protocol, its refresh (the fragment's rerun) timed every ``REFRESH_S``."""

    def __init__(self, url: str, class_id: str, secret: str, tally: Tally):
        self.url, self.query, self.tally = url, urlencode({"c": class_id, "t": secret}), tally
        self.outage: list[str] = []  # what it said while the database was down (as it should: not a problem)
        self.cookie = route_cookie(url, self.query, TEACHER_PATH)
        self.problems: list[str] = []
        self.refreshes: list[float] = []
        self.reconnects = 0
        self.first_s = self.open()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def open(self) -> float:
        """A new session on the page (a first visit, or a reconnect after its server died): its first run."""
        self.conn = Connection(self.url, self.query, self.cookie, path=TEACHER_PATH)
        first = self.conn.run()
        frags = Counter(f for _, _, f in first.elements.values() if f)
        self.fragment = frags.most_common(1)[0][0] if frags else ""
        self.said(first)
        return first.seconds

    def said(self, run) -> None:
        bad = [f"dashboard: {e}" for e in run.exceptions + run.error_boxes]
        (self.outage if self.tally.fault == "database" and not run.exceptions else self.problems).extend(bad)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                run = self.conn.run(fragment=self.fragment)
                self.refreshes.append(run.seconds)
                self.said(run)
            except Exception:  # its server died: the page reconnects, as a browser does, waiting for it to be back
                self.conn.close()
                try:
                    with_backoff(self.open, stop=self._stop)
                    self.reconnects += 1
                except Exception as e:
                    if not self._stop.is_set():
                        self.problems.append(f"dashboard: no reconnect in {RECONNECT_S:.0f} s: {type(e).__name__}")
            self._stop.wait(REFRESH_S)

    def start(self) -> None:
        if self.fragment:
            self._thread.start()
        else:
            self.problems.append("dashboard: no refreshing part found on the page")

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=60)
        self.conn.close()


def first_paint(url: str, class_id: str, secret: str, tries: int = PAINTS) -> list[float]:
    """Seconds from asking for the dashboard to every figure on it drawn, in Chromium: ``tries`` times, each in a
    fresh browser context (nothing cached: a teacher's first visit)."""
    from playwright.sync_api import sync_playwright

    out = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        try:
            for _ in range(tries):
                page = browser.new_page(viewport={"width": 1366, "height": 768})
                t0 = time.perf_counter()
                page.goto(f"{url}/{TEACHER_PATH}?{urlencode({'c': class_id, 't': secret})}")
                page.wait_for_function(
                    """() => {
                        if (document.querySelector('[data-testid="stStatusWidget"]')) return false;
                        const plots = [...document.querySelectorAll('.js-plotly-plot')];
                        return plots.length > 0 && plots.every(p => p._fullLayout && p.querySelector('.main-svg'));
                    }""",
                    timeout=120_000,
                    polling="raf",
                )
                out.append(time.perf_counter() - t0)
                page.context.close()
        finally:
            browser.close()
    return out


def big_class(store: Store, source_id: str, secret: str, students: int) -> tuple[str, str]:
    """A class of ``students`` made from the class ``source_id``'s answers: student i gives every answer that the
    source's student i mod n gave (the benchmark's own data, loaded straight into the store)."""
    data = store.snapshot(source_id, secret)
    by_student: dict[str, list] = {}
    for a in data.answers:
        by_student.setdefault(a.student_id, []).append(a)
    sources = [v for v in by_student.values() if v]
    new = store.create_class(f"{students} students")
    for i in range(students):
        st = store.join(new.id, f"copy {i:03d}")
        answers = sources[i % len(sources)]
        store.answer_many(
            Answer(f"{st.id}:{j}", new.id, st.id, a.question, a.option, a.option_index, a.correct, a.sentence)
            for j, a in enumerate(answers)
        )
    return new.id, new.secret


# ---------------------------------------------------------------------------
# One configuration.


def make_students(args, url: str, class_id: str, tally: Tally) -> list[LearnStudent]:
    """The class: each student with their own seeded pace; every RESEND_EVERY-th sends an answer twice."""
    return [
        LearnStudent(
            i,
            url,
            class_id,
            tally,
            random.Random(args.seed * 100_003 + i),
            args.think,
            resend=i % RESEND_EVERY == 0,
            case=CASES.get(i, ""),
        )
        for i in range(args.students)
    ]


def run_config(name: str, args, model: Path, tmp: Path) -> dict:
    run_dir = tmp / name
    run_dir.mkdir()
    pg = None
    if args.database:
        db_url = args.database
    elif name == "sqlite":
        db_url = f"sqlite:///{run_dir / 'classes.db'}"
    else:
        pg = TempPostgres().start()  # its own folder: this one is closed to the postgres user
        db_url = pg.url
    store = Store.open(db_url)
    cls = store.create_class(f"Benchmark class ({name})")
    servers = Servers(name, model, db_url, run_dir)
    tally = Tally()
    out: dict = {"config": name, "database": store.describe(), "students": args.students}
    out["faults_made"] = not args.no_faults
    out["loadavg_before"] = os.getloadavg()  # the machine's other work: on a shared machine times are upper bounds
    try:
        dash = Dashboard(servers.url, cls.id, cls.secret, tally)
        dash.start()
        students = make_students(args, servers.url, cls.id, tally)
        threads = []
        t0 = time.monotonic()
        for s in students:
            t = threading.Thread(target=lesson, args=(s, args.chapters, tally), daemon=True)
            t.start()
            threads.append(t)
            time.sleep(JOIN_S)
        faults = faulting(name, servers, pg, tally, args, threads, students)
        for t in threads:
            t.join()
        out["class_s"] = time.monotonic() - t0
        out["loadavg_after"] = os.getloadavg()
        for f in faults:
            f.join()
        waiting = {s.nickname for s in students if look_again(s)}
        for s in students:
            s.close()
        dash.stop()
        rows = stored_rows(db_url, cls.id)
        out["count"] = count(tally.sent, rows)
        out["class_id"] = cls.id
        # the answers' server time at the class's load, faults apart (their own times are in "faults")
        answer_s = [s.seconds for s in tally.sent if s.status != "unknown" and not s.fault]
        out["answer_p50_s"], out["answer_p95_s"] = median(answer_s), p95(answer_s)
        # split at the replica's kill: after it, one replica carries every student, half of them reconnecting
        kill = tally.faults_at.get("replica")
        if kill is not None:
            for part, keep in (("before_kill", lambda s: s.at < kill), ("after_kill", lambda s: s.at >= kill)):
                times = [s.seconds for s in tally.sent if s.status != "unknown" and not s.fault and keep(s)]
                if times:
                    out[f"answer_p95_{part}_s"], out[f"answers_{part}"] = p95(times), len(times)
        out["answers_timed"] = len(answer_s)
        out["waiting_at_end"] = sorted(waiting)
        out |= went_through(tally, dash, students)
        if args.first_paint and out["count"]["rows"]:
            big_id, big_secret = big_class(store, cls.id, cls.secret, args.first_paint)
            out["first_paint_students"] = args.first_paint
            out["first_paint_answers"] = store.counts(big_id).answers
            out["first_paints_s"] = first_paint(servers.url, big_id, big_secret)
            out["first_paint_s"] = median(out["first_paints_s"])
    finally:
        out["tracebacks"], first = servers.tracebacks()
        if first:
            print(f"{name}: the servers' first traceback:\n{first}", flush=True)
        servers.stop()
        store.close_connections()
        if pg:
            pg.remove()
    return out


def went_through(tally: Tally, dash: Dashboard, students: list[LearnStudent]) -> dict:
    """What the dashboard and the students went through: refreshes, reconnects, problems, the cases' replies."""
    out: dict = {}
    out["dashboard_first_s"] = dash.first_s
    out["refresh_p50_s"], out["refresh_p95_s"] = median(dash.refreshes), p95(dash.refreshes)
    out["refreshes"] = len(dash.refreshes)
    out["reconnects"] = tally.reconnects
    out["reconnect_causes"] = Counter(tally.reconnect_causes).most_common()
    out["problems"] = tally.problems + dash.problems
    out["dashboard_during_outage"] = dash.outage
    out["dashboard_reconnects"] = dash.reconnects
    out["two_tabs_told"] = tally.two_tabs  # the second tab's conflicting answer: "refused", never "saved"
    early = {x.nickname for x in students if x.case == PRE_JOIN}
    out["pre_join_told"] = [x.status for x in tally.sent if x.student in early and x.question.startswith("pre_")]
    out["faults"] = tally_faults(tally)
    out["sent"] = [asdict(s) for s in tally.sent]
    return out


def lesson(s: LearnStudent, chapters: int, tally: Tally) -> None:
    try:
        s.lesson(chapters)
    except Exception as e:  # a student whose lesson broke off: counted, its answers so far stay in the tally
        tally.add("problems", f"{s.nickname}: the lesson broke off: {type(e).__name__}: {str(e)[:160]}")


def look_again(s: LearnStudent) -> bool:
    try:
        return s.look()
    except Exception:
        return False


def busiest(servers: Servers, students: list[LearnStudent]):
    """The replica that serves the most students: nginx's access log names the replica that answered each student's
    first page (its websocket goes by the same cookie to the same one)."""
    log = read_log(servers.nginx.access_log)
    homes = Counter(
        up for s in students if s.cookie for up in served_by(log, s.cookie.split("=", 1)[-1])
    )  # fmt: skip
    by_address = {f"127.0.0.1:{r.port}": r for r in servers.replicas}
    return by_address[max(by_address, key=lambda a: homes[a])]


def faulting(
    name: str, servers: Servers, pg, tally: Tally, args, threads, students: list[LearnStudent]
) -> list[threading.Thread]:
    """The replica kill and the database restart (postgres), or the server's kill and restart (sqlite), each once its
    share of the expected answers is in."""
    if args.no_faults:
        return []
    expected = args.students * (ANSWERS_PER_STUDENT_MIN + args.chapters)

    cases = sum(s.case == TWO_TABS for s in students)  # the two tabs' conflict is measured before any fault

    def when(share: float) -> bool:
        while len(tally.sent) < share * expected or len(tally.two_tabs) < cases:
            if not any(t.is_alive() for t in threads):
                return False
            time.sleep(0.2)
        return True

    def kill() -> None:
        if when(KILL_AT):
            tally.fault, tally.faults_at["replica"] = "replica", time.monotonic()
            if name == "sqlite":  # the only server: down a second, then started again where it was
                (server,) = servers.replicas
                server.kill()
                time.sleep(1.0)
                server.start()
                server.wait_healthy()
            else:
                busiest(servers, students).kill()
                time.sleep(5.0)
            tally.fault = ""

    def restart() -> None:
        if pg is not None and when(RESTART_AT):
            tally.fault = "database"
            pg.stop(immediate=True)
            time.sleep(args.down)
            pg.start()
            tally.fault = ""

    out = [threading.Thread(target=f, daemon=True) for f in (kill, restart)]
    for t in out:
        t.start()
    return out


def tally_faults(tally: Tally) -> dict:
    by = {}
    for fault in ("", "replica", "database"):
        xs = [s for s in tally.sent if s.fault == fault]
        by[fault or "none"] = {
            "sent": len(xs),
            "saved": sum(s.status == "saved" for s in xs),
            "refused": sum(s.status == "refused" for s in xs),
            "no_reply": sum(s.status == "unknown" for s in xs),
            "p95_s": p95([s.seconds for s in xs]),
        }
    by["resent"] = sum(s.sends > 1 for s in tally.sent)
    return by


# ---------------------------------------------------------------------------
# The report.


def verdicts(res: dict) -> dict[str, tuple[bool, str]]:
    c = res["count"]
    out = {
        "answers lost = 0": (
            c["lost"] == 0 and c["acknowledged"] > 0,
            f"{c['lost']} of {c['sent']} answers sent, {c['acknowledged']} acknowledged",
        ),
        "answers duplicated = 0": (
            c["duplicated"] == 0 and c["rows"] > 0,
            f"{c['duplicated']} extra rows of {c['rows']}",
        ),
        "answer p95 ≤ 1.0 s": (
            res["answer_p95_s"] == res["answer_p95_s"] and res["answer_p95_s"] <= TARGET_ANSWER_S,
            f"p95 {res['answer_p95_s']:.3f} s over {res['answers_timed']} answers"
            + "".join(
                f"; {part.replace('_', ' ')} {res[f'answer_p95_{part}_s']:.3f} s ({res[f'answers_{part}']})"
                for part in ("before_kill", "after_kill")
                if f"answer_p95_{part}_s" in res
            ),
        ),
        "dashboard refresh ≤ 1.0 s": (
            res["refreshes"] > 0 and res["refresh_p95_s"] <= TARGET_REFRESH_S,
            f"p95 {res['refresh_p95_s']:.3f} s over {res['refreshes']} refreshes",
        ),
        "errors = 0": (
            not res["problems"] and not res["tracebacks"],
            f"{len(res['problems'])} problems, {res['tracebacks']} tracebacks",
        ),
    }
    if res["students"] > max(CASES):
        told = res["two_tabs_told"]
        out["two tabs: the other answer told not saved"] = (
            told == ["refused"],
            f"the second tab's answer to the same attempt was told: {told or 'nothing'}",
        )
        early = res["pre_join_told"]
        out["answers before joining saved on joining"] = (
            len(early) == 5 and set(early) == {"saved"},
            f"told: {early or 'nothing'}",
        )
    if "first_paint_s" in res:
        out["first paint ≤ 2 s"] = (
            res["first_paint_s"] <= TARGET_PAINT_S,
            f"median {res['first_paint_s']:.2f} s of {len(res['first_paints_s'])} "
            f"({', '.join(f'{v:.2f}' for v in res['first_paints_s'])}) for {res['first_paint_students']} students, "
            f"{res['first_paint_answers']} answers",
        )
    return out


def report(results: list[dict]) -> None:
    head = [
        "config",
        "sent",
        "acked",
        "told not",
        "no reply",
        "stored",
        "lost",
        "dup",
        "p50 ms",
        "p95 ms",
        "refresh p95",
        "paint s",
    ]
    widths = [9, 6, 6, 8, 8, 6, 5, 4, 7, 7, 11, 7]
    print(row(head, widths))
    for r in results:
        c = r["count"]
        print(
            row(
                [
                    r["config"],
                    c["sent"],
                    c["acknowledged"],
                    c["told_not_saved"],
                    c["no_reply"],
                    c["stored"],
                    c["lost"],
                    c["duplicated"],
                    f"{r['answer_p50_s'] * 1e3:.0f}",
                    f"{r['answer_p95_s'] * 1e3:.0f}",
                    f"{r['refresh_p95_s'] * 1e3:.0f} ms",
                    f"{r.get('first_paint_s', float('nan')):.2f}",
                ],
                widths,
            )
        )
    print(
        "(sent: answers given; acked: shown as saved; told not: shown as not saved; no reply: the server died under "
        "it; stored: found in the database; lost: not stored though acknowledged or left without a word; dup: rows "
        "beyond one per answer; refresh: the dashboard's rerun at that load; paint: its first paint in Chromium)"
    )
    for r in results:
        f = r["faults"]
        print(
            f"{r['config']}: {r['students']} students in {r['class_s']:.0f} s; {f['resent']} answers sent twice; "
            + "; ".join(
                f"during {k}: {v['sent']} sent, {v['saved']} saved, {v['refused']} told not saved, "
                f"{v['no_reply']} no reply, p95 {v['p95_s'] * 1e3:.0f} ms"
                for k, v in f.items()
                if k != "resent" and (k == "none" or v["sent"])
            )
            + f"; {r['reconnects']} reconnects; told not saved then stored: {r['count']['refused_then_stored']}; "
            f"still waiting at the end: {len(r['waiting_at_end'])}; machine load average "
            f"{r['loadavg_before'][0]:.1f} → {r['loadavg_after'][0]:.1f}"
        )
        for cause, n in r["reconnect_causes"][:SHOWN]:
            print(f"  reconnected {n}x after: {cause}")
        for p in r["problems"][:SHOWN]:
            print(f"  {p}")
        if len(r["problems"]) > SHOWN:
            print(f"  … and {len(r['problems']) - SHOWN} more")
        for lost in r["count"]["lost_answers"]:
            print(f"  lost: {lost}")
        for dup in r["count"]["duplicated_answers"]:
            print(f"  {dup[-1]} row(s) too many: {dup[:-1]}")
    for r in results:
        for name, (ok, why) in verdicts(r).items():
            print(f"verdict {r['config']} {name}: {'PASS' if ok else 'FAIL'} ({why})")


def recount(path: Path, url: str) -> int:
    """Count a run written with --json again against the database as it is now."""
    saved = jsonio.loads_strict(path.read_text())
    for r in saved["configs"]:
        sent = [Sent(**s) for s in r["sent"]]
        c = count(sent, stored_rows(url, r["class_id"]))
        print(f"recount {r['config']}: " + ", ".join(f"{k} {v}" for k, v in c.items() if isinstance(v, int)))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--students", type=int, help="simulated students in the class (default 100; smoke 4)")
    ap.add_argument("--database", help="a database URL to use instead of a fresh one (sqlite:// or postgresql://)")
    ap.add_argument("--configs", default=",".join(CONFIGS), help="sqlite, postgres or both (default both)")
    ap.add_argument("--think", type=float, help="mean seconds between a student's actions (default 2)")
    ap.add_argument("--chapters", type=int, help=f"chapters each student goes through (default {len(CHAPTER_KEYS)})")
    ap.add_argument("--first-paint", type=int, help="students of the class whose dashboard is painted (default 300)")
    ap.add_argument("--down", type=float, help="seconds the database stays down when restarted (default 8)")
    ap.add_argument("--model", type=Path, default=DEFAULT_MODEL, help="model directory (default: the bundled one)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, metavar="OUT", help="write every figure and answer as strict JSON")
    ap.add_argument("--recount", type=Path, metavar="OUT", help="count OUT's answers again in --database, and stop")
    ap.add_argument("--smoke", action="store_true", help="tiny random model, 4 students, 3 chapters")
    ap.add_argument("--no-faults", action="store_true", help="no server killed, no database restart")
    args = ap.parse_args(argv)
    if args.recount:
        if not args.database:
            ap.error("--recount needs --database")
        return recount(args.recount, args.database)
    base = SMOKE if args.smoke else FULL
    for key in ("students", "think", "chapters", "first_paint", "down"):
        if getattr(args, key) is None:
            setattr(args, key, base[key])
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    if not configs or set(configs) - set(CONFIGS):
        ap.error(f"--configs takes {', '.join(CONFIGS)}")
    if args.database:
        want = "sqlite" if args.database.startswith("sqlite") else "postgres"
        if configs != [want]:
            ap.error(f"--database {args.database.split(':', 1)[0]}: give --configs {want}")
    if args.students < 1 or not 0 <= args.chapters <= len(CHAPTER_KEYS) or args.think < 0:
        ap.error(f"--students ≥ 1, 0 ≤ --chapters ≤ {len(CHAPTER_KEYS)}, --think ≥ 0")
    if args.first_paint:
        require_chromium()
    if "postgres" in configs:
        find_nginx()
    results = []
    with tempfile.TemporaryDirectory(prefix="class_answers_") as d:
        tmp = Path(d)
        model, _ = benchmark_model(args.smoke, args.model, tmp, ap)
        print(
            f"Class answers: {args.students} students, {args.chapters} chapters, think {args.think:g} s, model "
            f"{model if not args.smoke else 'tiny (smoke)'}; configs {', '.join(configs)}",
            flush=True,
        )
        for name in configs:
            results.append(run_config(name, args, model, tmp))
    report(results)
    if args.json:
        jsonio.write(args.json, {"args": {k: str(v) for k, v in vars(args).items()}, "configs": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
