"""The numpy step of every family (``model.decode.family_step``) against the model's own modules (the traced step
without its record, ``decoding.ModuleDecoder``) and transformers: the logits of every step, greedy and beam, with
heads switched off, and the decoded tokens. Parity with transformers' ``generate()`` through this step is also
tests/model/test_family.py's ``test_greedy_and_beam_match_generate`` (decode's default decoder is this one)."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
import torch

from model.core.ablation import Ablation
from model.decode.decoding import DecodeOptions, ModuleDecoder, decode
from model.decode.family_step import FamilyStep
from model.decode.lean import LeanCache, LeanDecoder
from tests.model.family_models import EOS, FAMILIES, family_tokenizer, hf_and_ours
from tests.model.test_marian import one_thread  # noqa: F401  (autouse)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")

SOURCES = ["I like the cat.", "The man is on the beach tomorrow."]
ATOL = 1e-4


@pytest.fixture(scope="module")
def tok():
    return family_tokenizer()


@pytest.fixture(scope="module", params=FAMILIES)
def fam(request, tok, tmp_path_factory):
    """(family, transformers' model, our imported model)."""
    return request.param, *hf_and_ours(request.param, tmp_path_factory.mktemp(request.param), tok)


def _src(tok, text: str) -> list[int]:
    return [*tok.encode(text), EOS]


@torch.inference_mode()
def _steps(decoder, src, tokens, ablation=None) -> list[np.ndarray]:
    """The logits of each step feeding ``tokens`` (R rows each) from a fresh cache; rows reordered by ``select``
    between steps as a beam reorders them (the rows reversed)."""
    memory, mask = decoder.encode(np.array([src]), ablation)
    R = len(tokens[0])
    cache = decoder.start(memory, mask, ablation).select([0] * R)
    out = []
    for i, row in enumerate(tokens):
        logits, cache, _ = decoder.step(np.array(row), cache)
        out.append(np.asarray(logits))
        if i % 2:
            cache = cache.select(list(range(R))[::-1])
    return out


def test_every_family_steps_in_numpy_without_a_record(fam):
    """Every family but the paper's post-norm one gets the numpy step for untraced decodes, and keeps its modules
    for recorded ones; a recorded step asked of the numpy step is refused, not silently unrecorded."""
    _, _, ours = fam
    lean = LeanDecoder(ours.model)
    assert isinstance(lean.family, FamilyStep) and isinstance(lean.fallback, ModuleDecoder)
    memory, mask = lean.encode(np.array([[5, 6, EOS]]))
    cache = lean.start(memory, mask)
    assert isinstance(cache, LeanCache)
    with pytest.raises(ValueError, match="recorded through its modules"):
        lean.step(np.array([ours.cfg.decoder_start_id]), cache, record=True)


@pytest.mark.parametrize("ablated", [False, True])
def test_numpy_step_equals_the_modules_step_for_step(fam, tok, ablated):
    """Three rows (a beam's), eight steps of random tokens, reordered every other step, optionally with heads switched
    off in the encoder and in the decoder's self- and cross-attention: every step's logits within 1e-4 of the
    modules', or, where the float32 modules themselves are further than that from the same modules in float64 (T5's
    unscaled scores on random tokens), no further from float64 than twice the modules' own error."""
    _, _, ours = fam
    cfg = ours.cfg
    rng = np.random.default_rng(0)
    tokens = [[cfg.decoder_start_id] * 3, *rng.integers(4, cfg.vocab_size, (7, 3)).tolist()]
    ablation = Ablation(frozenset({("enc", 0, 1), ("self", 0, 0), ("cross", 1, 2)})) if ablated else None
    exact = ModuleDecoder(copy.deepcopy(ours.model).double())
    for text in SOURCES:
        src = _src(tok, text)
        fast = _steps(LeanDecoder(ours.model, rows=3, pack_min=0, mkl_min=0), src, tokens, ablation)
        slow = _steps(ModuleDecoder(ours.model), src, tokens, ablation)
        ref = _steps(exact, src, tokens, ablation)
        for t, (a, b, r) in enumerate(zip(fast, slow, ref)):
            modules_error = float(np.abs(b - r).max())
            assert np.abs(a - r).max() <= max(ATOL, 2 * modules_error), f"step {t}"
            if modules_error < ATOL / 2:
                np.testing.assert_allclose(a, b, atol=ATOL, rtol=0, err_msg=f"step {t}")


def test_numpy_step_logits_equal_transformers(fam, tok):
    """Teacher-forced by hand: the numpy step's logits at each position equal transformers' forward pass."""
    _, hf, ours = fam
    cfg = ours.cfg
    src = _src(tok, SOURCES[1])
    target = [cfg.decoder_start_id, *tok.encode("Le chat dort sur le canapé.")]
    logits = _steps(LeanDecoder(ours.model), src, [[t] for t in target])
    with torch.no_grad():
        theirs = hf(input_ids=torch.tensor([src]), decoder_input_ids=torch.tensor([target])).logits[0].numpy()
    np.testing.assert_allclose(np.concatenate(logits), theirs, atol=ATOL, rtol=0)


def test_untraced_and_recorded_decodes_agree(fam, tok):
    """The same tokens and scores greedy and beam 4, untraced (numpy) and recorded (the modules)."""
    _, _, ours = fam
    for text in SOURCES:
        src = _src(tok, text)
        for opts in (DecodeOptions(max_len=10), DecodeOptions(strategy="beam", beam=4, n_best=4, max_len=10)):
            fast = decode(ours.model, src, opts)
            slow = decode(ours.model, src, dataclasses.replace(opts, record=True))
            assert [h.ids for h in fast.n_best] == [h.ids for h in slow.n_best]
            np.testing.assert_allclose([h.score for h in fast.n_best], [h.score for h in slow.n_best], atol=ATOL)
