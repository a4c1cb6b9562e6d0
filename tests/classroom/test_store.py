"""The class store, run the same on SQLite and on a real PostgreSQL server the suite starts (``class_db``)."""

from __future__ import annotations

import base64
import hashlib
import threading

import pytest
from sqlalchemy import inspect, text

from classroom.db import migrate
from classroom.errors import BadInput, Closed, Conflict, DatabaseError, Forbidden, NicknameTaken, NotFound
from classroom.models import Base
from classroom.store import (
    FINAL,
    NO_ANSWER,
    NO_ANSWER_INDEX,
    QUESTIONS,
    Answer,
    Store,
    question_chapter,
    teaching_chapter,
)


@pytest.fixture
def store(class_db):
    s = Store.open(class_db)
    yield s
    s.close_connections()


def rows(store: Store, table: str) -> int:
    with store.engine.connect() as c:
        return c.execute(text(f"SELECT count(*) FROM {table}")).scalar_one()


def everything(store: Store) -> tuple[int, int, int]:
    return rows(store, "classes"), rows(store, "students"), rows(store, "answers")


def answer(cls, st, question="mask", n=1, option="row 0, column 1", index=0, correct=True, **kw) -> Answer:
    return Answer(f"{st.id}:{question}:{n}", cls.id, st.id, question, option, index, correct, **kw)


def test_the_migrations_build_the_models_schema(store):
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    with store.engine.connect() as c:
        diff = compare_metadata(MigrationContext.configure(c), Base.metadata)
        assert diff == []
        assert set(inspect(c).get_table_names()) >= {
            "classes",
            "students",
            "answers",
            "teacher_sessions",
            "alembic_version",
        }
    migrate(store.engine)  # again: nothing to do, nothing breaks


def test_the_teacher_secret_is_random_and_kept_only_as_its_hash(store):
    a, b = store.create_class("Monday's class"), store.create_class("Monday's class")
    assert a.id != b.id and a.secret != b.secret
    assert len(base64.urlsafe_b64decode(a.secret + "=" * (-len(a.secret) % 4))) * 8 >= 128
    with store.engine.connect() as c:
        stored = c.execute(text("SELECT * FROM classes WHERE id = :i"), {"i": a.id}).mappings().one()
    assert a.secret not in {str(v) for v in stored.values()}
    assert stored["teacher_hash"] == hashlib.sha256(a.secret.encode()).hexdigest()
    assert store.teacher(a.id, a.secret).name == "Monday's class"


def test_the_teacher_secret_is_traded_for_a_session_token_kept_only_as_its_hash(store):
    cls, other = store.create_class("A"), store.create_class("B")
    token = store.open_teacher_session(cls.id, cls.secret)
    assert token != cls.secret and len(token) >= 43
    assert store.teacher(cls.id, token).name == "A" and store.snapshot(cls.id, token).info.id == cls.id
    with store.engine.connect() as c:
        kept = c.execute(text("SELECT token_hash, class_id FROM teacher_sessions")).all()
    assert kept == [(hashlib.sha256(token.encode()).hexdigest(), cls.id)]
    with pytest.raises(Forbidden):  # a token opens its own class only
        store.teacher(other.id, token)
    with pytest.raises(Forbidden):  # only the secret opens a session, not a token
        store.open_teacher_session(cls.id, token)
    with store.engine.begin() as c:  # ended
        c.execute(text("UPDATE teacher_sessions SET expires_at = created_at"))
    with pytest.raises(Forbidden):
        store.teacher(cls.id, token)
    store.delete_class(cls.id, cls.secret)
    assert rows(store, "teacher_sessions") == 0


def test_a_nickname_refused_for_its_symbols_says_so_whatever_its_length(store):
    cls = store.create_class("A")
    for nick in ("🐼" * 30, "a" * 20 + " <b>hello</b>"):  # emoji past the length; letters with markup past it
        with pytest.raises(BadInput, match="only letters, digits") as e:
            store.join(cls.id, nick)
        assert "at most" not in str(e.value)
    with pytest.raises(BadInput, match="at most 24 characters"):
        store.join(cls.id, "a" * 25)


