"""The schema: classes, their students, and every answer a student gave (SQLAlchemy 2 declarative models).

The migrations in ``migrations/versions`` create exactly these tables; a test compares them.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, DateTime, ForeignKey, Index, Integer, String, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAME_CHARS = 80  # a class's name
NICK_CHARS = 24  # a student's nickname
SENTENCE_CHARS = 2000  # the sentence the lesson runs on (the app keeps as many characters)
OPTION_CHARS = 400  # an option's text as the student saw it
KEY_CHARS = 64  # an idempotency key


class Base(DeclarativeBase):
    pass


class ClassRow(Base):
    """A class. ``id`` is public (it is in the student link); ``teacher_hash`` is the SHA-256 of the teacher's
    secret, which is never stored."""

    __tablename__ = "classes"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(NAME_CHARS))
    teacher_hash: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    closed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # the sentence the teacher chose for the class ("" for none): every student's lesson runs on it
    sentence: Mapped[str] = mapped_column(String(SENTENCE_CHARS), default="", server_default="")


class StudentRow(Base):
    """A student of a class: a nickname (unique in the class) and a random id the browser session keeps."""

    __tablename__ = "students"
    __table_args__ = (UniqueConstraint("class_id", "nickname", name="uq_students_class_nickname"),)
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    class_id: Mapped[str] = mapped_column(String(32), ForeignKey("classes.id", ondelete="CASCADE"), index=True)
    nickname: Mapped[str] = mapped_column(String(NICK_CHARS))
    joined_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    chapter: Mapped[int] = mapped_column(Integer, default=0)  # the furthest chapter reached: 0 … 15
    sentence: Mapped[str] = mapped_column(String(SENTENCE_CHARS), default="")  # the sentence the lesson runs on
    seen_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class AnswerRow(Base):
    """One answer, as it was given: the question's key, the option chosen (text and index), right or wrong, whether
    it was the student's first answer to that question, the chapter it belongs to and the sentence it was asked on.
    ``idem_key`` is unique: a submission repeated with the same key is stored once."""

    __tablename__ = "answers"
    __table_args__ = (Index("ix_answers_class_question", "class_id", "question"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    idem_key: Mapped[str] = mapped_column(String(KEY_CHARS), unique=True)
    class_id: Mapped[str] = mapped_column(String(32), ForeignKey("classes.id", ondelete="CASCADE"))
    student_id: Mapped[str] = mapped_column(String(32), ForeignKey("students.id", ondelete="CASCADE"), index=True)
    question: Mapped[str] = mapped_column(String(32))
    chapter: Mapped[int] = mapped_column(Integer)  # 0: the first check, 1 … 14: the chapters, 15: the final check
    option: Mapped[str] = mapped_column(String(OPTION_CHARS))
    option_index: Mapped[int] = mapped_column(Integer)
    correct: Mapped[bool] = mapped_column(Boolean)
    first_try: Mapped[bool] = mapped_column(Boolean)
    sentence: Mapped[str] = mapped_column(String(SENTENCE_CHARS))
    answered_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class TeacherSessionRow(Base):
    """A teacher's session: the teacher link's secret, traded once for a random token that the teacher's browser
    keeps (a cookie) so the secret leaves the address bar. Only the token's SHA-256 is stored, with its class and
    when it ends."""

    __tablename__ = "teacher_sessions"
    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    class_id: Mapped[str] = mapped_column(String(32), ForeignKey("classes.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
