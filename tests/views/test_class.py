"""A class in the app (AppTest): the teacher creates it, students join from the student link and take the lesson,
every answer reaches the store, the teacher's dashboard shows it, the class is closed and deleted; bad input gets
one sentence and writes nothing. Without a class link the lesson touches no database."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import text
from streamlit.testing.v1 import AppTest

from classroom.db import URL_ENV
from classroom.store import Store
from model.io.checkpoint import ENV_MODEL
from model.lesson.learn import CHAPTER_KEYS, CHECK_CONCEPTS
from tests.helpers import APP, ok, seed_class, specs, titles

SENTENCE = "I like pizza."


@pytest.fixture
def db(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'classes.db'}"
    monkeypatch.setenv(URL_ENV, url)
    store = Store.open(url)
    yield store
    store.close_connections()


def app(model_dir, monkeypatch, page: str | None = None, **query) -> AppTest:
    monkeypatch.setenv(ENV_MODEL, str(model_dir))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"max_len": "8", **({"page": page} if page else {}), **query})
    return at.run()


def counts(store: Store) -> tuple[int, int, int]:
    with store.engine.connect() as c:
        return tuple(
            c.execute(text(f"SELECT count(*) FROM {t}")).scalar_one() for t in ("classes", "students", "answers")
        )


def texts(at: AppTest) -> str:
    """Everything the page says, markdown's escapes removed."""
    parts = [*at.markdown, *at.caption, *at.warning, *at.error, *at.info, *at.success, *at.code]
    return re.sub(r"\\(.)", r"\1", "\n".join(str(p.value) for p in parts))


def radio(at: AppTest, prefix: str):
    return next(r for r in at.radio if r.key and r.key.startswith(prefix))


def check(at: AppTest, key: str) -> None:
    next(b for b in at.button if b.key and b.key.startswith(f"learn_check_{key}_")).click().run()
    ok(at)


def join(model_dir, monkeypatch, class_id: str, nick: str | None) -> AppTest:
    at = app(model_dir, monkeypatch, src=SENTENCE, **{"class": class_id})
    ok(at)
    if nick is None:
        at.button(key="class_draw").click().run()
    else:
        at.text_input(key="class_nick").set_value(nick)
        at.button(key="class_join").click().run()
    return at


def first_chapter_answered(model_dir, monkeypatch, db, nick: str):
    """A class, a student in it who answered chapter 1's question with its first option: the class, the page, the
    question's key and its first two options."""
    cls = db.create_class("Monday")
    at = join(model_dir, monkeypatch, cls.id, nick)
    at.button(key="learn_next").click().run()
    key = CHAPTER_KEYS[0]
    options = radio(at, f"learn_q_{key}_").options[:2]
    radio(at, f"learn_q_{key}_").set_value(options[0]).run()
    check(at, key)
    return cls, at, key, options


def test_a_teacher_creates_a_class_and_gets_both_links(tiny_model_dir, monkeypatch, db):
    at = app(tiny_model_dir, monkeypatch, page="Class")
    ok(at)
    at.text_input(key="class_name").set_value("Monday <b>NLP</b>")
    at.button(key="class_create").click().run()
    ok(at)
    student, teacher = (c.value for c in at.code)
    assert "/?class=" in student and "/class?c=" in teacher and "#t=" in teacher and "&t=" not in teacher
    class_id = student.rsplit("=", 1)[1]
    secret = teacher.rsplit("t=", 1)[1]
    assert db.teacher(class_id, secret).name == "Monday <b>NLP</b>"  # kept as text
    assert counts(db) == (1, 0, 0)


