"""Attributions of output tokens to source and earlier target tokens (model.interpret.attribution), on the tiny
model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from model.interpret.attribution import DEFAULT_IG_STEPS, agreement, attribute
from model.testing import make_model

SRC = "The cat is sleeping on the sofa."
TGT = "Le chat dort sur le canapé."


@pytest.fixture(scope="module")
def ids(tiny_model, tiny_tokenizer):
    eos = tiny_model.cfg.eos_id
    return tiny_tokenizer.encode(SRC) + [eos], tiny_tokenizer.encode(TGT) + [eos]


def by_hand(model, src, out, zero_embeddings=False):
    """log p(out[t]) at every position, and the token embeddings it was computed from (unscaled, as
    nn.Embedding returns them), captured by a temporary hook; optionally zeroed (the baseline)."""
    dec_in = [model.cfg.decoder_start_id, *out[:-1]]
    seen = []

    def capture(module, args, output):
        seen.append(output * 0 if zero_embeddings else output)
        return seen[-1]

    handle = model.embed.register_forward_hook(capture)
    try:
        logp = model(torch.tensor([src]), torch.tensor([dec_in]))[0].log_softmax(-1)  # (T, V)
    finally:
        handle.remove()
    return logp[torch.arange(len(out)), torch.tensor(out)], seen  # (T,), [(1, S, D), (1, T, D)]


def test_ig_completeness_per_position(tiny_model, ids):
    src, out = ids
    a = attribute(tiny_model, src, out)
    T, S = len(out), len(src)
    assert a.src.shape == a.raw_src.shape == (T, S) and a.tgt.shape == a.raw_tgt.shape == (T, T)
    assert a.method == "ig" and a.position_steps.min() == DEFAULT_IG_STEPS and a.steps == a.position_steps.max()
    target, _ = by_hand(tiny_model, src, out)
    baseline, _ = by_hand(tiny_model, src, out, zero_embeddings=True)
    np.testing.assert_allclose(a.target_logit, target.detach().numpy(), atol=1e-5)
    np.testing.assert_allclose(a.baseline_value, baseline.detach().numpy(), atol=1e-5)
    gap = a.target_logit - a.baseline_value
    total = a.raw_src.sum(1) + a.raw_tgt.sum(1)
    assert (np.abs(total - gap) <= 0.05 * np.abs(gap)).all(), np.abs(total - gap) / np.abs(gap)
    np.testing.assert_allclose(a.completeness, np.abs(total - gap) / np.abs(gap))
    # the check can fail: one step is a single gradient, far from the integral somewhere
    assert attribute(tiny_model, src, out, steps=1, tolerance=None).completeness.max() > 0.05


def test_redone_positions_equal_a_plain_run_at_their_step_count(tiny_model, ids):
    src, out = ids
    a = attribute(tiny_model, src, out)
    redone = a.position_steps > DEFAULT_IG_STEPS
    assert redone.any() and redone[:-1].any()  # some position before the last: the decoder is cut short for it
    for k in np.unique(a.position_steps):
        rows = a.position_steps == k
        plain = attribute(tiny_model, src, out, steps=int(k), tolerance=None)
        np.testing.assert_allclose(a.raw_src[rows], plain.raw_src[rows], atol=1e-6, rtol=1e-4)
        np.testing.assert_allclose(a.raw_tgt[rows], plain.raw_tgt[rows], atol=1e-6, rtol=1e-4)


def test_the_trapezoid_rule_on_refined_points_gives_gauss_legendres_attributions(tiny_model, ids, monkeypatch):
    """Where Gauss-Legendre's steps are exact (the smooth tiny model), the trapezoid rule on refined path points
    gives each token the attribution they give (within 1 % of the row's largest: both are within 0.2 % of
    completeness), not only their sum; a tolerance it cannot meet takes the most points it may, and a plain run
    marks no position refined."""
    from model.interpret import attribution as A

    src, out = ids
    assert not attribute(tiny_model, src, out, steps=2, tolerance=None).refined.any()
    ends = attribute(tiny_model, src, out, method="ixg")
    gap = ends.target_logit - ends.baseline_value
    s, o = (torch.tensor(x) for x in (src, out))
    dec_in = torch.cat([o.new_tensor([tiny_model.cfg.decoder_start_id]), o[:-1]])
    rows = np.array([0, len(out) - 1])
    q = A.Explained(tiny_model, s, dec_in, o, "zero")
    with torch.enable_grad():
        exact = A.integrated(q, torch.from_numpy(rows), 64)  # Gauss-Legendre, 64
    r_src, r_tgt, _ = A._refined_ig(q, rows, gap[rows], 1e-3)
    for got, want in ((r_src, exact[0].numpy()), (r_tgt, exact[1].numpy())):
        np.testing.assert_allclose(got, want, atol=1e-2 * np.abs(want).max())
    assert (np.abs(r_src.sum(1) + r_tgt.sum(1) - gap[rows]) <= 1e-3 * np.abs(gap[rows])).all()
    monkeypatch.setattr(A, "MAX_REFINED_NODES", A.REFINE_START + 1)  # one round at most
    *_, most = A._refined_ig(q, rows[:1], gap[rows[:1]], 0.0)
    assert most[0] == A.REFINE_START + A.REFINE_SPLIT


def test_input_x_gradient_equals_autograd_by_hand(tiny_model, ids):
    src, out = ids
    a = attribute(tiny_model, src, out, method="ixg")
    assert a.steps == 0 and (a.position_steps == 0).all()
    logp, (e_src, e_tgt) = by_hand(tiny_model, src, out)
    for t in range(len(out)):
        g_src, g_tgt = torch.autograd.grad(logp[t], (e_src, e_tgt), retain_graph=True)
        # x·∂f/∂x is the same for the scaled embedding and the unscaled one it is computed from
        np.testing.assert_allclose(a.raw_src[t], (e_src * g_src)[0].sum(-1).detach().numpy(), atol=1e-5, rtol=1e-4)
        np.testing.assert_allclose(a.raw_tgt[t], (e_tgt * g_tgt)[0].sum(-1).detach().numpy(), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("method", ["ig", "ixg"])
def test_what_cannot_reach_the_output_gets_exactly_zero(tiny_tokenizer, ids, method):
    src, out = ids
    model = make_model(tiny_tokenizer.vocab_size)
    with torch.no_grad():  # a non-zero <pad> embedding, so only the padding mask can keep it out
        model.embed.weight[model.cfg.pad_id].normal_()
    pad = model.cfg.pad_id
    kw = dict(method=method, steps=8, tolerance=None)
    padded, plain = attribute(model, [*src, pad, pad], out, **kw), attribute(model, src, out, **kw)
    assert (padded.raw_src[:, len(src) :] == 0).all() and (padded.src[:, len(src) :] == 0).all()
    np.testing.assert_allclose(padded.raw_src[:, : len(src)], plain.raw_src, atol=1e-5, rtol=1e-4)
    np.testing.assert_allclose(padded.raw_tgt, plain.raw_tgt, atol=1e-5, rtol=1e-4)
    future = np.triu(np.ones((len(out), len(out)), dtype=bool), k=1)
    assert (plain.raw_tgt[future] == 0).all() and (plain.raw_tgt[~future] != 0).all()


@pytest.mark.parametrize("method", ["ig", "ixg"])
def test_shares_are_non_negative_and_sum_to_one(tiny_model, ids, method):
    src, out = ids
    a = attribute(tiny_model, src, out, method=method)
    assert (a.src >= 0).all() and (a.tgt >= 0).all()
    np.testing.assert_allclose(a.src.sum(1) + a.tgt.sum(1), 1.0, atol=1e-12)
    np.testing.assert_allclose(
        a.src * (np.abs(a.raw_src).sum(1) + np.abs(a.raw_tgt).sum(1))[:, None], np.abs(a.raw_src)
    )


def test_agreement_on_hand_made_maps():
    w = np.array([[0.1, 0.6, 0.2, 0.1], [0.5, 0.2, 0.1, 0.2], [0.3, 0.1, 0.4, 0.2]])
    same = agreement(w, w)
    assert same.top1.all() and np.allclose(same.spearman, 1.0)
    assert same.summary.startswith("attention and attribution agree on the most important source token at 3 of 3")
    words = np.array([[1.0, 2.0, 3.0, 4.0, 9.0], [0.1, 0.3, 0.2, 0.4, 9.0]])  # last column: </s>, ignored
    reversed_ = agreement(words, words[:, [3, 2, 1, 0, 4]])  # the words' order reversed
    assert not reversed_.top1.any() and np.allclose(reversed_.spearman, -1.0)
    assert "at 0 of 2" in reversed_.summary
    with_eos = agreement(words, words[:, [3, 2, 1, 0, 4]], ignore_eos=False)
    assert with_eos.top1.all() and (with_eos.spearman > -1).all()
    ties = agreement(np.array([[1.0, 1.0, 2.0, 0.0]]), np.array([[1.0, 1.0, 2.0, 0.0]]), ignore_eos=False)
    assert ties.spearman[0] == pytest.approx(1.0)
    flat = agreement(np.array([[1.0, 1.0, 0.0]]), np.array([[0.2, 0.5, 0.3]]))
    assert np.isnan(flat.spearman[0]) and "no Spearman" in flat.summary


def test_rank_correlation_matches_the_textbook_formula():
    rng = np.random.default_rng(0)
    a, w = rng.random((5, 8)), rng.random((5, 8))
    rho = agreement(a, w, ignore_eos=False).spearman
    d = a.argsort(1).argsort(1) - w.argsort(1).argsort(1)  # no ties: rank differences
    np.testing.assert_allclose(rho, 1 - 6 * (d**2).sum(1) / (8 * (8**2 - 1)))


def test_bad_requests(tiny_model, ids):
    src, out = ids
    with pytest.raises(ValueError, match="method"):
        attribute(tiny_model, src, out, method="saliency")
    with pytest.raises(ValueError, match="baseline"):
        attribute(tiny_model, src, out, baseline="noise")
    with pytest.raises(ValueError, match="out_ids is empty"):
        attribute(tiny_model, src, [])
    with pytest.raises(ValueError, match="vocabulary"):
        attribute(tiny_model, src, [tiny_model.cfg.vocab_size])
    with pytest.raises(ValueError, match="one shape"):
        agreement(np.ones((2, 3)), np.ones((2, 4)))


def test_leaves_the_model_as_it_was_and_works_in_inference_mode(tiny_model, ids):
    src, out = ids
    plain = attribute(tiny_model, src, out, method="ixg")
    with torch.inference_mode():  # as the app's views call it
        inside = attribute(tiny_model, src, out, method="ixg")
    np.testing.assert_array_equal(inside.raw_src, plain.raw_src)
    assert all(p.grad is None for p in tiny_model.parameters()) and not tiny_model.training
    assert not any(m._forward_hooks or m._forward_pre_hooks or m._backward_hooks for m in tiny_model.modules())


def test_best_agreeing_head_is_the_best_of_every_head_by_brute_force():
    """The head chosen has the most positions agreeing on the top source word, ties by mean Spearman ρ; a head
    that copies the attribution exactly wins; checked against agreement() on every head."""
    from model.interpret.attribution import best_agreeing_head

    rng = np.random.default_rng(7)
    T, S, L, H = 6, 5, 3, 4
    attr = rng.dirichlet(np.ones(S), size=T)  # (T, S)
    w = rng.dirichlet(np.ones(S), size=(L, H, T))  # (L, H, T, S)
    scores = {}
    for layer in range(L):
        for head in range(H):
            ag = agreement(attr, w[layer, head])
            scores[layer, head] = (int(ag.top1.sum()), float(np.nanmean(ag.spearman)))
    best = best_agreeing_head(attr, w)
    assert (best.top1, best.mean_rho) == scores[best.layer, best.head]
    assert scores[best.layer, best.head] == max(scores.values())
    assert best.heads == L * H
    w[2, 1] = attr  # one head looks exactly where the attribution points
    best = best_agreeing_head(attr, w)
    assert (best.layer, best.head, best.top1) == (2, 1, T) and best.mean_rho == pytest.approx(1.0)
    np.testing.assert_array_equal(best.agreement.top1, np.ones(T, bool))
    with pytest.raises(ValueError, match="cross_weights"):
        best_agreeing_head(attr, w[0])
