"""The published worked decoder example: recomputed independently and checked."""

import dataclasses
import json
import math

import numpy as np
import pytest

from model.lesson.lesson import (
    INPUT_KEYS,
    STAGE_KEYS,
    build_lesson,
    format_lesson,
    main,
    paper_positional_encoding,
    printed_example,
)

MATCHING = {"PE", "X", "Q", "K", "V", "mask"}
DIFFERING = {"scores", "masked_scores", "weights", "output", "projected"}


def _independent(seed):
    """Straightforward loop recomputation of every stage from the seed's inputs."""
    T = seed.T_input
    n, d = T.shape
    pe = np.zeros((n, d))
    for pos in range(n):
        for j in range(d):
            angle = pos / 10000 ** (j / d)
            pe[pos, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    X = T + pe

    def matmul(a, b):
        out = np.zeros((a.shape[0], b.shape[1]))
        for i in range(a.shape[0]):
            for j in range(b.shape[1]):
                out[i, j] = sum(a[i, k] * b[k, j] for k in range(a.shape[1]))
        return out

    Q, K, V = matmul(X, seed.W_Q), matmul(X, seed.W_K), matmul(X, seed.W_V)
    scores = matmul(Q, K.T) / math.sqrt(seed.d_model / seed.n_heads)
    mask = np.array([[0.0 if j <= i else -math.inf for j in range(n)] for i in range(n)])
    masked = scores + mask
    weights = np.zeros((n, n))
    for i in range(n):
        e = [math.exp(masked[i, j] - masked[i, : i + 1].max()) if j <= i else 0.0 for j in range(n)]
        weights[i] = np.array(e) / sum(e)
    output = matmul(weights, V)
    return {
        "T_input": T,
        "PE": pe,
        "X": X,
        "W_Q": seed.W_Q,
        "W_K": seed.W_K,
        "W_V": seed.W_V,
        "Q": Q,
        "K": K,
        "V": V,
        "scores": scores,
        "mask": mask,
        "masked_scores": masked,
        "weights": weights,
        "output": output,
        "W_O": seed.W_O,
        "projected": matmul(output, seed.W_O),
    }


def _rounded_where_printed(printed, value, decimals):
    return np.where(np.isnan(printed), np.nan, np.round(value, decimals))


def test_pe_formula_reproduces_seed_to_4_decimals():
    seed = printed_example()
    pe = _independent(seed)["PE"]
    np.testing.assert_array_equal(np.round(pe, 4), seed.PE)
    lesson = build_lesson()
    assert lesson.stage("PE").matches
    np.testing.assert_allclose(lesson.stage("PE").ours, pe, atol=1e-12)
    # ... and the paper's formula does not (column 1 would be cos(pos)).
    assert np.abs(paper_positional_encoding(10, 3) - seed.PE).max() > 0.4


def test_stage_order_and_flags():
    lesson = build_lesson()
    assert [s.key for s in lesson.stages] == list(STAGE_KEYS)
    assert STAGE_KEYS[0] == "T_input" and STAGE_KEYS[-1] == "projected" and len(STAGE_KEYS) == 16
    flags = {s.key: s.matches for s in lesson.stages}
    assert {k for k, v in flags.items() if v is True} == MATCHING
    assert {k for k, v in flags.items() if v is False} == DIFFERING
    assert {k for k, v in flags.items() if v is None} == set(INPUT_KEYS)
    for s in lesson.stages:
        assert (s.note == "") == (s.matches is not False), s.key


def test_matching_stages_truly_match_independent_recomputation():
    seed = printed_example()
    ref = _independent(seed)
    lesson = build_lesson(seed)
    # Printed weights are rounded to 4 decimals: each product cell can move by at most
    # 5e-5 times the row's L1 norm of X.
    qkv_slack = 5e-5 * np.abs(ref["X"]).sum(axis=1).max()
    for s in lesson.stages:
        np.testing.assert_allclose(s.ours, ref[s.key], rtol=0, atol=1e-12, err_msg=s.key)
        if not s.matches:
            continue
        printed = seed.printed(s.key)
        shown = ~np.isnan(printed)
        ours = ref[s.key][shown]
        p = printed[shown]
        assert np.array_equal(np.isinf(ours), np.isinf(p)), s.key
        fin = ~np.isinf(p)
        slack = qkv_slack if s.key in {"Q", "K", "V"} else 1e-12
        half_unit = 0.5 * 10.0 ** -seed.decimals[s.key]
        assert np.abs(ours[fin] - p[fin]).max() <= half_unit + slack, s.key
        np.testing.assert_array_equal(ours[~fin], p[~fin])


def test_differing_stages_really_differ_beyond_printed_precision():
    seed = printed_example()
    ref = _independent(seed)
    for key in DIFFERING:
        printed = seed.printed(key)
        shown = ~np.isnan(printed) & ~np.isinf(printed)
        worst = np.abs(ref[key][shown] - printed[shown]).max()
        assert worst > 0.5 * 10.0 ** -seed.decimals[key] + 1e-3, key


def test_weights_are_a_causal_distribution():
    w = build_lesson().stage("weights").ours
    np.testing.assert_allclose(w.sum(axis=1), 1.0, atol=1e-12)
    assert np.all(w[np.triu_indices(10, k=1)] == 0.0)
    assert np.all(w[np.tril_indices(10)] > 0.0)


def test_diagnoses_found_by_computation():
    text = " ".join(build_lesson().discrepancies)
    assert "truncated (not rounded)" in text
    assert "transposed scores" in text
    assert "identical, entry for entry, to the printed W_Q" in text
    assert "12 tokens" in text and "10 rows" in text
    assert "Vaswani" in text
    assert "inherited from the Output stage" in text


def test_perturbing_a_matching_stage_creates_a_discrepancy():
    seed = printed_example()
    X = seed.X.copy()
    X[3, 1] += 0.01
    lesson = build_lesson(dataclasses.replace(seed, X=X))
    assert lesson.stage("X").matches is False
    assert any("row 4, column 2" in d and d.startswith("Decoder input X") for d in lesson.discrepancies)
    assert any("not the sum of the printed T_input and PE" in d for d in lesson.discrepancies)


def test_wrong_q_is_diagnosed():
    seed = printed_example()
    q_no_pe = np.round(seed.T_input @ seed.W_Q, 4)
    lesson = build_lesson(dataclasses.replace(seed, Q=q_no_pe))
    assert lesson.stage("Q").matches is False
    assert "without positional encoding" in lesson.stage("Q").note
    q_noise = seed.Q + 0.003 * np.arange(30).reshape(10, 3) % 0.01
    lesson = build_lesson(dataclasses.replace(seed, Q=q_noise))
    assert "none of the tested alternatives" in lesson.stage("Q").note


def test_paper_pe_in_seed_is_recognised():
    seed = printed_example()
    lesson = build_lesson(dataclasses.replace(seed, PE=np.round(paper_positional_encoding(10, 3), 4)))
    assert lesson.stage("PE").matches is False
    assert "paper" in lesson.stage("PE").note


def test_correcting_a_printed_matrix_removes_its_discrepancy():
    seed = printed_example()
    ref = _independent(seed)
    before = build_lesson(seed)
    fixed = dataclasses.replace(
        seed,
        masked_scores=_rounded_where_printed(seed.masked_scores, ref["masked_scores"], 2),
    )
    after = build_lesson(fixed)
    assert after.stage("masked_scores").matches is True
    assert not any(d.startswith("Masked scores") for d in after.discrepancies)
    assert len(after.discrepancies) == len(before.discrepancies) - 1

    fixed = dataclasses.replace(seed, W_O=seed.W_O[::-1].copy())
    assert not any("identical, entry for entry" in d for d in build_lesson(fixed).discrepancies)
    fixed = dataclasses.replace(seed, tokens=seed.tokens[:10])
    assert not any("tokens" in d for d in build_lesson(fixed).discrepancies)


def test_fully_consistent_seed_has_no_discrepancies():
    seed = dataclasses.replace(printed_example(), tokens=tuple("abcdefghij"))
    seed = dataclasses.replace(seed, W_O=np.round(seed.W_O[:, ::-1] * 0.9, 4))
    ref = _independent(seed)
    printed = {
        k: _rounded_where_printed(seed.printed(k), ref[k], seed.decimals[k]) for k in STAGE_KEYS if k not in INPUT_KEYS
    }
    lesson = build_lesson(dataclasses.replace(seed, **printed))
    # Only the remark on the seed's PE formula (vs the paper's) stays: it is intrinsic.
    assert len(lesson.discrepancies) == 1 and "Vaswani" in lesson.discrepancies[0]
    assert all(s.matches is not False for s in lesson.stages)


@pytest.mark.parametrize("key", sorted(DIFFERING))
def test_each_differing_stage_can_be_fixed(key):
    seed = printed_example()
    ref = _independent(seed)
    value = _rounded_where_printed(seed.printed(key), ref[key], seed.decimals[key])
    lesson = build_lesson(dataclasses.replace(seed, **{key: value}))
    assert lesson.stage(key).matches is True
    assert lesson.stage(key).note == ""


def test_to_dict_is_json_serialisable():
    d = build_lesson().to_dict()
    text = json.dumps(d, allow_nan=False)
    back = json.loads(text)
    stages = {s["key"]: s for s in back["stages"]}
    assert list(stages) == list(STAGE_KEYS)
    assert stages["mask"]["ours"][0][1] == "-inf"
    assert stages["scores"]["printed"][3][0] is None
    assert stages["scores"]["printed"][9][9] == 1.61
    assert stages["weights"]["matches"] is False and stages["X"]["matches"] is True
    assert back["discrepancies"] == build_lesson().discrepancies


def test_format_and_cli():
    lesson = build_lesson()
    text = format_lesson(lesson)
    for s in lesson.stages:
        assert s.title in text
    assert "DIFFERS" in text and "MATCHES" in text and "-inf" in text
    out = []
    assert main(["--json"], echo=out.append) == 0
    assert json.loads(out[0])["stages"][0]["key"] == "T_input"


@pytest.mark.slow
def test_nothing_shown_to_users_says_seed(capsys):
    """Users never saw the documents the example comes from: the report, the JSON and the CLI's help say "the
    example", never "seed"."""
    import re
    import subprocess
    import sys
    from pathlib import Path

    lesson = build_lesson()
    help_text = subprocess.run(
        [sys.executable, "-m", "model", "--help"], cwd=Path(__file__).parents[2], capture_output=True, text=True
    ).stdout
    for text in (format_lesson(lesson), json.dumps(lesson.to_dict()), help_text):
        assert not re.search(r"seed", text, re.I), re.search(r".{40}seed.{40}", text, re.I | re.S)
    assert "lesson" in help_text
