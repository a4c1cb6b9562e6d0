"""Views of recorded decodes (model/decode/steps.py): stacking, compact records, full-prefix scores, following a beam
hypothesis by identity, chips and the strict summary."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from model.core import keys
from model.decode.decoding import DecodeOptions, decode
from model.decode.steps import (
    chips,
    compact_result,
    ended_by_length,
    follow_line,
    live_rows,
    lower_rows,
    mean_token_prob,
    path_rows,
    prefix_scores,
    stack_view,
    summary_dict,
)
from model.decode.trace import teacher_forced_trace
from viz import api as viz


def src_of(tok, model, text: str) -> list[int]:
    return tok.encode(text) + [model.cfg.eos_id]


def view_and_trace(model, tok, text: str, max_len: int):
    """The last step's view of a recorded greedy decode of ``text``, the teacher-forced trace of its output, and
    the number of positions the view holds."""
    src = src_of(tok, model, text)
    res = decode(model, src, DecodeOptions(max_len=max_len, record=True))
    step = len(res.steps) - 1
    view = stack_view(res.steps, path_rows(res, step), step)
    tr = teacher_forced_trace(model, tok, src[:-1], [i for i in res.ids if i != model.cfg.eos_id])
    return view, tr, step + 1


def test_stepwise_view_matches_the_parallel_trace(tiny_model, tiny_tokenizer):
    """Rows stacked from the KV-cached steps equal the teacher-forced pass over the same tokens."""
    view, tr, T = view_and_trace(tiny_model, tiny_tokenizer, "I like pizza.", 6)
    lower = np.tril(np.ones((T, T), bool))
    for key, arr in view.items():
        ref = tr.arrays[key]
        leaf = key.split(".")[-1]
        if ".self." in key and leaf in ("scores", "mask", "masked_scores", "weights"):
            ref = ref[:, :T, :T]
            assert (np.isfinite(arr) == lower).all(), key  # the future was never computed
        elif ref.ndim == 3 and not key.endswith(("cross.K", "cross.V")):
            ref = ref[:, :T]
        elif ref.ndim < 3:
            ref = ref[:T]
        assert arr.shape == ref.shape, (key, arr.shape, ref.shape)
        fin = np.isfinite(arr)
        np.testing.assert_allclose(arr[fin], ref[fin], atol=2e-4, rtol=1e-3, err_msg=key)


@pytest.mark.parametrize("strategy", ["greedy", "beam"])
def test_compact_records_give_the_same_view(tiny_model, tiny_tokenizer, strategy):
    """Keeping only each step's new K/V row (and cross K/V once) loses nothing along any hypothesis."""
    src = src_of(tiny_tokenizer, tiny_model, "The cat is sleeping on the sofa.")
    res = decode(tiny_model, src, DecodeOptions(strategy=strategy, beam=3, max_len=6, record=True))
    small = compact_result(res)
    size = sum(v.nbytes for s in res.steps for v in s.arrays.values())
    assert sum(v.nbytes for s in small.steps for v in s.arrays.values()) < size
    for step in range(len(res.steps)):
        for row in live_rows(res, step):
            rows = path_rows(res, step, row)
            full, compact = stack_view(res.steps, rows, step), stack_view(small.steps, rows, step)
            assert full.keys() == compact.keys()
            for key in full:
                np.testing.assert_array_equal(full[key], compact[key], err_msg=f"{key} step {step} row {row}")


def test_prefix_scores_equal_the_trace_and_torch_attention(tiny_model, tiny_tokenizer):
    """The display-only future cells: scores of every pair equal the teacher-forced pass's, and the weights equal
    torch's scaled_dot_product_attention with a causal mask (and without one)."""
    view, tr, T = view_and_trace(tiny_model, tiny_tokenizer, "Hello world.", 7)
    for layer in range(tiny_model.cfg.n_decoder_layers):
        Q, K = view[keys.dec(layer, "self", "Q")], view[keys.dec(layer, "self", "K")]
        m = prefix_scores(Q, K)
        assert np.isfinite(m["scores"]).all()  # every cell, the future included
        np.testing.assert_allclose(m["scores"], tr.arrays[keys.dec(layer, "self", "scores")][:, :T, :T], atol=2e-4)
        assert (np.isfinite(m["masked_scores"]) == np.tril(np.ones((T, T), bool))).all()
        q, k = torch.tensor(Q), torch.tensor(K)
        v = torch.tensor(view[keys.dec(layer, "self", "V")])
        ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        np.testing.assert_allclose(m["weights"] @ v.numpy(), ref.numpy(), atol=1e-5)
        free = prefix_scores(Q, K, causal=False)
        np.testing.assert_allclose(
            free["weights"] @ v.numpy(), F.scaled_dot_product_attention(q, k, v).numpy(), atol=1e-5
        )
        np.testing.assert_allclose(m["weights"], view[keys.dec(layer, "self", "weights")].clip(0), atol=1e-5)