def test_students_join_answer_and_the_dashboard_shows_it(tiny_model_dir, monkeypatch, db):
    cls = db.create_class("Monday")
    at = join(tiny_model_dir, monkeypatch, cls.id, "swift otter")
    ok(at)
    assert "In the class “Monday” as swift otter" in texts(at)
    for i in range(1, 6):  # the first check: the first option of each question
        r = radio(at, f"learn_pre_{i}_")
        r.set_value(r.options[0])
    at.button[[b.proto.label for b in at.button].index("Check my answers")].click().run()
    ok(at)
    assert "Saved to the class “Monday”: 5 answers just now" in texts(at)
    at.button(key="learn_next").click().run()  # chapter 1: every option in turn, each checked
    key = CHAPTER_KEYS[0]
    options = radio(at, f"learn_q_{key}_").options
    for option in options:
        radio(at, f"learn_q_{key}_").set_value(option).run()
        check(at, key)
        assert "Saved to the class “Monday”: 1 answer just now" in texts(at)
    data = db.snapshot(cls.id, cls.secret)
    assert [s.nickname for s in data.students] == ["swift otter"]
    assert data.students[0].chapter == 1 and data.students[0].sentence == SENTENCE
    chapter = [a for a in data.answers if a.question == key]
    assert [a.option for a in chapter] == list(options) and sum(a.correct for a in chapter) == 1
    assert [a.first_try for a in chapter] == [True] + [False] * (len(options) - 1)
    assert {a.question for a in data.answers if a.chapter == 0} == {f"pre_{c}" for c in CHECK_CONCEPTS}
    check(at, key)  # the same option checked again is not another answer
    assert db.counts(cls.id).answers == len(data.answers) == 5 + len(options)

    t = app(tiny_model_dir, monkeypatch, page="Class", c=cls.id, t=cls.secret)  # the teacher link
    ok(t)
    assert [m.value for m in t.metric][:2] == ["1", str(len(data.answers))]
    assert "The three hardest questions" in [s.value for s in t.subheader]
    assert "?chapter=" in texts(t)
    assert titles(t) == [
        "Students at each chapter (their furthest)",
        "Share of students right at their first try, per question",
        "Each student's score: first check (grey) → final check (blue)",
        "Per idea: share right at the first try, first check and final check",
    ]
    progress = specs(t)[0]["data"][0]
    assert progress["x"][1] == 1 and sum(progress["x"]) == 1  # one student, at chapter 1


def test_the_wrong_options_chosen_are_listed_most_common_first(tiny_model_dir, monkeypatch, db):
    """Five seeded students, each answering question j with option (i + j) mod 3: the dashboard's table lists every
    wrong option with the times it was chosen, most common first (two of one, one of the other, per question)."""
    from classroom import stats
    from views.teacher import question_name

    _, cls = seed_class(str(db.engine.url), 5)
    t = app(tiny_model_dir, monkeypatch, page="Class", c=cls.id, t=cls.secret)
    ok(t)
    (table,) = [d.value for d in t.dataframe if "wrong option" in d.value.columns]
    shown = list(zip(table["question"], table["wrong option"], table["times chosen"]))
    data = db.snapshot(cls.id, cls.secret)
    want = [(question_name(q.question), o, n) for q in stats.question_stats(data) for o, n in q.wrong]
    assert sorted(shown) == sorted(want) and {n for *_, n in shown} == {1, 2}
    assert [n for *_, n in shown] == sorted((n for *_, n in shown), reverse=True)


def test_a_closed_class_takes_no_new_answers_and_a_deleted_one_is_gone(tiny_model_dir, monkeypatch, db):
    cls = db.create_class("Monday")
    st_ = db.join(cls.id, "otter")
    t = app(tiny_model_dir, monkeypatch, page="Class", c=cls.id, t=cls.secret)
    ok(t)
    t.button(key="class_close").click().run()
    ok(t)
    assert db.class_info(cls.id).closed and "is closed" in texts(t)
    before = counts(db)
    s = app(tiny_model_dir, monkeypatch, src=SENTENCE, **{"class": cls.id})
    assert not s.exception and "is closed" in texts(s) and not [b for b in s.button if b.key == "class_join"]
    assert counts(db) == before
    t.checkbox(key="class_delete_sure").check().run()
    t.button(key="class_delete").click().run()
    assert not t.exception and "all its data are deleted" in texts(t)
    assert counts(db) == (0, 0, 0)
    again = app(tiny_model_dir, monkeypatch, src=SENTENCE, **{"class": cls.id})
    assert not again.exception and "does not exist" in texts(again)
    gone = app(tiny_model_dir, monkeypatch, page="Class", c=cls.id, t=cls.secret)
    assert not gone.exception and "does not exist" in texts(gone)
    del st_


