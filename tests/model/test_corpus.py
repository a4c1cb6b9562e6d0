"""The corpus analysis (model/interpret/corpus.py): reading sets and bad input, each column against an independent
computation (Captum's Input × Gradient, sacrebleu, the teacher-forced trace, explain's ablated passes), the flags on
planted translations of the bundled model, and the CLI's JSON against the analysis."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

from model.cli import main as cli
from model.core.ablation import Ablation
from model.decode.decoding import DecodeOptions, decode, prepare_ids
from model.decode.trace import teacher_forced_trace
from model.interpret import corpus as C
from model.interpret import faithful
from model.interpret.attribution import attribute
from model.interpret.explain import position_loss_delta
from model.interpret.faithful import LOGIT_POSITIONS
from model.io.checkpoint import default_model_dir, load_model_dir

SOURCES = ["the cat sat on the mat", "a dog runs", "Tom has 3 red apples in Paris"]
REFS = ["le chat est assis sur le tapis", "un chien court", "Tom a 3 pommes rouges à Paris"]


def ids_of(tok, model, text):
    return prepare_ids(tok.encode(text), model.cfg.eos_id, model.cfg.max_len)


# ---------------------------------------------------------------------------
# Reading a set


def test_reads_plain_tsv_csv_and_refs():
    plain = C.read_corpus(b"one\n\ntwo\n", "a.txt")
    assert plain.sources == ["one", "two"] and plain.references is None and plain.skipped == {"blank lines": 1}
    tsv = C.read_corpus(b"one\tun\ttatoeba attribution\ntwo\tdeux\n", "a.tsv")
    assert tsv.sources == ["one", "two"] and tsv.references == ["un", "deux"]
    csv_ = C.read_corpus(b'English,French\n"one, two",un\nthree,trois\n', "a.csv")
    assert csv_.sources == ["one, two", "three"] and csv_.references == ["un", "trois"]
    refs = C.read_corpus(b"one\ntwo\n", "a.txt", b"un\ndeux\n")
    assert refs.references == ["un", "deux"]


@pytest.mark.parametrize(
    "data, name, message",
    [
        (b"", "a.txt", "the file is empty"),
        (b"  \n\n", "a.txt", "the file holds only blank lines"),
        (b"\x00\x01\x02PK\x03\x04" * 100, "a.bin", "looks binary"),
        (b"a" * (C.MAX_BYTES + 1), "big.txt", "files up to 20 MB are read"),
        (b"x" * 10_000, "long.txt", "no sentence to analyse in the file (1 line longer than 1,000 characters)"),
        (b"source,target\none,un\n", "a.csv", "the CSV has no 'english' column (its header is 'source', 'target')"),
        ("é".encode("latin-1") * 3 + b"\n" + "é".encode("latin-1") + b"\n", "a.txt", "is not UTF-8 text"),
    ],
)
def test_bad_input_is_one_sentence(data, name, message):
    with pytest.raises(C.CorpusError) as e:
        C.read_corpus(data, name)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_bad_lines_are_skipped_and_counted():
    data = ("good one\n" + "x" * 10_000 + "\nalso good\n").encode() + "café\n".encode("cp1252")
    c = C.read_corpus(data, "a.txt")
    assert c.sources == ["good one", "also good", "café"]  # the Windows-1252 line is read as such
    assert c.skipped == {"lines longer than 1,000 characters": 1}
    assert c.notes == ["1 line was not UTF-8, read as Windows-1252"]
    assert "3 sentences without references; skipped: 1 line longer than 1,000 characters" == c.summary()
    two = C.read_corpus(b"one\tun\n\n\ntwo\tdeux\nthree\tun\nfour\n", "a.tsv")
    assert two.summary() == "3 sentences with references; skipped: 2 blank lines, 1 line without a tab (no reference)"


def test_mismatched_refs_and_missing_french_column_analyse_without_references():
    c = C.read_corpus(b"one\ntwo\n", "a.txt", b"un\n")
    assert c.references is None and "has 1 line for 2 sentences" in c.notes[0]
    c = C.read_corpus(b"english,notes\none,x\n", "a.csv")
    assert c.sources == ["one"] and c.references is None and "no 'french' column" in c.notes[0]
    c = C.read_corpus(b"one\tun\ntwo\tdeux\nthree\n", "a.tsv")
    assert c.sources == ["one", "two"] and c.skipped == {"lines without a tab (no reference)": 1}


def test_a_tsv_is_recognised_by_most_of_its_lines():
    c = C.read_corpus(b"a header without a tab\none\tun\ntwo\tdeux\n", "a.txt")
    assert c.sources == ["one", "two"] and c.references == ["un", "deux"]
    assert c.skipped == {"lines without a tab (no reference)": 1}
    c = C.read_corpus(b"one\ntwo\nthree\tdeux\n", "a.txt")  # a tab in a minority of lines: plain lines
    assert c.sources == ["one", "two", "three"] and c.references is None
    assert c.notes == [
        "1 of 3 lines holds a tab, too few for a TSV: read as plain lines without references (the text "
        "after the tab left out)"
    ]
    two = C.read_corpus(b"one\tun\ntwo\tdeux\nthree\n\n\nfour\nfive\n", "a.txt")
    assert two.notes[0].startswith("2 of 5 lines hold a tab")


def test_a_reference_after_three_bars_is_read_as_after_a_tab():
    """A phone's keyboard has no tab: "english ||| french [||| domain]" is a TSV's line; a CSV is read as CSV."""
    c = C.read_corpus(b"A dog runs. ||| Un chien court.\nA cat|||Un chat ||| news\nno reference\n", "")
    assert c.sources == ["A dog runs.", "A cat"] and c.references == ["Un chien court.", "Un chat"]
    assert c.domains == ["", "news"] and c.skipped == {"lines without a tab (no reference)": 1}
    assert C.read_corpus(b"one\tun ||| a\n", "").references == ["un ||| a"]  # a tab's line keeps its bars
    assert C.read_corpus(b"english,french\na ||| b,c\n", "a.csv").sources == ["a ||| b"]


# ---------------------------------------------------------------------------
# Each column against an independent computation


def test_pair_signals_match_trace_and_captum(tiny_model, tiny_tokenizer):
    m, tok = tiny_model.eval(), tiny_tokenizer
    srcs = [ids_of(tok, m, s) for s in SOURCES]
    outs = [list(decode(m, s, DecodeOptions(max_len=9)).ids) for s in srcs]
    pairs = C.pair_signals(m, srcs, outs)  # one padded batch of three
    assert all(q.grad is None for q in m.parameters()), "the backward pass left gradients on the model"
    for s, o, p in zip(srcs, outs, pairs):
        body = o[:-1] if o[-1] == m.cfg.eos_id else o
        tr = teacher_forced_trace(m, tok, s[:-1], body)
        labels = tr.arrays["label_ids"][: len(o)]
        np.testing.assert_allclose(p.token_probs, tr.arrays["probs"][np.arange(len(o)), labels], rtol=1e-4)
        ref = attribute(m, s, o, "ixg")  # Captum, one copy per position: the per-position raw attributions
        a_src, a_tgt = np.abs(ref.raw_src.sum(0)).sum(), np.abs(ref.raw_tgt.sum(0)).sum()
        assert p.source_share == pytest.approx(a_src / (a_src + a_tgt), rel=1e-3)


@pytest.mark.parametrize("span", [C.ATTRIBUTION_SPAN, 2, 1])  # positions a backward pass explains
def test_per_token_attribution_matches_captum(tiny_model, tiny_tokenizer, monkeypatch, span):
    monkeypatch.setattr(C, "ATTRIBUTION_SPAN", span)
    m, tok = tiny_model.eval(), tiny_tokenizer
    srcs = [ids_of(tok, m, s) for s in SOURCES]
    tgts = [tok.encode(r)[:6] + [m.cfg.eos_id] for r in REFS]
    attr, _ = C._per_token_attribution(m, *C._batch(m, srcs, tgts))
    for i, (s, t) in enumerate(zip(srcs, tgts)):
        np.testing.assert_allclose(attr[i, : len(t), : len(s)].numpy(), attribute(m, s, t, "ixg").src, atol=1e-5)


# positions whose logits are taken together (3 splits the H·B rows' positions); the products' precision, and how far
# a sentence's loss increase may then be from float32's (bfloat16's rounding: about 5e-3 of the tiny model's increases
# up to 0.24)
@pytest.mark.parametrize(
    ("positions", "dtype", "tol"),
    [(LOGIT_POSITIONS, torch.float32, 2e-5), (3, torch.float32, 2e-5), (LOGIT_POSITIONS, torch.bfloat16, 1e-2)],
)
def test_removal_losses_match_one_ablated_pass_each(tiny_model, tiny_tokenizer, monkeypatch, positions, dtype, tol):
    monkeypatch.setattr(faithful, "LOGIT_POSITIONS", positions)
    m, tok = tiny_model.eval(), tiny_tokenizer
    srcs = [ids_of(tok, m, s) for s in SOURCES[:2]]
    tgts = [tok.encode(r) + [m.cfg.eos_id] for r in REFS[:2]]
    got = C.removal_losses(m, *C._batch(m, srcs, tgts), dtype)
    for kind in ("enc", "self", "cross"):
        L, H = got[kind].shape[1:]
        for li in range(L):
            for h in range(H):
                for i in range(2):
                    want = position_loss_delta(m, srcs[i], tgts[i], Ablation(frozenset({(kind, li, h)}))).mean()
                    assert got[kind][i, li, h] == pytest.approx(want, abs=tol)
    exact = C.removal_losses(m, *C._batch(m, srcs, tgts))
    assert all(np.array_equal(got[k], exact[k]) for k in got) == (dtype == torch.float32)  # the precision asked for


def test_head_table_states_its_removals_precision(tiny_model, tiny_tokenizer, monkeypatch):
    """In bfloat16 only the loss increases change, and the table says which precision it ran in: by default
    float32, the device's (``removal_dtype``) over more than FAST_ABOVE sentences."""
    m, tok = tiny_model.eval(), tiny_tokenizer
    srcs = [ids_of(tok, m, s) for s in SOURCES]
    tgts = [tok.encode(r) + [m.cfg.eos_id] for r in REFS]
    exact, fast = (C.head_table(m, srcs, tgts, dtype=d) for d in (torch.float32, torch.bfloat16))
    assert (exact["precision"], fast["precision"]) == ("float32", "bfloat16")
    device = str(C.removal_dtype(m.device)).removeprefix("torch.")
    monkeypatch.setattr(C, "FAST_ABOVE", 2)
    assert [C.head_table(m, srcs[:n], tgts[:n])["precision"] for n in (2, 3)] == ["float32", device]
    for kind in C.KINDS:
        for stat in C.STATS:
            if stat == "loss_increase":
                np.testing.assert_allclose(fast[kind][stat], exact[kind][stat], atol=1e-2)
                assert not np.array_equal(fast[kind][stat], exact[kind][stat])
            else:
                np.testing.assert_array_equal(fast[kind][stat], exact[kind][stat])
        for read in ("role", "examples"):  # read from the attention weights and the attribution, not the removals
            np.testing.assert_array_equal(fast[kind][read], exact[kind][read])


