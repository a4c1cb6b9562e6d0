"""Beam search of several sentences at once (``beam_batch``) against the same search one sentence at a time
(``decode``): the same n-best, in the same order, with the same scores to float rounding."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from model.decode.decoding import BEAM_ROWS, DecodeOptions, batch_beams, beam_batch, decode
from model.decode.lean import LeanCache, LeanDecoder
from model.interpret.corpus import translate_ids
from model.testing import make_model

TEXTS = [
    "I am a student.",
    "Hello world.",
    "The cat is sleeping on the sofa.",
    "I like pizza.",
    "A man in a blue shirt is riding a horse on the beach near the water.",
    "Two dogs.",
    "She reads a book every evening.",
]


@pytest.fixture(scope="module")
def eos_model(tiny_tokenizer):
    """The tiny model with </s> likely enough that hypotheses end at different steps, some before max_len, so
    sentences leave the batch at different steps and the length penalty matters."""
    model = make_model(tiny_tokenizer.vocab_size, final_logits_bias=True)
    with torch.no_grad():
        model.final_logits_bias[model.cfg.eos_id] = 4.6
    return model.eval()


def sources(tok, model):
    return [tok.encode(t) + [model.cfg.eos_id] for t in TEXTS]


@pytest.mark.parametrize(
    ("k", "length_penalty", "max_len", "both_endings"),
    [(4, 1.0, 12, True), (5, 0.6, 9, False), (2, 2.0, 14, True), (3, 0.0, 4, False)],
)
def test_batched_beams_give_the_n_best_of_one_sentence_at_a_time(
    tiny_tokenizer, eos_model, monkeypatch, k, length_penalty, max_len, both_endings
):
    srcs = sources(tiny_tokenizer, eos_model)
    opts = DecodeOptions(strategy="beam", beam=k, n_best=k, length_penalty=length_penalty, max_len=max_len)
    alone = [decode(eos_model, s, opts).n_best for s in srcs]
    left = []  # the rows each shrink of the batch kept
    shrink = LeanCache.shrink
    monkeypatch.setattr(LeanCache, "shrink", lambda self, rows: left.append(len(rows)) or shrink(self, rows))
    together = beam_batch(eos_model, srcs, opts, LeanDecoder(eos_model, rows=BEAM_ROWS, compiled_steps=False))
    for one, batched in zip(alone, together):
        assert [(h.ids, h.finished) for h in batched] == [(h.ids, h.finished) for h in one]
        np.testing.assert_allclose([h.score for h in batched], [h.score for h in one], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose([h.logprob for h in batched], [h.logprob for h in one], rtol=1e-5, atol=1e-5)
    if max_len > 4:
        assert left and all(0 < n < len(srcs) * k for n in left)  # some sentences finished and left the batch first
    if both_endings:  # hypotheses that ended with </s> and ones cut at max_len
        assert {h.ids[-1] == eos_model.cfg.eos_id for nb in alone for h in nb} == {True, False}


def test_a_batch_of_one_and_the_compiled_step_give_the_same(tiny_tokenizer, eos_model):
    srcs = sources(tiny_tokenizer, eos_model)
    opts = DecodeOptions(strategy="beam", beam=3, max_len=10)
    want = [decode(eos_model, s, opts).ids for s in srcs]
    assert [nb[0].ids for s in srcs for nb in beam_batch(eos_model, [s], opts)] == want
    compiled = LeanDecoder(eos_model, rows=3)  # the compiled step, five rows at a time
    assert [nb[0].ids for nb in beam_batch(eos_model, srcs, opts, compiled)] == want


def test_decodings_the_batch_does_not_take_go_one_sentence_at_a_time(tiny_tokenizer, eos_model):
    lean = LeanDecoder(eos_model, rows=BEAM_ROWS, compiled_steps=False)
    beam = DecodeOptions(strategy="beam", beam=3, max_len=8)
    assert batch_beams(beam, lean)
    prefixed = DecodeOptions(strategy="beam", beam=3, max_len=8, prefix=(5,))
    for opts in (prefixed, DecodeOptions(max_len=8), DecodeOptions(strategy="beam", beam=1, max_len=8)):
        assert not batch_beams(opts, lean)
    srcs = sources(tiny_tokenizer, eos_model)[:3]
    got = beam_batch(eos_model, srcs, prefixed, lean)
    assert [nb[0].ids for nb in got] == [decode(eos_model, s, prefixed).ids for s in srcs]
    assert all(nb[0].ids[0] == 5 for nb in got)


def test_the_corpus_translates_a_beam_run_in_batches_as_one_sentence_at_a_time(tiny_tokenizer, eos_model, monkeypatch):
    import model.interpret.corpus as corpus

    srcs = sources(tiny_tokenizer, eos_model) * 3  # more sentences than one batch holds
    monkeypatch.setattr(corpus, "BEAM_ROWS", 4 * 5)
    calls = []
    monkeypatch.setattr(corpus, "beam_batch", lambda *a: calls.append(len(a[1])) or beam_batch(*a))
    opts = DecodeOptions(strategy="beam", beam=4, max_len=10)
    assert translate_ids(eos_model, srcs, opts) == [list(decode(eos_model, s, opts).ids) for s in srcs]
    assert calls == [5, 5, 5, 5, 1]


def test_shrink_is_select_in_place():
    """A batch's rows leaving: shrink gives select's K, V, source and mask, in views of the same buffers."""
    rng = np.random.default_rng(0)
    L, R, H, T, d_k, S, t = 2, 6, 3, 9, 4, 5, 6
    KV = rng.standard_normal((L, R, 2, H, T, d_k)).astype(np.float32)
    cross = rng.standard_normal((L, R, 2, H, S, d_k)).astype(np.float32)
    mask = rng.standard_normal((R, 1, 1, S)).astype(np.float32)
    for rows in ([3, 2, 5], [5, 5, 0, 1], [0, 1, 2], [4]):
        cache = LeanCache(KV.copy(), cross.copy(), None, mask.copy(), t)
        want = cache.select(rows)
        got = cache.shrink(rows)
        assert np.shares_memory(got.KV, cache.KV) and got.rows == len(rows) and got.t == t
        np.testing.assert_array_equal(got.KV[:, :, :, :, :t], want.KV[:, :, :, :, :t])
        np.testing.assert_array_equal(got.cross, want.cross)
        np.testing.assert_array_equal(got.src_mask, want.src_mask)
