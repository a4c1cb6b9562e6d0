"""One frozen ModelConfig, saved as config.json beside the weights."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path

PE_LAYOUTS = ("interleaved", "half", "fairseq")
ACTIVATIONS = ("relu", "swish", "silu", "gelu", "gelu_new")  # gelu_new: tanh-approximated GELU (T5's gated-gelu)
NORM_POSITIONS = ("post", "pre")  # post: LayerNorm(x + Sublayer(x)), the paper; pre: x + Sublayer(Norm(x))
NORM_KINDS = ("layer", "rms")  # LayerNorm (mean and variance, gain and bias); RMSNorm (root mean square, gain: T5)
POSITIONS = ("sinusoidal", "learned", "relative")  # added to the embeddings (a fixed or a learned table), or none
# and a learned bias per relative distance added to self-attention's scores (T5)
# Bounds a config.json must keep to (generous: the bundled model is 8000 / 256 / 4 / 1024 / 3 + 3 / 128, Marian
# models 58k / 512 / 8 / 2048 / 6 + 6 / 512). They stop a damaged or hostile file from making the loader allocate
# gigabytes before the weights are even read; the weight file's header is then checked against the sizes.
SIZE_BOUNDS = {
    "vocab_size": (1, 1_048_576),
    "d_model": (1, 16_384),
    "n_heads": (1, 1_024),
    "d_ff": (1, 131_072),
    "n_encoder_layers": (1, 256),
    "n_decoder_layers": (1, 256),
    "max_len": (2, 65_536),
    "position_offset": (0, 65_536),
    "relative_buckets": (2, 1_024),
    "relative_max_distance": (1, 65_536),
    "d_kv": (0, 16_384),
}
MAX_PE_CELLS = 2**25  # max_len × d_model: the two positional tables are built in memory, not read from the file
SPECIAL_IDS = ("pad_id", "bos_id", "eos_id", "unk_id", "decoder_start_id")


def check_config_dict(data: dict) -> None:
    """Refuse a config.json whose values have the wrong type or sizes outside ``SIZE_BOUNDS`` (one sentence)."""
    types = {f.name: f.type for f in fields(ModelConfig)}
    for key, value in data.items():
        want = types.get(key)
        if want in ("int", int) and (not isinstance(value, int) or isinstance(value, bool)):
            raise ValueError(f"{key} must be a whole number, not {value!r}")
        if want in ("float", float) and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise ValueError(f"{key} must be a number, not {value!r}")
        if want in ("float", float) and not math.isfinite(value):
            raise ValueError(f"{key} must be a finite number, not {value!r}")
        if want in ("bool", bool) and not isinstance(value, bool):
            raise ValueError(f"{key} must be true or false, not {value!r}")
        if want in ("str", str) and not isinstance(value, str):
            raise ValueError(f"{key} must be a string, not {value!r}")
    defaults = ModelConfig.__dataclass_fields__

    def get(key: str):
        return data.get(key, defaults[key].default)

    for key, (lo, hi) in SIZE_BOUNDS.items():
        if not lo <= get(key) <= hi:
            raise ValueError(f"{key}={get(key)} is outside the sane range {lo}…{hi:,}")
    d, h = get("d_model"), get("n_heads")
    if not get("d_kv") and d % h:
        raise ValueError(f"d_model={d} is not divisible by n_heads={h}")
    if (get("max_len") + get("position_offset")) * d > MAX_PE_CELLS:
        raise ValueError(
            f"(max_len={get('max_len')} + position_offset={get('position_offset')}) × d_model={d} is more than "
            f"{MAX_PE_CELLS:,} positional-table cells"
        )
    if get("n_heads") * get("d_kv") > SIZE_BOUNDS["d_model"][1]:
        raise ValueError(f"n_heads={h} × d_kv={get('d_kv')} is outside the sane range of attention widths")
    for key in ("forced_bos_id", "source_prefix_id"):
        if not -1 <= get(key) < get("vocab_size"):
            raise ValueError(f"{key}={get(key)} is outside the vocabulary (vocab_size={get('vocab_size')}; -1: none)")
    if not 0 < get("output_scale") <= 1e4:
        raise ValueError(f"output_scale={get('output_scale')} is outside the sane range (0, 10000]")
    for key in SPECIAL_IDS:
        if not 0 <= get(key) < get("vocab_size"):
            raise ValueError(f"{key}={get(key)} is outside the vocabulary (vocab_size={get('vocab_size')})")
    if not 0 <= get("dropout") < 1:
        raise ValueError(f"dropout={get('dropout')} is outside 0…1")
    if not 0 < get("layer_norm_eps") <= 1:
        raise ValueError(f"layer_norm_eps={get('layer_norm_eps')} is outside the sane range (0, 1]")


@dataclass(frozen=True)
class ModelConfig:
    """Hyper-parameters of the encoder-decoder. Defaults are the paper's base model; the rest of the family
    (Marian, BART, mBART, M2M100/NLLB, T5) are other settings of the fields after ``decoder_start_id``."""

    vocab_size: int = 8000
    d_model: int = 512
    n_heads: int = 8
    d_ff: int = 2048
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6
    max_len: int = 512  # longest source or target the positional table covers
    dropout: float = 0.1
    pe_layout: str = "interleaved"  # paper: sin/cos interleaved; Marian/fairseq: sin | cos halves
    activation: str = "relu"
    scale_embedding: bool = True  # multiply embeddings by sqrt(d_model)
    tie_output: bool = True  # output projection shares the embedding matrix
    final_logits_bias: bool = False
    layer_norm_eps: float = 1e-5
    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2
    unk_id: int = 3
    decoder_start_id: int = 1  # Marian starts decoding from <pad>; ours from <s>
    # the family: where the norm sits and what it is, the positions, the embedding, the FFN, the attention
    norm_position: str = "post"  # NORM_POSITIONS: post (the paper, Marian, BART) or pre (mBART, M2M100, NLLB, T5)
    final_norm: bool = False  # a norm after each stack's last layer (the pre-norm models)
    norm_kind: str = "layer"  # NORM_KINDS: LayerNorm, or RMSNorm (T5)
    embed_norm: bool = False  # a LayerNorm on embedding + positions before the first layer (BART, mBART)
    positions: str = "sinusoidal"  # POSITIONS: sinusoidal (pe_layout), learned (BART), relative (T5)
    position_offset: int = 0  # the table row of position 0 (BART's learned table: 2; M2M100's: pad_id + 1)
    relative_buckets: int = 32  # T5: buckets of relative distance, each a learned bias per head
    relative_max_distance: int = 128  # T5: distances from here on share the last bucket
    gated_ffn: bool = False  # FFN(x) = (act(x W_1) ⊙ x W_3) W_2 (T5 v1.1, Flan-T5)
    bias: bool = True  # the attention and FFN Linears have biases (T5: none)
    scale_attention: bool = True  # QKᵀ / sqrt(d_k); T5 leaves the dot products unscaled
    output_scale: float = 1.0  # the decoder output × this before the output projection (T5 tied: d_model^-0.5)
    d_kv: int = 0  # width of a head; 0: d_model / n_heads (T5 sets its own)
    forced_bos_id: int = -1  # the first generated token, forced (a target-language code: mBART-50, NLLB); -1: none
    source_prefix_id: int = -1  # a token read before every source (its language code: mBART-50, NLLB); -1: none

    def __post_init__(self):
        if not self.d_kv and self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        for name, allowed in (
            ("pe_layout", PE_LAYOUTS),
            ("activation", ACTIVATIONS),
            ("norm_position", NORM_POSITIONS),
            ("norm_kind", NORM_KINDS),
            ("positions", POSITIONS),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, not {getattr(self, name)!r}")
        if self.positions == "relative" and self.relative_max_distance <= self.relative_buckets // 2:
            raise ValueError(
                f"relative_max_distance={self.relative_max_distance} must exceed half of relative_buckets="
                f"{self.relative_buckets} (the buckets of exact distances)"
            )
        if self.positions == "relative" and self.position_offset:
            raise ValueError("position_offset applies to a positional table, which relative positions do not have")

    @property
    def d_k(self) -> int:
        return self.d_kv or self.d_model // self.n_heads

    @property
    def family(self) -> str:
        """The settings in a few words, as the model card and the pages name them."""
        norm = f"{self.norm_position}-norm {'RMSNorm' if self.norm_kind == 'rms' else 'LayerNorm'}"
        if self.positions == "relative":
            pos = f"relative position bias ({self.relative_buckets} buckets)"
        elif self.positions == "learned":
            pos = "learned positions"
        else:
            pos = f"sinusoidal positions ({self.pe_layout})"
        ffn = f"{'gated ' if self.gated_ffn else ''}{self.activation} FFN"
        return ", ".join(
            [norm, pos, ffn]
            + (["final norms"] if self.final_norm else [])
            + (["embedding LayerNorm"] if self.embed_norm else [])
            + ([] if self.scale_attention else ["unscaled attention"])
            + ([] if self.bias else ["no biases"])
        )

    def paper_differences(self) -> list[tuple[str, str]]:
        """Where this model differs from the paper's (the bundled model's settings), each with the key of the Learn
        chapter that teaches the paper's form of it (``model.lesson.learn.CHAPTER_KEYS``); [] for the paper's."""
        out = []
        if self.norm_position == "pre":
            out.append(("the norm before each sublayer (pre-norm: Norm → sublayer → add)", "addnorm"))
        if self.norm_kind == "rms":
            out.append(("RMSNorm (no mean, no β)", "addnorm"))
        if self.final_norm:
            out.append(("a final norm after each stack", "output"))
        if self.positions == "relative":
            out.append(("no positional encoding: a learned bias per relative distance added to the scores", "embed"))
        elif self.positions == "learned":
            out.append(("learned positions", "embed"))
        if self.embed_norm:
            out.append(("a LayerNorm on the embeddings", "embed"))
        if not self.scale_attention:
            out.append(("unscaled scores (no 1/√d_k)", "scores"))
        if self.gated_ffn or self.activation != "relu":
            out.append((f"a {'gated ' if self.gated_ffn else ''}{self.activation} FFN", "ffn"))
        if self.norm_position == "pre" and not self.final_norm:
            out.append(("layer outputs the output head was never trained to read (no final norm)", "lens"))
        return out

    def to_json(self) -> str:
        from model.core.jsonio import dumps

        return dumps(asdict(self), indent=2)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json() + "\n")

    @classmethod
    def from_dict(cls, data: dict) -> ModelConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown config keys: {', '.join(unknown)}")
        check_config_dict(data)
        return cls(**data)

    @classmethod
    def load(cls, path: str | Path) -> ModelConfig:
        data = json.loads(Path(path).read_text())
        if not isinstance(data, dict):
            raise ValueError(f"the file holds a JSON {type(data).__name__}, not an object")
        return cls.from_dict(data)