def test_head_statistics_by_brute_force(tiny_model, tiny_tokenizer):
    m, tok = tiny_model.eval(), tiny_tokenizer
    src = ids_of(tok, m, SOURCES[0])
    tgt = tok.encode(REFS[0]) + [m.cfg.eos_id]
    table = C.head_table(m, [src], [tgt])
    tr = teacher_forced_trace(m, tok, src[:-1], tgt[:-1])
    for kind, key in (("enc", "enc.1.self"), ("self", "dec.1.self"), ("cross", "dec.1.cross")):
        w = tr.arrays[f"{key}.weights"][0]  # head 0: (Tq, Tk)
        q, k = w.shape
        assert table[kind]["first"][1, 0] == pytest.approx(w[:, 0].mean(), abs=1e-6)
        assert table[kind]["same"][1, 0] == pytest.approx(
            np.mean([w[i, i] if i < k else 0 for i in range(q)]), abs=1e-6
        )
        assert table[kind]["previous"][1, 0] == pytest.approx(
            np.mean([w[i, i - 1] if i - 1 < k else 0 for i in range(1, q)]), abs=1e-6
        )
        rows = -(w * np.log(np.where(w > 0, w, 1))).sum(1)  # (q,)
        assert table[kind]["entropy"][1, 0] == pytest.approx(rows.mean(), abs=1e-5)
        seen = np.arange(1, q + 1) if kind == "self" else np.full(q, k)  # the keys each row can see
        spread = np.where(seen > 1, rows / np.log(np.maximum(seen, 2)), 0.0).mean()
        assert table[kind]["spread"][1, 0] == pytest.approx(spread, abs=1e-5)
        if kind == "self":
            assert math.isnan(table[kind]["eos"][1, 0])
        else:
            assert table[kind]["eos"][1, 0] == pytest.approx(w[:, -1].mean(), abs=1e-6)
    assert set(np.unique(table["cross"]["role"])) <= set(C.ROLES)
    lift = table["cross"]["agreement_lift"] - table["cross"]["agreement"]
    np.testing.assert_allclose(lift, -1 / (len(src) - 1))  # one sentence: chance is one over its tokens
    assert table["cross"]["examples"].shape == (m.cfg.n_decoder_layers, m.cfg.n_heads, 3)


