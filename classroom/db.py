"""Where a class's data lives: the database URL, the engine, and its migration.

With nothing configured the data is kept in SQLite (WAL mode) at ``$DECODER_LENS_DATA/classes.db`` (default
``~/.decoder-lens``), so ``streamlit run app.py`` needs no set-up; ``DATABASE_URL`` selects another database,
PostgreSQL for replicas that share their classes (``postgresql://…`` is read with psycopg 3). Migrations are
Alembic's (``classroom/migrations``): ``migrate(engine)`` brings a database to the newest schema, as the app does on
start and ``python -m classroom migrate`` does by hand.
"""

from __future__ import annotations

import os
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from classroom.errors import DatabaseError

DATA_ENV = "DECODER_LENS_DATA"
URL_ENV = "DATABASE_URL"
MIGRATIONS = Path(__file__).resolve().parent / "migrations"
BUSY_MS = 10_000  # SQLite: how long a writer waits for another's lock before it gives up
CONNECT_S = 5  # PostgreSQL: how long a connection attempt may take before the database counts as unreachable


def data_dir() -> Path:
    return Path(os.environ.get(DATA_ENV) or Path.home() / ".decoder-lens")


def database_url() -> str:
    """``DATABASE_URL`` when set, else the SQLite file in the data directory."""
    return os.environ.get(URL_ENV) or f"sqlite:///{data_dir() / 'classes.db'}"


def _driver(url: str) -> str:
    """``postgres://`` and ``postgresql://`` (as hosting services write them) read with psycopg 3."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def make_engine(url: str | None = None) -> Engine:
    """An engine for ``url`` (default: ``database_url()``); SQLite's file and folder are created."""
    raw = _driver(url or database_url())
    try:
        u = make_url(raw)
    except ArgumentError:
        raise DatabaseError("The database URL is not a URL (sqlite:///FILE or postgresql://…).") from None
    if u.get_backend_name() == "sqlite":
        if u.database and u.database != ":memory:":
            try:
                Path(u.database).parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                folder = Path(u.database).parent.name
                raise DatabaseError(f"Cannot create the data directory {folder!r}: {e.strerror}.") from None
        engine = create_engine(u, connect_args={"timeout": BUSY_MS / 1000})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    if u.get_backend_name() != "postgresql":
        raise DatabaseError(f"Classes are kept in SQLite or PostgreSQL, not {u.get_backend_name()!r}.")
    try:
        return create_engine(u, pool_pre_ping=True, connect_args={"connect_timeout": CONNECT_S})
    except Exception as e:  # a driver that is missing, or options it does not know
        raise DatabaseError(f"Cannot use the database URL: {type(e).__name__}.") from e


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    """WAL (readers never wait for the writer), foreign keys (a class's deletion takes its students and answers), a
    full fsync at each commit (an acknowledged answer survives a power cut) and a busy wait instead of an error."""
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=FULL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute(f"PRAGMA busy_timeout={BUSY_MS}")
    cur.close()


def alembic_config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def migrate(engine: Engine, revision: str = "head") -> None:
    """Bring the database to ``revision`` (the newest by default). Replicas starting together on PostgreSQL take
    turns (an advisory lock in ``migrations/env.py``)."""
    cfg = alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)


def describe(engine: Engine) -> str:
    """The database in words, without its password: ``sqlite …/classes.db`` or ``postgresql host:port/name``."""
    u = engine.url
    if u.get_backend_name() == "sqlite":
        return f"SQLite {u.database}"
    return f"PostgreSQL {u.host}:{u.port or 5432}/{u.database}"
