"""What every stage section receives: the arrays of positions 0..T-1 for one layer and how to label them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from model.config import ModelConfig
from model.steps import heads_concat, mean_weights

from ..common import head_label, show_token
from ..state import MEAN_HEADS


@dataclass(frozen=True)
class StageContext:
    """``arrays`` are shaped like ``Trace.arrays`` (positions 0..T-1). Position i reads ``reads[i]`` and predicts
    ``predicts[i]`` (the token chosen there, or the label in teacher forcing); ``current`` is the position the
    view is about. ``incremental``: a KV-cached step view (only the newest query row is computed at a step)."""

    cfg: ModelConfig
    arrays: dict
    reads: list[str]
    predicts: list[str]
    src_tokens: list[str]
    layer: int
    head: int | str
    grid: bool
    current: int
    incremental: bool
    causal: bool
    key: str  # prefix of the figure keys (one per view)
    pe_table: np.ndarray  # the model's positional encoding table (positions, d_model)

    @property
    def rows(self) -> list[str]:
        """Row labels of the decoder positions: the token read → the token predicted (e.g. "petite → fille")."""
        return [f"{show_token(r)} → {show_token(p)}" for r, p in zip(self.reads, self.predicts)]

    @property
    def keys(self) -> list[str]:
        """Column labels of self-attention: the token each key position reads."""
        return [show_token(r) for r in self.reads]

    @property
    def src_rows(self) -> list[str]:
        return [show_token(t) for t in self.src_tokens]

    @property
    def hname(self) -> str:
        return head_label(self.head)

    @property
    def L(self) -> str:
        return f"dec.{self.layer}"

    def per_head(self, arr: np.ndarray) -> np.ndarray:
        """(H, T, X) → (T, X): the chosen head, or every head side by side for the mean-of-heads choice."""
        return heads_concat(arr) if self.head == MEAN_HEADS else arr[int(self.head)]

    def attention(self, arr: np.ndarray) -> np.ndarray:
        """(H, Tq, Tk) → (Tq, Tk): the chosen head, or the mean over heads (masked cells stay masked)."""
        return mean_weights(arr) if self.head == MEAN_HEADS else arr[int(self.head)]

    @property
    def reading(self) -> str:
        """One sentence on how to read an attention row, true in both views."""
        return (
            "Each row is one decoder position, labelled *token it reads → token it predicts*; each column is "
            "a token it can attend to."
        )
