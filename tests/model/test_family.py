"""Parity with transformers for every family the importer reads: BART, mBART, M2M100 (NLLB), T5 and a gated T5
with wide heads (Flan-T5's settings); Marian's is tests/model/test_marian.py. Each model is a seeded random one that
transformers builds from a tiny config and saves; ours is imported from that directory by ``python -m model import``.
Every recorded stage that transformers exposes (or computes with its own modules) must agree within 1e-4, and
``generate()`` greedy and beam 4 must give the same tokens."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from model.core import keys
from model.decode.decoding import DecodeOptions, ModuleDecoder, decode, prepare_ids
from model.decode.lean import LeanDecoder
from model.decode.trace import teacher_forced_trace
from model.io.checkpoint import ModelDirError, load_model_dir
from model.io.family import FamilyError, import_model
from model.testing import make_model
from tests.model.family_models import EOS, FAMILIES, PAD, family_tokenizer, save_family
from tests.model.test_marian import neutral_generation, one_thread  # noqa: F401  (one_thread: autouse)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")

SOURCES = ["I like the cat.", "Hello world.", "The man is on the beach tomorrow.", "Nous aimons le chat bleu."]
TARGET = "Le chat dort sur le canapé."
N_NEW = 12  # max_new_tokens
ATOL = 1e-4
EXPECTED = {  # what each family's config.json becomes
    "bart": dict(norm_position="post", embed_norm=True, final_norm=False, positions="learned", position_offset=2),
    "mbart": dict(norm_position="pre", embed_norm=True, final_norm=True, positions="learned", position_offset=2),
    "m2m_100": dict(
        norm_position="pre", final_norm=True, positions="sinusoidal", pe_layout="fairseq", position_offset=1
    ),
    "t5": dict(norm_kind="rms", positions="relative", bias=False, scale_attention=False, output_scale=32**-0.5),
    "t5_gated": dict(norm_kind="rms", gated_ffn=True, activation="gelu_new", d_kv=16, output_scale=1.0),
}


@pytest.fixture(scope="module")
def tok():
    return family_tokenizer()


@pytest.fixture(scope="module", params=FAMILIES)
def fam(request, tok, tmp_path_factory):
    """(family, transformers directory, transformers' model with eager attention, our imported model)."""
    from transformers import AutoModelForSeq2SeqLM

    family = request.param
    hf_dir = save_family(family, tmp_path_factory.mktemp(family) / "hf", tok)
    hf = AutoModelForSeq2SeqLM.from_pretrained(hf_dir, attn_implementation="eager").eval()
    from model.cli import main

    assert main(["import", str(hf_dir), str(hf_dir.parent / "ours")]) == 0
    return family, hf_dir, hf, load_model_dir(hf_dir.parent / "ours")


def _src(tok, text: str) -> list[int]:
    return [*tok.encode(text), EOS]


def _close(ours, theirs, what: str) -> None:
    theirs = theirs.detach().numpy() if isinstance(theirs, torch.Tensor) else theirs
    np.testing.assert_allclose(np.asarray(ours), theirs, atol=ATOL, rtol=0, err_msg=what)


def test_config_names_the_family(fam):
    family, _, _, ours = fam
    cfg = ours.cfg
    for key, value in EXPECTED[family].items():
        assert getattr(cfg, key) == pytest.approx(value) if isinstance(value, float) else getattr(cfg, key) == value
    assert cfg.family in ours.card and "imported from" in ours.card


def _hf_blocks(family: str, hf, side: str, i: int):
    """transformers' own modules of layer i: (self-attention, its norm, cross-attention, its norm) and q, k, v's
    attribute names."""
    if family.startswith("t5"):
        layer = getattr(hf, side).block[i].layer
        cross = (layer[1].EncDecAttention, layer[1].layer_norm) if side == "decoder" else (None, None)
        return layer[0].SelfAttention, layer[0].layer_norm, *cross, ("q", "k", "v")
    layer = getattr(hf.model, side).layers[i]
    cross = (layer.encoder_attn, layer.encoder_attn_layer_norm) if side == "decoder" else (None, None)
    return layer.self_attn, layer.self_attn_layer_norm, *cross, ("q_proj", "k_proj", "v_proj")


def _split(x: torch.Tensor, H: int) -> np.ndarray:
    T = x.shape[1]
    return x[0].view(T, H, -1).transpose(0, 1).numpy()  # (H, T, d_k)


# Long on purpose: one teacher-forced pass, every stage held to transformers' in the order the model computes them.
def test_every_stage_matches_transformers(fam, tok):
    family, _, hf, ours = fam
    cfg, H = ours.cfg, ours.cfg.n_heads
    pre = cfg.norm_position == "pre"
    for source in SOURCES[:2]:
        src, tgt = _src(tok, source), tok.encode(TARGET)
        dec_in = [cfg.decoder_start_id, *tgt]
        with torch.no_grad():
            out = hf(
                input_ids=torch.tensor([src]),
                decoder_input_ids=torch.tensor([dec_in]),
                output_attentions=True,
                output_hidden_states=True,
            )
        a = teacher_forced_trace(ours.model, ours.tokenizer, src[:-1], tgt).arrays
        _close(a[keys.LOGITS], out.logits[0], "logits")
        _close(a[keys.PROBS], out.logits[0].softmax(-1), "probs")
        _close(a[keys.MEMORY], out.encoder_last_hidden_state[0], "memory")
        for side, hidden in (("enc", out.encoder_hidden_states), ("dec", out.decoder_hidden_states)):
            L = len(hidden) - 1
            _close(a[keys.embedding(side, "input")], hidden[0][0], f"{side}: embeddings + positions")
            last = "norm2" if side == "enc" else "norm3"
            for i in range(L - 1):  # what each layer hands on (the last one's: after the final norm, if any)
                _close(a[keys.layer(side, i, last, "out")], hidden[i + 1][0], f"{side}.{i} output")
            final = keys.final_norm(side) if cfg.final_norm else keys.layer(side, L - 1, last, "out")
            _close(a[final], hidden[L][0], f"{side} last hidden state")
        for i in range(cfg.n_decoder_layers):
            for ours_key, theirs in (
                (keys.enc(i, "self", "weights"), out.encoder_attentions),
                (keys.dec(i, "self", "weights"), out.decoder_attentions),
                (keys.dec(i, "cross", "weights"), out.cross_attentions),
            ):
                _close(a[ours_key], theirs[i][0], ours_key)
            # Q, K, V and the norms through transformers' own modules, on transformers' own hidden states
            self_attn, norm1, cross_attn, norm2, (q, k, v) = _hf_blocks(family, hf, "decoder", i)
            y = out.decoder_hidden_states[i]
            with torch.no_grad():
                h = norm1(y) if pre else y
                if pre:
                    normed = keys.dec(i, "norm1", "normed")
                    _close(a[normed], h[0], normed + " (before self-attention)")
                for name, proj in (("Q", q), ("K", k), ("V", v)):
                    key = keys.dec(i, "self", name)
                    _close(a[key], _split(getattr(self_attn, proj)(h), H), key)
                memory = out.encoder_last_hidden_state
                for name, proj in (("K", k), ("V", v)):
                    theirs = _split(getattr(cross_attn, proj)(memory), H)
                    _close(a[keys.dec(i, "cross", name)], theirs, keys.dec(i, "cross", name))
            if family.startswith("t5"):  # the relative position bias of each stack, from transformers' own table
                enc_attn = hf.encoder.block[0].layer[0].SelfAttention
                S, T = len(src), len(dec_in)
                with torch.no_grad():
                    _close(a[keys.enc(i, "self", "position_bias")], enc_attn.compute_bias(S, S)[0], "enc bias")
                    _close(
                        a[keys.dec(i, "self", "position_bias")],
                        hf.decoder.block[0].layer[0].SelfAttention.compute_bias(T, T)[0],  # layer 0's, shared
                        "dec bias",
                    )
                    scores = a[keys.dec(i, "self", "Q")] @ a[keys.dec(i, "self", "K")].transpose(0, 2, 1)
                    _close(a[keys.dec(i, "self", "scores")], scores + a[keys.dec(i, "self", "position_bias")], "scores")


def _generated(seq: torch.Tensor, cfg) -> list[int]:
    """A generated sequence without its start token, up to its first </s> (transformers pads a finished beam
    hypothesis, here with </s>), padding left out."""
    ids = [t for t in seq[1:].tolist() if t != cfg.pad_id]
    return ids[: ids.index(cfg.eos_id) + 1] if cfg.eos_id in ids else ids


def _generation(cfg, **kw):
    return neutral_generation(cfg.pad_id, cfg.eos_id, start=cfg.decoder_start_id, max_new_tokens=N_NEW, **kw)


def test_greedy_and_beam_match_generate(fam, tok):
    _, _, hf, ours = fam
    cfg, k = ours.cfg, 4
    outputs = set()
    for source in SOURCES:
        src = _src(tok, source)
        gen = hf.generate(torch.tensor([src]), generation_config=_generation(cfg))
        mine = decode(ours.model, src, DecodeOptions(strategy="greedy", max_len=N_NEW))
        assert list(mine.ids) == _generated(gen[0], cfg), source
        recorded = decode(ours.model, src, DecodeOptions(strategy="greedy", max_len=N_NEW, record=True))
        assert recorded.ids == mine.ids and keys.dec(0, "cross", "weights") in recorded.steps[0].arrays
        outputs.add(mine.ids)
        beam = hf.generate(
            torch.tensor([src]),
            generation_config=_generation(
                cfg,
                num_beams=k,
                num_return_sequences=k,
                early_stopping=False,
                output_scores=True,
                return_dict_in_generate=True,
            ),
        )
        theirs = [_generated(seq, cfg) for seq in beam.sequences]
        opts = DecodeOptions(strategy="beam", beam=k, n_best=k, max_len=N_NEW)
        mine_beam = decode(ours.model, src, opts)
        assert [list(h.ids) for h in mine_beam.n_best] == theirs, source
        np.testing.assert_allclose([h.score for h in mine_beam.n_best], beam.sequences_scores.numpy(), atol=1e-4)
    assert len(outputs) > 1  # the sources do not all decode alike


@pytest.mark.parametrize("family, codes", [("mbart", ("en_XX", "fr_XX")), ("m2m_100", ("eng_Latn", "fra_Latn"))])
def test_language_codes_match_generate(tok, tmp_path, capsys, family, codes):
    """mBART-50 and NLLB read the source's language code first and force the target's as the first token."""
    from transformers import AutoModelForSeq2SeqLM

    hf_dir = save_family(family, tmp_path / "hf", tok)
    (hf_dir / "tokenizer_config.json").write_text(json.dumps({"src_lang": codes[0], "tgt_lang": codes[1]}))
    ours = load_model_dir(import_model(hf_dir, tmp_path / "ours"))
    cfg = ours.cfg
    src_code, tgt_code = (tok.token_to_id(c) for c in codes)
    assert (cfg.source_prefix_id, cfg.forced_bos_id) == (src_code, tgt_code)
    hf = AutoModelForSeq2SeqLM.from_pretrained(hf_dir).eval()
    for source in SOURCES[:3]:
        src = prepare_ids(tok.encode(source), cfg.eos_id, cfg.max_len, cfg.source_prefix_id)
        assert src[0] == src_code and src[-1] == cfg.eos_id
        for beam in (1, 4):
            extra = dict(num_beams=beam, num_return_sequences=beam, early_stopping=False) if beam > 1 else {}
            gen = hf.generate(
                torch.tensor([src]), generation_config=_generation(cfg, forced_bos_token_id=tgt_code, **extra)
            )
            opts = DecodeOptions(strategy="beam" if beam > 1 else "greedy", beam=beam, n_best=beam, max_len=N_NEW)
            mine = decode(ours.model, src, opts)
            theirs = [_generated(seq, cfg) for seq in gen]
            assert [list(h.ids) for h in mine.n_best] == theirs, (source, beam)
            assert mine.ids[0] == tgt_code
    from model.cli import main  # the CLI's teacher-forced target reads as decoding gives it: the target's code first

    a, b = "The cat is sleeping on the sofa.", "The man is sleeping on the sofa."  # as long as each other
    argv = ["patch", a, b, "--target", "Le chat.", "--position", "0", "--json", "--model", str(ours.path)]
    capsys.readouterr()
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["target"] == codes[1]


def _hf_head(family: str, hf, h: torch.Tensor, out) -> torch.Tensor:
    """transformers' logits for a decoder residual h, read as its own last layer's is: its final norm where it has
    one, T5's rescaling before the head (read off transformers' own last layer: its logits over its head on its
    last hidden state), the head and the final logits bias."""
    if family.startswith("t5"):
        last = hf.lm_head(out.decoder_hidden_states[-1][0])  # (T, V) the head on the final norm's output, unscaled
        scale = float((out.logits[0] * last).sum() / (last * last).sum())
        return hf.lm_head(hf.decoder.final_layer_norm(h) * scale)
    if family != "bart":  # mBART and M2M100: pre-norm, a final LayerNorm
        h = hf.model.decoder.layer_norm(h)
    z = hf.lm_head(h)
    return z + hf.final_logits_bias if hasattr(hf, "final_logits_bias") else z


def test_logit_lens_reads_each_layer_as_transformers_reads_its_last(fam, tok):
    """The lens reads every decoder layer as the model reads its last one: a pre-norm layer's residual through the
    final norm (and T5's output scale), a post-norm one as it is; each layer's distribution equals transformers'
    head on transformers' own hidden state, and the last layer's is the model's."""
    from model.interpret.explain import lens_problem, lens_reads_final_norm, logit_lens

    family, _, hf, ours = fam
    cfg = ours.cfg
    assert lens_problem(cfg) is None and lens_reads_final_norm(cfg) == (cfg.norm_position == "pre")
    src, tgt = _src(tok, SOURCES[2]), tok.encode(TARGET)
    with torch.no_grad():
        out = hf(
            input_ids=torch.tensor([src]),
            decoder_input_ids=torch.tensor([[cfg.decoder_start_id, *tgt]]),
            output_hidden_states=True,
        )
    a = teacher_forced_trace(ours.model, ours.tokenizer, src[:-1], tgt).arrays
    labels = [int(i) for i in a[keys.LABEL_IDS]]
    lens = logit_lens(ours.model, a, labels, k=3)
    L = cfg.n_decoder_layers
    for layer in range(L):
        with torch.no_grad():
            z = out.logits[0] if layer == L - 1 else _hf_head(family, hf, out.decoder_hidden_states[layer + 1][0], out)
        p = z.double().softmax(-1)
        want = p[torch.arange(len(labels)), torch.tensor(labels)]
        _close(lens.chosen_prob[layer], want.float(), f"lens, layer {layer}: p(label)")
        _close(lens.top_probs[layer, :, 0], p.max(-1).values.float(), f"lens, layer {layer}: p(top)")
    assert np.ptp(lens.chosen_prob[:-1]) > 1e-3  # the layers read differently: a constant lens could not pass


def test_each_patched_decoder_site_equals_a_brute_force_run(fam, tok):
    """Every decoder site and head of the patching map on every family (pre-norm, T5's relative bias, whose copies
    start at their first restored position with the corrupted run's keys before it) equals one unbatched run of the
    model that restores the site through temporary hooks (tests/model/test_patching.py)."""
    from model.interpret.patching import PREFIX_BLOCK, activation_patching
    from tests.model.test_patching import brute_force

    _, _, _, ours = fam
    model, cfg = ours.model, ours.cfg
    a, b = _src(tok, "The cat is sleeping on the sofa."), _src(tok, "The man is sleeping on the sofa.")
    gen = torch.Generator().manual_seed(0)
    out = [int(i) for i in torch.randint(EOS + 1, cfg.vocab_size, (2 * PREFIX_BLOCK - 3,), generator=gen)]
    P, x, y = len(out), out[-1], (out[-1] + 1) % cfg.vocab_size  # copies from position PREFIX_BLOCK start there
    r = activation_patching(model, a, out, b, position=P - 1, contrast_id=y)  # measured as logit x − logit y
    clean: dict = {}
    brute_force(model, a, out, P, clean=clean)
    got, want = [], []
    sites = [("dec", layer, k, q) for layer in range(cfg.n_decoder_layers) for k in range(3) for q in range(P)]
    for site in sites + [(kind, layer, 0) for kind in ("self", "cross") for layer in range(cfg.n_decoder_layers)]:
        z = brute_force(model, b, out, P, site=site, clean=clean).double()
        want.append(float(z[x] - z[y]))
        got.append(
            float(r.diff.dec[site[1:]] if site[0] == "dec" else r.diff.heads[int(site[0] == "cross"), site[1], 0])
        )
    np.testing.assert_allclose(got, want, atol=1e-4)
    assert np.ptp(want) > 1e-2  # the sites differ far beyond the tolerance: a flat map could not pass


def test_fast_step_covers_the_paper_family_and_steps_the_rest_in_numpy(fam):
    """The numpy / compiled step covers post-norm LayerNorm models with a positional table (the bundled model,
    Marian), recorded or not; every other family steps untraced through ``FamilyStep`` and recorded through its own
    modules, and decoding says so by its decoder."""
    from model.decode.family_step import FamilyStep

    _, _, _, ours = fam
    lean = LeanDecoder(ours.model)
    assert isinstance(lean.fallback, ModuleDecoder) and isinstance(lean.family, FamilyStep)
    assert LeanDecoder(make_model(60, seed=1)).fallback is None
    assert LeanDecoder(make_model(60, seed=1, pe_layout="half", final_logits_bias=True)).family is None


def _refused(capsys, argv: list[str], out) -> str:
    from model.cli import main

    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert not out.exists()  # nothing written
    return err


def test_bad_directories_are_refused_in_one_line(tok, tmp_path, capsys):
    from transformers import GPT2Config

    gpt = tmp_path / "gpt2"
    GPT2Config(n_layer=1, n_embd=16, n_head=2).save_pretrained(gpt)
    assert "decoder-only" in _refused(capsys, ["import", str(gpt), str(tmp_path / "o1")], tmp_path / "o1")
    for d in (gpt, save_family("t5", tmp_path / "t5", tok)):  # given where an imported one is expected
        with pytest.raises(ModelDirError, match="is a transformers directory .*: import it first") as e:
            load_model_dir(d)
        assert "\n" not in str(e.value)

    hf_dir = save_family("bart", tmp_path / "bart", tok)
    conf = json.loads((hf_dir / "config.json").read_text())
    for change, message in (
        ({"encoder_layers": 1}, "contradicts the weights: config.json has no place for model.encoder.layers.1"),
        ({"d_model": 64}, "contradicts the weights: the embedding is"),
        ({"decoder_layers": 3}, "lacks model.decoder.layers.2"),
    ):
        (hf_dir / "config.json").write_text(json.dumps({**conf, **change}))
        assert message in _refused(capsys, ["import", str(hf_dir), str(tmp_path / "o2")], tmp_path / "o2")
    (hf_dir / "config.json").write_text(json.dumps({**conf, "eos_token_id": 3}))
    assert "puts </s> at id 2" in _refused(capsys, ["import", str(hf_dir), str(tmp_path / "o3")], tmp_path / "o3")
    (hf_dir / "config.json").write_text(json.dumps({**conf, "vocab_size": tok.vocab_size - 10}))
    bigger = _refused(capsys, ["import", str(hf_dir), str(tmp_path / "o4")], tmp_path / "o4")
    assert "does not match the vocabulary" in bigger or "contradicts" in bigger
    (hf_dir / "config.json").write_text(json.dumps(conf))
    err = _refused(capsys, ["import", str(hf_dir), str(tmp_path / "o5"), "--src-lang", "xx"], tmp_path / "o5")
    assert "has no language codes" in err


def test_tokenizer_smaller_than_the_vocabulary_check(tok, tmp_path, capsys):
    """A tokenizer.json with more tokens than the model's vocabulary is refused before anything is written, and
    the CLI says so in one line with exit status 2."""
    from tokenizers import AddedToken

    hf_dir = save_family("m2m_100", tmp_path / "hf", tok)
    bigger = family_tokenizer()
    bigger.hf.add_tokens([AddedToken(f"extra{i}") for i in range(5)])
    bigger.save(hf_dir / "tokenizer.json")
    with pytest.raises(FamilyError, match="does not match the vocabulary: it has .* tokens but the model only"):
        import_model(hf_dir, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    err = _refused(capsys, ["import", str(hf_dir), str(tmp_path / "out")], tmp_path / "out")
    assert "does not match the vocabulary" in err


@pytest.mark.parametrize(
    "change, message",
    [
        ({"norm_position": "middle"}, "norm_position must be one of"),
        ({"positions": "relative", "position_offset": 2}, "position_offset applies to a positional table"),
        ({"relative_max_distance": 2, "positions": "relative", "relative_buckets": 32}, "must exceed half"),
        ({"d_kv": 100_000}, "d_kv=100000 is outside the sane range"),
        ({"forced_bos_id": 10**6}, "forced_bos_id=1000000 is outside the vocabulary"),
        ({"gated_ffn": "yes"}, "gated_ffn must be true or false"),
        ({"rope": True}, "unknown config keys: rope"),
    ],
)
def test_config_json_stays_strict(fam, tmp_path, change, message):
    import shutil

    _, _, _, ours = fam
    d = tmp_path / "m"
    shutil.copytree(ours.path, d)
    conf = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**conf, **change}))
    with pytest.raises(ModelDirError, match=message) as e:
        load_model_dir(d)
    assert "\n" not in str(e.value)


