"""A tiny seeded tokenizer and model (random weights) for tests and the benchmarks' smoke modes.

Built in memory in about a second, the same on every call for the same arguments, so tests and scripts
that each build one get identical weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from model.core.config import ModelConfig
from model.core.tokenizer import Tokenizer
from model.core.transformer import Transformer
from model.io.checkpoint import save_model_dir
from model.io.family import bart_sizes, token_ids
from model.train.data import train_tokenizer

TOY_CORPUS = (
    "I am a student.",
    "Je suis étudiant.",
    "I like pizza.",
    "J'aime la pizza.",
    "The cat is sleeping on the sofa.",
    "Le chat dort sur le canapé.",
    "A man in a blue shirt is standing on a ladder.",
    "Un homme en chemise bleue est debout sur une échelle.",
    "Hello world.",
    "Bonjour le monde.",
    "We will go to the beach tomorrow.",
    "Nous irons à la plage demain.",
)
TINY_CARD = "# Tiny test model\nRandom weights, for tests only.\n"


def make_tokenizer(vocab_size: int = 360, corpus: Sequence[str] = TOY_CORPUS) -> Tokenizer:
    """A tokenizer built as the bundled one is (``model.train.data.train_tokenizer``: byte-fallback BPE, our special
    tokens first, then the 256 byte tokens), on a toy corpus."""
    return train_tokenizer(list(corpus) * 5, vocab_size)


def marian_config(vocab_size: int, size: dict, pad: int, eos: int, **extra: Any) -> Any:
    """A random Marian model's transformers config, ``size`` giving its d_model, layers, heads and ffn width (each
    of the encoder and the decoder), swish activations, scaled embeddings, decoding from <pad>, no dropout."""
    from transformers import MarianConfig

    return MarianConfig(
        vocab_size=vocab_size,
        **bart_sizes(size["d_model"], (size["layers"], size["layers"]), size["heads"], size["ffn"]),
        activation_function="swish",
        scale_embedding=True,
        **token_ids(pad, eos, None, pad),
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        **extra,
    )


def make_model(vocab_size: int, seed: int = 0, **overrides: Any) -> Transformer:
    """2 + 2 layers, d_model 32, 4 heads; ``overrides`` are ModelConfig fields."""
    torch.manual_seed(seed)
    cfg: dict[str, Any] = dict(
        vocab_size=vocab_size,
        d_model=32,
        n_heads=4,
        d_ff=64,
        n_encoder_layers=2,
        n_decoder_layers=2,
        max_len=64,
        dropout=0.0,
    )
    cfg.update(overrides)
    model = Transformer(ModelConfig(**cfg)).eval()
    with torch.no_grad():  # random LayerNorm affine parameters, as trained ones are, so norm checks are not trivial
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(0.1 * torch.randn_like(p))
    return model


def build_tiny_model_dir(path: str | Path, card: str = TINY_CARD) -> Path:
    """The tiny model and tokenizer saved as a model directory (with a model card) at ``path``."""
    tok = make_tokenizer()
    return save_model_dir(make_model(tok.vocab_size), tok, path, card=card)


def family_config(family: str, vocab_size: int, d_model: int, layers: int, heads: int, ffn: int, **extra: Any) -> Any:
    """A transformers config of a family the importer reads ("bart", "mbart", "m2m_100", "t5", "t5_gated": Flan-T5's
    gated GELU FFN, untied output), <pad> 0, <s> 1, </s> 2 as the project's tokenizers put them, no dropout, no
    generation default that would add a logits processor; ``extra``: settings to add or change (max_len sets a
    positional table's size)."""
    from transformers import BartConfig, M2M100Config, MBartConfig, T5Config

    pad, bos, eos = 0, 1, 2
    max_len = extra.pop("max_len", 256)  # T5 has no positional table
    if family.startswith("t5"):
        gated = family == "t5_gated"
        return T5Config(
            **{
                "vocab_size": vocab_size,
                "d_model": d_model,
                "d_kv": d_model // heads,
                "d_ff": ffn,
                "num_layers": layers,
                "num_decoder_layers": layers,
                "num_heads": heads,
                "feed_forward_proj": "gated-gelu" if gated else "relu",
                "tie_word_embeddings": not gated,
                "dropout_rate": 0.0,
                "pad_token_id": pad,
                "eos_token_id": eos,
                "decoder_start_token_id": pad,
                **extra,
            }
        )
    cls = {"bart": BartConfig, "mbart": MBartConfig, "m2m_100": M2M100Config}[family]
    return cls(
        **{
            "vocab_size": vocab_size,
            "d_model": d_model,
            "encoder_layers": layers,
            "decoder_layers": layers,
            "encoder_attention_heads": heads,
            "decoder_attention_heads": heads,
            "encoder_ffn_dim": ffn,
            "decoder_ffn_dim": ffn,
            "max_position_embeddings": max_len,
            "activation_function": "relu" if family == "m2m_100" else "gelu",
            "pad_token_id": pad,
            "bos_token_id": bos,
            "eos_token_id": eos,
            "decoder_start_token_id": eos,
            "forced_bos_token_id": None,
            "forced_eos_token_id": None,
            "dropout": 0.0,
            "attention_dropout": 0.0,
            "activation_dropout": 0.0,
            **extra,
        }
    )