def beam_decode(tiny_model, tiny_tokenizer, text="The cat is sleeping on the sofa.", k=3, max_len=10):
    src = src_of(tiny_tokenizer, tiny_model, text)
    return decode(tiny_model, src, DecodeOptions(strategy="beam", beam=k, max_len=max_len, record=True))


def teacher_forced_probs(model, tok, src, predicts) -> np.ndarray:
    """The model's probability of each token of ``predicts`` at its position, from one teacher-forced pass."""
    body = [int(i) for i in predicts if int(i) != model.cfg.eos_id]
    tr = teacher_forced_trace(model, tok, list(src[:-1]), body, causal=True)
    n = len(predicts)
    return tr.arrays["probs"][np.arange(n), np.asarray(predicts[:n])]


def check_line(res, line, model, tok, src) -> None:
    """A line's rows, inputs, predictions and probabilities agree with the decode and with a teacher-forced pass."""
    assert len(line.rows) == len(line.inputs) == len(line.predicts) == len(line.probs) == line.end + 1
    assert line.inputs[0] == model.cfg.decoder_start_id
    assert list(line.inputs[1:]) == list(line.predicts[:-1])  # the output shifted right
    for t, r in enumerate(line.rows):
        assert int(res.steps[t].input_ids[r]) == line.inputs[t]
        if res.beam_steps is not None:
            assert tuple(res.beam_steps[t].live[r].ids) == tuple(line.predicts[:t])
    ref = teacher_forced_probs(model, tok, src, line.predicts)
    np.testing.assert_allclose(line.probs, ref, rtol=1e-4, atol=1e-6)


def test_the_default_line_is_the_translation_shown(tiny_model, tiny_tokenizer):
    """Without a pick the step view walks the final best translation from <s> to its </s>, with the model's
    probability of each of its tokens (as a teacher-forced pass computes it)."""
    src = src_of(tiny_tokenizer, tiny_model, "The cat is sleeping on the sofa.")
    for opts in (
        DecodeOptions(strategy="beam", beam=3, max_len=10, record=True),
        DecodeOptions(strategy="beam", beam=5, max_len=4, record=True),
        DecodeOptions(max_len=10, record=True),
    ):
        res = decode(tiny_model, src, opts)
        line = follow_line(res, tiny_model.cfg.eos_id)
        assert line.ids == tuple(res.ids) == tuple(res.n_best[0].ids) and line.predicts == line.ids
        assert line.final_rank == 1 and line.end == len(res.ids) - 1
        assert line.how == ("finished" if res.ids[-1] == tiny_model.cfg.eos_id else "cut")
        check_line(res, line, tiny_model, tiny_tokenizer, src)


def test_following_a_hypothesis_by_identity(tiny_model, tiny_tokenizer):
    """Every final candidate is followed to its own end; a hypothesis picked while live is followed to its best
    outcome, and the line says truly how it ended (finished with its rank, or pruned with its candidate's rank)."""
    src = src_of(tiny_tokenizer, tiny_model, "The cat is sleeping on the sofa.")
    eos = tiny_model.cfg.eos_id
    res = beam_decode(tiny_model, tiny_tokenizer)
    for i, h in enumerate(res.n_best):
        line = follow_line(res, eos, h.ids)
        assert line.ids == tuple(h.ids) and line.final_rank == i + 1 and line.score == pytest.approx(h.score)
        check_line(res, line, tiny_model, tiny_tokenizer, src)
    hows = set()
    for t in range(len(res.steps)):
        for r in live_rows(res, t):
            ids = tuple(res.beam_steps[t].live[r].ids)
            line = follow_line(res, eos, ids)
            hows.add(line.how)
            assert tuple(line.predicts[:t]) == ids and line.rows[t] == r  # stepping back shows its ancestors
            check_line(res, line, tiny_model, tiny_tokenizer, src)
            finals = [h for h in res.n_best if tuple(h.ids[:t]) == ids]
            if finals:  # the best final candidate that extends it
                assert line.ids == tuple(finals[0].ids) and line.how in ("finished", "cut")
            elif line.how == "pruned":
                mine = [e for e in res.beam_steps[line.end].expansions if e.parent == line.rows[-1]]
                assert mine and all(e.status == "pruned" for e in mine)
                cands = sorted((e.cum_logprob for e in res.beam_steps[line.end].expansions), reverse=True)
                assert line.of == len(cands) and cands[line.rank - 1] == max(e.cum_logprob for e in mine)
                assert line.rank > 1
    assert "pruned" in hows and hows & {"finished", "cut"}  # the sentence is chosen so the test sees both
    bogus = follow_line(res, eos, (10**6,))
    assert bogus.ids == tuple(res.ids)  # a prefix in no hypothesis: the result's line


def test_follow_without_beam_and_the_root(tiny_model, tiny_tokenizer):
    src = src_of(tiny_tokenizer, tiny_model, "I like pizza.")
    res = decode(tiny_model, src, DecodeOptions(max_len=5, record=True))
    line = follow_line(res, tiny_model.cfg.eos_id, (5, 6))  # greedy has one line, whatever was picked
    assert line.rows == (0,) * len(res.steps) and line.ids == tuple(res.ids)