@pytest.mark.parametrize(
    "nick",
    ["", "panda 🐼", "\u202eevil", "<img src=x onerror=alert(1)>", "x'); DROP TABLE students;--"],
)
def test_a_bad_nickname_gets_one_sentence_and_joins_nothing(tiny_model_dir, monkeypatch, db, nick):
    cls = db.create_class("Monday")
    at = join(tiny_model_dir, monkeypatch, cls.id, nick)
    assert not at.exception and not at.error
    assert len(at.warning) == 1 and at.warning[0].value.count(".") >= 1
    assert counts(db) == (1, 0, 0)


def test_a_right_to_left_nickname_joins_and_is_shown_as_text(tiny_model_dir, monkeypatch, db):
    cls = db.create_class("Monday")
    at = join(tiny_model_dir, monkeypatch, cls.id, "שלום")
    ok(at)
    assert [s.nickname for s in db.snapshot(cls.id, cls.secret).students] == ["שלום"]


def test_a_drawn_nickname_joins(tiny_model_dir, monkeypatch, db):
    cls = db.create_class("Monday")
    at = join(tiny_model_dir, monkeypatch, cls.id, None)
    ok(at)
    (student,) = db.snapshot(cls.id, cls.secret).students
    assert f"as {student.nickname}" in texts(at)


@pytest.mark.parametrize("secret", ["wrong", "TRUNCATED", "", "REUSED"])
def test_a_wrong_truncated_or_reused_teacher_secret_shows_nothing(tiny_model_dir, monkeypatch, db, secret):
    cls, other = db.create_class("Monday"), db.create_class("Tuesday")
    st_ = db.join(cls.id, "otter")
    given = {"TRUNCATED": cls.secret[:20], "REUSED": other.secret}.get(secret, secret)
    t = app(tiny_model_dir, monkeypatch, page="Class", c=cls.id, t=given)
    assert not t.exception and len(t.error) == 1
    assert "otter" not in texts(t) and not t.metric and not [b for b in t.button if b.key == "class_delete"]
    del st_


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://someone:hunter2@127.0.0.1:1/nowhere",  # nothing listens there
        "mysql://someone:hunter2@localhost/x",  # a database classes are not kept in
        "hunter2 is not a url",
    ],
)
def test_a_wrong_or_unreachable_database_is_said_once_and_the_lesson_runs_on(tiny_model_dir, monkeypatch, url):
    monkeypatch.setenv(URL_ENV, url)
    at = app(tiny_model_dir, monkeypatch, src=SENTENCE, **{"class": "abc"})
    assert not at.exception and not at.error
    assert len(at.warning) == 1 and "unavailable" in at.warning[0].value and "hunter2" not in texts(at)
    at.button(key="learn_next").click().run()
    assert not at.exception and not at.warning and at.header[0].value.startswith("1. ")


def test_without_a_class_link_the_lesson_opens_no_database(tiny_model_dir, monkeypatch, tmp_path):
    monkeypatch.setenv(URL_ENV, f"sqlite:///{tmp_path / 'never.db'}")
    at = app(tiny_model_dir, monkeypatch, page="Learn", src=SENTENCE)
    ok(at)
    at.button(key="learn_next").click().run()
    ok(at)
    assert not (tmp_path / "never.db").exists() and "class" not in at.query_params


def test_a_new_session_on_the_students_link_goes_on_as_that_student(tiny_model_dir, monkeypatch, db):
    """The page reloaded, or its replica gone and the browser sent to another: the student id in the URL brings the
    same student back (no join form), and a new answer to a question answered before is stored under a key of its
    own, not taken for a repeat of the stored one."""
    cls, at, key, (first, second) = first_chapter_answered(tiny_model_dir, monkeypatch, db, "swift otter")
    student = at.query_params["student"]
    assert student == db.snapshot(cls.id, cls.secret).students[0].id
    again = app(tiny_model_dir, monkeypatch, src=SENTENCE, chapter="1", **{"class": cls.id, "student": student})
    ok(again)
    assert "In the class “Monday” as swift otter: 1 answer saved" in texts(again)  # the stored one counted
    assert not [t for t in again.text_input if t.key == "class_nick"]  # no join form
    radio(again, f"learn_q_{key}_").set_value(first).run()
    check(again, key)  # the stored answer given again: still one
    assert db.counts(cls.id).answers == 1
    radio(again, f"learn_q_{key}_").set_value(second).run()
    check(again, key)
    assert "Saved to the class “Monday”: 1 answer just now" in texts(again)
    chapter = [a for a in db.snapshot(cls.id, cls.secret).answers if a.question == key]
    assert [(a.option, a.first_try) for a in chapter] == [(first, True), (second, False)]
    assert db.counts(cls.id).students == 1
    # a link naming a student the class does not have: the join form, as for a new student
    other = app(tiny_model_dir, monkeypatch, src=SENTENCE, **{"class": cls.id, "student": "0" * 32})
    ok(other)
    assert [t for t in other.text_input if t.key == "class_nick"]


