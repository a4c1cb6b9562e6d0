"""What every stage receives: the arrays of positions 0..T-1 for one layer, how to label them, the page's view, and
the run they come from (a decode followed along one line, or a teacher-forced trace), which the output and the
explanation stages read through one interface."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from model.core import keys
from model.core.config import ModelConfig
from model.core.keys import Records
from model.core.positions import position_labels
from model.decode.decoding import BeamStep, DecodeResult
from model.decode.steps import (
    Line,
    OutputRecord,
    heads_concat,
    mean_weights,
    output_record,
    stack_view,
    top_k,
)
from model.decode.trace import Trace
from model.io.checkpoint import LoadedModel

from ..common import get_decode, head_label, show_token
from ..plot import builders as viz  # viz, its figures built on first use (cached)
from ..state import MEAN_HEADS, Choices, View

if TYPE_CHECKING:
    import pandas as pd

TOP_SHOWN = 10  # bars in the next-token chart / alternatives offered in the what-if box


def per_head(arr: np.ndarray, head: int | str) -> np.ndarray:
    """(H, T, X) → (T, X): head ``head``, or every head side by side for the mean-of-heads choice."""
    return heads_concat(arr) if head == MEAN_HEADS else arr[int(head)]


def attention(arr: np.ndarray, head: int | str) -> np.ndarray:
    """(H, Tq, Tk) → (Tq, Tk): head ``head``, or the mean over heads (masked cells stay masked)."""
    return mean_weights(arr) if head == MEAN_HEADS else arr[int(head)]


@dataclass(frozen=True)
class RunMatrix:
    """What a stage shows for one run, declared by the stage for Compare's side-by-side and difference: ``values``
    (T, X), one row per decoder position; its columns' labels and name; what the values are and whether they are
    signed; what the title adds to the stage's label (its layer, its head)."""

    values: np.ndarray  # (T, X)
    columns: list[str]
    x_title: str
    value_name: str
    signed: bool
    where: str = ""
    tokens: bool = False  # the columns are tokens (numbered in their labels), not dimensions


def dimensions(values: np.ndarray) -> list[str]:
    """Column labels of a matrix whose columns are dimensions: their numbers."""
    return [str(d) for d in range(values.shape[1])]


def over_tokens(
    values: np.ndarray, tokens: list[str], x_title: str, value_name: str, signed: bool, layer: int, head: int | str
) -> RunMatrix:
    """A ``RunMatrix`` whose columns are ``tokens``, of one head of layer ``layer`` (or their mean)."""
    where = f", layer {layer}, {head_label(head)}"
    return RunMatrix(values, [show_token(t) for t in tokens], x_title, value_name, signed, where, tokens=True)


@dataclass(frozen=True)
class NextTokens:
    """The next-token distribution at the view's position, as the output stage shows it."""

    heading: str
    ids: np.ndarray  # (TOP_SHOWN,) the most likely next tokens
    probs: np.ndarray  # (TOP_SHOWN,) their probabilities
    chosen_id: int | None
    entropy: float
    title: str
    key: str
    chosen_label: str = "Chosen token"
    chosen_p: float | None = None  # the chosen token's own probability (it may be outside the bars)
    chosen_name: str | None = None  # named as its stream names it (a byte piece by its character)


