"""The step-by-step view: the stepper, the followed hypothesis, the chips, then the chosen stage at one position.

It runs as a fragment, so a step reruns this part of the page alone.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Container, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import streamlit as st

from model.core.config import ModelConfig
from model.core.constants import IMPOSSIBLE
from model.decode.decoding import DecodeResult
from model.decode.steps import Line, chips, follow_line, layer_keep, live_rows, stack_view
from model.io.checkpoint import LoadedModel
from views.plot import builders as viz  # viz, its figures built on first use (cached)
from views.plot import tagged

from . import export, handout, session, stages, whatif
from .common import (
    badges,
    decode_ahead,
    fail,
    get_decode,
    head_label,
    lazy_panel,
    md,
    path_labels,
    show_token,
    shown_labels,
    token_texter,
)
from .stages.context import Decoded, StageContext
from .state import STAGES, Choices, Limits, View, clamp_view, prepare_source

if TYPE_CHECKING:
    import pandas as pd

STEP_BUTTONS = (  # key, icon (material icons ship with Streamlit; emoji fonts may be missing), tooltip
    ("first", ":material/skip_previous:", "⏮ first position"),
    ("prev", ":material/arrow_left:", "◀ previous position"),
    ("next", ":material/arrow_right:", "▶ next position"),
    ("last", ":material/skip_next:", "⏭ last position"),
)


WHATIF_LABEL = "What if? Force another token here, and re-decode"
SLIDER_RANGE = "step_slider_positions"  # the number of positions the Position slider was last drawn with
PICK_CHARS = 90  # characters of a hypothesis in the picker's labels
POSITION_HELP = "Position 0 reads <s>; position t reads the token chosen at position t − 1 and predicts the next one."


def _clear_forced() -> None:
    """Clear's callback: back to the model's own translation at the same position, in a run of the translation's
    fragment and this one (the translation above changes too) rather than this fragment's alone."""
    session.clear_forced(keep_position=True)
    st.rerun(session.FORCED_CHANGES)


@st.fragment(key=session.STEP_FRAGMENT)
def view(lm: LoadedModel, limits: Limits, v: View, src: tuple[int, ...], src_tokens: list[str]) -> None:
    try:
        _view(lm, session.fragment_view(v, limits), src, src_tokens)
    except Exception as e:
        fail("Could not show this position", e)


def choice_control(
    label: str, options: tuple[str, ...], key: str, labels: dict[str, str], fallback: str, **kwargs: Any
) -> None:
    """A segmented control of one of ``options``; clicking the chosen one again keeps ``fallback``."""
    st.segmented_control(
        label,
        options,
        key=key,
        format_func=labels.__getitem__,
        on_change=session.keep_choice,
        args=(key, options, fallback),
        **kwargs,
    )


def stage_selector(view: View, cfg: ModelConfig) -> str:
    """The stage shown: in the fragment (the step view's or the teacher-forcing view's), so that another stage
    reruns the fragment alone, as a step does. Labelled for the model ``cfg`` describes."""
    choice_control(
        "Decoder stage to show",
        STAGES,
        "stage",
        stages.labels(cfg),
        view.stage,
        help="Each step redraws only the figures of the chosen stage; "
        "All stages shows every figure of the decoder at once (slower to step through; a figure below the "
        "window is redrawn as you scroll to it); the three explanations "
        "(logit lens, head ablation, attribution) are shown one at a time.",
    )
    return view.stage


def ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def line_story(line: Line, n_final: int, beam: int) -> str:
    """Where the followed line ended, in one sentence."""
    at = f"position {line.end}"
    score = "" if line.score is None else f" (score {line.score:.3f})"
    if line.how in ("finished", "cut"):
        how = f"finished at {at}{score}" if line.how == "finished" else f"was cut at {at} by the maximum length{score}"
        if line.final_rank == 1:
            return f"It is the translation shown above: it {how}."
        if line.final_rank:
            return f"It {how}; it is the {ordinal(line.final_rank)} of the {n_final} final candidates."
        return f"It {how}, then better candidates pushed it out of the {n_final} final ones."
    if line.how == "stopped":
        return (
            f"It was still live at {at} when beam search stopped: no continuation could beat the finished "
            "candidates any more."
        )
    if line.rank is None:
        return f"It was pruned at {at}."
    return (
        f"It was pruned at {at}: its best continuation ranked {ordinal(line.rank)} of {line.of} candidates, and "
        f"only the best {beam} stay in the beam."
    )