def test_the_class_page_without_its_database_says_so_in_one_sentence(tiny_model_dir, monkeypatch):
    monkeypatch.setenv(URL_ENV, "postgresql://someone:hunter2@127.0.0.1:1/nowhere")
    at = app(tiny_model_dir, monkeypatch, page="Class")
    assert not at.exception and not at.error and len(at.warning) == 1 and "hunter2" not in texts(at)
    assert not [w for w in at.text_input if w.key == "class_name"]


def check_all(at: AppTest) -> None:
    at.button[[b.proto.label for b in at.button].index("Check my answers")].click().run()
    ok(at)


def screen_score(at: AppTest) -> int:
    (score,) = [m.value for m in at.markdown if m.value.startswith("**Score: ")]
    return int(score.removeprefix("**Score: ").split(" /")[0])


def test_a_blank_check_then_the_revealed_answer_is_not_a_first_try(tiny_model_dir, monkeypatch, db):
    """The opening check with one question left blank: the screen's score counts it wrong, the page reveals the
    answer, the student picks it and checks again. The dashboard's opening score is the screen's, and the revealed
    answer is stored as a second try; the same in a chapter (Check with nothing chosen, then the revealed option)."""
    from classroom import stats
    from classroom.store import NO_ANSWER

    cls = db.create_class("Monday")
    at = join(tiny_model_dir, monkeypatch, cls.id, "ada")
    for i in range(2, 6):
        r = radio(at, f"learn_pre_{i}_")
        r.set_value(r.options[0])
    check_all(at)
    shown = screen_score(at)
    blank = radio(at, "learn_pre_1_")
    right = next(o for o in blank.options if f"The answer is {o}." in texts(at))
    blank.set_value(right)
    check_all(at)
    assert screen_score(at) == shown and f"checked again, {shown + 1} are right now" in texts(at)
    data = db.snapshot(cls.id, cls.secret)
    pre_mask = [(a.option, a.correct, a.first_try) for a in data.answers if a.question == f"pre_{CHECK_CONCEPTS[0]}"]
    assert pre_mask == [(NO_ANSWER, False, True), (right, True, False)]
    (scores,) = stats.check_scores(data)
    assert scores.pre == shown
    t = app(tiny_model_dir, monkeypatch, page="Class", c=cls.id, t=cls.secret)
    concept = next(c for c in stats.concept_checks(data) if c.concept == CHECK_CONCEPTS[0])
    assert concept.pre == 0.0 and not any(NO_ANSWER in str(d.value) for d in t.dataframe)
    at.button(key="learn_next").click().run()
    key = CHAPTER_KEYS[0]
    check(at, key)  # nothing chosen
    q = radio(at, f"learn_q_{key}_")
    revealed = next(o for o in q.options if f"The answer is {o}." in texts(at))
    q.set_value(revealed).run()
    check(at, key)
    got = [(a.option, a.correct, a.first_try) for a in db.snapshot(cls.id, cls.secret).answers if a.question == key]
    assert got == [(NO_ANSWER, False, True), (revealed, True, False)]
    (row,) = [s for s in stats.question_stats(db.snapshot(cls.id, cls.secret)) if s.question == key]
    assert row.first_right == 0.0 and row.wrong == ()


