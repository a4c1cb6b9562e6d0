"""Classes, their students and their answers.

Revision ID: 0001
Revises:
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "classes",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(80), nullable=False),
        sa.Column("teacher_hash", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("closed_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_table(
        "students",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("class_id", sa.String(32), sa.ForeignKey("classes.id", ondelete="CASCADE"), nullable=False),
        sa.Column("nickname", sa.String(24), nullable=False),
        sa.Column("joined_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("chapter", sa.Integer, nullable=False),
        sa.Column("sentence", sa.String(2000), nullable=False),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("class_id", "nickname", name="uq_students_class_nickname"),
    )
    op.create_index("ix_students_class_id", "students", ["class_id"])
    op.create_table(
        "answers",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("idem_key", sa.String(64), nullable=False, unique=True),
        sa.Column("class_id", sa.String(32), sa.ForeignKey("classes.id", ondelete="CASCADE"), nullable=False),
        sa.Column("student_id", sa.String(32), sa.ForeignKey("students.id", ondelete="CASCADE"), nullable=False),
        sa.Column("question", sa.String(32), nullable=False),
        sa.Column("chapter", sa.Integer, nullable=False),
        sa.Column("option", sa.String(400), nullable=False),
        sa.Column("option_index", sa.Integer, nullable=False),
        sa.Column("correct", sa.Boolean, nullable=False),
        sa.Column("first_try", sa.Boolean, nullable=False),
        sa.Column("sentence", sa.String(2000), nullable=False),
        sa.Column("answered_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_answers_student_id", "answers", ["student_id"])
    op.create_index("ix_answers_class_question", "answers", ["class_id", "question"])


def downgrade() -> None:
    op.drop_table("answers")
    op.drop_table("students")
    op.drop_table("classes")
