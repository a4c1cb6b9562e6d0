"""Parallel corpora, the held-out split, the shared BPE tokenizer and length-bucketed batches.

Corpora (read-only, never copied into the repo; default ``<repo>/../shared/data``):
- Tatoeba eng-fra ``tatoeba-fra-eng/fra.txt``: ``english<TAB>french[<TAB>attribution]``.
- Multi30k ``multi30k/{train,val,test_2016_flickr,test_2017_flickr}.{en,fr}.gz``, line aligned.

The Tatoeba split is by English sentence and needs no stored ids: an English sentence (NFC,
whitespace collapsed) goes to ``test`` when ``sha256(f"{seed}\\t{english}") mod 1000 < 25``,
to ``val`` when it is in ``[25, 37)``, else to ``train``; every translation of that sentence
follows it (and Multi30k training pairs with a held-out English sentence are dropped:
none on the real data). ``split_digest`` is the sha256 of the sorted, newline-joined test English sentences.
"""

from __future__ import annotations

import gzip
import hashlib
import random
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from model.core.tokenizer import SPECIALS, Tokenizer

SPLIT_SEED = 1234
TEST_PER_MILLE = 25  # ≈ 2.5 % of the 98,659 English sentences: ≈ 2,450 test sources
VAL_PER_MILLE = 12  # ≈ 1,200 validation sources
TATOEBA_FILE = Path("tatoeba-fra-eng") / "fra.txt"
MULTI30K_DIR = Path("multi30k")
MULTI30K_TESTS = ("test_2016_flickr", "test_2017_flickr")

Pair = tuple[str, str]

_WS = re.compile(r"\s+")


def default_data_dir() -> Path:
    return Path(__file__).resolve().parents[3] / "shared" / "data"


def normalize(text: str) -> str:
    """NFC, non-breaking spaces to spaces, whitespace collapsed and stripped."""
    return _WS.sub(" ", unicodedata.normalize("NFC", text).replace("\u00a0", " ").replace("\u202f", " ")).strip()


def read_tatoeba(path: str | Path) -> list[Pair]:
    pairs = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            if len(cols) < 2:
                continue
            en, fr = normalize(cols[0]), normalize(cols[1])
            if en and fr:
                pairs.append((en, fr))
    return pairs