def test_two_tabs_answering_one_attempt_differently_are_told_and_never_both_saved(tiny_model_dir, monkeypatch, db):
    """One student's link in two tabs, both at chapter 1: tab A answers one option, tab B another for the same
    attempt. A is saved; B is told it was not saved, naming A's answer; B's Check again stores B's as a new try."""
    cls = db.create_class("Monday")
    a = join(tiny_model_dir, monkeypatch, cls.id, "ada")
    student = a.query_params["student"]
    b = app(tiny_model_dir, monkeypatch, src=SENTENCE, **{"class": cls.id, "student": student})
    key = CHAPTER_KEYS[0]
    for tab in (a, b):
        tab.button(key="learn_next").click().run()
    first, second = radio(a, f"learn_q_{key}_").options[:2]
    radio(a, f"learn_q_{key}_").set_value(first).run()
    check(a, key)
    assert "Saved to the class" in texts(a)
    radio(b, f"learn_q_{key}_").set_value(second).run()
    check(b, key)
    assert "Saved to the class" not in texts(b) and "Not saved" in texts(b) and f"“{first}”" in texts(b)
    assert [(q, o) for q, o, _ in db.answers_of(cls.id, student)] == [(key, first)]
    check(b, key)  # checked again: a new try, stored
    assert "Saved to the class “Monday”: 1 answer just now, 2 in all" in texts(b)
    assert [(o, f) for o, f in ((x.option, x.first_try) for x in db.snapshot(cls.id, cls.secret).answers)] == [
        (first, True),
        (second, False),
    ]


def test_a_page_back_after_its_server_died_says_which_chosen_answer_was_not_saved(tiny_model_dir, monkeypatch, db):
    """The server died between the student's choice and its storing: the browser comes back to a new server with
    the option still chosen. The new session compares it with the database and says it is not saved (not "saved"),
    until the student checks it, which stores it."""
    cls = db.create_class("Monday")
    at = join(tiny_model_dir, monkeypatch, cls.id, "ada")
    at.button(key="learn_next").click().run()
    key = CHAPTER_KEYS[0]
    r = radio(at, f"learn_q_{key}_")
    widget, option = r.key, r.options[1]
    student = at.query_params["student"]
    back = AppTest.from_file(APP, default_timeout=60)
    back.query_params.update({"max_len": "8", "src": SENTENCE, "chapter": "1", "class": cls.id, "student": student})
    back.session_state[widget] = option  # the choice the browser still shows, sent with its first run
    back.run()
    ok(back)
    assert "Not saved" in texts(back) and f"“{option}”" in texts(back) and db.counts(cls.id).answers == 0
    check(back, key)
    assert "Saved to the class" in texts(back) and "Not saved" not in texts(back)
    assert [(q, o) for q, o, _ in db.answers_of(cls.id, student)] == [(key, option)]


def test_a_student_back_while_the_database_is_down_is_told_and_the_answer_is_sent_once_it_is_back(
    tiny_model_dir, monkeypatch, db
):
    """A student's page comes back on a new server (its replica gone) while the database is down, so the student
    the link names cannot be looked up: an answer checked then is said not saved and kept (never dropped without a
    word, never a join form), the link keeps the student, and once the database is back the answer is stored."""
    from classroom.errors import DatabaseError

    cls, at, key, (first, second) = first_chapter_answered(tiny_model_dir, monkeypatch, db, "ada")
    student = at.query_params["student"]
    real = Store.class_info

    def down(self, class_id):
        raise DatabaseError("The class's database cannot be reached right now; nothing was saved.")

    monkeypatch.setattr(Store, "class_info", down)
    back = app(tiny_model_dir, monkeypatch, src=SENTENCE, chapter="1", **{"class": cls.id, "student": student})
    ok(back)
    radio(back, f"learn_q_{key}_").set_value(second).run()
    check(back, key)
    said = texts(back)
    assert "Not saved: the class's database cannot be reached. 1 answer kept here and sent again." in said, said
    assert "not kept" not in said and not [t for t in back.text_input if t.key == "class_nick"]
    assert back.query_params["student"] == student and db.counts(cls.id).answers == 1
    monkeypatch.setattr(Store, "class_info", real)
    back.button(key="learn_next").click().run()
    ok(back)
    assert "Saved to the class “Monday”: 1 answer just now, 2 in all." in texts(back), texts(back)
    stored = [(q, o) for q, o, _ in db.answers_of(cls.id, student)]
    assert stored == [(key, first), (key, second)]


