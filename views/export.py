"""Downloads of what is shown: the decode summary (strict JSON), step records and traces (NPZ), tables (CSV), the
handout (HTML)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import streamlit as st

from model.core import keys
from model.core.config import ModelConfig
from model.core.jsonio import dump_bytes
from model.decode.decoding import DecodeResult, source_body
from model.decode.steps import prefix_scores, stack_view, summary_dict
from model.decode.trace import teacher_forced_trace
from model.io.checkpoint import LoadedModel

from .state import Choices

if TYPE_CHECKING:
    import pandas as pd

LABEL = "Export: summary (JSON), records (NPZ), tables (CSV), handout (HTML)"
JSON, NPZ, CSV, HTML = "application/json", "application/octet-stream", "text/csv", "text/html"
HANDOUT_LABEL = "Handout (HTML): every position's figures"


def downloads(files: list[tuple[str, Callable[[], bytes | str], str, str, str]]) -> None:
    """One row of download buttons: (label, a function that makes the file on click, file name, MIME type, key)."""
    with st.container(horizontal=True):
        for label, make, name, mime, key in files:
            st.download_button(label, make, file_name=name, mime=mime, on_click="ignore", key=key)


def npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    """The arrays as an NPZ file, stored uncompressed: deflating them took most of the server's time for a click on
    the download (about 25 of 30 ms for a position's records), for a quarter of their size (0.9 MB instead of 0.67),
    and a class's clicks share the server's cores."""
    buf = io.BytesIO()
    np.savez(buf, allow_pickle=False, **{k: np.asarray(v) for k, v in arrays.items()})
    return buf.getvalue()


def save_to_bytes(save: Callable[[Any], None]) -> bytes:
    """What ``save`` writes to a file, as bytes (it is given an in-memory one)."""
    buf = io.BytesIO()
    save(buf)
    return buf.getvalue()


def with_prefix_scores(arrays: Mapping[str, np.ndarray], cfg: ModelConfig) -> dict[str, np.ndarray]:
    """Self-attention maps as the figures show them: every raw score, −∞ only in the mask and the masked scores,
    weights exactly 0 on the future (a KV-cached step never computes the future cells: they are recomputed), scaled
    or not and with T5's relative position bias as the model computes them."""
    out = dict(arrays)
    for layer in range(cfg.n_decoder_layers):
        Q, K = keys.dec(layer, "self", "Q"), keys.dec(layer, "self", "K")
        if Q in arrays:
            bias = keys.Records(arrays).position_bias(layer)  # T5's relative position bias, or None
            maps = prefix_scores(arrays[Q], arrays[K], True, cfg.scale_attention, bias)
            out.update(keys.prefixed(keys.dec(layer, "self"), maps))
    return out


def summary_bytes(
    ch: Choices,
    res: DecodeResult,
    rows: Sequence[int],
    step: int,
    src_tokens: Sequence[str],
    token_text: Callable[[int], str],
    table: pd.DataFrame,
    followed: dict | None = None,
) -> bytes:
    """The Summary (JSON) download: strict JSON, the model named by its directory's name, never the server's path;
    the followed hypothesis (``followed``: which one, how it ended) and its decoder-input table as shown (reads,
    predicts, p, entropy, forced)."""
    named = replace(ch, model_dir=Path(ch.model_dir).name)
    positions = json.loads(table.to_json(orient="records"))
    extra = {"followed": followed, "followed_rows": list(rows), "followed_positions": positions}
    mine = {int(r["position"]) for r in positions if r["forced by you"]}
    return dump_bytes(summary_dict(named, res, token_text, src_tokens, step, extra=extra, user_forced=mine))


def record_bytes(
    lm: LoadedModel, res: DecodeResult, rows: Sequence[int], step: int, reads: Sequence[str], src_tokens: Sequence[str]
) -> bytes:
    """The positions 0…step download (NPZ): every layer's records along the followed rows, the encoder's, tokens."""
    arrays = with_prefix_scores(stack_view(res.steps, rows, step), lm.cfg)
    arrays.update({k: v[0] if v.ndim >= 3 and v.shape[0] == 1 else v for k, v in res.encoder.items()})
    arrays[keys.TOKENS_DEC_INPUT] = np.array(reads)
    arrays[keys.TOKENS_SRC] = np.array(src_tokens)
    return npz_bytes(arrays)


def trace_bytes(lm: LoadedModel, res: DecodeResult) -> bytes:
    """The full trace download (NPZ): a teacher-forced pass over the translation shown."""
    out = [i for i in res.ids if i != lm.cfg.eos_id]
    tr = teacher_forced_trace(lm.model, lm.tokenizer, source_body(res.src_ids, lm.cfg), out, causal=True)
    return save_to_bytes(tr.save_npz)


@dataclass(frozen=True)
class Position:
    """The followed line at the position shown, as its downloads are built from it: the choices (``ch``), the
    decode, the line's beam rows up to ``step``, what each position reads, and the source's tokens."""

    ch: Choices
    res: DecodeResult
    rows: list[int]
    step: int
    reads: list[str]
    src_tokens: list[str]
    followed: dict  # the followed hypothesis (stepping.followed_summary)


def render_decode(
    lm: LoadedModel,
    at: Position,
    table: Callable[[], pd.DataFrame],
    token_text: Callable[[int], str],
    live_table: pd.DataFrame | None = None,
    handout: Callable[[], bytes] | None = None,
) -> None:
    """Downloads are built on click (``table``: a function that returns the decoder-input table; ``handout``: one
    that returns the handout's HTML): the NPZ files hold every layer."""
    ch, res, rows, step, reads, src_tokens = at.ch, at.res, at.rows, at.step, at.reads, at.src_tokens

    def summary() -> bytes:
        return summary_bytes(ch, res, rows, step, src_tokens, token_text, table(), at.followed)

    def record_npz() -> bytes:
        return record_bytes(lm, res, rows, step, reads, src_tokens)

    def full_trace() -> bytes:
        return trace_bytes(lm, res)

    files = [
        ("Summary (JSON)", summary, "decoder_lens_summary.json", JSON, "dl_json"),
        ("Positions 0…current (NPZ)", record_npz, f"decoder_lens_position{step}.npz", NPZ, "dl_steps"),
        ("Full trace of the output (NPZ)", full_trace, "decoder_lens_trace.npz", NPZ, "dl_trace"),
        ("Decoder-input table (CSV)", lambda: table().to_csv(index=False), "decoder_inputs.csv", CSV, "dl_csv"),
    ]
    if live_table is not None:
        files.append(("Live beams (CSV)", lambda: live_table.to_csv(index=False), "beams.csv", CSV, "dl_beams"))
    if handout is not None:
        files.append((HANDOUT_LABEL, handout, "decoder_lens_handout.html", HTML, "dl_handout"))
    downloads(files)
    st.caption(
        "Every figure's toolbar (top right, on hover) saves it as a PNG (camera) or an SVG. The handout is one "
        "web page of the whole line that opens offline: the sentence, its translation and, at every position, the "
        "chosen stages' figures (All stages for an explanation stage), each with its description, as PNG and SVG, "
        "and each position's figures in one ZIP. The page's link holds every choice (sentence, decoding, forced "
        "tokens, stage, layer, head, position), so it reopens this exact view."
    )
