"""Beam search: the hypothesis tree, the live beams and the finished pool at a step."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import streamlit as st

from model.core.constants import IMPOSSIBLE
from model.decode.decoding import BeamStep, DecodeResult
from model.decode.steps import Line
from viz.decoding import TreeOptions

from ..common import heading, md, show, show_token
from ..plot import Drawing
from ..plot import builders as viz  # viz, its figures built on first use (cached)
from . import numbered

if TYPE_CHECKING:  # pandas is imported with the first table drawn, not with the page
    import pandas as pd

# the numbers first: on a phone the tokens take the width left and wrap, every column in view
ORDER = ("rank", "row", "cumulative log-prob", "length-normalized score", "finished", "tokens")
ROW_HELP = "row: the hypothesis' row in the beam at this step"
# the scores' columns named as the heading's equation names them: short headers leave a phone's width to the tokens
SHOWN = {"cumulative log-prob": "log p(y | x)", "length-normalized score": "score(y)"}


def render(
    res: DecodeResult,
    line: Line,
    step: int,
    token_text: Callable[[int], str],
    stream_text: Callable[[Sequence[int]], list[str]],
) -> None:
    """``line`` is the followed line; ``token_text`` labels one token (the tree's nodes), ``stream_text`` a
    hypothesis's tokens together (the tables)."""
    heading(
        numbered("beam", "Beam search"), r"\text{score}(y) = \frac{\log p(y \mid x)}{|y|^{\,\text{length penalty}}}"
    )
    title = f"Hypothesis tree up to position {step}"
    show(tree_figure(res, step, token_text, title, tree_paths(res, line)), "beam_tree")
    bs = recorded(res)[step]
    st.markdown(
        f"**Live hypotheses at position {step}** (expanded at this step; {ROW_HELP}). Pick one in *Follow "
        "hypothesis* above to follow it."
    )
    table(viz.beam_table(bs.live, stream_text, impossible=IMPOSSIBLE), f"beam_live_{step}")
    st.markdown("**Finished hypotheses so far** (the n-best pool)")
    table(viz.beam_table(bs.finished, stream_text, impossible=IMPOSSIBLE), f"beam_finished_{step}")


def table(hypotheses: pd.DataFrame, key: str) -> None:
    """A beam table (``viz.beam_table``) as a plain table under ``key``: each cell read whole (the tokens wrap) and
    read by a screen reader cell by cell; lighter for the browser than a data grid, since the live table and the
    finished pool are drawn anew at every position (each carries its position in its key, so that the table of the
    position before is marked until redrawn: ``views/page.js``)."""
    shown = hypotheses[list(ORDER)].copy()
    for column in ("cumulative log-prob", "length-normalized score"):
        shown[column] = shown[column].map(lambda v: "" if v != v else f"{v:.3f}")
    shown["finished"] = shown["finished"].map(lambda done: "yes" if done else "")
    shown["tokens"] = shown["tokens"].map(md)  # a table's cells are read as Markdown: a token is shown as it is
    with st.container(key=key):
        st.table(shown.rename(columns=SHOWN), hide_index=True)


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
