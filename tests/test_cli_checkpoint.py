"""The command line and the model directory: outputs, documented keys, clear one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from model.checkpoint import CONFIG, TOKENIZER, WEIGHTS, ModelDirError, load_model_dir
from model.cli import main

ROOT = Path(__file__).resolve().parent.parent


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_load_round_trip(tiny_model_dir, tiny_model):
    lm = load_model_dir(tiny_model_dir)
    for (name, a), b in zip(tiny_model.state_dict().items(), lm.model.state_dict().values()):
        assert np.array_equal(a.numpy(), b.numpy()), name
    assert lm.card.startswith("# Tiny")


@pytest.mark.parametrize("damage", ["missing_weights", "truncated_weights", "bad_config", "mismatch", "no_dir"])
def test_broken_model_dirs_fail_with_one_sentence_naming_the_file(tmp_path, tiny_model_dir, damage):
    d = tmp_path / "m"
    d.mkdir()
    for name in (CONFIG, WEIGHTS, TOKENIZER):
        (d / name).write_bytes((tiny_model_dir / name).read_bytes())
    expect = WEIGHTS
    if damage == "missing_weights":
        (d / WEIGHTS).unlink()
    elif damage == "truncated_weights":
        data = (d / WEIGHTS).read_bytes()
        (d / WEIGHTS).write_bytes(data[: len(data) // 2])
    elif damage == "bad_config":
        (d / CONFIG).write_text("{not json")
        expect = CONFIG
    elif damage == "mismatch":
        cfg = json.loads((d / CONFIG).read_text())
        cfg["d_ff"] *= 2
        (d / CONFIG).write_text(json.dumps(cfg))
    else:
        d, expect = tmp_path / "nowhere", "does not exist"
    with pytest.raises(ModelDirError) as e:
        load_model_dir(d)
    assert expect in str(e.value) and "\n" not in str(e.value)


def test_translate_text_json_and_beam(capsys, tiny_model_dir):
    rc, out, _ = run(capsys, "translate", "I am a student.", "--model", tiny_model_dir, "--max-len", 8)
    assert rc == 0 and out.endswith("\n")
    rc, out, _ = run(capsys, "translate", "I am a student.", "--beam", 3, "--json", "--max-len", 8,
                     "--model", tiny_model_dir)  # fmt: skip
    obj = json.loads(out)
    assert rc == 0 and len(obj["candidates"]) == 3 and obj["tokens"] == obj["candidates"][0]["tokens"]
    assert [c["score"] for c in obj["candidates"]] == sorted((c["score"] for c in obj["candidates"]), reverse=True)


def test_translate_input_file_matches_single_sentences(capsys, tmp_path, tiny_model_dir):
    lines = ["I like pizza.", "", "Hello world."]
    f = tmp_path / "in.txt"
    f.write_text("\n".join(lines) + "\n")
    rc, out, _ = run(capsys, "translate", "--input", f, "--model", tiny_model_dir, "--max-len", 8, "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert rc == 0 and [r["source"] for r in rows] == lines and rows[1]["translation"] == ""
    for r in (rows[0], rows[2]):
        _, single, _ = run(capsys, "translate", r["source"], "--model", tiny_model_dir, "--max-len", 8)
        assert single.rstrip("\n") == r["translation"]


def test_trace_writes_documented_keys(capsys, tmp_path, tiny_model_dir):
    out = tmp_path / "t.npz"
    rc, msg, _ = run(capsys, "trace", "I like pizza.", "--target", "J'aime la pizza.", "--out", out,
                     "--model", tiny_model_dir)  # fmt: skip
    assert rc == 0 and "wrote" in msg
    z = np.load(out)
    for key in ("tokens.src", "tokens.dec_input", "tokens.label", "dec.embed", "dec.pe", "dec.input",
                "dec.0.self.Q", "dec.0.self.scores", "dec.0.self.mask", "dec.0.self.masked_scores",
                "dec.0.self.weights", "dec.0.self.context", "dec.0.self.concat", "dec.0.self.out",
                "dec.0.norm1.residual", "dec.0.norm1.mean", "dec.0.norm1.std", "dec.0.norm1.out",
                "dec.0.cross.weights", "dec.0.ffn.hidden", "dec.0.norm3.out", "logits", "probs", "loss",
                "enc.0.self.weights", "enc.0.norm2.out", "memory"):  # fmt: skip
        assert key in z.files, key
    assert z["tokens.dec_input"][0] == "<s>" and z["tokens.label"][-1] == "</s>"
    rc, _, _ = run(capsys, "trace", "I like pizza.", "--no-mask", "--out", out, "--model", tiny_model_dir)
    assert rc == 0 and not bool(np.load(out)["causal"])


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["translate", "hi", "--model", "/nonexistent/dir"], "does not exist"),
        (["translate", "   "], "empty"),
        (["translate"], "either TEXT"),
        (["translate", "hi", "--beam", "0"], "beam width"),
        (["translate", "hi", "--sample", "--top-p", "2"], "top_p"),
        (["translate", "--input", "/nonexistent/file.txt"], "No such file"),
    ],
)
def test_cli_errors_are_one_line(capsys, tiny_model_dir, argv, needle):
    if "--model" not in argv:
        argv = [*argv, "--model", str(tiny_model_dir)]
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and needle in err and err.count("\n") == 1 and "Traceback" not in err


def test_module_entry_point_without_bundled_model_or_with_it():
    p = subprocess.run([sys.executable, "-m", "model", "translate", "--help"], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0 and "--beam" in p.stdout
    p = subprocess.run([sys.executable, "-m", "model", "lesson", "--json"], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0 and json.loads(p.stdout)["stages"]


def test_use_threads_never_gives_both_pools_several_threads():
    """torch and numpy's BLAS must not both spin on several threads; one-row decoding gives BLAS the threads."""
    code = (
        "import json, torch; from threadpoolctl import threadpool_info; from model.checkpoint import use_threads\n"
        "out = []\n"
        "for single in (False, True):\n"
        "    use_threads(2, single_row=single)\n"
        "    blas = {i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas'}\n"
        "    out.append([torch.get_num_threads(), sorted(blas)])\n"
        "print(json.dumps(out))\n"
    )  # a fresh process: thread pools are process-wide
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert json.loads(run.stdout) == [[2, [1]], [1, [2]]]