def followed_summary(line: Line, n_final: int, beam: int, tokens: list[str], beam_search: bool) -> dict:
    """The followed hypothesis as the Summary (JSON) records it: its tokens, how and where it ended, its place among
    the final candidates, and (beam search) the sentence the page says of it."""
    return {
        "tokens": tokens,
        "how": line.how,
        "end": line.end,
        "final_rank": line.final_rank,
        "score": round(float(line.score), 6) if line.score is not None and np.isfinite(line.score) else None,
        "said": line_story(line, n_final, beam) if beam_search else None,
    }


def _view(lm: LoadedModel, v: View, src: tuple[int, ...], src_tokens: list[str]) -> None:
    stage = stage_selector(v, lm.cfg)
    tok_text, stream_text = token_texter(lm), partial(shown_labels, lm)
    ch = v.choices(str(lm.path))
    res = get_decode(lm, ch, src)
    line = follow_line(res, lm.cfg.eos_id, v.follow)
    n = line.end + 1
    step, past = session.start_position(v, ch, n)
    if past:
        st.warning(past)

    st.header("Step through the decoder")
    stepper(n)
    if res.beam_steps is not None:
        pick_line(res, line, step, stream_text)
        followed = " ".join(stream_text(line.ids)) or "<s>"
        if v.follow and tuple(line.ids[: len(v.follow)]) != tuple(v.follow) and line.how not in ("pruned", "stopped"):
            st.warning("The hypothesis in the link is not in this decode; following the translation shown above.")
        st.caption(md(f"Following: {followed}. {line_story(line, len(res.n_best), ch.decode.beam)}"))
    ctx = stage_context(lm, v, ch, res, line, step, src, src_tokens)
    run = ctx.run
    assert isinstance(run, Decoded)  # the step view's run: a decode followed along a line
    rows, reads, predicts, table = run.rows, ctx.reads, ctx.predicts, run.table
    r_now = rows[-1]
    cur = res.steps[step]
    p_next = line.probs[step]
    session.sync_url(replace(v, step=step))

    cs = chips(line, step, v.user_forced)
    items = [
        (f"{show_token(label)} {fmt_p(c.prob)}".strip(), "orange" if c.forced else "blue")
        for c, label in zip(cs, reads[1:])  # the chips are the decoder inputs after <s>
    ]
    with st.container(key="chips"):
        head = f"**Generated so far ({len(cs)} token{'s' if len(cs) != 1 else ''}):** "
        empty = "_nothing yet — the decoder has only seen_ " + badges([("<s>", "gray")])
        st.markdown(head + (badges(items) if items else empty))
        if any(c.forced for c in cs):
            st.caption("Orange tokens were forced by you; blue ones the model chose.")
    pruned_here = line.how == "pruned" and step == line.end
    note = " — forced by you" if step in v.user_forced else " — pruned here" if pruned_here else ""
    with st.container(key="next_chip"):
        st.markdown(
            f"**Position {step}** of 0–{n - 1} reads {badges([(show_token(reads[-1]), 'gray')])}"
            f" → predicts {badges([(f'{show_token(predicts[-1])} (p = {fmt_p(p_next)}){note}', 'green')])}"
        )
    clear = st.empty()  # always there: Clear coming or going moves no element after it (each would be drawn anew)
    if ch.prefix:
        clear.button("Clear forced tokens", key="clear_forced", on_click=_clear_forced)

    with tagged(str(step)):  # a figure still drawn for the position before is marked until drawn (page.js)
        stages.render(ctx, stage)

    live_table = None
    if res.beam_steps is not None and stages.shows(stage, "output"):
        live_table = viz.beam_table(res.beam_steps[step].live, stream_text, impossible=IMPOSSIBLE)
    base = ch.unforced()
    keep_user = frozenset(i for i in v.user_forced if i < step)
    on = whatif.Forcing(partial(_force, keep_user=keep_user, base=base), partial(_decode_ahead, lm, base, src))
    whatif_panel(partial(whatif.render, lm, v, cur, r_now, list(line.inputs[1 : step + 1]), step, tok_text, on))
    make = partial(handout_bytes, lm, v, ch, res, line, src, src_tokens, stage)
    beam = res.beam_steps is not None
    said = followed_summary(line, len(res.n_best), ch.decode.beam, stream_text(line.ids), beam)
    at = export.Position(ch, res, list(rows), step, list(reads), list(src_tokens), said)
    export_panel(partial(export.render_decode, lm, at, table, tok_text, live_table, make))


