"""One frozen ModelConfig, saved as config.json beside the weights."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path

PE_LAYOUTS = ("interleaved", "half")
ACTIVATIONS = ("relu", "swish", "silu", "gelu")
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
    if d % h:
        raise ValueError(f"d_model={d} is not divisible by n_heads={h}")
    if get("max_len") * d > MAX_PE_CELLS:
        raise ValueError(f"max_len={get('max_len')} × d_model={d} is more than {MAX_PE_CELLS:,} positional-table cells")
    for key in SPECIAL_IDS:
        if not 0 <= get(key) < get("vocab_size"):
            raise ValueError(f"{key}={get(key)} is outside the vocabulary (vocab_size={get('vocab_size')})")
    if not 0 <= get("dropout") < 1:
        raise ValueError(f"dropout={get('dropout')} is outside 0…1")
    if not 0 < get("layer_norm_eps") <= 1:
        raise ValueError(f"layer_norm_eps={get('layer_norm_eps')} is outside the sane range (0, 1]")


@dataclass(frozen=True)
class ModelConfig:
    """Hyper-parameters of the encoder-decoder. Defaults are the paper's base model."""

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

    def __post_init__(self):
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if self.pe_layout not in PE_LAYOUTS:
            raise ValueError(f"pe_layout must be one of {PE_LAYOUTS}, not {self.pe_layout!r}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, not {self.activation!r}")

    @property
    def d_k(self) -> int:
        return self.d_model // self.n_heads

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
