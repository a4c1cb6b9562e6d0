"""The Corpus flags on the labelled set of the bundled model's own translations (benchmarks/data/corpus_labels.tsv):
the set as described, each word signal against a brute-force computation, and each flag's precision and recall on
the held-out half held to what the shipped thresholds reach (benchmarks/corpus_flags.py prints the table)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from benchmarks import corpus_flags as B
from model.decode.decoding import prepare_ids
from model.interpret import faithful as F
from model.io.checkpoint import default_model_dir, load_model_dir

# (precision, recall) on the held-out half, a little under what the shipped thresholds measured (0.69/0.69,
# 0.64/0.69, 0.83/1.00, 0.77/0.74): the targets for dropped and invented (0.8/0.7) are not reached yet.
FLOORS = {"dropped": (0.66, 0.66), "invented": (0.6, 0.65), "untranslated": (0.8, 0.9), "wrong": (0.72, 0.7)}
FINE_FLOOR = 0.72  # of the held-out sentences labelled fine, the share that raise no flag (measured 0.76)


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


def test_erasure_signals_by_brute_force(bundled):
    m, tok = bundled.model.eval(), bundled.tokenizer
    src = prepare_ids(tok.encode("A dog catches a red ball."), m.cfg.eos_id, m.cfg.max_len)
    out = tok.encode("Un chien attrape une balle.") + [m.cfg.eos_id]
    (f,) = F.faithfulness(m, tok, [src], [out])

    def logp(s):
        with torch.inference_mode():
            dec_in = torch.tensor([[m.cfg.decoder_start_id, *out[:-1]]])
            lp = m(torch.tensor([s]), dec_in).log_softmax(-1)[0]
        return lp[torch.arange(len(out)), torch.tensor(out)].numpy()

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
    assert sig["min_support"] < F.DROPPED_NATS <= min(F.support(f)[:2])


def test_untranslated_is_case_insensitive_and_allows_cognates_and_names(bundled):
    m, tok = bundled.model.eval(), bundled.tokenizer

    def copied(source, output):
        src = prepare_ids(tok.encode(source), m.cfg.eos_id, m.cfg.max_len)
        (f,) = F.faithfulness(m, tok, [src], [tok.encode(output) + [m.cfg.eos_id]])
        return F.signals(f, source)["untranslated_words"]

    assert copied("A MAN IS RIDING A HORSE.", "Un MAN IS RIDING A HORSE.") == ["MAN", "IS", "RIDING", "HORSE"]
    assert copied("a man is riding a horse.", "Un man est riding un horse.") == ["man", "riding", "horse"]
    assert copied("The taxi driver likes jazz and piano.", "Le chauffeur de taxi aime le jazz et le piano.") == []
    assert copied('My friend Grimshaw reads the word "table".', 'Mon ami Grimshaw lit le mot "table".') == []


@pytest.mark.slow
def test_flags_on_the_labelled_set(items, bundled):
    sigs = B.flags_on(bundled.model.eval(), bundled.tokenizer, items)
    flags = [B.raised(s) for s in sigs]
    held_out = range(1, len(items), 2)
    for kind, (p_min, r_min) in FLOORS.items():
        s = B.score(items, flags, kind, held_out)
        assert s.precision >= p_min and s.recall >= r_min, (kind, s)
    clean, n = B.fine_clean(items, flags, held_out)
    assert clean >= FINE_FLOOR * n, (clean, n)
    cut = B.score(items, flags, "cutoff", range(len(items)))
    assert cut.tp >= 1 and cut.fp == cut.fn == 0
