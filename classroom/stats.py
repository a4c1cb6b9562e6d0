"""What a class understood, from its stored answers (pure: no database, no streamlit).

A student's score on a check is the number of its five questions answered right at the first try (a question left
unanswered counts as wrong: a check pressed with it blank is stored as a wrong first try, ``NO_ANSWER``, so the
answer revealed then and chosen after is a second try), the score the student's own screen showed. The class's
normalised gain is Hake's: g = (⟨post⟩ − ⟨pre⟩) / (max − ⟨pre⟩) over the students who took both checks, with a
percentile bootstrap 95 % interval (students resampled with replacement).
"""

from __future__ import annotations

import csv
import io
from collections import Counter, defaultdict
from dataclasses import dataclass

import numpy as np

from classroom.store import FINAL, NO_ANSWER, QUESTIONS, ClassData, StoredAnswer, question_chapter, teaching_chapter
from model.core.jsonio import dumps
from model.lesson.learn import CHECK_CONCEPTS

CHECK_MAX = len(CHECK_CONCEPTS)
BOOTSTRAP = 2000  # resamples of the students for the gain's interval
SEED = 0  # the bootstrap's generator: the same answers give the same interval
HARDEST = 3
CSV_COLUMNS = (
    "answered_at", "nickname", "student_id", "question", "chapter", "option", "option_index", "correct",
    "first_try", "sentence", "idempotency_key",
)  # fmt: skip


@dataclass(frozen=True)
class QuestionStats:
    """One question across the class: how many students answered it, the share right at their first try, and the
    wrong options picked (every wrong answer counted), most common first."""

    question: str
    chapter: int  # where it is asked: 0 the first check, 1 … 14, FINAL the final check
    teaches: int  # the chapter that teaches it
    students: int
    first_right: float
    wrong: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Gain:
    """Hake's normalised gain of the class; ``g`` None when no student took both checks or all scored full marks
    first. ``low``/``high``: the bootstrap 95 % interval."""

    g: float | None
    low: float | None
    high: float | None
    students: int
    pre_mean: float | None
    post_mean: float | None
    max_score: int = CHECK_MAX


@dataclass(frozen=True)
class CheckScores:
    student_id: str
    nickname: str
    pre: int | None  # None: not taken
    post: int | None


@dataclass(frozen=True)
class ConceptChecks:
    """One of the checks' five ideas: the share of students right at the first try, before and after."""

    concept: str
    pre: float | None
    post: float | None
    pre_students: int
    post_students: int


def progress(data: ClassData) -> list[int]:
    """Students at each chapter now (their furthest): index 0 the first check, 1 … 14, FINAL the final check."""
    counts = [0] * (FINAL + 1)
    for s in data.students:
        counts[min(max(s.chapter, 0), FINAL)] += 1
    return counts


def _first_tries(answers: tuple[StoredAnswer, ...]) -> dict[tuple[str, str], StoredAnswer]:
    first: dict[tuple[str, str], StoredAnswer] = {}
    for a in answers:
        if a.first_try:
            first.setdefault((a.student_id, a.question), a)
    return first


def _first_by_question(answers: tuple[StoredAnswer, ...]) -> dict[str, list[StoredAnswer]]:
    """Each question's first tries (one per student who answered it), in one pass."""
    out: dict[str, list[StoredAnswer]] = defaultdict(list)
    for (_, q), a in _first_tries(answers).items():
        out[q].append(a)
    return out


def question_stats(data: ClassData) -> list[QuestionStats]:
    """Every question answered at least once, in the lesson's order."""
    first = _first_by_question(data.answers)
    wrong: dict[str, Counter] = defaultdict(Counter)
    for a in data.answers:
        if not a.correct and a.option != NO_ANSWER:  # a check with nothing chosen chose no wrong option
            wrong[a.question][a.option] += 1
    out = []
    for q in QUESTIONS:
        firsts = first.get(q, [])
        if not firsts:
            continue
        right = sum(a.correct for a in firsts) / len(firsts)
        ranked = tuple(sorted(wrong[q].items(), key=lambda kv: -kv[1]))  # a tie: the option chosen first, first
        out.append(QuestionStats(q, question_chapter(q), teaching_chapter(q), len(firsts), right, ranked))
    return out


def hardest(stats: list[QuestionStats], n: int = HARDEST, opening: bool = False) -> list[QuestionStats]:
    """The ``n`` questions with the lowest share right at the first try; on a tie, the one more students answered,
    then the one asked earlier in the lesson. The opening check's questions only with ``opening``: asked before
    any teaching, they are the class's before, naturally the lowest."""
    kept = [s for s in stats if opening or s.chapter != 0]
    return sorted(kept, key=lambda s: (s.first_right, -s.students, QUESTIONS.index(s.question)))[:n]