def test_nicknames_differing_only_in_case_are_one_nickname(store):
    cls = store.create_class("A")
    store.join(cls.id, "Ada")
    for same in ("ada", "ADA", "Ａda"):  # the last: a full-width letter, NFKC's "Ada"
        with pytest.raises(NicknameTaken):
            store.join(cls.id, same)
    store.join(cls.id, "Adam")
    assert rows(store, "students") == 2


def test_a_closed_class_can_be_reopened_by_its_teacher(store):
    cls = store.create_class("A")
    st = store.join(cls.id, "otter")
    store.close_class(cls.id, cls.secret)
    with pytest.raises(Forbidden):
        store.reopen_class(cls.id, "wrong")
    with pytest.raises(Closed):
        store.answer(answer(cls, st))
    store.reopen_class(cls.id, cls.secret)
    assert not store.class_info(cls.id).closed and not store.answer(answer(cls, st)).duplicate


@pytest.mark.parametrize("secret", ["wrong", "TRUNCATED", "", "other class's"])
def test_a_wrong_truncated_or_reused_secret_is_refused(store, secret):
    cls, other = store.create_class("A"), store.create_class("B")
    given = {"TRUNCATED": cls.secret[:-1], "other class's": other.secret}.get(secret, secret)
    before = everything(store)
    with pytest.raises(Forbidden, match="secret"):
        store.teacher(cls.id, given)
    for act in (store.snapshot, store.close_class, store.delete_class):
        with pytest.raises(Forbidden):
            act(cls.id, given)
    assert everything(store) == before and not store.class_info(cls.id).closed


@pytest.mark.parametrize(
    "nick",
    [
        "x" * 10_000,
        "",
        "   ",
        "panda 🐼",
        "<b>bold</b>",
        "<script>alert(1)</script>",
        "Robert'); DROP TABLE students;--",
        "\u202eevil",  # a right-to-left override: reverses what follows it on screen
        "nul\x00byte",
    ],
)
def test_a_bad_nickname_gets_one_sentence_and_writes_nothing(store, nick):
    cls = store.create_class("A")
    before = everything(store)
    with pytest.raises(BadInput) as e:
        store.join(cls.id, nick)
    assert str(e.value).endswith(".") and "\n" not in str(e.value)
    assert everything(store) == before


@pytest.mark.parametrize("nick", ["שלום", "سارة", "Zoë-Ann", "ana_b.3"])
def test_nicknames_in_any_script_are_kept_as_given(store, nick):
    cls = store.create_class("A")
    st = store.join(cls.id, f"  {nick}  ")
    assert st.nickname == nick == store.student(cls.id, st.id).nickname


def test_a_nickname_is_unique_in_its_class(store):
    a, b = store.create_class("A"), store.create_class("B")
    store.join(a.id, "otter")
    with pytest.raises(NicknameTaken):
        store.join(a.id, " otter ")
    store.join(b.id, "otter")


@pytest.mark.parametrize("name", ["", "x" * 81, "a\x00b", "a\u202eb"])
def test_a_bad_class_name_is_refused(store, name):
    before = everything(store)
    with pytest.raises(BadInput):
        store.create_class(name)
    assert everything(store) == before


def test_an_answer_is_stored_once_and_first_tries_are_counted(store):
    cls = store.create_class("A")
    st = store.join(cls.id, "otter")
    first = store.answer(answer(cls, st, correct=False, sentence="The girl eats."))
    again = store.answer(answer(cls, st, correct=False, sentence="The girl eats."))  # the same submission resent
    second = store.answer(answer(cls, st, n=2, index=1, option="none of these"))
    assert (first.first_try, first.duplicate) == (True, False)
    assert again == type(first)(first.id, True, True)
    assert (second.first_try, second.duplicate) == (False, False)
    data = store.snapshot(cls.id, cls.secret)
    assert [(a.question, a.correct, a.first_try, a.nickname) for a in data.answers] == [
        ("mask", False, True, "otter"),
        ("mask", True, False, "otter"),
    ]
    assert data.answers[0].chapter == question_chapter("mask") == 5
    assert data.students[0].chapter == 5 and data.students[0].sentence == "The girl eats."
    assert store.counts(cls.id).answers == 2


