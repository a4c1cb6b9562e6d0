"""How a decoder position is named everywhere (figures' rows, hovers, tables, the lesson, the CLI): position t reads
the token chosen at t − 1 (``<s>`` at 0) and predicts the next one, so it is labelled "reads → predicts"."""

from __future__ import annotations

from collections.abc import Callable, Iterable

POSITION_AXIS = "position: reads → predicts"  # the title of an axis of such labels


def position_labels(reads: Iterable, predicts: Iterable, show: Callable[[str], str] = str) -> list[str]:
    """One label per decoder position: the token it reads → the token it predicts (e.g. "petite → fille"), each
    token shown by ``show``."""
    return [f"{show(r)} → {show(p)}" for r, p in zip(reads, predicts)]
