"""``python -m classroom migrate [--database URL]``: bring the class database to the newest schema (the app also does
it on start). ``DATABASE_URL`` or the data directory's SQLite file by default. Errors: one line, exit status 2."""

from __future__ import annotations

import argparse
import sys

from classroom.db import database_url, describe, make_engine, migrate
from classroom.errors import ClassError


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m classroom", description="The class database.")
    sub = ap.add_subparsers(dest="command", required=True)
    m = sub.add_parser("migrate", help="bring the database to the newest schema")
    m.add_argument("--database", default=None, help="a database URL (default: DATABASE_URL, or the data directory)")
    args = ap.parse_args(argv)
    try:
        engine = make_engine(args.database or database_url())
        try:
            migrate(engine)
        except Exception as e:
            raise ClassError(f"Cannot migrate {describe(engine)}: {type(e).__name__}.") from e
        finally:
            engine.dispose()
    except ClassError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{describe(engine)}: at the newest schema")
    return 0


if __name__ == "__main__":
    sys.exit(main())