def test_after_an_outage_an_acknowledged_answer_the_database_lost_is_said(tiny_model_dir, monkeypatch, db):
    """An answer is saved; the database goes away (the next answer waits in the page) and comes back without the
    first (a restore from an older copy): the page compares what it was told was saved with what is stored and
    says which is missing, instead of counting it saved."""
    from classroom.errors import DatabaseError

    cls, at, key, (first, second) = first_chapter_answered(tiny_model_dir, monkeypatch, db, "ada")
    assert "Saved to the class" in texts(at)
    real = Store.answer

    def down(self, a):
        raise DatabaseError("The class's database cannot be reached right now; nothing was saved.")

    monkeypatch.setattr(Store, "answer", down)
    radio(at, f"learn_q_{key}_").set_value(second).run()
    check(at, key)
    assert "Not saved" in texts(at) and "kept here" in texts(at)
    with db.engine.begin() as c:
        c.execute(text("DELETE FROM answers"))
    monkeypatch.setattr(Store, "answer", real)
    at.button(key="learn_next").click().run()
    ok(at)
    assert f"1 answer said to be saved is not in the class's database ({key})" in texts(at)
    assert [(q, o) for q, o, _ in db.answers_of(cls.id, at.query_params["student"])] == [(key, second)]


def test_the_teacher_secret_is_traded_for_a_session_and_leaves_the_address_bar(tiny_model_dir, monkeypatch, db):
    """A teacher link with the secret in its query (as links made before carried it): the first run trades it for
    a teacher session and removes it from the address; the dashboard stays open on the session's token."""
    cls = db.create_class("Monday")
    db.join(cls.id, "otter")
    t = app(tiny_model_dir, monkeypatch, page="Class", c=cls.id, t=cls.secret)
    ok(t)
    assert "t" not in t.query_params and cls.secret not in str(t.query_params)
    assert [m.value for m in t.metric][0] == "1"
    with db.engine.connect() as c:
        assert c.execute(text("SELECT count(*) FROM teacher_sessions")).scalar_one() == 1
    t.run()
    ok(t)
    assert [m.value for m in t.metric][0] == "1" and "t" not in t.query_params


def test_answers_checked_before_joining_are_sent_on_joining(tiny_model_dir, monkeypatch, db):
    """The opening check answered on the class link before joining: the page says they will be sent, and joining
    stores them as the screen scored them (first tries), so the student's opening score is on the dashboard."""
    from classroom import stats

    cls = db.create_class("Monday")
    at = app(tiny_model_dir, monkeypatch, src=SENTENCE, **{"class": cls.id})
    ok(at)
    assert "Answers you check before joining are sent when you join." in texts(at)
    for i in range(1, 6):
        r = radio(at, f"learn_pre_{i}_")
        r.set_value(r.options[i % 2])
    check_all(at)
    shown = screen_score(at)
    assert db.counts(cls.id).answers == 0
    at.text_input(key="class_nick").set_value("ada")
    at.button(key="class_join").click().run()
    ok(at)
    assert "Saved to the class “Monday”: 5 answers just now, 5 in all" in texts(at)
    data = db.snapshot(cls.id, cls.secret)
    assert len(data.answers) == 5 and all(a.first_try for a in data.answers)
    assert [c.pre for c in stats.check_scores(data)] == [shown]


def test_the_boxes_take_no_more_characters_than_a_nickname_or_a_class_name_may_have(tiny_model_dir, monkeypatch, db):
    from classroom.models import NAME_CHARS, NICK_CHARS

    cls = db.create_class("Monday")
    at = app(tiny_model_dir, monkeypatch, src=SENTENCE, **{"class": cls.id})
    assert at.text_input(key="class_nick").proto.max_chars == NICK_CHARS
    t = app(tiny_model_dir, monkeypatch, page="Class")
    assert t.text_input(key="class_name").proto.max_chars == NAME_CHARS


def test_the_dashboard_says_an_outage_in_a_teacher_s_words(tiny_model_dir, monkeypatch, db):
    from classroom.errors import DatabaseError
    from classroom.store import UNREACHABLE

    cls = db.create_class("Monday")
    t = app(tiny_model_dir, monkeypatch, page="Class", c=cls.id, t=cls.secret)
    ok(t)

    def down(self, class_id, secret):
        raise DatabaseError(UNREACHABLE)

    monkeypatch.setattr(Store, "snapshot", down)
    t.run()
    assert not t.exception and "nothing was saved" not in texts(t)
    assert "these figures come back by themselves" in texts(t)


