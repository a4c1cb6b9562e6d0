"""A word translation table read from the training pairs (IBM Model 1): how likely an English word is written as
a French one, wherever the words stand. The Corpus flags consult it beside erasure, which cannot see a word the
context makes likely anyway ("a busy street" still writes "rue" with "street" erased) or tell a word the model
hesitated over from a wrong one ("pneu" for "tire" written with p 0.07).

Words are compared by their first PREFIX letters, lowercased ("photographed", "photographié": "photo"), a stemmer
that needs nothing per language. The table is fit by expectation-maximisation (Brown et al., 1993: model 1, with
the empty word), kept for the pairs at least KEEP likely, and stored beside the model as a gzip'd TSV
(``english<TAB>french<TAB>t(french | english)<TAB>t(english | french)``, the words as keys; the second model is fit
with the languages swapped). ``python -m model.train.lexicon`` fits and
writes it (model/train/lexicon.py).
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

FILE = "lexicon.tsv.gz"  # in the model directory, beside config.json
PREFIX = 5  # letters of a word compared
KEEP = 0.001  # pairs less likely than this are not stored (the flags' bounds are 0.001 and up)
_WORD = re.compile(r"[^\W_]+(?:-[^\W_]+)*", re.UNICODE)  # letters and digits; a hyphen keeps a compound whole


def key(word: str) -> str:
    """What the table compares of a word: its first PREFIX letters, lowercased."""
    return word.lower()[:PREFIX]


def words(text: str) -> list[str]:
    """A sentence's words as written ("l'homme" is "l", "homme"; "arc-en-ciel" one word)."""
    return _WORD.findall(text)


def keys(text: str) -> list[str]:
    """A sentence's words as keys."""
    return [key(w) for w in words(text)]


@dataclass(frozen=True)
class Lexicon:
    forward: dict[tuple[str, str], float]  # (english key, french key) -> t(french | english)
    backward: dict[tuple[str, str], float] = field(default_factory=dict)  # the same keys -> t(english | french)
    english: frozenset[str] = field(init=False)  # the English keys the training pairs hold

    def __post_init__(self) -> None:
        object.__setattr__(self, "english", frozenset(e for e, _ in self.forward))

    def knows(self, english: str) -> bool:
        """Whether the training pairs hold the English word (its key) with a French word kept."""
        return key(english) in self.english

    def prob(self, english: str, french: str) -> float:
        """t(french | english) of two words as written (0 when the pair was not kept)."""
        return self.forward.get((key(english), key(french)), 0.0)

    def implied(self, english: str, french: str) -> float:
        """t(english | french): how likely the French word's training pairs hold the English one ("palmiers" holds
        "palm" and "trees"), where the English word is part of what the French renders."""
        return self.backward.get((key(english), key(french)), 0.0)

    def best(self, english: Iterable[str], french: str) -> float:
        """The largest t(french | e) over the English words ``english`` (0 when there are none)."""
        return max((self.prob(e, french) for e in english), default=0.0)


def load(path: str | Path) -> Lexicon:
    """The table written by ``model.train.lexicon.save``; a malformed file is a ValueError of one sentence."""
    forward, backward = {}, {}
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            try:
                e, fr, p_f, p_e = line.rstrip("\n").split("\t")
                pair = (e, fr)
                forward[pair], backward[pair] = float(p_f), float(p_e)
            except ValueError:
                raise ValueError(
                    f"{path} line {n} is not english<TAB>french<TAB>t(french | english)<TAB>t(english | french)"
                ) from None
    return Lexicon(forward, backward)


def of_model(model_dir: str | Path) -> Lexicon | None:
    """The model directory's lexicon, or None when it has none (the flags then read the model alone)."""
    path = Path(model_dir) / FILE
    if not path.is_file():
        return None
    try:
        return load(path)
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise ValueError(f"{path} is unreadable or damaged ({e})") from None
