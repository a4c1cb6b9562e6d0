"""Training pipeline on a generated toy parallel corpus (same file formats as the real corpora)."""

from __future__ import annotations

import gzip
import json
import random

import pytest
import torch

from model.io.checkpoint import ModelDirError, load_model_dir
from model.train.data import (
    group_by_source,
    load_corpora,
    make_batches,
    reference_streams,
    split_digest,
    split_of,
    split_tatoeba,
    train_tokenizer,
)
from model.train.train import cooldown_factor, lr_at
from model.train.train import main as train_main

EN_ADJ = {"red": "rouge", "big": "grand", "small": "petit", "old": "vieux", "blue": "bleu"}
EN_NOUN = {"dog": "chien", "cat": "chat", "man": "homme", "boy": "garçon", "horse": "cheval"}
EN_VERB = {"runs": "court", "sleeps": "dort", "eats": "mange", "jumps": "saute", "sings": "chante"}


def toy_pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        a, no, v = rng.choice(list(EN_ADJ)), rng.choice(list(EN_NOUN)), rng.choice(list(EN_VERB))
        pairs.append((f"The {a} {no} {v}.", f"Le {EN_NOUN[no]} {EN_ADJ[a]} {EN_VERB[v]}."))
    return pairs


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    (root / "tatoeba-fra-eng").mkdir()
    lines = [f"{en}\t{fr}\tCC-BY 2.0 (France) Attribution: tatoeba.org #1 (x) & #2 (y)" for en, fr in toy_pairs(400)]
    lines += ["I'm here.\tJe suis là.\tattr", "I'm here.\tJ'y suis.\tattr"]  # two translations
    (root / "tatoeba-fra-eng" / "fra.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    m = root / "multi30k"
    m.mkdir()
    for split, n, seed in (("train", 300, 1), ("val", 40, 2), ("test_2016_flickr", 20, 3), ("test_2017_flickr", 20, 4)):
        pairs = toy_pairs(n, seed)
        for lang, col in (("en", 0), ("fr", 1)):
            with gzip.open(m / f"{split}.{lang}.gz", "wt", encoding="utf-8") as f:
                f.write("\n".join(p[col] for p in pairs) + "\n")
    return root


TINY = [
    "--vocab-size",
    "400",
    "--d-model",
    "32",
    "--heads",
    "2",
    "--d-ff",
    "64",
    "--layers",
    "1",
    "--max-tokens",
    "300",
    "--lr",
    "3e-3",
    "--warmup",
    "5",
    "--eval-sentences",
    "12",
    "--log-every",
    "5",
    "--average",
    "2",
    "--threads",
    "1",
]


def run_train(data_dir, tmp, *extra):
    return train_main(
        ["--data", str(data_dir), "--out", str(tmp / "model"), "--state-dir", str(tmp / "state"), *TINY, *extra]
    )


CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no GPU")


def bleu_args(tmp_path, data_dir, beams: str, limit: int, split: str) -> list[str]:
    """benchmarks/bleu.py's arguments for the model trained into ``tmp_path``: ``beams``, the first ``limit``
    sentences of each set of ``split``, one thread."""
    named = {"--model": tmp_path / "model", "--data": data_dir, "--beams": beams, "--limit": limit, "--split": split}
    return [str(x) for pair in {**named, "--threads": 1}.items() for x in pair]


@pytest.mark.parametrize(
    "precision",
    [
        (),
        ("--bf16",),
        pytest.param(("--device", "cuda"), marks=CUDA),
        pytest.param(("--device", "cuda", "--bf16"), marks=CUDA),
    ],
    ids=["float32", "bf16-autocast", "cuda-float32", "cuda-bf16-autocast"],
)
def test_training_loss_falls_and_model_dir_loads(data_dir, tmp_path, precision):
    summary = run_train(data_dir, tmp_path, "--max-steps", "40", "--eval-steps", "8", *precision)
    losses = [h["val_loss"] for h in summary["history"]]
    assert summary["steps"] == 40
    assert losses[-1] < losses[0] - 0.5, losses
    loaded = load_model_dir(tmp_path / "model")
    assert loaded.cfg.d_model == 32
    assert {p.dtype for p in loaded.model.parameters()} == {torch.float32}  # bf16 only inside autocast
    assert loaded.tokenizer.vocab_size <= loaded.cfg.vocab_size
    assert not loaded.model.training
    # no pickle anywhere in the resumable state
    names = sorted(p.name for p in (tmp_path / "state" / "train_state").iterdir())
    assert names == ["model.safetensors", "optimizer.safetensors", "state.json"]


def test_resume_continues_from_saved_step(data_dir, tmp_path, capsys):
    run_train(data_dir, tmp_path, "--max-steps", "6", "--eval-steps", "6")
    state = json.loads((tmp_path / "state" / "train_state" / "state.json").read_text())
    assert state["step"] == 6
    capsys.readouterr()
    summary = run_train(data_dir, tmp_path, "--max-steps", "10", "--eval-steps", "100", "--resume")
    assert "resumed from" in capsys.readouterr().out
    assert summary["steps"] == 10
    assert [h["step"] for h in summary["history"]] == [6, 10]
    assert json.loads((tmp_path / "state" / "train_state" / "state.json").read_text())["step"] == 10


@CUDA
def test_a_gpu_run_resumes_on_the_gpu(data_dir, tmp_path):
    run_train(data_dir, tmp_path, "--max-steps", "6", "--eval-steps", "6", "--device", "cuda")
    summary = run_train(data_dir, tmp_path, "--max-steps", "10", "--eval-steps", "100", "--resume", "--device", "cuda")
    assert summary["steps"] == 10
    assert load_model_dir(tmp_path / "model", "cuda").model.device.type == "cuda"


def test_multi30k_repeat_adds_its_pairs_again(data_dir, tmp_path):
    once = run_train(data_dir, tmp_path / "a", "--max-steps", "1", "--eval-steps", "1", "--average", "1")
    thrice = run_train(
        data_dir, tmp_path / "b", "--max-steps", "1", "--eval-steps", "1", "--average", "1", "--multi30k-repeat", "3"
    )
    n_m30k = once["counts"]["multi30k_train_pairs"]  # toy pairs are short: none dropped for length
    assert n_m30k > 200
    assert thrice["training_pairs"] == once["training_pairs"] + 2 * n_m30k


def test_cooldown_takes_the_learning_rate_linearly_to_zero_at_the_end():
    assert cooldown_factor(10.0, 100.0, 0.0) == 1.0  # off
    assert cooldown_factor(50.0, 100.0, 20.0) == 1.0  # before the cooldown
    assert cooldown_factor(90.0, 100.0, 20.0) == pytest.approx(0.5)
    assert cooldown_factor(100.0, 100.0, 20.0) == 0.0
    assert cooldown_factor(120.0, 100.0, 20.0) == 0.0  # past the end: never negative


def test_learning_rate_warms_up_then_decays_or_holds():
    assert lr_at(50, 1e-3, 100) == pytest.approx(5e-4) == lr_at(50, 1e-3, 100, "none")  # the same warm-up
    assert lr_at(100, 1e-3, 100) == pytest.approx(1e-3)
    assert lr_at(400, 1e-3, 100) == pytest.approx(5e-4)  # inverse square root
    assert lr_at(400, 1e-3, 100, "none") == lr_at(10_000, 1e-3, 100, "none") == pytest.approx(1e-3)  # held


def test_bleu_benchmark_scores_test_and_validation_sets(data_dir, tmp_path):
    import benchmarks.bleu as bleu

    run_train(data_dir, tmp_path, "--max-steps", "30", "--eval-steps", "30", "--average", "1")
    for split, names in (
        ("test", ["multi30k/test_2016_flickr", "multi30k/test_2017_flickr", "tatoeba/test"]),
        ("val", ["multi30k/val", "tatoeba/val"]),
    ):
        res = bleu.main([*bleu_args(tmp_path, data_dir, "1,2", 8, split), "--length-penalty", "0.5"])
        assert [(r["set"], r["decode"]) for r in res["rows"]] == [(n, d) for d in ("greedy", "beam 2") for n in names]
        assert all(0 < r["n"] <= 8 and 0 <= r["bleu"] <= 100 and 0 <= r["chrf"] <= 100 for r in res["rows"])
        assert all(r["n"] == 8 for r in res["rows"] if r["set"].startswith("multi30k"))
        assert res["signatures"]["BLEU"].startswith("nrefs:") and res["length_penalty"] == 0.5
        assert len(res["sanity"][2]) == len(bleu.SANITY)


def test_corrupted_weights_are_refused(data_dir, tmp_path):
    run_train(data_dir, tmp_path, "--max-steps", "2", "--eval-steps", "2", "--average", "1")
    weights = tmp_path / "model" / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelDirError, match="model.safetensors"):
        load_model_dir(tmp_path / "model")


