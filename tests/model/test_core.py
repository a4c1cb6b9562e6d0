"""Invariants of the instrumented Transformer, its trace and its KV-cached decoding."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from model import ModelConfig
from model.core import keys
from model.core.ablation import Ablation
from model.core.constants import NEG
from model.core.transformer import causal_mask, head_masks, sinusoidal_table
from model.decode import lean as lean_module
from model.decode.decoding import (
    DecodeOptions,
    ModuleDecoder,
    decode,
    filter_logits,
    greedy_batch,
    length_batches,
    prepare_ids,
    to_numpy,
    translate_batch,
)
from model.decode.fused import best_continuations
from model.decode.lean import LeanDecoder
from model.decode.trace import teacher_forced_trace
from model.testing import make_model

SRC = "The cat is sleeping on the sofa."
TGT = "Le chat dort sur le canapé."


def src_ids(tok, model, text=SRC):
    return tok.encode(text) + [model.cfg.eos_id]


def test_attention_matches_sdpa(tiny_model):
    torch.manual_seed(1)
    attn = tiny_model.decoder_layers[0].self_attn
    x = torch.randn(2, 6, tiny_model.cfg.d_model)
    K, V = attn.project_kv(x)
    pad = torch.zeros(2, 1, 1, 6)
    pad[1, ..., 4:] = float("-inf")  # second sequence has two padding keys
    for mask in (causal_mask(6), pad):
        out, rec = attn(x, K, V, mask, record=True)
        ref = F.scaled_dot_product_attention(rec["Q"], K, V, attn_mask=mask)
        torch.testing.assert_close(rec["context"], ref, atol=1e-6, rtol=1e-5)
        fast, _ = attn(x, K, V, mask, record=False)
        torch.testing.assert_close(out, fast, atol=1e-6, rtol=1e-5)


def test_masked_softmax_rows_sum_to_one_and_ignore_the_future(tiny_model, tiny_tokenizer):
    tr = teacher_forced_trace(tiny_model, tiny_tokenizer, SRC, TGT)
    T = len(tr.dec_input_tokens)
    upper = np.triu(np.ones((T, T), dtype=bool), k=1)
    for layer in range(tiny_model.cfg.n_decoder_layers):
        w = tr.arrays[keys.dec(layer, "self", "weights")]  # (H, T, T)
        np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-6)
        assert (w[:, upper] == 0.0).all()
        mask = tr.arrays[keys.dec(layer, "self", "mask")]
        assert np.isneginf(mask[:, upper]).all() and (mask[:, ~upper] == 0).all()
        np.testing.assert_array_equal(
            tr.arrays[keys.dec(layer, "self", "masked_scores")], tr.arrays[keys.dec(layer, "self", "scores")] + mask
        )
        cross = tr.arrays[keys.dec(layer, "cross", "weights")]
        assert cross.shape[-2:] == (T, len(tr.src_tokens))
        np.testing.assert_allclose(cross.sum(-1), 1.0, atol=1e-6)


def test_trace_labels_are_the_target_shifted(tiny_model, tiny_tokenizer):
    tr = teacher_forced_trace(tiny_model, tiny_tokenizer, SRC, TGT)
    cfg = tiny_model.cfg
    y = tiny_tokenizer.encode(TGT)
    assert tr.arrays["dec_input_ids"].tolist() == [cfg.decoder_start_id, *y]
    assert tr.arrays["label_ids"].tolist() == [*y, cfg.eos_id]
    assert tr.dec_input_tokens[1:] == tr.label_tokens[:-1]
    a = tr.arrays
    np.testing.assert_allclose(a["dec.input"], a["dec.embed"] + a["dec.pe"], atol=1e-6)
    probs = a["probs"]
    np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-5)
    expected_loss = -np.log(probs[np.arange(len(y) + 1), a["label_ids"]])
    np.testing.assert_allclose(a["loss"], expected_loss, rtol=1e-4, atol=1e-5)
    for stage in ("norm1", "norm2", "norm3"):  # Add & Norm record is self-consistent
        r = {k: a[f"dec.1.{stage}.{k}"] for k in ("residual", "mean", "std", "out")}
        ln = tiny_model.decoder_layers[1]._modules[stage].norm
        manual = (r["residual"] - r["mean"][:, None]) / r["std"][:, None] * ln.weight.detach().numpy()
        np.testing.assert_allclose(manual + ln.bias.detach().numpy(), r["out"], atol=1e-5)
    assert a["memory"].shape == (len(tr.src_tokens), cfg.d_model)
    assert a["enc.0.self.weights"].shape == (cfg.n_heads, len(tr.src_tokens), len(tr.src_tokens))


def test_future_token_cannot_change_the_past_unless_unmasked(tiny_model, tiny_tokenizer):
    y = tiny_tokenizer.encode(TGT)
    y2 = list(y)
    y2[-1] = (y2[-1] + 7) % tiny_model.cfg.vocab_size  # change the last target token only
    j = len(y)  # position whose input is that token
    for causal in (True, False):
        a = teacher_forced_trace(tiny_model, tiny_tokenizer, SRC, y, causal=causal).arrays
        b = teacher_forced_trace(tiny_model, tiny_tokenizer, SRC, y2, causal=causal).arrays
        for key in ("dec.1.norm3.out", "probs", "dec.0.self.context"):
            same = np.array_equal(a[key][..., :j, :], b[key][..., :j, :])
            assert same is causal, (key, causal)
        assert not np.array_equal(a["probs"][j], b["probs"][j])


def test_no_mask_lets_attention_see_the_future(tiny_model, tiny_tokenizer):
    tr = teacher_forced_trace(tiny_model, tiny_tokenizer, SRC, TGT, causal=False)
    w = tr.arrays["dec.0.self.weights"]
    assert not tr.causal and (tr.arrays["dec.0.self.mask"] == 0).all()
    assert (w[:, np.triu_indices(w.shape[-1], 1)[0], np.triu_indices(w.shape[-1], 1)[1]] > 0).all()


def test_incremental_decoding_equals_the_parallel_pass(tiny_model, tiny_tokenizer):
    src = src_ids(tiny_tokenizer, tiny_model)
    res = decode(tiny_model, src, DecodeOptions(max_len=12, record=True))
    dec_in = [tiny_model.cfg.decoder_start_id, *res.ids[:-1]]
    y = [i for i in res.ids if i != tiny_model.cfg.eos_id]
    tr = teacher_forced_trace(tiny_model, tiny_tokenizer, src[:-1], y)
    T = len(dec_in)
    with torch.no_grad():
        memory, mask, _ = tiny_model.encode(torch.tensor([src]))
        full, _, _ = tiny_model.decode(torch.tensor([dec_in]), memory, mask)
    prev_K = None
    for t, step in enumerate(res.steps[:T]):
        logp_full = F.log_softmax(full[0, t], -1).numpy()
        np.testing.assert_allclose(step.top_logprobs[0], logp_full[step.top_ids[0]], atol=1e-5)
        for layer in range(tiny_model.cfg.n_decoder_layers):
            w = step.arrays[keys.dec(layer, "self", "weights")][0, :, 0]  # (H, t+1): the new row only
            np.testing.assert_allclose(w, tr.arrays[keys.dec(layer, "self", "weights")][:, t, : t + 1], atol=1e-5)
            assert step.arrays[keys.dec(layer, "self", "Q")].shape[2] == 1  # one new query per step
        K = step.arrays["dec.0.self.K"][0]  # (H, t+1, d_k): the cache so far
        assert K.shape[1] == t + 1
        if prev_K is not None:  # earlier rows are reused from the cache, not recomputed
            np.testing.assert_array_equal(K[:, :t], prev_K)
        prev_K = K


def test_cached_logits_match_parallel_logits_within_1e5(tiny_model, tiny_tokenizer):
    src = torch.tensor([src_ids(tiny_tokenizer, tiny_model)])
    dec_in = torch.tensor([[tiny_model.cfg.decoder_start_id, *tiny_tokenizer.encode(TGT)]])
    with torch.no_grad():
        memory, mask, _ = tiny_model.encode(src)
        full, _, _ = tiny_model.decode(dec_in, memory, mask)
        cache = None
        for t in range(dec_in.shape[1]):
            step, cache, _ = tiny_model.decode(dec_in[:, t : t + 1], memory, mask, cache)
            torch.testing.assert_close(step[0, 0], full[0, t], atol=1e-5, rtol=0)


def _biased_model(tiny_tokenizer, **overrides):
    model = make_model(tiny_tokenizer.vocab_size, seed=3, **overrides)
    with torch.no_grad():  # non-zero biases, so a bias the lean step forgot would show
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.add_(0.1 * torch.randn_like(p))
        if model.final_logits_bias is not None:
            model.final_logits_bias.normal_()
    return model


@pytest.mark.parametrize("overrides", [{}, {"final_logits_bias": True, "activation": "gelu", "tie_output": False}])
@pytest.mark.parametrize("rows_hint", [1, 4])  # numpy products only / oneDNN-prepacked products for several rows
def test_lean_step_equals_decode_with_every_record(tiny_tokenizer, overrides, rows_hint):
    """LeanDecoder.step (numpy) gives Transformer.decode()'s logits and every recorded stage, key for key and shape for
    shape, for two rows with source padding, and keeps earlier cache entries bit for bit; untraced (the cross-attention
    folded into each row's own source, or not: batches of sources are not), the same logits."""
    model = _biased_model(tiny_tokenizer, **overrides)
    lean = LeanDecoder(model, rows=rows_hint, pack_min=0)
    assert (lean.out.packed is not None) == (rows_hint > 1)  # the oneDNN path is the one under test
    texts = ["I am a student.", "The cat is sleeping on the sofa."]
    srcs = [src_ids(tiny_tokenizer, model, t) for t in texts]
    src = torch.full((2, max(map(len, srcs))), model.cfg.pad_id)
    for i, s in enumerate(srcs):
        src[i, : len(s)] = torch.tensor(s)
    tokens = torch.tensor([[model.cfg.decoder_start_id] * 2, *zip(tiny_tokenizer.encode(TGT), range(5, 50))])
    with torch.no_grad():
        memory, mask, _ = model.encode(src)
        assert mask is not None
        ref_cache, cache, prev_K = None, lean.start(memory, mask), None
        untraced = lean.start(memory, mask)
        assert untraced.folded is None  # two sources read more folded
        lean.fold_max = 10**6
        folded = lean.start(memory, mask)
        assert folded.folded is not None
        for t in range(tokens.shape[0]):
            ref, ref_cache, ref_rec = model.decode(tokens[t][:, None], memory, mask, ref_cache, record=True)
            ref_rec = to_numpy(ref_rec)
            logits, cache, rec = lean.step(tokens[t].numpy(), cache, record=True)
            np.testing.assert_allclose(logits, ref[:, 0].numpy(), atol=1e-5, rtol=0)
            for c in (untraced, folded):
                plain, _, _ = lean.step(tokens[t].numpy(), c)
                np.testing.assert_allclose(plain, ref[:, 0].numpy(), atol=1e-5, rtol=0)
            assert sorted(rec) == sorted(ref_rec)
            for key, want in ref_rec.items():
                assert rec[key].shape == want.shape, key
                np.testing.assert_allclose(rec[key], want, atol=1e-5, rtol=0, err_msg=key)  # -inf masks equal too
                assert not rec[key].flags.writeable
            K = rec["dec.1.self.K"]
            if prev_K is not None:
                np.testing.assert_array_equal(K[:, :, :t], prev_K)  # the cache is appended to, not recomputed
            prev_K = K
        assert cache.t == tokens.shape[0]
        cache.t = model.cfg.max_len
        with pytest.raises(ValueError, match="max_len"):
            lean.step(tokens[0].numpy(), cache)
        with pytest.raises(ValueError, match="rows"):
            lean.step([1, 2, 3], cache)


HEADS = (("enc", 0, 1), ("enc", 1, 3), ("cross", 0, 2))  # the encoder's two, and a decoder head it must not read


@pytest.mark.parametrize("overrides", [{}, {"activation": "gelu"}])
@pytest.mark.parametrize("pack_min", [None, 0])  # MKL or numpy products / oneDNN-prepacked products
def test_lean_encode_equals_transformer_encode(tiny_tokenizer, overrides, pack_min):
    """LeanDecoder.encode (numpy) gives Transformer.encode()'s memory and padding mask, with padding, with the
    heads of an ablation switched off (zero and mean), and one source alone."""
    model = _biased_model(tiny_tokenizer, **overrides)
    lean = LeanDecoder(model, rows=2, pack_min=pack_min)
    srcs = [src_ids(tiny_tokenizer, model, t) for t in ("I am a student.", SRC)]
    src = torch.full((2, max(map(len, srcs))), model.cfg.pad_id)
    for i, s in enumerate(srcs):
        src[i, : len(s)] = torch.tensor(s)
    d_k = model.cfg.d_k
    means = tuple(((kind, layer, h), tuple(float(v) for v in np.linspace(-1, 1, d_k))) for kind, layer, h in HEADS)
    for batch in (src, src[1:]):
        for ablation in (None, Ablation(frozenset(HEADS)), Ablation(frozenset(HEADS), "mean", means)):
            with torch.no_grad():
                want, want_mask, _ = model.encode(batch, heads=head_masks(ablation, model.cfg))
            memory, mask = lean.encode(batch.numpy(), ablation)
            np.testing.assert_allclose(memory, want.numpy(), atol=1e-5, rtol=0)
            assert (mask is None) == (want_mask is None) == (batch.shape[0] == 1)
            if mask is not None:
                np.testing.assert_array_equal(mask, want_mask.numpy())
    with pytest.raises(ValueError, match="max_len"):
        lean.encode(np.ones((1, model.cfg.max_len + 1), np.int64))


def _lean_on_one_source(tiny_tokenizer, rows: int):
    model = _biased_model(tiny_tokenizer)
    lean = LeanDecoder(model, rows=rows, pack_min=0)
    with torch.no_grad():
        memory, mask, _ = model.encode(torch.tensor([src_ids(tiny_tokenizer, model, "I am a student.")]))
    return model, lean, memory, mask


def test_lean_untraced_step_equals_recorded_and_select_reorders(tiny_tokenizer):
    """Without a record the step's logits are the same, to float rounding (its cross-attention runs folded into the
    source's K, V); select() reorders and repeats rows as index_select would."""
    _, lean, memory, mask = _lean_on_one_source(tiny_tokenizer, rows=3)
    a, b = lean.start(memory, mask).select([0, 0, 0]), lean.start(memory, mask).select([0, 0, 0])
    recs = []
    for tok in ([1, 1, 1], [5, 9, 12], [7, 7, 30]):
        la, a, rec = lean.step(tok, a, record=True)
        lb, b, _ = lean.step(tok, b)
        np.testing.assert_allclose(la, lb, atol=1e-5, rtol=0)
        recs.append(rec)
    # the unchanging cross K, V are recorded as views of one array; the self K, V as copies (their buffers move)
    assert np.shares_memory(recs[0]["dec.0.cross.K"], recs[-1]["dec.0.cross.K"])
    assert not np.shares_memory(recs[-1]["dec.0.self.K"], a.KV)
    before = a.KV[:, :, :, :, : a.t].copy()
    a = a.select([2, 0])  # fewer rows, reordered
    np.testing.assert_array_equal(a.KV[:, :, :, :, : a.t], before[:, [2, 0]])
    assert a.cross.shape[1] == 1  # one source: its cross K, V are shared, not copied per row


def test_lean_decoder_is_a_snapshot_of_the_weights(tiny_tokenizer):
    """Training the model on after a LeanDecoder was built (e.g. between evaluations) must not half-change it."""
    model, lean, memory, mask = _lean_on_one_source(tiny_tokenizer, rows=2)
    with torch.no_grad():
        before, _, _ = lean.step([1, 1], lean.start(memory, mask).select([0, 0]))
        for p in model.parameters():
            p.mul_(1.5)
        after, _, _ = lean.step([1, 1], lean.start(memory, mask).select([0, 0]))
    np.testing.assert_array_equal(after, before)


def test_decodings_are_the_same_with_a_shared_lean_decoder(tiny_model, tiny_tokenizer):
    """A LeanDecoder built once and reused (as the CLI and the app do) gives what decode() builds on its own."""
    lean = LeanDecoder(tiny_model, rows=4, pack_min=0)
    srcs = [src_ids(tiny_tokenizer, tiny_model, t) for t in ("I am a student.", "Hello world.", SRC)]
    assert greedy_batch(tiny_model, srcs, 12, lean) == greedy_batch(tiny_model, srcs, 12)
    for opts in (DecodeOptions(strategy="beam", beam=4, max_len=15), DecodeOptions(max_len=15, record=True)):
        for s in srcs:
            own, shared = decode(tiny_model, s, opts), decode(tiny_model, s, opts, lean)
            assert [h.ids for h in shared.n_best] == [h.ids for h in own.n_best]
            np.testing.assert_allclose([h.score for h in shared.n_best], [h.score for h in own.n_best], atol=1e-6)


@pytest.mark.parametrize("V", [7, 100, 8256])
def test_best_continuations_are_the_best_of_every_row_and_token(V):
    """The beam's candidates: the n best of all R·V running + log p, best first, ties to the lower row then token,
    as a sort of every continuation gives; with forbidden (-inf) tokens, dead rows (NEG) and tied scores."""
    rng = np.random.default_rng(V)
    for R, n in ((5, 10), (1, 4), (3, 6)):
        logp = rng.normal(-8, 3, (R, V)).astype(np.float32)
        logp[:, [0, 1]] = -np.inf
        logp[:, 2 : V // 2 : 3] = logp[:, 3 : V // 2 + 1 : 3]  # ties
        running = rng.normal(-2, 1, R).astype(np.float32)
        running[1::2] = NEG  # dead rows, whose continuations come last
        scores, rows, tokens = best_continuations(logp, running, n)
        every = (logp + running[:, None]).reshape(-1)
        want = np.lexsort((np.arange(R * V), -every))[:n]  # by score, then row-major order
        np.testing.assert_array_equal(scores, every[want])
        np.testing.assert_array_equal(rows * V + tokens, want)


def test_beam_width_one_is_greedy_and_beam_is_consistent(tiny_model, tiny_tokenizer):
    src = src_ids(tiny_tokenizer, tiny_model)
    g = decode(tiny_model, src, DecodeOptions(max_len=15))
    b1 = decode(tiny_model, src, DecodeOptions(strategy="beam", beam=1, max_len=15))
    assert g.ids == b1.ids
    b4 = decode(tiny_model, src, DecodeOptions(strategy="beam", beam=4, max_len=15, record=True))
    assert len(b4.n_best) == 4
    scores = [h.score for h in b4.n_best]
    assert scores == sorted(scores, reverse=True)
    assert b4.n_best[0].score >= g.n_best[0].score - 1e-5  # beam finds at least greedy's score
    for h in b4.n_best:  # scores are the length-normalised sum of token log-probs
        assert math.isclose(h.score, h.logprob / len(h.ids), rel_tol=1e-5)
    for bs in b4.beam_steps:
        assert {e.status for e in bs.expansions} <= {"kept", "pruned", "finished"}
        assert sum(e.status == "kept" for e in bs.expansions) <= 4
    assert b4.steps[3].arrays["dec.0.self.weights"].shape[0] == 4  # one row per beam
    fast = decode(tiny_model, src, DecodeOptions(strategy="beam", beam=4, max_len=15))  # the untraced path
    assert fast.steps == [] and fast.beam_steps is None
    assert [(h.ids, h.finished) for h in fast.n_best] == [(h.ids, h.finished) for h in b4.n_best]
    np.testing.assert_allclose([h.score for h in fast.n_best], scores, rtol=1e-6)


def test_sampling_is_seeded_and_prefix_is_kept(tiny_model, tiny_tokenizer):
    src = src_ids(tiny_tokenizer, tiny_model)
    opts = DecodeOptions(strategy="sample", temperature=1.5, top_k=30, top_p=0.95, seed=7, max_len=15)
    a, b = decode(tiny_model, src, opts), decode(tiny_model, src, opts)
    assert a.ids == b.ids
    others = {
        decode(tiny_model, src, DecodeOptions(strategy="sample", temperature=1.5, seed=s, max_len=15)).ids
        for s in range(5)
    }
    assert len(others) > 1
    prefix = tuple(tiny_tokenizer.encode("Le chat"))
    for o in (
        DecodeOptions(max_len=10, prefix=prefix, record=True),
        DecodeOptions(strategy="beam", beam=3, max_len=10, prefix=prefix, record=True),
        DecodeOptions(strategy="sample", seed=1, max_len=10, prefix=prefix, record=True),
    ):
        res = decode(tiny_model, src, o)
        assert res.ids[: len(prefix)] == prefix
        assert [s.forced for s in res.steps[: len(prefix) + 1]] == [True] * len(prefix) + [False]
        assert decode(tiny_model, src, replace(o, record=False)).ids == res.ids  # recording changes nothing


def test_filter_logits_top_k_and_top_p():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    assert torch.isinf(filter_logits(logits, 1.0, 2, 1.0)[0, 2:]).all()
    kept = ~torch.isinf(filter_logits(logits, 1.0, 0, 0.7)[0])
    assert kept.tolist() == [True, True, False, False]
    assert (~torch.isinf(filter_logits(logits, 1.0, 0, 0.0)[0])).sum() == 1


def test_batched_greedy_equals_single(tiny_model, tiny_tokenizer):
    texts = ["I am a student.", "Hello world.", "The cat is sleeping on the sofa."]
    srcs = [src_ids(tiny_tokenizer, tiny_model, t) for t in texts]
    batch = greedy_batch(tiny_model, srcs, max_len=12)
    for s, out in zip(srcs, batch):
        assert tuple(out) == decode(tiny_model, s, DecodeOptions(max_len=12)).ids
    assert translate_batch(tiny_model, tiny_tokenizer, texts, max_len=12) == [tiny_tokenizer.decode(o) for o in batch]


def test_translate_batch_passes_the_length_penalty_to_beam_search(tiny_tokenizer):
    tiny_model = make_model(tiny_tokenizer.vocab_size, final_logits_bias=True)
    with torch.no_grad():  # </s> likely enough that hypotheses end at different lengths, where the penalty matters
        tiny_model.final_logits_bias[tiny_model.cfg.eos_id] = 4.0
    texts = ["I am a student.", "Hello world.", "The cat is sleeping on the sofa.", "I like pizza."]
    by_lp = {}
    for lp in (0.0, 3.0):
        opts = DecodeOptions(strategy="beam", beam=3, max_len=12, length_penalty=lp)
        by_lp[lp] = [
            tiny_tokenizer.decode(decode(tiny_model, src_ids(tiny_tokenizer, tiny_model, t), opts).ids) for t in texts
        ]
        assert translate_batch(tiny_model, tiny_tokenizer, texts, beam=3, max_len=12, length_penalty=lp) == by_lp[lp]
    assert by_lp[0.0] != by_lp[3.0]  # the two penalties choose differently here, so the comparison can fail


@pytest.mark.parametrize("d_model", [6, 7, 32])
def test_positional_tables(d_model):
    inter, half = sinusoidal_table(20, d_model, "interleaved"), sinusoidal_table(20, d_model, "half")
    pos, i = 5, 1
    assert math.isclose(inter[pos, 2 * i], math.sin(pos / 10000 ** (2 * i / d_model)), rel_tol=1e-5)
    assert math.isclose(inter[pos, 2 * i + 1], math.cos(pos / 10000 ** (2 * i / d_model)), rel_tol=1e-5)
    n_sin = d_model - d_model // 2
    torch.testing.assert_close(half[:, :n_sin], inter[:, 0::2])
    torch.testing.assert_close(half[:, n_sin:], inter[:, 1::2])


def test_config_round_trip_and_validation(tmp_path):
    cfg = ModelConfig(vocab_size=50, d_model=16, n_heads=2, activation="swish", pe_layout="half")
    cfg.save(tmp_path / "config.json")
    assert ModelConfig.load(tmp_path / "config.json") == cfg
    with pytest.raises(ValueError, match="divisible"):
        ModelConfig(d_model=10, n_heads=3)
    with pytest.raises(ValueError, match="unknown config keys"):
        ModelConfig.from_dict({**json.loads(cfg.to_json()), "colour": 1})


def test_untied_output_and_bias_variants(tiny_tokenizer):
    m = make_model(
        tiny_tokenizer.vocab_size,
        tie_output=False,
        final_logits_bias=True,
        activation="gelu",
        scale_embedding=False,
        pe_layout="half",
    )
    with torch.no_grad():
        m.final_logits_bias.copy_(torch.randn_like(m.final_logits_bias))
    tr = teacher_forced_trace(m, tiny_tokenizer, SRC, TGT)
    res = decode(m, src_ids(tiny_tokenizer, m), DecodeOptions(max_len=5))
    assert tr.arrays["probs"].shape[-1] == tiny_tokenizer.vocab_size and len(res.ids) <= 5
    np.testing.assert_allclose(tr.arrays["dec.embed"], m.embed.weight[tr.arrays["dec_input_ids"]].detach().numpy())


def test_decode_options_are_validated():
    for bad in (
        dict(beam=0),
        dict(max_len=0),
        dict(temperature=-1),
        dict(top_p=1.5),
        dict(top_k=-1),
        dict(strategy="magic"),
    ):
        with pytest.raises(ValueError):
            DecodeOptions(**bad)


@pytest.mark.parametrize(
    "opts",
    [
        DecodeOptions(max_len=12, record=True),
        DecodeOptions(strategy="beam", beam=3, max_len=12, record=True, prefix=(7,)),
        DecodeOptions(strategy="beam", beam=4, max_len=12),
        DecodeOptions(strategy="sample", temperature=1.3, top_k=40, seed=5, max_len=12, record=True),
    ],
    ids=["greedy", "beam-forced", "beam-untraced", "sample"],
)
@pytest.mark.parametrize("products", ["onednn", "mkl"])
def test_the_loop_on_the_readable_modules_equals_the_fast_step(tiny_tokenizer, opts, products, monkeypatch):
    """The one decoding loop gives the same decode on either step function: LeanDecoder (numpy, and oneDNN or MKL
    for several rows) or ModuleDecoder (Transformer.decode on its KV cache): tokens, n-best, beam steps and every
    recorded array."""
    model = _biased_model(tiny_tokenizer)
    src = src_ids(tiny_tokenizer, model)
    if products == "mkl":
        monkeypatch.setattr(lean_module, "intel_mkl", lambda: True)
        fast_steps = LeanDecoder(model, rows=opts.beam, mkl_min=0)
        assert fast_steps.out.W_mkl is not None and fast_steps.out.packed is None
    else:
        fast_steps = LeanDecoder(model, rows=opts.beam, pack_min=0)
    fast_steps.fold_max = 10**6  # the untraced cross-attention folded into the source, as for the shipped model
    fast = decode(model, src, opts, fast_steps)
    ref = decode(model, src, opts, ModuleDecoder(model))
    assert fast.ids == ref.ids and len(fast.steps) == len(ref.steps) == (len(fast.ids) if opts.record else 0)
    assert [(h.ids, h.finished) for h in fast.n_best] == [(h.ids, h.finished) for h in ref.n_best]
    np.testing.assert_allclose([h.score for h in fast.n_best], [h.score for h in ref.n_best], atol=1e-5)
    assert (fast.beam_steps is None) == (ref.beam_steps is None)
    for a, b in zip(fast.beam_steps or [], ref.beam_steps or []):
        assert [(e.parent, e.token, e.status) for e in a.expansions] == [
            (e.parent, e.token, e.status) for e in b.expansions
        ]
    for a, b in zip(fast.steps, ref.steps):
        assert a.chosen.tolist() == b.chosen.tolist() and a.input_ids.tolist() == b.input_ids.tolist()
        assert a.top_ids.tolist() == b.top_ids.tolist() and a.chosen_rank.tolist() == b.chosen_rank.tolist()
        np.testing.assert_allclose(a.top_logprobs, b.top_logprobs, atol=1e-5)
        assert sorted(a.arrays) == sorted(b.arrays)
        for key, want in b.arrays.items():
            np.testing.assert_allclose(a.arrays[key], want, atol=1e-5, rtol=0, err_msg=key)


def test_module_decoder_steps_as_transformer_decode(tiny_model, tiny_tokenizer):
    """The readable step is Transformer.decode on its cache: the same logits as the parallel pass, and its cache
    reorders rows as LeanCache.select does."""
    src = torch.tensor([src_ids(tiny_tokenizer, tiny_model)])
    dec_in = [tiny_model.cfg.decoder_start_id, *tiny_tokenizer.encode(TGT)]
    steps = ModuleDecoder(tiny_model)
    with torch.no_grad():
        memory, mask, _ = tiny_model.encode(src)
        full, _, _ = tiny_model.decode(torch.tensor([dec_in]), memory, mask)
        cache = steps.start(memory, mask).select([0, 0])
        for t, tok in enumerate(dec_in):
            logits, cache, _ = steps.step([tok, dec_in[0]], cache)
            np.testing.assert_allclose(logits[0], full[0, t].numpy(), atol=1e-5, rtol=0)
        assert cache.t == len(dec_in) and cache.layers[0].self_K.shape[2] == len(dec_in)
        swapped = cache.select([1, 0])
        torch.testing.assert_close(swapped.layers[1].self_V[0], cache.layers[1].self_V[1])
        with pytest.raises(ValueError, match="rows"):
            steps.step([1, 2, 3], cache)


def test_prepare_ids_and_length_batches():
    assert prepare_ids([5, 6, 7], 2, 8) == [5, 6, 7, 2]
    assert prepare_ids([5, 6, 7, 8, 9], 2, 4) == [5, 6, 7, 2]  # max_len − 1 tokens, then </s>
    assert prepare_ids([], 2, 4) == [2]
    items = ["ccc", "a", "bbbb", "dd", "e"]
    batches = list(length_batches(items, 2))
    assert batches == [[1, 4], [3, 0], [2]]  # shortest first, ties in input order
    assert sorted(i for b in batches for i in b) == list(range(len(items)))
