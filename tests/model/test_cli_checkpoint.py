"""The command line and the model directory: outputs, documented keys, clear one-line errors."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from model.cli import main
from model.core.config import ModelConfig
from model.io.checkpoint import (
    CONFIG,
    TOKENIZER,
    WEIGHTS,
    ModelDirError,
    expected_tensors,
    load_model_dir,
    read_header,
)

ROOT = Path(__file__).resolve().parents[2]


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_load_round_trip(tiny_model_dir, tiny_model):
    lm = load_model_dir(tiny_model_dir)
    for (name, a), b in zip(tiny_model.state_dict().items(), lm.model.state_dict().values()):
        assert np.array_equal(a.numpy(), b.numpy()), name
    assert lm.card.startswith("# Tiny")


@pytest.mark.parametrize(
    "damage", ["missing_weights", "truncated_weights", "bad_config", "mismatch", "no_dir", "is_file"]
)
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
    elif damage == "is_file":
        d, expect = d / WEIGHTS, "is a file, not a model directory"
    else:
        d, expect = tmp_path / "nowhere", "does not exist"
    with pytest.raises(ModelDirError) as e:
        load_model_dir(d)
    assert expect in str(e.value) and "\n" not in str(e.value)


def copy_dir(src: Path, dst: Path) -> Path:
    dst.mkdir()
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    return dst


def edit_config(d: Path, **changes) -> Path:
    cfg = json.loads((d / CONFIG).read_text())
    cfg.update(changes)
    (d / CONFIG).write_text(json.dumps(cfg))
    return d


@pytest.mark.parametrize(
    "changes, needle",
    [
        ({"vocab_size": 0}, "vocab_size=0 is outside"),
        ({"vocab_size": 10**7}, "vocab_size=10000000 is outside"),
        ({"d_model": 65536, "vocab_size": 10**6}, "d_model=65536 is outside"),
        ({"d_model": -32}, "d_model=-32 is outside"),
        ({"n_heads": 0}, "n_heads=0 is outside"),
        ({"n_heads": 5}, "d_model=32 is not divisible by n_heads=5"),
        ({"d_ff": 10**9}, "d_ff=1000000000 is outside"),
        ({"n_encoder_layers": 0}, "n_encoder_layers=0 is outside"),
        ({"n_decoder_layers": 10_000}, "n_decoder_layers=10000 is outside"),
        ({"max_len": 1}, "max_len=1 is outside"),
        ({"max_len": 60_000, "d_model": 1024, "n_heads": 4}, "positional-table cells"),
        ({"eos_id": 360}, "eos_id=360 is outside the vocabulary"),
        ({"unk_id": -1}, "unk_id=-1 is outside the vocabulary"),
        ({"d_model": 32.0}, "d_model must be a whole number"),
        ({"tie_output": "yes"}, "tie_output must be true or false"),
        ({"layer_norm_eps": 0}, "layer_norm_eps=0 is outside"),
    ],
)
def test_config_sizes_are_bounded(tmp_path, tiny_model_dir, changes, needle):
    d = edit_config(copy_dir(tiny_model_dir, tmp_path / "m"), **changes)
    with pytest.raises(ModelDirError) as e:
        load_model_dir(d)
    msg = str(e.value)
    assert needle in msg and CONFIG in msg and "\n" not in msg, msg


def test_sizes_that_disagree_with_the_file_are_refused_before_anything_is_allocated(
    tmp_path, tiny_model_dir, monkeypatch
):
    """Sizes inside the bounds but far from the file's (a 4 GB embedding): the header check refuses them, and
    the only Transformer ever built is the one on the meta device, which allocates nothing."""
    import model.io.checkpoint as checkpoint

    built = []

    class Spy(checkpoint.Transformer):
        def __init__(self, cfg, **kw):
            built.append(str(torch.get_default_device()))
            if built[-1] != "meta" and cfg.vocab_size * cfg.d_model > 10**8:  # fail here rather than allocate 4 GB
                raise AssertionError(f"a real {cfg.vocab_size} × {cfg.d_model} model was built")
            super().__init__(cfg, **kw)

    monkeypatch.setattr(checkpoint, "Transformer", Spy)
    d = edit_config(copy_dir(tiny_model_dir, tmp_path / "m"), vocab_size=10**6, d_model=1024, n_heads=4)
    with pytest.raises(ModelDirError) as e:
        load_model_dir(d)
    assert "embed.weight has shape [360, 32] in the file but the config needs [1000000, 1024] (80 more" in str(e.value)
    assert built == ["meta"]
    built.clear()
    load_model_dir(tiny_model_dir)  # a good directory: the meta model for the check, then the real one
    assert built == ["meta", "cpu"]


@pytest.mark.slow
def test_loading_imports_no_compiler_stack(tiny_model_dir):
    """The header check's meta-device model runs no meta op that pulls in torch's compiler stack (dynamo, inductor,
    sympy: ~1.2 s, once per process, on the app's cold start)."""
    code = (
        "import sys; from model.io.checkpoint import load_model_dir; load_model_dir(sys.argv[1]); "
        "print(sorted(m for m in ('torch._dynamo', 'torch._inductor', 'sympy') if m in sys.modules))"
    )
    p = subprocess.run([sys.executable, "-c", code, str(tiny_model_dir)], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"


def resave(d: Path, edit) -> Path:
    state = load_file(str(d / WEIGHTS))
    edit(state)
    save_file(state, str(d / WEIGHTS))
    return d


W1 = "decoder_layers.0.ffn.W_1.weight"


@pytest.mark.parametrize(
    "edit, needles",
    [
        (lambda s: s.update({W1: s[W1].T.contiguous()}), [W1, "shape [32, 64] in the file", "needs [64, 32]"]),
        (lambda s: s.update({W1: s[W1][:, :5].contiguous()}), [W1, "[64, 5]", "[64, 32]"]),
        (lambda s: s.update({W1: s[W1].to(torch.int32)}), [f"stores {W1} as I32, not a floating-point type"]),
        (lambda s: s.update({W1: s[W1].to(torch.bool)}), [f"stores {W1} as BOOL"]),
        (lambda s: s.pop(W1), [f"1 tensor missing ({W1})"]),
        (lambda s: s.update({"extra.bias": torch.zeros(2)}), ["1 unexpected tensor (extra.bias)"]),
        (
            lambda s: s.update({"src_embed.embed.weight": s["embed.weight"].clone()}),
            ["1 unexpected tensor (src_embed.embed.weight)"],
        ),  # a tied tensor stored twice
        (lambda s: s[W1].__setitem__((3, 4), float("nan")), ["non-finite values", W1, "1 of its 2,048 values"]),
        (lambda s: s["embed.weight"].__setitem__((7, 1), float("-inf")), ["non-finite values", "in embed.weight"]),
    ],
)
def test_weight_file_checks_name_the_tensor(tmp_path, tiny_model_dir, edit, needles):
    d = resave(copy_dir(tiny_model_dir, tmp_path / "m"), edit)
    with pytest.raises(ModelDirError) as e:
        load_model_dir(d)
    msg = str(e.value)
    assert all(n in msg for n in needles) and "\n" not in msg, msg


def test_weight_files_other_writers_produce_still_load(tmp_path, tiny_model_dir, tiny_model):
    """Half-precision weights load (as float32), and a tied tensor may be stored under any of its names."""
    half = resave(
        copy_dir(tiny_model_dir, tmp_path / "bf16"), lambda s: s.update({k: v.bfloat16() for k, v in s.items()})
    )
    lm = load_model_dir(half)
    assert lm.model.embed.weight.dtype == torch.float32
    torch.testing.assert_close(lm.model.embed.weight, tiny_model.embed.weight, atol=1e-2, rtol=1e-2)
    renamed = resave(
        copy_dir(tiny_model_dir, tmp_path / "renamed"),
        lambda s: s.update({"tgt_embed.embed.weight": s.pop("embed.weight")}),
    )
    lm = load_model_dir(renamed)
    assert torch.equal(lm.model.embed.weight, tiny_model.embed.weight)
    assert lm.model.src_embed.embed.weight is lm.model.embed.weight  # still tied


@pytest.mark.parametrize(
    "damage, needle",
    [
        (lambda b: b[:5], "too short to be a safetensors file (5 bytes)"),
        (lambda b: struct.pack("<Q", len(b)) + b[8:], "header length field says"),
        (lambda b: struct.pack("<Q", 2**62) + b[8:], "header length field says"),
        (lambda b: b[:8] + b"\xff\xfe garbage" + b[19:], "are not valid JSON"),
        (
            lambda b: header_edit(b, lambda h: h.update({W1: {**h[W1], "data_offsets": [0, 10**9]}})),
            "lies beyond the end",
        ),
        (lambda b: header_edit(b, lambda h: h.update({W1: {**h[W1], "shape": [64, 31]}})), f"{W1} takes 8,192 bytes"),
        (lambda b: header_edit(b, lambda h: h.update({W1: {**h[W1], "shape": "64x32"}})), f"the entry for {W1} lacks"),
        (lambda b: header_edit(b, lambda h: h.update({W1: 5})), f"the entry for {W1} lacks"),
        (lambda b: header_edit(b, lambda h: [h]), "holds a JSON list, not an object"),
        (lambda b: b[: len(b) // 2], "is truncated or damaged"),
    ],
)
def test_damaged_headers_are_one_sentence(tmp_path, tiny_model_dir, damage, needle):
    d = copy_dir(tiny_model_dir, tmp_path / "m")
    (d / WEIGHTS).write_bytes(damage((d / WEIGHTS).read_bytes()))
    with pytest.raises(ModelDirError) as e:
        load_model_dir(d)
    msg = str(e.value)
    assert needle in msg and WEIGHTS in msg and "\n" not in msg, msg


def header_edit(data: bytes, edit) -> bytes:
    (n,) = struct.unpack("<Q", data[:8])
    h = json.loads(data[8 : 8 + n])
    h = edit(h) or h
    raw = json.dumps(h).encode()
    return struct.pack("<Q", len(raw)) + raw + data[8 + n :]


def test_the_header_is_read_without_loading_tensors(tiny_model_dir):
    found = read_header(tiny_model_dir / WEIGHTS)
    want = expected_tensors(ModelConfig.load(tiny_model_dir / CONFIG))
    assert {k: shape for k, (_, shape) in found.items()} == {k: shape for k, (shape, _) in want.items()}
    assert want["embed.weight"][1] == ("embed.weight", "src_embed.embed.weight", "tgt_embed.embed.weight")


def test_translate_text_json_and_beam(capsys, tiny_model_dir):
    rc, out, _ = run(capsys, "translate", "I am a student.", "--model", tiny_model_dir, "--max-len", 8)
    assert rc == 0 and out.endswith("\n")
    rc, out, _ = run(
        capsys, "translate", "I am a student.", "--beam", 3, "--json", "--max-len", 8, "--model", tiny_model_dir
    )
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
    rc, msg, _ = run(
        capsys, "trace", "I like pizza.", "--target", "J'aime la pizza.", "--out", out, "--model", tiny_model_dir
    )
    assert rc == 0 and "wrote" in msg
    z = np.load(out)
    for key in (
        "tokens.src",
        "tokens.dec_input",
        "tokens.label",
        "dec.embed",
        "dec.pe",
        "dec.input",
        "dec.0.self.Q",
        "dec.0.self.scores",
        "dec.0.self.mask",
        "dec.0.self.masked_scores",
        "dec.0.self.weights",
        "dec.0.self.context",
        "dec.0.self.concat",
        "dec.0.self.out",
        "dec.0.norm1.residual",
        "dec.0.norm1.mean",
        "dec.0.norm1.std",
        "dec.0.norm1.out",
        "dec.0.cross.weights",
        "dec.0.ffn.hidden",
        "dec.0.norm3.out",
        "logits",
        "probs",
        "loss",
        "enc.0.self.weights",
        "enc.0.norm2.out",
        "memory",
    ):
        assert key in z.files, key
    assert z["tokens.dec_input"][0] == "<s>" and z["tokens.label"][-1] == "</s>"
    rc, _, _ = run(capsys, "trace", "I like pizza.", "--no-mask", "--out", out, "--model", tiny_model_dir)
    assert rc == 0 and not bool(np.load(out)["causal"])


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["translate", "hi", "--model", "/nonexistent/dir"], "does not exist"),
        (["translate", "hi", "--model", "@weights"], "is a file, not a model directory"),
        (["explain", "hi", "--json", "--model", "@nan"], "non-finite values (NaN or infinity) in embed.weight"),
        (["trace", "hi", "--out", "x.npz", "--model", "@big"], "embed.weight has shape [360, 32] in the file"),
        (["translate", "   "], "empty"),
        (["translate"], "either TEXT"),
        (["translate", "hi", "--beam", "0"], "beam width"),
        (["translate", "hi", "--sample", "--top-p", "2"], "top_p"),
        (["translate", "--input", "/nonexistent/file.txt"], "No such file"),
    ],
)
def test_cli_errors_are_one_line(capsys, tmp_path, tiny_model_dir, argv, needle):
    if "--model" not in argv:
        argv = [*argv, "--model", str(tiny_model_dir)]
    if "@nan" in argv:
        nan = resave(copy_dir(tiny_model_dir, tmp_path / "nan"), lambda s: s["embed.weight"].__setitem__(0, torch.nan))
        argv = [str(nan) if a == "@nan" else a for a in argv]
    if "@big" in argv:
        big = edit_config(copy_dir(tiny_model_dir, tmp_path / "big"), vocab_size=10**6, d_model=65536 // 64)
        argv = [str(big) if a == "@big" else a for a in argv]
    argv = [str(tiny_model_dir / WEIGHTS) if a == "@weights" else a for a in argv]
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and needle in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.slow
def test_module_entry_point_without_bundled_model_or_with_it():
    p = subprocess.run([sys.executable, "-m", "model", "translate", "--help"], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0 and "--beam" in p.stdout
    p = subprocess.run([sys.executable, "-m", "model", "lesson", "--json"], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0 and json.loads(p.stdout)["stages"]


@pytest.mark.slow
def test_use_threads_never_gives_both_pools_several_threads():
    """torch and numpy's BLAS must not both spin on several threads; one-row decoding gives BLAS the threads."""
    code = (
        "import json, torch; from threadpoolctl import threadpool_info; from model.io.checkpoint import use_threads\n"
        "out = []\n"
        "for single in (False, True):\n"
        "    use_threads(2, single_row=single)\n"
        "    blas = {i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas'}\n"
        "    out.append([torch.get_num_threads(), sorted(blas)])\n"
        "print(json.dumps(out))\n"
    )  # a fresh process: thread pools are process-wide
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert json.loads(run.stdout) == [[2, [1]], [1, [2]]]