def test_head_table_in_batches_holds_each_sentence_measured_alone(tiny_model, tiny_tokenizer):
    """Padded batches, several of them, and a source of </s> alone: every statistic is the mean of each sentence's
    own, measured on it alone (no padding), and the roles are those of these means."""
    m, tok = tiny_model.eval(), tiny_tokenizer
    sources = [*SOURCES, "two men are talking on a bench near the old red house", "the sun", ""]
    refs = [*REFS, "deux hommes parlent sur un banc", "le soleil", "bonjour"]
    srcs = [ids_of(tok, m, s) for s in sources]
    tgts = [tok.encode(r) + [m.cfg.eos_id] for r in refs]
    alone = [C.head_table(m, [s], [t], dtype=torch.float32) for s, t in zip(srcs, tgts)]
    for batch in (2, C.HEAD_BATCH):
        table = C.head_table(m, srcs, tgts, batch=batch, dtype=torch.float32)
        for kind in C.KINDS:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # decoder self-attention has no </s> key: all NaN
                want = {s: np.nanmean([a[kind][s] for a in alone], 0) for s in C.STATS}  # (L, H) each
            for stat in C.STATS:
                np.testing.assert_allclose(table[kind][stat], want[stat], atol=1e-6, err_msg=f"{batch} {kind} {stat}")
                # (N, L, H): each sentence's own, as measured alone (float32 summed in another batch's order)
                each = table["per_sentence"][kind][stat]
                np.testing.assert_allclose(each, [a[kind][stat] for a in alone], atol=1e-5, err_msg=f"{kind} {stat}")
            L, H = table[kind]["role"].shape
            roles = [[C.role_of({s: want[s][li, h] for s in C.STATS}) for h in range(H)] for li in range(L)]
            assert table[kind]["role"].tolist() == roles


def test_role_examples_are_where_the_head_shows_its_role_most(tiny_model, tiny_tokenizer):
    m, tok = tiny_model.eval(), tiny_tokenizer
    sources = [*SOURCES, "two men are talking on a bench", "the sun"]
    refs = [*REFS, "deux hommes parlent sur un banc", "le soleil"]
    srcs = [ids_of(tok, m, s) for s in sources]
    tgts = [tok.encode(r) + [m.cfg.eos_id] for r in refs]
    table = C.head_table(m, srcs, tgts)
    alone = [C.head_table(m, [s], [t]) for s, t in zip(srcs, tgts)]  # each sentence's own statistics
    for kind in C.KINDS:
        t = table[kind]
        L, H = t["role"].shape
        for li in range(L):
            for h in range(H):
                role = t["role"][li, h]
                names = (C.ROLES[role],) if isinstance(C.ROLES[role], str) else C.ROLES[role]
                per = np.array([np.nansum([a[kind][n][li, h] for n in names]) for a in alone])
                per = -per if role == "sharp" else per  # a sharp head shows it where its spread is lowest
                best = per[list(t["examples"][li, h])]
                assert (best[:-1] >= best[1:] - 1e-6).all() and best[-1] >= np.sort(per)[-3] - 1e-6, (kind, li, h)


