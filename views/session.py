"""The pages' state in st.session_state. Each run reads it once into one ``View`` (``load``: the URL on the session's
first run, every value bounded once, written back for the widgets), and passes that view down; nothing below reads
the session's choices again. The callbacks here are the only other writers: a click changes the state, the run that
follows renders it."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from model.core.config import ModelConfig

from .common import log
from .state import (
    VIEW_FIELDS,
    WIDGETS,
    Choices,
    Limits,
    View,
    choice,
    clamp_step,
    clamp_view,
    from_query,
    move,
    number,
    offered_model_dirs,
    to_query,
    with_choices,
)

LOADED = "url_loaded"  # set once the session has read its URL
# Set once the layer or head was chosen (by the link or in the sidebar): until then the attribution stage may open
# on the head that agrees best with its attribution (``open_on``).
LAYER_HEAD_CHOSEN = "layer_head_chosen"
PENDING_LAYER_HEAD = "pending_layer_head"
FRAGMENT_VIEW = "fragment_view"  # the view a full run hands its fragment (a fragment's own rerun reads afresh)
# Explore's fragments that a forced token changes: forcing or clearing reruns these two, not the whole page (the
# sentence box, the examples, the sidebar and the encoder stay as they are)
TRANSLATION_FRAGMENT, STEP_FRAGMENT = "translation", "step_view"
FORCED_CHANGES = (TRANSLATION_FRAGMENT, STEP_FRAGMENT)
PRESET_CONTRAST = "preset_contrast"  # the contrast word a Compare preset filled in, while its pair stands


def limits_of(cfg: ModelConfig, model_path: str | None = None) -> Limits:
    """What the model ``cfg`` describes allows, and, given its directory, the other model directories the server
    offers (by name: Compare's model for sentence B)."""
    models: tuple[str, ...] = ()
    if model_path is not None:
        here = Path(model_path).resolve()
        models = tuple(p.name for p in offered_model_dirs() if p.resolve() != here)
    return Limits(cfg.vocab_size, cfg.max_len, cfg.n_decoder_layers, cfg.n_heads, models)


def keep_widget_values() -> None:
    """Keep the choices' widget values while their widgets are not on the page (another tab, another page): the page
    script calls it first on every run, before any page runs or is switched to."""
    s = st.session_state
    for key in WIDGETS:
        if key in s:
            s[key] = s[key]


def load(limits: Limits, model_dir: str, model_name: str) -> tuple[View, list[str]]:
    """The run's view, and one message per value that had to change. Runs before any widget of the page exists."""
    s = st.session_state
    msgs: list[str] = []
    raw = {name: s[name] for name in VIEW_FIELDS if name in s}
    raw["model"] = model_name
    if not s.get(LOADED):
        s[LOADED] = True
        url, msgs = from_query(st.query_params.to_dict())
        raw.update({k: v for k, v in url.items() if k != "model"})
        if "step" in url:  # the decode's length bounds it, once known
            s["pending_step"], s["step_from_link"] = url["step"], True
        s["forced_base"] = None  # the forced prefix from the link belongs to the link's sentence
        if "layer" in url or "head" in url:
            s[LAYER_HEAD_CHOSEN] = True
    if PENDING_LAYER_HEAD in s:  # asked for by the last run, before the sidebar's widgets exist
        raw["layer"], raw["head"] = s.pop(PENDING_LAYER_HEAD)
    view, more = clamp_view(raw, limits)
    view = _keep_forced(view, model_dir)
    for name in VIEW_FIELDS:
        value = choice(view, name)
        if name == "step" and "step" in s:
            continue  # bounded by the decode's length (``at_position``)
        if s.get(name) != value or type(s.get(name)) is not type(value):
            s[name] = value
    s[FRAGMENT_VIEW] = view
    return view, msgs + more


def _keep_forced(view: View, model_dir: str) -> View:
    """A forced prefix belongs to one sentence and one set of decoding choices: dropped when they change."""
    s = st.session_state
    base = view.choices(model_dir).unforced()
    if not view.decode.prefix:
        s.pop("forced_base", None)
    elif s.get("forced_base") is None:  # from the link: it belongs to the link's choices
        s["forced_base"] = base
    elif s["forced_base"] != base:
        clear_forced()
        return with_choices(view, forced=(), user_forced=frozenset(), follow=())
    return view


def fragment_view(view: View, limits: Limits, last: bool = True) -> View:
    """The view a fragment shows: the full run's (``view``), or, when the fragment reruns alone (a step), the
    session's choices read afresh (bounded already by the full run; nothing is reported). ``last``: the last of a
    run's fragments to ask, which takes the full run's view off the session."""
    s = st.session_state
    if (s.pop(FRAGMENT_VIEW, None) if last else s.get(FRAGMENT_VIEW)) is view:
        return view
    return clamp_view({name: s[name] for name in VIEW_FIELDS if name in s}, limits)[0]


def at_position(step: int, n: int) -> int:
    """The position shown among ``n``: the one place the step is bounded by a decode's length (the slider needs it
    within its range before it exists)."""
    bounded = clamp_step(step, n)
    if st.session_state.get("step") != bounded:
        st.session_state["step"] = bounded
    return bounded


def start_position(view: View, key: Choices, n: int) -> tuple[int, str | None]:
    """The position of a view of ``n`` positions: the view's while ``key`` (the decode) stays; a new decode starts
    at the link's position (once), where the user forced tokens, or at 0. Returns it, and a message when the link's
    position is past the last one."""
    s = st.session_state
    if s.get("step_for") == key:
        return at_position(view.step, n), None
    s["step_for"] = key
    wanted = s.pop("pending_step", 0)
    step = at_position(wanted, n)
    asked, is_number = number(wanted, int, 0)
    if s.pop("step_from_link", False) and is_number and asked > step:
        return step, f"The link's position {asked} is past the last one here ({n - 1}); showing position {n - 1}."
    return step, None


def sync_url(view: View) -> None:
    """Write the view to the URL (the URL is a convenience: never fail the page for it)."""
    chosen = ("layer", "head") if st.session_state.get(LAYER_HEAD_CHOSEN) else ()  # the link must keep the choice
    qp = to_query(view, keep=chosen)
    try:
        if st.query_params.to_dict() != qp:
            st.query_params.from_dict(qp)
    except Exception:
        log.exception("could not update the query parameters")


def open_on(view: View, layer: int, head: int) -> bool:
    """Show ``layer`` and ``head`` from the next run on (the whole page: the sidebar shows them too), unless the
    layer or head was chosen; True when the page must run again for it."""
    s = st.session_state
    if s.get(LAYER_HEAD_CHOSEN) or (view.layer, view.head) == (layer, head):
        return False
    s[PENDING_LAYER_HEAD] = (layer, head)
    return True


# ---------------------------------------------------------------------------
# Callbacks: what a click changes (the next run renders it).


def layer_head_chosen() -> None:
    """The sidebar's layer or head was changed: the user's choice from now on."""
    st.session_state[LAYER_HEAD_CHOSEN] = True


def set_source(text: str) -> None:
    st.session_state["source"] = text


def set_ablation(heads: str) -> str:
    """The heads switched off (``dec.1.cross.2,…``); returns them."""
    st.session_state["ablate"] = heads
    return heads


def set_pair(a: str, b: str, contrast: str) -> None:
    """The Compare page's minimal pair, measured from its first position."""
    s = st.session_state
    s["source"], s["source_b"], s["contrast"], s["step"] = a, b, contrast, 0
    s[PRESET_CONTRAST] = contrast


def pair_typed() -> None:
    """A sentence of the Compare page was typed: a preset's contrast word, asked of the preset's pair, goes with it
    (a contrast the user typed stays)."""
    s = st.session_state
    if s.pop(PRESET_CONTRAST, None) == s.get("contrast"):
        s["contrast"] = ""


def keep_choice(name: str, options: tuple, fallback: str) -> None:
    """Clicking the selected option of a segmented control again deselects it: ``fallback`` instead."""
    s = st.session_state
    if s.get(name) not in options:
        s[name] = fallback


def step_to(action: str, n: int) -> None:
    """⏮ ◀ ▶ ⏭ among ``n`` positions."""
    s = st.session_state
    s["step"] = move(s.get("step", 0), action, n)


def follow_pick(ids_by_option: dict[str, tuple[int, ...]]) -> None:
    s = st.session_state
    s["follow"] = ids_by_option.get(str(s.get("follow_pick")), s.get("follow", ()))


def force(prefix: tuple[int, ...], user: frozenset[int], keep_user: frozenset[int], base: Choices) -> None:
    """Decode again with ``prefix`` forced (``user``: its positions the user picked now), at its last position."""
    s = st.session_state
    s["forced"], s["user_forced"] = prefix, keep_user | user
    s["forced_base"] = base
    s["follow"] = ()
    s["pending_step"] = min(len(prefix), s.get("max_len", len(prefix)) - 1)


def clear_forced(keep_position: bool = False) -> None:
    """Back to the model's own translation (at the same position when ``keep_position``)."""
    s = st.session_state
    s["forced"], s["user_forced"], s["follow"] = (), frozenset(), ()
    s.pop("forced_base", None)
    if keep_position:
        s["pending_step"] = s.get("step", 0)
