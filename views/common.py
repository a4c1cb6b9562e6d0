"""Streamlit plumbing shared by the pages: the cached model, per-session caches, safe text and figure display."""

from __future__ import annotations

import gc
import logging
import re
import threading
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import Any

import streamlit as st

from model.core.constants import MAX_BEAM
from model.decode.decoding import DecodeResult, decode, source_body
from model.decode.lean import LeanDecoder
from model.decode.steps import compact_result
from model.decode.trace import Trace, teacher_forced_trace
from model.interpret.lexicon import FILE as LEXICON_FILE
from model.io.checkpoint import LoadedModel, load_model_dir, set_threads
from viz.common import Figure

from .cache import SessionCache
from .plot import Drawing, ahead, plot
from .state import MEAN_HEADS, Choices

log = logging.getLogger("decoder_lens")
# No "Share chart…" (plotly.js offers uploading the figure to its cloud by default): an offline classroom tool.
PLOTLY_CONFIG: dict[str, Any] = {
    "displaylogo": False,
    "showSendToCloud": False,
    "toImageButtonOptions": {"format": "png", "scale": 2},
}
MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~:$&\"'=^%@/;,?])")


def escape_markdown(s: object) -> str:
    """Backslash-escape every markdown/HTML-significant ASCII character; newlines become spaces."""
    return MD_SPECIAL.sub(r"\\\1", str(s).replace("\r", " ").replace("\n", " "))


md = escape_markdown


def show_token(tok: str) -> str:
    """Readable subword: SentencePiece's ▁ shown as a visible space marker."""
    return tok.replace("▁", "␣") if tok else "∅"


def badges(items: list[tuple[str, str]]) -> str:
    """A line of coloured badges (markdown directives) with every label escaped."""
    return " ".join(f":{color}-badge[{md(label)}]" for label, color in items)


def head_label(head: int | str) -> str:
    return "mean of heads" if head == MEAN_HEADS else f"head {head}"


# what a collecting thread (the handout's) holds beside its figures' keys
HEADING, EQUATION, NOTE = "\0heading", "\0equation", "\0note"


def _collected() -> list | None:
    """The list a thread that collects the page (the handout's) adds to, else None (a page run)."""
    return getattr(threading.current_thread(), "figures", None)


def heading(title: str, equation: str) -> None:
    """A section's heading (a subheader's ``###``) and the equation it opens with (``st.latex``'s display math) as one
    element: a step of All stages redraws every element of the step view, so fewer elements paint sooner. A collecting
    thread (the handout's) keeps them, in order with the figures."""
    if (collected := _collected()) is not None:
        collected.append((HEADING, (title, equation)))
        return
    st.markdown(f"### {title}\n\n$$\n{equation}\n$$")


def subheading(title: str) -> None:
    """A section's heading without an equation of its own (``st.subheader``); a collecting thread keeps it."""
    if (collected := _collected()) is not None:
        collected.append((HEADING, (title, None)))
        return
    st.subheader(title)


def equation(tex: str) -> None:
    """A displayed equation (``st.latex``); a collecting thread keeps it under the section's heading."""
    if (collected := _collected()) is not None:
        collected.append((EQUATION, tex))
        return
    st.latex(tex)


def caption(text: str) -> None:
    """A stage's sentence on what the reader sees (a caption); a collecting thread keeps it for the handout."""
    if (collected := _collected()) is not None:
        collected.append((NOTE, text))
        return
    st.caption(text)


def lazy_panel(label: str, key: str) -> Any:
    """A collapsed expander whose content runs only while it is open (``key``: its state in the session, kept from
    run to run): the container to fill, or None when it is closed. Its content then costs the server nothing, on
    every step of every student who never opens it."""
    panel = st.expander(label, key=key, on_change="rerun")
    return panel if panel.open else None