def test_roles():
    low = {"same": 0.1, "previous": 0.1, "first": 0.1, "eos": 0.1, "spread": 0.9}
    assert C.role_of({**low, "same": 0.7}) == "diagonal"
    assert C.role_of({**low, "previous": 0.6}) == "previous token"
    assert C.role_of({**low, "first": 0.25, "eos": 0.25}) == "sink"
    assert C.role_of({**low, "agreement_lift": C.ALIGN_LIFT, "same": 0.9}) == "alignment"  # alignment comes first
    assert C.role_of({**low, "agreement_lift": C.ALIGN_LIFT - 0.01}) == "broad"
    assert C.role_of({**low, "spread": C.SHARP_SPREAD}) == "sharp"
    assert C.role_of({**low, "eos": float("nan"), "spread": C.SHARP_SPREAD + 0.01}) == "broad"


def test_rows_columns(tiny_model, tiny_tokenizer):
    from sacrebleu.metrics import BLEU, CHRF

    m, tok = tiny_model.eval(), tiny_tokenizer
    res = C.analyse(m, tok, C.Corpus(SOURCES, REFS), DecodeOptions(max_len=6), heads=0)
    for row, src, ref in zip(res.rows, SOURCES, REFS):
        hyp = row["translation"]
        assert row["chrf"] == pytest.approx(CHRF().sentence_score(hyp, [ref]).score)
        assert row["bleu"] == pytest.approx(BLEU(effective_order=True).sentence_score(hyp, [ref]).score)
        assert row["length_ratio"] == pytest.approx(len(re.findall(r"\w+", hyp)) / len(src.split()))
        assert 0.0 <= row["min_prob"] <= row["mean_prob"] <= 1.0
        assert row["flags"] == list(C.flag_words(row)) and set(row["flags"]) <= set(C.FLAGS)
    tom = res.rows[2]
    assert tom["names_numbers"] == 2  # "3" and "Paris" ("Tom" opens the sentence)
    assert tom["names_numbers_copied"] == sum(w in tom["translation"].split() for w in ("3", "Paris"))
    assert any(r["cut_off"] for r in res.rows) == any(
        decode(m, ids_of(tok, m, s), DecodeOptions(max_len=6)).ids[-1] != m.cfg.eos_id for s in SOURCES
    )
    beam = C.analyse(m, tok, C.Corpus(SOURCES, None), DecodeOptions(strategy="beam", beam=3, max_len=6), heads=0)
    for row, s in zip(beam.rows, SOURCES):
        ids = decode(m, ids_of(tok, m, s), DecodeOptions(strategy="beam", beam=3, max_len=6)).ids
        assert row["translation"] == tok.decode([i for i in ids if i != m.cfg.eos_id]) and row["chrf"] is None


def test_each_flag_from_its_signal():
    from model.interpret import faithful as F

    clean = {
        "min_support": 5.0,
        "min_support_word": "dog",
        "weak_words": ["red"],
        "weak_support": [F.DROPPED_NATS - 0.01],
        "weak_aligned": [F.ALIGNED_NATS - 0.01],
        "weak_pair": [F.PAIR_NATS],  # rendered with the word beside it
        "weak_lexical": [0.0],
        "weak_implied": [0.0],
        "weak_reference": [0.0],  # no reference, or one that writes nothing the translation lacks
        "repeated": [],
        "repeated_in_reference": [],
        "min_sensitivity": -5.0,  # shown, not a flag: the words it alone named were mostly non-words (docs/cli.md)
        "min_sensitivity_word": "chien",
        "min_word_prob": 0.9,
        "min_word_prob_word": "chien",
        "unsure_words": ["chien"],
        "unsure_prob": [F.WRONG_PROB],
        "unsure_lexical": [0.0],
        "non_words": [],
        "untranslated_words": [],
        "cut_off": False,
    }
    assert C.flag_words(clean) == {}
    for flag, change, words in (
        ("dropped words", {"weak_pair": [F.PAIR_NATS - 0.01]}, ["red"]),
        (
            "dropped words",
            {
                "weak_words": ["red", "ball"],
                "weak_support": [3.5, 0.0],
                "weak_aligned": [0.0, 0.0],
                "weak_pair": [0.0, 0.0],
                "weak_lexical": [0.0, F.LEXICON_DROPPED * 0.99],
                "weak_implied": [0.0, F.LEXICON_IMPLIED * 0.99],
                "weak_reference": [0.0, 0.0],
            },
            ["ball"],
        ),
        ("invented content", {"repeated": ["rue"], "repeated_in_reference": [False]}, ["rue"]),
        ("dropped words", {"weak_reference": [F.LEXICON_DROPPED]}, ["red"]),  # the reference outweighs the pair
        ("untranslated", {"untranslated_words": ["HORSE"]}, ["HORSE"]),
        ("wrong word", {"unsure_prob": [F.WRONG_PROB - 0.001]}, ["chien"]),
        ("wrong word", {"non_words": ["bloquier"]}, ["bloquier"]),
        ("cut off", {"cut_off": True}, []),
    ):
        row = {**clean, **change}
        assert C.flag_words(row) == {flag: words}, flag
    assert C.flags_text({"flag_words": {"dropped words": ["dog"], "cut off": []}}) == "dropped words (dog), cut off"
    assert C.flag_words({**clean, "min_support": float("nan"), "min_word_prob": float("nan")}) == {}
    assert C.flag_words({**clean, "weak_aligned": [F.ALIGNED_NATS], "weak_pair": [0.0]}) == {}  # it renders a word
    # a word the translation holds a lexical translation of is not dropped; one a source word translates, not wrong
    assert C.flag_words({**clean, "weak_pair": [0.0], "weak_lexical": [F.LEXICON_DROPPED]}) == {}
    assert C.flag_words({**clean, "weak_pair": [0.0], "weak_implied": [F.LEXICON_IMPLIED]}) == {}
    # a reference writing a translation the output lacks, under the bound, or a word the table finds rendered: not
    # dropped; a repeated word the reference writes as often: not invented
    assert C.flag_words({**clean, "weak_reference": [F.LEXICON_DROPPED * 0.99]}) == {}
    assert C.flag_words({**clean, "weak_reference": [1.0], "weak_lexical": [F.LEXICON_DROPPED]}) == {}
    assert C.flag_words({**clean, "repeated": ["rue"], "repeated_in_reference": [True]}) == {}
    assert C.flag_words({**clean, "unsure_prob": [0.0], "unsure_lexical": [F.LEXICON_WRONG]}) == {}
    assert C.flag_words({**clean, "unsure_prob": [0.0], "unsure_lexical": [F.LEXICON_WRONG * 0.99]}) == {
        "wrong word": ["chien"]
    }