def test_chips_mark_only_user_forced_tokens(tiny_model, tiny_tokenizer):
    src = src_of(tiny_tokenizer, tiny_model, "I am a student.")
    free = decode(tiny_model, src, DecodeOptions(max_len=6, record=True))
    forced_tok = int(free.steps[2].top_ids[0][3])  # the 4th most likely token at position 2
    prefix = (*free.ids[:2], forced_tok)
    res = decode(tiny_model, src, DecodeOptions(max_len=6, prefix=prefix, record=True))
    cs = chips(follow_line(res, tiny_model.cfg.eos_id), 4, user_forced=frozenset({2}))
    assert [c.token_id for c in cs[:3]] == list(prefix)
    assert [c.forced for c in cs] == [False, False, True, False]
    assert cs[0].prob == pytest.approx(float(np.exp(free.steps[0].top_logprobs[0][0])))


def test_the_mean_probability_leaves_out_the_tokens_the_user_forced(tiny_model, tiny_tokenizer):
    """A token forced at p 0.016 made "the model is out of its depth" of a model whose own tokens were all above
    0.8: the mean is taken over the model's own choices, the line's probabilities as the chips show them."""
    eos = tiny_model.cfg.eos_id
    src = src_of(tiny_tokenizer, tiny_model, "I am a student.")
    free = decode(tiny_model, src, DecodeOptions(max_len=6, record=True))
    prefix = (*free.ids[:2], int(free.steps[2].top_ids[0][3]))  # the 4th most likely token at position 2
    res = decode(tiny_model, src, DecodeOptions(max_len=6, prefix=prefix, record=True))
    probs = follow_line(res, eos).probs
    own = [p for t, p in enumerate(probs) if t != 2]
    assert mean_token_prob(res, eos, {2}) == pytest.approx(float(np.exp(np.mean(np.log(own)))))
    assert mean_token_prob(res) == pytest.approx(float(np.exp(np.mean(np.log(probs)))), rel=1e-4)
    assert mean_token_prob(res, eos, {2}) > mean_token_prob(res)  # the forced token was the least likely


def test_the_summary_marks_forced_only_what_the_user_forced(tiny_model, tiny_tokenizer):
    """Forcing position 2 feeds the model's own positions 0 and 1 as a prefix: the summary said all three were
    forced, where the chips, the table and the CSV say only position 2."""
    from views.state import Choices

    src = src_of(tiny_tokenizer, tiny_model, "I am a student.")
    free = decode(tiny_model, src, DecodeOptions(max_len=6, record=True))
    prefix = (*free.ids[:2], int(free.steps[2].top_ids[0][3]))
    res = decode(tiny_model, src, DecodeOptions(max_len=6, prefix=prefix, record=True))
    ch = Choices("m", "x", DecodeOptions(max_len=6, prefix=prefix))
    steps = summary_dict(ch, res, tiny_tokenizer.id_to_token, ["a"], 3, user_forced={2})["steps"]
    assert [s["forced"] for s in steps[:4]] == [False, False, True, False]
    assert [s["prefix"] for s in steps[:4]] == [True, True, True, False]


def test_summary_is_strict_json_and_flags(tiny_model, tiny_tokenizer):
    res = beam_decode(tiny_model, tiny_tokenizer, k=3, max_len=4)
    from views.state import Choices

    ch = Choices("m", "x", DecodeOptions(strategy="beam", beam=3, max_len=4, prefix=(5,)))
    d = summary_dict(ch, res, tiny_tokenizer.id_to_token, ["a"], 1)
    text = json.dumps(d, allow_nan=False)  # raises on NaN / infinity
    assert json.loads(text)["choices"]["prefix"] == [5]
    assert any(row["entropy"] is not None for s in d["steps"] for row in s["rows"])
    assert 0 < mean_token_prob(res) <= 1
    assert ended_by_length(res, tiny_model.cfg.eos_id) == (res.ids[-1] != tiny_model.cfg.eos_id)


def test_lower_rows_is_lower_triangular_and_draws_as_masked():
    """Per-step attention rows (row t holds t + 1 keys) stacked with −inf on the future, which the figures draw
    as masked cells."""
    rng = np.random.default_rng(0)
    rows = [rng.random(t + 1).astype(np.float32) for t in range(5)]
    m = lower_rows(rows)
    assert m.shape == (5, 5)
    lower = np.tril(np.ones((5, 5), dtype=bool))
    assert np.all(np.isfinite(m[lower])) and np.all(m[~lower] == -np.inf)
    for t, r in enumerate(rows):
        np.testing.assert_array_equal(m[t, : t + 1], r)
    assert lower_rows([]).shape == (0, 0)
    with pytest.raises(ValueError):
        lower_rows([np.ones(1), np.ones(3)])
    fig = viz.attention_figure(
        m, list("abcde"), list("abcde"), viz.AttentionOptions(kind="masked_scores"), title=""
    ).plotly()
    overlay = next(t for t in fig.data if t.name == "masked")
    assert np.array_equal(~np.isnan(np.asarray(overlay.z, dtype=float)), ~lower)
