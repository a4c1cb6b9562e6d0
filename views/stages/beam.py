"""Beam search: the hypothesis tree, the live beams and the finished pool at a step."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial

import streamlit as st

from model.core.constants import IMPOSSIBLE
from model.decode.decoding import BeamStep, DecodeResult
from model.decode.steps import Line
from viz.decoding import TreeOptions

from ..common import heading, show, show_token
from ..plot import Drawing
from ..plot import builders as viz  # viz, its figures built on first use (cached)
from . import numbered

# every column readable: the hypothesis text gets the room, the numbers a fixed precision
COLUMNS = {
    "rank": st.column_config.NumberColumn("rank", width="small"),
    "row": st.column_config.NumberColumn("row", width="small", help="the hypothesis' row in the beam at this step"),
    "tokens": st.column_config.TextColumn("tokens", help="the hypothesis' tokens; hover a cut-off cell to read all"),
    "cumulative log-prob": st.column_config.NumberColumn("cumulative log-prob", format="%.3f"),
    "length-normalized score": st.column_config.NumberColumn("length-normalized score", format="%.3f"),
    "finished": st.column_config.CheckboxColumn("finished", width="small"),
}
# the numbers first, so that every column is in view at 1366 x 768; the tokens take the rest of the width
ORDER = ("rank", "row", "cumulative log-prob", "length-normalized score", "finished", "tokens")


def render(
    res: DecodeResult,
    line: Line,
    step: int,
    token_text: Callable[[int], str],
    stream_text: Callable[[Sequence[int]], list[str]],
    on_pick: Callable[[int], None],
) -> None:
    """``line`` is the followed line; ``token_text`` labels one token (the tree's nodes), ``stream_text`` a
    hypothesis's tokens together (the tables); ``on_pick(row)`` is called when a live row is selected in the table
    (to follow that hypothesis)."""
    heading(
        numbered("beam", "Beam search"), r"\text{score}(y) = \frac{\log p(y \mid x)}{|y|^{\,\text{length penalty}}}"
    )
    title = f"Hypothesis tree up to position {step}"
    show(tree_figure(res, step, token_text, title, tree_paths(res, line)), "beam_tree")
    bs = recorded(res)[step]
    st.markdown(f"**Live hypotheses at position {step}** (expanded at this step) — select a row to follow it")
    live = viz.beam_table(bs.live, stream_text, impossible=IMPOSSIBLE)
    key = f"beam_live_{step}"
    st.dataframe(
        live,
        hide_index=True,
        key=key,
        width="stretch",
        column_config=COLUMNS,
        column_order=ORDER,
        selection_mode="single-row",
        on_select=partial(_picked, key, live["row"].tolist(), on_pick),
    )
    st.markdown("**Finished hypotheses so far** (the n-best pool)")
    finished = viz.beam_table(bs.finished, stream_text, impossible=IMPOSSIBLE)
    st.dataframe(  # its position in its key, as the live table's: marked while the position before is shown
        finished,
        hide_index=True,
        key=f"beam_finished_{step}",
        width="stretch",
        column_config=COLUMNS,
        column_order=ORDER,
    )


def tree_figure(
    res: DecodeResult,
    step: int,
    token_text: Callable[[int], str],
    title: str,
    paths: dict[str, tuple[int, ...]],
    options: TreeOptions = TreeOptions(),
) -> Drawing:
    """The hypothesis tree of ``res`` up to position ``step``, ``paths`` drawn through it, the rest as ``options``
    says (the decoder's placeholder score its ``impossible``)."""
    return viz.beam_tree_figure(
        recorded(res)[: step + 1],
        replace(options, impossible=IMPOSSIBLE),
        token_text=lambda i: show_token(token_text(i)),
        title=title,
        paths=paths,
    )


def recorded(res: DecodeResult) -> list[BeamStep]:
    """The beam search steps ``res`` recorded (a decode drawn as a tree is recorded)."""
    if res.beam_steps is None:
        raise ValueError("this decode was not recorded step by step: there is no hypothesis tree to draw")
    return res.beam_steps


def tree_paths(res: DecodeResult, line: Line) -> dict[str, tuple[int, ...]]:
    """The paths the tree draws: the translation shown as the result, and the followed line when it is another."""
    winner = tuple(res.n_best[0].ids)
    if tuple(line.predicts) == winner:
        return {"followed: the translation shown": winner}
    return {"the translation shown": winner, "followed": tuple(line.predicts)}


def _picked(key: str, rows: list[int], on_pick) -> None:
    picked = st.session_state[key].selection.rows
    if picked:
        on_pick(int(rows[picked[0]]))