def test_split_is_deterministic_and_leak_free():
    pairs = [(f"Sentence number {i}.", f"Phrase numéro {i} ({k}).") for i in range(3000) for k in range(1 + i % 3)]
    a, b = split_tatoeba(pairs), split_tatoeba(list(reversed(pairs)))
    assert {k: sorted(v) for k, v in a.items()} == {k: sorted(v) for k, v in b.items()}
    assert split_digest(a["test"]) == split_digest(b["test"])
    sides = {k: {en for en, _ in v} for k, v in a.items()}
    assert not sides["train"] & sides["test"] and not sides["train"] & sides["val"] and not sides["val"] & sides["test"]
    assert sum(len(v) for v in a.values()) == len(pairs)
    assert 40 <= len(sides["test"]) <= 120 and 15 <= len(sides["val"]) <= 70  # 2.5 % and 1.2 % of 3000
    assert all(split_of(en) == "test" for en in sides["test"])
    assert split_tatoeba(pairs, seed=7) != a  # the seed matters


def test_corpora_loader_and_references(data_dir):
    c = load_corpora(data_dir)
    train_en = {en for en, _ in c.train}
    assert not train_en & {en for en, _ in c.test_tatoeba}
    assert c.counts["multi30k_val_pairs"] == 40
    groups = group_by_source([("a", "x"), ("b", "y"), ("a", "z")])
    assert groups == [("a", ["x", "z"]), ("b", ["y"])]
    assert reference_streams(groups) == [["x", "y"], ["z", "y"]]


