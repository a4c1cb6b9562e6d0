"""The handout of a link's view written outside the app (as the Export panel's button writes it): for the benchmark
and the tests."""

from __future__ import annotations

from pathlib import Path

from model.decode.steps import follow_line
from model.io.checkpoint import load_model_dir
from views.common import get_decode
from views.session import limits_of
from views.state import clamp_view, prepare_source
from views.stepping import handout_bytes


def handout_args(model_dir: Path, **raw) -> tuple:
    """``views.stepping.handout_bytes``'s arguments for the view that ``raw`` (choices by name: source, max_len,
    stage, …) describes: the model loaded, the sentence decoded, its line followed."""
    lm = load_model_dir(model_dir)
    view, _ = clamp_view(raw, limits_of(lm.cfg))
    src = prepare_source(view.source, lm.tokenizer, lm.cfg.eos_id, lm.cfg.max_len)
    ch = view.choices(str(lm.path))
    res = get_decode(lm, ch, src.ids)
    line = follow_line(res, lm.cfg.eos_id, view.follow)
    return lm, view, ch, res, line, src.ids, lm.tokenizer.tokens(list(src.ids)), view.stage


def handout_of(model_dir: Path, **raw) -> bytes:
    return handout_bytes(*handout_args(model_dir, **raw))
