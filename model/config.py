"""One frozen ModelConfig, saved as config.json beside the weights."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

PE_LAYOUTS = ("interleaved", "half")
ACTIVATIONS = ("relu", "swish", "silu", "gelu")


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
        return json.dumps(asdict(self), indent=2)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json() + "\n")

    @classmethod
    def from_dict(cls, data: dict) -> ModelConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown config keys: {', '.join(unknown)}")
        return cls(**data)

    @classmethod
    def load(cls, path: str | Path) -> ModelConfig:
        return cls.from_dict(json.loads(Path(path).read_text()))
