"""A class: a teacher's class of students taking the Learn lesson, their answers kept in a database.

``db`` opens the database (SQLite in the data directory by default, PostgreSQL with ``DATABASE_URL``) and migrates
it (Alembic, ``migrations/``); ``models`` is the schema; ``store`` the one API the app and the benchmarks write and
read through; ``stats`` what the teacher's dashboard computes from the answers (pure, no database).
"""
