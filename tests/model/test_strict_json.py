"""Every JSON the project writes is strict RFC 8259 JSON: no NaN, no Infinity (non-finite numbers are null).

Each JSON-producing path runs on the tiny model and its output is parsed with a parser that refuses the NaN and
Infinity extensions Python's json accepts by default."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

import model.cli as cli
from model.core.config import ModelConfig
from model.core.jsonio import dump_bytes, dumps, finite, loads_strict, write
from model.decode.steps import summary_dict
from model.io.checkpoint import WEIGHTS
from model.lesson.lesson import main as lesson_main


def strict(text: str | bytes):
    """The parser the requirement names: any NaN / Infinity / -Infinity constant is an error."""
    return json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))


def run(capsys, *argv):
    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_the_strict_parser_refuses_what_python_writes_by_default():
    for bad in (json.dumps(float("nan")), json.dumps([float("inf")]), json.dumps({"x": -math.inf})):
        with pytest.raises(ValueError):
            strict(bad)
        with pytest.raises(ValueError):
            loads_strict(bad)


def test_helper_writes_non_finite_numbers_as_null(tmp_path):
    obj = {
        "nan": float("nan"),
        "inf": np.float32("inf"),
        "arr": np.array([1.0, -np.inf, np.nan]),
        "nested": [(np.float64(2.5), np.int64(3)), {"deep": [math.inf]}],
        "ok": 1.5,
        "s": "NaN",
        "b": True,
    }
    want = {
        "nan": None,
        "inf": None,
        "arr": [1.0, None, None],
        "nested": [[2.5, 3], {"deep": [None]}],
        "ok": 1.5,
        "s": "NaN",
        "b": True,
    }
    assert strict(dumps(obj)) == want
    assert strict(dump_bytes(obj)) == want
    assert strict(write(tmp_path / "x.json", obj).read_text()) == want
    assert finite(np.float32(0.5)) == 0.5 and type(finite(np.float32(0.5))) is float


def test_helper_refuses_a_non_finite_number_that_slips_past_the_conversion():
    class Weird:  # json's default= hook returns its text; a float from elsewhere would still be refused
        def __str__(self):
            return "weird"

    assert strict(dumps({"w": Weird()})) == {"w": "weird"}
    with pytest.raises(ValueError):
        json.dumps({"x": float("nan")}, allow_nan=False)  # what dumps relies on


def test_translate_json_every_strategy(capsys, tmp_path, tiny_model_dir):
    for extra in ([], ["--beam", 3], ["--sample", "--top-k", 5, "--seed", 1]):
        rc, out, _ = run(
            capsys, "translate", "I am a student.", "--json", "--max-len", 6, *extra, "--model", tiny_model_dir
        )
        assert rc == 0
        obj = strict(out)
        assert obj["source"] == "I am a student." and obj["candidates"]
    f = tmp_path / "in.txt"
    f.write_text("I like pizza.\n\nHello world.\n")
    for extra in ([], ["--beam", 2]):  # batched greedy, and one sentence at a time (empty line included)
        rc, out, _ = run(capsys, "translate", "--input", f, "--json", "--max-len", 6, *extra, "--model", tiny_model_dir)
        rows = [strict(line) for line in out.splitlines()]
        assert rc == 0 and len(rows) == 3 and rows[1]["translation"] == ""


def test_translate_json_writes_a_minus_infinite_log_probability_as_null(capsys, tiny_model_dir, monkeypatch):
    """A hypothesis that starts with a suppressed token (<pad>, never generated, log p = -inf) has a -inf score and
    log-probability: the CLI writes them as null."""
    real = cli.decode

    def forced_pad(model, src, opts, lean=None):
        from dataclasses import replace

        return real(model, src, replace(opts, prefix=(model.cfg.pad_id,)), lean)

    monkeypatch.setattr(cli, "decode", forced_pad)
    rc, out, _ = run(capsys, "translate", "I am a student.", "--json", "--max-len", 4, "--model", tiny_model_dir)
    assert rc == 0 and "Infinity" not in out
    cand = strict(out)["candidates"][0]
    assert cand["logprob"] is None and cand["score"] is None


def test_explain_json(capsys, tiny_model_dir):
    rc, out, _ = run(
        capsys,
        "explain",
        "I am a student.",
        "--target",
        "Je suis étudiant.",
        "--ablate",
        "dec.0.self.1",
        "--method",
        "ixg",
        "--json",
        "--model",
        tiny_model_dir,
    )
    assert rc == 0
    r = strict(out)
    assert {"lens.chosen_prob", "importance.self", "ablation.loss_delta", "attribution.src"} <= set(r)


def test_explain_json_writes_nan_and_infinity_as_null(capsys, tiny_model_dir, monkeypatch):
    import model.interpret.explain as explain

    real = explain.report

    def with_non_finite(*args, **kwargs):
        r = real(*args, **kwargs)
        r["lens.chosen_prob"] = np.full_like(r["lens.chosen_prob"], np.nan)  # a position with no chosen token
        r["agreement.spearman"] = np.array([np.nan, np.inf, -np.inf, 0.5], dtype=np.float32)
        return r

    monkeypatch.setattr(explain, "report", with_non_finite)
    rc, out, _ = run(capsys, "explain", "I am a student.", "--json", "--model", tiny_model_dir)
    assert rc == 0
    r = strict(out)
    assert all(v is None for row in r["lens.chosen_prob"] for v in row)
    assert r["agreement.spearman"] == [None, None, None, 0.5]


def test_lesson_json_both_entry_points(capsys):
    rc, out, _ = run(capsys, "lesson", "--json")
    assert rc == 0
    d = strict(out)
    assert d["stages"] and d["stages"][[s["key"] for s in d["stages"]].index("mask")]["ours"][0][1] == "-inf"
    printed = []
    assert lesson_main(["--json"], echo=printed.append) == 0
    assert strict(printed[0]) == d


def test_config_json(tmp_path, tiny_model_dir):
    cfg = ModelConfig.load(tiny_model_dir / "config.json")
    assert strict(cfg.to_json())["d_model"] == cfg.d_model
    assert strict((tiny_model_dir / "config.json").read_text()) == json.loads(cfg.to_json())


def test_app_summary_export_with_a_forced_suppressed_token(tiny_model, tiny_tokenizer):
    """The app's Summary (JSON) download (views/export.py: dump_bytes(summary_dict(...))) after forcing <pad>, whose
    log-probability is -inf, and with an extra non-finite value."""
    import views.export as export
    from model.decode.decoding import DecodeOptions, decode
    from views.state import Choices

    src = [*tiny_tokenizer.encode("I am a student."), tiny_model.cfg.eos_id]
    res = decode(tiny_model, src, DecodeOptions(max_len=4, prefix=(tiny_model.cfg.pad_id,), record=True))
    assert res.n_best[0].logprob == -math.inf
    ch = Choices("m", "I am a student.", DecodeOptions(strategy="greedy", max_len=4, prefix=(0,)))
    d = summary_dict(ch, res, tiny_tokenizer.id_to_token, ["a"], 1, extra={"followed_rows": [0], "x": float("nan")})
    assert export.dump_bytes is dump_bytes  # the export writes through the one helper
    back = strict(export.dump_bytes(d))
    assert back["n_best"][0]["logprob"] is None and back["x"] is None and back["choices"]["prefix"] == [0]


@pytest.mark.parametrize("argv", [["translate", "I am a student.", "--json"], ["explain", "I am a student.", "--json"]])
def test_nan_weights_are_refused_before_any_json_is_written(capsys, tmp_path, tiny_model_dir, argv):
    d = tmp_path / "nan-model"
    d.mkdir()
    for f in tiny_model_dir.iterdir():
        (d / f.name).write_bytes(f.read_bytes())
    state = load_file(str(d / WEIGHTS))
    state["embed.weight"] = state["embed.weight"].clone()
    state["embed.weight"][5, 3] = torch.nan
    save_file(state, str(d / WEIGHTS))
    rc, out, err = run(capsys, *argv, "--model", d)
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("error: ") and "non-finite" in err and "embed.weight" in err
