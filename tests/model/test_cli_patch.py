"""`python -m model patch` and `explain --contrast` on the tiny model directory: outputs, strict JSON, NPZ, and
one-line refusals with exit status 2."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from model.cli import main
from model.interpret.contrast import contrast_token
from model.interpret.contrast import report as contrast_report
from model.interpret.patching import activation_patching
from model.io.checkpoint import load_model_dir

A = "The cat is sleeping on the sofa."
B = "The man is sleeping on the sofa."  # the same 16 tokens for the tiny tokenizer
TGT = "Le chat dort sur le canapé."


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_patch_json_npz_and_text(capsys, tmp_path, tiny_model_dir):
    rc, out, err = run(
        capsys, "patch", A, B, "--target", TGT, "--position", 2, "--contrast", "la", "--json", "--model", tiny_model_dir
    )
    assert rc == 0, err
    r = json.loads(out, parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))
    lm = load_model_dir(tiny_model_dir)
    tok, eos = lm.tokenizer, lm.cfg.eos_id
    src_a, src_b, y = tok.encode(A) + [eos], tok.encode(B) + [eos], tok.encode(TGT) + [eos]
    want = activation_patching(lm.model, src_a, y, src_b, position=2, contrast_id=contrast_token(tok, "la").id)
    np.testing.assert_allclose(r["prob.enc"], want.prob.enc, atol=1e-6)
    np.testing.assert_allclose(r["diff.dec"], want.diff.dec, atol=1e-5)
    np.testing.assert_allclose(r["prob.heads"], want.prob.heads, atol=1e-6)
    assert r["position"] == 2 and r["target"] == tok.id_to_token(y[2]) and r["contrast"] == "▁la"
    assert r["corruption"] == "source" and len(r["tokens.src_b"]) == len(src_a) and len(r["tokens.dec_input"]) == 3
    rc, out, err = run(capsys, "patch", A, "--noise", "--out", tmp_path / "p.npz", "--model", tiny_model_dir)
    assert rc == 0, err
    with np.load(tmp_path / "p.npz") as z:
        assert str(z["corruption"]) == "noise" and "diff.enc" not in z
        assert z["prob.enc"].shape == (lm.cfg.n_encoder_layers, len(src_a))
        assert float(z["noise.scale"]) == 3.0
    rc, out, err = run(capsys, "patch", A, B, "--model", tiny_model_dir)
    assert rc == 0 and "source B" in out and "encoder layer × source token" in out and "largest:" in out


def test_explain_contrast(capsys, tiny_model_dir):
    rc, out, err = run(
        capsys, "explain", A, "--target", TGT, "--contrast", "la", "--position", 3, "--json", "--model", tiny_model_dir
    )
    assert rc == 0, err
    r = json.loads(out, parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))
    lm = load_model_dir(tiny_model_dir)
    tok, eos = lm.tokenizer, lm.cfg.eos_id
    want = contrast_report(lm.model, tok, tok.encode(A) + [eos], tok.encode(TGT) + [eos], contrast_token(tok, "la"), 3)
    assert r["contrast.position"] == 3 and r["contrast.alternative"] == "▁la"
    np.testing.assert_allclose(r["lens.diff"], want["lens.diff"], atol=1e-6)
    np.testing.assert_allclose(r["attribution.ig.raw_src"], want["attribution.ig.raw_src"], atol=1e-6)
    assert r["attribution.ig.completeness"] <= 0.05
    rc, out, err = run(capsys, "explain", A, "--contrast", "chienne", "--model", tiny_model_dir)
    assert rc == 0 and "why" in out and "logit lens of the difference" in out
    assert "note: the vocabulary splits 'chienne'" in err and "the first" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["patch", A, "The cat is standing on the sofa."], "16 and 15 tokens.*use --noise"),
        (["patch", A, A], "same sentence: there is nothing to explain"),
        (["patch", A], "--noise"),
        (["patch", A, B, "--noise"], "not both"),
        (["patch", A, B, "--target", TGT, "--position", 99], "--position 99 is beyond the output"),
        (["patch", A, B, "--target", TGT, "--position", 0, "--contrast", "▁Le"], "token chosen at position 0"),
        (["explain", A, "--target", TGT, "--contrast", "le", "--position", 40], "beyond the output"),
        (["explain", A, "--target", TGT, "--contrast", "▁Le", "--position", 0], "token chosen at position 0"),
        (["explain", A, "--contrast", " "], "contrast token is empty"),
        (["explain", A, "--position", 1], "--position needs --contrast"),
    ],
)
def test_refusals_are_one_line(capsys, tiny_model_dir, args, message):
    rc, out, err = run(capsys, *args, "--model", tiny_model_dir)
    assert rc == 2 and out == ""
    lines = [line for line in err.splitlines() if not line.startswith("note:")]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert re.search(message, lines[0]), lines[0]
