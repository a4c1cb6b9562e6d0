"""Alembic's environment: always online, on the connection ``classroom.db.migrate`` hands over."""

from __future__ import annotations

from alembic import context
from sqlalchemy import text

from classroom.models import Base

MIGRATION_LOCK = 4_801_337  # PostgreSQL advisory lock: one replica migrates at a time


def run() -> None:
    conn = context.config.attributes["connection"]
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": MIGRATION_LOCK})
    context.configure(connection=conn, target_metadata=Base.metadata, render_as_batch=conn.dialect.name == "sqlite")
    with context.begin_transaction():
        context.run_migrations()


run()
