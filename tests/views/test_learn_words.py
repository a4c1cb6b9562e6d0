"""Every sentence of the lesson says what its numbers show: the query chapter names the largest value, not the
largest in magnitude; the softmax question offers the row's own token and says so; no "0.0e+00"; the FFN figure's
title reads as words; the feedback ends with one full stop after a quoted sentence; the class counts "1 answer";
the hand-sized example names where it was published."""

from __future__ import annotations

import re

import numpy as np
import pytest

from model.core import keys
from model.io.checkpoint import load_model_dir
from model.lesson.learn import SELF_HEAD, SELF_LAYER
from tests.views.test_learn import SENTENCES, built_lesson
from viz.figures import ffn_figure


@pytest.fixture(scope="module")
def lesson(tiny_model_dir):
    return built_lesson(load_model_dir(tiny_model_dir), SENTENCES[1])


def said(learn) -> list[str]:
    """Every sentence the lesson shows: chapters' text, notices, text alternatives, questions and their reasons."""
    out = []
    for c in learn.chapters:
        out += [c.text, c.notice, c.alt, c.question.prompt, c.question.why, *c.question.options]
    for q in learn.pre + learn.post:
        out += [q.prompt, q.why, *q.options]
    return out


def test_the_query_chapter_names_the_largest_value_and_its_column(lesson):
    learn, ref = lesson
    f = learn.focus.row
    q = ref.a[keys.dec(SELF_LAYER, "self", "Q")][SELF_HEAD][f]
    notice = learn.chapter("qkv").notice
    assert f"{q.max():+.2f} (column {int(np.argmax(q))})" in notice, notice
    assert f"{q.min():+.2f} (column {int(np.argmin(q))})" in notice, notice
    for value in re.findall(r"largest (?:query )?value ([+−-][\d.]+)", notice):  # a "largest" is the largest
        assert float(value.replace("−", "-")) == pytest.approx(q.max(), abs=0.006), notice


def test_the_softmax_question_says_the_row_s_own_token_is_offered(lesson):
    learn, _ = lesson
    q = learn.chapter("softmax").question
    f = learn.focus.row
    columns = [int(re.search(r"column (\d+)", o)[1]) for o in q.options]
    assert f in columns, q.options  # the row's own token is a candidate (it often takes the most weight) …
    assert "earlier token" not in q.prompt and "its own" in q.prompt, q.prompt  # … and the question says so


def test_no_number_reads_as_zero_in_scientific_notation(lesson):
    learn, _ = lesson
    text = " ".join(said(learn))
    assert not re.search(r"\d\.\de[+-]00\b", text), re.findall(r".{40}\d\.\de[+-]00.{10}", text)
    assert "equal in every dimension" in learn.chapter("output_proj").notice  # row 0 of α·V is row 0 of V exactly


def test_the_hand_sized_example_names_its_author_and_title(lesson):
    text = lesson[0].chapter("by_hand").text
    assert "Vikas Srinivasa" in text and "“Transformer Decoder: Forward Pass Mechanism and Key Insights”" in text


def test_the_ffn_title_reads_as_words():
    hidden = np.array([[0.0, 0.0, 1.0, 2.0], [0.0, 1e-7, 3.0, 0.5]])
    title = ffn_figure(hidden, ["a", "b"], title="FFN").plotly().layout.title.text.replace("<br>", " ")
    assert "1e-6" not in title and "|h|" not in title, title
    assert "exactly 0: 37.5%" in title and "within 10⁻⁶ of 0: 50.0%" in title, title


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("See chapter 12: greedy: “Le chat.”; beam: “Un homme est sur une échelle voisins.”", "voisins.”"),
        ("See row 3: weight 0.412", "0.412."),
        ("Right: ‘le’", "‘le’."),
        ("Is it?", "Is it?"),
    ],
)
def test_feedback_ends_with_one_full_stop(text, want):
    from views.learn import ended

    out = ended(text)
    assert out.endswith(want) and not out.endswith(("”.", ".."))


def test_the_class_counts_answers_in_words():
    from views.class_link import answers

    assert [answers(n) for n in (0, 1, 2)] == ["0 answers", "1 answer", "2 answers"]