def test_translate_and_trace_on_an_imported_model(fam, tmp_path, capsys):
    from model.cli import main

    _, _, _, ours = fam
    capsys.readouterr()
    assert main(["translate", "--model", str(ours.path), "--beam", "2", "--max-len", "6", "Hello world."]) == 0
    out = str(tmp_path / "t.npz")
    assert main(["trace", "--model", str(ours.path), "Hello world.", "--target", "Bonjour.", "--out", out]) == 0
    saved = np.load(tmp_path / "t.npz")
    assert keys.dec(0, "cross", "weights") in saved.files
    assert (keys.final_norm("dec") in saved.files) == ours.cfg.final_norm
    assert PAD not in ours.tokenizer.encode("Hello world.")


def test_patching_and_attribution_run_the_model_as_it_is(fam, tok):
    """Patching and Integrated Gradients rebuild the forward pass from token embeddings: on every family it is the
    model's own (pre-norm, embedding norm, final norms, T5's relative bias), which is transformers' (above): the
    patcher's clean and corrupted runs give the model's logits for A and B, the corrupted run with every site of
    the last encoder layer, the last decoder layer's output or every head's context restored gives A's (a patched
    copy starts at the first layer it restores), and IG explains the model's own log p(y)."""
    from model.interpret.attribution import attribute, explained_logprob, scaled_embeddings
    from model.interpret.patching import Patcher

    _, _, _, ours = fam
    model, cfg = ours.model, ours.cfg
    a, b = "The cat is sleeping on the sofa.", "The man is sleeping on the sofa."
    src_a, src_b = _src(tok, a), _src(tok, b)
    out = list(decode(model, src_a, DecodeOptions(max_len=5)).ids)
    p = Patcher(model, src_a, out, src_b)
    t = len(out) - 1
    dec_in = torch.tensor([[cfg.decoder_start_id, *out[:t]]])
    with torch.no_grad():
        want_a, want_b = (model(torch.tensor([s]), dec_in)[0, t] for s in (src_a, src_b))
    _close(p.clean(t)[0][0], want_a, "patching's clean run")
    last, heads = cfg.n_decoder_layers - 1, range(cfg.n_heads)
    rows = [
        [],
        [("enc", cfg.n_encoder_layers - 1, s) for s in range(len(src_a))],
        [("dec", last, 2, q) for q in range(t + 1)],  # a copy that starts at the last decoder layer
        [(kind, layer, h) for kind in ("self", "cross") for layer in range(last + 1) for h in heads],
    ]
    restored = p.run(t, rows)
    _close(restored[0], want_b, "patching's corrupted run")
    _close(restored[1], want_a, "the corrupted run with the last encoder layer restored")
    _close(restored[2], want_a, "the corrupted run with the last decoder layer's output restored")
    _close(restored[3], want_a, "the corrupted run with every head's context restored")
    assert (p.corrupted_top()[t] == int(want_b.argmax())) or abs(float(want_b.max() - want_b.sort().values[-2])) < 1e-4
    src_t, dec_t = torch.tensor(src_a), dec_in[0]
    f = explained_logprob(model, src_t, dec_t, torch.tensor(out))
    s_tok, t_tok = scaled_embeddings(model, src_t, dec_t, 1)
    with torch.no_grad():
        got = f(s_tok, t_tok, torch.tensor([t]))
    _close(got[0], want_a.log_softmax(-1)[out[t]], "attribution's forward")
    from model.interpret import corpus  # the corpus page's pass from token embeddings

    y = corpus._forward(model, src_t[None], dec_in, s_tok, t_tok)
    _close(model.logits(y)[0, t].detach(), want_a, "the corpus's pass")
    r = attribute(model, src_a, out, steps=4, tolerance=None)  # what it explains is the model's log p
    _close(r.target_logit[t], want_a.log_softmax(-1)[out[t]], "the explained log-probability")


