"""Downloads of what is shown: the decode summary (strict JSON), step records and traces (NPZ), tables (CSV)."""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping

import numpy as np
import streamlit as st

from model.jsonio import dump_bytes
from model.steps import stack_view, summary_dict
from model.trace import teacher_forced_trace


def npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    np.savez_compressed(buf, **{k: np.asarray(v) for k, v in arrays.items()})
    return buf.getvalue()


def save_to_bytes(save: Callable[[io.BytesIO], None]) -> bytes:
    buf = io.BytesIO()
    save(buf)
    return buf.getvalue()


def render_decode(lm, ch, res, rows, step: int, reads, src_tokens, table, token_text, live_table=None) -> None:
    st.subheader("Export")

    def summary() -> bytes:
        return dump_bytes(summary_dict(ch, res, token_text, src_tokens, step, extra={"followed_rows": list(rows)}))

    def record_npz() -> bytes:
        arrays = stack_view(res.steps, rows, step)  # every layer, built on click
        arrays.update({k: v[0] if v.ndim >= 3 and v.shape[0] == 1 else v for k, v in res.encoder.items()})
        arrays["tokens.dec_input"] = np.array(reads)
        arrays["tokens.src"] = np.array(src_tokens)
        return npz_bytes(arrays)

    def full_trace() -> bytes:
        out = [i for i in res.ids if i != lm.cfg.eos_id]
        tr = teacher_forced_trace(lm.model, lm.tokenizer, list(res.src_ids[:-1]), out, causal=True)
        return save_to_bytes(tr.save_npz)

    with st.container(horizontal=True):
        st.download_button(
            "Summary (JSON)",
            summary,
            file_name="decoder_lens_summary.json",
            mime="application/json",
            on_click="ignore",
            key="dl_json",
        )
        st.download_button(
            "Positions 0…current (NPZ)",
            record_npz,
            file_name=f"decoder_lens_position{step}.npz",
            mime="application/octet-stream",
            on_click="ignore",
            key="dl_steps",
        )
        st.download_button(
            "Full trace of the output (NPZ)",
            full_trace,
            file_name="decoder_lens_trace.npz",
            mime="application/octet-stream",
            on_click="ignore",
            key="dl_trace",
        )
        st.download_button(
            "Decoder-input table (CSV)",
            lambda: table.to_csv(index=False),
            file_name="decoder_inputs.csv",
            mime="text/csv",
            on_click="ignore",
            key="dl_csv",
        )
        if live_table is not None:
            st.download_button(
                "Live beams (CSV)",
                lambda: live_table.to_csv(index=False),
                file_name="beams.csv",
                mime="text/csv",
                on_click="ignore",
                key="dl_beams",
            )
    st.caption(
        "Every figure has a camera button (top right, on hover) that saves it as a PNG. The page's link "
        "holds every choice (sentence, decoding, forced tokens, stage, layer, head, position), so it "
        "reopens this exact view."
    )
