"""Shared fixtures: a tiny seeded model and tokenizer, built in memory in a second."""

from __future__ import annotations

import pytest
import torch
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, normalizers, pre_tokenizers, trainers

from model import ModelConfig, Transformer
from model.checkpoint import save_model_dir
from model.tokenizer import SPECIALS, Tokenizer

TOY_CORPUS = [
    "I am a student.", "Je suis étudiant.", "I like pizza.", "J'aime la pizza.",
    "The cat is sleeping on the sofa.", "Le chat dort sur le canapé.",
    "A man in a blue shirt is standing on a ladder.", "Un homme en chemise bleue est debout sur une échelle.",
    "Hello world.", "Bonjour le monde.", "We will go to the beach tomorrow.", "Nous irons à la plage demain.",
]  # fmt: skip


def make_tokenizer(vocab_size: int = 120) -> Tokenizer:
    hf = HFTokenizer(models.BPE(unk_token="<unk>"))
    hf.normalizer = normalizers.NFC()
    hf.pre_tokenizer = pre_tokenizers.Metaspace()
    hf.decoder = decoders.Metaspace()
    hf.train_from_iterator(TOY_CORPUS * 5, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIALS)))
    return Tokenizer(hf)


def make_model(vocab_size: int, seed: int = 0, **overrides) -> Transformer:
    torch.manual_seed(seed)
    cfg = dict(vocab_size=vocab_size, d_model=32, n_heads=4, d_ff=64, n_encoder_layers=2, n_decoder_layers=2,
               max_len=64, dropout=0.0)  # fmt: skip
    cfg.update(overrides)
    model = Transformer(ModelConfig(**cfg)).eval()
    with torch.no_grad():  # random LayerNorm affine parameters so norm checks are not trivial
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(0.1 * torch.randn_like(p))
    return model


@pytest.fixture(scope="session")
def tiny_tokenizer() -> Tokenizer:
    return make_tokenizer()


@pytest.fixture(scope="session")
def tiny_model(tiny_tokenizer) -> Transformer:
    return make_model(tiny_tokenizer.vocab_size)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, tiny_model, tiny_tokenizer):
    path = tmp_path_factory.mktemp("models") / "tiny"
    save_model_dir(tiny_model, tiny_tokenizer, path, card="# Tiny test model\nRandom weights, for tests only.\n")
    return path
