"""Import a transformers ``MarianMTModel`` directory as a Decoder Lens model directory, and export back.

Marian (Helsinki-NLP OPUS-MT) is the same post-norm encoder-decoder as ours: shared embeddings,
sinusoidal positions with sin | cos halves (``pe_layout="half"``), a ``final_logits_bias`` and the
decoder started from ``<pad>``. Marian scales ``q_proj``'s output by 1/sqrt(d_k) before QKᵀ, which is
numerically our QKᵀ/sqrt(d_k), so the weights copy over one to one.

Export of a model trained with the paper's interleaved positions permutes the d_model axis of the
whole residual stream (embedding columns, the residual side of every Linear, LayerNorm affine
parameters) so the interleaved table becomes Marian's half table: LayerNorm and dot products are
invariant under a fixed permutation, so the exported model computes exactly the same function.

Weights are read through safetensors only; pickled ``pytorch_model.bin`` checkpoints are refused.
transformers and sentencepiece (dev requirements) are imported lazily, only where needed.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from model.core.config import ModelConfig
from model.core.jsonio import write as write_json
from model.core.tokenizer import Tokenizer

if TYPE_CHECKING:
    from tokenizers import Tokenizer as HFTokenizer
from model.io.checkpoint import load_model_dir
from model.io.family import (
    BART_DEFAULTS,
    FamilyError,
    bart_like_config,
    bart_like_map,
    bart_sizes,
    import_model,
    token_ids,
)

# MarianConfig's defaults (transformers 5.x) where they differ from BART's: an old config.json may leave them out
MARIAN_DEFAULTS = {
    **BART_DEFAULTS,
    "vocab_size": 58101,
    "decoder_vocab_size": None,
    "decoder_start_token_id": 58100,
    "pad_token_id": 58100,
    "eos_token_id": 0,
    "bos_token_id": None,
    "share_encoder_decoder_embeddings": True,
}
MISSING_PIECE_PENALTY = 1000.0  # vocab.json pieces the spm model lacks score this far below its rarest piece


MarianError = FamilyError  # a Marian directory that cannot be imported, or a model that cannot be exported


def weight_map(cfg: ModelConfig) -> list[tuple[str, str]]:
    """(our parameter name, MarianMTModel parameter name) for every tensor except the embeddings."""
    return bart_like_map(cfg, "marian")


def half_order(d_model: int) -> torch.Tensor:
    """Interleaved column indices in half-layout order: [0, 2, 4, ..., 1, 3, 5, ...].

    ``table_half == table_interleaved[:, half_order(D)]`` for the sinusoidal tables of either layout.
    """
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def permute_residual(state: dict[str, torch.Tensor], cfg: ModelConfig, order: torch.Tensor) -> dict:
    """Apply ``x -> x[..., order]`` to the residual stream of a state dict in our naming.

    Every tensor that reads from or writes to the d_model axis of the residual stream is permuted on
    that axis; attention heads and the FFN hidden layer keep their own coordinates.
    """
    out = dict(state)

    def cols(name):  # Linear reading the residual stream: permute input columns
        out[name] = state[name][:, order]

    def rows(name):  # Linear writing to the residual stream: permute output rows (and bias)
        out[name] = state[name][order]

    for name in state:
        if name.endswith("embed.weight") or name == "out_proj.weight":
            cols(name)
        elif ".norm" in name:  # LayerNorm weight and bias
            rows(name)
        elif any(name.endswith(f"{m}.weight") for m in ("W_Q", "W_K", "W_V", "W_1")):
            cols(name)
        elif any(name.endswith(f"{m}.{p}") for m in ("W_O", "W_2") for p in ("weight", "bias")):
            rows(name)
    return out


def marian_to_config(hf: dict, unk_id: int) -> ModelConfig:
    """Our ModelConfig for a Marian config dict (defaults already filled in)."""

    def require(ok: bool, what: str):
        if not ok:
            raise MarianError(f"unsupported MarianMTModel config: {what}")

    require(hf["share_encoder_decoder_embeddings"], "share_encoder_decoder_embeddings must be true")
    require(hf["decoder_vocab_size"] in (None, hf["vocab_size"]), "decoder_vocab_size differs from vocab_size")
    return bart_like_config("marian", hf, unk_id)  # the checks every family of this layout shares


# ------------------------------------------------------------------------------------------- tokenizer


def spm_to_tokenizer(spm_path: str | Path, vocab: dict[str, int]) -> tuple[HFTokenizer, int]:
    """A `tokenizers` Unigram tokenizer equivalent to MarianTokenizer(spm, vocab.json) on ordinary text,
    and the number of vocab.json pieces (specials aside) that the spm model lacks.

    Ids follow vocab.json; scores come from the sentencepiece model; pieces only vocab.json has (in
    real Marian models: target-language pieces) score far below the rarest spm piece, so text made of
    characters the spm model knows is segmented exactly as sentencepiece does. Known difference: a
    character the spm model lacks becomes <unk> in MarianTokenizer, but here a vocab.json-only piece
    covering it wins (`tokenizers` prices <unk> below the lowest piece score), e.g. "zzqx" ->
    [▁zzqx] instead of [▁ z z q <unk>] when only vocab.json has "▁zzqx" and the spm model lacks "x".
    """
    from sentencepiece import sentencepiece_model_pb2 as pb
    from tokenizers import AddedToken, Regex, decoders, models, normalizers, pre_tokenizers
    from tokenizers import Tokenizer as HFTokenizer

    proto = pb.ModelProto()  # type: ignore[attr-defined]  # protobuf makes its message classes at import
    try:
        proto.ParseFromString(Path(spm_path).read_bytes())
    except Exception as e:  # protobuf's DecodeError
        raise MarianError(f"{spm_path} is not a sentencepiece model ({e})") from None
    if proto.trainer_spec.model_type != 1:  # 1 = unigram; Marian's spm models are unigram
        raise MarianError(
            f"{spm_path} is not a unigram sentencepiece model (model_type={proto.trainer_spec.model_type})"
        )
    ids = sorted(vocab.values())
    if ids != list(range(len(vocab))):
        raise MarianError("vocab.json ids are not the contiguous range 0..n-1")
    if "<unk>" not in vocab:
        raise MarianError("vocab.json has no <unk> token")
    T = pb.ModelProto.SentencePiece.Type  # type: ignore[attr-defined]  # as above
    scores = {p.piece: p.score for p in proto.pieces if p.type in (T.NORMAL, T.USER_DEFINED, T.BYTE)}
    floor = min(scores.values(), default=0.0) - MISSING_PIECE_PENALTY
    by_id = sorted(vocab, key=vocab.__getitem__)
    hf = HFTokenizer(
        models.Unigram(
            [(p, scores.get(p, floor)) for p in by_id], vocab["<unk>"], bool(proto.trainer_spec.byte_fallback)
        )
    )
    norm = proto.normalizer_spec
    steps: list[normalizers.Normalizer] = []
    if norm.precompiled_charsmap:
        steps.append(normalizers.Precompiled(norm.precompiled_charsmap))
    if norm.remove_extra_whitespaces:
        steps += [normalizers.Strip(), normalizers.Replace(Regex(" {2,}"), " ")]
    if steps:
        hf.normalizer = normalizers.Sequence(steps)
    scheme = "always" if norm.add_dummy_prefix else "never"
    hf.pre_tokenizer = pre_tokenizers.Metaspace(
        replacement="▁", prepend_scheme=scheme, split=bool(proto.trainer_spec.split_by_whitespace)
    )
    hf.decoder = decoders.Metaspace(replacement="▁", prepend_scheme=scheme)
    user = [p.piece for p in proto.pieces if p.type == T.USER_DEFINED and p.piece in vocab]
    codes = [p for p in by_id if p.startswith(">>") and p.endswith("<<")]  # target-language codes, >>fr<<
    hf.add_tokens([AddedToken(p, normalized=False) for p in user + codes])
    hf.add_special_tokens(
        [AddedToken(t, normalized=False, special=True) for t in ("<pad>", "<s>", "</s>", "<unk>") if t in vocab]
    )
    return hf, len([p for p in by_id if p not in scores and p not in ("<pad>", "<s>", "</s>", "<unk>")])


def marian_tokenizer(hf_dir: Path) -> tuple[Tokenizer, str]:
    """source.spm + vocab.json converted (a Marian directory without tokenizer.json)."""
    missing = [n for n in ("source.spm", "vocab.json") if not (hf_dir / n).is_file()]
    if missing:
        raise MarianError(f"{hf_dir} has no tokenizer.json and no MarianTokenizer files ({', '.join(missing)} missing)")
    if (hf_dir / "target_vocab.json").is_file():
        raise MarianError(f"{hf_dir} uses separate source/target vocabularies, which a shared embedding cannot hold")
    try:
        vocab = json.loads((hf_dir / "vocab.json").read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise MarianError(f"{hf_dir / 'vocab.json'} is not valid JSON ({e})") from None
    hf, n_missing = spm_to_tokenizer(hf_dir / "source.spm", vocab)
    note = f"converted from source.spm + vocab.json ({len(vocab)} entries"
    note += f"; {n_missing} of them absent from source.spm and never produced by encode)" if n_missing else ")"
    tgt = hf_dir / "target.spm"
    if tgt.is_file() and tgt.read_bytes() != (hf_dir / "source.spm").read_bytes():
        note += "; target.spm differs from source.spm, and target text is segmented with source.spm here"
    return Tokenizer(hf), note


# ----------------------------------------------------------------------------------------- import/export


def import_marian(hf_dir: str | Path, out_dir: str | Path) -> Path:
    """Convert a transformers MarianMTModel directory into a Decoder Lens model directory (``family.import_model``
    for Marian alone): config.json, model.safetensors (pickled weights are refused) and the tokenizer (tokenizer.json,
    or source.spm + vocab.json) become config.json, model.safetensors, tokenizer.json and MODEL_CARD.md in
    ``out_dir``. Returns ``out_dir``."""
    return import_model(hf_dir, out_dir, expect="marian")


def export_marian(model_dir: str | Path, hf_dir: str | Path) -> Path:
    """Write a Decoder Lens model directory as a transformers MarianMTModel directory (save_pretrained).

    Interleaved positional encodings are turned into Marian's half layout by permuting the residual
    stream, which leaves every output unchanged. The tokenizer goes along as tokenizer.json (loadable
    with ``AutoTokenizer``; it appends ``</s>`` like MarianTokenizer). Returns ``hf_dir``.
    """
    from transformers import MarianConfig, MarianMTModel

    loaded = load_model_dir(model_dir)
    cfg, model, hf_dir = loaded.cfg, loaded.model, Path(hf_dir)
    marian_like = cfg.norm_position == "post" and cfg.norm_kind == "layer" and cfg.positions == "sinusoidal"
    marian_like &= cfg.pe_layout in ("interleaved", "half") and not cfg.position_offset and cfg.bias
    marian_like &= not (cfg.final_norm or cfg.embed_norm or cfg.gated_ffn) and cfg.scale_attention
    marian_like &= cfg.output_scale == 1.0 and cfg.n_heads * cfg.d_k == cfg.d_model and cfg.activation != "gelu_new"
    if not marian_like:
        raise MarianError(f"only a post-norm model with the paper's positions exports as Marian, not: {cfg.family}")
    if not math.isclose(cfg.layer_norm_eps, 1e-5):
        raise MarianError(f"Marian's LayerNorm eps is fixed at 1e-5; this model uses {cfg.layer_norm_eps}")
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    if cfg.pe_layout == "interleaved":
        state = permute_residual(state, cfg, half_order(cfg.d_model))
    ids = token_ids(cfg.pad_id, cfg.eos_id, cfg.bos_id, cfg.decoder_start_id)
    hf_cfg = MarianConfig(
        vocab_size=cfg.vocab_size,
        decoder_vocab_size=cfg.vocab_size,
        **bart_sizes(cfg.d_model, (cfg.n_encoder_layers, cfg.n_decoder_layers), cfg.n_heads, cfg.d_ff),
        max_position_embeddings=cfg.max_len,
        activation_function=cfg.activation,
        scale_embedding=cfg.scale_embedding,
        dropout=cfg.dropout,
        activation_dropout=cfg.dropout,
        attention_dropout=0.0,
        **ids,
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=cfg.tie_output,
    )
    hf_model = MarianMTModel(hf_cfg)
    hf_state = {h: state[o] for o, h in weight_map(cfg)}
    for k in ("model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"):
        hf_state[k] = state["embed.weight"]
    if cfg.tie_output:
        hf_state["lm_head.weight"] = state["embed.weight"]
    bias = state.get("final_logits_bias")
    hf_state["final_logits_bias"] = (torch.zeros(cfg.vocab_size) if bias is None else bias).reshape(1, -1)
    missing, unexpected = hf_model.load_state_dict(hf_state, strict=False)
    missing = [k for k in missing if "embed_positions" not in k]
    if missing or unexpected:
        raise MarianError(f"internal error: MarianMTModel expects {missing[:3]}, does not know {unexpected[:3]}")
    gen = hf_model.generation_config
    for key, value in ids.items():
        setattr(gen, key, value)
    gen.bad_words_ids = [[cfg.pad_id]] + ([[cfg.decoder_start_id]] if cfg.decoder_start_id != cfg.pad_id else [])
    gen.max_length = cfg.max_len
    hf_dir.mkdir(parents=True, exist_ok=True)
    hf_model.save_pretrained(hf_dir, safe_serialization=True)
    _export_tokenizer(loaded.tokenizer, cfg, hf_dir)
    card = (loaded.card.strip() + "\n\n") if loaded.card.strip() else ""
    permuted = " (residual stream permuted from interleaved to half positional layout)"
    (hf_dir / "README.md").write_text(
        f"{card}---\nExported from the Decoder Lens model directory `{Path(model_dir)}` "
        "by `model.io.marian.export_marian`"
        f"{permuted if cfg.pe_layout == 'interleaved' else ''}.\n"
        "Load with `MarianMTModel.from_pretrained` and `AutoTokenizer.from_pretrained`.\n"
    )
    return hf_dir


def _export_tokenizer(tokenizer: Tokenizer, cfg: ModelConfig, hf_dir: Path) -> None:
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import pre_tokenizers, processors

    from model.core.tokenizer import META

    hf = HFTokenizer.from_str(tokenizer.hf.to_str())
    if tokenizer.byte_fallback:  # the leading word mark our wrapper adds, written into the file for other readers
        hf.pre_tokenizer = pre_tokenizers.Metaspace(replacement=META, prepend_scheme="always")
    eos = tokenizer.id_to_token(cfg.eos_id)
    hf.post_processor = processors.TemplateProcessing(
        single=f"$A {eos}", pair=f"$A $B {eos}", special_tokens=[(eos, cfg.eos_id)]
    )
    hf.save(str(hf_dir / "tokenizer.json"))
    specials = {"pad_token": cfg.pad_id, "eos_token": cfg.eos_id, "unk_token": cfg.unk_id}
    if cfg.bos_id != cfg.pad_id:
        specials["bos_token"] = cfg.bos_id
    conf = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": cfg.max_len}
    conf.update(
        {k: tokenizer.hf.id_to_token(i) for k, i in specials.items() if tokenizer.hf.id_to_token(i) is not None}
    )
    write_json(hf_dir / "tokenizer_config.json", conf, indent=2)


__all__ = ["MarianError", "export_marian", "half_order", "import_marian", "permute_residual", "spm_to_tokenizer"]
