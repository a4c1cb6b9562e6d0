"""Subword tokenizer: a thin wrapper over a Hugging Face `tokenizers` tokenizer.json."""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer as HFTokenizer

SPECIALS = ("<pad>", "<s>", "</s>", "<unk>")


class Tokenizer:
    """Text <-> ids without special tokens; the model code adds <s> and </s> where they belong."""

    def __init__(self, hf: HFTokenizer):
        self.hf = hf
        self.special_ids = frozenset(i for t in SPECIALS if (i := hf.token_to_id(t)) is not None)

    @classmethod
    def load(cls, path: str | Path) -> Tokenizer:
        return cls(HFTokenizer.from_file(str(path)))

    def save(self, path: str | Path) -> None:
        self.hf.save(str(path))

    @property
    def vocab_size(self) -> int:
        return self.hf.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str) -> list[int]:
        return self.hf.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self.hf.encode_batch(texts, add_special_tokens=False)]

    def decode(self, ids) -> str:
        return self.hf.decode([int(i) for i in ids if int(i) not in self.special_ids], skip_special_tokens=True)

    def id_to_token(self, i: int) -> str:
        tok = self.hf.id_to_token(int(i))
        return f"<{int(i)}>" if tok is None else tok

    def tokens(self, ids) -> list[str]:
        return [self.id_to_token(i) for i in ids]

    def token_to_id(self, token: str) -> int | None:
        return self.hf.token_to_id(token)