def test_a_key_reused_for_another_question_is_refused(store):
    cls = store.create_class("A")
    st = store.join(cls.id, "otter")
    store.answer(Answer(f"{st.id}:k1", cls.id, st.id, "mask", "x", 0, True))
    with pytest.raises(BadInput):
        store.answer(Answer(f"{st.id}:k1", cls.id, st.id, "qkv", "x", 0, True))
    assert store.counts(cls.id).answers == 1


def test_one_attempt_answered_with_two_options_is_a_conflict_never_a_repeat(store):
    """Two tabs of one student, each its first attempt at a question (the same key), with two options: the second
    is refused as a conflict naming the stored option, and the database holds the first only."""
    cls = store.create_class("A")
    st = store.join(cls.id, "otter")
    store.answer(answer(cls, st, question="tokens", option="6", index=0, correct=False))
    with pytest.raises(Conflict) as e:
        store.answer(answer(cls, st, question="tokens", option="8", index=1, correct=True))
    assert e.value.stored == "6" and "“6”" in str(e.value)
    assert store.answer(answer(cls, st, question="tokens", option="6", index=0, correct=False)).duplicate
    assert [(q, o) for q, o, _ in store.answers_of(cls.id, st.id)] == [("tokens", "6")]
    again = store.answer(answer(cls, st, question="tokens", n=2, option="8", index=1, correct=True))
    assert (again.first_try, again.duplicate) == (False, False)


def test_a_check_with_nothing_chosen_is_a_wrong_first_try(store):
    cls = store.create_class("A")
    st = store.join(cls.id, "otter")
    blank = store.answer(answer(cls, st, option=NO_ANSWER, index=NO_ANSWER_INDEX, correct=False))
    then = store.answer(answer(cls, st, n=2))
    assert (blank.first_try, then.first_try) == (True, False)
    with pytest.raises(BadInput):  # "no answer" that is right, or that names an option, is no blank
        store.answer(answer(cls, st, n=3, option=NO_ANSWER, index=NO_ANSWER_INDEX, correct=True))
    with pytest.raises(BadInput):
        store.answer(answer(cls, st, n=3, option=NO_ANSWER, index=0, correct=False))
    assert store.counts(cls.id).answers == 2


@pytest.mark.parametrize(
    "change",
    [
        {"question": "no_such_question"},
        {"question": "pre_embed"},  # the checks ask about five ideas only
        {"option": ""},
        {"option_index": -1},
        {"key": "a key with spaces"},
        {"key": "k" * 65},
    ],
)
def test_an_answer_to_no_question_is_refused_and_nothing_is_written(store, change):
    cls = store.create_class("A")
    st = store.join(cls.id, "otter")
    good = answer(cls, st)
    before = everything(store)
    with pytest.raises(BadInput):
        store.answer(Answer(**{**good.__dict__, **change}))
    assert everything(store) == before


def test_a_closed_class_takes_no_students_or_answers_but_keeps_its_data(store):
    cls = store.create_class("A")
    st = store.join(cls.id, "otter")
    store.answer(answer(cls, st))
    store.close_class(cls.id, cls.secret)
    before = everything(store)
    with pytest.raises(Closed):
        store.join(cls.id, "panda")
    with pytest.raises(Closed):
        store.answer(answer(cls, st, n=2))
    with pytest.raises(Closed):
        store.reach(cls.id, st.id, 3, "x")
    assert everything(store) == before
    assert store.class_info(cls.id).closed and len(store.snapshot(cls.id, cls.secret).answers) == 1