# Each panel is a fragment of its own inside the step view's: opening or closing it, or a choice inside it, reruns
# the panel alone, and the step view's figures, tables and equations are left as they are on the page.
@st.fragment
def whatif_panel(render: Callable[[], None]) -> None:
    panel_fragment(WHATIF_LABEL, "whatif_open", render)


@st.fragment
def export_panel(render: Callable[[], None]) -> None:
    panel_fragment(export.LABEL, "export_open", render)


def panel_fragment(label: str, key: str, render: Callable[[], None]) -> None:
    try:
        if panel := lazy_panel(label, key):
            with panel:
                render()
    except Exception as e:  # rerun alone, outside the step view's own guard
        fail("Could not show this panel", e)


def _decode_ahead(lm: LoadedModel, base: Choices, src: tuple[int, ...], prefix: tuple[int, ...]) -> None:
    """Start the decode that forcing ``prefix`` asks for (``_force``), while the reader is still choosing."""
    decode_ahead(lm, replace(base, decode=replace(base.decode, prefix=prefix)), src)


def _force(prefix: tuple[int, ...], user: frozenset[int], keep_user: frozenset[int], base: Choices) -> None:
    """Decode again with ``prefix`` forced, and draw the translation and the step view for it."""
    session.force(prefix, user, keep_user, base)
    st.rerun(session.FORCED_CHANGES)


def handout_inputs(lm: LoadedModel, raw: dict) -> tuple:
    """``handout_bytes``' arguments for the view that ``raw`` (choices by name: source, max_len, stage, …)
    describes, its sentence decoded and its line followed (the end of the lesson's handout; the benchmark's)."""
    view, _ = clamp_view(raw, session.limits_of(lm.cfg, str(lm.path)))
    src = prepare_source(view.source, lm.tokenizer, lm.cfg)
    if src is None:
        raise ValueError("no sentence to decode for the handout")
    ch = view.choices(str(lm.path))
    res = get_decode(lm, ch, src.ids)
    line = follow_line(res, lm.cfg.eos_id, view.follow)
    return lm, view, ch, res, line, src.ids, lm.tokenizer.tokens(list(src.ids)), view.stage


def handout_bytes(
    lm: LoadedModel,
    v: View,
    ch: Choices,
    res: DecodeResult,
    line: Line,
    src: tuple[int, ...],
    src_tokens: list[str],
    stage: str,
) -> bytes:
    """The handout of the followed line (``views.handout``): the sentence, its translation, the choices, and at
    every position the chosen stages' figures."""
    forced = sorted(i for i in v.user_forced if i < len(line.predicts))
    token = token_texter(lm)
    yours = ", ".join(f"‘{show_token(token(line.predicts[i]))}’ at position {i}" for i in forced)
    lines = (
        ("English", v.source),
        ("French (the line followed)", lm.tokenizer.decode([i for i in line.ids if i != lm.cfg.eos_id])),
        ("Model", Path(str(lm.path)).name),
        ("Decoding", ch.describe() + (f"; forced by you: {yours}" if forced else "")),
        ("Layer and head", f"layer {v.layer}, {head_label(v.head)}"),
    )
    context = lambda t: stage_context(lm, v, ch, res, line, t, src, src_tokens)  # noqa: E731
    return handout.page(context, line.end + 1, stage, line.probs, lines).encode()


def stage_context(
    lm: LoadedModel,
    v: View,
    ch: Choices,
    res: DecodeResult,
    line: Line,
    step: int,
    src: tuple[int, ...],
    src_tokens: list[str],
) -> StageContext:
    """What the stages draw at position ``step`` of the followed ``line`` (the step view's, and the handout's at
    every position)."""
    rows = list(line.rows[: step + 1])
    # each input read with what follows it, so the last one is named by its character too ("ъ 1/2")
    labels = path_labels(lm, [*line.inputs[: step + 1], line.predicts[step]])
    reads, predicts = labels[:-1], labels[1:]
    table = functools.cache(partial(position_table, res, line, step, reads, predicts, v.user_forced))  # when shown
    run = Decoded(lm, ch, res, line, step, src, v.reference, table, predicts[-1])
    arrays = stack_view(res.steps, rows, step, keep=layer_keep(v.layer))  # the shown layer only
    return StageContext(lm, v, run, arrays, reads, predicts, src_tokens, step, incremental=True, causal=True, key="dec")


