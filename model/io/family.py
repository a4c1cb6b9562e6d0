"""Import a transformers encoder-decoder directory of the family as a Decoder Lens model directory:
``MarianMTModel``, ``BartForConditionalGeneration``, ``MBartForConditionalGeneration``,
``M2M100ForConditionalGeneration`` (NLLB too) and ``T5ForConditionalGeneration``, the family read from config.json.

One importer for all five: read config.json (``model_type`` says the family; a decoder-only model or another
architecture is refused in one sentence), map it to a ``ModelConfig`` (where the norm sits, which norm, which
positions, ...), copy the safetensors weights one to one under our names (pickled weights are never read), refuse a
config that contradicts its weights (a tensor missing, of another shape, or one the config has no place for), take
the tokenizer from tokenizer.json or the SentencePiece model, check it against the vocabulary, and write
config.json, model.safetensors, tokenizer.json and MODEL_CARD.md. Language codes (mBART-50, M2M100, NLLB) become
the token read before every source and the first generated token, forced.

transformers is not needed here; sentencepiece only for a directory without tokenizer.json.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, cast

import torch

from model.core.config import ModelConfig, check_config_dict
from model.core.tokenizer import Tokenizer
from model.core.transformer import Transformer, position_table
from model.io.checkpoint import ModelDirError, save_model_dir

# transformers' class of each family, and the family's config defaults (transformers 5.x) for the keys read here
ARCHITECTURES = {
    "marian": "MarianMTModel",
    "bart": "BartForConditionalGeneration",
    "mbart": "MBartForConditionalGeneration",
    "m2m_100": "M2M100ForConditionalGeneration",
    "t5": "T5ForConditionalGeneration",
}
BART_DEFAULTS = {
    "vocab_size": 50265,
    "max_position_embeddings": 1024,
    "encoder_layers": 12,
    "encoder_ffn_dim": 4096,
    "encoder_attention_heads": 16,
    "decoder_layers": 12,
    "decoder_ffn_dim": 4096,
    "decoder_attention_heads": 16,
    "activation_function": "gelu",
    "d_model": 1024,
    "scale_embedding": False,
    "pad_token_id": 1,
    "bos_token_id": 0,
    "eos_token_id": 2,
    "decoder_start_token_id": 2,
    "forced_bos_token_id": None,
    "tie_word_embeddings": True,
}
# ModelConfig's sizes as the BART layout's configs name them (Marian, BART, mBART, M2M100 / NLLB), read on import and
# written on export: the encoder's and the decoder's heads and FFN widths are one field of ours, so they must agree
BART_SIZES = {
    "d_model": ("d_model",),
    "n_heads": ("encoder_attention_heads", "decoder_attention_heads"),
    "d_ff": ("encoder_ffn_dim", "decoder_ffn_dim"),
    "n_encoder_layers": ("encoder_layers",),
    "n_decoder_layers": ("decoder_layers",),
}
DEFAULTS: dict[str, dict[str, Any]] = {
    "bart": BART_DEFAULTS,
    "mbart": {**BART_DEFAULTS, "decoder_start_token_id": None},
    "m2m_100": {**BART_DEFAULTS, "vocab_size": 128112, "activation_function": "relu", "scale_embedding": True},
    "t5": {
        "vocab_size": 32128,
        "d_model": 512,
        "d_kv": 64,
        "d_ff": 2048,
        "num_layers": 6,
        "num_decoder_layers": None,
        "num_heads": 8,
        "relative_attention_num_buckets": 32,
        "relative_attention_max_distance": 128,
        "layer_norm_epsilon": 1e-6,
        "feed_forward_proj": "relu",
        "pad_token_id": 0,
        "eos_token_id": 1,
        "decoder_start_token_id": None,
        "tie_word_embeddings": True,
        "n_positions": 512,
    },
}
ACTIVATIONS = {"swish": "swish", "silu": "silu", "gelu": "gelu", "relu": "relu", "gelu_new": "gelu_new"}
DECODER_ONLY = ("gpt2", "gpt_neo", "gptj", "llama", "mistral", "qwen2", "phi", "opt", "bloom", "falcon", "gemma")
LEARNED_OFFSET = 2  # BART's and mBART's learned tables start their positions at row 2
MAX_T5_LEN = 512  # T5 has no position table; the longest source or target a T5 model directory takes


class FamilyError(ModelDirError):
    """A transformers directory that cannot be imported; one sentence."""


# --------------------------------------------------------------------------------------------- reading


def read_hf_config(hf_dir: Path, expect: str | None = None) -> tuple[str, dict]:
    """(model_type, config.json with the family's defaults filled in). ``expect``: the one family accepted."""
    path = hf_dir / "config.json"
    if not path.is_file():
        raise FamilyError(f"{path} is missing")
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise FamilyError(f"{path} is not valid JSON ({e})") from None
    if not isinstance(raw, dict):
        raise FamilyError(f"{path} holds a JSON {type(raw).__name__}, not an object")
    kind = raw.get("model_type")
    if expect is not None and kind != expect:
        raise FamilyError(f"{path} describes model_type={kind!r}, not a {ARCHITECTURES[expect][:-7]} model")
    archs = raw.get("architectures") or []
    if kind in DECODER_ONLY or raw.get("is_encoder_decoder") is False or any("CausalLM" in a for a in archs):
        raise FamilyError(
            f"{path} describes a decoder-only model (model_type={kind!r}), which has no encoder and no "
            f"cross-attention to show; importable are the encoder-decoder models {', '.join(ARCHITECTURES.values())}"
        )
    if kind not in ARCHITECTURES:
        raise FamilyError(
            f"{path} describes model_type={kind!r}, which is not one of the encoder-decoder families imported here "
            f"({', '.join(ARCHITECTURES)})"
        )
    if kind == "marian":
        from model.io.marian import MARIAN_DEFAULTS

        return kind, {**MARIAN_DEFAULTS, **raw}
    return kind, {**DEFAULTS[kind], **raw}


def read_safetensors(hf_dir: Path) -> dict[str, torch.Tensor]:
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
            raise FamilyError(
                f"{hf_dir} has only pickled weights ({', '.join(sorted(pickles))}), which are never loaded because "
                "unpickling can run arbitrary code; convert them to model.safetensors first "
                "(e.g. AutoModelForSeq2SeqLM.from_pretrained(dir).save_pretrained(dir, safe_serialization=True) "
                "in an environment you trust)"
            )
        raise FamilyError(f"{hf_dir / 'model.safetensors'} is missing")
    state = {}
    for f in files:
        try:
            state.update(load_file(str(f)))
        except Exception as e:  # safetensors raises its own error type or OSError
            raise FamilyError(f"{f} is unreadable or truncated ({e})") from None
    return {k: v.float() for k, v in state.items()}


# --------------------------------------------------------------------------------------------- config


def _require(ok: bool, kind: str, what: str) -> None:
    if not ok:
        raise FamilyError(f"unsupported {ARCHITECTURES[kind]} config: {what}")


def _one_eos(hf: dict, kind: str) -> int:
    eos = hf["eos_token_id"]
    if isinstance(eos, list):
        _require(len(eos) == 1, kind, f"several eos_token_id values {eos}")
        eos = eos[0]
    _require(isinstance(eos, int), kind, "eos_token_id is not set")
    return eos


def bart_sizes(d_model: int, layers: tuple[int, int], heads: int, ffn: int) -> dict[str, Any]:
    """A model's sizes under the BART layout's config keys (``layers``: the encoder's and the decoder's)."""
    ours = dict(d_model=d_model, n_heads=heads, d_ff=ffn, n_encoder_layers=layers[0], n_decoder_layers=layers[1])
    return {key: ours[field] for field, keys in BART_SIZES.items() for key in keys}


def token_ids(pad: int, eos: int, bos: int | None, start: int) -> dict[str, Any]:
    """Our special ids under the keys transformers reads them by, alike in a model's config and in its generation
    settings: decoding starts from ``start`` and ends only where the model itself writes </s> (none forced)."""
    return dict(
        pad_token_id=pad, eos_token_id=eos, bos_token_id=bos, decoder_start_token_id=start, forced_eos_token_id=None
    )


def bart_like_config(kind: str, hf: dict, unk_id: int) -> ModelConfig:
    """Marian (the paper's post-norm model, sinusoidal sin | cos positions), BART (post-norm, learned positions,
    embedding LayerNorm), mBART (the same, pre-norm with final norms) and M2M100 / NLLB (pre-norm, final norms,
    fairseq's sinusoidal positions from row pad + 1)."""
    for enc, dec in (keys for keys in BART_SIZES.values() if len(keys) == 2):
        _require(hf[enc] == hf[dec], kind, f"{enc}={hf[enc]} != {dec}={hf[dec]}")
    act = hf["activation_function"]
    _require(act in ACTIVATIONS, kind, f"activation_function={act!r} (supported: {', '.join(ACTIVATIONS)})")
    _require(hf["pad_token_id"] is not None, kind, "pad_token_id is not set")
    eos, pad = _one_eos(hf, kind), hf["pad_token_id"]
    start = hf["decoder_start_token_id"]
    start = (pad if kind == "marian" else eos) if start is None else start  # mBART-50, NLLB: from </s>
    pre, sinusoidal = kind in ("mbart", "m2m_100"), kind in ("marian", "m2m_100")
    return ModelConfig(
        vocab_size=hf["vocab_size"],
        **{field: hf[keys[0]] for field, keys in BART_SIZES.items()},
        max_len=hf["max_position_embeddings"],
        dropout=0.0,
        pe_layout="fairseq" if kind == "m2m_100" else "half",
        activation=ACTIVATIONS[act],
        scale_embedding=bool(hf["scale_embedding"]),
        tie_output=bool(hf["tie_word_embeddings"]),
        final_logits_bias=kind != "m2m_100",  # Marian's, BART's and mBART's output bias
        layer_norm_eps=1e-5,
        pad_id=pad,
        bos_id=start if hf["bos_token_id"] is None else hf["bos_token_id"],
        eos_id=eos,
        unk_id=unk_id,
        decoder_start_id=start,
        norm_position="pre" if pre else "post",
        final_norm=pre,
        embed_norm=kind in ("bart", "mbart"),
        positions="sinusoidal" if sinusoidal else "learned",
        position_offset=0 if kind == "marian" else pad + 1 if kind == "m2m_100" else LEARNED_OFFSET,
        forced_bos_id=-1 if hf.get("forced_bos_token_id") is None else hf["forced_bos_token_id"],
    )


def t5_config(hf: dict, unk_id: int, own_head: bool) -> ModelConfig:
    """T5 and T5 v1.1 / Flan-T5: pre-norm RMSNorm, final norms, relative position bias, no biases, unscaled dot
    products, (gated) ReLU or GELU FFN; a tied output head reads the decoder output × d_model^-0.5."""
    proj = hf["feed_forward_proj"]
    gated, act = proj.startswith("gated-"), proj.removeprefix("gated-")
    act = "gelu_new" if proj == "gated-gelu" else act  # transformers' reading of the T5 v1.1 name
    _require(act in ACTIVATIONS, "t5", f"feed_forward_proj={proj!r} (supported: relu, gated-gelu, gated-relu, ...)")
    eos, pad = _one_eos(hf, "t5"), hf["pad_token_id"]
    start = pad if hf["decoder_start_token_id"] is None else hf["decoder_start_token_id"]
    tied = hf["tie_word_embeddings"] is not False and not own_head
    scaled = hf.get("scale_decoder_outputs")  # transformers 5 writes it; older configs say it by tie_word_embeddings
    scaled = hf["tie_word_embeddings"] is not False if scaled is None else bool(scaled)
    return ModelConfig(
        vocab_size=hf["vocab_size"],
        d_model=hf["d_model"],
        n_heads=hf["num_heads"],
        d_ff=hf["d_ff"],
        n_encoder_layers=hf["num_layers"],
        n_decoder_layers=hf["num_decoder_layers"] or hf["num_layers"],
        max_len=min(hf.get("n_positions") or MAX_T5_LEN, MAX_T5_LEN),
        dropout=0.0,
        activation=ACTIVATIONS[act],
        scale_embedding=False,
        tie_output=tied,
        final_logits_bias=False,
        layer_norm_eps=hf["layer_norm_epsilon"],
        pad_id=pad,
        bos_id=start,
        eos_id=eos,
        unk_id=unk_id,
        decoder_start_id=start,
        norm_position="pre",
        final_norm=True,
        norm_kind="rms",
        positions="relative",
        relative_buckets=hf["relative_attention_num_buckets"],
        relative_max_distance=hf["relative_attention_max_distance"],
        gated_ffn=gated,
        bias=False,
        scale_attention=False,
        output_scale=hf["d_model"] ** -0.5 if scaled else 1.0,
        d_kv=hf["d_kv"],
    )


def to_config(kind: str, hf: dict, unk_id: int, state: dict[str, torch.Tensor]) -> ModelConfig:
    try:
        if kind == "marian":
            from model.io.marian import marian_to_config

            return marian_to_config(hf, unk_id)
        if kind == "t5":
            head, shared = state.get("lm_head.weight"), state.get("shared.weight")
            own = head is not None and (shared is None or not torch.equal(head, shared))
            return t5_config(hf, unk_id, own)
        return bart_like_config(kind, hf, unk_id)
    except (TypeError, KeyError, ValueError) as e:
        if isinstance(e, FamilyError):
            raise
        raise FamilyError(f"config.json is not a valid {ARCHITECTURES[kind]} config: {e}") from None


# --------------------------------------------------------------------------------------------- weights

Pairs = list[tuple[str, str]]


def _pairs(ours: str, hf: str, names: tuple[tuple[str, str], ...], params: tuple[str, ...]) -> Pairs:
    return [(f"{ours}.{o}.{p}", f"{hf}.{h}.{p}") for o, h in names for p in params]


def bart_like_map(cfg: ModelConfig, kind: str) -> Pairs:
    """(our name, transformers' name) of every tensor but the embeddings and positional tables: Marian, BART, mBART
    and M2M100 share one layout."""
    attn = (("W_Q", "q_proj"), ("W_K", "k_proj"), ("W_V", "v_proj"), ("W_O", "out_proj"))
    wb = ("weight", "bias")
    pairs: Pairs = []
    for side, n, blocks in (
        ("encoder", cfg.n_encoder_layers, (("self_attn", "self_attn", "norm1", "self_attn_layer_norm"),)),
        (
            "decoder",
            cfg.n_decoder_layers,
            (
                ("self_attn", "self_attn", "norm1", "self_attn_layer_norm"),
                ("cross_attn", "encoder_attn", "norm2", "encoder_attn_layer_norm"),
            ),
        ),
    ):
        last = "norm2" if side == "encoder" else "norm3"
        for i in range(n):
            o, h = f"{side}_layers.{i}", f"model.{side}.layers.{i}"
            for ours_attn, hf_attn, norm, hf_norm in blocks:
                pairs += _pairs(f"{o}.{ours_attn}", f"{h}.{hf_attn}", attn, wb)
                pairs += _pairs(o, h, ((f"{norm}.norm", hf_norm),), wb)
            pairs += _pairs(o, h, (("ffn.W_1", "fc1"), ("ffn.W_2", "fc2"), (f"{last}.norm", "final_layer_norm")), wb)
        if cfg.embed_norm:
            embed = "src_embed" if side == "encoder" else "tgt_embed"
            pairs += _pairs(embed, f"model.{side}", (("norm", "layernorm_embedding"),), wb)
        if cfg.final_norm:
            pairs += _pairs("", f"model.{side}", ((f"{side[:3]}_norm", "layer_norm"),), wb)
    if not cfg.tie_output:
        pairs.append(("out_proj.weight", "lm_head.weight"))
    return [(o.removeprefix("."), h) for o, h in pairs]


def t5_map(cfg: ModelConfig) -> Pairs:
    """(our name, transformers' name) of every T5 tensor but the embedding."""
    attn = (("W_Q", "q"), ("W_K", "k"), ("W_V", "v"), ("W_O", "o"))
    gated = (("ffn.W_1", "DenseReluDense.wi_0"), ("ffn.W_3", "DenseReluDense.wi_1"), ("ffn.W_2", "DenseReluDense.wo"))
    ffn = gated if cfg.gated_ffn else (("ffn.W_1", "DenseReluDense.wi"), ("ffn.W_2", "DenseReluDense.wo"))
    pairs: Pairs = []
    for side, n in (("encoder", cfg.n_encoder_layers), ("decoder", cfg.n_decoder_layers)):
        blocks = [("self_attn", "SelfAttention")] + ([("cross_attn", "EncDecAttention")] if side == "decoder" else [])
        for i in range(n):
            o, h = f"{side}_layers.{i}", f"{side}.block.{i}.layer"
            for j, (ours_attn, hf_attn) in enumerate(blocks):
                pairs += _pairs(f"{o}.{ours_attn}", f"{h}.{j}.{hf_attn}", attn, ("weight",))
                pairs.append((f"{o}.norm{j + 1}.norm.weight", f"{h}.{j}.layer_norm.weight"))
            j = len(blocks)
            pairs += _pairs(o, f"{h}.{j}", ffn, ("weight",))
            pairs.append((f"{o}.norm{j + 1}.norm.weight", f"{h}.{j}.layer_norm.weight"))
        short = side[:3]
        table = f"{side}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"  # shared by the stack
        pairs.append((f"{short}_bias.bias.weight", table))
        pairs.append((f"{short}_norm.weight", f"{side}.final_layer_norm.weight"))
    if not cfg.tie_output:
        pairs.append(("out_proj.weight", "lm_head.weight"))
    return pairs


def _first(state: dict, *names: str) -> str | None:
    return next((n for n in names if n in state), None)


# names of tensors a directory may hold that the model computes or shares: never a contradiction
def _ignorable(kind: str, cfg: ModelConfig) -> Callable[[str], bool]:
    aliases = {
        "model.shared.weight",
        "model.encoder.embed_tokens.weight",
        "model.decoder.embed_tokens.weight",
        "shared.weight",
        "encoder.embed_tokens.weight",
        "decoder.embed_tokens.weight",
        "final_logits_bias",
    }
    if cfg.tie_output:
        aliases.add("lm_head.weight")
    return lambda name: name in aliases or (cfg.positions == "sinusoidal" and "embed_positions" in name)


def state_to_ours(kind: str, state: dict[str, torch.Tensor], cfg: ModelConfig, where: Path) -> dict[str, torch.Tensor]:
    """A transformers state dict (safetensors keys) -> our parameter names. Refuses a tensor missing, of the wrong
    shape (``_model_from_state``), or left over: weights for layers or parts the config does not have."""
    if kind != "t5" and not any(k.startswith("model.") for k in state):  # a bare model without the LM head
        state = {f"model.{k}": v for k, v in state.items()}
    prefix = "" if kind == "t5" else "model."
    emb = [f"{prefix}shared.weight", f"{prefix}encoder.embed_tokens.weight", f"{prefix}decoder.embed_tokens.weight"]
    name = _first(state, *emb, *(["lm_head.weight"] if cfg.tie_output else []))
    if name is None:
        raise FamilyError(f"{where} has no token embedding ({emb[0]})")
    embed = state[name]
    if tuple(embed.shape) != (cfg.vocab_size, cfg.d_model):
        raise FamilyError(
            f"{where}: the config contradicts the weights: the embedding is {tuple(embed.shape)}, config.json says "
            f"({cfg.vocab_size}, {cfg.d_model})"
        )
    ours = {"embed.weight": embed}
    pairs = t5_map(cfg) if kind == "t5" else bart_like_map(cfg, kind)
    for o, h in pairs:
        if h not in state:
            raise FamilyError(f"{where} lacks {h} (needed for {o}): the config contradicts the weights")
        ours[o] = state[h]
    used = {h for _, h in pairs} | {name}
    if cfg.positions == "learned":
        for side, ours_name in (("encoder", "src_embed.pe"), ("decoder", "tgt_embed.pe")):
            table = state.get(f"model.{side}.embed_positions.weight")
            want = cfg.max_len + cfg.position_offset
            if table is None or table.shape != (want, cfg.d_model):
                got = None if table is None else tuple(table.shape)
                raise FamilyError(
                    f"{where}: model.{side}.embed_positions.weight is {got}, the config needs ({want}, {cfg.d_model})"
                )
            ours[ours_name] = table[cfg.position_offset :]
            used.add(f"model.{side}.embed_positions.weight")
    if cfg.final_logits_bias:
        bias = state.get("final_logits_bias")
        ours["final_logits_bias"] = torch.zeros(cfg.vocab_size) if bias is None else bias.reshape(-1)
    if cfg.positions == "sinusoidal":
        _check_stored_tables(state, cfg, where)
    ignorable = _ignorable(kind, cfg)
    extra = sorted(k for k in state if k not in used and not ignorable(k))
    if extra:
        more = f" and {len(extra) - 1} more" if len(extra) > 1 else ""
        raise FamilyError(f"{where}: the config contradicts the weights: config.json has no place for {extra[0]}{more}")
    return ours


def _check_stored_tables(state: dict[str, torch.Tensor], cfg: ModelConfig, where: Path) -> None:
    """Older checkpoints store the (fixed) sinusoidal tables, which transformers loads: they must be ours."""
    table = position_table(cfg)
    for side in ("encoder", "decoder"):
        stored = state.get(f"model.{side}.embed_positions.weight")
        if stored is None:
            continue
        rows = stored[cfg.position_offset : cfg.position_offset + cfg.max_len]
        if rows.shape != table.shape or not torch.allclose(rows, table, atol=1e-4):
            raise FamilyError(
                f"{where}: model.{side}.embed_positions.weight is not the sinusoidal table of this family, "
                "which our model computes and cannot store"
            )


def model_from_state(cfg: ModelConfig, ours: dict[str, torch.Tensor], where: Path) -> Transformer:
    model = Transformer(cfg)
    own = model.state_dict()
    full = {k: ours["embed.weight"] if k.endswith("embed.weight") else ours.get(k) for k in own}
    for k, v in full.items():
        if v is None:
            raise FamilyError(f"{where} gives no value for {k}")
        if v.shape != own[k].shape:
            raise FamilyError(
                f"{where}: the config contradicts the weights: {k} has shape {tuple(v.shape)}, the config needs "
                f"{tuple(own[k].shape)}"
            )
    model.load_state_dict(full, strict=True)
    return model.eval()


# ------------------------------------------------------------------------------------------- tokenizer


def import_tokenizer(hf_dir: Path, kind: str) -> tuple[Tokenizer, str]:
    """The directory's tokenizer.json if present, else its SentencePiece model converted (Marian: source.spm +
    vocab.json; T5: spiece.model, its ids the model's)."""
    if (hf_dir / "tokenizer.json").is_file():
        try:
            return Tokenizer.load(hf_dir / "tokenizer.json"), "copied from tokenizer.json"
        except Exception as e:  # tokenizers raises a bare Exception
            raise FamilyError(f"{hf_dir / 'tokenizer.json'} is not a valid tokenizer file: {e}") from None
    if kind == "marian":
        from model.io.marian import marian_tokenizer

        return marian_tokenizer(hf_dir)
    if kind == "t5" and (hf_dir / "spiece.model").is_file():
        return t5_tokenizer(hf_dir)
    wanted = {"t5": "spiece.model", "marian": "source.spm + vocab.json"}.get(kind)
    raise FamilyError(
        f"{hf_dir} has no tokenizer.json{f' and no {wanted}' if wanted else ''}; write one with transformers "
        "(AutoTokenizer.from_pretrained(dir).save_pretrained(dir)) in an environment that has it"
    )


def t5_tokenizer(hf_dir: Path) -> tuple[Tokenizer, str]:
    """T5's spiece.model: its pieces are the model's ids, the 100 sentinel tokens <extra_id_N> after them."""
    from sentencepiece import sentencepiece_model_pb2 as pb

    from model.io.marian import spm_to_tokenizer

    proto = pb.ModelProto()  # type: ignore[attr-defined]  # protobuf makes its message classes at import
    try:
        proto.ParseFromString((hf_dir / "spiece.model").read_bytes())
    except Exception as e:  # protobuf's DecodeError
        raise FamilyError(f"{hf_dir / 'spiece.model'} is not a sentencepiece model ({e})") from None
    vocab = {p.piece: i for i, p in enumerate(proto.pieces)}
    hf, _ = spm_to_tokenizer(hf_dir / "spiece.model", vocab)
    from tokenizers import AddedToken

    n = len(vocab)
    hf.add_special_tokens([AddedToken(f"<extra_id_{99 - i}>", special=True) for i in range(100)])
    return Tokenizer(hf), f"converted from spiece.model ({n} pieces and 100 sentinel tokens)"


def check_tokenizer(tokenizer: Tokenizer, cfg: ModelConfig, hf_dir: Path) -> None:
    """The tokenizer must fit the vocabulary and name its special tokens where the config puts them."""
    if tokenizer.vocab_size > cfg.vocab_size:
        raise FamilyError(
            f"the tokenizer of {hf_dir} does not match the vocabulary: it has {tokenizer.vocab_size} tokens but the "
            f"model only {cfg.vocab_size}"
        )
    for token, key in (("</s>", "eos_id"), ("<pad>", "pad_id")):
        found = tokenizer.token_to_id(token)
        if found is not None and found != getattr(cfg, key):
            raise FamilyError(
                f"the tokenizer of {hf_dir} does not match the vocabulary: it puts {token} at id {found}, the config "
                f"at {getattr(cfg, key)}"
            )


def language_id(tokenizer: Tokenizer, code: str, hf_dir: Path) -> int:
    """The token of a language code: NLLB's ``fra_Latn``, mBART-50's ``fr_XX``, M2M100's ``__fr__`` (or ``fr``)."""
    for token in (code, f"__{code}__"):
        found = tokenizer.token_to_id(token)
        if found is not None:
            return found
    raise FamilyError(f"the tokenizer of {hf_dir} has no language code {code!r}")


def languages(hf_dir: Path, src_lang: str | None, tgt_lang: str | None) -> tuple[str | None, str | None]:
    """The languages asked for, else those tokenizer_config.json names (NLLB's and mBART-50's carry defaults)."""
    path = hf_dir / "tokenizer_config.json"
    conf = {}
    if path.is_file():
        try:
            conf = json.loads(path.read_text())
        except json.JSONDecodeError:
            conf = {}
    src, tgt = conf.get("src_lang"), conf.get("tgt_lang")
    return src_lang or (src if isinstance(src, str) else None), tgt_lang or (tgt if isinstance(tgt, str) else None)


# ----------------------------------------------------------------------------------------- import


def import_model(
    hf_dir: str | Path,
    out_dir: str | Path,
    src_lang: str | None = None,
    tgt_lang: str | None = None,
    expect: str | None = None,
) -> Path:
    """Convert a transformers encoder-decoder directory of the family into a Decoder Lens model directory.

    ``src_lang``, ``tgt_lang``: language codes (mBART-50, M2M100, NLLB): the source's code is read before every
    source, the target's forced as the first generated token; default: tokenizer_config.json's. ``expect``: the one
    model_type accepted (``import_marian``). Nothing is written unless everything checks. Returns ``out_dir``."""
    hf_dir, out_dir = Path(hf_dir), Path(out_dir)
    if not hf_dir.is_dir():
        raise FamilyError(f"model directory {hf_dir} does not exist")
    kind, hf = read_hf_config(hf_dir, expect)
    state = read_safetensors(hf_dir)
    tokenizer, tok_note = import_tokenizer(hf_dir, kind)
    unk = tokenizer.token_to_id("<unk>")
    cfg = to_config(kind, hf, 0 if unk is None else unk, state)
    try:  # the bounds a model directory's config.json keeps to, before anything is allocated
        check_config_dict(asdict(cfg))
    except ValueError as e:
        raise FamilyError(f"{hf_dir / 'config.json'} is outside what can be loaded: {e}") from None
    check_tokenizer(tokenizer, cfg, hf_dir)
    lang_note = ""
    if kind in ("mbart", "m2m_100"):
        src, tgt = languages(hf_dir, src_lang, tgt_lang)
        changes: dict[str, int] = {}
        if src:
            changes["source_prefix_id"] = language_id(tokenizer, src, hf_dir)
        if tgt:
            changes["forced_bos_id"] = language_id(tokenizer, tgt, hf_dir)
        if changes:
            cfg = replace(cfg, **cast(dict[str, Any], changes))
            lang_note = f" Languages: source {src or 'none'} (read before every source), target {tgt or 'none'} "
            lang_note += "(forced as the first generated token)."
    elif src_lang or tgt_lang:
        raise FamilyError(f"{ARCHITECTURES[kind]} has no language codes; leave out --src-lang and --tgt-lang")
    model = model_from_state(cfg, state_to_ours(kind, state, cfg, hf_dir), hf_dir)
    save_model_dir(model, tokenizer, out_dir, card=model_card(kind, hf, hf_dir, cfg, tokenizer, tok_note + lang_note))
    return out_dir


def model_card(kind: str, hf: dict, hf_dir: Path, cfg: ModelConfig, tokenizer: Tokenizer, notes: str) -> str:
    name = hf.get("_name_or_path") or hf_dir.name
    label = {"marian": "Marian", "bart": "BART", "mbart": "mBART", "m2m_100": "M2M100", "t5": "T5"}[kind]
    version = f" (transformers {hf['transformers_version']})" if hf.get("transformers_version") else ""
    lines = [
        f"# {name} (imported from {label})\n",
        f"Converted by `python -m model import` from the transformers {ARCHITECTURES[kind]} directory `{hf_dir}`"
        f"{version}.",
        f"Family: {label}: {cfg.family}.",
        f"Weights copied one to one; decoding starts from token {cfg.decoder_start_id} "
        f"(`{tokenizer.id_to_token(cfg.decoder_start_id)}`); tokenizer {notes}",
        "Dropout is set to 0 (inference only). The original license and terms of the model apply.",
    ]
    if kind == "marian":
        lines[3] = lines[3].replace(
            "one to one;", 'one to one; positional encoding in Marian\'s sin | cos halves (`pe_layout="half"`);'
        )
    readme = hf_dir / "README.md"
    if readme.is_file():
        lines += ["\n## Original model card\n", readme.read_text(encoding="utf-8", errors="replace")]
    return "\n".join(lines).rstrip() + "\n"


__all__ = ["ARCHITECTURES", "FamilyError", "import_model"]
