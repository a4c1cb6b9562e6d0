"""Per-session caches bounded in entries and in bytes, per session and for every session together (least recently
used entries go first). No streamlit: ``views.common.cached`` keeps one per session."""

from __future__ import annotations

import dataclasses
import itertools
import logging
import sys
import threading
import types
import weakref
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

import numpy as np

log = logging.getLogger("decoder_lens")
SESSION_CACHE = 4  # entries kept per session and cache name (decodes, traces, attributions, …)
# Bytes kept per session, every cache name together: the largest decode the app allows (127 tokens, beam 8,
# every stage recorded) is ~100 MiB, and one must fit; a greedy decode of a 15-token sentence is ~2 MiB.
SESSION_CACHE_BYTES = 128 * 2**20
PROCESS_CACHE_BYTES = 2 * 2**30  # every session's caches together (least recently used entries of any session go)


def estimate_bytes(obj: object) -> int:
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

    def _held(self) -> dict[int, list]:
        """Every value the sessions keep, once however many keep it (a shared decode): id -> [size, holders]."""
        held: dict[int, list] = {}
        for cache in list(self.caches):
            for value, size, _ in cache.data.values():
                held.setdefault(id(value), [size, 0])[1] += 1
        return held

    @property
    def nbytes(self) -> int:
        with self.lock:
            return sum(size for size, _ in self._held().values())

    def stats(self) -> dict:
        with self.lock:
            caches = list(self.caches)
            return {
                "sessions": len(caches),
                "entries": sum(len(c) for c in caches),
                "bytes": self.nbytes,
                "max_bytes": self.max_bytes,
            }

    def find(self, name: str, key: Hashable) -> tuple[object, int] | None:
        """The value another session keeps under (``name``, ``key``) and its size, or None: a value every session
        would compute alike (a decode: the same model, sentence and choices) is computed once for them all."""
        with self.lock:
            for cache in list(self.caches):
                item = cache.data.get((name, key))
                if item is not None:
                    return item[0], item[1]
        return None

    def fit(self) -> None:
        """Evict the least recently used entries of any session until the pool is within its bound (a value several
        sessions keep counts once, and frees its memory only when the last of them lets it go)."""
        with self.lock:
            caches = [c for c in list(self.caches) if len(c)]
            held = self._held()
            total = sum(size for size, _ in held.values())
            while total > self.max_bytes and caches:
                oldest = min(caches, key=lambda c: c.oldest_tick())
                value = next(iter(oldest.data.values()))[0]
                oldest.evict_oldest()
                entry = held[id(value)]
                entry[1] -= 1
                if not entry[1]:  # its last holder let it go: its memory is freed
                    total -= entry[0]
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

    def get(self, name: str, key: Hashable, default: Any = None) -> Any:
        with self.pool.lock:
            item = self.data.get((name, key))
            if item is None:
                return default
            self.data.move_to_end((name, key))
            self.data[name, key] = (item[0], item[1], self.pool.tick())
            return item[0]

    def put(self, name: str, key: Hashable, value: Any, size: int | None = None) -> Any:
        """Keep ``value`` (``size``: its estimated bytes, when known already) and return it."""
        size = estimate_bytes(value) if size is None else size
        with self.pool.lock:
            self._drop((name, key))
            if size > self.max_bytes:
                log.warning(
                    "%s entry of %.0f MiB exceeds the session cache bound (%.0f MiB): not kept",
                    name,
                    size / 2**20,
                    self.max_bytes / 2**20,
                )
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