def test_tokenizer_round_trips_french():
    texts = [fr for _, fr in toy_pairs(200)] + ["J'aime l'IA, n'est-ce pas ? Oui !", "Élève à l'école « déjà »."] * 5
    tok = train_tokenizer(texts, vocab_size=400)
    assert [tok.id_to_token(i) for i in range(4)] == ["<pad>", "<s>", "</s>", "<unk>"]
    for s in ("J'aime l'IA, n'est-ce pas ? Oui !", "Le chien rouge court."):
        assert tok.decode(tok.encode(s)) == s


def test_batches_respect_token_budget():
    rng = random.Random(0)
    src = [rng.randint(2, 40) for _ in range(500)]
    tgt = [rng.randint(2, 40) for _ in range(500)]
    batches = make_batches(src, tgt, 200, random.Random(1))
    assert sorted(i for b in batches for i in b) == list(range(500))
    assert all(max(max(src[i], tgt[i]) for i in b) * len(b) <= 200 for b in batches)


def test_validation_decodes_as_the_app_and_the_bleu_benchmark_do(data_dir, tmp_path):
    """Checkpoints are chosen by the decoding that ships: the validator's translations are the app's greedy
    decodes (one sentence at a time, default options), and its Multi30k score is the BLEU benchmark's."""
    import benchmarks.bleu as bleu
    from model.decode.decoding import DecodeOptions, decode
    from model.decode.lean import LeanDecoder
    from model.train.train import Validator

    run_train(data_dir, tmp_path, "--max-steps", "12", "--eval-steps", "12", "--average", "1")
    loaded = load_model_dir(tmp_path / "model")
    model, tok = loaded.model, loaded.tokenizer
    validator = Validator(load_corpora(data_dir), 10, seed=1)
    hyp_t, hyp_m = validator.translations(model, tok)
    lean = LeanDecoder(model)
    for en, hyp in zip([en for en, _ in validator.tat] + [en for en, _ in validator.m30k], hyp_t + hyp_m):
        src = tok.encode(en)[: model.cfg.max_len - 1] + [model.cfg.eos_id]
        assert hyp == tok.decode(decode(model, src, DecodeOptions(), lean).ids), en
    res = bleu.main(bleu_args(tmp_path, data_dir, "1", 10, "val"))
    m30k = next(r for r in res["rows"] if r["set"] == "multi30k/val")
    assert m30k["bleu"] == validator.bleu(model, tok)["bleu_multi30k"]


