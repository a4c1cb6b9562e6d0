"""The compiled untraced step (model.decode.fused) against the numpy step it replaces: the same logits and caches
to float
rounding, the same decodes, and taken only where nothing is recorded or ablated."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from model.core.ablation import Ablation
from model.decode import fused
from model.decode.decoding import DecodeOptions, decode, greedy_batch
from model.decode.lean import LeanDecoder
from model.testing import make_model

ROOT = Path(__file__).resolve().parents[2]


def _pair(model, **kw) -> tuple[LeanDecoder, LeanDecoder]:
    compiled, in_numpy = LeanDecoder(model, **kw), LeanDecoder(model, **kw)
    in_numpy.compiled = None
    assert compiled.compiled is not None
    return compiled, in_numpy


@pytest.fixture
def compiled_calls(monkeypatch) -> list:
    """The calls of the compiled step, counted."""
    calls, original = [], fused.step

    def counted(*args):
        calls.append(1)
        return original(*args)

    monkeypatch.setattr(fused, "step", counted)
    return calls


def _sources(model, lengths, seed=0):
    g = torch.Generator().manual_seed(seed)
    cfg = model.cfg
    return [torch.randint(4, cfg.vocab_size, (n,), generator=g).tolist() + [cfg.eos_id] for n in lengths]


@pytest.mark.parametrize("activation", ["relu", "gelu", "silu"])
@pytest.mark.parametrize("rows", [1, 2, 5, 7])  # one row; groups of five, full and short
@pytest.mark.parametrize("fold", [True, False])
def test_compiled_step_equals_the_numpy_step(activation, rows, fold):
    """Logits and the K, V written, step after step, for rows that read one source (folded into the source or not)
    and for rows that each read their own, padded source; an odd vocabulary (the products' last odd column)."""
    model = make_model(301, activation=activation, final_logits_bias=True, tie_output=False)
    with torch.no_grad():
        model.final_logits_bias.normal_()
    compiled, in_numpy = _pair(model, rows=rows)
    for lean in (compiled, in_numpy):
        lean.fold_max = 10**6 if fold else 0
    srcs = _sources(model, [9, 4, 6, 11, 3, 8, 5][:rows])
    for own_sources in (False, True):
        if own_sources:
            ids = np.full((rows, max(map(len, srcs))), model.cfg.pad_id)
            for r, s in enumerate(srcs):
                ids[r, : len(s)] = s
        else:
            ids = np.array(srcs[:1])
        memory, mask = in_numpy.encode(ids)
        a, b = compiled.start(memory, mask), in_numpy.start(memory, mask)
        if not own_sources:
            a, b = a.select(np.zeros(rows, np.int64)), b.select(np.zeros(rows, np.int64))
        assert (a.folded is not None) == fold  # folded per row too, when each reads its own source
        rng = np.random.default_rng(rows)
        for t in range(9):
            tokens = rng.integers(4, model.cfg.vocab_size, rows)
            la, a, _ = compiled.step(tokens, a)
            lb, b, _ = in_numpy.step(tokens, b)
            np.testing.assert_allclose(la, lb, atol=2e-5, rtol=0, err_msg=f"t={t}")
            np.testing.assert_allclose(a.KV[:, :, :, :, : t + 1], b.KV[:, :, :, :, : t + 1], atol=2e-5, rtol=0)
            if rows > 1 and t % 3 == 2:  # a beam's reorder in between
                order = rng.integers(0, rows, rows)
                a, b = a.select(order), b.select(order)


def test_decodes_are_the_same_compiled_or_in_numpy(tiny_model, compiled_calls):
    """Greedy, beam and batched greedy decodes give the same tokens and n-best with either step; the compiled one
    runs in each."""
    compiled, in_numpy = _pair(tiny_model, rows=4)
    srcs = _sources(tiny_model, [3, 7, 12, 5], seed=3)
    for opts in (
        DecodeOptions(strategy="greedy", max_len=20),
        DecodeOptions(strategy="beam", beam=4, max_len=20, length_penalty=0.6),
    ):
        for s in srcs:
            before = len(compiled_calls)
            a, b = decode(tiny_model, s, opts, compiled), decode(tiny_model, s, opts, in_numpy)
            assert len(compiled_calls) > before
            assert a.ids == b.ids
            assert [(h.ids, h.finished) for h in a.n_best] == [(h.ids, h.finished) for h in b.n_best]
            np.testing.assert_allclose([h.score for h in a.n_best], [h.score for h in b.n_best], atol=1e-5)
    before = len(compiled_calls)
    assert greedy_batch(tiny_model, srcs, 15, compiled) == greedy_batch(tiny_model, srcs, 15, in_numpy)
    assert len(compiled_calls) > before


def test_recorded_or_ablated_steps_stay_in_numpy(tiny_model, compiled_calls):
    """A record shows every stage and ablated decoder heads change them: those steps run in numpy, not compiled."""
    compiled = LeanDecoder(tiny_model, rows=1)
    src = _sources(tiny_model, [6])[0]
    decode(tiny_model, src, DecodeOptions(max_len=8, record=True), compiled)
    decode(tiny_model, src, DecodeOptions(max_len=8, ablation=Ablation(heads={("self", 0, 1)})), compiled)
    assert compiled_calls == []
    decode(tiny_model, src, DecodeOptions(max_len=8, ablation=Ablation(heads={("enc", 0, 1)})), compiled)
    assert compiled_calls  # encoder heads only: the decoder's steps are plain


@pytest.mark.parametrize(
    "rows", [[0, 1, 2, 3, 4], [0, 0, 1, 3, 2], [1, 0, 2, 3, 4], [4, 4, 4, 4, 4], [1, 2, 3, 4, 0], [2, 0, 1, 1, 3]]
)
def test_reorder_is_index_select_in_place(rows):
    """A beam's reorder in place gives what indexing gives: kept rows, chains, repeats, a swap and whole cycles."""
    KV = np.random.default_rng(0).standard_normal((2, 5, 2, 3, 10, 4)).astype(np.float32)
    t = 7
    want = KV.copy()
    want[:, :, :, :, :t] = KV[:, rows, :, :, :t]
    fused.reorder(KV, np.array(rows, np.int64), t)
    np.testing.assert_array_equal(KV, want)


@pytest.mark.slow
def test_the_step_still_runs_where_no_compiled_code_can_be_cached():
    """A read-only install with no writable home has nowhere to cache the compiled code: it is compiled in the
    process instead of failing the import (simulated by leaving numba no cache location)."""
    code = (
        "import numba.core.caching as c; c.CacheImpl._locator_classes = []\n"
        "from model.testing import make_model\n"
        "from model.decode.decoding import DecodeOptions, decode\n"
        "m = make_model(300, n_decoder_layers=1, n_encoder_layers=1)\n"
        "print(decode(m, [5, 6, 7, 2], DecodeOptions(strategy='beam', beam=2, max_len=4)).ids)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("(")
