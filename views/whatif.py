"""What if? Force another token at the current position and decode again from there."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING
from urllib.parse import urlencode

import numpy as np
import streamlit as st

from .common import show_token
from .stages.context import TOP_SHOWN
from .state import View, to_query

if TYPE_CHECKING:
    from model.decode.decoding import Step
    from model.io.checkpoint import LoadedModel


@dataclass(frozen=True)
class Forcing:
    """What the panel's choices call: ``force(prefix, user_positions)`` with the new forced prefix (the tokens so far
    along the shown path, then the forced ones) and the positions of it that the user chose; ``ahead(prefix)`` with
    the prefix that re-decoding with the alternative chosen now would force (to decode it ahead)."""

    force: Callable[[tuple[int, ...], frozenset[int]], None]
    ahead: Callable[[tuple[int, ...]], None] | None = None


def render(
    lm: LoadedModel,
    view: View,
    cur: Step,
    r_now: int,
    so_far: list[int],
    step: int,
    token_text: Callable[[int], str],
    on: Forcing,
) -> None:
    """The alternatives at position ``step`` and the typed token, each forced through ``on``."""
    alts = [int(i) for i in cur.top_ids[r_now][:TOP_SHOWN]]
    probs = np.exp(cur.top_logprobs[r_now][:TOP_SHOWN])
    by_label = {f"{k + 1}. {show_token(token_text(i))}  (p = {p:.3f})": i for k, (i, p) in enumerate(zip(alts, probs))}
    options = list(by_label)
    if st.session_state.get("whatif_pick") not in by_label:
        st.session_state["whatif_pick"] = options[1] if len(options) > 1 else options[0]
    c1, c2 = st.columns(2)
    with c1:
        pick = by_label.get(st.selectbox(f"Alternative next token at position {step}", options, key="whatif_pick"))
        go_pick = st.button("Re-decode with this token", key="whatif_go")
    with c2:
        typed = st.text_input("…or type a token / word", key="whatif_text", max_chars=100)
        go_typed = st.button("Re-decode with the typed token", key="whatif_typed_go")
    forced: list[int] | None = None
    if go_pick and pick is not None:
        forced = [int(pick)]
    elif go_typed:
        text = (typed or "").strip()
        tid = lm.tokenizer.token_to_id(text) if text else None
        if tid is None and text:
            tid = lm.tokenizer.token_to_id("▁" + text)
        ids = [tid] if tid is not None else (lm.tokenizer.encode(text) if text else [])
        if not ids:
            st.warning("Type a token or a word first.")
        else:
            forced = [int(i) for i in ids]
    if forced is not None:
        on.force(tuple(so_far + forced), frozenset(range(len(so_far), len(so_far) + len(forced))))
    if on.ahead is not None and pick is not None:
        on.ahead(tuple([*so_far, int(pick)]))
    if pick is not None:  # "why the chosen token rather than this one?" on the Compare page (a link: a new page)
        view = replace(view, contrast=lm.tokenizer.id_to_token(pick), step=step)
        st.link_button(
            "Why the chosen token rather than this one? (Compare page)",
            "compare?" + urlencode(to_query(view)),  # relative: the Compare page beside this one
        )
