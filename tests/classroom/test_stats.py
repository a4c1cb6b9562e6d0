"""The dashboard's numbers from a class's answers (pure: classes built by hand)."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from classroom.stats import (
    CSV_BOM,
    CSV_COLUMNS,
    answers_csv,
    check_scores,
    class_gain,
    concept_checks,
    hake_gain,
    hardest,
    progress,
    question_stats,
    summary_json,
)
from classroom.store import FINAL, ClassData, ClassInfo, StoredAnswer, Student
from model.core.jsonio import loads_strict

T0 = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)


def klass(students: dict[str, int], answers: list[tuple]) -> ClassData:
    """``students``: nickname → chapter; ``answers``: (nickname, question, option, correct), first tries decided as
    the store decides them (the student's first answer to the question)."""
    seen, out = set(), []
    for i, (nick, q, option, correct) in enumerate(answers):
        out.append(
            StoredAnswer(
                f"{nick}:{q}:{i}", nick, nick, q, 0, option, 0, correct, (nick, q) not in seen, "s", T0 + timedelta(i)
            )
        )
        seen.add((nick, q))
    info = ClassInfo("c1", "Monday", T0, False)
    return ClassData(info, tuple(Student(n, "c1", n, ch) for n, ch in students.items()), tuple(out))


def test_hakes_gain_of_class_means_and_its_bootstrap_interval():
    pairs = [(1, 3), (2, 4), (3, 5), (0, 1)]
    gain = hake_gain(pairs)
    pre, post = np.mean([p for p, _ in pairs]), np.mean([q for _, q in pairs])
    assert gain.g == pytest.approx((post - pre) / (5 - pre)) == pytest.approx(1.75 / 3.5)
    assert gain.low < gain.g < gain.high and gain.students == 4
    # the interval is the bootstrap's, recomputed here the long way with the same generator
    rng = np.random.default_rng(0)
    idx = rng.integers(0, 4, size=(2000, 4))
    a = np.array(pairs, dtype=float)
    g = [(a[i, 1].mean() - a[i, 0].mean()) / (5 - a[i, 0].mean()) for i in idx]
    assert (gain.low, gain.high) == pytest.approx(tuple(np.percentile(g, [2.5, 97.5])))


def test_a_gain_without_room_to_gain_or_without_students_is_none():
    assert hake_gain([(5, 5), (5, 4)]).g is None
    assert hake_gain([]).g is None and hake_gain([]).students == 0
    same = hake_gain([(2, 4)] * 6)
    assert same.g == same.low == same.high == pytest.approx(2 / 3)


def test_first_try_shares_and_the_misconceptions_most_common_first():
    data = klass(
        {"ana": 5, "bo": 5, "cy": 3},
        [
            ("ana", "mask", "row 1, column 0", False),
            ("ana", "mask", "row 0, column 1", True),  # a second try: not in the share
            ("bo", "mask", "none of these", False),
            ("cy", "mask", "row 1, column 0", False),
            ("cy", "tokens", "‘fille’", True),
        ],
    )
    stats = {s.question: s for s in question_stats(data)}
    assert stats["mask"].first_right == 0 and stats["mask"].students == 3
    assert stats["mask"].wrong == (("row 1, column 0", 2), ("none of these", 1))
    assert stats["tokens"].first_right == 1 and stats["tokens"].wrong == ()
    assert [s.question for s in hardest(list(stats.values()))] == ["mask", "tokens"]
    assert progress(data)[3] == 1 and progress(data)[5] == 2 and sum(progress(data)) == 3


def test_check_scores_per_student_and_concept_and_the_class_gain():
    pre = [("ana", f"pre_{c}", "x", c in ("tokens",)) for c in ("tokens", "mask", "softmax", "cross", "decoding")]
    post = [("ana", f"post_{c}", "x", c != "cross") for c in ("tokens", "mask", "softmax", "cross", "decoding")]
    data = klass({"ana": FINAL, "bo": 0}, [*pre, *post, ("bo", "pre_mask", "x", True)])
    scores = {c.nickname: (c.pre, c.post) for c in check_scores(data)}
    assert scores == {"ana": (1, 4), "bo": (1, None)}
    gain = class_gain(data)
    assert gain.students == 1 and gain.g == pytest.approx(3 / 4)
    concepts = {c.concept: c for c in concept_checks(data)}
    assert (concepts["mask"].pre, concepts["mask"].pre_students, concepts["mask"].post) == (0.5, 2, 1.0)
    assert concepts["cross"].post == 0.0


def test_the_downloads_are_strict_json_and_every_answer_as_csv():
    data = klass({"ana": 1}, [("ana", "tokens", 'say "=1+1", <b>', False), ("ana", "tokens", "ok", True)])
    summary = loads_strict(summary_json(data))
    assert summary["gain"]["g"] is None and summary["hardest"] == ["tokens"]
    assert summary["questions"][0]["wrong_options"] == [{"option": 'say "=1+1", <b>', "count": 1}]
    text = answers_csv(data)
    assert text.startswith(CSV_BOM) and not text.startswith(CSV_BOM * 2)  # Excel reads it as UTF-8
    rows = list(csv.reader(io.StringIO(text.removeprefix(CSV_BOM))))
    assert rows[0] == list(CSV_COLUMNS) and len(rows) == 3
    assert rows[1][CSV_COLUMNS.index("option")] == 'say "=1+1", <b>'


def test_a_csv_cell_that_would_run_as_a_formula_is_written_as_text():
    data = klass({"ana": 1}, [("ana", "tokens", "=HYPERLINK(1)", False), ("ana", "tokens", "-2+3", True)])
    rows = list(csv.reader(io.StringIO(answers_csv(data).removeprefix(CSV_BOM))))
    assert [r[CSV_COLUMNS.index("option")] for r in rows[1:]] == ["'=HYPERLINK(1)", "'-2+3"]
    assert rows[1][CSV_COLUMNS.index("nickname")] == "ana"


def test_the_hardest_leave_out_the_opening_check_unless_asked_and_break_ties_by_count_then_lesson_order():
    answers = [
        ("ana", "pre_mask", "x", False),  # the opening check: the lowest, as before any teaching
        ("bo", "pre_mask", "x", False),
        ("ana", "softmax", "x", False),  # 0 % of 1
        ("ana", "mask", "x", False),  # 0 % of 2: more students, first
        ("bo", "mask", "x", False),
        ("ana", "tokens", "x", False),  # 0 % of 1, asked before softmax
        ("ana", "cross", "y", True),
    ]
    stats = question_stats(klass({"ana": 9, "bo": 9}, answers))
    assert [s.question for s in hardest(stats)] == ["mask", "tokens", "softmax"]
    assert [s.question for s in hardest(stats, opening=True)] == ["pre_mask", "mask", "tokens"]


def test_tied_wrong_options_are_listed_in_the_order_first_chosen_not_alphabetically():
    answers = [("ana", "mask", "zebra", False), ("bo", "mask", "apple", False), ("cy", "mask", "zebra", False)]
    answers += [("dee", "mask", "mango", False), ("eve", "mask", "apple", False), ("fay", "mask", "kiwi", False)]
    (mask,) = question_stats(klass({n: 5 for n in ("ana", "bo", "cy", "dee", "eve", "fay")}, answers))
    assert mask.wrong == (("zebra", 2), ("apple", 2), ("mango", 1), ("kiwi", 1))
