"""The model on a GPU: every CLI command (translate greedy, batched and beam; trace; explain with ablation, both
attribution methods and a contrast; patch by a second source and by noise) gives on ``--device cuda`` what it gives
on the CPU, to float tolerance; training runs on CUDA. The GPU tests skip where torch sees no GPU; the device's bad
input (an unknown device, CUDA asked for without a GPU) is checked everywhere."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from model.cli import main as cli_main
from model.io.checkpoint import ENV_DEVICE, load_model_dir, resolve_device

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no GPU")
TOL = dict(rtol=1e-3, atol=2e-4)  # float32 on two devices: different kernels, different summation orders


def run_cli(capsys, *argv) -> str:
    assert cli_main(list(argv)) == 0
    return capsys.readouterr().out


def same_arrays(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b)
    for k in a:
        x, y = np.asarray(a[k]), np.asarray(b[k])
        if x.dtype.kind in "fc":
            np.testing.assert_allclose(x, y, **TOL, err_msg=k)
        else:
            assert np.array_equal(x, y), k


def numeric(x) -> bool:
    """A number, None (strict JSON's NaN) or a nested list of them: compared as one float array."""
    if isinstance(x, list):
        return all(numeric(v) for v in x)
    return x is None or (isinstance(x, (int, float)) and not isinstance(x, bool))


def same_json(a, b, key="") -> None:
    if isinstance(a, dict):
        assert sorted(a) == sorted(b), key
        for k in a:
            same_json(a[k], b[k], f"{key}.{k}")
    elif isinstance(a, list) and numeric(a):
        np.testing.assert_allclose(np.array(a, dtype=float), np.array(b, dtype=float), **TOL, err_msg=key)
    elif isinstance(a, list):
        assert len(a) == len(b), key
        for i, (x, y) in enumerate(zip(a, b)):
            same_json(x, y, f"{key}[{i}]")
    elif isinstance(a, float):
        assert a == pytest.approx(b, rel=1e-3, abs=2e-4), key
    else:
        assert a == b, key


def test_a_device_torch_cannot_use_is_one_sentence(tiny_model_dir, capsys, monkeypatch):
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        resolve_device("tpu")
    assert resolve_device(None) == torch.device("cpu")
    monkeypatch.setenv(ENV_DEVICE, "cpu")
    assert load_model_dir(tiny_model_dir).model.device == torch.device("cpu")
    assert cli_main(["translate", "a cat", "--model", str(tiny_model_dir), "--device", "tpu"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown device" in err
    if not torch.cuda.is_available():
        assert cli_main(["translate", "a cat", "--model", str(tiny_model_dir), "--device", "cuda"]) == 2
        assert "torch sees no such GPU" in capsys.readouterr().err


@CUDA
@pytest.mark.parametrize(
    "args",
    [
        ("translate", "the cat sat on the mat", "--json"),
        ("translate", "the cat sat on the mat", "--json", "--beam", "4"),
        ("explain", "the cat sat on the mat", "--json", "--method", "ig", "--ablate", "dec.0.cross.1"),
        (
            "explain",
            "the cat sat on the mat",
            "--json",
            "--method",
            "ixg",
            "--mode",
            "mean",
            "--ablate",
            "enc.0.self.0",
        ),
        ("patch", "the cat sat", "a cat sat", "--json"),
        ("patch", "the cat sat on the mat", "--noise", "--json"),
    ],
)
def test_every_command_gives_on_the_gpu_what_it_gives_on_the_cpu(tiny_model_dir, capsys, args):
    cpu = json.loads(run_cli(capsys, *args, "--model", str(tiny_model_dir), "--device", "cpu"))
    gpu = json.loads(run_cli(capsys, *args, "--model", str(tiny_model_dir), "--device", "cuda"))
    same_json(cpu, gpu)


@CUDA
def test_batched_greedy_and_the_trace_agree_on_both_devices(tiny_model_dir, tmp_path, capsys):
    lines = tmp_path / "in.txt"
    lines.write_text("the cat sat\na dog ran to the park\n\nthe cat\n")
    cpu = run_cli(capsys, "translate", "--input", str(lines), "--model", str(tiny_model_dir), "--device", "cpu")
    gpu = run_cli(capsys, "translate", "--input", str(lines), "--model", str(tiny_model_dir), "--device", "cuda")
    assert cpu == gpu
    for device in ("cpu", "cuda"):
        run_cli(capsys, "trace", "the cat sat", "--out", str(tmp_path / f"{device}.npz"), "--model",
                str(tiny_model_dir), "--device", device)  # fmt: skip
    with np.load(tmp_path / "cpu.npz") as a, np.load(tmp_path / "cuda.npz") as b:
        same_arrays(dict(a), dict(b))


@CUDA
def test_a_contrast_on_the_gpu_is_the_cpus(tiny_model_dir, capsys):
    lm = load_model_dir(tiny_model_dir)
    word = lm.tokenizer.id_to_token(lm.cfg.vocab_size - 1)
    args = ("explain", "the cat sat on the mat", "--json", "--contrast", word, "--model", str(tiny_model_dir))
    same_json(
        json.loads(run_cli(capsys, *args, "--device", "cpu")), json.loads(run_cli(capsys, *args, "--device", "cuda"))
    )


def test_the_comparison_reads_every_report_and_fails_on_a_changed_number(tiny_model_dir, capsys):
    """What the GPU tests compare, on the CPU: a report equals itself, and one number moved past the tolerance, or
    one token changed, fails."""
    args = ("explain", "the cat sat on the mat", "--json", "--method", "ixg", "--ablate", "dec.0.cross.1")
    report = json.loads(run_cli(capsys, *args, "--model", str(tiny_model_dir)))
    same_json(report, json.loads(json.dumps(report)))
    moved = json.loads(json.dumps(report))
    moved["lens.chosen_prob"][0][0] += 0.01
    with pytest.raises(AssertionError):
        same_json(report, moved)
    renamed = json.loads(json.dumps(report))
    renamed["lens.top_tokens"][0][0][0] = "other"
    with pytest.raises(AssertionError):
        same_json(report, renamed)
