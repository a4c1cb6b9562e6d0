"""Streamlit plumbing shared by the pages: the cached model, per-session caches, safe text and figure display."""

from __future__ import annotations

import dataclasses
import gc
import itertools
import logging
import re
import sys
import threading
import types
import weakref
from collections import OrderedDict
from pathlib import Path

import numpy as np
import streamlit as st

from model.checkpoint import LoadedModel, load_model_dir, set_threads
from model.constants import MAX_BEAM
from model.decoding import decode
from model.lean import LeanDecoder
from model.steps import compact_result
from model.trace import teacher_forced_trace

from .plot import plot
from .state import MEAN_HEADS, Choices

log = logging.getLogger("decoder_lens")
# No "Share chart…" (plotly.js offers uploading the figure to its cloud by default): an offline classroom tool.
PLOTLY_CONFIG = {
    "displaylogo": False,
    "showSendToCloud": False,
    "toImageButtonOptions": {"format": "png", "scale": 2},
}
SESSION_CACHE = 4  # entries kept per session and cache name (decodes, traces, attributions, …)
# Bytes kept per session, every cache name together: the largest decode the app allows (127 tokens, beam 8,
# every stage recorded) is ~100 MiB, and one must fit; a greedy decode of a 15-token sentence is ~2 MiB.
SESSION_CACHE_BYTES = 128 * 2**20
PROCESS_CACHE_BYTES = 2 * 2**30  # every session's caches together (least recently used entries of any session go)
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
    take the column's. The graph stays on the page under ``key`` and is updated in place (``views.plot``); out of
    view, when it scrolls near."""
    cfg = {**PLOTLY_CONFIG, "toImageButtonOptions": {**PLOTLY_CONFIG["toImageButtonOptions"], "filename": key}}
    plot(fig, key, cfg)


def fail(message: str, exc: BaseException) -> None:
    log.exception(message)
    st.error(f"{md(message)}: {md(type(exc).__name__)} — {md(exc)}")


def token_texter(lm: LoadedModel):
    def text(i: int) -> str:  # a token alone: a byte is named by its character only if it spells one by itself
        return "∅" if int(i) < 0 else lm.tokenizer.tokens([int(i)])[0]

    return text


def path_labels(lm: LoadedModel, ids) -> list[str]:
    """One label per id of a token stream, read as a stream: byte pieces are named by the character they spell
    ("В 1/2") wherever the stream holds the whole character; -1 (a dropped beam hypothesis) is ∅."""
    labels = iter(lm.tokenizer.tokens([int(i) for i in ids if int(i) >= 0]))
    return ["∅" if int(i) < 0 else next(labels) for i in ids]


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
# Per-session caches (in st.session_state, one per user), bounded in entries and in bytes.


def estimate_bytes(obj) -> int:
    """The memory ``obj`` keeps alive, estimated: numpy arrays by the buffer they hold (a view counts its base, once),
    torch tensors by their storage, through dataclasses, dicts, lists, tuples and sets; every object counted once.
    A shared model (an ``nn.Module``), classes, functions and modules count nothing: no cached value owns them."""
    torch = sys.modules.get("torch")
    seen: set[int] = set()
    storages: set[int] = set()
    total, todo = 0, [obj]
    while todo:
        o = todo.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        if isinstance(o, np.ndarray):
            base = o
            while isinstance(base.base, np.ndarray):
                base = base.base
            if base is not o:
                if id(base) in seen:
                    continue
                seen.add(id(base))
            total += base.nbytes
        elif torch is not None and isinstance(o, torch.Tensor):
            storage = o.untyped_storage()
            if storage.data_ptr() not in storages:
                storages.add(storage.data_ptr())
                total += storage.nbytes()
        elif isinstance(o, str | bytes | bytearray | int | float | complex | bool | np.generic) or o is None:
            total += sys.getsizeof(o, 0)
        elif isinstance(o, type | types.ModuleType | types.FunctionType | types.MethodType) or (
            torch is not None and isinstance(o, torch.nn.Module)
        ):
            continue
        elif isinstance(o, dict):
            total += sys.getsizeof(o, 0)
            todo += o.keys()
            todo += o.values()
        elif isinstance(o, list | tuple | set | frozenset):
            total += sys.getsizeof(o, 0)
            todo += o
        elif dataclasses.is_dataclass(o):
            total += sys.getsizeof(o, 0)
            todo += (getattr(o, f.name) for f in dataclasses.fields(o))
        else:
            total += sys.getsizeof(o, 0)
            todo += getattr(o, "__dict__", {}).values()
    return total


class CachePool:
    """Every session's caches together, bounded by ``max_bytes``: over it, the least recently used entries of any
    session go first. Holds the caches weakly (a closed session's cache goes with its session state); one lock
    guards every cache of the pool, since each session's script runs in its own thread."""

    def __init__(self, max_bytes: int = PROCESS_CACHE_BYTES):
        self.max_bytes = max_bytes
        self.lock = threading.RLock()
        self.caches: weakref.WeakSet[SessionCache] = weakref.WeakSet()
        self._tick = itertools.count()

    def tick(self) -> int:
        return next(self._tick)

    @property
    def nbytes(self) -> int:
        with self.lock:
            return sum(c.nbytes for c in list(self.caches))

    def stats(self) -> dict:
        with self.lock:
            caches = list(self.caches)
            return {"sessions": len(caches), "entries": sum(len(c) for c in caches),
                    "bytes": sum(c.nbytes for c in caches), "max_bytes": self.max_bytes}  # fmt: skip

    def fit(self) -> None:
        """Evict the least recently used entries of any session until the pool is within its bound."""
        with self.lock:
            caches = [c for c in list(self.caches) if len(c)]
            total = sum(c.nbytes for c in caches)
            while total > self.max_bytes and caches:
                oldest = min(caches, key=lambda c: c.oldest_tick())
                total -= oldest.evict_oldest()
                caches = [c for c in caches if len(c)]


POOL = CachePool()


class SessionCache:
    """One session's caches: per cache name the last ``entries`` keys, and all names together within ``max_bytes``
    (least recently used entries evicted first, whatever their name). A value larger than ``max_bytes`` alone is
    returned but not kept (the next run computes it again)."""

    def __init__(self, entries: int = SESSION_CACHE, max_bytes: int = SESSION_CACHE_BYTES, pool: CachePool = POOL):
        self.entries, self.max_bytes, self.pool = entries, max_bytes, pool
        self.data: OrderedDict[tuple, tuple[object, int, int]] = OrderedDict()  # (name, key) -> value, bytes, tick
        self.nbytes = 0
        with pool.lock:
            pool.caches.add(self)

    def __len__(self) -> int:
        return len(self.data)

    def get(self, name: str, key, default=None):
        with self.pool.lock:
            item = self.data.get((name, key))
            if item is None:
                return default
            self.data.move_to_end((name, key))
            self.data[name, key] = (item[0], item[1], self.pool.tick())
            return item[0]

    def put(self, name: str, key, value):
        size = estimate_bytes(value)
        with self.pool.lock:
            self._drop((name, key))
            if size > self.max_bytes:
                log.warning("%s entry of %.0f MiB exceeds the session cache bound (%.0f MiB): not kept",
                            name, size / 2**20, self.max_bytes / 2**20)  # fmt: skip
                return value
            self.data[name, key] = (value, size, self.pool.tick())
            self.nbytes += size
            same = [k for k in self.data if k[0] == name]
            for k in same[: max(0, len(same) - self.entries)]:
                self._drop(k)
            while self.nbytes > self.max_bytes:
                self.evict_oldest()
            self.pool.fit()
        return value

    def oldest_tick(self) -> int:
        return next(iter(self.data.values()))[2]

    def evict_oldest(self) -> int:
        """Drop the least recently used entry; returns its size."""
        return self._drop(next(iter(self.data)))

    def _drop(self, k) -> int:
        item = self.data.pop(k, None)
        if item is None:
            return 0
        self.nbytes -= item[1]
        return item[1]

    def sizes(self) -> dict[str, int]:
        """Bytes per cache name."""
        with self.pool.lock:
            out: dict[str, int] = {}
            for (name, _), (_, size, _) in self.data.items():
                out[name] = out.get(name, 0) + size
            return out


_MISSING = object()


def session_cache() -> SessionCache:
    """The session's caches (created on its first use)."""
    s = st.session_state
    if "session_cache" not in s:
        s["session_cache"] = SessionCache()
    return s["session_cache"]


def cached(name: str, key, compute):
    """``compute()`` once per ``key`` in the session's cache ``name``: the last SESSION_CACHE keys of each name are
    kept, all of the session's within SESSION_CACHE_BYTES and every session's within PROCESS_CACHE_BYTES."""
    cache = session_cache()
    value = cache.get(name, key, _MISSING)
    if value is _MISSING:
        value = cache.put(name, key, compute())
    return value


def get_decode(lm: LoadedModel, ch: Choices, src_ids: tuple[int, ...]):
    """The recorded decode of ``ch`` (compacted: O(T) K/V records)."""

    def compute():
        with st.spinner("Decoding…"):
            return compact_result(decode(lm.model, src_ids, ch.options(record=True), lean_decoder(lm)))

    return cached("decodes", ch, compute)


def get_trace(lm: LoadedModel, src_ids: tuple[int, ...], target, causal: bool):
    """The teacher-forced trace of ``target`` (text or ids) for the source."""
    key = (str(lm.path), src_ids, target if isinstance(target, str) else tuple(target), causal)
    return cached(
        "traces", key, lambda: teacher_forced_trace(lm.model, lm.tokenizer, list(src_ids[:-1]), target, causal=causal)
    )
