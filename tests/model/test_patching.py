"""Activation patching (model.interpret.patching) on the tiny model, against brute-force runs that patch one site
through
temporary hooks on the model's modules (an implementation that shares nothing with the batched one)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from model.interpret.patching import Patcher, activation_patching, all_sites, embedding_std

SRC = "The cat is sleeping on the sofa."
TGT = "Le chat dort sur le canapé."


@pytest.fixture(scope="module")
def pair(tiny_model, tiny_tokenizer):
    eos = tiny_model.cfg.eos_id
    a = tiny_tokenizer.encode(SRC) + [eos]
    b = list(a)
    b[1] = tiny_tokenizer.encode("man")[0] if tiny_tokenizer.encode("man")[0] != a[1] else a[2]
    return a, b, tiny_tokenizer.encode(TGT) + [eos]


def brute_force(model, src, out, P, site=None, clean=None, noise=None):
    """Logits (V,) at position P − 1 of one unbatched run of ``model(src, <s> out)`` with ``site`` restored from
    ``clean`` (captured by the same hooks on a clean run: pass ``clean={}`` to fill it); ``noise`` (1, S, D) is
    added to the source's input embedding."""
    cfg = model.cfg
    dec_in = torch.tensor([[cfg.decoder_start_id, *out[: P - 1]]])
    d_k, handles = cfg.d_k, []

    def stream(key, pos_axis_len):
        def hook(module, args, output):
            if clean is None:
                return None
            if site is None or key not in site_keys():
                clean.setdefault(key, output[0].detach().clone())
                return None
            y = output[0].clone()
            y[0, site_pos()] = clean[key][0, site_pos()]
            return (y, *output[1:])

        return hook

    def site_keys():
        kind = site[0]
        if kind == "enc":
            return {f"enc.{site[1]}"}
        if kind == "dec":
            return {f"dec.{site[1]}.{site[2]}"}
        return set()

    def site_pos():
        return site[3] if site[0] == "dec" else site[2]

    def heads_hook(key, kind, layer):
        def hook(module, args):
            if clean is None:
                return None
            concat = args[0]
            if site is None or site[0] != kind or site[1] != layer:
                clean.setdefault(key, concat.detach().clone())
                return None
            c = concat.clone()
            h = site[2]
            c[..., h * d_k : (h + 1) * d_k] = clean[key][..., h * d_k : (h + 1) * d_k]
            return (c,)

        return hook

    for i, layer in enumerate(model.encoder_layers):
        handles.append(layer.register_forward_hook(stream(f"enc.{i}", None)))
    for i, layer in enumerate(model.decoder_layers):
        for k, norm in enumerate((layer.norm1, layer.norm2, layer.norm3)):
            handles.append(norm.register_forward_hook(stream(f"dec.{i}.{k}", None)))
        handles.append(layer.self_attn.W_O.register_forward_pre_hook(heads_hook(f"self.{i}", "self", i)))
        handles.append(layer.cross_attn.W_O.register_forward_pre_hook(heads_hook(f"cross.{i}", "cross", i)))
    if noise is not None:
        handles.append(model.src_embed.register_forward_hook(lambda m, a, o: (o[0] + noise, o[1])))
    try:
        with torch.no_grad():
            return model(torch.tensor([src]), dec_in)[0, -1]
    finally:
        for h in handles:
            h.remove()


