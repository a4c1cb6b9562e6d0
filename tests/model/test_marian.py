"""Parity with transformers' MarianMTModel: import, export, tokenizer conversion, logits, attention, decoding.

Everything is built offline: a tiny sentencepiece model trained on toy sentences, a vocab.json in
Marian's id order, and a seeded random MarianMTModel saved with save_pretrained.
"""

from __future__ import annotations

import io
import json
import random

import numpy as np
import pytest
import sentencepiece as spm
import torch

from model.core.transformer import sinusoidal_table
from model.decode.decoding import DecodeOptions, beam_batch, decode
from model.decode.lean import LeanDecoder
from model.decode.trace import teacher_forced_trace
from model.io.checkpoint import ModelDirError, load_model_dir, save_model_dir
from model.io.family import token_ids
from model.io.marian import (
    MarianError,
    export_marian,
    half_order,
    import_marian,
    marian_to_config,
    permute_residual,
)
from model.testing import TOY_CORPUS, make_model, make_tokenizer, marian_config

pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")

EXTRA = [
    "The dog is running in the park.",
    "Le chien court dans le parc.",
    "She reads a book every evening.",
    "Elle lit un livre chaque soir.",
    "They are eating bread and cheese.",
    "Ils mangent du pain et du fromage.",
]
SOURCES = ["I like the cat.", "Hello world.", "The man is on the beach tomorrow.", "Nous aimons le chat bleu."]
TARGET = "Le chat dort sur le canapé."
MISSING_PIECES = ["▁zzqx", "▁qqv", "xqz"]  # only in vocab.json, like target-only pieces in real Marian
N_NEW = 12  # max_new_tokens for the generation checks


def train_spm() -> bytes:
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter([*TOY_CORPUS, *EXTRA] * 3),
        model_writer=buf,
        vocab_size=150,
        model_type="unigram",
        character_coverage=1.0,
        hard_vocab_limit=False,
        minloglevel=2,
        num_threads=1,
    )
    return buf.getvalue()


