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
    from model.core.tokenizer import Tokenizer
    from model.decode.decoding import Step
    from model.io.checkpoint import LoadedModel


Force = Callable[[tuple[int, ...], frozenset[int]], None]  # (the new forced prefix, its positions the user chose)
NOTHING_TYPED = "whatif_nothing_typed"  # the typed button was pressed on an empty box: said once, in the panel


@dataclass(frozen=True)
class Forcing:
    """What the panel's choices call: ``force(prefix, user_positions)`` with the new forced prefix (the tokens so far
    along the shown path, then the forced ones) and the positions of it that the user chose; ``ahead(prefix)`` with
    the prefix that re-decoding with the alternative chosen now would force (to decode it ahead)."""

    force: Force
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
    # the buttons force in their callbacks, before the run they start: that run is then the translation's and the
    # step view's (the panel's own rerun would draw it only to be replaced by theirs)
    c1, c2 = st.columns(2)
    with c1:
        pick = by_label.get(st.selectbox(f"Alternative next token at position {step}", options, key="whatif_pick"))
        st.button("Re-decode with this token", key="whatif_go", on_click=_force_pick, args=(by_label, so_far, on.force))
    with c2:
        st.text_input("…or type a token / word", key="whatif_text", max_chars=100)
        st.button(
            "Re-decode with the typed token",
            key="whatif_typed_go",
            on_click=_force_typed,
            args=(lm.tokenizer, so_far, on.force),
        )
    if st.session_state.pop(NOTHING_TYPED, False):
        st.warning("Type a token or a word first.")
    if on.ahead is not None and pick is not None:
        on.ahead(tuple([*so_far, int(pick)]))
    if pick is not None:  # "why the chosen token rather than this one?" on the Compare page (a link: a new page)
        view = replace(view, contrast=lm.tokenizer.id_to_token(pick), step=step)
        st.link_button(
            "Why the chosen token rather than this one? (Compare page)",
            "compare?" + urlencode(to_query(view)),  # relative: the Compare page beside this one
        )


def _force_pick(by_label: dict[str, int], so_far: list[int], force: Force) -> None:
    """The alternative chosen in the box (as it is now), forced at the position."""
    if (pick := by_label.get(st.session_state.get("whatif_pick", ""))) is not None:
        force((*so_far, pick), frozenset({len(so_far)}))


def _force_typed(tokenizer: Tokenizer, so_far: list[int], force: Force) -> None:
    """The typed token (or the word's pieces) forced at the position; an empty box is said in the panel."""
    text = str(st.session_state.get("whatif_text") or "").strip()
    tid = tokenizer.token_to_id(text) if text else None
    if tid is None and text:
        tid = tokenizer.token_to_id("▁" + text)
    ids = [tid] if tid is not None else (tokenizer.encode(text) if text else [])
    if not ids:
        st.session_state[NOTHING_TYPED] = True
        return
    force((*so_far, *map(int, ids)), frozenset(range(len(so_far), len(so_far) + len(ids))))