def test_head_removal_losses_run_the_model_as_it_is(fam, tok):
    """The corpus head table's removal losses (each head alone switched off, rows from the unablated pass's input
    to its layer) equal one ablated pass of the model's own encode and decode each, on every family: T5's relative
    bias in every layer, the pre-norm models' final encoder norm on the memory."""
    from model.core.ablation import Ablation
    from model.interpret import corpus as C
    from model.interpret.explain import position_loss_delta

    _, _, _, ours = fam
    m, cfg = ours.model, ours.cfg
    srcs = [_src(tok, s) for s in SOURCES[:2]]
    tgts = [[*tok.encode(t), EOS] for t in (TARGET, "Bonjour le monde.")]
    got = C.removal_losses(m, *C._batch(m, srcs, tgts))
    for kind in ("enc", "self", "cross"):
        assert got[kind].shape == (2, cfg.n_encoder_layers if kind == "enc" else cfg.n_decoder_layers, cfg.n_heads)
        for li in range(got[kind].shape[1]):
            for h in range(cfg.n_heads):
                for i in range(2):
                    want = position_loss_delta(m, srcs[i], tgts[i], Ablation(frozenset({(kind, li, h)}))).mean()
                    assert got[kind][i, li, h] == pytest.approx(want, abs=2e-5), (kind, li, h, i)