def noise_of(model, src, seed=0, scale=3.0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(1, len(src), model.cfg.d_model, generator=gen) * (scale * embedding_std(model))


@pytest.mark.parametrize("corruption", ["source", "noise"])
def test_each_patched_value_equals_a_brute_force_run(tiny_model, pair, corruption):
    a, b, out = pair
    P = 4
    r = activation_patching(tiny_model, a, out, b if corruption == "source" else None, position=P - 1, contrast_id=7)
    x = out[P - 1]
    corrupt_src, noise = (b, None) if corruption == "source" else (a, noise_of(tiny_model, a))
    clean = {}
    clean_logits = brute_force(tiny_model, a, out, P, clean=clean)
    cfg = tiny_model.cfg
    want = {}
    for site in all_sites(tiny_model, len(a), P - 1):
        z = brute_force(tiny_model, corrupt_src, out, P, site=site, clean=clean, noise=noise).double()
        want[site] = (z.softmax(-1)[x].item(), (z[x] - z[7]).item())
    got = {}
    for l_ in range(cfg.n_encoder_layers):
        for s in range(len(a)):
            got[("enc", l_, s)] = (r.prob.enc[l_, s], r.diff.enc[l_, s])
    for l_ in range(cfg.n_decoder_layers):
        for k in range(3):
            for p in range(P):
                got[("dec", l_, k, p)] = (r.prob.dec[l_, k, p], r.diff.dec[l_, k, p])
    for j, kind in enumerate(("self", "cross")):
        for l_ in range(cfg.n_decoder_layers):
            for h in range(cfg.n_heads):
                got[(kind, l_, h)] = (r.prob.heads[j, l_, h], r.diff.heads[j, l_, h])
    assert got.keys() == want.keys()
    np.testing.assert_allclose(np.array(list(got.values())), np.array(list(want.values())), atol=2e-5)
    z = brute_force(tiny_model, corrupt_src, out, P, noise=noise).double()
    np.testing.assert_allclose(r.prob.corrupted, z.softmax(-1)[x].item(), atol=1e-6)
    np.testing.assert_allclose(r.prob.clean, clean_logits.double().softmax(-1)[x].item(), atol=1e-6)
    # the values differ from site to site far beyond the tolerance, so a flat map would not pass
    assert np.ptp(np.array(list(want.values()))[:, 1]) > 1e-2
    if corruption == "source":  # only source token 1 differs: at layer 0 it is the one site that matters most
        assert np.argmax(np.abs(r.diff.enc[0] - r.diff.corrupted)) == 1


def test_restoring_none_gives_the_corrupted_run_and_every_site_of_a_layer_the_clean_run(tiny_model, pair):
    a, b, out = pair
    cfg, P = tiny_model.cfg, 5
    p = Patcher(tiny_model, a, out, b)
    clean_logits, _ = p.clean(P - 1)
    corrupted = brute_force(tiny_model, b, out, P)
    layers = [[("enc", l_, s) for s in range(len(a))] for l_ in range(cfg.n_encoder_layers)]
    last = cfg.n_decoder_layers - 1
    layers.append([("dec", last, 2, q) for q in range(P)])  # the last decoder layer's output, every position
    layers.append([(kind, l_, h) for kind in ("self", "cross") for l_ in range(last + 1) for h in range(cfg.n_heads)])
    logits = p.run(P - 1, [[], *layers, [("enc", 0, 1)]])
    np.testing.assert_allclose(logits[0].numpy(), corrupted.numpy(), atol=1e-5)
    for row in logits[1:-1]:
        np.testing.assert_allclose(row.numpy(), clean_logits[0].numpy(), atol=1e-5)
    # and these are not the same run: the check could fail
    assert (clean_logits[0] - corrupted).abs().max() > 1e-2
    assert (logits[-1] - clean_logits[0]).abs().max() > 1e-4


def test_noise_is_reproducible_and_refusals_are_one_sentence(tiny_model, pair):
    a, b, out = pair
    one = activation_patching(tiny_model, a, out, position=2)
    two = activation_patching(tiny_model, a, out, position=2)
    other = activation_patching(tiny_model, a, out, position=2, seed=1)
    np.testing.assert_array_equal(one.prob.enc, two.prob.enc)
    assert not np.array_equal(one.prob.enc, other.prob.enc)
    assert one.corruption.kind == "noise" and one.corruption.std == pytest.approx(embedding_std(tiny_model))
    with pytest.raises(ValueError, match="same token length.*noise"):
        Patcher(tiny_model, a, out, b[:-2] + b[-1:])
    with pytest.raises(ValueError, match="the same"):
        Patcher(tiny_model, a, out, list(a))
    with pytest.raises(ValueError, match="beyond the output"):
        activation_patching(tiny_model, a, out, b, position=len(out))
    with pytest.raises(ValueError, match="chosen token itself"):
        activation_patching(tiny_model, a, out, b, position=1, contrast_id=out[1])
