"""The bad-input matrix of harness/bad_inputs.py on the tiny model: every case through the command
line (in-process, two in a real ``python -m model``) and through the app (AppTest), each ending in a
clear message or a sane clamp, never a traceback or a hang, with the app still usable afterwards."""

from __future__ import annotations

import re

import pytest

from harness.bad_inputs import (
    CASES,
    MODEL_DIR_CASES,
    Case,
    check_app,
    check_cli,
    classify_cli,
    cli_argv,
    run_cli_inprocess,
)
from model.io.checkpoint import ENV_MODEL

BY_NAME = {c.name: c for c in CASES}
CLI_CASES = [c for c in CASES if c.cli is not None and not c.subprocess_only]


def test_the_matrix_covers_every_kind_of_bad_input():
    both = [c for c in CASES if c.cli is not None and c.app is not None]
    assert len(both) >= 25 and len(BY_NAME) == len(CASES)
    for name in (
        "empty text",
        "spaces only",
        "newlines only",
        "10,000 characters",
        "one 500-character word",
        "1,000 tokens",
        "emoji",
        "CJK",
        "Arabic (RTL) + RLO",
        "zero-width + control chars",
        "NUL byte",
        "HTML <script>/<img onerror>",
        "Markdown/LaTeX syntax",
        "URL",
        "numbers only",
        "reference longer than the limit",
        "beam 0",
        "beam 1",
        "beam 64",
        "temperature 0",
        "temperature 1e-6",
        "temperature 100",
        "top-p 0",
        "top-p 1",
        "top-k 0",
        "max length 0",
        "max length 10,000",
        "model.safetensors missing",
        "model.safetensors truncated",
    ):
        assert name in BY_NAME, name


def test_the_model_directory_section_covers_sizes_shapes_dtypes_values_keys_headers_and_paths():
    """At least 12 damaged model directories, each refused (exit 2, one line) with the field or tensor named."""
    assert len(MODEL_DIR_CASES) >= 12 and all(c in CASES for c in MODEL_DIR_CASES)
    kinds = {re.match(r"\w+(:\w+)?", c.damage).group() for c in MODEL_DIR_CASES}  # "config:d_ff*2" -> "config:d_ff"
    for kind in (
        "config:vocab_size",
        "config:d_model",
        "config:n_decoder_layers",
        "config:n_encoder_layers",
        "config:d_ff",
        "config:n_heads",
        "weights:transpose",
        "weights:shrink",
        "weights:int32",
        "weights:nan",
        "weights:inf",
        "weights:drop",
        "weights:extra",
        "header:length",
        "header:garbage",
        "header:offsets",
        "path_is_file",
    ):
        assert kind in kinds, kind
    for c in MODEL_DIR_CASES:
        assert c.cli[0] == "error" and c.app[0] == "error" and c.cli[1], c.name
    absurd = [c for c in MODEL_DIR_CASES if c.damage in ("config:d_model=65536", "config:vocab_size=1000000")]
    assert len(absurd) == 2


@pytest.mark.parametrize("case", CLI_CASES, ids=[c.name for c in CLI_CASES])
def test_cli(case, tiny_model_dir, tmp_path):
    got, problem = check_cli(case, tiny_model_dir, tmp_path, timeout=60, use_subprocess=False)
    assert not problem, problem
    assert got.kind == case.cli[0]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["undecodable bytes in argv", "NUL byte"])
def test_cli_in_a_real_process(name, tiny_model_dir, tmp_path):
    got, problem = check_cli(BY_NAME[name], tiny_model_dir, tmp_path, timeout=120, use_subprocess=True)
    assert not problem, problem


def test_the_checks_can_fail(tiny_model_dir, tmp_path):
    """A wrong expectation, a traceback and a hang are all reported as failures."""
    wrong = Case("beam 0 expected to pass", params={"strategy": "beam", "beam": 0})
    got, problem = check_cli(wrong, tiny_model_dir, tmp_path, timeout=60, use_subprocess=False)
    assert got.kind == "error" and "expected ok" in problem
    assert classify_cli(1, "", 'Traceback (most recent call last):\n  File "x"\nTypeError: boom\n').kind == "TRACEBACK"
    assert classify_cli(2, "", "error: one\nerror: two\n").kind == "CRASH"
    slow = cli_argv(Case("slow", "cat " * 50, params={"max_len": 63}), tiny_model_dir, tmp_path)
    assert run_cli_inprocess(slow, timeout=1e-4)[0] == "HANG"


def test_app(tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_MODEL, str(tiny_model_dir))
    cases = [c for c in CASES if c.app is not None and not c.damage]
    results = check_app(cases, tiny_model_dir, tmp_path, timeout=180, every=False)
    problems = {name: problem for name, (_, problem) in results.items() if problem}
    assert not problems, problems
    assert {name: got.kind for name, (got, _) in results.items()} == {c.name: c.app[0] for c in cases}


@pytest.mark.slow
def test_app_with_broken_models(tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_MODEL, str(tiny_model_dir))
    cases = [c for c in CASES if c.damage]
    results = check_app(cases, tiny_model_dir, tmp_path, timeout=180)
    problems = {name: problem for name, (_, problem) in results.items() if problem}
    assert not problems, problems
    assert all(got.kind == "error" for got, _ in results.values()) and len(results) == len(cases)
