"""Streamlit plumbing shared by the pages: the cached model, per-session caches, safe text and figure display."""

from __future__ import annotations

import gc
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

import streamlit as st

from model.checkpoint import LoadedModel, load_model_dir, set_threads
from model.decoding import decode
from model.lean import LeanDecoder
from model.steps import compact_result
from model.trace import teacher_forced_trace

from .state import MAX_BEAM, MEAN_HEADS, Choices

log = logging.getLogger("decoder_lens")
PLOTLY_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}}
SESSION_CACHE = 4  # decodes / traces kept per session
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


def head_label(head) -> str:
    return "mean of heads" if head == MEAN_HEADS else f"head {head}"


def show(fig, key: str) -> None:
    """A figure at the size it chose: fixed-width figures (square attention cells) keep their width, the others
    take the column's."""
    cfg = {**PLOTLY_CONFIG, "toImageButtonOptions": {**PLOTLY_CONFIG["toImageButtonOptions"], "filename": key}}
    st.plotly_chart(fig, key=key, config=cfg, width="content" if fig.layout.width else "stretch")


def fail(message: str, exc: BaseException) -> None:
    log.exception(message)
    st.error(f"{md(message)}: {md(type(exc).__name__)} — {md(exc)}")


def token_texter(lm: LoadedModel):
    def text(i: int) -> str:
        return "∅" if int(i) < 0 else lm.tokenizer.id_to_token(int(i))

    return text


def as_read(tokens: list[str]) -> str:
    """What the model reads: its tokens joined back into text, unknown pieces shown as <unk>."""
    return "".join(t.replace("▁", " ") for t in tokens).strip()


# ---------------------------------------------------------------------------
# Cached resources (shared by every session, never mutated).


def dir_stamp(path: str) -> tuple:
    """The model files' sizes and times: a rebuilt model directory loads afresh."""
    out = []
    for name in ("config.json", "model.safetensors", "tokenizer.json", "MODEL_CARD.md"):
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


@st.cache_resource(show_spinner=False, max_entries=4)
def _lean_decoder(_lm: LoadedModel, path: str, stamp: tuple) -> LeanDecoder:
    return LeanDecoder(_lm.model, rows=MAX_BEAM)


def lean_decoder(lm: LoadedModel) -> LeanDecoder:
    """The model's decoder laid out for step-by-step decoding (~20 ms to build): once per model, shared by every
    session; its steps never modify it."""
    return _lean_decoder(lm, str(lm.path), dir_stamp(str(lm.path)))


# ---------------------------------------------------------------------------
# Per-session caches (in st.session_state, one per user).


@dataclass
class LRU:
    """A tiny bounded dict."""

    size: int = SESSION_CACHE
    data: dict = field(default_factory=dict)

    def get(self, key):
        if key in self.data:
            self.data[key] = self.data.pop(key)
            return self.data[key]
        return None

    def put(self, key, value):
        self.data.pop(key, None)
        self.data[key] = value
        while len(self.data) > self.size:
            self.data.pop(next(iter(self.data)))
        return value


def _session_cache(name: str) -> LRU:
    if name not in st.session_state:
        st.session_state[name] = LRU()
    return st.session_state[name]


def cached(name: str, key, compute):
    """``compute()`` once per ``key`` in the session's cache ``name`` (bounded: the last SESSION_CACHE keys)."""
    cache = _session_cache(name)
    value = cache.get(key)
    if value is None:
        value = cache.put(key, compute())
    return value


def get_decode(lm: LoadedModel, ch: Choices, src_ids: tuple[int, ...]):
    """The recorded decode of ``ch`` (compacted: O(T) K/V records)."""
    cache = _session_cache("decodes")
    res = cache.get(ch)
    if res is None:
        with st.spinner("Decoding…"):
            res = cache.put(ch, compact_result(decode(lm.model, src_ids, ch.options(record=True), lean_decoder(lm))))
    return res


def get_trace(lm: LoadedModel, src_ids: tuple[int, ...], target, causal: bool):
    """The teacher-forced trace of ``target`` (text or ids) for the source."""
    key = (str(lm.path), src_ids, target if isinstance(target, str) else tuple(target), causal)
    cache = _session_cache("traces")
    tr = cache.get(key)
    if tr is None:
        tr = cache.put(key, teacher_forced_trace(lm.model, lm.tokenizer, list(src_ids[:-1]), target, causal=causal))
    return tr