def test_a_closed_class_is_reopened_from_the_dashboard(tiny_model_dir, monkeypatch, db):
    cls = db.create_class("Monday")
    db.close_class(cls.id, cls.secret)
    t = app(tiny_model_dir, monkeypatch, page="Class", c=cls.id, t=cls.secret)
    t.button(key="class_reopen").click().run()
    ok(t)
    assert not db.class_info(cls.id).closed and "open again" in texts(t)
    s = join(tiny_model_dir, monkeypatch, cls.id, "otter")
    ok(s)
    assert db.counts(cls.id).students == 1


def test_the_hardest_questions_leave_out_the_opening_check_until_the_toggle_and_the_address_say(
    tiny_model_dir, monkeypatch, db
):
    from views.teacher import HARD_KEY, HARD_QUERY

    _, cls = seed_class(str(db.engine.url), 3)
    t = app(tiny_model_dir, monkeypatch, page="Class", c=cls.id, t=cls.secret)
    ok(t)
    hardest = [m.value for m in t.markdown if "right at the first try" in m.value and m.value.startswith("**")]
    assert len(hardest) == 3 and not any(h.startswith("**first check") for h in hardest), hardest
    t.toggle(key=HARD_KEY).set_value(True).run()
    ok(t)
    assert t.query_params[HARD_QUERY] in ("all", ["all"])
    hardest = [m.value for m in t.markdown if "right at the first try" in m.value and m.value.startswith("**")]
    assert any(h.startswith("**first check") for h in hardest), hardest


def test_the_teacher_s_sentence_is_every_student_s_until_the_final_check(tiny_model_dir, monkeypatch, db):
    """A class made with a sentence: a student's lesson runs on it (the box locked, whatever the link said), the
    answers are stored on it and the dashboard lists it; after the final check the student may type their own. The
    teacher changes it later, and a student's next run follows."""
    from views.teacher import SENTENCE_LABEL

    t = app(tiny_model_dir, monkeypatch, page="Class")
    t.text_input(key="class_name").set_value("Monday")
    t.text_input(key="class_sentence_new").set_value("The  cat sleeps.")
    t.button(key="class_create").click().run()
    ok(t)
    (info,) = [db.class_info(c) for (c,) in db.engine.connect().execute(text("SELECT id FROM classes"))]
    assert info.sentence == "The cat sleeps." and SENTENCE_LABEL.startswith("The class's sentence")
    at = join(tiny_model_dir, monkeypatch, info.id, "ada")  # the link's src is another sentence
    box = at.text_input(key="learn_src")
    assert (
        box.value == "The cat sleeps."
        and box.disabled
        and at.query_params["src"] in ("The cat sleeps.", ["The cat sleeps."])
    )
    check_all(at)
    at.selectbox(key="learn_goto").set_value(len(CHAPTER_KEYS) + 1).run()
    assert at.text_input(key="learn_src").disabled
    check_all(at)  # the final check, blank
    ok(at)
    assert not at.text_input(key="learn_src").disabled
    secret = None
    for c in t.code:
        if "#t=" in c.value:
            secret = c.value.rsplit("#t=", 1)[1]
    stored = {a.sentence for a in db.snapshot(info.id, secret).answers}
    assert stored == {"The cat sleeps."}
    dash = app(tiny_model_dir, monkeypatch, page="Class", c=info.id, t=secret)
    ok(dash)
    (table,) = [d.value for d in dash.dataframe if "sentence" in d.value.columns]
    assert list(table["sentence"]) == ["The cat sleeps."] and list(table["class's sentence"]) == ["yes"]
    dash.text_input(key="class_sentence_set").set_value("A dog runs.")
    dash.button(key="class_sentence_use").click().run()
    ok(dash)
    assert db.class_info(info.id).sentence == "A dog runs."
    other = join(tiny_model_dir, monkeypatch, info.id, "bo")
    assert other.text_input(key="learn_src").value == "A dog runs."