def _read_lines(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [normalize(line) for line in f]


def read_multi30k(directory: str | Path, split: str) -> list[Pair]:
    directory = Path(directory)
    en = _read_lines(directory / f"{split}.en.gz")
    fr = _read_lines(directory / f"{split}.fr.gz")
    if len(en) != len(fr):
        raise ValueError(f"{directory}/{split}: {len(en)} English lines but {len(fr)} French lines")
    return [(e, f) for e, f in zip(en, fr) if e and f]


def split_of(english: str, seed: int = SPLIT_SEED) -> str:
    """'test', 'val' or 'train' for one (normalized) English sentence; deterministic."""
    h = int.from_bytes(hashlib.sha256(f"{seed}\t{english}".encode()).digest()[:8], "big") % 1000
    if h < TEST_PER_MILLE:
        return "test"
    if h < TEST_PER_MILLE + VAL_PER_MILLE:
        return "val"
    return "train"


def split_tatoeba(pairs: Iterable[Pair], seed: int = SPLIT_SEED) -> dict[str, list[Pair]]:
    out: dict[str, list[Pair]] = {"train": [], "val": [], "test": []}
    cache: dict[str, str] = {}
    for en, fr in pairs:
        side = cache.get(en)
        if side is None:
            side = cache[en] = split_of(en, seed)
        out[side].append((en, fr))
    return out


def split_digest(test_pairs: Iterable[Pair]) -> str:
    return hashlib.sha256("\n".join(sorted({en for en, _ in test_pairs})).encode()).hexdigest()


def group_by_source(pairs: Iterable[Pair]) -> list[tuple[str, list[str]]]:
    """[(english, [all its French translations])] in first-seen order."""
    groups: dict[str, list[str]] = {}
    for en, fr in pairs:
        refs = groups.setdefault(en, [])
        if fr not in refs:
            refs.append(fr)
    return list(groups.items())


def reference_streams(groups: Sequence[tuple[str, list[str]]]) -> list[list[str]]:
    """sacrebleu wants a fixed number of reference streams: use the largest count and fill the
    missing slots of a sentence with copies of its first reference (a duplicate reference changes
    neither the clipped n-gram counts nor the closest reference length, so scores are exact)."""
    n = max((len(refs) for _, refs in groups), default=1)
    return [[refs[i] if i < len(refs) else refs[0] for _, refs in groups] for i in range(n)]


@dataclass
class Corpora:
    train: list[Pair]
    val_tatoeba: list[Pair]
    val_multi30k: list[Pair]
    test_tatoeba: list[Pair]
    digest: str
    counts: dict[str, int] = field(default_factory=dict)


def load_corpora(data_dir: str | Path | None = None, seed: int = SPLIT_SEED) -> Corpora:
    """Training pairs (Tatoeba train + Multi30k train) and the held-out sets."""
    data_dir = Path(data_dir) if data_dir is not None else default_data_dir()
    tat = split_tatoeba(read_tatoeba(data_dir / TATOEBA_FILE), seed)
    held_out = {en for en, _ in tat["test"] + tat["val"]}
    m_train = [p for p in read_multi30k(data_dir / MULTI30K_DIR, "train") if p[0] not in held_out]  # 0 on the real data
    m_val = read_multi30k(data_dir / MULTI30K_DIR, "val")
    counts = {
        "tatoeba_train_pairs": len(tat["train"]),
        "tatoeba_val_pairs": len(tat["val"]),
        "tatoeba_test_pairs": len(tat["test"]),
        "tatoeba_val_sources": len({e for e, _ in tat["val"]}),
        "tatoeba_test_sources": len({e for e, _ in tat["test"]}),
        "multi30k_train_pairs": len(m_train),
        "multi30k_val_pairs": len(m_val),
    }
    return Corpora(tat["train"] + m_train, tat["val"], m_val, tat["test"], split_digest(tat["test"]), counts)


def load_multi30k_test(data_dir: str | Path | None, split: str) -> list[Pair]:
    data_dir = Path(data_dir) if data_dir is not None else default_data_dir()
    return read_multi30k(data_dir / MULTI30K_DIR, split)


def _byte_fallback_tokenizer(vocab: dict[str, int], merges: list) -> Tokenizer:
    """A BPE with byte fallback over ``vocab`` (which holds the 256 byte tokens) and ``merges``: Metaspace word
    marks and no normalizer, so decode(encode(s)) == s for every string (the corpora are NFC already, see
    ``normalize``). The special tokens are ordinary vocabulary entries, not added tokens, so "</s>" typed in a
    sentence is text, not the end of it."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, models, pre_tokenizers

    from model.core.tokenizer import META

    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in merges]
    hf = HFTokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True))
    hf.pre_tokenizer = pre_tokenizers.Metaspace(replacement=META, prepend_scheme="never")
    hf.decoder = decoders.Sequence(
        [decoders.Replace(META, " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    return Tokenizer(hf)


def train_tokenizer(texts: Iterable[str], vocab_size: int = 8000) -> Tokenizer:
    """One shared BPE over both languages with byte fallback: the special tokens, the 256 byte tokens, then
    ``vocab_size - 260`` learned pieces (see ``_byte_fallback_tokenizer``)."""
    import json

    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import models, pre_tokenizers, trainers

    from model.core.tokenizer import BYTE_TOKENS, META

    n_fixed = len(SPECIALS) + len(BYTE_TOKENS)
    if vocab_size <= n_fixed:
        raise ValueError(f"vocab_size must be more than the {n_fixed} special and byte tokens, not {vocab_size}")
    base = HFTokenizer(models.BPE(unk_token="<unk>"))
    base.pre_tokenizer = pre_tokenizers.Metaspace(replacement=META, prepend_scheme="never")
    trainer = trainers.BpeTrainer(vocab_size=vocab_size - n_fixed, min_frequency=2, show_progress=False)
    base.train_from_iterator((" " + t for t in texts), trainer=trainer)
    learned = json.loads(base.to_str())["model"]
    vocab = {t: i for i, t in enumerate((*SPECIALS, *BYTE_TOKENS))}
    for tok, _ in sorted(learned["vocab"].items(), key=lambda kv: kv[1]):
        vocab.setdefault(tok, len(vocab))
    return _byte_fallback_tokenizer(vocab, learned["merges"])


def add_byte_fallback(tokenizer: Tokenizer) -> Tokenizer:
    """The same BPE (every existing id and merge unchanged) with the 256 byte tokens appended after the last id
    and byte fallback on, so that a model trained on ``tokenizer`` can continue on it with 256 new embedding
    rows and nothing else changed. A Metaspace BPE only; one with byte fallback comes back as it is."""
    import json

    from model.core.tokenizer import BYTE_TOKENS

    if tokenizer.byte_fallback:
        return tokenizer
    spec = json.loads(tokenizer.hf.to_str())
    if spec["model"].get("type") != "BPE":
        raise ValueError("only a BPE vocabulary can get byte fallback this way")
    vocab = dict(spec["model"]["vocab"])
    for t in BYTE_TOKENS:
        vocab.setdefault(t, len(vocab))
    return _byte_fallback_tokenizer(vocab, spec["model"]["merges"])


def make_batches(
    src_lens: Sequence[int], tgt_lens: Sequence[int], max_tokens: int, rng: random.Random
) -> list[list[int]]:
    """Length-bucketed batches: similar lengths together, each batch ≤ max_tokens padded tokens
    (counting the longer of source and target), batch order shuffled."""
    order = list(range(len(src_lens)))
    rng.shuffle(order)  # random order within equal lengths
    order.sort(key=lambda i: (max(src_lens[i], tgt_lens[i]), src_lens[i]))
    batches: list[list[int]] = []
    cur: list[int] = []
    cur_max = 0
    for i in order:
        n = max(src_lens[i], tgt_lens[i])
        if cur and max(cur_max, n) * (len(cur) + 1) > max_tokens:
            batches.append(cur)
            cur, cur_max = [], 0
        cur.append(i)
        cur_max = max(cur_max, n)
    if cur:
        batches.append(cur)
    rng.shuffle(batches)
    return batches