def test_names_and_numbers():
    assert C.names_and_numbers("Tom met Mary at 7:45 in Paris") == ["Mary", "7", "45", "Paris"]


def test_spearman_against_pandas():
    import pandas as pd

    x, y = [1.0, 2.0, 2.0, 5.0, float("nan"), 3.0], [2.0, 1.0, 4.0, 4.0, 1.0, 0.5]
    both = pd.DataFrame({"x": x, "y": y}).dropna().rank()  # average ranks of ties, as Spearman's ρ takes them
    want = np.corrcoef(both["x"], both["y"])[0, 1]
    assert C.spearman(x, y) == pytest.approx(want)


# ---------------------------------------------------------------------------
# Planted translations on the bundled model: each flagged by its flag, the model's own translations by none.

PLANT_SOURCES = [
    "A man in a blue shirt is standing on a ladder and cleaning a window.",
    "A little girl is eating an apple in the kitchen.",
    "A woman rides a bicycle down the street.",
]
DROPPED = [  # a clause or phrase left out
    "Un homme en chemise bleue est debout sur une échelle.",
    "Une petite fille mange une pomme.",
    "Une femme fait du vélo.",
]
MORE = " Il y a beaucoup de gens qui regardent le match de football et boivent de la bière."


@pytest.fixture(scope="module")
def bundled():
    return load_model_dir(default_model_dir())


def planted(lm, outputs):
    ids = [lm.tokenizer.encode(o) + [lm.cfg.eos_id] for o in outputs]
    return C.analyse(lm.model, lm.tokenizer, C.Corpus(PLANT_SOURCES, None), heads=0, outputs=ids).rows


def test_planted_cases_flagged_by_their_flag(bundled):
    own = C.analyse(bundled.model, bundled.tokenizer, C.Corpus(PLANT_SOURCES, None), heads=0).rows
    # A known false alarm, as the labelled set measures them (fine sentences flagged dropped about one time in
    # eight): "rides a bicycle" -> "fait du vélo", whose light verb "bicycle" lowers more than "rides" does
    assert [r["flag_words"] for r in own] == [{}, {}, {"dropped words": ["rides"]}], [r["translation"] for r in own]
    for r in planted(bundled, DROPPED):
        assert "dropped words" in r["flags"] and "untranslated" not in r["flags"], r
    for r in planted(bundled, PLANT_SOURCES):  # copied untranslated
        assert "untranslated" in r["flags"], r
    cut = C.analyse(
        bundled.model, bundled.tokenizer, C.Corpus(PLANT_SOURCES, None), DecodeOptions(max_len=4), heads=0
    ).rows
    assert all("cut off" in r["flags"] for r in cut)


def test_a_set_with_references_is_flagged_with_them(bundled):
    """The analysis reads each sentence's reference: a word written twice that the reference writes twice too is
    not invented content, while the same translation analysed without references is flagged."""
    source, output = ["A boy jumps into a muddy puddle."], ["Un garçon saute dans une flaque boueuse boueuse."]
    ids = [bundled.tokenizer.encode(o) + [bundled.cfg.eos_id] for o in output]

    def flags(references):
        return C.analyse(bundled.model, bundled.tokenizer, C.Corpus(source, references), heads=0, outputs=ids).rows

    assert flags(None)[0]["flag_words"].get("invented content") == ["boueuse"]
    assert flags(["Un garçon saute dans une flaque de boue."])[0]["flag_words"].get("invented content") == ["boueuse"]
    read = flags(["Un garçon boueux saute dans une flaque boueuse."])[0]
    assert "invented content" not in read["flag_words"] and read["repeated_in_reference"] == [True]


# ---------------------------------------------------------------------------
# The CLI: the analysis's own numbers, strict JSON; bad input exits 2 with one line.