def test_faithfulness_reads_language_codes_as_no_word(tok, tmp_path):
    """On NLLB with its codes, the erasure signals leave the language codes out of the source's and the output's
    words (never erased, never an invented word), and the empty source is what the model reads for one: its code,
    then </s>."""
    from model.interpret.faithful import EN_FUNCTION, faithfulness, teacher_forced, words_of

    hf_dir = save_family("m2m_100", tmp_path / "hf", tok)
    (hf_dir / "tokenizer_config.json").write_text(json.dumps({"src_lang": "eng_Latn", "tgt_lang": "fra_Latn"}))
    ours = load_model_dir(import_model(hf_dir, tmp_path / "ours"))
    cfg = ours.cfg
    src = prepare_ids(tok.encode(SOURCES[2]), cfg.eos_id, cfg.max_len, cfg.source_prefix_id)
    out = list(decode(ours.model, src, DecodeOptions(max_len=N_NEW)).ids)
    assert out[0] == cfg.forced_bos_id
    (f,) = faithfulness(ours.model, tok, [src], [out])
    assert not {w.text for w in (*f.src_words, *f.out_words)} & {"eng_Latn", "fra_Latn"}
    body = words_of(tok.tokens(src[1:]), EN_FUNCTION)  # the source's words without its code: one position on
    assert [(w.text, w.pieces) for w in f.src_words] == [(w.text, tuple(p + 1 for p in w.pieces)) for w in body]
    assert all(0 not in w.pieces for w in f.out_words)
    full, empty = teacher_forced(ours.model, [src, [cfg.source_prefix_id, cfg.eos_id]], [out, out])
    np.testing.assert_allclose(f.sensitivity, full - empty, atol=1e-6)


