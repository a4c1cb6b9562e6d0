"""One view state per run: the session's choices are read and bounded once per run (a whole page, or the step view's
fragment alone), from the one choice table; the stage registry drives the selector, All stages and the numbering."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import views.session
from model.decode.decoding import DecodeOptions
from model.decode.trace import teacher_forced_trace
from model.io.checkpoint import ENV_MODEL, load_model_dir
from tests.helpers import headings
from views.stages import REGISTRY, SECTIONS, numbered
from views.state import (
    CHOICES,
    DEFAULT_STAGE,
    QUERY_KEYS,
    STAGE_LABELS,
    STAGES,
    WIDGETS,
    View,
    choice,
    to_query,
    with_choices,
)

APP = str(Path(__file__).resolve().parents[2] / "views" / "main.py")


@pytest.fixture
def counted(tiny_model_dir, monkeypatch):
    """The app, with every bounding pass over the session's choices counted (``calls``: one entry per pass)."""
    calls: list[int] = []
    real = views.session.clamp_view
    monkeypatch.setattr(views.session, "clamp_view", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setenv(ENV_MODEL, str(tiny_model_dir))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"max_len": "8", "page": "Explore"})
    return at, calls


def run(at: AppTest, calls: list[int], act) -> int:
    """The bounding passes of the run ``act`` starts."""
    calls.clear()
    act(at).run()
    assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
    return len(calls)


def test_each_run_bounds_the_choices_once(counted):
    at, calls = counted
    assert run(at, calls, lambda a: a) == 1  # the first run (the URL read)
    assert run(at, calls, lambda a: a.button(key="next").click()) == 1  # ▶ (AppTest runs the whole page)
    assert at.session_state["step"] == 1
    assert run(at, calls, lambda a: a.slider(key="step").set_value(3)) == 1
    assert run(at, calls, lambda a: a.segmented_control(key="stage").set_value("all")) == 1  # the whole page
    assert run(at, calls, lambda a: a.button(key="prev").click()) == 1
    assert at.session_state["step"] == 2
    assert run(at, calls, lambda a: a.text_input(key="reference").input("Je suis étudiant.")) == 1
    assert run(at, calls, lambda a: a.segmented_control(key="tab").set_value("tf")) == 1
    assert run(at, calls, lambda a: a.button(key="next").click()) == 1  # in the teacher-forcing view
    assert run(at, calls, lambda a: a.query_params.update(page="Compare") or a) == 1


def test_the_choice_table_is_the_one_source():
    assert set(QUERY_KEYS.values()) == {c.name for c in CHOICES} and len(QUERY_KEYS) == len(CHOICES)
    base = View()
    for c in CHOICES:  # every default is the table's, and the decoding ones DecodeOptions'
        assert choice(base, c.name) == c.default
    assert base.decode == DecodeOptions() and isinstance(with_choices(base, beam=3).decode, DecodeOptions)
    assert with_choices(base, beam=3, forced=(4, 5)).decode == DecodeOptions(beam=3, prefix=(4, 5))
    assert {"beam", "stage", "step", "source"} <= set(WIDGETS) and "forced" not in WIDGETS
    assert to_query(with_choices(base, beam=3, stage="ffn")) == {"src": base.source, "beam": "3", "stage": "ffn"}


def test_the_stage_registry_drives_the_selector_and_the_numbering(tiny_model_dir, monkeypatch):
    assert STAGES == (*(s.id for s in REGISTRY), "all") and DEFAULT_STAGE in STAGES
    assert [STAGE_LABELS[s.id] for s in REGISTRY] == [s.label for s in REGISTRY]
    lm = load_model_dir(tiny_model_dir)
    tr = teacher_forced_trace(lm.model, lm.tokenizer, "The dog runs.", "Le chien court.")
    for s in REGISTRY:  # every stage's matrix for Compare is found and reads one row per decoder position
        if s.compared is not None:
            assert s.run_matrix(tr, 0, 0).values.shape[0] == len(tr.label_tokens), s.id
    assert [numbered(sec, "x") for sec in SECTIONS] == [f"{i} · x" for i in range(1, len(SECTIONS) + 1)]
    monkeypatch.setenv(ENV_MODEL, str(tiny_model_dir))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"max_len": "8", "page": "Explore", "strategy": "beam", "beam": "3", "stage": "all"})
    at.run()
    assert not at.exception and not at.error
    numbers = [int(m.group(1)) for h in headings(at) if (m := re.match(r"(\d+) · ", h))]
    assert numbers == list(range(1, len(SECTIONS) + 1))  # All stages: every numbered section once, in order
    # every heading of a stage numbered, Add & Norm 2 and 3 as the closing part of the sublayer they follow
    unnumbered = [h for h in headings(at) if "Add & Norm" in h and not re.match(r"\d+(\.\d+)? · ", h)]
    assert not unnumbered, unnumbered
    parts = [h for h in headings(at) if re.match(r"\d+\.1 · Add & Norm [23] ", h)]
    assert [h.split(" · ")[0] for h in parts] == [f"{SECTIONS.index(s) + 1}.1" for s in ("cross", "ffn")], parts