def _plain_bpe_model_dir(tmp_path):
    """A model directory whose vocabulary has no byte fallback (as models trained before it had)."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, models, pre_tokenizers, trainers

    from model.core.tokenizer import SPECIALS, Tokenizer
    from model.io.checkpoint import save_model_dir
    from model.testing import TOY_CORPUS, make_model

    hf = HFTokenizer(models.BPE(unk_token="<unk>"))
    hf.pre_tokenizer = pre_tokenizers.Metaspace()
    hf.decoder = decoders.Metaspace()
    texts = [t for p in toy_pairs(100) for t in p] + list(TOY_CORPUS)
    hf.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=150, special_tokens=list(SPECIALS)))
    tok = Tokenizer(hf)
    return save_model_dir(make_model(tok.vocab_size, seed=4), tok, tmp_path / "plain"), tok


def test_init_adds_byte_fallback_and_keeps_the_old_model(data_dir, tmp_path):
    from model.testing import make_model
    from model.train.data import add_byte_fallback
    from model.train.train import grow_from

    base_dir, plain = _plain_bpe_model_dir(tmp_path)
    assert not plain.byte_fallback and 3 in plain.encode("I 😀 it")  # <unk> before
    grown_tok = add_byte_fallback(plain)
    assert grown_tok.vocab_size == plain.vocab_size + 256 and grown_tok.byte_fallback
    texts = [t for p in toy_pairs(50) for t in p]
    assert grown_tok.encode_batch(texts) == plain.encode_batch(texts)  # every old encoding unchanged
    assert grown_tok.decode(grown_tok.encode("I 😀 it")) == "I 😀 it"

    base = load_model_dir(base_dir).model
    grown = make_model(grown_tok.vocab_size, seed=9)
    grow_from(grown, base)
    V = plain.vocab_size
    assert torch.equal(grown.embed.weight[:V], base.embed.weight)
    src, tgt = torch.tensor([plain.encode("The red dog runs.") + [2]]), torch.tensor([[1, 5, 6, 7]])
    with torch.no_grad():
        old, new = base(src, tgt), grown(src, tgt)
    assert torch.allclose(new[..., :V], old, atol=1e-5)  # the same function on the old vocabulary

    summary = run_train(
        data_dir,
        tmp_path / "run",
        "--init",
        str(base_dir),
        "--max-steps",
        "3",
        "--eval-steps",
        "3",
        "--average",
        "1",
        "--substitute",
        "0.5",
    )
    assert summary["steps"] == 3
    out = load_model_dir(tmp_path / "run" / "model")
    assert out.cfg.vocab_size == V + 256 and out.tokenizer.byte_fallback and out.cfg.d_model == base.cfg.d_model
    state = json.loads((tmp_path / "run" / "state" / "train_state" / "state.json").read_text())
    assert state["args"]["init"] == str(base_dir)
