"""One source for every decoding default and bound: the CLI, the app and the batch translators take them from
``model.decode.decoding.DecodeOptions`` and ``model.core.constants`` (the ablation modes from
``model.core.ablation``), so no two
places can disagree."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from model import cli
from model.core.ablation import MODES
from model.core.constants import ATTRIBUTION_METHODS, BATCH_SIZE, MAX_BEAM
from model.decode.decoding import DecodeOptions, greedy_batch, translate_batch, translate_corpus
from model.io.checkpoint import ENV_MODEL

APP = str(Path(__file__).resolve().parents[2] / "views" / "main.py")
D = DecodeOptions()


def translate(*flags: str):
    return cli.parser().parse_args(["translate", "I am a student.", *flags])


def help_text(capsys, command: str) -> str:
    with pytest.raises(SystemExit):
        cli.parser().parse_args([command, "--help"])
    return capsys.readouterr().out


def test_the_cli_without_decoding_flags_decodes_with_decode_options_defaults():
    assert cli.options(translate()) == D
    a = translate()
    for flag in ("temperature", "top_k", "top_p", "seed", "length_penalty"):
        assert getattr(a, flag) == getattr(D, flag), flag
    assert cli.options(translate("--beam", "3")) == DecodeOptions(strategy="beam", beam=3)
    assert cli.options(translate("--sample")).strategy == "sample"


def test_one_beam_width_bound_for_the_cli_the_model_and_the_app(tiny_model_dir, monkeypatch, capsys):
    assert cli.options(translate("--beam", str(MAX_BEAM))).beam == MAX_BEAM
    for bad in (0, MAX_BEAM + 1):
        with pytest.raises(ValueError, match=f"beam width must be between 1 and {MAX_BEAM}, not {bad}"):
            cli.options(translate("--beam", str(bad)))
        with pytest.raises(ValueError, match=f"between 1 and {MAX_BEAM}"):
            DecodeOptions(strategy="beam", beam=bad)
    assert f"1 to {MAX_BEAM}" in " ".join(help_text(capsys, "translate").split())

    monkeypatch.setenv(ENV_MODEL, str(tiny_model_dir))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"strategy": "beam"})
    at.run()
    assert not at.exception and not at.error
    beam = at.slider(key="beam")
    assert (beam.min, beam.max, beam.value) == (1, MAX_BEAM, D.beam)
    assert at.number_input(key="length_penalty").value == D.length_penalty
    max_len = at.slider(key="max_len")
    assert max_len.value == min(D.max_len, max_len.max)


def test_the_batch_translators_default_to_decode_options_and_the_cli_batch():
    for fn in (translate_batch, translate_corpus):
        params = inspect.signature(fn).parameters
        assert params["length_penalty"].default == D.length_penalty, fn.__name__
        assert params["batch_size"].default == BATCH_SIZE == translate().batch_size, fn.__name__
    for fn in (translate_batch, greedy_batch):
        assert inspect.signature(fn).parameters["max_len"].default == D.max_len, fn.__name__


def test_the_cli_offers_the_models_attribution_methods_and_ablation_modes(capsys):
    text = help_text(capsys, "explain")
    assert "{" + ",".join(ATTRIBUTION_METHODS) + "}" in text and "{" + ",".join(MODES) + "}" in text
    a = cli.parser().parse_args(["explain", "x"])
    assert a.mode == MODES[0] and a.method is None
    for method in ATTRIBUTION_METHODS:
        assert cli.parser().parse_args(["explain", "x", "--method", method]).method == method
    with pytest.raises(SystemExit):
        cli.parser().parse_args(["explain", "x", "--method", "saliency"])
