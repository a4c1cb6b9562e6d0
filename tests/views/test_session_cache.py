"""The per-session caches are bounded in bytes as well as in entries, per session and for the whole process."""

from __future__ import annotations

import gc
from dataclasses import dataclass

import numpy as np
import torch

from views.cache import (
    PROCESS_CACHE_BYTES,
    SESSION_CACHE,
    SESSION_CACHE_BYTES,
    CachePool,
    SessionCache,
    estimate_bytes,
)

MIB = 2**20


def block(mib: float, fill: float = 0.0) -> np.ndarray:
    return np.full(int(mib * MIB) // 8, fill, dtype=np.float64)


@dataclass(frozen=True)
class Record:
    arrays: dict
    steps: list
    note: str = "x"


def test_estimate_counts_arrays_through_containers_once():
    a, b = block(1), block(2)
    rec = Record(arrays={"a": a, "view": a[10:20], "pair": (b, b)}, steps=[{"b": b.reshape(2, -1)}, a.T])
    size = estimate_bytes(rec)
    assert a.nbytes + b.nbytes <= size <= a.nbytes + b.nbytes + 4096  # a view counts its base, once
    t = torch.zeros(1000, dtype=torch.float32)
    assert 4000 <= estimate_bytes({"t": t, "t_again": t[:10]}) <= 4000 + 1024
    assert estimate_bytes(torch.nn.Linear(1000, 1000)) < 1024  # a shared model is never counted


def test_session_cache_evicts_least_recently_used_past_its_byte_bound():
    pool = CachePool(max_bytes=10**12)
    cache = SessionCache(entries=100, max_bytes=10 * MIB, pool=pool)
    for i in range(4):
        cache.put("decodes", i, block(3, i))
    assert [k for _, k in cache.data] == [1, 2, 3]  # 4 × 3 MiB > 10 MiB: the oldest went
    assert 9 * MIB <= cache.nbytes <= 9 * MIB + 3 * 4096
    assert cache.nbytes == sum(estimate_bytes(v) for v, _, _ in cache.data.values())
    assert cache.get("decodes", 1)[0] == 1  # used: now the most recent
    cache.put("traces", "t", block(3))
    assert [k for _, k in cache.data] == [3, 1, "t"]  # one bound over every cache name: 2 was the oldest
    assert cache.sizes().keys() == {"decodes", "traces"} and sum(cache.sizes().values()) == cache.nbytes
    assert cache.get("decodes", 2, "gone") == "gone"
    big = block(11)
    assert cache.put("decodes", "big", big) is big  # returned, but larger than the whole bound: not kept
    assert cache.get("decodes", "big") is None and len(cache) == 3
    assert pool.stats() == {"sessions": 1, "entries": 3, "bytes": cache.nbytes, "max_bytes": 10**12}


def test_session_cache_keeps_the_last_entries_of_each_name():
    cache = SessionCache(entries=2, max_bytes=10**12, pool=CachePool(max_bytes=10**12))
    for i in range(3):
        cache.put("decodes", i, i)
        cache.put("traces", i, i)
    assert sorted(cache.data) == [("decodes", 1), ("decodes", 2), ("traces", 1), ("traces", 2)]
    cache.put("decodes", 1, "again")  # a new value for a key replaces the old one, counted once
    assert cache.get("decodes", 1) == "again" and len(cache) == 4
    assert cache.nbytes == sum(size for _, size, _ in cache.data.values())


def test_pool_bounds_every_session_together_and_forgets_closed_sessions():
    pool = CachePool(max_bytes=10 * MIB)
    a = SessionCache(entries=10, max_bytes=8 * MIB, pool=pool)
    b = SessionCache(entries=10, max_bytes=8 * MIB, pool=pool)
    a.put("decodes", "a1", block(3))
    b.put("decodes", "b1", block(3))
    a.put("decodes", "a2", block(3))
    assert pool.nbytes <= 10 * MIB
    b.put("decodes", "b2", block(3))  # 12 MiB in all: the least recently used entry of any session goes
    assert a.get("decodes", "a1") is None and a.get("decodes", "a2") is not None
    assert b.get("decodes", "b1") is not None and b.get("decodes", "b2") is not None
    assert pool.nbytes == a.nbytes + b.nbytes <= 10 * MIB
    del a
    gc.collect()
    assert pool.stats()["sessions"] == 1 and pool.nbytes == b.nbytes


def test_bounds():
    assert SESSION_CACHE >= 2 and 64 * MIB <= SESSION_CACHE_BYTES <= PROCESS_CACHE_BYTES


def test_a_value_another_session_keeps_is_found_and_kept_without_measuring_it_again(monkeypatch):
    pool = CachePool(max_bytes=10**12)
    a = SessionCache(entries=10, max_bytes=64 * MIB, pool=pool)
    b = SessionCache(entries=10, max_bytes=64 * MIB, pool=pool)
    value = block(2)
    a.put("decodes", ("sentence", 1), value)
    assert pool.find("decodes", ("sentence", 2)) is None and pool.find("traces", ("sentence", 1)) is None
    found = pool.find("decodes", ("sentence", 1))
    assert found is not None and found[0] is value and found[1] == a.nbytes
    monkeypatch.setattr("views.cache.estimate_bytes", lambda _: (_ for _ in ()).throw(AssertionError("measured")))
    assert b.put("decodes", ("sentence", 1), *found) is value  # the size given: not estimated again
    assert b.nbytes == a.nbytes and b.get("decodes", ("sentence", 1)) is value
    del a, b
    gc.collect()
    assert pool.find("decodes", ("sentence", 1)) is None  # gone with the sessions that kept it


def test_a_value_several_sessions_keep_counts_once_against_the_pool():
    pool = CachePool(max_bytes=10 * MIB)
    a = SessionCache(entries=10, max_bytes=10 * MIB, pool=pool)
    b = SessionCache(entries=10, max_bytes=10 * MIB, pool=pool)
    shared = block(6)
    a.put("decodes", "s", shared)
    b.put("decodes", "s", *pool.find("decodes", "s"))
    assert pool.nbytes == a.nbytes == b.nbytes and pool.stats()["bytes"] == a.nbytes  # 6 MiB, not 12
    assert a.get("decodes", "s") is shared and b.get("decodes", "s") is shared  # within the bound: both kept
    b.put("decodes", "own", block(5))  # 11 MiB in memory: the shared value goes from both before it is freed
    assert a.get("decodes", "s") is None and b.get("decodes", "s") is None and b.get("decodes", "own") is not None
    assert pool.nbytes <= 10 * MIB
