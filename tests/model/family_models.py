"""Tiny random models of each family, built by transformers from a config and saved as a model hub directory would
hold them, with the project's toy tokenizer (plus four language codes) as their tokenizer.json."""

from __future__ import annotations

from pathlib import Path

import torch

from model.core.tokenizer import Tokenizer
from model.testing import family_config, make_tokenizer

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
    sizes = {k: SIZES[k] for k in ("d_model", "layers", "heads", "ffn")}
    if family.startswith("t5"):
        gated = family == "t5_gated"
        return family_config(
            family,
            vocab_size,
            **sizes,
            d_kv=16 if gated else SIZES["d_model"] // SIZES["heads"],  # gated: heads wider than d_model / H (Flan-T5)
            relative_attention_num_buckets=8,
            relative_attention_max_distance=20,
            initializer_factor=1.0 if gated else 3.0,
        )
    return family_config(
        family, vocab_size, **sizes, max_len=SIZES["max_len"], scale_embedding=family != "bart", init_std=0.3
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


def hf_and_ours(family: str, path: Path, tokenizer: Tokenizer):
    """transformers' model of the family (eager attention), saved under ``path / "hf"``, and ours imported from it."""
    from transformers import AutoModelForSeq2SeqLM

    from model.io.checkpoint import load_model_dir
    from model.io.family import import_model

    hf_dir = save_family(family, path / "hf", tokenizer)
    hf = AutoModelForSeq2SeqLM.from_pretrained(hf_dir, attn_implementation="eager").eval()
    return hf, load_model_dir(import_model(hf_dir, path / "ours"))
