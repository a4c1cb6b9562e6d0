"""Teachers' sessions: the teacher link's secret traded for a token kept by the browser.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "teacher_sessions",
        sa.Column("token_hash", sa.String(64), primary_key=True),
        sa.Column("class_id", sa.String(32), sa.ForeignKey("classes.id", ondelete="CASCADE"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_teacher_sessions_class_id", "teacher_sessions", ["class_id"])


def downgrade() -> None:
    op.drop_table("teacher_sessions")