def check_scores(data: ClassData) -> list[CheckScores]:
    """Each student's score on each check (right at the first try, of five), in the order they joined."""
    score: dict[tuple[str, str], int] = defaultdict(int)
    for (sid, q), a in _first_tries(data.answers).items():
        part, _, concept = q.partition("_")
        if part in ("pre", "post") and concept in CHECK_CONCEPTS:
            score[(sid, part)] += int(a.correct)
    return [
        CheckScores(
            s.id,
            s.nickname,
            score.get((s.id, "pre")),
            score.get((s.id, "post")),
        )
        for s in data.students
    ]


def hake_gain(
    pairs: list[tuple[int, int]], max_score: int = CHECK_MAX, n_boot: int = BOOTSTRAP, seed: int = SEED
) -> Gain:
    """Hake's g of the class from (pre, post) scores, with its percentile bootstrap 95 % interval."""
    if not pairs:
        return Gain(None, None, None, 0, None, None, max_score)
    pre, post = (np.asarray(x, dtype=float) for x in zip(*pairs))
    g = _g(pre.mean(), post.mean(), max_score)
    idx = np.random.default_rng(seed).integers(0, len(pre), size=(n_boot, len(pre)))
    pre_b, post_b = pre[idx].mean(axis=1), post[idx].mean(axis=1)
    ok = pre_b < max_score
    boot = (post_b[ok] - pre_b[ok]) / (max_score - pre_b[ok])
    low, high = (float(v) for v in np.percentile(boot, [2.5, 97.5])) if boot.size and g is not None else (None, None)
    return Gain(g, low, high, len(pre), float(pre.mean()), float(post.mean()), max_score)


def _g(pre: float, post: float, max_score: float) -> float | None:
    return None if pre >= max_score else float((post - pre) / (max_score - pre))


def class_gain(data: ClassData) -> Gain:
    return hake_gain([(c.pre, c.post) for c in check_scores(data) if c.pre is not None and c.post is not None])


def concept_checks(data: ClassData) -> list[ConceptChecks]:
    first = _first_by_question(data.answers)
    out = []
    for c in CHECK_CONCEPTS:
        shares = []
        for part in ("pre", "post"):
            got = [a.correct for a in first.get(f"{part}_{c}", [])]
            shares.append((sum(got) / len(got) if got else None, len(got)))
        out.append(ConceptChecks(c, shares[0][0], shares[1][0], shares[0][1], shares[1][1]))
    return out


def summary(data: ClassData) -> dict:
    """The dashboard's numbers as one dict (strict JSON through ``summary_json``)."""
    stats = question_stats(data)
    gain = class_gain(data)
    return {
        "class": {"id": data.info.id, "name": data.info.name, "closed": data.info.closed},
        "created_at": data.info.created_at.isoformat(),
        "students": len(data.students),
        "answers": len(data.answers),
        "progress": {"chapter": list(range(FINAL + 1)), "students": progress(data)},
        "questions": [
            {
                "question": s.question,
                "asked_in_chapter": s.chapter,
                "taught_in_chapter": s.teaches,
                "students": s.students,
                "right_at_first_try": s.first_right,
                "wrong_options": [{"option": o, "count": n} for o, n in s.wrong],
            }
            for s in stats
        ],
        "hardest": [s.question for s in hardest(stats)],
        "checks": [{"nickname": c.nickname, "pre": c.pre, "post": c.post} for c in check_scores(data)],
        "concepts": [
            {
                "concept": c.concept,
                "pre": c.pre,
                "post": c.post,
                "pre_students": c.pre_students,
                "post_students": c.post_students,
            }  # fmt: skip
            for c in concept_checks(data)
        ],
        "gain": {
            "g": gain.g,
            "ci95": [gain.low, gain.high],
            "students": gain.students,
            "pre_mean": gain.pre_mean,
            "post_mean": gain.post_mean,
            "max_score": gain.max_score,
            "bootstrap_resamples": BOOTSTRAP,
        },  # fmt: skip
    }


def summary_json(data: ClassData) -> str:
    return dumps(summary(data), indent=1)


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # a spreadsheet runs a cell that starts so as a formula


def cell(value: object) -> object:
    """A value as a CSV cell a spreadsheet shows as typed: text that would start a formula gets a leading '."""
    return "'" + value if isinstance(value, str) and value.startswith(FORMULA_START) else value


CSV_BOM = "\ufeff"  # first in the file: a spreadsheet then reads it as UTF-8 (Excel would garble "Björn" without)


def answers_csv(data: ClassData) -> str:
    """Every answer, one row each, in the order given, after ``CSV_BOM``; text a student typed (a nickname, a
    sentence) never runs as a spreadsheet formula."""
    out = io.StringIO()
    out.write(CSV_BOM)
    w = csv.writer(out)
    w.writerow(CSV_COLUMNS)
    for a in data.answers:
        w.writerow(
            [cell(v) for v in (a.answered_at.isoformat(), a.nickname, a.student_id, a.question, a.chapter, a.option,
                               a.option_index, a.correct, a.first_try, a.sentence, a.key)]
        )  # fmt: skip
    return out.getvalue()