def show(fig: Figure | Drawing, key: str, ahead: tuple[Drawing, str] | None = None, pick: bool = False) -> Any:
    """A figure at the size it chose: fixed-width figures (square attention cells) keep their width, the others
    take the column's. The graph stays on the page under ``key`` and is updated in place (``views.plot``); out of
    view, when it scrolls near. ``ahead``: the figure most likely shown next and its key, drawn off the page by the
    browser meanwhile when the server has it built. In a thread that collects figures (``figures``: a list, the
    handout's), the figure is added to it instead. ``pick``: the first ``customdata`` value of the point last
    clicked, or None, is returned."""
    if (collected := _collected()) is not None:
        collected.append((key, fig))
        return None
    return plot(fig, key, _config(key), None if ahead is None else (ahead[0], ahead[1], _config(ahead[1])), pick)


def _config(key: str) -> dict:
    return {**PLOTLY_CONFIG, "toImageButtonOptions": {**PLOTLY_CONFIG["toImageButtonOptions"], "filename": key}}


def fail(message: str, exc: BaseException) -> None:
    log.exception(message)
    st.error(f"{md(message)}: {md(type(exc).__name__)} — {md(exc)}")


def token_texter(lm: LoadedModel) -> Callable[[int], str]:
    def text(i: int) -> str:  # a token alone: a byte is named by its character only if it spells one by itself
        return "∅" if int(i) < 0 else lm.tokenizer.tokens([int(i)])[0]

    return text


def path_labels(lm: LoadedModel, ids: Sequence[int]) -> list[str]:
    """One label per id of a token stream, read as a stream: byte pieces are named by the character they spell
    ("В 1/2") wherever the stream holds the whole character; -1 (a dropped beam hypothesis) is ∅."""
    labels = iter(lm.tokenizer.tokens([int(i) for i in ids if int(i) >= 0]))
    return ["∅" if int(i) < 0 else next(labels) for i in ids]


def shown_labels(lm: LoadedModel, ids: Sequence[int]) -> list[str]:
    """``path_labels`` as the page shows every token (``show_token``): a hypothesis in a table or a picker."""
    return [show_token(t) for t in path_labels(lm, ids)]


def as_read(tokens: list[str]) -> str:
    """What the model reads: its tokens joined back into text, unknown pieces shown as <unk>."""
    return "".join(t.replace("▁", " ") for t in tokens).strip()


# ---------------------------------------------------------------------------
# Cached resources (shared by every session, never mutated).


def dir_stamp(path: str) -> tuple:
    """The model files' sizes and times (its word translation table's too): a rebuilt model directory loads afresh."""
    out: list[tuple[str, int | None, int | None]] = []
    for name in ("config.json", "model.safetensors", "tokenizer.json", "MODEL_CARD.md", LEXICON_FILE):
        try:
            st_ = (Path(path) / name).stat()
            out.append((name, st_.st_size, st_.st_mtime_ns))
        except OSError:
            out.append((name, None, None))
    return tuple(out)


@st.cache_resource(show_spinner="Loading the model…", max_entries=4)
def _load_model(path: str, stamp: tuple) -> LoadedModel:
    set_threads()
    lm = load_model_dir(path)
    # torch and the model are ~250k long-lived objects: a full collection walks them all (~170 ms, holding the GIL
    # while the page waits for its last messages). Frozen, later collections skip them (~0.1 ms).
    gc.freeze()
    return lm


def load_model(path: str) -> LoadedModel:
    return _load_model(path, dir_stamp(path))


@st.cache_resource(show_spinner=False)
@st.cache_resource(show_spinner=False, max_entries=4)
def _lean_decoder(_lm: LoadedModel, path: str, stamp: tuple) -> LeanDecoder:
    return LeanDecoder(_lm.model, rows=MAX_BEAM)


def lean_decoder(lm: LoadedModel) -> LeanDecoder:
    """The model's decoder laid out for step-by-step decoding (~20 ms to build): once per model, shared by every
    session; its steps never modify it."""
    return _lean_decoder(lm, str(lm.path), dir_stamp(str(lm.path)))


