"""benchmarks/class_answers.py: its count finds a lost and a duplicated answer, and its smoke run (a few students of
one class over Streamlit's protocol, on SQLite with its one server killed and started again, and on PostgreSQL
behind nginx with a replica killed and the database restarted) loses and duplicates nothing — and when a write is
then dropped from the database, or a row doubled, its recount says so. A missing Chromium, nginx or PostgreSQL is
a failure, never a skip: .ci/run installs them."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
from pathlib import Path

from benchmarks.class_answers import count
from harness.learner import Sent, question_of
from model.core import jsonio

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "class_answers.py"
# a student's two tabs answering one attempt differently (the second told "Not saved"), and answers given before
# joining (saved on joining)
CASE_VERDICTS = ("two tabs: the other answer told not saved", "answers before joining saved on joining")


def sent(student: str, question: str, option: str, status: str = "saved") -> Sent:
    return Sent(student, question, option, status, 0.01)


def test_count_finds_what_was_lost_duplicated_or_never_sent():
    given = [
        sent("a", "pre_mask", "x"),
        sent("a", "mask", "y"),
        sent("a", "mask", "z"),  # a second try, another option
        sent("b", "tokens", "x", "refused"),  # told it was not saved
        sent("b", "embed", "x", "unknown"),  # its server died under it
    ]
    rows = [("a", "pre_mask", "x"), ("a", "mask", "y"), ("a", "mask", "z"), ("b", "embed", "x")]
    c = count(given, rows)
    assert (c["lost"], c["duplicated"], c["stored"], c["acknowledged"]) == (0, 0, 4, 3), c
    assert (c["told_not_saved"], c["no_reply"], c["refused_then_stored"]) == (1, 1, 0), c
    # an acknowledged answer missing
    c = count(given, rows[1:])
    assert c["lost"] == 1 and c["lost_answers"][0]["question"] == "pre_mask", c
    # an answer nobody acknowledged or refused, not stored: lost too (the student was told nothing)
    c = count(given, rows[:3])
    assert c["lost"] == 1 and c["lost_answers"][0]["question"] == "embed", c
    # told it was not saved and not stored: not lost (the student knows), counted apart
    assert count(given, rows)["told_not_saved"] - count(given, rows)["refused_then_stored"] == 1
    # stored twice, and stored though never sent
    c = count(given, [*rows, ("a", "mask", "y"), ("c", "mask", "y")])
    assert (c["duplicated"], c["stored_never_sent"], c["lost"]) == (2, 1, 0), c
    # one option given twice to one question (a page that came back a chapter early): two rows are two answers
    again = [*given, sent("a", "mask", "y")]
    c = count(again, [*rows, ("a", "mask", "y")])
    assert (c["duplicated"], c["lost"], c["stored"]) == (0, 0, 5), c
    c = count(again, rows)  # only one of them stored: the other was acknowledged, so it is lost
    assert (c["duplicated"], c["lost"]) == (0, 1), c


def test_questions_are_named_as_the_store_names_them():
    assert question_of("$$ID-abc-learn_pre_2_1e59a86a") == "pre_mask"
    assert question_of("learn_post_5_1e59a86a") == "post_decoding"
    assert question_of("learn_q_output_proj_1e59a86a") == "output_proj"
    assert question_of("learn_q_mask_1e59a86a") == "mask"


def bench(*args: str) -> str:
    proc = subprocess.run([sys.executable, str(SCRIPT), *args], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def counted(out: str, config: str) -> dict[str, int]:
    m = re.search(rf"^recount {config}: (.+)$", out, re.M)
    assert m, out
    return {k: int(v) for k, v in (kv.rsplit(" ", 1) for kv in m.group(1).split(", "))}


def test_class_answers_smoke_sqlite_server_killed_and_a_dropped_write_is_found(tmp_path):
    db = tmp_path / "classes.db"
    out = bench("--smoke", "--configs", "sqlite", "--database", f"sqlite:///{db}", "--json", str(tmp_path / "r.json"))
    for v in ("answers lost = 0", "answers duplicated = 0", "errors = 0", *CASE_VERDICTS):
        assert re.search(rf"^verdict sqlite {re.escape(v)}: PASS", out, re.M), out
    (r,) = jsonio.loads_strict((tmp_path / "r.json").read_text())["configs"]
    c, f = r["count"], r["faults"]
    assert c["sent"] >= 4 * 13 and c["stored"] >= c["acknowledged"] > 0 and c["stored"] == c["rows"], c
    assert f["resent"] >= 1 and r["refreshes"] >= 1 and r["first_paint_s"] > 0, r
    assert r["faults_made"] and r["reconnects"] >= 1, r  # the server was killed mid-class; its students came back
    again = counted(bench("--recount", str(tmp_path / "r.json"), "--database", f"sqlite:///{db}"), "sqlite")
    assert (again["lost"], again["duplicated"]) == (0, 0), again
    # drop one acknowledged write and double another: the recount finds both
    with sqlite3.connect(db) as con:
        con.execute("DELETE FROM answers WHERE id = (SELECT min(id) FROM answers WHERE class_id = ?)", (r["class_id"],))
        cols = (
            "class_id, student_id, question, chapter, option, option_index, correct, first_try, sentence, answered_at"
        )
        con.execute(
            f"INSERT INTO answers (idem_key, {cols}) SELECT 'doubled', {cols} FROM answers WHERE id = "
            "(SELECT max(id) FROM answers WHERE class_id = ?)",
            (r["class_id"],),
        )
    again = counted(bench("--recount", str(tmp_path / "r.json"), "--database", f"sqlite:///{db}"), "sqlite")
    assert (again["lost"], again["duplicated"]) == (1, 1), again


def test_class_answers_smoke_postgres_replica_killed_and_database_restarted(tmp_path):
    out = bench("--smoke", "--configs", "postgres", "--json", str(tmp_path / "r.json"))
    for v in ("answers lost = 0", "answers duplicated = 0", *CASE_VERDICTS):
        assert re.search(rf"^verdict postgres {re.escape(v)}: PASS", out, re.M), out
    (r,) = jsonio.loads_strict((tmp_path / "r.json").read_text())["configs"]
    c, f = r["count"], r["faults"]
    assert c["sent"] >= 4 * 13 and c["stored"] >= c["acknowledged"] > 0, c
    assert f["replica"]["sent"] + f["database"]["sent"] > 0, f  # the faults struck while students answered
    assert r["reconnects"] >= 1, r  # the killed replica's students came back through nginx


def test_a_client_waits_for_a_restarted_server_with_a_bounded_backoff(monkeypatch):
    """The simulated students and dashboard reconnect as a browser does: attempts until the server listens again,
    the waits doubling up to a bound, and the error itself once the deadline has passed. On a clock of the test's own,
    so that a busy machine's late wake-ups change nothing."""
    import threading
    from types import SimpleNamespace

    import pytest

    from harness import learner
    from harness.learner import BACKOFF_S, with_backoff

    clock = SimpleNamespace(now=0.0)
    clock.monotonic = lambda: clock.now
    clock.sleep = lambda s: setattr(clock, "now", clock.now + s)
    monkeypatch.setattr(learner, "time", clock)
    at: list[float] = []

    def starting():
        at.append(clock.now)
        if len(at) < 7:
            raise ConnectionRefusedError
        return "up"

    assert with_backoff(starting, deadline_s=30) == "up"
    gaps = [b - a for a, b in zip(at, at[1:])]
    first, bound = BACKOFF_S
    assert gaps == [min(first * 2**i, bound) for i in range(6)] and gaps[-1] == bound, gaps

    def down():
        at.append(clock.now)
        raise ConnectionRefusedError

    at.clear()
    clock.now = 0.0
    with pytest.raises(ConnectionRefusedError):
        with_backoff(down, deadline_s=1.0)
    assert at[-1] <= 1.0 and at[-1] + min(first * 2 ** (len(at) - 1), bound) > 1.0, at  # no wait past the deadline
    stop = threading.Event()
    stop.set()
    at.clear()
    with pytest.raises(ConnectionRefusedError):  # the benchmark ending: no more waiting
        with_backoff(down, deadline_s=60, stop=stop)
    assert len(at) == 1, at