# ---------------------------------------------------------------------------
# The rules the pages show, computed in model/.


def test_future_weight_and_top_k():
    import numpy as np

    from model.decode.steps import future_weight, top_k

    causal = np.tril(np.full((3, 3), 1 / 3))
    assert future_weight(causal) == 0.0
    w = np.array([[0.5, 0.5, 0.0], [0.2, 0.2, 0.6], [0.1, 0.1, 0.8]])
    assert future_weight(w) == pytest.approx((0.5 + 0.6 + 0.0) / 3)  # right of the diagonal, per row, averaged
    p = np.array([0.1, 0.4, 0.05, 0.3, 0.15])
    ids, probs = top_k(p, 3)
    assert ids.tolist() == [1, 3, 4] and probs.tolist() == [0.4, 0.3, 0.15]


def test_same_positions_align_by_matching_blocks():
    from model.interpret.explain import same_positions

    assert same_positions([1, 2, 3, 4], [1, 2, 3, 4]) == {0, 1, 2, 3}
    assert same_positions([1, 9, 3, 4], [1, 2, 3, 4]) == {0, 2, 3}
    assert same_positions([1, 2, 3], [0, 1, 2, 3]) == {0, 1, 2}  # an insertion in the other shifts nothing here
    assert same_positions([], [1]) == set()


def test_readability_counts_characters_not_tokens(tiny_tokenizer):
    from model.core.tokenizer import readability

    tok = tiny_tokenizer
    words = readability(tok, tok.encode("the cat"), unk_id=3)
    assert (words.n_unk, words.n_bytes, words.mostly_bytes, words.mostly_unknown) == (0, 0, False, False)
    alien = readability(tok, tok.encode("日本語"), unk_id=3)
    assert alien.n_bytes == 9 and alien.n_byte_chars == alien.n_chars == 3 and alien.mostly_bytes
    name = readability(tok, tok.encode("the cat is called Я"), unk_id=3)
    assert name.n_byte_chars == 1 and not name.mostly_bytes  # one letter of another script among words


def test_the_summary_keeps_its_flat_choices():
    from dataclasses import asdict

    from model.decode.decoding import DecodeOptions
    from model.decode.steps import _flat
    from views.state import Choices

    ch = Choices("m", "x", DecodeOptions(strategy="beam", beam=3, max_len=4, prefix=(5,)))
    assert list(_flat(asdict(ch))) == [
        "model_dir",
        "source",
        "strategy",
        "beam",
        "length_penalty",
        "temperature",
        "top_k",
        "top_p",
        "seed",
        "max_len",
        "prefix",
    ]


def test_every_decoding_choice_is_read_from_and_changed_in_the_views_decode_options():
    from views.state import DECODING, choice, with_choices

    given = dict(strategy="beam", beam=3, length_penalty=0.5, temperature=0.7, top_k=4, top_p=0.9, seed=7, max_len=9)
    assert set(given) == set(DECODING)
    view = with_choices(View(), **given, forced=(4, 5), step=2)
    assert {n: getattr(view.decode, n) for n in DECODING} == given == {n: choice(view, n) for n in DECODING}
    assert view.decode.prefix == choice(view, "forced") == (4, 5) and view.step == choice(view, "step") == 2
    assert not any(isinstance(a, property) for a in vars(View).values())  # a plain dataclass: nothing forwarded
