"""The sentence a teacher chooses for a class ("" for none).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("classes") as batch:
        batch.add_column(sa.Column("sentence", sa.String(2000), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("classes") as batch:
        batch.drop_column("sentence")