def marian_vocab(sp: spm.SentencePieceProcessor) -> dict[str, int]:
    """Marian's layout: </s>=0, <unk>=1, the pieces in an order unlike the spm model's, <pad> last; no <s>."""
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size()) if not (sp.is_control(i) or sp.is_unknown(i))]
    random.Random(0).shuffle(pieces)
    order = ["</s>", "<unk>", *pieces[: len(pieces) // 2], *MISSING_PIECES, *pieces[len(pieces) // 2 :], "<pad>"]
    return {p: i for i, p in enumerate(order)}


def neutral_generation(pad: int, eos: int, start: int | None = None, **kw):
    """No logits processor beyond bad_words_ids=[[pad]]: every default that could add one is made neutral. Decoding
    starts from ``start`` (default: <pad>, as Marian's)."""
    from transformers import GenerationConfig

    return GenerationConfig(
        **token_ids(pad, eos, None, pad if start is None else start),
        forced_bos_token_id=kw.pop("forced_bos_token_id", None),
        min_length=0,
        min_new_tokens=None,
        no_repeat_ngram_size=0,
        encoder_no_repeat_ngram_size=0,
        repetition_penalty=1.0,
        encoder_repetition_penalty=1.0,
        suppress_tokens=None,
        begin_suppress_tokens=None,
        sequence_bias=None,
        exponential_decay_length_penalty=None,
        renormalize_logits=False,
        temperature=1.0,
        top_k=None,
        top_p=None,
        do_sample=False,
        bad_words_ids=[[pad]],
        **kw,
    )


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models gain nothing from threads, and on a busy 2-core machine spinning threads cost seconds."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def marian_dir(tmp_path_factory):
    from transformers import MarianMTModel, MarianTokenizer

    path = tmp_path_factory.mktemp("marian") / "opus-mt-toy"
    src = tmp_path_factory.mktemp("spm")
    proto = train_spm()
    (src / "source.spm").write_bytes(proto)
    (src / "target.spm").write_bytes(proto)
    vocab = marian_vocab(spm.SentencePieceProcessor(model_proto=proto))
    (src / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False))
    tok = MarianTokenizer(str(src / "source.spm"), str(src / "target.spm"), str(src / "vocab.json"))
    pad, eos = vocab["<pad>"], vocab["</s>"]
    size = dict(d_model=32, layers=2, heads=4, ffn=64)
    cfg = marian_config(len(vocab), size, pad, eos, max_position_embeddings=64, init_std=0.3)
    torch.manual_seed(0)
    model = MarianMTModel(cfg).eval()
    with torch.no_grad():  # scaled so that outputs vary with the source instead of repeating one token
        model.model.shared.weight.normal_(0.0, 0.05)
        for name, p in model.named_parameters():
            if "layer_norm" in name:
                p.add_(0.1 * torch.randn_like(p))
        bias = 0.5 * torch.randn_like(model.final_logits_bias)
        bias[0, eos] = 1.7  # some hypotheses end early, some run to max_new_tokens
        model.final_logits_bias.copy_(bias)
    model.generation_config = neutral_generation(pad, eos)
    model.save_pretrained(path, safe_serialization=True)
    tok.save_pretrained(path)
    (path / "README.md").write_text("---\nlicense: cc-by-4.0\n---\n# opus-mt-toy\nA random test model.\n")
    return path


@pytest.fixture(scope="module")
def hf(marian_dir):
    from transformers import MarianMTModel, MarianTokenizer

    model = MarianMTModel.from_pretrained(marian_dir, attn_implementation="eager").eval()
    return model, MarianTokenizer.from_pretrained(marian_dir)


@pytest.fixture(scope="module")
def ours(marian_dir, tmp_path_factory):
    out = import_marian(marian_dir, tmp_path_factory.mktemp("imported") / "toy")
    return load_model_dir(out)


def src_ids(hf_tok, text: str) -> list[int]:
    return hf_tok(text)["input_ids"]  # eos appended, as our decode expects


def test_files_and_config(marian_dir, ours):
    assert sorted(p.name for p in ours.path.iterdir()) == [
        "MODEL_CARD.md",
        "config.json",
        "model.safetensors",
        "tokenizer.json",
    ]
    cfg, vocab = ours.cfg, json.loads((marian_dir / "vocab.json").read_text())
    assert (cfg.pe_layout, cfg.activation, cfg.final_logits_bias, cfg.dropout) == ("half", "swish", True, 0.0)
    assert (cfg.pad_id, cfg.eos_id, cfg.unk_id, cfg.decoder_start_id) == (
        vocab["<pad>"],
        vocab["</s>"],
        vocab["<unk>"],
        vocab["<pad>"],
    )
    assert (cfg.d_model, cfg.n_heads, cfg.d_ff, cfg.max_len, cfg.vocab_size) == (32, 4, 64, 64, len(vocab))
    assert "imported from Marian" in ours.card and "cc-by-4.0" in ours.card and str(marian_dir) in ours.card


def test_tokenizer_matches_marian_tokenizer(hf, ours):
    _, hf_tok = hf
    texts = [
        *SOURCES,
        TARGET,
        "  The   cat is  sleeping.  ",
        "Bonjour le monde!",
        "ﬁne café",
        "Un homme lit.\tLe chien",
        "zebra? #42",
        "",
    ]
    for text in texts:
        assert ours.tokenizer.encode(text) == hf_tok(text)["input_ids"][:-1], text
    for text in SOURCES:
        ids = ours.tokenizer.encode(text)
        assert ours.tokenizer.decode(ids) == hf_tok.decode(ids, skip_special_tokens=True)


def test_teacher_forced_logits_and_attention(hf, ours):
    model, hf_tok = hf
    pad = ours.cfg.pad_id
    for source in SOURCES[:3]:
        src = src_ids(hf_tok, source)
        tgt = ours.tokenizer.encode(TARGET)
        with torch.no_grad():
            out = model(
                input_ids=torch.tensor([src]), decoder_input_ids=torch.tensor([[pad, *tgt]]), output_attentions=True
            )
            logits = ours.model(torch.tensor([src]), torch.tensor([[pad, *tgt]]))
        torch.testing.assert_close(logits, out.logits, atol=1e-4, rtol=0)
        tr = teacher_forced_trace(ours.model, ours.tokenizer, src[:-1], tgt)
        assert tr.arrays["src_ids"].tolist() == src and tr.arrays["dec_input_ids"].tolist() == [pad, *tgt]
        np.testing.assert_allclose(tr.arrays["probs"], out.logits[0].softmax(-1).numpy(), atol=1e-5)
        for layer in range(ours.cfg.n_decoder_layers):
            for key, theirs in (
                ("dec.{}.self", out.decoder_attentions),
                ("dec.{}.cross", out.cross_attentions),
                ("enc.{}.self", out.encoder_attentions),
            ):
                np.testing.assert_allclose(tr.arrays[key.format(layer) + ".weights"], theirs[layer][0], atol=1e-4)


def test_greedy_matches_generate(hf, ours):
    model, hf_tok = hf
    cfg = ours.cfg
    lengths = set()
    for source in SOURCES:
        src = src_ids(hf_tok, source)
        gen = model.generate(
            torch.tensor([src]), generation_config=neutral_generation(cfg.pad_id, cfg.eos_id, max_new_tokens=N_NEW)
        )
        mine = decode(ours.model, src, DecodeOptions(strategy="greedy", max_len=N_NEW))
        assert list(mine.ids) == gen[0, 1:].tolist(), source
        recorded = decode(ours.model, src, DecodeOptions(strategy="greedy", max_len=N_NEW, record=True))
        assert recorded.ids == mine.ids and "dec.0.cross.weights" in recorded.steps[0].arrays
        lengths.add((len(mine.ids), mine.ids[-1] == cfg.eos_id))
    assert len(lengths) > 1  # the sources do not all decode alike


@pytest.mark.parametrize("length_penalty", [1.0, 0.6, 2.0])
def test_beam_matches_generate(hf, ours, length_penalty):
    model, hf_tok = hf
    cfg, k = ours.cfg, 4
    assert torch.backends.mkldnn.is_available()  # the pinned CPU wheel has oneDNN: several-row steps use it
    leans = (LeanDecoder(ours.model, rows=1), LeanDecoder(ours.model, rows=k, pack_min=0))  # numpy / oneDNN products
    assert leans[0].out.packed is None and leans[1].out.packed is not None
    endings, srcs, wanted = set(), [], []
    for source in SOURCES:
        src = src_ids(hf_tok, source)
        gen = model.generate(
            torch.tensor([src]),
            generation_config=neutral_generation(
                cfg.pad_id,
                cfg.eos_id,
                num_beams=k,
                num_return_sequences=k,
                length_penalty=length_penalty,
                early_stopping=False,
                output_scores=True,
                return_dict_in_generate=True,
                max_new_tokens=N_NEW,
            ),
        )
        theirs = [[t for t in seq[1:].tolist() if t != cfg.pad_id] for seq in gen.sequences]
        opts = DecodeOptions(strategy="beam", beam=k, n_best=k, length_penalty=length_penalty, max_len=N_NEW)
        for lean in leans:
            mine = decode(ours.model, src, opts, lean)
            assert [list(h.ids) for h in mine.n_best] == theirs, source
            np.testing.assert_allclose([h.score for h in mine.n_best], gen.sequences_scores.numpy(), atol=1e-4)
            endings |= {h.ids[-1] == cfg.eos_id for h in mine.n_best}
        srcs.append(src)
        wanted.append((theirs, gen.sequences_scores.numpy()))
    assert endings == {True, False}  # hypotheses that ended with </s> and ones cut at max_new_tokens
    # every source at once, as the corpus decodes a beam run
    for n_best, (theirs, scores) in zip(beam_batch(ours.model, srcs, opts), wanted):
        assert [list(h.ids) for h in n_best] == theirs
        np.testing.assert_allclose([h.score for h in n_best], scores, atol=1e-4)


def _assert_same_logits(a, b, vocab_size, atol, seed=0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, vocab_size, (2, 9), generator=g)
    tgt = torch.randint(4, vocab_size, (2, 7), generator=g)
    with torch.no_grad():
        torch.testing.assert_close(a(src, tgt), b(src, tgt), atol=atol, rtol=0)


def test_half_order_maps_interleaved_table_to_half():
    for d in (8, 32, 10):
        inter, half = sinusoidal_table(20, d, "interleaved"), sinusoidal_table(20, d, "half")
        torch.testing.assert_close(inter[:, half_order(d)], half, atol=0, rtol=0)


@pytest.mark.parametrize(
    "overrides",
    [
        {},  # the paper's layout: interleaved PE, tied output, no final bias (our bundled model)
        {"pe_layout": "half", "tie_output": False, "final_logits_bias": True, "activation": "gelu"},
    ],
)
def test_export_import_round_trip(tmp_path, overrides):
    tokenizer = make_tokenizer()
    model = make_model(tokenizer.vocab_size, seed=3, **overrides)
    with torch.no_grad():
        if model.final_logits_bias is not None:
            model.final_logits_bias.normal_()
    src_dir = save_model_dir(model, tokenizer, tmp_path / "ours", card="# Tiny\n")
    hf_dir = export_marian(src_dir, tmp_path / "hf")
    assert (hf_dir / "model.safetensors").is_file() and not list(hf_dir.glob("*.bin"))

    # the exported directory is an ordinary MarianMTModel that computes the same function
    from transformers import AutoTokenizer, MarianMTModel

    hf_model = MarianMTModel.from_pretrained(hf_dir).eval()
    hf_logits = lambda s, t: hf_model(input_ids=s, decoder_input_ids=t).logits  # noqa: E731
    _assert_same_logits(model, hf_logits, model.cfg.vocab_size, 1e-4)
    hf_tok = AutoTokenizer.from_pretrained(hf_dir)
    assert hf_tok("I like pizza.")["input_ids"] == [*tokenizer.encode("I like pizza."), model.cfg.eos_id]
    src = [*tokenizer.encode("The cat is sleeping."), model.cfg.eos_id]
    gen = hf_model.generate(torch.tensor([src]), max_new_tokens=10, num_beams=1, do_sample=False)
    assert gen[0, 1:].tolist() == list(decode(model, src, DecodeOptions(max_len=10)).ids)

    # and imports back to the same model
    back = load_model_dir(import_marian(hf_dir, tmp_path / "back"))
    assert back.cfg.pe_layout == "half" and back.cfg.tie_output == model.cfg.tie_output
    _assert_same_logits(model, back.model, model.cfg.vocab_size, 1e-5)
    assert back.tokenizer.encode("Le chat dort.") == tokenizer.encode("Le chat dort.")


def test_permute_residual_is_exact():
    model = make_model(60, seed=1)
    cfg = model.cfg
    half = make_model(60, seed=1, pe_layout="half")
    half.load_state_dict(permute_residual(model.state_dict(), cfg, half_order(cfg.d_model)))
    _assert_same_logits(model, half, 60, 1e-5)


def test_pickle_only_directory_is_refused(tmp_path, marian_dir):
    bad = tmp_path / "pickled"
    bad.mkdir()
    (bad / "config.json").write_text((marian_dir / "config.json").read_text())
    (bad / "pytorch_model.bin").write_bytes(b"\x80\x04not really a pickle")
    with pytest.raises(MarianError, match=r"pickled weights \(pytorch_model\.bin\).*safetensors"):
        import_marian(bad, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert issubclass(MarianError, ModelDirError)  # the CLI's model-directory error handling applies


def test_unsupported_configs_are_refused(tmp_path, marian_dir):
    base = json.loads((marian_dir / "config.json").read_text())
    from model.io.marian import MARIAN_DEFAULTS

    full = {**MARIAN_DEFAULTS, **base}
    for change, message in [
        ({"share_encoder_decoder_embeddings": False}, "share_encoder_decoder_embeddings"),
        ({"decoder_attention_heads": 2}, "decoder_attention_heads"),
        ({"activation_function": "quick_gelu"}, "activation_function"),
    ]:
        with pytest.raises(MarianError, match=message):
            marian_to_config({**full, **change}, unk_id=1)
    other = tmp_path / "bert"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(MarianError, match="not a Marian model"):
        import_marian(other, tmp_path / "out")


def test_stored_positional_tables_are_checked(tmp_path, marian_dir, ours):
    """Older checkpoints carry embed_positions tables: the sinusoidal ones import, anything else is refused."""
    from safetensors.torch import load_file, save_file
    from transformers import MarianMTModel

    state = load_file(str(marian_dir / "model.safetensors"))
    table = MarianMTModel.from_pretrained(marian_dir).model.encoder.embed_positions.weight.detach().clone()
    for name, stored, ok in [("good", table, True), ("bad", table.flip(0).contiguous(), False)]:
        d = tmp_path / name
        d.mkdir()
        for f in ("config.json", "source.spm", "target.spm", "vocab.json"):
            (d / f).write_bytes((marian_dir / f).read_bytes())
        extra = {f"model.{side}.embed_positions.weight": stored.clone() for side in ("encoder", "decoder")}
        save_file({**state, **extra}, str(d / "model.safetensors"))
        if ok:
            back = load_model_dir(import_marian(d, tmp_path / f"{name}-out"))
            _assert_same_logits(ours.model, back.model, ours.cfg.vocab_size, 0.0)
        else:
            with pytest.raises(MarianError, match="embed_positions"):
                import_marian(d, tmp_path / f"{name}-out")


def test_cli_hooks(tmp_path, marian_dir, capsys):
    from transformers import MarianMTModel

    from model.cli import main

    assert main(["import-marian", str(marian_dir), str(tmp_path / "imp")]) == 0
    assert main(["export-marian", str(tmp_path / "imp"), str(tmp_path / "exp")]) == 0
    assert (tmp_path / "exp" / "config.json").is_file() and (tmp_path / "exp" / "tokenizer.json").is_file()
    original, again = (MarianMTModel.from_pretrained(d).eval() for d in (marian_dir, tmp_path / "exp"))
    logits = [lambda s, t, m=m: m(input_ids=s, decoder_input_ids=t).logits for m in (original, again)]
    _assert_same_logits(*logits, original.config.vocab_size, 1e-5)  # Marian -> ours -> Marian
    bad = tmp_path / "pickled"
    bad.mkdir()
    (bad / "config.json").write_text((marian_dir / "config.json").read_text())
    (bad / "pytorch_model.bin").write_bytes(b"\x80\x04")
    capsys.readouterr()
    assert main(["import-marian", str(bad), str(tmp_path / "x")]) == 2
    assert "pickled weights" in capsys.readouterr().err
