"""Subword tokenizer: a thin wrapper over a Hugging Face `tokenizers` tokenizer.json.

The bundled vocabulary is a BPE with byte fallback: a character the merges do not cover is spelled as its
UTF-8 bytes, tokens ``<0x00>`` … ``<0xFF>``, so no text ever becomes ``<unk>`` and ``decode(encode(s)) == s``
for every string ``s``. Words are marked by ``▁`` (Metaspace). For such a vocabulary the wrapper, not the
tokenizer.json, adds the one leading space that marks the first word, and spells a literal ``▁`` in the text
as its bytes, so that neither a leading space nor the marker character is lost.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path

from tokenizers import Tokenizer as HFTokenizer

SPECIALS = ("<pad>", "<s>", "</s>", "<unk>")
META = "▁"
BYTE_TOKENS = tuple(f"<0x{b:02X}>" for b in range(256))
SHOWN = {" ": "␣", "\t": "⇥", "\n": "↵", META: "▁(U+2581)"}  # characters a label would hide
_BYTE = re.compile(r"<0x([0-9A-F]{2})>")


def byte_of(token: str) -> int | None:
    """The byte a byte-fallback token stands for (``<0xC3>`` -> 0xC3), else None."""
    m = _BYTE.fullmatch(token)
    return None if m is None else int(m.group(1), 16)


def readable_tokens(tokens: list[str]) -> list[str]:
    """Token labels for people: a run of byte tokens that spells characters is labelled by the character and
    the byte's place in it (``😀 1/4`` … ``😀 4/4``; ``▁`` kept when the run starts a word); the start of a
    character that the tokens end before finishing (a decode stopped mid-character) keeps its ``<0x..>`` names
    with their places (``<0xF0> 1/4``); any other byte that spells nothing valid keeps its name alone. Other
    tokens are unchanged, so labels stay one per position."""
    out = list(tokens)
    i = 0
    while i < len(tokens):
        if byte_of(tokens[i]) is None:
            i += 1
            continue
        j = i
        while j < len(tokens) and byte_of(tokens[j]) is not None:
            j += 1
        raw = bytes(b for t in tokens[i:j] if (b := byte_of(t)) is not None)
        k = 0
        while k < len(raw):  # one UTF-8 character at a time
            for n in (1, 2, 3, 4):
                try:
                    ch = raw[k : k + n].decode("utf-8")
                except UnicodeDecodeError:
                    continue
                break
            else:
                if j == len(tokens) and (n := _utf8_length(raw[k:])):
                    for m in range(len(raw) - k):
                        out[i + k + m] = f"{tokens[i + k + m]} {m + 1}/{n}"
                    break
                k += 1  # an invalid byte: keep its name
                continue
            shown = SHOWN.get(ch, ch if ch.isprintable() else f"U+{ord(ch):04X}")
            for m in range(n):
                out[i + k + m] = shown if n == 1 else f"{shown} {m + 1}/{n}"
            k += n
        i = j
    return out


def _utf8_length(head: bytes) -> int:
    """The length of the UTF-8 character that ``head`` begins but does not finish, else 0."""
    try:  # the codec says whether it is a valid start that only awaits more bytes
        if codecs.getincrementaldecoder("utf-8")().decode(head, final=False):
            return 0
    except UnicodeDecodeError:
        return 0
    return 2 if head[0] < 0xE0 else 3 if head[0] < 0xF0 else 4  # the lead byte's count of bytes


def byte_characters(tokens: list[str]) -> int:
    """How many characters (spaces aside) the runs of byte tokens in ``tokens`` spell; an invalid byte counts as
    one. A name in another script is many byte tokens but only its own letters."""
    runs = (
        bytes(b for t in run if (b := byte_of(t)) is not None)
        for is_byte, run in groupby(tokens, lambda t: byte_of(t) is not None)
        if is_byte
    )
    return sum(not c.isspace() for run in runs for c in run.decode("utf-8", errors="replace"))


UNREADABLE_SHARE = 0.5  # a source is unreadable when at least this share is <unk> tokens, or characters in bytes


@dataclass(frozen=True)
class Readability:
    """How much of a source (its ids, ``</s>`` left out) the model can read as words."""

    n_tokens: int
    n_unk: int  # <unk> tokens (a model without byte fallback)
    n_bytes: int  # byte tokens (byte fallback)
    n_byte_chars: int  # characters those bytes spell, spaces aside
    n_chars: int  # characters of the text, spaces aside (counted when there are byte tokens)

    @property
    def mostly_bytes(self) -> bool:
        """Most characters are outside the vocabulary (a name in another script among English words is not most)."""
        return bool(self.n_chars) and self.n_byte_chars / self.n_chars >= UNREADABLE_SHARE

    @property
    def mostly_unknown(self) -> bool:
        return bool(self.n_tokens) and self.n_unk / self.n_tokens >= UNREADABLE_SHARE


def readability(tokenizer: Tokenizer, ids: Sequence[int], unk_id: int) -> Readability:
    """``ids``: a source's body tokens. Characters, not tokens, decide: one name in another script is many byte
    tokens but a small part of the sentence."""
    n_bytes = sum(1 for i in ids if i in tokenizer.byte_ids)
    return Readability(
        n_tokens=len(ids),
        n_unk=sum(1 for i in ids if i == unk_id),
        n_bytes=n_bytes,
        n_byte_chars=byte_characters([tokenizer.id_to_token(i) for i in ids]) if n_bytes else 0,
        n_chars=sum(not c.isspace() for c in tokenizer.decode(ids)) if n_bytes else 0,
    )


class Tokenizer:
    """Text <-> ids without special tokens; the model code adds <s> and </s> where they belong."""

    def __init__(self, hf: HFTokenizer):
        self.hf = hf
        self.special_ids = frozenset(i for t in SPECIALS if (i := hf.token_to_id(t)) is not None)
        model = json.loads(hf.to_str()).get("model", {})
        self.byte_fallback = bool(model.get("byte_fallback")) and all(t in model.get("vocab", {}) for t in BYTE_TOKENS)
        vocab = model.get("vocab", {})
        self._marker_bytes: list[int] = [vocab[f"<0x{b:02X}>"] for b in META.encode()] if self.byte_fallback else []
        self.byte_ids = frozenset(hf.token_to_id(t) for t in BYTE_TOKENS) if self.byte_fallback else frozenset()

    @classmethod
    def load(cls, path: str | Path) -> Tokenizer:
        return cls(HFTokenizer.from_file(str(path)))

    def save(self, path: str | Path) -> None:
        self.hf.save(str(path))

    @property
    def vocab_size(self) -> int:
        return self.hf.get_vocab_size(with_added_tokens=True)

    def _ids(self, text: str, first: bool) -> list[int]:
        return self.hf.encode((" " if first else "") + text, add_special_tokens=False).ids if (text or first) else []

    def encode(self, text: str) -> list[int]:
        if not self.byte_fallback:
            return self.hf.encode(text, add_special_tokens=False).ids
        if not text:
            return []
        parts = text.split(META)
        ids = self._ids(parts[0], True)
        for part in parts[1:]:
            ids += self._marker_bytes + self._ids(part, False)
        return ids

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        if not self.byte_fallback:
            return [e.ids for e in self.hf.encode_batch(texts, add_special_tokens=False)]
        plain = [i for i, t in enumerate(texts) if t and META not in t]
        out = [self.encode(t) if (not t or META in t) else [] for t in texts]  # the plain ones filled below
        for i, e in zip(plain, self.hf.encode_batch([" " + texts[i] for i in plain], add_special_tokens=False)):
            out[i] = e.ids
        return out

    def decode(self, ids: Sequence[int]) -> str:
        return self.hf.decode([int(i) for i in ids if int(i) not in self.special_ids], skip_special_tokens=True)

    def id_to_token(self, i: int) -> str:
        tok = self.hf.id_to_token(int(i))
        return f"<{int(i)}>" if tok is None else tok

    def tokens(self, ids: Sequence[int]) -> list[str]:
        """One readable label per id (byte pieces named by the character they spell, see readable_tokens)."""
        raw = [self.id_to_token(i) for i in ids]
        return readable_tokens(raw) if self.byte_fallback else raw

    def token_to_id(self, token: str) -> int | None:
        return self.hf.token_to_id(token)