def test_integrated_gradients_completeness_with_each_familys_baseline(fam, tok):
    """IG integrates from a zero token embedding, or, on T5 (no positional encoding: the zero baseline is an all-zero
    input to RMSNorm), from the <pad> embedding: completeness within 5 % on every position with the family's
    baseline, checked against the model's own forward passes, and the gated T5's Gauss-Legendre steps miss it from
    zero (why zero is not its baseline). The sharp T5 test model (unscaled scores of weights scaled 3×) flips its
    attention within a millionth of the path, where Gauss-Legendre misses completeness by several times the change
    even at 512 steps: only there does the trapezoid rule on refined path points take over, and meets it."""
    from model.interpret.attribution import BASELINES, COMPLETENESS_TOL, MAX_IG_STEPS, attribute, baseline_for

    family, _, _, ours = fam
    assert baseline_for(ours.cfg) == ("pad" if family.startswith("t5") else "zero")
    src = _src(tok, SOURCES[0])
    out = list(decode(ours.model, src, DecodeOptions(max_len=5)).ids)
    r = attribute(ours.model, src, out)
    assert r.baseline == BASELINES[baseline_for(ours.cfg)]
    with torch.no_grad():
        dec_in = torch.tensor([[ours.cfg.decoder_start_id, *out[:-1]]])
        logp = ours.model(torch.tensor([src]), dec_in)[0].log_softmax(-1)[torch.arange(len(out)), out]
    np.testing.assert_allclose(r.target_logit, logp.numpy(), atol=1e-5)
    total = r.raw_src.sum(1) + r.raw_tgt.sum(1)
    gap = r.target_logit - r.baseline_value
    assert (np.abs(total - gap) <= COMPLETENESS_TOL * np.abs(gap)).all(), np.abs(total - gap) / np.abs(gap)
    assert r.refined.any() == (family == "t5"), r.position_steps
    assert (r.position_steps[~r.refined] <= MAX_IG_STEPS).all()
    if family == "t5_gated":  # Gauss-Legendre from zero: 26 % and 14 % off on the first two positions at 512 steps
        zero = attribute(ours.model, src, out[:2], baseline="zero", steps=MAX_IG_STEPS, tolerance=None)
        assert zero.completeness.max() > COMPLETENESS_TOL


