"""The handout of a link's view written outside the app (as the Export panel's button writes it): for the benchmark
and the tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from model.io.checkpoint import load_model_dir
from views.stepping import handout_bytes, handout_inputs


def handout_args(model_dir: Path, **raw: Any) -> tuple:
    """``views.stepping.handout_bytes``' arguments for the view that ``raw`` (choices by name: source, max_len, stage,
    …) describes: the model loaded, the sentence decoded, its line followed."""
    return handout_inputs(load_model_dir(model_dir), raw)


def handout_of(model_dir: Path, **raw: Any) -> bytes:
    return handout_bytes(*handout_args(model_dir, **raw))
