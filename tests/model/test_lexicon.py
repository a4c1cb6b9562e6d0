"""The word translation table the Corpus flags consult: IBM Model 1 against its definition (every alignment
enumerated), the file's round trip and its refusals, the builder's command line, and the bundled model's table."""

from __future__ import annotations

import gzip
import math
from collections import defaultdict
from itertools import product

import pytest

from model.interpret import lexicon as L
from model.io.checkpoint import default_model_dir
from model.train import lexicon as T

BITEXT = [
    ("The dog runs.", "Le chien court."),
    ("The cat runs.", "Le chat court."),
    ("A dog sleeps.", "Un chien dort."),
    ("The cat sleeps.", "Le chat dort."),
    ("A small house.", "Une petite maison."),
    ("The house.", "La maison."),
    ("The dog of the house.", "Le chien de la maison."),
    ("A dog sees a dog.", "Un chien voit un chien."),  # a French word twice in a sentence counts twice
]


def _em(pairs, iterations):
    """Model 1 by its definition: every alignment of a sentence pair (each French word to one English word or the
    empty one) weighed by the product of its words' t, the expected counts of each (e, f) link over all of them
    normalised over f; no factorisation, so it is only for short sentences."""
    bitext = [([T.NULL, *L.keys(en)], L.keys(fr)) for en, fr in pairs]
    t = defaultdict(lambda: 1.0)
    for _ in range(iterations):
        count = defaultdict(float)
        for en, fr in bitext:
            alignments = product(range(len(en)), repeat=len(fr))
            weights = {a: math.prod(t[(en[i], f)] for i, f in zip(a, fr)) for a in alignments}
            z = sum(weights.values())
            for a, w in weights.items():
                for i, f in zip(a, fr):
                    count[(en[i], f)] += w / z
        total = defaultdict(float)
        for (e, _), c in count.items():
            total[e] += c
        t = defaultdict(float, {(e, f): c / total[e] for (e, f), c in count.items()})
    return dict(t)


def test_fit_is_model_one_and_finds_each_words_translation():
    table = T.fit(BITEXT, 5)
    want = _em(BITEXT, 5)
    assert set(table) == set(want)
    assert all(abs(table[k] - want[k]) < 1e-9 for k in want)
    for e in {e for e, _ in table}:  # each English word's t(. | e) is a distribution over French words
        assert abs(sum(p for (x, _), p in table.items() if x == e) - 1) < 1e-9
    best = {e: max((p, f) for (x, f), p in table.items() if x == e)[1] for e in ("dog", "cat", "house", "runs")}
    assert best == {"dog": "chien", "cat": "chat", "house": "maiso", "runs": "court"}


def test_words_are_compared_by_their_first_letters():
    assert L.keys("L'homme photographié, T-shirts") == ["l", "homme", "photo", "t-shi"]
    lex = L.Lexicon({("photo", "photo"): 0.8, ("stree", "rue"): 0.6})
    assert lex.prob("Photographed", "photographié") == 0.8 and lex.prob("street", "rue") == 0.6
    assert lex.prob("street", "route") == 0.0
    assert lex.best(["a", "busy", "street"], "rue") == 0.6 and lex.best([], "rue") == 0.0


def test_the_file_keeps_the_likely_pairs_both_ways_and_reads_back(tmp_path):
    forward = {("dog", "chien"): 0.8, ("dog", "le"): 0.0004, (T.NULL, "le"): 0.3, ("cat", "chat"): 0.123456}
    backward = {("chien", "dog"): 0.9, ("gare", "train"): 0.3, ("le", "dog"): 0.0002, ("le", T.NULL): 0.5}  # t(e | f)
    assert T.save(forward, backward, tmp_path / L.FILE) == 3  # unlikely both ways, or the empty word's: left out
    lex = L.of_model(tmp_path)
    assert lex.forward == {("cat", "chat"): 0.1235, ("dog", "chien"): 0.8, ("train", "gare"): 0.0}
    assert lex.backward == {("cat", "chat"): 0.0, ("dog", "chien"): 0.9, ("train", "gare"): 0.3}
    assert lex.implied("train", "gare") == 0.3 and lex.prob("train", "gare") == 0.0
    assert L.of_model(tmp_path / "nowhere") is None


def test_a_damaged_file_is_one_sentence(tmp_path):
    (tmp_path / L.FILE).write_bytes(b"not gzip at all")
    with pytest.raises(ValueError, match="unreadable or damaged") as e:
        L.of_model(tmp_path)
    assert "\n" not in str(e.value)
    with gzip.open(tmp_path / L.FILE, "wt") as f:
        f.write("dog\tchien\t0.8\t0.9\ndog\tchien\t0.8\n")
    with pytest.raises(ValueError, match=r"line 2 is not english<TAB>french<TAB>t\(french \| english\)"):
        L.of_model(tmp_path)


def test_the_builder_writes_the_table_or_exits_2(tmp_path, capsys):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{en}\t{fr}\n" for en, fr in BITEXT), encoding="utf-8")
    assert T.main([str(tmp_path / "missing"), "--pairs", str(pairs)]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert T.main([str(tmp_path), "--pairs", str(tmp_path / "none.tsv")]) == 2
    (tmp_path / "empty.tsv").write_text("no tab here\n", encoding="utf-8")
    assert T.main([str(tmp_path), "--pairs", str(tmp_path / "empty.tsv")]) == 2
    assert T.main([str(tmp_path), "--data", str(tmp_path / "no data")]) == 2
    assert T.main([str(tmp_path), "--pairs", str(pairs), "--iterations", "0"]) == 2
    assert all(line.startswith("error: ") for line in capsys.readouterr().err.splitlines())
    assert T.main([str(tmp_path), "--pairs", str(pairs)]) == 0
    lex = L.of_model(tmp_path)
    assert lex is not None and lex.prob("dog", "chien") == pytest.approx(T.fit(BITEXT)[("dog", "chien")], rel=1e-3)
    swapped = T.fit([(fr, en) for en, fr in BITEXT])  # the languages swapped: t(english | french)
    assert lex.implied("dog", "chien") == pytest.approx(swapped[("chien", "dog")], rel=1e-3)


def test_the_bundled_models_table():
    lex = L.of_model(default_model_dir())
    assert lex is not None and len(lex.forward) > 100_000 and lex.forward.keys() == lex.backward.keys()
    assert all(max(p, q) >= L.KEEP and p <= 1 and q <= 1 for p, q in zip(lex.forward.values(), lex.backward.values()))
    assert lex.prob("street", "rue") > 0.5 and lex.prob("tire", "pneu") > 0.5 and lex.prob("dog", "chien") > 0.5
    assert lex.prob("street", "chien") == 0.0
    assert lex.implied("train", "gare") > lex.prob("train", "gare")  # "gare" holds "train" more than it renders it
