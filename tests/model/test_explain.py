"""The logit lens, head ablation (readable modules and the fast step path), the importance map and `explain`."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import numpy as np
import pytest
import torch

from model import ModelConfig, Transformer
from model.cli import main
from model.core.ablation import Ablation, format_heads, parse_heads
from model.core.transformer import head_masks
from model.decode.decoding import DecodeOptions, decode, to_numpy
from model.decode.lean import LeanDecoder
from model.decode.steps import ATTENTION_MAPS, beam_path, live_rows, output_record, stack_view
from model.decode.trace import teacher_forced_trace
from model.interpret.explain import (
    head_importance,
    head_means,
    lens_problem,
    logit_lens,
    mean_ablation,
    position_loss_delta,
)
from model.testing import make_model

SRC = "The cat is sleeping on the sofa."
TGT = "Le chat dort sur le canapé."
HEADS = frozenset({("self", 0, 1), ("cross", 1, 2), ("cross", 0, 3), ("self", 1, 0)})


def ids(tok, model, text=SRC):
    return tok.encode(text) + [model.cfg.eos_id]


@pytest.fixture(scope="module")
def biased(tiny_tokenizer):
    """Non-zero biases everywhere, so a bias the fast path forgot (or added twice) under ablation would show."""
    model = make_model(tiny_tokenizer.vocab_size, seed=5)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.add_(0.1 * torch.randn_like(p))
    return model


def ablation_for(mode, model, tok, heads=HEADS):
    if mode == "zero":
        return Ablation(heads)
    return mean_ablation(model, heads, ids(tok, model), tok.encode(TGT))


# ---------------------------------------------------------------------------------------------- the spec


def test_heads_parse_format_and_validate(tiny_model):
    heads = parse_heads(" dec.1.cross.2, dec.0.self.3,enc.1.self.0,dec.1.cross.2,")
    assert heads == {("cross", 1, 2), ("self", 0, 3), ("enc", 1, 0)}
    assert format_heads(heads) == "dec.0.self.3,dec.1.cross.2,enc.1.self.0"
    assert parse_heads(format_heads(heads)) == heads and parse_heads("") == frozenset()
    for bad in ("dec.1.cros.2", "enc.0.cross.1", "dec.-1.self.0", "1.2.3"):
        with pytest.raises(ValueError, match="cannot read head"):
            parse_heads(bad)
    a = Ablation(heads)
    assert hash(a) == hash(Ablation(set(heads))) and a == Ablation(set(heads)) and not Ablation()
    assert hash(DecodeOptions(ablation=a)) == hash(DecodeOptions(ablation=Ablation(heads)))  # a cache key
    with pytest.raises(ValueError, match="not in this model"):
        Ablation(frozenset({("cross", 2, 0)})).check(tiny_model.cfg)  # the tiny model has 2 decoder layers
    with pytest.raises(ValueError, match="not in this model"):
        decode(tiny_model, [5, 2], DecodeOptions(ablation=Ablation(frozenset({("self", 0, 4)}))))  # 4 heads: 0..3
    with pytest.raises(ValueError, match="without a mean"):
        Ablation(heads, "mean")
    with pytest.raises(ValueError, match="mode"):
        Ablation(heads, "half")


# ---------------------------------------------------------------------------------------------- the lens


@pytest.mark.parametrize("head", ["tied", "untied with a bias"])
def test_last_layer_lens_is_the_output_distribution(tiny_model, tiny_tokenizer, head):
    if head != "tied":
        tiny_model = make_model(tiny_tokenizer.vocab_size, seed=2, tie_output=False, final_logits_bias=True)
        with torch.no_grad():
            tiny_model.final_logits_bias.normal_()
    tr = teacher_forced_trace(tiny_model, tiny_tokenizer, SRC, TGT)
    a, labels = tr.arrays, tr.arrays["label_ids"]
    lens = logit_lens(tiny_model, a, labels, k=7)
    laid_out = logit_lens(tiny_model, a, labels, k=7, lean=LeanDecoder(tiny_model))  # the app's product
    np.testing.assert_array_equal(laid_out.top_ids, lens.top_ids)
    np.testing.assert_array_equal(laid_out.chosen_rank, lens.chosen_rank)
    for name in ("top_probs", "chosen_prob", "entropy"):
        np.testing.assert_allclose(getattr(laid_out, name), getattr(lens, name), rtol=1e-5, atol=1e-7)
    L, T = tiny_model.cfg.n_decoder_layers, len(labels)
    assert lens.top_ids.shape == lens.top_probs.shape == (L, T, 7) and lens.entropy.shape == (L, T)
    probs = a["probs"]  # (T, V), the teacher-forced pass's own softmax
    np.testing.assert_allclose(lens.top_probs[-1], np.take_along_axis(probs, lens.top_ids[-1], -1), rtol=1e-6)
    np.testing.assert_allclose(lens.top_probs[-1], -np.sort(-probs, -1)[:, :7], rtol=1e-6)
    np.testing.assert_allclose(lens.chosen_prob[-1], probs[np.arange(T), labels], rtol=1e-6)
    np.testing.assert_array_equal(lens.chosen_rank[-1], (probs > probs[np.arange(T), labels][:, None]).sum(-1) + 1)
    np.testing.assert_allclose(lens.entropy[-1], -(probs * np.log(probs)).sum(-1), rtol=1e-5)


@pytest.mark.parametrize("beam", [1, 3])
def test_last_layer_lens_of_a_decode_gives_its_recorded_top_tokens(tiny_model, tiny_tokenizer, beam):
    """On the step view's arrays (stack_view of a recorded decode): the last layer's top tokens are the decode's,
    minus the tokens decoding forbids, with the same probabilities; a row that died has no chosen token."""
    opts = DecodeOptions(strategy="beam" if beam > 1 else "greedy", beam=beam, max_len=10, record=True)
    res = decode(tiny_model, ids(tiny_tokenizer, tiny_model), opts)
    cfg, last = tiny_model.cfg, len(res.steps) - 1
    forbidden = {cfg.pad_id, cfg.decoder_start_id}
    for row in live_rows(res, last):
        rows = [0] * (last + 1) if beam == 1 else beam_path(res.beam_steps, last, row)
        arrays = stack_view(res.steps, rows, last)
        chosen = [int(res.steps[t].chosen[r]) for t, r in enumerate(rows)]
        lens = logit_lens(tiny_model, arrays, chosen, k=12)
        for t, r in enumerate(rows):
            s = res.steps[t]
            mine = [i for i in lens.top_ids[-1, t] if i not in forbidden]
            n = len(mine)
            assert mine == s.top_ids[r][:n].tolist()
            keep = ~np.isin(lens.top_ids[-1, t], list(forbidden))
            np.testing.assert_allclose(lens.top_probs[-1, t][keep], np.exp(s.top_logprobs[r][:n]), rtol=1e-4)
            if chosen[t] < 0:
                assert np.isnan(lens.chosen_prob[:, t]).all() and (lens.chosen_rank[:, t] == 0).all()
            elif beam == 1:  # greedy takes the best token decoding allows
                assert lens.chosen_rank[-1, t] == 1 + sum(i in forbidden for i in lens.top_ids[-1, t][:2])


@pytest.mark.parametrize("beam", [1, 3])
def test_lens_from_the_decode_record_equals_the_lens_through_the_head(tiny_tokenizer, beam):
    """The last layer read from the decode's record (the step view's way) is the lens the output head gives, on a
    model whose own favourite token is one decoding forbids (<pad>, pushed up by the output bias)."""
    model = make_model(tiny_tokenizer.vocab_size, seed=4, tie_output=False, final_logits_bias=True)
    with torch.no_grad():
        model.final_logits_bias[model.cfg.pad_id] = 4.0
    opts = DecodeOptions(strategy="beam" if beam > 1 else "greedy", beam=beam, max_len=9, record=True)
    res = decode(model, ids(tiny_tokenizer, model), opts)
    last = len(res.steps) - 1
    lean = LeanDecoder(model, rows=beam, pack_min=0)  # several rows: the head's product through oneDNN, prepacked
    assert (lean.out.packed is not None) == (beam > 1)
    pad_on_top = 0
    for row in live_rows(res, last):
        rows = [0] * (last + 1) if beam == 1 else beam_path(res.beam_steps, last, row)
        arrays = stack_view(res.steps, rows, last)
        chosen = [int(res.steps[t].chosen[r]) for t, r in enumerate(rows)]
        record = output_record(res.steps, rows, last)
        full = logit_lens(model, arrays, chosen, k=8)
        fast = logit_lens(model, arrays, chosen, k=8, lean=lean, record=record)
        np.testing.assert_array_equal(fast.top_ids, full.top_ids)
        np.testing.assert_array_equal(fast.chosen_rank, full.chosen_rank)
        for name in ("top_probs", "chosen_prob", "entropy"):
            np.testing.assert_allclose(getattr(fast, name), getattr(full, name), rtol=1e-5, atol=1e-7)
        pad_on_top += int((fast.top_ids[-1, :, 0] == model.cfg.pad_id).sum())
    assert pad_on_top > 0  # the merge of the forbidden tokens was exercised


def test_lens_differs_per_layer_and_handles_a_dead_row(tiny_model, tiny_tokenizer):
    tr = teacher_forced_trace(tiny_model, tiny_tokenizer, SRC, TGT)
    chosen = tr.arrays["label_ids"].copy()
    chosen[2] = -1
    lens = logit_lens(tiny_model, tr.arrays, chosen)
    assert not np.allclose(lens.entropy[0], lens.entropy[1])
    assert (lens.top_ids[0] != lens.top_ids[1]).any()
    assert np.isnan(lens.chosen_prob[:, 2]).all() and (lens.chosen_rank[:, 2] == 0).all()
    assert np.isfinite(np.delete(lens.chosen_prob, 2, axis=1)).all() and (np.delete(lens.chosen_rank, 2, 1) >= 1).all()
    with pytest.raises(ValueError, match="positions"):
        logit_lens(tiny_model, tr.arrays, chosen[:-1])


def test_lens_refuses_a_configuration_it_would_misread(tiny_tokenizer, tiny_model):
    assert lens_problem(ModelConfig()) is None

    @dataclass(frozen=True)
    class PreNorm(ModelConfig):
        normalize_before: bool = True

    cfg = PreNorm(**asdict(tiny_model.cfg))  # the tiny model's sizes, read as a pre-norm model
    assert "pre-norm" in lens_problem(cfg)
    assert "no decoder layer" in lens_problem(ModelConfig(n_decoder_layers=0))
    model = Transformer(cfg).eval()
    tr = teacher_forced_trace(model, tiny_tokenizer, SRC, TGT)
    with pytest.raises(ValueError, match="cannot read this model: .*pre-norm"):
        logit_lens(model, tr.arrays, tr.arrays["label_ids"])


# ---------------------------------------------------------------------------------------------- ablation


def test_ablating_nothing_is_the_baseline_bit_for_bit(biased, tiny_tokenizer):
    src = ids(tiny_tokenizer, biased)
    for opts in (
        DecodeOptions(max_len=10, record=True),
        DecodeOptions(strategy="beam", beam=3, max_len=10, record=True),
    ):
        base = decode(biased, src, opts)
        none = decode(biased, src, DecodeOptions(**{**opts.__dict__, "ablation": Ablation()}))
        assert [(h.ids, h.logprob) for h in none.n_best] == [(h.ids, h.logprob) for h in base.n_best]
        for a, b in zip(base.steps, none.steps):
            np.testing.assert_array_equal(a.top_logprobs, b.top_logprobs)
            for key in a.arrays:
                np.testing.assert_array_equal(a.arrays[key], b.arrays[key], err_msg=key)
    t0 = teacher_forced_trace(biased, tiny_tokenizer, SRC, TGT)
    t1 = teacher_forced_trace(biased, tiny_tokenizer, SRC, TGT, ablation=Ablation())
    for key in t0.arrays:
        np.testing.assert_array_equal(t0.arrays[key], t1.arrays[key], err_msg=key)
    assert (position_loss_delta(biased, src, tiny_tokenizer.encode(TGT), Ablation()) == 0).all()
    # and removing a head does change things, so the comparisons above can fail
    t2 = teacher_forced_trace(biased, tiny_tokenizer, SRC, TGT, ablation=Ablation(frozenset({("cross", 1, 0)})))
    assert not np.array_equal(t0.arrays["loss"], t2.arrays["loss"])


@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_ablated_head_hands_zeros_or_its_mean_to_W_O(biased, tiny_tokenizer, mode):
    heads = frozenset({("cross", 1, 2), ("enc", 0, 1)})
    abl = ablation_for(mode, biased, tiny_tokenizer, heads)
    base = teacher_forced_trace(biased, tiny_tokenizer, SRC, TGT).arrays
    a = teacher_forced_trace(biased, tiny_tokenizer, SRC, TGT, ablation=abl).arrays
    for key, h in (("dec.1.cross.context", 2), ("enc.0.self.context", 1)):
        want = 0.0 if mode == "zero" else base[key][h].mean(0)  # the mean over the unablated pass's positions
        np.testing.assert_allclose(a[key][h], np.broadcast_to(want, a[key][h].shape), atol=1e-6)
        others = [i for i in range(biased.cfg.n_heads) if i != h]
        if key.startswith("enc"):  # nothing upstream changed: the block's other heads are untouched
            np.testing.assert_array_equal(a[key][others], base[key][others])
    d_k = biased.cfg.d_k
    np.testing.assert_allclose(a["dec.1.cross.concat"][:, 2 * d_k : 3 * d_k], a["dec.1.cross.context"][2], atol=1e-7)
    if mode == "mean":
        means = head_means(biased, ids(tiny_tokenizer, biased), tiny_tokenizer.encode(TGT))
        np.testing.assert_allclose(means[("self", 1, 3)], base["dec.1.self.context"][3].mean(0), atol=1e-6)


@pytest.mark.parametrize("mode", ["zero", "mean"])
@pytest.mark.parametrize("rows_hint", [1, 4])  # numpy products / oneDNN-prepacked products
def test_lean_step_equals_decode_under_ablation(biased, tiny_tokenizer, mode, rows_hint):
    """The fast step path with heads switched off: the logits and every recorded stage of Transformer.decode with the
    same heads switched off, step after step, for 3 rows."""
    abl = ablation_for(mode, biased, tiny_tokenizer)
    lean = LeanDecoder(biased, rows=rows_hint, pack_min=0)
    heads = head_masks(abl, biased.cfg)
    tokens = torch.tensor(
        [[biased.cfg.decoder_start_id] * 3, *zip(tiny_tokenizer.encode(TGT), range(5, 50), range(60, 90))]
    )
    with torch.no_grad():
        memory, mask, _ = biased.encode(torch.tensor([ids(tiny_tokenizer, biased)]))
        ref_cache, cache = None, lean.start(memory, mask, abl).select([0, 0, 0])
        plain = lean.start(memory, mask).select([0, 0, 0])
        for t in range(tokens.shape[0]):
            mem = memory.expand(3, -1, -1)
            ref, ref_cache, ref_rec = biased.decode(tokens[t][:, None], mem, mask, ref_cache, record=True, heads=heads)
            ref_rec = to_numpy(ref_rec)
            logits, cache, rec = lean.step(tokens[t].numpy(), cache, record=True)
            unablated, plain, _ = lean.step(tokens[t].numpy(), plain)
            np.testing.assert_allclose(logits, ref[:, 0].numpy(), atol=1e-5, rtol=0)
            assert not np.allclose(logits, unablated, atol=1e-3)  # the ablation is in effect
            assert sorted(rec) == sorted(ref_rec)
            for key, want in ref_rec.items():
                np.testing.assert_allclose(rec[key], want, atol=1e-5, rtol=0, err_msg=key)


def _compare_prefix(model, src, prefix, arrays, abl, T):
    """A decode's recorded arrays for one hypothesis (stack_view) against the reference modules' teacher-forced pass
    of the same prefix with the same heads switched off."""
    heads = head_masks(abl, model.cfg)
    with torch.no_grad():
        memory, mask, enc = model.encode(torch.tensor([src]), heads=heads)
        _, _, ref = model.decode(torch.tensor([prefix[:T]]), memory, mask, record=True, heads=heads)
    ref = {k: v[0] for k, v in to_numpy(ref).items()}
    for key, got in arrays.items():
        if key == "dec.pe":
            continue
        want = ref[key]
        if key.split(".")[-1] in ATTENTION_MAPS and ".self." in key:  # the step view has -inf on the future
            lower = np.tril(np.ones((T, T), dtype=bool))
            got, want = got[:, lower], want[:, lower]
        np.testing.assert_allclose(got, want, atol=2e-5, rtol=0, err_msg=key)


@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_decodes_under_ablation_equal_the_reference_modules(biased, tiny_tokenizer, mode):
    """Greedy and beam decodes (fast path) with heads switched off (an encoder head among them) record what the
    readable modules compute for the same prefixes, and score their hypotheses as the ablated trace does."""
    heads = HEADS | {("enc", 1, 2)}
    abl = ablation_for(mode, biased, tiny_tokenizer, heads)
    src, cfg = ids(tiny_tokenizer, biased), biased.cfg
    g = decode(biased, src, DecodeOptions(max_len=10, record=True, ablation=abl))
    plain = decode(biased, src, DecodeOptions(max_len=10))
    assert (g.ids, g.n_best[0].logprob) != (plain.ids, plain.n_best[0].logprob) or mode == "mean"  # heads did count
    T = len(g.steps)
    _compare_prefix(biased, src, [cfg.decoder_start_id, *g.ids], stack_view(g.steps, [0] * T, T - 1), abl, T)
    b = decode(biased, src, DecodeOptions(strategy="beam", beam=3, max_len=10, record=True, ablation=abl))
    for t in (1, len(b.steps) - 1):
        for row in live_rows(b, t):
            hyp = b.beam_steps[t].live[row]
            prefix = [cfg.decoder_start_id, *hyp.ids]
            _compare_prefix(biased, src, prefix, stack_view(b.steps, beam_path(b.beam_steps, t, row), t), abl, t + 1)
    for h in [*g.n_best, *b.n_best]:  # scored as the ablated trace scores them
        y = [i for i in h.ids if i != cfg.eos_id]
        tr = teacher_forced_trace(biased, tiny_tokenizer, src[:-1], y, ablation=abl)
        np.testing.assert_allclose(h.logprob, -tr.arrays["loss"][: len(h.ids)].sum(), atol=1e-4)


def test_without_cross_attention_the_source_no_longer_matters(tiny_model, tiny_tokenizer):
    cfg = tiny_model.cfg
    every = Ablation(frozenset(("cross", i, h) for i in range(cfg.n_decoder_layers) for h in range(cfg.n_heads)))
    a, b = ids(tiny_tokenizer, tiny_model, "I like pizza."), ids(tiny_tokenizer, tiny_model, "Hello world.")
    for opts in (
        DecodeOptions(max_len=12, record=True),
        DecodeOptions(strategy="beam", beam=3, max_len=12, record=True),
    ):
        with_source = decode(tiny_model, a, opts), decode(tiny_model, b, opts)  # they differ with the source
        assert [h.logprob for h in with_source[0].n_best] != [h.logprob for h in with_source[1].n_best]
        off = DecodeOptions(**{**opts.__dict__, "ablation": every})
        ra, rb = decode(tiny_model, a, off), decode(tiny_model, b, off)
        assert [(h.ids, h.logprob) for h in ra.n_best] == [(h.ids, h.logprob) for h in rb.n_best]
        for sa, sb in zip(ra.steps, rb.steps):
            np.testing.assert_array_equal(sa.top_logprobs, sb.top_logprobs)


# ---------------------------------------------------------------------------------------------- importance


@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_importance_entries_equal_single_ablation_runs(biased, tiny_tokenizer, mode):
    src, tgt = ids(tiny_tokenizer, biased), tiny_tokenizer.encode(TGT)
    imp = head_importance(biased, src, tgt, mode)
    L, H = biased.cfg.n_decoder_layers, biased.cfg.n_heads
    assert imp.self_loss_delta.shape == imp.cross_loss_delta.shape == (L, H) and imp.mode == mode
    base = teacher_forced_trace(biased, tiny_tokenizer, SRC, TGT).arrays["loss"]
    np.testing.assert_allclose(imp.base_loss, base.mean(), atol=1e-5)
    np.testing.assert_allclose(imp.base_position_loss, base, atol=1e-5)
    for kind, table, per_pos in (
        ("self", imp.self_loss_delta, imp.self_position_delta),
        ("cross", imp.cross_loss_delta, imp.cross_position_delta),
    ):
        for layer in range(L):
            for h in range(H):
                abl = ablation_for(mode, biased, tiny_tokenizer, frozenset({(kind, layer, h)}))
                loss = teacher_forced_trace(biased, tiny_tokenizer, SRC, TGT, ablation=abl).arrays["loss"]
                np.testing.assert_allclose(table[layer, h], loss.mean() - base.mean(), atol=1e-5)
                np.testing.assert_allclose(per_pos[layer, h], loss - base, atol=1e-5)
    assert np.abs(imp.cross_loss_delta).max() > 1e-3  # not all zeros


def test_position_loss_delta_matches_two_traces(biased, tiny_tokenizer):
    abl = ablation_for("mean", biased, tiny_tokenizer)
    delta = position_loss_delta(biased, ids(tiny_tokenizer, biased), tiny_tokenizer.encode(TGT), abl)
    a = teacher_forced_trace(biased, tiny_tokenizer, SRC, TGT).arrays["loss"]
    b = teacher_forced_trace(biased, tiny_tokenizer, SRC, TGT, ablation=abl).arrays["loss"]
    np.testing.assert_allclose(delta, b - a, atol=1e-5)


# ---------------------------------------------------------------------------------------------- CLI


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def strict(text: str):
    def refuse(c):
        raise ValueError(f"non-strict JSON constant {c}")

    return json.loads(text, parse_constant=refuse)


def test_explain_cli_text_json_npz(capsys, tmp_path, tiny_model_dir):
    rc, out, err = run(capsys, "explain", SRC, "--model", tiny_model_dir, "--ablate", "dec.1.cross.2")
    assert rc == 0 and err == "", err
    for part in (
        "translation:",
        "logit lens",
        "layer 1:",
        "without dec.1.cross.2 (zero ablation)",
        "head importance",
        "cross-attention",
    ):
        assert part in out, part
    rc, out, _ = run(
        capsys,
        "explain",
        SRC,
        "--model",
        tiny_model_dir,
        "--target",
        TGT,
        "--ablate",
        "dec.0.self.1,dec.1.cross.2",
        "--mode",
        "mean",
        "--json",
    )
    assert rc == 0
    r = strict(out)
    T, L = len(r["tokens.label"]), 2
    assert r["target"] and np.array(r["lens.top_probs"]).shape == (L, T, 10)
    assert np.array(r["lens.top_tokens"]).shape == (L, T, 10) and np.array(r["importance.cross"]).shape == (L, 4)
    assert r["ablation.heads"] == "dec.0.self.1,dec.1.cross.2" and r["ablation.mode"] == "mean"
    assert len(r["ablation.loss_delta"]) == T and isinstance(r["importance.base_loss"], float)
    npz = tmp_path / "x.npz"
    rc, out, _ = run(capsys, "explain", SRC, "--model", tiny_model_dir, "--out", npz)
    assert rc == 0 and "wrote" in out
    with np.load(npz) as z:
        assert z["lens.chosen_rank"].shape == (L, len(z["label_ids"])) and "ablation.heads" not in z


def test_explain_cli_json_is_strict_with_nan(capsys, tiny_model_dir, monkeypatch):
    import model.interpret.explain as explain

    real = explain.logit_lens

    def with_nan(*a, **kw):  # a lens with a NaN (as a dead beam row gives) must still print strict JSON
        lens = real(*a, **kw)
        lens.chosen_prob[0, 0] = np.nan
        return lens

    monkeypatch.setattr(explain, "logit_lens", with_nan)
    rc, out, _ = run(capsys, "explain", SRC, "--model", tiny_model_dir, "--json")
    assert rc == 0 and strict(out)["lens.chosen_prob"][0][0] is None


@pytest.mark.parametrize(
    "args, message",
    [
        (["--ablate", "dec.9.cross.0"], "not in this model"),
        (["--ablate", "decoder.1"], "cannot read head"),
        (["--steps", "0", "--method", "ig"], "--steps"),
    ],
)
def test_explain_cli_errors_are_one_line(capsys, tiny_model_dir, args, message):
    rc, out, err = run(capsys, "explain", SRC, "--model", tiny_model_dir, *args)
    assert rc == 2 and out == "" and err.startswith("error:") and message in err and err.count("\n") == 1
    rc, _, err = run(capsys, "explain", "  ", "--model", tiny_model_dir)
    assert rc == 2 and "empty" in err