def test_contrastive_integrated_gradients_completeness_on_each_family(fam, tok):
    """Why X rather than Y by Integrated Gradients: the attributions of logit X − logit Y add up to its change from
    the family's baseline within 5 %, both ends computed by plain forward passes of the model (the baseline's token
    embeddings put in by a hook). On the sharp T5, Gauss-Legendre alone misses it by many times the change even at
    512 steps (as for log p): there the trapezoid rule on refined path points takes over, and meets it."""
    from model.interpret.attribution import COMPLETENESS_TOL, MAX_IG_STEPS
    from model.interpret.contrast import contrast_attribution

    family, _, _, ours = fam
    model, cfg = ours.model, ours.cfg
    src = _src(tok, SOURCES[0])
    out = list(decode(model, src, DecodeOptions(max_len=5)).ids)
    dec_in = torch.tensor([[cfg.decoder_start_id]])
    with torch.no_grad():
        z = model(torch.tensor([src]), dec_in)[0, 0].double()
        y = int(z.topk(2).indices[1])  # the runner-up at the first position
        fill = model.embed.weight[cfg.pad_id] if family.startswith("t5") else torch.zeros(cfg.d_model)
        handle = model.embed.register_forward_hook(lambda m, a, o: fill.expand_as(o))
        try:
            zb = model(torch.tensor([src]), dec_in)[0, 0].double()
        finally:
            handle.remove()
    value, base = float(z[out[0]] - z[y]), float(zb[out[0]] - zb[y])
    a = contrast_attribution(model, src, out, 0, y, "ig")
    assert a.value == pytest.approx(value, abs=1e-4) and a.baseline_value == pytest.approx(base, abs=1e-4)
    total = a.raw_src.sum() + a.raw_tgt.sum()
    assert abs(total - (value - base)) <= COMPLETENESS_TOL * abs(value - base), abs(total - (value - base))
    assert a.refined == (family == "t5"), a.steps
    if a.refined:  # Gauss-Legendre alone, at its most steps, misses completeness: what the refinement is for
        plain = contrast_attribution(model, src, out, 0, y, "ig", steps=MAX_IG_STEPS, tolerance=None)
        assert not plain.refined and plain.completeness > 1.0, plain.completeness
