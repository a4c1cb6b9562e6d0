"""The duplicate-code check's reading of the ``duplicates`` command and of docs/architecture.md's table (the check
itself is benchmarks/duplicates.py: the command is a developer's tool, not something the project installs)."""

from __future__ import annotations

from benchmarks.duplicates import pairs, reasons


def test_the_rows_are_read_as_pairs_of_files():
    out = (
        "2 pairs of places (3 files read), each sharing runs of 6 or more lines\n"
        "D1 a/x.py:10-24 ~ b/y.py:40-54 shape (+2 more runs)\n"
        "D2 a/x.py:1-7 ~ a/x.py:30-36 shape boilerplate\n"
        "left out: 1 run of 6 lines that stand in more than 8 places each (too common to list)\n"
    )
    assert pairs(out) == [("a/x.py", "b/y.py"), ("a/x.py", "a/x.py")]


def test_every_row_of_the_table_has_a_reason():
    left = reasons()
    assert ("model/lesson/lesson.py", "model/lesson/lesson.py") in left  # the table is read
    assert all(why.strip() for why in left.values())
