"""Why X rather than Y (model.interpret.contrast) on the tiny model: the explained difference computed three independent
ways, Integrated Gradients' completeness checked against plain forward passes, the contrast token's resolution."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from model.interpret.contrast import closest_position, contrast_attribution, contrast_token, lens_difference, report
from model.interpret.patching import activation_patching

SRC = "The cat is sleeping on the sofa."
TGT = "Le chat dort sur le canapé."
T = 3


@pytest.fixture(scope="module")
def pair(tiny_model, tiny_tokenizer):
    eos = tiny_model.cfg.eos_id
    return tiny_tokenizer.encode(SRC) + [eos], tiny_tokenizer.encode(TGT) + [eos]


def by_hand(model, src, out, t, y, zero_embeddings=False):
    """logit out[t] − logit y at position t of one plain forward pass; optionally with every token embedding zeroed
    (the baseline: positional encoding kept) by a temporary hook."""
    dec_in = torch.tensor([[model.cfg.decoder_start_id, *out[:t]]])
    handle = model.embed.register_forward_hook(lambda m, a, o: o * 0) if zero_embeddings else None
    try:
        with torch.no_grad():
            z = model(torch.tensor([src]), dec_in)[0, t].double()
    finally:
        if handle:
            handle.remove()
    return float(z[out[t]] - z[y])


def test_ig_completeness_on_the_difference(tiny_model, tiny_tokenizer, pair):
    src, out = pair
    y = contrast_token(tiny_tokenizer, "la").id
    a = contrast_attribution(tiny_model, src, out, T, y, "ig")
    value, base = by_hand(tiny_model, src, out, T, y), by_hand(tiny_model, src, out, T, y, zero_embeddings=True)
    assert a.value == pytest.approx(value, abs=1e-5) and a.baseline_value == pytest.approx(base, abs=1e-5)
    total = a.raw_src.sum() + a.raw_tgt.sum()
    assert abs(total - (value - base)) <= 0.05 * abs(value - base)
    assert a.completeness == pytest.approx(abs(total - (a.value - a.baseline_value)) / abs(a.value - a.baseline_value))
    assert a.src.shape == (len(src),) and a.tgt.shape == (T + 1,)
    assert a.src.sum() + a.tgt.sum() == pytest.approx(1.0)
    # the check can fail: one step is one gradient, far from the integral
    assert contrast_attribution(tiny_model, src, out, T, y, "ig", steps=1, tolerance=None).completeness > 0.05
    ixg = contrast_attribution(tiny_model, src, out, T, y, "ixg")
    assert ixg.value == pytest.approx(value, abs=1e-5) and ixg.steps == 0
    assert not np.allclose(ixg.raw_src, a.raw_src)


def test_the_difference_is_one_number_everywhere(tiny_model, tiny_tokenizer, pair):
    src, out = pair
    y = contrast_token(tiny_tokenizer, "la").id
    value = by_hand(tiny_model, src, out, T, y)
    lens = lens_difference(tiny_model, src, out, T, y)
    assert lens.diff[-1] == pytest.approx(value, abs=1e-5)
    assert lens.diff.shape == (tiny_model.cfg.n_decoder_layers,) and not np.allclose(lens.diff[0], lens.diff[-1])
    patch = activation_patching(tiny_model, src, out, position=T, contrast_id=y)
    assert patch.diff.clean == pytest.approx(value, abs=1e-5)
    r = report(tiny_model, tiny_tokenizer, src, out, contrast_token(tiny_tokenizer, "la"), position=T)
    assert float(r["contrast.logit_diff"]) == pytest.approx(value, abs=1e-5)
    assert str(r["contrast.chosen"]) == tiny_tokenizer.id_to_token(out[T]) and "contrast.note" not in r


def test_closest_position_has_the_smallest_margin(tiny_model, tiny_tokenizer, pair):
    src, out = pair
    y = contrast_token(tiny_tokenizer, "la").id
    t = closest_position(tiny_model, src, out, y)
    margins = [by_hand(tiny_model, src, out, p, y) if out[p] != y else np.inf for p in range(len(out))]
    assert t == int(np.argmin(margins))


def test_contrast_token_resolution(tiny_tokenizer):
    la = contrast_token(tiny_tokenizer, "la")
    assert la.token == "▁la" and la.note is None
    assert contrast_token(tiny_tokenizer, "␣la").id == la.id == contrast_token(tiny_tokenizer, "▁la").id
    split = contrast_token(tiny_tokenizer, "chienne")
    assert len(split.pieces) > 1 and split.id == tiny_tokenizer.encode("chienne")[0]
    assert split.pieces[0] in split.note and "first" in split.note
    with pytest.raises(ValueError, match="empty"):
        contrast_token(tiny_tokenizer, "  ")


def test_refusals(tiny_model, tiny_tokenizer, pair):
    src, out = pair
    with pytest.raises(ValueError, match="chosen token itself"):
        contrast_attribution(tiny_model, src, out, T, out[T])
    with pytest.raises(ValueError, match="beyond the output"):
        lens_difference(tiny_model, src, out, len(out), 5)