@dataclass(frozen=True)
class Decoded:
    """The step view's run: a recorded decode followed along ``line``, at position ``step``."""

    lm: LoadedModel
    choices: Choices
    res: DecodeResult
    line: Line
    step: int
    src_ids: tuple[int, ...]
    reference: str  # the reference translation, "" for none (the ablation's loss is measured on it)
    table: Callable[[], pd.DataFrame]  # the decoder-input table of positions 0..step (section 1, its CSV), when asked
    predicts: str  # the label of the token chosen at ``step``

    @property
    def rows(self) -> list[int]:
        return list(self.line.rows[: self.step + 1])

    @property
    def chosen_ids(self) -> list[int]:
        return list(self.line.predicts[: self.step + 1])

    @property
    def whole_ids(self) -> list[int] | None:
        return list(self.line.predicts)

    @property
    def base_ids(self) -> tuple[int, ...]:
        return tuple(self.res.ids)

    @property
    def reference_ids(self) -> list[int] | None:
        ref = self.reference.strip()
        return self.lm.tokenizer.encode(ref)[: self.lm.cfg.max_len - 1] if ref else None

    @property
    def beam_steps(self) -> list[BeamStep] | None:
        return self.res.beam_steps

    def layer_outputs(self) -> Records[np.ndarray]:
        return stack_view(self.res.steps, self.rows, self.step, keep=keys.is_layer_output)

    def lens_record(self) -> OutputRecord | None:
        return output_record(self.res.steps, self.rows, self.step)

    def next_tokens(self) -> NextTokens:
        cur, r = self.res.steps[self.step], self.line.rows[self.step]
        return NextTokens(
            "Output: next-token distribution",
            cur.top_ids[r],
            np.exp(cur.top_logprobs[r]),
            self.line.predicts[self.step],
            float(cur.entropy[r]),
            f"Top {TOP_SHOWN} next tokens at position {self.step}",
            "dec_topk",
            chosen_p=self.line.probs[self.step],
            chosen_name=self.predicts,
        )


@dataclass(frozen=True)
class TeacherForced:
    """The teacher-forcing view's run: one pass over the reference (``trace``, without the mask if so chosen)."""

    lm: LoadedModel
    choices: Choices
    trace: Trace
    src_ids: tuple[int, ...]
    step: int

    table = None  # its loss table is the page's, shown whatever the stage
    whole_ids = None
    beam_steps = None

    @property
    def chosen_ids(self) -> list[int]:
        return [int(i) for i in self.trace.arrays.label_ids]

    @property
    def base_ids(self) -> tuple[int, ...]:
        return tuple(get_decode(self.lm, self.choices, self.src_ids).ids)

    @property
    def reference_ids(self) -> list[int]:
        return self.chosen_ids[:-1]

    def layer_outputs(self) -> Records[np.ndarray]:
        return self.trace.arrays

    def lens_record(self) -> None:
        return None

    def next_tokens(self) -> NextTokens:
        probs = self.trace.arrays.probs[self.step]
        ids, p = top_k(probs, TOP_SHOWN)
        return NextTokens(
            f"Output at position {self.step}",
            ids,
            p,
            self.chosen_ids[self.step],
            viz.entropy(probs),
            f"Top {TOP_SHOWN} at position {self.step}; the label is outlined if it is among them",
            "tf_topk",
            chosen_label="Label",
        )


@dataclass(frozen=True)
class StageContext:
    """``arrays`` are shaped like ``Trace.arrays`` (positions 0..T-1). Position i reads ``reads[i]`` and predicts
    ``predicts[i]`` (the token chosen there, or the label in teacher forcing); ``current`` is the position the
    view is about. ``incremental``: a KV-cached step view (only the newest query row is computed at a step)."""

    lm: LoadedModel
    view: View
    run: Decoded | TeacherForced
    arrays: Records[np.ndarray]
    reads: list[str]
    predicts: list[str]
    src_tokens: list[str]
    current: int
    incremental: bool
    causal: bool
    key: str  # prefix of the figure keys (one per view)

    @property
    def cfg(self) -> ModelConfig:
        return self.lm.cfg

    @property
    def layer(self) -> int:
        return self.view.layer

    @property
    def head(self) -> int | str:
        return self.view.head

    @property
    def grid(self) -> bool:
        return self.view.grid

    @cached_property
    def pe_table(self) -> np.ndarray:
        """The model's positional encoding table (positions, d_model)."""
        return self.lm.model.tgt_embed.pe.detach().cpu().numpy()

    @property
    def rows(self) -> list[str]:
        """Row labels of the decoder positions: the token read → the token predicted (e.g. "petite → fille")."""
        return position_labels(self.reads, self.predicts, show_token)

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

    def per_head(self, arr: np.ndarray) -> np.ndarray:
        return per_head(arr, self.head)

    def attention(self, arr: np.ndarray) -> np.ndarray:
        return attention(arr, self.head)

    @property
    def reading(self) -> str:
        """One sentence on how to read an attention row, true in both views."""
        return (
            "Each row is one decoder position, labelled *token it reads → token it predicts*; each column is "
            "a token it can attend to."
        )
