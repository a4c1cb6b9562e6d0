"""The teacher-forced trace: every stage of one encoder + decoder pass as labelled numpy arrays."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from model.core import keys
from model.core.ablation import Ablation
from model.core.keys import Records
from model.core.tokenizer import Tokenizer
from model.core.transformer import Transformer, head_masks
from model.decode.decoding import DecodeOptions, decode, read_source, to_numpy


@dataclass(frozen=True)
class Trace:
    """Arrays without the batch axis, keyed by the stable names listed in docs/cli.md."""

    src_tokens: list[str]
    dec_input_tokens: list[str]  # <s> y1 ... yn  (target shifted right)
    label_tokens: list[str]  # y1 ... yn </s>
    arrays: Records[np.ndarray]
    causal: bool
    truncated: bool = False  # the source or target was cut to the model's max_len

    def save_npz(self, path: str | Path) -> None:
        named: dict[str, Any] = {
            **self.arrays,
            keys.TOKENS_SRC: np.array(self.src_tokens),
            keys.TOKENS_DEC_INPUT: np.array(self.dec_input_tokens),
            keys.TOKENS_LABEL: np.array(self.label_tokens),
            keys.CAUSAL: np.array(self.causal),
        }
        np.savez_compressed(path, **named)


def as_ids(text_or_ids: str | Sequence[int], tokenizer: Tokenizer) -> list[int]:
    return tokenizer.encode(text_or_ids) if isinstance(text_or_ids, str) else [int(i) for i in text_or_ids]


@torch.inference_mode()
def teacher_forced_trace(
    model: Transformer,
    tokenizer: Tokenizer,
    source: str | Sequence[int],
    target: str | Sequence[int] | None = None,
    causal: bool = True,
    ablation: Ablation | None = None,
) -> Trace:
    """Encode the source and run the decoder on the shifted target in one parallel pass.

    Without a target, the model's own greedy translation is used (decoded with the same ``ablation``).
    ``causal=False`` removes the causal mask so the trace shows the decoder "cheating" by looking at future
    tokens. ``ablation``: heads switched off; their recorded ``context`` and ``concat`` are what W_O received.
    """
    cfg = model.cfg
    src_body = as_ids(source, tokenizer)
    src, truncated = read_source(src_body, cfg)
    if target is None:
        opts = DecodeOptions(max_len=cfg.max_len - 1, ablation=ablation)
        y = [i for i in decode(model, src, opts).ids if i != cfg.eos_id]
    else:
        y = as_ids(target, tokenizer)
    truncated |= len(y) > cfg.max_len - 1
    y = y[: cfg.max_len - 1]
    dec_in, labels = [cfg.decoder_start_id, *y], [*y, cfg.eos_id]
    src_t, dec_t, lab_t = (torch.tensor([s]) for s in (src, dec_in, labels))
    heads = head_masks(ablation, cfg)
    memory, src_mask, enc = model.encode(src_t, record=True, heads=heads)
    logits, _, dec = model.decode(dec_t, memory, src_mask, causal=causal, record=True, heads=heads)
    logits = logits.float().cpu()
    records = {**enc, **dec}
    arrays = {k: v[0] for k, v in to_numpy(records, drop=()).items()}
    for key in (keys.embedding("enc", "pe"), keys.embedding("dec", "pe")):  # the positional table has no batch axis
        arrays[key] = to_numpy({key: records[key]}, drop=())[key]
    logp = F.log_softmax(logits[0], dim=-1)  # (T, V)
    arrays[keys.PROBS] = logp.exp().numpy()
    arrays[keys.LOSS] = F.nll_loss(logp, lab_t[0], reduction="none").numpy()  # (T,) cross-entropy per position
    for key, ids in ((keys.SRC_IDS, src), (keys.DEC_INPUT_IDS, dec_in), (keys.LABEL_IDS, labels)):
        arrays[key] = np.array(ids)
    src_tokens, dec_tokens, label_tokens = (tokenizer.tokens(ids) for ids in (src, dec_in, labels))
    return Trace(src_tokens, dec_tokens, label_tokens, Records(arrays), causal, truncated)