def test_cli_json_equals_the_analysis(tiny_model_dir, tmp_path):
    f = tmp_path / "set.tsv"
    f.write_text("".join(f"{s}\t{r}\n" for s, r in zip(SOURCES, REFS)) + "\n", encoding="utf-8")
    out = tmp_path / "out.json"
    assert cli(["corpus", str(f), "--model", str(tiny_model_dir), "--json", str(out)]) == 0
    got = json.loads(out.read_text(), parse_constant=lambda c: pytest.fail(f"not strict JSON: {c}"))
    lm = load_model_dir(tiny_model_dir)
    corpus = C.read_corpus(f.read_bytes(), f.name)
    want = C.report(C.analyse(lm.model, lm.tokenizer, corpus), corpus, DecodeOptions(), lm.path.name)
    from model.core.jsonio import dumps

    assert got == json.loads(dumps(want))
    assert got["skipped"] == {"blank lines": 1} and len(got["rows"]) == 3
    n_heads = lm.cfg.n_heads * (lm.cfg.n_encoder_layers + 2 * lm.cfg.n_decoder_layers)
    assert len(got["heads"]["rows"]) == n_heads and got["heads"]["target"] == "references"


def test_cli_csv_limit_and_refs(tiny_model_dir, tmp_path):
    f, refs, out = tmp_path / "en.txt", tmp_path / "fr.txt", tmp_path / "rows.csv"
    f.write_text("\n".join(SOURCES), encoding="utf-8")
    refs.write_text("\n".join(REFS), encoding="utf-8")
    args = ["corpus", str(f), "--refs", str(refs), "--limit", "2", "--model", str(tiny_model_dir), "--csv", str(out)]
    assert cli(args) == 0
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("index,source,translation,reference,chrf") and len(lines) == 3
    assert out.with_suffix(".heads.csv").read_text().startswith("kind,layer,head,same")


