"""The Corpus flags on the labelled set of the bundled model's own translations (benchmarks/data/corpus_labels.tsv):
the set as described, each word signal against a brute-force computation, the cross-validation that chooses the
thresholds, and each flag's out-of-fold precision and recall held to what they reach (benchmarks/corpus_flags.py
prints the table); the shipped flags on the second set (corpus_labels_fresh.tsv, labelled after they were fixed),
held the same way."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from benchmarks import corpus_flags as B
from model.decode.decoding import prepare_ids
from model.interpret import faithful as F
from model.interpret.lexicon import Lexicon, of_model
from model.io.checkpoint import default_model_dir, load_model_dir

# (precision, recall) out of fold (5-fold cross-validation, thresholds chosen on the training folds), a little under
# what they measured (dropped words: 0.866 / 0.806, its target of 0.8 / 0.7 met; invented content 0.800 / 0.552;
# fine sentences unflagged 60/66, its 90 % met).
FLOORS = {"dropped": (0.84, 0.8), "invented": (0.78, 0.5), "untranslated": (0.8, 0.9), "wrong": (0.8, 0.77)}
FINE_FLOOR = 0.9  # of the sentences labelled fine, the share that raise no flag out of fold (60/66 measured)
# The shipped rules on each held-out set (benchmarks/data/README.md says how each was drawn and read), their measured
# figures rounded down to two places, as (precision, recall) per flag and the share of fine sentences unflagged; a flag
# a set raises never or never rightly has no floor there. Measured with the pair-gain bound at 6 nats (docs/cli.md has
# each set's figures): over the twenty sets together, dropped words 0.805 / 0.733, invented content 0.800 / 0.620, fine
# sentences 2,181/2,289; on the third Tatoeba set, read after that bound was set, 0.780 / 0.750, 0.818 / 0.429, 246/253.
FLOOR_TABLE = (Path(__file__).parent / "corpus_flag_floors.txt").read_text(encoding="utf-8")  # one row per set


def floors(table: str) -> dict:
    """``FLOOR_TABLE`` as {set's path: ({kind: (precision, recall)}, fine share)}; "-" is no floor."""
    head, *rows = (line.split() for line in table.strip().splitlines())
    kinds = head[1:-1]
    out = {}
    for name, *cells in rows:
        pairs = zip(kinds, zip(cells[0:-1:2], cells[1:-1:2]))
        out[getattr(B, name.upper())] = ({k: (float(p), float(r)) for k, (p, r) in pairs if p != "-"}, float(cells[-1]))
    return out


HELD_OUT_FLOORS = floors(FLOOR_TABLE)
# The same, each set read with its references (as the Corpus page reads a set given with them): dropped words and
# invented content change, the others do not. Measured (dropped, invented, fine) over the twenty sets together:
# 0.802 / 0.745, 0.825 / 0.614, 2,185/2,289; on the third Tatoeba set 0.784 / 0.769, 0.900 / 0.429, 246/253.
REFERENCE_FLOORS = floors((Path(__file__).parent / "corpus_flag_floors_references.txt").read_text(encoding="utf-8"))


def name_their_words(items: list) -> bool:
    """Each failure names the words concerned (a cut-off translation has none to name)."""
    return all(words for it in items for k, words in it.labels.items() if k not in ("fine", "cutoff"))


def holds_each_kind(items: list) -> bool:
    """The set holds sentences with a dropped word, invented content, a wrong word, and fine ones."""
    return {k for it in items for k in it.labels} >= {"dropped", "invented", "wrong", "fine"}


@pytest.fixture(scope="module")
def items():
    return B.load()


@pytest.fixture(scope="module")
def bundled():
    return load_model_dir(default_model_dir())


def test_labelled_set_as_described(items):
    assert len(items) >= 150
    kinds = [k for it in items for k in it.labels]
    assert set(kinds) == {*B.KINDS, "fine"}
    fine = sum("fine" in it.labels for it in items)
    assert fine >= 0.25 * len(items) and all(it.labels == {"fine": []} for it in items if "fine" in it.labels)
    own = [it for it in items if it.where == "own"]
    assert len(own) >= 40 and all(it.english and it.output for it in items)
    held_out = {it.where.split(":")[0] for it in items if it.where != "own"}
    assert held_out == {"multi30k/test_2017_mscoco", "multi30k/test_2017_flickr"}  # never trained or tuned on
    for it in items:  # every failure names the words concerned
        assert all(words for k, words in it.labels.items() if k != "fine"), it


def test_fresh_set_as_described(items):
    """60 held-out Multi30k 2017 lines, none of them in the first set, each failure naming its words."""
    fresh = B.load(B.FRESH)
    assert len(fresh) == 60 and all(it.where.startswith("multi30k/test_2017_") for it in fresh)
    assert not {it.where for it in fresh} & {it.where for it in items}
    assert all(words for it in fresh for k, words in it.labels.items() if k != "fine")
    assert {k for it in fresh for k in it.labels} >= {"dropped", "invented", "wrong", "fine"}


def test_third_set_as_described(items):
    """120 held-out Multi30k 2016 lines past its 300th (the lines the word translation table's bounds were read on),
    in neither earlier set, each failure naming its words."""
    third = B.load(B.THIRD)
    assert len(third) == 120 and all(it.where.startswith("multi30k/test_2016_flickr:") for it in third)
    assert all(int(it.where.split(":")[1]) > 300 for it in third)
    assert not {it.where for it in third} & {it.where for it in [*items, *B.load(B.FRESH)]}
    assert all(words for it in third for k, words in it.labels.items() if k != "fine")
    assert {k for it in third for k in it.labels} >= {"dropped", "invented", "wrong", "fine"}


def test_validation_sets_as_described():
    """The fourth to ninth sets: Multi30k validation lines (a file no earlier set or reading used), 160 in each of the
    fourth to seventh and the 374 left in the eighth and ninth, so that every line is in exactly one; each failure
    naming its words (a cut-off translation has none to name)."""
    sets = [B.load(path) for path in (B.FOURTH, B.FIFTH, B.SIXTH, B.SEVENTH, B.EIGHTH, B.NINTH)]
    lines = [{it.where for it in s} for s in sets]
    assert [len(s) for s in sets] == [160] * 4 + [187] * 2
    assert set().union(*lines) == {f"multi30k/val:{n}" for n in range(1, 1015)}  # 1,014 lines, none in two sets
    assert all(map(name_their_words, sets))
    assert all(map(holds_each_kind, sets))


def test_test_2017_sets_as_described(items):
    """The tenth to fifteenth sets: Multi30k 2017 lines in no earlier set and none in two, 200 in each of the tenth
    to thirteenth and the 433 left in the fourteenth and fifteenth, each failure naming its words."""
    earlier = {it.where for it in [*items, *B.load(B.FRESH)]}
    sets = [B.load(path) for path in (B.TENTH, B.ELEVENTH, B.TWELFTH, B.THIRTEENTH, B.FOURTEENTH, B.FIFTEENTH)]
    assert [len(s) for s in sets] == [200] * 4 + [217, 216]
    for labelled in sets:
        lines = {it.where for it in labelled}
        assert len(lines) == len(labelled) and all(w.startswith("multi30k/test_2017_") for w in lines)
        assert not lines & earlier
        assert name_their_words(labelled) and holds_each_kind(labelled)
        earlier |= lines


def test_test_2016_sets_as_described(items):
    """The sixteenth and seventeenth sets: the 560 Multi30k 2016 lines past the 300th (those the word translation
    table's bounds were read on) that the third set left, halved; the eighteenth: 291 of those first 300 lines; none
    in two sets; each failure naming its words."""
    third = {it.where for it in B.load(B.THIRD)}
    sets = [B.load(path) for path in (B.SIXTEENTH, B.SEVENTEENTH, B.EIGHTEENTH)]
    lines = [{it.where for it in s} for s in sets]
    assert [len(s) for s in sets] == [len(x) for x in lines] == [280, 280, 291]
    assert not lines[0] & lines[1] and not (lines[0] | lines[1]) & lines[2]
    number = [[int(w.split(":")[1]) for w in x if w.startswith("multi30k/test_2016_flickr:")] for x in lines]
    assert [len(n) for n in number] == [280, 280, 291]
    assert min(number[0] + number[1]) > 300 and max(number[2]) <= 300
    assert not (lines[0] | lines[1] | lines[2]) & (third | {it.where for it in items})
    assert all(map(name_their_words, sets))
    assert all(map(holds_each_kind, sets))


def test_the_tatoeba_sets_as_described():
    """400 sentences of the Tatoeba test split in each set, none twice or in two sets, each with the first of its French
    translations as its reference; 250 among the lowest fifth by chrF and 150 among the rest, so more failures than
    the split holds."""
    from model.train.data import default_data_dir

    split = B.tatoeba_test(default_data_dir())
    assert len(split) == 2367
    seen: set[int] = set()
    for path, counts in (
        (B.TATOEBA_SET, {"dropped": 56, "invented": 32, "untranslated": 16, "wrong": 138, "cutoff": 0, "fine": 212}),
        (B.TATOEBA_SECOND, {"dropped": 54, "invented": 25, "untranslated": 6, "wrong": 120, "cutoff": 1, "fine": 241}),
        (B.TATOEBA_THIRD, {"dropped": 52, "invented": 21, "untranslated": 2, "wrong": 106, "cutoff": 1, "fine": 253}),
    ):
        labelled = B.load(path)
        lines = [int(it.where.removeprefix(f"{B.TATOEBA}:")) for it in labelled]
        assert len(labelled) == len(set(lines)) == 400 and 1 <= min(lines) <= max(lines) <= len(split)
        assert not seen & set(lines)
        seen |= set(lines)
        read = [(it.english, it.reference) for it in labelled]
        assert read == [(split[n - 1][0], split[n - 1][1][0]) for n in lines]
        assert {k: sum(k in it.labels for it in labelled) for k in (*B.KINDS, "fine")} == counts
        assert name_their_words(labelled) and holds_each_kind(labelled)


def test_a_multi30k_line_is_read_with_its_own_reference(items):
    """The reference a held-out Multi30k line is read with is the French of the same line (the first set's own
    sentences have none)."""
    from model.train.data import default_data_dir

    it = next(it for it in B.load(B.TENTH))
    name, line = it.where.split(":")
    lines = B._lines(default_data_dir() / f"{name}.fr.gz")
    assert it.reference == lines[int(line) - 1] and it.reference != lines[int(line)]
    assert {it.reference is None for it in items} == {True, False}
    assert all((it.reference is None) == (it.where == "own") for it in items)


def test_the_blind_sets_read_again_agree_as_reported():
    """The tenth to fifteenth sets read again whole, each failure but a cut-off naming its words; the two readings
    agree on invented content at the kappa docs/cli.md reports (0.89 over the 1,233 sentences)."""
    second = B.load(B.SECOND_BLIND)
    labelled = [it for path in B.READ_AGAIN for it in B.load(path)]
    assert len(second) == len(labelled) == 1233
    assert name_their_words(second)
    again = B.read_again(labelled, second)
    said = [["invented" in it.labels for it in reading] for reading in (labelled, again)]
    assert B.kappa(*said) == pytest.approx(0.89, abs=0.005)


def test_second_reading_covers_both_sets_and_agrees_as_reported(items):
    """Every sentence of both sets read again, each failure but a cut-off naming its words; the invented label, the
    one the flags miss, agreed on at the kappa docs/cli.md reports (0.68 on the first set, 0.83 on the second)."""
    second = B.load(B.SECOND)
    assert len(second) == len(items) + 60
    assert name_their_words(second)
    for labelled, want in ((items, 0.68), (B.load(B.FRESH), 0.83)):
        again = B.read_again(labelled, second)
        said = [["invented" in it.labels for it in reading] for reading in (labelled, again)]
        assert B.kappa(*said) == pytest.approx(want, abs=0.005)


def test_wilson_interval_against_its_published_values():
    # Newcombe (1998), Table I: 5/10 -> 0.2366–0.7634; 0/10 -> 0–0.2775; 81/263 -> 0.2553–0.3662
    for (hits, n), want in (((5, 10), (0.2366, 0.7634)), ((0, 10), (0.0, 0.2775)), ((81, 263), (0.2553, 0.3662))):
        assert B.wilson(hits, n) == pytest.approx(want, abs=1e-4)
    assert all(np.isnan(B.wilson(0, 0)))
    assert B.wilson(0, 6)[0] == 0.0 and B.wilson(6, 6)[1] == 1.0  # never printed as -0.00 or 1.00 past 1


def test_kappa_against_its_textbook_values():
    # 50 items: both yes 20, first only 5, second only 10, both no 15 -> agreement 0.7, chance 0.5, kappa 0.4
    first = [True] * 25 + [False] * 25
    second = [True] * 20 + [False] * 5 + [True] * 10 + [False] * 15
    assert B.kappa(first, second) == pytest.approx(0.4)
    assert B.kappa(first, first) == 1.0 and B.kappa(first, [not x for x in first]) == -1.0
    assert np.isnan(B.kappa([True] * 3, [True] * 3))  # no disagreement possible by chance either
    with pytest.raises(ValueError):
        B.kappa([True], [True, False])


def test_a_second_reading_is_matched_by_sentence_and_must_cover_the_set():
    a = B.Item("own", "A dog.", "Un chien.", {"fine": []})
    b = B.Item("own", "A cat.", "Un chat.", {"wrong": ["chat"]})
    again = [B.Item("own", "A cat.", "Un chat.", {"fine": []}), B.Item("own", "A dog.", "Un chien.", {"fine": []})]
    assert [it.english for it in B.read_again([a, b], again)] == ["A dog.", "A cat."]
    rows = B.agreement_table([a, b], B.read_again([a, b], again))
    assert rows[2] == "| fine | 1 | 2 | 1 | 0.00 |" and rows[-2].startswith("| wrong | 1 | 0 | 0 |")
    with pytest.raises(ValueError, match="lacks 1"):
        B.read_again([a, b], again[:1])


def test_a_second_reading_is_read_on_the_sets_it_covers_whole(tmp_path):
    """``--second`` reads the sets whose every sentence the reading holds; a reading that covers none says so in one
    sentence, before any model is run (``lm`` is never read)."""
    first = B.load()
    part = tmp_path / "part.tsv"
    rows = [f"own\t\t{it.english}\tfine\t{it.output}" for it in first[:-1]]  # all but one sentence
    part.write_text("set\tline\tenglish\tlabels\toutput\n" + "\n".join(rows) + "\n", encoding="utf-8")
    assert len(B.load(part)) == len(first) - 1
    with pytest.raises(ValueError, match="covers no labelled set whole"):
        B.second_reading(None, None, part, None)


def test_words_and_function_words():
    words = F.words_of(["▁A", "▁grey", "hound", "▁runs", "▁on", "▁3", "▁l", "'", "herbe", "</s>"], F.EN_FUNCTION)
    assert [(w.text, w.pieces, w.content) for w in words] == [
        ("A", (0,), False),
        ("greyhound", (1, 2), True),
        ("runs", (3,), True),
        ("on", (4,), False),
        ("3", (5,), True),
        ("l", (6,), False),
        ("'", (7,), False),
        ("herbe", (8,), True),
    ]
    # a hyphen joins a compound into one word, however the pieces fall; an apostrophe still splits
    hyphened = ["▁in", "▁mid", "-", "air.", "▁a", "▁cast", "le", "-l", "ike", "▁T", "-", "sh", "irts", "▁-", "▁2"]
    assert [(w.text, w.pieces, w.content) for w in F.words_of(hyphened, F.EN_FUNCTION)] == [
        ("in", (0,), False),
        ("mid-air.", (1, 2, 3), True),
        ("a", (4,), False),
        ("castle-like", (5, 6, 7, 8), True),
        ("T-shirts", (9, 10, 11, 12), True),
        ("-", (13,), False),
        ("2", (14,), True),
    ]


def _forced(bundled, source: str, output: str):
    """The signals of (source, output) on the bundled model, the source ids, and log p of the output's tokens given
    any source ids, computed directly (one forward pass)."""
    m, tok = bundled.model.eval(), bundled.tokenizer
    src = prepare_ids(tok.encode(source), m.cfg.eos_id, m.cfg.max_len)
    out = tok.encode(output) + [m.cfg.eos_id]
    (f,) = F.faithfulness(m, tok, [src], [out])

    def logp(s):
        with torch.inference_mode():
            dec_in = torch.tensor([[m.cfg.decoder_start_id, *out[:-1]]])
            lp = m(torch.tensor([s]), dec_in).log_softmax(-1)[0]
        return lp[torch.arange(len(out)), torch.tensor(out)].numpy()

    return f, src, logp


def test_erasure_signals_by_brute_force(bundled):
    f, src, logp = _forced(bundled, "A dog catches a red ball.", "Un chien attrape une balle.")
    m = bundled.model
    full = logp(src)
    np.testing.assert_allclose(f.logp, full, atol=1e-4)
    np.testing.assert_allclose(f.sensitivity, full - logp([m.cfg.eos_id]), atol=1e-4)
    assert [w.text for w in f.content_src] == ["dog", "catches", "red", "ball."]
    sure = np.exp(full) >= F.CONFIDENT
    for k, w in enumerate(f.content_src):
        erased = [t for i, t in enumerate(src) if i not in w.pieces]
        np.testing.assert_allclose(f.drops[k], np.where(sure, full - logp(erased), 0.0), atol=1e-4)
    sig = F.signals(f, "A dog catches a red ball.")
    assert sig["min_support_word"] == "red"  # "rouge" is missing: erasing "red" changes nothing written
    assert sig["min_support"] < 1.0 <= min(F.support(f)[:2])


def test_alignment_and_pair_gain_by_brute_force(bundled, monkeypatch):
    """Each source word's alignment and pair gain against the erasures written out, the output words' drops summed
    over their pieces (every position, sure or not)."""
    source = "A construction worker wearing a hard hat is operating a crane."
    output = "Un ouvrier du bâtiment portant un casque fait fonctionner une grue."
    f, src, logp = _forced(bundled, source, output)
    full = logp(src)
    content = f.content_src
    assert [w.text for w in content] == ["construction", "worker", "wearing", "hard", "hat", "operating", "crane."]
    words = [list(w.pieces) for w in f.out_words if (w.content and F.bare(w.text)) or F._head(w.text) in F.FR_LIGHT]
    assert len(words) == 7  # ouvrier, bâtiment, portant, casque, fait (a light verb), fonctionner, grue

    def word_drops(gone):  # (J,) each French content word's drop with those source words erased
        d = full - logp([t for i, t in enumerate(src) if i not in {p for k in gone for p in content[k].pieces}])
        return np.array([d[w].sum() for w in words])

    by = np.array([word_drops([k]) for k in range(len(content))])  # (K, J)
    near = by >= by.max(0) - F.ALIGN_MARGIN
    np.testing.assert_allclose(f.aligned, np.where(near, by, 0).max(1).clip(min=0), atol=1e-3)
    np.testing.assert_allclose(f.by_word, by, atol=1e-3)  # each output word's support is its column's largest
    sup = F.support(f)
    for k in range(len(content)):
        if sup[k] >= F.DROPPED_READ or f.aligned[k] >= F.ALIGNED_READ:
            assert np.isnan(f.pair[k])
            continue
        beside = [j for j in (k - 1, k + 1) if 0 <= j < len(content)]  # the content words on either side
        gains = [0.0] + [float((word_drops([k, j]) - np.maximum(by[k], by[j])).max()) for j in beside]
        np.testing.assert_allclose(f.pair[k], max(gains), atol=1e-3)
    # "construction worker" -> "ouvrier du bâtiment", "hard hat" -> "casque": one word erased leaves the other to
    # carry the French, so "worker" and "hat" have little support; erased with their neighbour, the French goes
    sig = F.signals(f, source)
    gains = []
    for word in ("worker", "hat"):
        at = sig["weak_words"].index(word)
        assert sig["weak_support"][at] < F.DROPPED_NATS and sig["weak_aligned"][at] < F.ALIGNED_NATS
        assert sig["weak_pair"][at] > sig["weak_support"][at] + F.DROPPED_NATS
        gains.append(sig["weak_pair"][at])
    # under the shipped bound (4.3 and 4.9 nats against 6), the word translation table is what clears them: it
    # translates "worker" as "ouvrier" and "hat" as "casque"
    assert max(gains) < F.PAIR_NATS and F.flagged_words(sig)["dropped words"] == ["worker", "hat"]
    table = Lexicon({("worke", "ouvri"): 0.35, ("hat", "casqu"): 0.19})  # keyed by 5 letters
    assert "dropped words" not in F.flagged_words(F.signals(f, source, table))
    # with a bound under both gains, the pair gain clears them, and a reference outweighs it only where it writes a
    # translation of the word that the output lacks
    monkeypatch.setattr(F, "PAIR_NATS", min(gains))
    assert "dropped words" not in F.flagged_words(sig)
    lex = Lexicon({("hat", "chape"): F.LEXICON_DROPPED})
    same = F.signals(f, source, lex, "Un ouvrier du bâtiment avec un casque manœuvre une grue.")
    assert "dropped words" not in F.flagged_words(same)
    chapeau = "Un ouvrier du bâtiment avec un chapeau dur manœuvre une grue."
    other = F.signals(f, source, lex, chapeau)
    assert other["weak_reference"][other["weak_words"].index("hat")] == F.LEXICON_DROPPED
    assert F.flagged_words(other)["dropped words"] == ["hat"]
    below = F.signals(f, source, Lexicon({("hat", "chape"): F.LEXICON_DROPPED * 0.99}), chapeau)
    assert "dropped words" not in F.flagged_words(below)
    rendered = F.signals(f, source, Lexicon({("hat", "chape"): 0.5, ("hat", "casqu"): F.LEXICON_DROPPED}), chapeau)
    assert "dropped words" not in F.flagged_words(rendered)  # the table finds it rendered: "casque"
    assert F.signals(f, source, lex)["weak_reference"] == [0.0] * len(sig["weak_words"])  # no reference


def test_a_reference_names_a_word_its_pair_gain_clears(bundled):
    """A labelled held-out sentence (dropped: "mountains"): "snowy mountains" written "enneigée" gives "mountains"
    a pair gain over the bound, as one French word rendering both would, so read without a reference it is not
    named; the reference writes "montagnes", which the output lacks and the table translates "mountains" as."""
    source = "View of church and snowy mountains in the background"
    output = "Un View d'une église et enneigée en arrière-plan"
    reference = "Une photo d'une église et des montagnes enneigées en arrière-plan"
    f, _, _ = _forced(bundled, source, output)
    lexicon = of_model(bundled.path)
    alone, read = F.signals(f, source, lexicon), F.signals(f, source, lexicon, reference)
    at = alone["weak_words"].index("mountains")
    assert alone["weak_pair"][at] >= F.PAIR_NATS and "mountains" not in F.flagged_words(alone).get("dropped words", [])
    assert read["weak_reference"][at] >= F.LEXICON_DROPPED
    assert F.flagged_words(read)["dropped words"] == ["mountains"]


def test_the_lexicon_clears_a_word_rendered_where_erasure_cannot_see_it(bundled):
    """ "street" is rendered by "rue", which "a busy" and "the corner of" make likely anyway: erased, it changes
    little, so erasure alone calls it dropped; the lexicon's t(rue | street) clears it. An unsure word likewise."""
    source = "A tall, thin, bald man in a red jacket is playing an accordion on the corner of a busy street."
    output = "Un grand homme mince, chauve en veste rouge joue de l'accordéon au coin d'une rue très fréquentée."
    f, _, _ = _forced(bundled, source, output)
    alone = F.signals(f, source)
    assert "street" in F.flagged_words(alone)["dropped words"] and set(alone["weak_lexical"]) == {0.0}
    lex = Lexicon({("stree", "rue"): F.LEXICON_DROPPED, ("stree", "coin"): F.LEXICON_DROPPED / 2})
    read = F.signals(f, source, lex)
    assert read["weak_lexical"][read["weak_words"].index("street")] == F.LEXICON_DROPPED  # the best of the two
    assert "street" not in F.flagged_words(read).get("dropped words", [])
    below = F.signals(f, source, Lexicon({("stree", "rue"): F.LEXICON_DROPPED * 0.99}))
    assert "street" in F.flagged_words(below)["dropped words"]
    held = F.signals(f, source, Lexicon({}, {("stree", "rue"): F.LEXICON_IMPLIED}))  # "rue" holds "street"
    assert held["weak_implied"][held["weak_words"].index("street")] == F.LEXICON_IMPLIED
    assert "street" not in F.flagged_words(held).get("dropped words", [])
    sig = {**alone, "non_words": [], "unsure_words": ["rue", "coin"], "unsure_prob": [0.01, 0.01]}
    sig["unsure_lexical"] = [F.LEXICON_WRONG, F.LEXICON_WRONG * 0.99]
    assert F.flagged_words(sig)["wrong word"] == ["coin"]  # "rue" is the translation of a source word
    unsure = F.signals(f, source, lex)
    assert len(unsure["unsure_lexical"]) == len(unsure["unsure_words"])


def _signal(bundled, source: str, output: str, key: str, lexicon: Lexicon | None = None):
    """One signal of ``faithful.signals`` for a (source, output) pair written out, the bundled model reading it
    (with ``lexicon``, its word translation table)."""
    m, tok = bundled.model.eval(), bundled.tokenizer
    src = prepare_ids(tok.encode(source), m.cfg.eos_id, m.cfg.max_len)
    (f,) = F.faithfulness(m, tok, [src], [tok.encode(output) + [m.cfg.eos_id]])
    return F.signals(f, source, lexicon)[key]


def test_untranslated_is_case_insensitive_and_allows_cognates_and_names(bundled):
    def copied(source, output):
        return _signal(bundled, source, output, "untranslated_words")

    assert copied("A MAN IS RIDING A HORSE.", "Un MAN IS RIDING A HORSE.") == ["MAN", "IS", "RIDING", "HORSE"]
    assert copied("a man is riding a horse.", "Un man est riding un horse.") == ["man", "riding", "horse"]
    assert copied("The taxi driver likes jazz and piano.", "Le chauffeur de taxi aime le jazz et le piano.") == []
    assert copied('My friend Grimshaw reads the word "table".', 'Mon ami Grimshaw lit le mot "table".') == []


def test_a_lone_capitalised_word_the_training_pairs_hold_is_no_name(bundled):
    """Multi30k test 2016's "A Family going for a walk" came out "A Family va se promener": with the word
    translation table, a lone capitalised word its training pairs hold is read by frequency as any other word; a
    name of several capitalised words, or one the pairs never hold, stays a name."""
    table = of_model(bundled.path)
    assert table is not None and table.knows("Family") and not table.knows("Grimshaw")

    def copied(source, output):
        return _signal(bundled, source, output, "untranslated_words", table)

    assert copied("A Family going for a walk in a park.", "A Family va se promener dans un parc.") == ["Family"]
    assert copied("A man in Brazil giving a talk.", "Un homme en Brazil donnant un discours.") == ["Brazil"]
    assert copied("Soldiers march through New York.", "Des soldats défilent à New York.") == []
    assert copied('My friend Grimshaw reads the word "table".', 'Mon ami Grimshaw lit le mot "table".') == []
    assert copied("A photo of Boston at night.", "Une photo de Boston la nuit.") == []  # French writes it too
    # without a table, every capitalised word inside the sentence is a name
    assert _signal(bundled, "A Family walks.", "A Family marche.", "untranslated_words") == []


def test_names_are_capitalised_words_side_by_side_or_unknown_alone():
    table = Lexicon({("famil", "famil"): 0.8, ("brazi", "brési"): 0.5})
    words = ["A", "Family", "from", "Brazil", "visits", "New", "York", "with", "Grimshaw", "and", "NASA"]
    assert F.names(words, table) == {"new", "york", "grimshaw"}
    assert F.names(words) == {"family", "brazil", "new", "york", "grimshaw"}  # no table: every capitalised word


def test_light_verbs_reflexives_and_wearing_are_never_dropped(bundled):
    """Read on the model's own translations: "gets ready" is "s'apprête", "has fallen asleep" "s'est endormi",
    "to shade herself" "se protéger", "men dressed in white" "des hommes en blanc"; the word's meaning is in the word
    beside it or in a function word, so it is never named as dropped (nor the weakest word)."""

    def weak(source, output):
        return _signal(bundled, source, output, "weak_words"), _signal(bundled, source, output, "min_support_word")

    for source, output, word in (
        ("The man has fallen asleep on the couch.", "L'homme s'est endormi sur le canapé.", "fallen"),
        (
            "A young man gets ready to kick a soccer ball.",
            "Un jeune homme s'apprête à frapper un ballon de foot.",
            "gets",
        ),
        (
            "A woman uses a pink umbrella to shade herself.",
            "Une femme utilise un parapluie rose pour se protéger.",
            "herself",
        ),
        ("A boy walks with men dressed in white.", "Un garçon marche avec des hommes en blanc.", "dressed"),
    ):
        words, weakest = weak(source, output)
        assert word not in words and weakest != word, (source, words, weakest)


def test_a_repeated_word_is_one_word_or_its_forms_written_more_often_than_the_source_says(bundled):
    def repeated(source, output):
        return _signal(bundled, source, output, "repeated")

    # two forms rendering two source words: a surfer who surfs, a cook in a kitchen, two little ones
    assert repeated("A surfer rides a huge wave.", "Un surfeur surfe une énorme vague.") == []
    assert repeated("A cook chops onions in a kitchen.", "Un cuisinier coupe des oignons dans une cuisine.") == []
    assert repeated("A little girl holds a little boy.", "Une petite fille tient un petit garçon.") == []
    # two forms of one word for one source word: the later one is named
    cloudy = ("A woman is deep in cloudy blue water.", "Une femme est profonde dans une eau nuageuse bleue nuageux.")
    assert repeated(*cloudy) == ["nuageux"]
    snow = ("A lake surrounded by white snow", "Un lac entouré de neige blanche entourée de neige")
    assert repeated(*snow) == ["neige", "entourée"]
    # an irregular English plural is its word ("a woman ... two women"); "face à face" is one expression
    women = ("A woman sits as two women walk past.", "Une femme est assise tandis que deux femmes passent.")
    assert repeated(*women) == []
    assert repeated("Two men, one man selling fruit.", "Deux hommes, un homme vendant des fruits.") == []
    assert repeated("Two men face each other.", "Deux hommes sont face à face.") == []
    assert (
        repeated(
            "A person stands behind a crowd of people.", "Une personne est debout derrière une foule de personnes."
        )
        == []
    )
    # "appareil photo" is one word (a camera); "X à X" is one expression only where French has it
    assert (
        repeated("A woman is taking a picture with her camera.", "Une femme prend une photo avec son appareil photo.")
        == []
    )
    assert repeated("A policeman on a horse.", "Un policier sur un cheval à cheval.") == ["cheval"]
    # copies each written for a source word of its own: one word for two, not one written twice
    brush = (
        "A toddler is brushing his teeth with a yellow toothbrush.",
        "Un enfant se brosse les dents avec une brosse jaune.",
    )
    assert repeated(*brush) == []
    sister = (
        "A small girl is lying on the floor while her younger sister is pretending to be a nurse.",
        "Une petite fille est couchée sur le sol tandis que sa petite sœur prétend être infirmière.",
    )
    assert repeated(*sister) == []
    assert repeated("A boy jumps into a muddy puddle.", "Un garçon saute dans une flaque boueuse boueuse.") == [
        "boueuse"
    ]
    assert repeated("A bridge for pedestrians.", "Un pont piéton de piétons.") == ["piéton"]
    assert repeated("A dog and a dog run.", "Un chien et un chien courent.") == []  # as often as the source says
    # the source's plural is the same word: "car ... cars" is two cars
    two = ("The red car is ahead of the two cars.", "La voiture rouge est devant les deux voitures.")
    assert repeated(*two) == []
    assert repeated("The red car is ahead.", "La voiture rouge est devant les voitures.") == ["voiture"]


def test_a_repeated_word_the_reference_writes_as_often_is_not_invented(bundled):
    m, tok = bundled.model.eval(), bundled.tokenizer
    source, output = "A boy jumps into a muddy puddle.", "Un garçon saute dans une flaque boueuse boueuse."
    (f,) = F.faithfulness(m, tok, [prepare_ids(tok.encode(source), m.cfg.eos_id, m.cfg.max_len)], [tok.encode(output)])

    def invented(reference):
        sig = F.signals(f, source, None, reference)
        assert len(sig["repeated_in_reference"]) == len(sig["repeated"]) == 1
        return F.flagged_words(sig).get("invented content", [])

    assert invented(None) == invented("Un garçon saute dans une flaque de boue.") == ["boueuse"]
    assert invented("Un garçon saute dans une flaque boueuse.") == ["boueuse"]  # once, written twice
    assert invented("Un garçon boueux saute dans une flaque boueuse.") == []  # two forms: as often


def test_french_content_words_and_matching_one_to_one():
    assert F.french_content("L'homme et l’enfant sont dans une voiture-bélier, à 3 h.") == [
        "homme",
        "enfant",
        "voiture-bélier",
    ]
    # one to one: the same word first, then another form ("boueux" for "boueuse"), each matched once
    assert F.unmatched(["boueuse", "boueuse", "flaque"], ["flaque", "boueux"]) == ["boueuse"]
    assert F.unmatched(["Chien", "chiens"], ["chien"]) == ["chiens"]
    assert F.unmatched(["chat"], ["chaton"]) == ["chat"]  # too short a shared beginning to be one word
    assert F.unmatched([], ["chien"]) == [] and F.unmatched(["chien"], []) == ["chien"]


def test_an_english_plural_is_counted_as_its_singular():
    words = ("cars", "Buses", "boxes", "churches", "glass", "bus", "shoes", "Women", "men", "firemen", "children")
    singular = [F._singular(w) for w in words]
    assert singular == ["car", "bus", "box", "church", "glass", "bus", "shoe", "woman", "man", "fireman", "child"]


def _synthetic(n: int) -> tuple[list[B.Item], list[dict]]:
    """n labelled rows whose only signal is min_support, dropped when it is below 1 (a rule a grid can find)."""
    rng = np.random.default_rng(3)
    support = rng.uniform(0, 3, n)
    items = [B.Item("own", "x", "y", {"dropped": ["w"]} if v < 1 else {"fine": []}) for v in support]
    sigs = [
        {
            "min_support": float(v),
            "min_support_word": "w",
            "weak_words": ["w"],
            "weak_support": [float(v)],
            "weak_aligned": [0.0],
            "weak_pair": [0.0],
            "weak_lexical": [0.0],
            "weak_implied": [0.0],
            "weak_reference": [0.0],
            "repeated": [],
            "repeated_in_reference": [],
            "min_sensitivity": 5.0,
            "min_sensitivity_word": "y",
            "min_word_prob": 1.0,
            "min_word_prob_word": "y",
            "unsure_words": [],
            "unsure_prob": [],
            "unsure_lexical": [],
            "non_words": [],
            "untranslated_words": [],
            "cut_off": False,
        }
        for v in support
    ]
    return items, sigs


def test_cross_validation_flags_each_row_by_thresholds_chosen_without_it():
    items, sigs = _synthetic(53)
    fold = B.folds(len(items))
    assert fold == B.folds(len(items)) and sorted(set(fold)) == list(range(B.FOLDS))  # seeded, every fold used
    sizes = [fold.count(k) for k in range(B.FOLDS)]
    assert max(sizes) - min(sizes) <= 1
    flags, chosen = B.cross_validated(items, sigs)
    assert len(chosen) == B.FOLDS
    for k in range(B.FOLDS):
        train = [i for i in range(len(items)) if fold[i] != k]
        assert chosen[k] == B.choose(items, sigs, train)
        for i in (i for i in range(len(items)) if fold[i] == k):
            assert flags[i] == B.raised(sigs[i], **chosen[k])
    assert {c["DROPPED_NATS"] for c in chosen} == {1.0}  # the grid value that separates the rows
    # a row's own label never reaches its threshold: flipping one row's label moves no choice for its fold
    flipped = [*items]
    flipped[0] = B.Item("own", "x", "y", {"fine": []} if "dropped" in items[0].labels else {"dropped": ["w"]})
    assert B.cross_validated(flipped, sigs)[1][fold[0]] == chosen[fold[0]]


def held_to(items, flags, floors: dict, fine_floor: float) -> None:
    """Each flag's precision and recall on ``items`` at least its floor, and the fine sentences' share unflagged."""
    everything = range(len(items))
    for kind, (p_min, r_min) in floors.items():
        s = B.score(items, flags, kind, everything)
        assert s.precision >= p_min and s.recall >= r_min, (kind, s)
    clean, n = B.fine_clean(items, flags, everything)
    assert clean >= fine_floor * n, (clean, n)


@pytest.mark.slow
def test_flags_on_the_labelled_set(items, bundled):
    sigs = B.flags_on(bundled.model.eval(), bundled.tokenizer, items, of_model(bundled.path))
    oof, _ = B.cross_validated(items, sigs)
    held_to(items, oof, FLOORS, FINE_FLOOR)
    cut = B.score(items, [B.raised(s) for s in sigs], "cutoff", range(len(items)))
    assert cut.tp >= 1 and cut.fp == cut.fn == 0


@pytest.fixture(scope="module")
def held_out(bundled):
    """Each held-out set's items and their flags under the shipped thresholds, read without the set's references
    and with them."""
    out = {}
    for path in B.HELD_OUT:
        items = B.load(path)
        reads = B.readings(bundled.model.eval(), bundled.tokenizer, items, of_model(bundled.path))
        out[path] = (items, *([B.raised(s) for s in sigs] for sigs in reads))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("references", [False, True], ids=["without references", "with references"])
@pytest.mark.parametrize("path", B.HELD_OUT, ids=lambda p: p.stem)
def test_shipped_flags_on_each_held_out_set(held_out, path, references):
    items, without, read = held_out[path]
    floors_of = REFERENCE_FLOORS if references else HELD_OUT_FLOORS
    held_to(items, read if references else without, *floors_of[path])


@pytest.mark.slow
def test_the_corpus_page_states_what_the_held_out_sets_measure(held_out):
    """The figures the Corpus page gives for the bundled model (model.interpret.corpus.MEASURED, and
    MEASURED_WITH_REFERENCES for a set given with references) are the held-out sets' own: each flag's sentences
    right, raised and labelled, over every set."""
    from model.interpret.corpus import MEASURED, MEASURED_ON, MEASURED_WITH_REFERENCES

    items = [it for its, _, _ in held_out.values() for it in its]
    assert MEASURED_ON.startswith(f"{len(items):,} held-out sentences")
    for column, figures in ((1, MEASURED), (2, MEASURED_WITH_REFERENCES)):
        flags = [f for sets in held_out.values() for f in sets[column]]
        assert set(figures) == set(MEASURED)
        for kind, flag in B.FLAG_OF.items():
            if flag in figures:
                s = B.score(items, flags, kind, range(len(items)))
                assert figures[flag] == (s.tp, s.tp + s.fp, s.tp + s.fn), (flag, column)


def test_confusion_counts_each_labels_sentences_by_the_flags_they_raise():
    items = [
        B.Item("own", "x", "y", {"fine": []}),
        B.Item("own", "x", "y", {"fine": []}),
        B.Item("own", "x", "y", {"dropped": ["w"], "wrong": ["v"]}),
        B.Item("own", "x", "y", {"wrong": ["v"]}),
    ]
    flags = [{}, {"wrong word": ["y"]}, {"dropped words": ["w"], "wrong word": ["y"]}, {"cut off": []}]
    lines = B.confusion(items, flags, range(len(items)))
    assert lines[0].split(" | ")[1:-1] == list(B.FLAG_OF.values())
    cells = {ln.split(" | ")[0].lstrip("| "): ln.strip(" |").split(" | ")[1:] for ln in lines[2:]}
    # dropped words, invented content, untranslated, wrong word, cut off, no flag
    assert cells["fine (2)"] == ["0", "0", "0", "1", "0", "1"]
    assert cells["dropped (1)"] == ["1", "0", "0", "1", "0", "0"]
    assert cells["wrong (2)"] == ["1", "0", "0", "1", "1", "0"]
    assert cells["invented (0)"] == ["0"] * 6
    assert len(lines) == 2 + 1 + len(B.KINDS)
    assert B.confusion(items, flags, [0])[2] == "| fine (1) | 0 | 0 | 0 | 0 | 0 | 1 |"  # only the rows given


def test_cached_signals_read_back_as_computed_while_the_key_holds(tmp_path, monkeypatch):
    items, sigs = _synthetic(4)
    items = [B.Item("own", f"x{i}", "y", it.labels) for i, it in enumerate(items)]
    sigs[1] = {**sigs[1], "min_sensitivity": float("nan"), "weak_pair": [float("nan"), 1.0]}
    calls = []

    def computed(model, tokenizer, todo, lexicon=None):
        calls.append([it.english for it in todo])
        return [sigs[int(it.english[1:])] for it in todo]

    monkeypatch.setattr(B, "flags_on", computed)
    cache = tmp_path / "signals.json"
    first = B.cached_flags(None, None, items[:3], cache, "k")
    again = B.cached_flags(None, None, items, cache, "k")
    assert calls == [["x0", "x1", "x2"], ["x3"]]  # each sentence read once
    assert np.isnan(again[1]["min_sensitivity"]) and np.isnan(again[1]["weak_pair"][0])
    for got in (first, again[:3]):
        assert [B.raised(s) for s in got] == [B.raised(s) for s in sigs[:3]]
    assert again[3] == sigs[3]
    B.cached_flags(None, None, items[:1], cache, "other model")
    assert calls[-1] == ["x0"]  # another key reads again


def test_the_cleared_flags_are_those_the_table_removes(tiny_model_dir, tmp_path, monkeypatch, capsys):
    """``--cleared``: the sentences raising each flag without and with the table, and each word it cleared. A table
    that translates every pair clears every dropped and wrong word the tiny model's random output raises."""
    import gzip

    from model.interpret import corpus as C
    from model.io.checkpoint import load_model_dir

    m30k = tmp_path / "multi30k"
    m30k.mkdir()
    english = ["a dog runs in the park", "the red car stops", "two men play chess"]
    for lang, lines in (("en", english), ("fr", ["un chien", "une voiture", "deux hommes"])):
        with gzip.open(m30k / f"test_2016_flickr.{lang}.gz", "wt", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")

    class Everything(Lexicon):
        def prob(self, english: str, french: str) -> float:
            return 1.0

    lm = load_model_dir(tiny_model_dir)
    rows = C.analyse(lm.model, lm.tokenizer, C.Corpus(english, None), heads=0).rows
    alone = [F.flagged_words(r) for r in rows]
    B.cleared(lm, Everything({}), 3, tmp_path)
    out = capsys.readouterr().out.splitlines()
    for kind in ("dropped words", "wrong word"):
        raised = sum(kind in a and bool(a[kind]) for a in alone)
        left = 0 if kind == "dropped words" else sum(bool(r["non_words"]) for r in rows)  # non-words stay
        assert f"  {kind}: {raised} / {left}" in out
    words = sum(len(a.get("dropped words", [])) for a in alone)
    words += sum(len(a.get("wrong word", [])) for a, r in zip(alone, rows) if not r["non_words"])
    assert words > 0 and out[3].startswith(f"{words} words cleared by the table (0 by t(e | f) alone")


def test_held_out_table_gives_each_flag_its_interval():
    items = [
        B.Item("own", "x", "y", {"fine": []}),
        B.Item("own", "x", "y", {"dropped": ["w"]}),
        B.Item("own", "x", "y", {"dropped": ["w"]}),
    ]
    flags = [{"dropped words": ["a"]}, {"dropped words": ["w"]}, {}]
    rows = {ln.split(" | ")[0].lstrip("| "): ln.strip(" |").split(" | ")[1:] for ln in B.held_out_table(items, flags)}
    low, high = B.wilson(1, 2)
    assert rows["dropped words"] == [f"0.500 (1/2; {low:.2f}–{high:.2f})"] * 2
    assert rows["invented content"] == ["– (0/0)", "– (0/0)"]
    assert rows["fine sentences without a flag"][0].startswith("0.000 (0/1; ")
