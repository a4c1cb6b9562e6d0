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

import torch

from model.core.config import ModelConfig
from model.core.jsonio import write as write_json
from model.core.tokenizer import Tokenizer
from model.core.transformer import Transformer, sinusoidal_table
from model.io.checkpoint import ModelDirError, load_model_dir, save_model_dir

# MarianConfig's defaults (transformers 5.x): config.json written by save_pretrained lists only the
# values that differ from these.
MARIAN_DEFAULTS = {
    "vocab_size": 58101,
    "decoder_vocab_size": None,
    "max_position_embeddings": 1024,
    "encoder_layers": 12,
    "encoder_ffn_dim": 4096,
    "encoder_attention_heads": 16,
    "decoder_layers": 12,
    "decoder_ffn_dim": 4096,
    "decoder_attention_heads": 16,
    "activation_function": "gelu",
    "d_model": 1024,
    "decoder_start_token_id": 58100,
    "scale_embedding": False,
    "pad_token_id": 58100,
    "eos_token_id": 0,
    "bos_token_id": None,
    "share_encoder_decoder_embeddings": True,
    "tie_word_embeddings": True,
}
ACTIVATIONS = {"swish": "swish", "silu": "silu", "gelu": "gelu", "relu": "relu"}  # Marian name -> ours
MISSING_PIECE_PENALTY = 1000.0  # vocab.json pieces the spm model lacks score this far below its rarest piece


class MarianError(ModelDirError):
    """A Marian directory that cannot be imported, or a model that cannot be exported; one sentence."""


# --------------------------------------------------------------------------------------------- weights


def _attn_pairs(ours: str, hf: str) -> list[tuple[str, str]]:
    names = (("W_Q", "q_proj"), ("W_K", "k_proj"), ("W_V", "v_proj"), ("W_O", "out_proj"))
    return [(f"{ours}.{o}.{p}", f"{hf}.{h}.{p}") for o, h in names for p in ("weight", "bias")]


def _affine_pairs(ours: str, hf: str) -> list[tuple[str, str]]:
    return [(f"{ours}.{p}", f"{hf}.{p}") for p in ("weight", "bias")]


def weight_map(cfg: ModelConfig) -> list[tuple[str, str]]:
    """(our parameter name, MarianMTModel parameter name) for every tensor except the embeddings."""
    pairs = []
    for i in range(cfg.n_encoder_layers):
        o, h = f"encoder_layers.{i}", f"model.encoder.layers.{i}"
        pairs += _attn_pairs(f"{o}.self_attn", f"{h}.self_attn")
        pairs += _affine_pairs(f"{o}.norm1.norm", f"{h}.self_attn_layer_norm")
        pairs += _affine_pairs(f"{o}.ffn.W_1", f"{h}.fc1") + _affine_pairs(f"{o}.ffn.W_2", f"{h}.fc2")
        pairs += _affine_pairs(f"{o}.norm2.norm", f"{h}.final_layer_norm")
    for i in range(cfg.n_decoder_layers):
        o, h = f"decoder_layers.{i}", f"model.decoder.layers.{i}"
        pairs += _attn_pairs(f"{o}.self_attn", f"{h}.self_attn")
        pairs += _affine_pairs(f"{o}.norm1.norm", f"{h}.self_attn_layer_norm")
        pairs += _attn_pairs(f"{o}.cross_attn", f"{h}.encoder_attn")
        pairs += _affine_pairs(f"{o}.norm2.norm", f"{h}.encoder_attn_layer_norm")
        pairs += _affine_pairs(f"{o}.ffn.W_1", f"{h}.fc1") + _affine_pairs(f"{o}.ffn.W_2", f"{h}.fc2")
        pairs += _affine_pairs(f"{o}.norm3.norm", f"{h}.final_layer_norm")
    if not cfg.tie_output:
        pairs.append(("out_proj.weight", "lm_head.weight"))
    return pairs


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