@pytest.mark.parametrize(
    "content, args, message",
    [
        (b"", [], "error: the file is empty"),
        (b"\x00\x00binary", [], "error: the file looks binary"),
        (b"source,other\nx,y\n", ["--name", "a.csv"], "error: the CSV has no 'english' column"),
        (b"one\n", ["--limit", "0"], "error: --limit must be at least 1, not 0"),
        (b"one\n", ["--head-sentences", "0"], "error: --head-sentences must be at least 1, not 0"),
        (b"one\n", ["--beam", "99"], "error: beam width must be between 1 and 8, not 99"),
    ],
)
def test_cli_bad_input_exits_2(tiny_model_dir, tmp_path, capsys, content, args, message):
    name = args[1] if args[:1] == ["--name"] else "in.txt"
    args = [a for a in args if a not in ("--name", "a.csv")]
    f = tmp_path / name
    f.write_bytes(content)
    assert cli(["corpus", str(f), "--model", str(tiny_model_dir), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(message) and len([e for e in err if e.startswith("error")]) == 1


def test_cli_head_table_over_the_sentences_asked(tiny_model_dir, tmp_path, capsys):
    f, out = tmp_path / "set.tsv", tmp_path / "out.json"
    f.write_text("".join(f"{s}\t{r}\n" for s, r in zip(SOURCES, REFS)), encoding="utf-8")
    assert cli(["corpus", str(f), "--model", str(tiny_model_dir), "--head-sentences", "2", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["heads"]["sentences"] == 2
    assert "3 sentences analysed" in (said := capsys.readouterr().out) and "head table over the first 2 (" in said
    assert cli(["corpus", str(f), "--model", str(tiny_model_dir), "--head-sentences", "9", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["heads"]["sentences"] == 3  # no more than the set holds
    assert "head table over the first 3 (" in capsys.readouterr().out


def test_cli_says_the_precision_of_a_large_head_table(tiny_model_dir, tmp_path, capsys, monkeypatch):
    f, out = tmp_path / "set.tsv", tmp_path / "out.json"
    f.write_text("".join(f"{s}\t{r}\n" for s, r in zip(SOURCES, REFS)), encoding="utf-8")
    monkeypatch.setattr(C, "FAST_ABOVE", 2)  # the CLI's three sentences make a large table
    monkeypatch.setattr(C, "removal_dtype", lambda device: torch.bfloat16)  # as on a device that multiplies it
    assert cli(["corpus", str(f), "--model", str(tiny_model_dir), "--json", str(out)]) == 0
    assert json.loads(out.read_text())["heads"]["precision"] == "bfloat16"
    assert C.precision_note("bfloat16") in capsys.readouterr().out
    assert cli(["corpus", str(f), "--model", str(tiny_model_dir), "--head-sentences", "2", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["heads"]["precision"] == "float32"
    assert "bfloat16" not in capsys.readouterr().out and C.precision_note("float32") == ""


def test_cli_missing_file_exits_2(tmp_path, capsys):
    assert cli(["corpus", str(tmp_path / "nope.txt")]) == 2
    assert capsys.readouterr().err.startswith("error:")


@pytest.mark.slow  # sacrebleu's command line: a fresh Python process
def test_corpus_scores_equal_sacrebleu_cli(tmp_path):
    """Corpus BLEU and chrF, their signatures and bootstrap intervals, as the sacrebleu command prints them."""
    hyps = ["le chat est assis sur le tapis", "un chien court vite", "Tom a trois pommes", "bonjour"] * 5
    refs = ["le chat est assis sur le tapis", "un chien court", "Tom a 3 pommes rouges à Paris", "salut"] * 5
    rows = [{"translation": h, "reference": r} for h, r in zip(hyps, refs)]
    got = C.corpus_scores(rows)
    (tmp_path / "h.txt").write_text("\n".join(hyps) + "\n", encoding="utf-8")
    (tmp_path / "r.txt").write_text("\n".join(refs) + "\n", encoding="utf-8")
    cmd = [sys.executable, "-m", "sacrebleu", str(tmp_path / "r.txt"), "-i", str(tmp_path / "h.txt")]
    cmd += ["-m", "bleu", "chrf", "--confidence", "--confidence-n", str(C.BOOTSTRAP), "-f", "json", "-w", "4"]
    want = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    for name, w in zip(("bleu", "chrf"), want):
        g = got[name]
        assert g["signature"] == w["signature"] and f"bs:{C.BOOTSTRAP}" in g["signature"]
        assert round(g["score"], 4) == w["score"]
        assert round(g["mean"], 4) == w["confidence_mean"] and round(g["ci"], 4) == w["confidence_var"]
        assert g["low"] < g["score"] < g["high"]
        assert (g["high"] - g["low"]) / 2 == pytest.approx(w["confidence_var"], abs=1e-4)  # sacrebleu's ci is half
    assert C.corpus_scores([{"translation": "a", "reference": None}]) is None


def test_a_few_skewed_sentences_keep_their_interval_within_the_score_s_range():
    """Two of three sentences perfect: sacrebleu's mean ± ci reaches past 100; the interval is the resamples' own
    2.5th–97.5th percentiles, within 0–100, and half its width is sacrebleu's ci."""
    hyps = ["Un homme fait du vélo.", "Une fille joue du piano.", "Il pleut des chats."]
    refs = ["Un homme fait du vélo.", "Une fille joue du piano.", "Il pleut à verse aujourd'hui."]
    got = C.corpus_scores([{"translation": h, "reference": r} for h, r in zip(hyps, refs)])
    assert got is not None
    for g in got.values():
        assert g["mean"] + g["ci"] > 100  # what the interval read before: past the score's range
        assert 0 <= g["low"] <= g["score"] <= g["high"] <= 100 + 1e-9  # sacrebleu's sums are float32
        assert (g["high"] - g["low"]) / 2 == pytest.approx(g["ci"], abs=1e-9)


def test_corpus_scores_of_a_set_with_an_empty_translation():
    """sacrebleu's chrF bootstrap fails on a small set with an empty translation (a resample of it alone scores a
    float among numpy floats); the scores are still sacrebleu's."""
    from sacrebleu.metrics import BLEU, CHRF

    hyps = ["", "Un homme court.", "Deux chiens"]
    refs = ["Un chat dort.", "Un homme court vite.", "Deux chiens jouent."]
    with pytest.raises(TypeError):
        CHRF().corpus_score(hyps, [refs], n_bootstrap=C.BOOTSTRAP)
    got = C.corpus_scores([{"translation": h, "reference": r} for h, r in zip(hyps, refs)])
    assert got is not None and got["chrf"]["score"] == CHRF().corpus_score(hyps, [refs]).score
    assert got["bleu"]["score"] == BLEU().corpus_score(hyps, [refs]).score
    assert got["chrf"]["low"] <= got["chrf"]["mean"] <= got["chrf"]["high"] and got["chrf"]["ci"] > 0
    assert f"bs:{C.BOOTSTRAP}|" in got["chrf"]["signature"] and "|nc:6|nw:0|" in got["chrf"]["signature"]


def test_the_cli_says_a_correlation_is_undefined_rather_than_nan(capsys):
    from model.cli import print_summary

    r = {"corpus": None, "flag_counts": {}, "lexicon": True, "slices": []}
    print_summary({**r, "correlations": {"mean_prob": float("nan"), "min_prob": 0.5}})
    out = capsys.readouterr().out
    assert "mean probability undefined, lowest token probability +0.50" in out and "nan" not in out.lower()
    assert "fewer than 3 sentences have a value" in out and C.lexicon_note(True) in out
    print_summary({**r, "correlations": {"min_prob": 0.5}})
    assert "undefined" not in capsys.readouterr().out


def test_cli_prints_scores_flag_counts_and_correlations(tiny_model_dir, tmp_path, capsys):
    f = tmp_path / "set.tsv"
    f.write_text("".join(f"{s}\t{r}\n" for s, r in zip(SOURCES, REFS)), encoding="utf-8")
    assert cli(["corpus", str(f), "--model", str(tiny_model_dir), "--no-heads"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^BLEU [\d.]+, 95 % bootstrap interval [\d.]+–[\d.]+ \(percentiles of 1,000 resamples", out, re.M)
    assert re.search(r"^chrF [\d.]+, .*nrefs:1\|bs:1000", out, re.M)
    assert re.search(r"^flags: dropped words \d+, invented content \d+, untranslated \d+, wrong word \d+", out, re.M)
    assert "Spearman ρ with sentence chrF: mean probability" in out and "3 sentences analysed" in out


@pytest.mark.slow  # sacrebleu's command line: a fresh Python process
def test_two_runs_paired_bootstrap_equals_sacrebleu_cli(tmp_path):
    from model.interpret.runs import compare_runs

    refs = ["le chat est assis sur le tapis", "un chien court", "Tom a 3 pommes rouges à Paris", "salut"] * 6
    a = ["le chat est assis sur le tapis", "un chien court vite", "Tom a trois pommes", "bonjour"] * 6
    b = ["le chat est assis sur un tapis", "un chien court", "Tom a 3 pommes rouges", "bonjour"] * 6
    got = compare_runs([f"s{i}" for i in range(len(refs))], refs, a, b, ("greedy", "beam 5"))
    for name, lines in (("r", refs), ("a", a), ("b", b)):
        (tmp_path / f"{name}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    cmd = [sys.executable, "-m", "sacrebleu", str(tmp_path / "r.txt"), "-i", str(tmp_path / "a.txt")]
    cmd += [str(tmp_path / "b.txt"), "-m", "bleu", "chrf", "--paired-bs", "--paired-bs-n", str(C.BOOTSTRAP)]
    out = subprocess.run([*cmd, "-w", "4", "-f", "text"], capture_output=True, text=True, check=True).stdout
    p_bleu, p_chrf = (float(p) for p in re.findall(r"\(p = ([\d.]+)\)", out))
    assert round(got["corpus"]["bleu"]["p_value"], 4) == p_bleu and round(got["corpus"]["chrf"]["p_value"], 4) == p_chrf
    assert got["corpus"]["bleu"]["difference"] == pytest.approx(
        got["corpus"]["bleu"]["beam 5"] - got["corpus"]["bleu"]["greedy"]
    )
    assert got["better"] == 12 and got["worse"] == 6 and len(got["chrf_difference"]) == 24
    moved = [c["difference"] for c in got["changed_most"]]
    assert moved == sorted(moved, key=abs, reverse=True) and len(moved) == 10


def test_cli_two_runs_side_by_side(tiny_model_dir, tmp_path, capsys):
    f, out = tmp_path / "set.tsv", tmp_path / "out.json"
    f.write_text("".join(f"{s}\t{r}\n" for s, r in zip(SOURCES, REFS)), encoding="utf-8")
    args = ["corpus", str(f), "--model", str(tiny_model_dir), "--no-heads", "--versus-beam", "3", "--json", str(out)]
    assert cli(args) == 0
    vs = json.loads(out.read_text())["versus"]
    assert vs["runs"] == [f"{tiny_model_dir.name} greedy", f"{tiny_model_dir.name} beam 3"]
    assert "beam 3 against" in capsys.readouterr().out and 0.0 <= vs["corpus"]["chrf"]["p_value"] <= 1.0
    plain = tmp_path / "en.txt"
    plain.write_text("\n".join(SOURCES), encoding="utf-8")
    assert cli(["corpus", str(plain), "--model", str(tiny_model_dir), "--versus-beam", "2"]) == 2
    assert "comparing two runs needs references" in capsys.readouterr().err


def test_slices_by_length_flag_and_domain():
    from sacrebleu.metrics import CHRF

    c = C.read_corpus(
        b"a dog runs\tun chien court\tpets\nthe cat sleeps on the warm mat today\tle chat\tpets\n"
        b"two men talk\tdeux hommes parlent\tpeople\n",
        "a.tsv",
    )
    assert c.domains == ["pets", "pets", "people"]
    assert C.read_corpus(b"english,french,domain\none,un,x\n", "a.csv").domains == ["x"]
    assert C.read_corpus(b"one\tun\n", "a.tsv").domains is None
    hyps = ["un chien court", "le chat dort", "deux hommes"]
    rows = [
        {"source": s, "translation": h, "reference": r, "flags": f}
        for s, h, r, f in zip(c.sources, hyps, c.references, [[], ["dropped words"], []])
    ]
    got = {(s["by"], s["slice"]): s for s in C.slices(rows, c.domains)}
    assert got[("length", "1–8 words")]["sentences"] == 3 and got[("length", "9–15 words")]["sentences"] == 0
    assert got[("length", "9–15 words")]["chrf"] is None
    assert got[("flag", "dropped words")]["sentences"] == 1 and got[("flag", "no flag")]["sentences"] == 2
    pets = got[("domain", "pets")]
    assert pets["sentences"] == 2 and pets["flagged"] == 0.5
    assert pets["chrf"] == pytest.approx(CHRF().corpus_score(hyps[:2], [c.references[:2]]).score)
    assert all(s["bleu"] is None for s in C.slices([{**r, "reference": None} for r in rows]))


def test_the_reported_max_len_is_where_translations_are_cut(tiny_model_dir, tmp_path):
    """The JSON's max_len is the decodes' own bound (the model's positions less the start token), not the
    decoding's nominal 128: the tiny model (64 positions) cuts its translations at 63 tokens."""
    lm = load_model_dir(tiny_model_dir)
    f, out = tmp_path / "set.txt", tmp_path / "out.json"
    f.write_text("the cat sat on the mat\n", encoding="utf-8")
    assert cli(["corpus", str(f), "--model", str(tiny_model_dir), "--no-heads", "--json", str(out)]) == 0
    r = json.loads(out.read_text())
    src = prepare_ids(lm.tokenizer.encode("the cat sat on the mat"), lm.cfg.eos_id, lm.cfg.max_len)
    (ids,) = C.translate_ids(lm.model, [src], DecodeOptions())
    assert r["rows"][0]["cut_off"] and len(ids) == r["decoding"]["max_len"] == lm.cfg.max_len - 1 < 128


def test_tokens_in_the_rows_are_written_as_a_reader_writes_them():
    assert C.readable("▁chat") == "chat" and C.readable("▁") == "␣" and C.readable("ment") == "ment"
    assert C.readable("") == ""


def test_removal_precision_follows_the_cpu_check_and_survives_its_absence(monkeypatch):
    """bfloat16 only where the CPU multiplies it natively; a torch without its (private) check gets float32."""
    cpu = torch.device("cpu")
    for native, want in ((True, torch.bfloat16), (False, torch.float32)):
        monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda native=native: native, raising=False)
        assert C.removal_dtype(cpu) == want
    monkeypatch.delattr(torch.cpu, "_is_avx512_bf16_supported")
    assert C.removal_dtype(cpu) == torch.float32
