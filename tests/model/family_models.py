"""Tiny random models of each family, built by transformers from a config and saved as a model hub directory would
hold them, with the project's toy tokenizer (plus four language codes) as their tokenizer.json."""

from __future__ import annotations

from pathlib import Path

import torch

from model.core.tokenizer import Tokenizer
from model.testing import make_tokenizer

LANGS = ("en_XX", "fr_XX", "eng_Latn", "fra_Latn")  # mBART-50's and NLLB's codes for English and French
PAD, BOS, EOS = 0, 1, 2  # the toy tokenizer's <pad>, <s>, </s>: each config puts them there
FAMILIES = ("bart", "mbart", "m2m_100", "t5", "t5_gated")
SIZES = dict(d_model=32, layers=2, heads=4, ffn=64, max_len=64)


def family_tokenizer() -> Tokenizer:
    from tokenizers import AddedToken

    tok = make_tokenizer()
    tok.hf.add_special_tokens([AddedToken(code, normalized=False, special=True) for code in LANGS])
    return Tokenizer(tok.hf)


def hf_config(family: str, vocab_size: int):
    """A transformers config of the family at the tiny sizes, every generation default that would add a logits
    processor left out (the tests ask for each one they use)."""
    from transformers import BartConfig, M2M100Config, MBartConfig, T5Config

    d, L, H, F, P = (SIZES[k] for k in ("d_model", "layers", "heads", "ffn", "max_len"))
    if family.startswith("t5"):
        gated = family == "t5_gated"
        return T5Config(
            vocab_size=vocab_size,
            d_model=d,
            d_kv=16 if gated else d // H,  # gated: heads wider than d_model / n_heads, as Flan-T5's
            d_ff=F,
            num_layers=L,
            num_decoder_layers=L,
            num_heads=H,
            relative_attention_num_buckets=8,
            relative_attention_max_distance=20,
            feed_forward_proj="gated-gelu" if gated else "relu",
            tie_word_embeddings=not gated,  # gated: transformers 5 still ties, but unscaled (T5 v1.1)
            dropout_rate=0.0,
            pad_token_id=PAD,
            eos_token_id=EOS,
            decoder_start_token_id=PAD,
            initializer_factor=1.0 if gated else 3.0,
        )
    cls = {"bart": BartConfig, "mbart": MBartConfig, "m2m_100": M2M100Config}[family]
    return cls(
        vocab_size=vocab_size,
        d_model=d,
        encoder_layers=L,
        decoder_layers=L,
        encoder_attention_heads=H,
        decoder_attention_heads=H,
        encoder_ffn_dim=F,
        decoder_ffn_dim=F,
        max_position_embeddings=P,
        activation_function="relu" if family == "m2m_100" else "gelu",
        scale_embedding=family != "bart",
        pad_token_id=PAD,
        bos_token_id=BOS,
        eos_token_id=EOS,
        decoder_start_token_id=EOS,
        forced_bos_token_id=None,
        forced_eos_token_id=None,
        init_std=0.3,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
    )


def hf_model(family: str, vocab_size: int, seed: int = 0):
    """A seeded random model of the family, scaled so that outputs vary with the source and some end early."""
    from transformers import (
        BartForConditionalGeneration,
        M2M100ForConditionalGeneration,
        MBartForConditionalGeneration,
        T5ForConditionalGeneration,
    )

    classes = {
        "bart": BartForConditionalGeneration,
        "mbart": MBartForConditionalGeneration,
        "m2m_100": M2M100ForConditionalGeneration,
        "t5": T5ForConditionalGeneration,
        "t5_gated": T5ForConditionalGeneration,
    }
    torch.manual_seed(seed)
    model = classes[family](hf_config(family, vocab_size)).eval()
    with torch.no_grad():
        shared = model.get_input_embeddings().weight
        shared.normal_(0.0, 0.5 if family.startswith("t5") else 0.05)
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(0.1 * torch.randn_like(p))
            if "relative_attention_bias" in name:
                p.normal_(0.0, 1.0)  # a bias strong enough to change the attention
        bias = getattr(model, "final_logits_bias", None)
        if bias is not None:
            b = 0.5 * torch.randn_like(bias)
            b[0, EOS] = 0.4
            bias.copy_(b)
        else:
            shared[EOS] *= 1.5  # tied output: </s> a little likelier, so some hypotheses end
    return model


def save_family(family: str, path: Path, tokenizer: Tokenizer) -> Path:
    model = hf_model(family, tokenizer.vocab_size)
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save(path / "tokenizer.json")
    return path