# ---------------------------------------------------------------------------
# Per-session caches (in st.session_state, one per user), bounded in entries and in bytes (``views.cache``).


_MISSING = object()


def session_cache() -> SessionCache:
    """The session's caches (created on its first use)."""
    s = st.session_state
    if "session_cache" not in s:
        s["session_cache"] = SessionCache()
    return s["session_cache"]


def cached(name: str, key: Hashable, compute: Callable[[], Any], shared: bool = False) -> Any:
    """``compute()`` once per ``key`` in the session's cache ``name``: the last SESSION_CACHE keys of each name are
    kept, all of the session's within SESSION_CACHE_BYTES and every session's within PROCESS_CACHE_BYTES.
    ``shared``: the value depends on ``key`` alone and is never changed, so one another session keeps is taken."""
    cache = session_cache()
    value = cache.get(name, key, _MISSING)
    if value is _MISSING:
        found = cache.pool.find(name, key) if shared else None
        value = cache.put(name, key, *found) if found else cache.put(name, key, compute())
    return value


def get_decode(lm: LoadedModel, ch: Choices, src_ids: tuple[int, ...]) -> DecodeResult:
    """The recorded decode of ``ch`` (compacted: O(T) K/V records): the same for every session that asks for it
    (a class typing the sentence on the board decodes it once), so shared between sessions while one keeps it.
    A decode started ahead (``decode_ahead``) is waited for rather than started again."""
    key = (ch, src_ids, dir_stamp(str(lm.path)))
    job = st.session_state.get(DECODES_AHEAD, {}).pop(key, None)

    def compute():
        with st.spinner("Decoding…"):
            if job is not None:
                job.exception()  # decoded into the cache, or failed: then it is decoded here and the error shown
                found = session_cache().get("decodes", key)
                if found is not None:
                    return found
            return _decoded(lm, ch, src_ids, lean_decoder(lm))

    return cached("decodes", key, compute, shared=True)


def _decoded(lm: LoadedModel, ch: Choices, src_ids: tuple[int, ...], lean: LeanDecoder):
    return compact_result(decode(lm.model, src_ids, ch.options(record=True), lean))


DECODES_AHEAD = "decodes_ahead"  # the session's decodes started ahead, by their cache key: {key: Future}


def decode_ahead(lm: LoadedModel, ch: Choices, src_ids: tuple[int, ...]) -> None:
    """Decode ``ch`` into the session's cache off the page's run (``views.plot.ahead``), unless it is kept already:
    the decode the reader most likely asks for next (the token chosen in *What if?*), ready or under way when they
    do. A decode started ahead for another choice and not begun yet is dropped."""
    key, cache = (ch, src_ids, dir_stamp(str(lm.path))), session_cache()
    pending = st.session_state.setdefault(DECODES_AHEAD, {})
    if key in pending or cache.get("decodes", key) is not None or cache.pool.find("decodes", key):
        return
    for job in pending.values():
        job.cancel()
    pending.clear()
    pending[key] = ahead(_decode_into, cache, key, lm, ch, src_ids, lean_decoder(lm))  # its resource got here


def _decode_into(cache: SessionCache, key, lm: LoadedModel, ch: Choices, src_ids, lean: LeanDecoder) -> None:
    if cache.get("decodes", key) is None:
        cache.put("decodes", key, _decoded(lm, ch, src_ids, lean))


def get_trace(lm: LoadedModel, src_ids: tuple[int, ...], target: str | Sequence[int], causal: bool) -> Trace:
    """The teacher-forced trace of ``target`` (text or ids) for the source."""
    key = (str(lm.path), src_ids, target if isinstance(target, str) else tuple(target), causal)
    return cached(
        "traces",
        key,
        lambda: teacher_forced_trace(lm.model, lm.tokenizer, source_body(src_ids, lm.cfg), target, causal=causal),
    )