def position_table(
    res: DecodeResult,
    line: Line,
    step: int,
    reads: Sequence[str],
    predicts: Sequence[str],
    user_forced: Container[int],
) -> pd.DataFrame:
    """The decoder-input table of positions 0..step along the line (shown, and exported as CSV and JSON)."""
    import pandas as pd  # with the first table, as in viz.decoding.loss_table

    return pd.DataFrame(
        {
            "position": np.arange(step + 1),
            "reads (decoder input)": [show_token(t) for t in reads],
            "predicts (chosen next token)": [show_token(t) for t in predicts],
            "p(predicted)": [round(p, 3) for p in line.probs[: step + 1]],
            "entropy (nats)": [float(res.steps[i].entropy[line.rows[i]]) for i in range(step + 1)],
            "forced by you": [i in user_forced for i in range(step + 1)],
        }
    )


def fmt_p(p: float | None) -> str:
    return "" if p is None or p != p else f"{p:.3f}"


def stepper(n: int, help: str = POSITION_HELP) -> None:
    """The step buttons and the position slider (the step view and the teacher-forcing view share them)."""
    s = st.session_state
    with st.container(horizontal=True, key="stepper", vertical_alignment="bottom"):
        for key, icon, tip in STEP_BUTTONS:
            st.button("", key=key, icon=icon, on_click=session.step_to, args=(key, n), help=tip)
        if n > 1:
            if s.get(SLIDER_RANGE) != n and "step" in s:
                # another range is another slider to the browser, which would show (and send back) 0 unless told
                # the position: a followed line that ends elsewhere keeps the position shown
                s["step"] = s["step"]
            s[SLIDER_RANGE] = n
            st.slider("Position", 0, n - 1, key="step", width=420, help=help)


def pick_line(res: DecodeResult, line: Line, step: int, stream_text: Callable[[Sequence[int]], list[str]]) -> None:
    """The picker: the final candidates, then the hypotheses live at this position."""
    s = st.session_state
    assert res.beam_steps is not None  # a beam search's decode: the picker is drawn for no other
    live = res.beam_steps[step].live
    ids_by_option: dict[str, tuple[int, ...]] = {}
    labels: dict[str, str] = {}

    def text(ids) -> str:  # long hypotheses keep their start and their end, where candidates differ
        t = " ".join(stream_text(ids)) or "<s>"
        return t if len(t) <= PICK_CHARS else f"{t[: PICK_CHARS // 2 - 2]} … {t[-(PICK_CHARS // 2 - 2) :]}"

    for i, h in enumerate(res.n_best):
        if h.logprob > IMPOSSIBLE:
            key = f"final:{i}"
            ids_by_option[key] = tuple(h.ids)
            labels[key] = f"final {i + 1}: {text(h.ids)}  (score {h.score:.3f})"
    for r in live_rows(res, step):
        key = f"live:{r}"
        ids_by_option[key] = tuple(live[r].ids)
        labels[key] = f"live at position {step}: {text(live[r].ids)}  (log p {live[r].logprob:.2f})"
    here = f"final:{line.final_rank - 1}" if line.final_rank else f"live:{line.rows[step]}"
    s["follow_pick"] = here if here in ids_by_option else next(iter(ids_by_option))
    st.selectbox(
        "Follow hypothesis",
        list(ids_by_option),
        key="follow_pick",
        format_func=labels.__getitem__,
        on_change=session.follow_pick,
        args=(ids_by_option,),
        help="By default the view follows the translation shown above, from <s> to </s>. Pick another final "
        "candidate, or a hypothesis live at this position: it is followed to where its line ended (finished, "
        "or pruned from the beam); stepping back shows its ancestors.",
    )


def src_ids(lm: LoadedModel, ch: Choices) -> tuple[int, ...]:
    src = prepare_source(ch.source, lm.tokenizer, lm.cfg)
    return src.ids if src else (lm.cfg.eos_id,)