def test_deleting_a_class_takes_its_students_and_answers(store):
    keep, cls = store.create_class("keep"), store.create_class("A")
    for c in (keep, cls):
        st = store.join(c.id, "otter")
        store.answer(answer(c, st))
    store.delete_class(cls.id, cls.secret)
    assert store.counts(keep.id) == type(store.counts(keep.id))(students=1, answers=1)
    assert store.counts(cls.id).students == store.counts(cls.id).answers == 0
    gone = (lambda: store.class_info(cls.id), lambda: store.join(cls.id, "x"), lambda: store.answer(answer(cls, st)))
    for act in gone:
        with pytest.raises(NotFound, match="does not exist"):
            act()
    with pytest.raises(NotFound):
        store.teacher(cls.id, cls.secret)


@pytest.mark.parametrize("class_id", ["nope", "", "../../etc", "x" * 500, "'; DROP TABLE classes;--"])
def test_a_link_to_no_class_says_so(store, class_id):
    with pytest.raises(NotFound):
        store.class_info(class_id)


def test_a_student_of_another_class_cannot_answer_in_this_one(store):
    a, b = store.create_class("A"), store.create_class("B")
    st = store.join(a.id, "otter")
    with pytest.raises(NotFound):
        store.answer(Answer("k", b.id, st.id, "mask", "x", 0, True))
    with pytest.raises(NotFound):
        store.student(b.id, st.id)


def test_the_chapter_reached_is_the_furthest(store):
    cls = store.create_class("A")
    st = store.join(cls.id, "otter")
    store.reach(cls.id, st.id, 7, "one")
    store.reach(cls.id, st.id, 3, "two")
    got = store.student(cls.id, st.id)
    assert (got.chapter, got.sentence) == (7, "two")
    with pytest.raises(BadInput):
        store.reach(cls.id, st.id, FINAL + 1, "x")


def test_students_answering_at_once_lose_nothing(store):
    """Eight students on their own threads, each answering every question twice over (the same key twice): every
    answer is stored exactly once."""
    cls = store.create_class("A")
    students = [store.join(cls.id, f"s{i}") for i in range(8)]
    errors = []

    def work(st):
        try:
            for q in QUESTIONS:
                for _ in range(2):
                    store.answer(answer(cls, st, question=q))
        except Exception as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(st,)) for st in students]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert store.counts(cls.id).answers == len(students) * len(QUESTIONS)
    assert all(a.first_try for a in store.snapshot(cls.id, cls.secret).answers)


def test_a_bulk_load_is_one_transaction(store):
    cls = store.create_class("A")
    st = store.join(cls.id, "otter")
    good = [answer(cls, st, question=q) for q in QUESTIONS[:3]]
    with pytest.raises(BadInput):
        store.answer_many([*good, answer(cls, st, question="nope")])
    assert store.counts(cls.id).answers == 0
    assert [a.duplicate for a in store.answer_many(good + good[:1])] == [False, False, False, True]


def test_questions_and_the_chapters_that_teach_them():
    assert len(QUESTIONS) == len(set(QUESTIONS)) == 24
    assert [question_chapter(q) for q in ("pre_mask", "tokens", "by_hand", "post_decoding")] == [0, 1, 14, FINAL]
    assert [teaching_chapter(q) for q in ("pre_mask", "post_cross", "ffn")] == [5, 9, 10]


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://someone:hunter2@127.0.0.1:1/nowhere",  # nothing listens there
        "mysql://someone:hunter2@localhost/x",
        "definitely not a url",
        "sqlite:////proc/no/such/dir/classes.db",
    ],
)
def test_a_wrong_or_unreachable_database_is_one_sentence_without_its_password(url):
    with pytest.raises(DatabaseError) as e:
        Store.open(url)
    msg = str(e.value)
    assert "hunter2" not in msg and "\n" not in msg and msg.endswith(".")
