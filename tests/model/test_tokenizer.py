"""The byte-fallback vocabulary: every string round-trips, nothing becomes <unk>, byte pieces read as text."""

from __future__ import annotations

import random

import pytest

from model.core.tokenizer import BYTE_TOKENS, SPECIALS, Tokenizer, byte_characters, readable_tokens
from model.io.checkpoint import default_model_dir

EDGE_CASES = [
    "",
    "x",
    " leading space",
    "trailing space ",
    "  two  spaces  ",
    "emoji 😀 and 中文 and עברית",
    "Vikas Łukasz Nguyễn Þór",
    "<tag> & </s> <pad> <unk> <0x41>",
    "a\u0301 (decomposed)",
    "tab\there\nnewline",
    "▁ the marker ▁▁ itself▁",
    "▁",
    "\x00\x01 control",
    "\ufeffBOM",
    "\U0010ffff\ue000",
    "Je suis étudiant.",
]


def random_strings(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    planes = [(0x20, 0x7F), (0xA0, 0x2FF), (0x370, 0x52F), (0x4E00, 0x9FFF), (0x1F300, 0x1FAFF), (1, 0xD7FF)]
    out = []
    for _ in range(n):
        chars = []
        for _ in range(rng.randrange(1, 25)):
            lo, hi = rng.choice(planes)
            chars.append(chr(rng.randrange(lo, hi)))
        out.append("".join(chars))
    return out


@pytest.fixture(scope="module", params=["tiny", "bundled"])
def tok(request, tiny_tokenizer):
    if request.param == "tiny":
        return tiny_tokenizer
    path = default_model_dir() / "tokenizer.json"
    return Tokenizer.load(path)


def test_every_string_round_trips_without_unk(tok):
    assert tok.byte_fallback
    texts = EDGE_CASES + random_strings(1500)
    ids = tok.encode_batch(texts)
    specials = {tok.token_to_id(t) for t in SPECIALS}
    for text, row in zip(texts, ids):
        assert row == tok.encode(text)
        assert not specials & set(row), (text, tok.tokens(row))  # no <unk>, and "</s>" typed is text
        assert tok.decode(row) == text


def test_special_tokens_come_first_and_every_byte_has_a_token(tok):
    assert [tok.token_to_id(t) for t in SPECIALS] == [0, 1, 2, 3]
    byte_ids = [tok.token_to_id(t) for t in BYTE_TOKENS]
    assert None not in byte_ids and len(set(byte_ids)) == 256 and set(byte_ids) == tok.byte_ids


def test_a_new_vocabulary_puts_the_bytes_after_the_special_tokens(tiny_tokenizer):
    assert [tiny_tokenizer.token_to_id(t) for t in BYTE_TOKENS] == list(range(4, 260))


def test_unknown_characters_are_spelled_in_bytes_and_labelled_by_character(tok):
    ids = tok.encode("I 😀 it")
    labels = tok.tokens(ids)
    emoji = [lab for lab in labels if lab.startswith("😀")]
    assert emoji == ["😀 1/4", "😀 2/4", "😀 3/4", "😀 4/4"]
    raw = [tok.id_to_token(i) for i in ids]
    assert [r for r in raw if r.startswith("<0x")] == ["<0xF0>", "<0x9F>", "<0x98>", "<0x80>"]
    assert len(labels) == len(ids)


def test_readable_labels_keep_invalid_bytes_and_name_invisible_characters():
    assert readable_tokens(["<0xFF>", "a", "<0x0A>", "<0x20>"]) == ["<0xFF>", "a", "↵", "␣"]
    assert readable_tokens(["<0xC3>", "<0xA9>", "<0xC3>"]) == ["é 1/2", "é 2/2", "<0xC3> 1/2"]  # a cut-off character
    assert readable_tokens(["<0xF0>", "<0x9F>"]) == ["<0xF0> 1/4", "<0x9F> 2/4"]  # 😀 begun, not finished
    assert readable_tokens(["<0xC3>", "a"]) == ["<0xC3>", "a"]  # cut off by another token: spells nothing
    assert readable_tokens(["<0x9F>"]) == ["<0x9F>"]  # a continuation byte alone begins nothing
    assert readable_tokens(["<0xE2>", "<0x80>", "<0x8B>"]) == ["U+200B 1/3", "U+200B 2/3", "U+200B 3/3"]
    assert readable_tokens(["▁le", "▁chat"]) == ["▁le", "▁chat"]


def test_byte_characters_counts_the_characters_byte_runs_spell_not_their_bytes():
    name = [f"<0x{b:02X}>" for b in "Въз".encode()]  # 3 letters, 6 bytes
    assert byte_characters(["▁Our", "▁teacher", "▁", *name, "."]) == 3
    assert byte_characters(["<0x09>", "<0x20>", "<0xC3>", "<0xA9>", "<0xFF>", "a"]) == 2  # spaces aside; é; a bad byte
    assert byte_characters(["▁le", "▁chat"]) == 0