def _read_safetensors(hf_dir: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    single, index = hf_dir / "model.safetensors", hf_dir / "model.safetensors.index.json"
    if single.is_file():
        files = [single]
    elif index.is_file():
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        files = [hf_dir / s for s in shards]
    else:
        pickles = [p.name for p in hf_dir.glob("*.bin")] + [p.name for p in hf_dir.glob("*.pt*")]
        if pickles:
            raise MarianError(
                f"{hf_dir} has only pickled weights ({', '.join(sorted(pickles))}), which are never loaded because "
                "unpickling can run arbitrary code; convert them to model.safetensors first "
                "(e.g. MarianMTModel.from_pretrained(dir).save_pretrained(dir, safe_serialization=True) "
                "in an environment you trust)"
            )
        raise MarianError(f"{hf_dir / 'model.safetensors'} is missing")
    state = {}
    for f in files:
        try:
            state.update(load_file(str(f)))
        except Exception as e:  # safetensors raises its own error type or OSError
            raise MarianError(f"{f} is unreadable or truncated ({e})") from None
    return {k: v.float() for k, v in state.items()}


def _read_marian_config(hf_dir: Path) -> dict:
    path = hf_dir / "config.json"
    if not path.is_file():
        raise MarianError(f"{path} is missing")
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise MarianError(f"{path} is not valid JSON ({e})") from None
    if raw.get("model_type") != "marian":
        raise MarianError(f"{path} describes model_type={raw.get('model_type')!r}, not a Marian model")
    return {**MARIAN_DEFAULTS, **raw}


def marian_to_config(hf: dict, unk_id: int) -> ModelConfig:
    """Our ModelConfig for a Marian config dict (defaults already filled in)."""

    def require(ok: bool, what: str):
        if not ok:
            raise MarianError(f"unsupported Marian config: {what}")

    require(hf["share_encoder_decoder_embeddings"], "share_encoder_decoder_embeddings must be true")
    require(hf["decoder_vocab_size"] in (None, hf["vocab_size"]), "decoder_vocab_size differs from vocab_size")
    require(
        hf["encoder_attention_heads"] == hf["decoder_attention_heads"],
        f"encoder_attention_heads={hf['encoder_attention_heads']} != decoder_attention_heads="
        f"{hf['decoder_attention_heads']}",
    )
    require(
        hf["encoder_ffn_dim"] == hf["decoder_ffn_dim"],
        f"encoder_ffn_dim={hf['encoder_ffn_dim']} != decoder_ffn_dim={hf['decoder_ffn_dim']}",
    )
    act = hf["activation_function"]
    require(act in ACTIVATIONS, f"activation_function={act!r} (supported: {', '.join(ACTIVATIONS)})")
    eos = hf["eos_token_id"]
    if isinstance(eos, list):
        require(len(eos) == 1, f"several eos_token_id values {eos}")
        eos = eos[0]
    require(hf["pad_token_id"] is not None, "pad_token_id is not set")
    start = hf["decoder_start_token_id"]
    start = hf["pad_token_id"] if start is None else start
    bos = hf["bos_token_id"] if hf["bos_token_id"] is not None else start
    return ModelConfig(
        vocab_size=hf["vocab_size"],
        d_model=hf["d_model"],
        n_heads=hf["encoder_attention_heads"],
        d_ff=hf["encoder_ffn_dim"],
        n_encoder_layers=hf["encoder_layers"],
        n_decoder_layers=hf["decoder_layers"],
        max_len=hf["max_position_embeddings"],
        dropout=0.0,
        pe_layout="half",
        activation=ACTIVATIONS[act],
        scale_embedding=bool(hf["scale_embedding"]),
        tie_output=bool(hf["tie_word_embeddings"]),
        final_logits_bias=True,
        layer_norm_eps=1e-5,
        pad_id=hf["pad_token_id"],
        bos_id=bos,
        eos_id=eos,
        unk_id=unk_id,
        decoder_start_id=start,
    )


def _first(state: dict, *names: str) -> torch.Tensor | None:
    return next((state[n] for n in names if n in state), None)


def marian_state_to_ours(state: dict[str, torch.Tensor], cfg: ModelConfig, where: Path) -> dict[str, torch.Tensor]:
    """A MarianMTModel state dict (safetensors keys) -> our parameter names (embedding aliases not repeated)."""
    if not any(k.startswith("model.") for k in state):  # a MarianModel without the LM head
        state = {f"model.{k}": v for k, v in state.items()}
    names = ["model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"]
    embed = _first(state, *names, *(["lm_head.weight"] if cfg.tie_output else []))
    if embed is None:
        raise MarianError(f"{where} has no token embedding (model.shared.weight)")
    if tuple(embed.shape) != (cfg.vocab_size, cfg.d_model):
        raise MarianError(f"{where}: embedding is {tuple(embed.shape)}, config says ({cfg.vocab_size}, {cfg.d_model})")
    ours = {"embed.weight": embed}
    for o, h in weight_map(cfg):
        if h not in state:
            raise MarianError(f"{where} lacks {h} (needed for {o})")
        ours[o] = state[h]
    bias = state.get("final_logits_bias")
    ours["final_logits_bias"] = torch.zeros(cfg.vocab_size) if bias is None else bias.reshape(-1)
    table = sinusoidal_table(cfg.max_len, cfg.d_model, "half")
    for side in ("encoder", "decoder"):  # older checkpoints store the (fixed) tables; transformers loads them
        stored = state.get(f"model.{side}.embed_positions.weight")
        if stored is not None and (stored.shape != table.shape or not torch.allclose(stored, table, atol=1e-4)):
            raise MarianError(
                f"{where}: model.{side}.embed_positions.weight is not the sinusoidal sin | cos table, "
                "which our model computes and cannot store"
            )
    return ours


def _model_from_state(cfg: ModelConfig, ours: dict[str, torch.Tensor], where: Path) -> Transformer:
    model = Transformer(cfg)
    own = model.state_dict()
    full = {k: ours["embed.weight"] if k.endswith("embed.weight") else ours.get(k) for k in own}
    for k, v in full.items():
        if v is None:
            raise MarianError(f"{where} gives no value for {k}")
        if v.shape != own[k].shape:
            raise MarianError(f"{where}: {k} has shape {tuple(v.shape)}, expected {tuple(own[k].shape)}")
    model.load_state_dict(full, strict=True)
    return model.eval()


# ------------------------------------------------------------------------------------------- tokenizer


def spm_to_tokenizer(spm_path: str | Path, vocab: dict[str, int]):
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


def _import_tokenizer(hf_dir: Path) -> tuple[Tokenizer, str]:
    """The directory's tokenizer.json if present, else source.spm + vocab.json converted."""
    if (hf_dir / "tokenizer.json").is_file():
        try:
            return Tokenizer.load(hf_dir / "tokenizer.json"), "copied from tokenizer.json"
        except Exception as e:
            raise MarianError(f"{hf_dir / 'tokenizer.json'} is not a valid tokenizer file: {e}") from None
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
    """Convert a transformers MarianMTModel directory into a Decoder Lens model directory.

    Reads config.json, model.safetensors (pickled weights are refused) and the tokenizer
    (tokenizer.json, or source.spm + vocab.json); writes config.json, model.safetensors,
    tokenizer.json and MODEL_CARD.md to ``out_dir``. Returns ``out_dir``.
    """
    hf_dir, out_dir = Path(hf_dir), Path(out_dir)
    if not hf_dir.is_dir():
        raise MarianError(f"Marian directory {hf_dir} does not exist")
    hf = _read_marian_config(hf_dir)
    state = _read_safetensors(hf_dir)
    tokenizer, tok_note = _import_tokenizer(hf_dir)
    unk = tokenizer.token_to_id("<unk>")
    cfg = marian_to_config(hf, 0 if unk is None else unk)
    if tokenizer.vocab_size > cfg.vocab_size:
        raise MarianError(f"the tokenizer has {tokenizer.vocab_size} tokens but the model only {cfg.vocab_size}")
    model = _model_from_state(cfg, marian_state_to_ours(state, cfg, hf_dir), hf_dir)
    name = hf.get("_name_or_path") or hf_dir.name
    card = [
        f"# {name} (imported from Marian)\n",
        f"Converted by `model.io.marian.import_marian` from the transformers MarianMTModel directory `{hf_dir}`"
        + (f" (transformers {hf['transformers_version']})" if hf.get("transformers_version") else "")
        + ".",
        f'Weights copied one to one; positional encoding in Marian\'s sin | cos halves (`pe_layout="half"`); '
        f"decoding starts from token {cfg.decoder_start_id} (`{tokenizer.id_to_token(cfg.decoder_start_id)}`); "
        f"tokenizer {tok_note}.",
        "Dropout is set to 0 (inference only). The original license and terms of the model apply.",
    ]
    readme = hf_dir / "README.md"
    if readme.is_file():
        card += ["\n## Original model card\n", readme.read_text(encoding="utf-8", errors="replace")]
    save_model_dir(model, tokenizer, out_dir, card="\n".join(card).rstrip() + "\n")
    return out_dir


def export_marian(model_dir: str | Path, hf_dir: str | Path) -> Path:
    """Write a Decoder Lens model directory as a transformers MarianMTModel directory (save_pretrained).

    Interleaved positional encodings are turned into Marian's half layout by permuting the residual
    stream, which leaves every output unchanged. The tokenizer goes along as tokenizer.json (loadable
    with ``AutoTokenizer``; it appends ``</s>`` like MarianTokenizer). Returns ``hf_dir``.
    """
    from transformers import MarianConfig, MarianMTModel

    loaded = load_model_dir(model_dir)
    cfg, model, hf_dir = loaded.cfg, loaded.model, Path(hf_dir)
    if not math.isclose(cfg.layer_norm_eps, 1e-5):
        raise MarianError(f"Marian's LayerNorm eps is fixed at 1e-5; this model uses {cfg.layer_norm_eps}")
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    if cfg.pe_layout == "interleaved":
        state = permute_residual(state, cfg, half_order(cfg.d_model))
    hf_cfg = MarianConfig(
        vocab_size=cfg.vocab_size,
        decoder_vocab_size=cfg.vocab_size,
        d_model=cfg.d_model,
        encoder_layers=cfg.n_encoder_layers,
        decoder_layers=cfg.n_decoder_layers,
        encoder_attention_heads=cfg.n_heads,
        decoder_attention_heads=cfg.n_heads,
        encoder_ffn_dim=cfg.d_ff,
        decoder_ffn_dim=cfg.d_ff,
        max_position_embeddings=cfg.max_len,
        activation_function=cfg.activation,
        scale_embedding=cfg.scale_embedding,
        dropout=cfg.dropout,
        activation_dropout=cfg.dropout,
        attention_dropout=0.0,
        pad_token_id=cfg.pad_id,
        eos_token_id=cfg.eos_id,
        bos_token_id=cfg.bos_id,
        decoder_start_token_id=cfg.decoder_start_id,
        forced_eos_token_id=None,
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
    gen.pad_token_id, gen.eos_token_id, gen.bos_token_id = cfg.pad_id, cfg.eos_id, cfg.bos_id
    gen.decoder_start_token_id, gen.forced_eos_token_id = cfg.decoder_start_id, None
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
