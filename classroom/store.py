"""The class store: the one API through which the app (and the benchmarks) create classes, let students join, write
their answers and read a class back for its teacher.

Every write is one transaction. An answer carries an idempotency key chosen by the caller, unique in the database:
the app derives it from the student, the question and the number of the student's attempt at that question, so a
submission sent again (a retry after an error, a repeated click) is stored once and acknowledged as already stored,
and the same attempt answered with another option (the student's second tab) is a ``Conflict``, never a repeat.
The teacher's secret (192 random bits) is returned once, at creation, and kept only as its SHA-256; every read of a
class's answers and every change to the class needs it.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, delete, exists, func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session

from classroom.db import describe, make_engine, migrate
from classroom.errors import (
    BadInput,
    ClassError,
    Closed,
    Conflict,
    DatabaseError,
    Forbidden,
    NicknameTaken,
    NotFound,
)
from classroom.models import (
    KEY_CHARS,
    NAME_CHARS,
    NICK_CHARS,
    OPTION_CHARS,
    SENTENCE_CHARS,
    AnswerRow,
    ClassRow,
    StudentRow,
    TeacherSessionRow,
)
from model.lesson.learn import CHAPTER_KEYS, CHECK_CONCEPTS

FINAL = len(CHAPTER_KEYS) + 1  # the lesson's "chapters": 0 the first check, 1 … 14, 15 the final check
MAX_OPTIONS = 16
# a check pressed with nothing chosen: stored as a wrong answer (the reveal that follows makes any later answer to the
# question a second try), under this option and index
NO_ANSWER, NO_ANSWER_INDEX = "(no answer)", -1
TEACHER_SESSION = timedelta(days=30)  # how long a teacher's browser stays signed in to its class's dashboard
ID_RE = re.compile(r"[A-Za-z0-9_-]{1,32}")
KEY_RE = re.compile(rf"[A-Za-z0-9_:.-]{{1,{KEY_CHARS}}}")
NICK_PUNCT = " -_."
WORDS = (  # nicknames the app draws: an adjective and an animal, then a number
    ("brave", "calm", "clever", "eager", "gentle", "happy", "keen", "lucky", "merry", "nimble", "quick", "quiet",
     "sunny", "swift", "tidy", "witty"),
    ("otter", "panda", "heron", "lynx", "koala", "falcon", "badger", "dolphin", "gecko", "ibis", "marten", "puffin",
     "quokka", "robin", "seal", "wren"),
)  # fmt: skip


def question_chapter(question: str) -> int:
    """The lesson's chapter a question is asked in: 0 (the first check), 1 … 14, or ``FINAL``; ``BadInput`` for a
    question the lesson does not have."""
    if question in CHAPTER_KEYS:
        return CHAPTER_KEYS.index(question) + 1
    part, _, concept = question.partition("_")
    if concept in CHECK_CONCEPTS and part in ("pre", "post"):
        return 0 if part == "pre" else FINAL
    raise BadInput("That question is not part of the lesson; nothing was saved.")


def teaching_chapter(question: str) -> int:
    """The chapter that teaches what a question asks (a check's question: the chapter of its idea)."""
    question_chapter(question)
    return CHAPTER_KEYS.index(question.partition("_")[2] if question not in CHAPTER_KEYS else question) + 1


QUESTIONS = tuple(f"pre_{c}" for c in CHECK_CONCEPTS) + CHAPTER_KEYS + tuple(f"post_{c}" for c in CHECK_CONCEPTS)


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _collapsed(text: str, limit: int, what: str, empty: str) -> str:
    """``text`` NFKC-normalised with its runs of spaces collapsed; ``BadInput`` when empty or over ``limit``."""
    text = str(text)
    out = " ".join(unicodedata.normalize("NFKC", text[: 4 * limit + 1]).split())
    if not out:
        raise BadInput(empty)
    if len(out) > limit or len(text) > 4 * limit:
        raise BadInput(f"{what} has at most {limit} characters.")
    return out


def clean_nickname(text: str) -> str:
    """A nickname: 1 … 24 letters (any script), digits, spaces and ``- _ .``; the characters are judged before the
    length, so a nickname refused for its symbols is told so."""
    text = str(text)
    shown = " ".join(unicodedata.normalize("NFKC", text[: 4 * NICK_CHARS + 1]).split())
    if not all(c.isalnum() or c in NICK_PUNCT for c in shown):
        raise BadInput("A nickname holds only letters, digits, spaces and - _ . (no symbols, emoji or markup).")
    return _collapsed(text, NICK_CHARS, "A nickname", "Choose a nickname, or let the app draw one.")


def clean_class_name(text: str) -> str:
    """A class's name: 1 … 80 printable characters (shown as text, never as markup)."""
    name = _collapsed(text, NAME_CHARS, "A class's name", "Give the class a name.")
    if any(unicodedata.category(c)[0] == "C" for c in name):
        raise BadInput("A class's name cannot hold control or formatting characters.")
    return name


def clean_sentence(text: str) -> str:
    """A class's sentence: its runs of spaces collapsed, "" for none, at most ``SENTENCE_CHARS`` characters."""
    out = " ".join(str(text).split())
    if len(out) > SENTENCE_CHARS:
        raise BadInput(f"The class's sentence has at most {SENTENCE_CHARS} characters.")
    if any(unicodedata.category(c)[0] == "C" for c in out):
        raise BadInput("The class's sentence cannot hold control or formatting characters.")
    return out


def draw_nickname(rng: secrets.SystemRandom | None = None) -> str:
    r = rng or secrets.SystemRandom()
    return f"{r.choice(WORDS[0])} {r.choice(WORDS[1])} {r.randrange(10, 100)}"


def _now() -> datetime:
    return datetime.now(UTC)


def _utc(t: datetime) -> datetime:
    """SQLite hands back naive datetimes: they were written in UTC."""
    return t if t.tzinfo else t.replace(tzinfo=UTC)


# ---------------------------------------------------------------------------
# What the store takes and returns.


@dataclass(frozen=True)
class NewClass:
    """A class just created. ``secret`` is the teacher's, shown once: only its hash is kept."""

    id: str
    name: str
    secret: str


@dataclass(frozen=True)
class ClassInfo:
    id: str
    name: str
    created_at: datetime
    closed: bool
    sentence: str = ""  # the one the teacher chose for the class's lesson; "" for none


@dataclass(frozen=True)
class Student:
    id: str
    class_id: str
    nickname: str
    chapter: int = 0
    sentence: str = ""
    joined_at: datetime | None = None
    seen_at: datetime | None = None


@dataclass(frozen=True)
class Answer:
    """An answer as the student gave it. ``key``: the idempotency key (``[A-Za-z0-9_:.-]``, at most 64 characters),
    the same for every send of one submission and different for each submission."""

    key: str
    class_id: str
    student_id: str
    question: str
    option: str
    option_index: int
    correct: bool
    sentence: str = ""


@dataclass(frozen=True)
class Ack:
    """An answer stored: its row, whether it was the student's first answer to the question, and whether this send
    was a repeat of one already stored (then nothing new was written)."""

    id: int
    first_try: bool
    duplicate: bool


@dataclass(frozen=True)
class StoredAnswer:
    key: str
    student_id: str
    nickname: str
    question: str
    chapter: int
    option: str
    option_index: int
    correct: bool
    first_try: bool
    sentence: str
    answered_at: datetime


@dataclass(frozen=True)
class ClassData:
    """Everything a class holds, for its teacher: the class, its students (by join time), its answers (by time)."""

    info: ClassInfo
    students: tuple[Student, ...]
    answers: tuple[StoredAnswer, ...]


@dataclass(frozen=True)
class Counts:
    students: int
    answers: int


# ---------------------------------------------------------------------------
# The store.


class Store:
    """The classes in one database. ``Store.open(url)`` connects and migrates; every method is one transaction and
    raises a ``ClassError`` whose message is one sentence (``DatabaseError`` when the database cannot be reached)."""

    def __init__(self, engine: Engine):
        self.engine = engine

    @classmethod
    def open(cls, url: str | None = None, run_migrations: bool = True) -> Store:
        engine = make_engine(url)
        if run_migrations:
            try:
                migrate(engine)
            except ClassError:
                raise
            except Exception as e:
                engine.dispose()
                raise DatabaseError(f"The class database ({describe(engine)}) cannot be reached or migrated.") from e
        return cls(engine)

    def describe(self) -> str:
        return describe(self.engine)

    def close_connections(self) -> None:
        self.engine.dispose()

    def _session(self) -> _Tx:
        return _Tx(self.engine)

    # -- the teacher ------------------------------------------------------

    def create_class(self, name: str, sentence: str = "") -> NewClass:
        name, sentence = clean_class_name(name), clean_sentence(sentence)
        secret = secrets.token_urlsafe(24)
        row = ClassRow(
            id=secrets.token_urlsafe(9), name=name, teacher_hash=secret_hash(secret), created_at=_now(),
            sentence=sentence,
        )  # fmt: skip
        with self._session() as s:
            s.add(row)
        return NewClass(row.id, name, secret)

    def teacher(self, class_id: str, secret: str) -> ClassInfo:
        """The class, for whoever holds its teacher's secret; ``NotFound`` or ``Forbidden`` otherwise."""
        with self._session() as s:
            return _info(self._teacher_row(s, class_id, secret))

    def _teacher_row(self, s: Session, class_id: str, secret: str, session: bool = True) -> ClassRow:
        """The class, for its teacher's secret or (``session``) a token of a teacher's session of it that has not
        ended; ``NotFound`` or ``Forbidden`` otherwise."""
        row = _class_row(s, class_id)
        given = secret_hash(str(secret)) if secret else ""
        if hmac.compare_digest(given, row.teacher_hash):
            return row
        held = s.get(TeacherSessionRow, given) if session and given else None
        if held is None or held.class_id != class_id or _utc(held.expires_at) <= _now():
            raise Forbidden("This teacher link's secret is not this class's: ask for the link given when it was made.")
        return row

    def open_teacher_session(self, class_id: str, secret: str) -> str:
        """The teacher's secret traded for a new session's token (random, 256 bits; only its hash is kept), which
        every call that takes the secret takes too, for ``TEACHER_SESSION``: the browser keeps the token, and the
        secret leaves the address bar."""
        token, now = secrets.token_urlsafe(32), _now()
        with self._session() as s:
            self._teacher_row(s, class_id, secret, session=False)
            s.add(TeacherSessionRow(token_hash=secret_hash(token), class_id=class_id, created_at=now,
                                    expires_at=now + TEACHER_SESSION))  # fmt: skip
        return token

    def snapshot(self, class_id: str, secret: str) -> ClassData:
        with self._session() as s:
            info = _info(self._teacher_row(s, class_id, secret))
            students = s.scalars(
                select(StudentRow).where(StudentRow.class_id == class_id).order_by(StudentRow.joined_at)
            ).all()
            names = {r.id: r.nickname for r in students}
            # columns, not ORM objects: a class of 300 reads 7,200 rows on every refresh of its dashboard
            a = AnswerRow
            answers = s.execute(
                select(
                    a.idem_key,
                    a.student_id,
                    a.question,
                    a.chapter,
                    a.option,
                    a.option_index,
                    a.correct,
                    a.first_try,
                    a.sentence,
                    a.answered_at,
                )  # fmt: skip
                .where(a.class_id == class_id)
                .order_by(a.answered_at, a.id)
            ).all()
            return ClassData(
                info,
                tuple(_student(r) for r in students),
                tuple(
                    StoredAnswer(key, sid, names.get(sid, ""), q, ch, opt, i, ok, first, sent, _utc(at))
                    for key, sid, q, ch, opt, i, ok, first, sent, at in answers
                ),
            )

    def answers_of(self, class_id: str, student_id: str) -> list[tuple[str, str, str]]:
        """A student's own answers, (question, option, idempotency key) in the order they were stored: what a new
        session of that student (another tab, another replica) needs to number the next ones after them, and what
        a page compares with the answers it was told were saved. The student's id is the key here (it is random,
        128 bits, and only in that student's link); no other student's answers."""
        with self._session() as s:
            _student_row(s, class_id, student_id)
            rows = s.execute(
                select(AnswerRow.question, AnswerRow.option, AnswerRow.idem_key)
                .where(AnswerRow.class_id == class_id, AnswerRow.student_id == student_id)
                .order_by(AnswerRow.id)
            )
            return [(q, o, k) for q, o, k in rows]

    def close_class(self, class_id: str, secret: str) -> None:
        """No more students or answers; what is stored stays for the teacher."""
        with self._session() as s:
            row = self._teacher_row(s, class_id, secret)
            if row.closed_at is None:
                row.closed_at = _now()

    def set_sentence(self, class_id: str, secret: str, sentence: str) -> str:
        """The class's sentence from now on ("" for none: each student their own); the answers given keep the
        sentence they were asked on."""
        sentence = clean_sentence(sentence)
        with self._session() as s:
            self._teacher_row(s, class_id, secret).sentence = sentence
        return sentence

    def reopen_class(self, class_id: str, secret: str) -> None:
        """A closed class takes students and answers again; nothing stored changes."""
        with self._session() as s:
            self._teacher_row(s, class_id, secret).closed_at = None

    def delete_class(self, class_id: str, secret: str) -> None:
        """The class, its students and every answer, gone."""
        with self._session() as s:
            self._teacher_row(s, class_id, secret)
            s.execute(delete(TeacherSessionRow).where(TeacherSessionRow.class_id == class_id))
            s.execute(delete(AnswerRow).where(AnswerRow.class_id == class_id))
            s.execute(delete(StudentRow).where(StudentRow.class_id == class_id))
            s.execute(delete(ClassRow).where(ClassRow.id == class_id))

    # -- students ---------------------------------------------------------

    def class_info(self, class_id: str) -> ClassInfo:
        """What a student link shows: the class's name and whether it is open. No answers."""
        with self._session() as s:
            return _info(_class_row(s, class_id))

    def join(self, class_id: str, nickname: str) -> Student:
        nick = clean_nickname(nickname)
        now = _now()
        row = StudentRow(
            id=secrets.token_hex(16), class_id=class_id, nickname=nick, joined_at=now, seen_at=now, chapter=0,
            sentence="",
        )  # fmt: skip
        try:
            with self._session() as s:
                _open_class(s, class_id)
                taken = s.scalars(select(StudentRow.nickname).where(StudentRow.class_id == class_id))
                if nick.casefold() in {t.casefold() for t in taken}:  # "Ada" and "ada" are one student to a class
                    raise NicknameTaken("Another student of this class has this nickname: choose another.")
                s.add(row)
        except IntegrityError as e:  # two joined with it at once
            raise NicknameTaken("Another student of this class has this nickname: choose another.") from e
        return _student(row)

    def student(self, class_id: str, student_id: str) -> Student:
        with self._session() as s:
            _class_row(s, class_id)
            return _student(_student_row(s, class_id, student_id))

    def reach(self, class_id: str, student_id: str, chapter: int, sentence: str) -> None:
        """The student is at ``chapter`` (the furthest reached is kept) on ``sentence``."""
        if not 0 <= int(chapter) <= FINAL:
            raise BadInput("That chapter is not part of the lesson; nothing was saved.")
        with self._session() as s:
            _open_class(s, class_id)
            st = _student_row(s, class_id, student_id)
            st.chapter = max(st.chapter, int(chapter))
            st.sentence = str(sentence)[:SENTENCE_CHARS]
            st.seen_at = _now()

    def answer(self, a: Answer) -> Ack:
        """Store one answer (one transaction): ``Ack.duplicate`` when its key was stored before with the same option
        (nothing new written); ``Conflict`` when it was stored with another option (nothing written: the key names
        one attempt, and that attempt's stored answer stays). ``BadInput`` for a question the lesson does not have,
        ``Closed``, ``NotFound``, ``DatabaseError``."""
        return self.answer_many([a])[0]

    def answer_many(self, answers: Iterable[Answer]) -> list[Ack]:
        """Several answers in one transaction (all stored, or none): the benchmark's bulk load."""
        answers = list(answers)
        for a in answers:
            _check(a)
        with self._session() as s:
            acks, opened = [], set()
            for a in answers:
                if a.class_id not in opened:
                    _open_class(s, a.class_id)
                    opened.add(a.class_id)
                acks.append(self._insert(s, a))
            return acks

    def _insert(self, s: Session, a: Answer) -> Ack:
        st = _student_row(s, a.class_id, a.student_id)
        chapter = question_chapter(a.question)
        first = not s.scalar(
            select(exists().where(AnswerRow.student_id == a.student_id, AnswerRow.question == a.question))
        )
        now = _now()
        values = dict(
            idem_key=a.key, class_id=a.class_id, student_id=a.student_id, question=a.question, chapter=chapter,
            option=a.option, option_index=int(a.option_index), correct=bool(a.correct), first_try=first,
            sentence=a.sentence[:SENTENCE_CHARS], answered_at=now,
        )  # fmt: skip
        insert = pg_insert if s.get_bind().dialect.name == "postgresql" else sqlite_insert
        new = s.scalar(
            insert(AnswerRow)
            .values(**values)
            .on_conflict_do_nothing(index_elements=["idem_key"])
            .returning(AnswerRow.id)
        )
        if new is None:
            old = s.scalar(select(AnswerRow).where(AnswerRow.idem_key == a.key))
            if old is None or old.student_id != a.student_id or old.question != a.question:
                raise BadInput("This answer's key belongs to another answer; nothing was saved.")
            if (old.option, old.option_index) != (a.option, int(a.option_index)):
                raise Conflict(
                    f"this attempt was already answered elsewhere (another tab or window) with “{old.option}”; "
                    "yours was not saved.",
                    old.option,
                )
            return Ack(old.id, old.first_try, True)
        s.execute(
            update(StudentRow)
            .where(StudentRow.id == a.student_id)
            .values(chapter=max(st.chapter, chapter), sentence=values["sentence"] or st.sentence, seen_at=now)
        )
        return Ack(new, first, False)

    def counts(self, class_id: str) -> Counts:
        """How many students and answers the class holds (the benchmark counts stored against acknowledged)."""
        with self._session() as s:
            n_st = s.scalar(select(func.count()).select_from(StudentRow).where(StudentRow.class_id == class_id))
            n_an = s.scalar(select(func.count()).select_from(AnswerRow).where(AnswerRow.class_id == class_id))
            return Counts(int(n_st or 0), int(n_an or 0))


class _Tx:
    """One transaction: committed on success, rolled back on any error; the database's own errors (but a broken
    constraint, which callers handle) become one sentence, ``DatabaseError``."""

    def __init__(self, engine: Engine):
        self.session = Session(engine, expire_on_commit=False)

    def __enter__(self) -> Session:
        self.session.begin()
        return self.session

    def __exit__(self, kind, exc, tb) -> None:
        try:
            if kind is None:
                self.session.commit()
            else:
                self.session.rollback()
        except SQLAlchemyError as e:
            if kind is None:  # the commit failed: nothing was written
                raise _translated(e) from e
        finally:
            self.session.close()
        if isinstance(exc, SQLAlchemyError):
            raise _translated(exc) from exc


def _translated(e: SQLAlchemyError) -> Exception:
    return e if isinstance(e, IntegrityError) else DatabaseError(UNREACHABLE)


UNREACHABLE = "The class's database cannot be reached right now; nothing was saved."


def _check(a: Answer) -> None:
    if not isinstance(a.key, str) or not KEY_RE.fullmatch(a.key):
        raise BadInput("An answer's key is 1 to 64 letters, digits or _ : . -; nothing was saved.")
    question_chapter(a.question)
    if not isinstance(a.option, str) or not 0 < len(a.option) <= OPTION_CHARS:
        raise BadInput("That option is not one the lesson offers; nothing was saved.")
    if a.option == NO_ANSWER:
        if int(a.option_index) != NO_ANSWER_INDEX or a.correct:
            raise BadInput("A check with nothing chosen is a wrong answer without an option; nothing was saved.")
    elif not 0 <= int(a.option_index) < MAX_OPTIONS:
        raise BadInput("That option is not one the lesson offers; nothing was saved.")


def _class_row(s: Session, class_id: str) -> ClassRow:
    row = s.get(ClassRow, class_id) if isinstance(class_id, str) and ID_RE.fullmatch(class_id) else None
    if row is None:
        raise NotFound("This class does not exist (its link is wrong, or its teacher deleted it).")
    return row


def _open_class(s: Session, class_id: str) -> ClassRow:
    row = _class_row(s, class_id)
    if row.closed_at is not None:
        raise Closed("This class is closed: it takes no more students or answers.")
    return row


def _student_row(s: Session, class_id: str, student_id: str) -> StudentRow:
    row = s.get(StudentRow, student_id) if isinstance(student_id, str) and ID_RE.fullmatch(student_id) else None
    if row is None or row.class_id != class_id:
        raise NotFound("This student is not in the class (join it again from the student link).")
    return row


def _info(row: ClassRow) -> ClassInfo:
    return ClassInfo(row.id, row.name, _utc(row.created_at), row.closed_at is not None, row.sentence or "")


def _student(r: StudentRow) -> Student:
    return Student(
        r.id,
        r.class_id,
        r.nickname,
        r.chapter,
        r.sentence,
        r.joined_at and _utc(r.joined_at),
        r.seen_at and _utc(r.seen_at),
    )
