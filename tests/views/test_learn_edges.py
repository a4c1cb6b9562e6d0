"""What a careful student trips on in Learn, each checked on the tiny model in AppTest: the causal-mask chapter's
"what to notice" names the peek its numbers show, the beam chapter's tree and list show the answer's path in the
page's token style, the worked example's question has one right option among the mistakes listed, the feedback
reads as a sentence, and a changed answer is not judged before it is checked again."""

from __future__ import annotations

import re

import numpy as np
from streamlit.testing.v1 import AppTest

from model.decode.decoding import DecodeOptions, decode
from model.decode.trace import teacher_forced_trace
from model.io.checkpoint import ENV_MODEL, load_model_dir
from model.lesson.learn import CHAPTER_KEYS, mistakes
from model.lesson.lesson import build_lesson
from tests.helpers import APP, ok, specs
from views.common import md
from viz.common import MIN_WIDTH, text_px

MAX_LEN = 8
TEXT = "A man in a blue shirt is standing on a ladder."


def open_chapter(model_dir, monkeypatch, key: str, text: str = TEXT) -> AppTest:
    monkeypatch.setenv(ENV_MODEL, str(model_dir))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update(chapter=str(CHAPTER_KEYS.index(key) + 1), src=text, max_len=str(MAX_LEN))
    at.run()
    ok(at)
    return at


def question(at: AppTest, key: str):
    return next(r for r in at.radio if r.key and r.key.startswith(f"learn_q_{key}_"))


def check(at: AppTest, key: str) -> AppTest:
    next(b for b in at.button if b.key and b.key.startswith(f"learn_check_{key}_")).click().run()
    ok(at)
    return at


def notice(at: AppTest) -> str:
    return next(m.value for m in at.markdown if m.value.startswith("**What to notice.**"))


def judged(at: AppTest) -> list[str]:
    return [e.value for e in (*at.success, *at.warning)]


def test_the_mask_chapter_names_the_peek_its_numbers_show(tiny_model_dir, monkeypatch):
    """Without the mask, the notice names the head and row that put the most weight on the token they must predict
    (column row + 1), and that weight, recomputed here from a trace without the mask."""
    lm = load_model_dir(tiny_model_dir)
    eos = lm.cfg.eos_id
    src = lm.tokenizer.encode(TEXT)
    out = [i for i in decode(lm.model, src + [eos], DecodeOptions(max_len=MAX_LEN)).ids if i != eos]
    w = teacher_forced_trace(lm.model, lm.tokenizer, src, out, causal=False).arrays["dec.0.self.weights"]
    T = w.shape[1]
    ahead = np.array([[w[h, r, r + 1] for r in range(T - 1)] for h in range(w.shape[0])])
    h, r = np.unravel_index(int(np.argmax(ahead)), ahead.shape)
    at = check(open_chapter(tiny_model_dir, monkeypatch, "mask"), "mask")
    text = notice(at).replace("\\", "")
    m = re.search(r"layer 0, head (\d+), row (\d+) \(.*?\) puts ([\d.]+) of its weight on column (\d+)", text)
    assert m, text
    assert (int(m[1]), int(m[2]), int(m[4])) == (h, r, r + 1), (m.groups(), (h, r))
    assert m[3] == f"{ahead[h, r]:.2f}"


def test_the_beam_chapter_draws_the_answer_s_path_in_view_with_the_list_under_it(tiny_model_dir, monkeypatch):
    lm = load_model_dir(tiny_model_dir)
    eos = lm.cfg.eos_id
    res = decode(lm.model, lm.tokenizer.encode(TEXT) + [eos], DecodeOptions(strategy="beam", beam=5, max_len=MAX_LEN))
    at = open_chapter(tiny_model_dir, monkeypatch, "decoding")
    (tree,) = [s for s in specs(at) if s["layout"]["title"]["text"].startswith("Beam search")]
    # the answer's path is drawn to its end, and every position of it is in view when the chapter opens (the tree
    # stops where the answer finished)
    (path,) = [t for t in tree["data"] if (t.get("meta") or {}).get("path")]
    lo, hi = tree["layout"]["xaxis"]["range"]
    assert max(path["x"]) == len(res.n_best[0].ids) - 1
    assert lo <= min(path["x"]) and max(path["x"]) < hi, (path["x"], lo, hi)
    assert "&lt;s&gt;" in tree["layout"]["xaxis"]["title"]["text"]  # <s> written out, not read as strike-through
    assert max(x for t in tree["data"] for x in t["x"] if x is not None) == max(path["x"])
    # one token style: the page's ␣, never SentencePiece's raw ▁, and the lesson's own words for the positions
    texts = [str(x) for t in tree["data"] for x in (t.get("text") or []) + (t.get("hovertext") or [])]
    assert texts and not [x for x in texts if "▁" in x], [x for x in texts if "▁" in x][:3]
    assert "step view" not in tree["layout"]["xaxis"]["title"]["text"]
    # the list the feedback points to: the finished candidates, the answer first
    (listed,) = [m.value for m in at.markdown if m.value.startswith("**The finished candidates")]
    first = re.search(r"^1\. (.*) \(score ", listed, re.M)[1].replace("\\", "")
    assert first == lm.tokenizer.decode([i for i in res.n_best[0].ids if i != eos])
    q = question(at, "decoding")
    q.set_value(q.options[0]).run()
    check(at, "decoding")
    assert any("the first candidate in the list under it" in t for t in judged(at)), judged(at)


def test_a_long_beam_tree_fits_a_desktop_column_with_its_labels_cut_to_their_columns(tiny_model_dir, monkeypatch):
    """Fifteen positions: the tree is no wider than the narrowest desktop column (the answer's end, its star and the
    colour bar in view without scrolling), never squeezed below it (a phone scrolls it in its frame), and every
    node's label fits the room before the next column (the hover has the token whole)."""
    monkeypatch.setenv(ENV_MODEL, str(tiny_model_dir))
    at = AppTest.from_file(APP, default_timeout=90)
    at.query_params.update(chapter=str(CHAPTER_KEYS.index("decoding") + 1), src=TEXT, max_len="16")
    at.run()
    ok(at)
    (tree,) = [s for s in specs(at) if s["layout"]["title"]["text"].startswith("Beam search")]
    layout = tree["layout"]
    assert layout.get("width") is None or layout["width"] <= MIN_WIDTH, layout.get("width")
    assert layout["meta"]["min_width"] == MIN_WIDTH
    lo, hi = layout["xaxis"]["range"]
    xs = [x for t in tree["data"] for x in t["x"] if x is not None]
    assert lo <= min(xs) and max(xs) < hi and max(xs) >= 14, (lo, hi, max(xs))
    plot_w = MIN_WIDTH - layout["margin"]["l"] - layout["margin"]["r"]
    column = plot_w / (hi - lo)
    labels = [x for t in tree["data"] for x in (t.get("text") or []) if x]
    assert labels and max(text_px(x) for x in labels) <= column, (column, max(labels, key=text_px))


def test_the_worked_example_s_question_has_one_right_option_and_reads_as_a_sentence(tiny_model_dir, monkeypatch):
    """The mistakes are listed in two kinds; the question asks for the first of the numbers that do not follow from
    their formula, which is the first of that list, and says that set-up mistakes do not count."""
    at = open_chapter(tiny_model_dir, monkeypatch, "by_hand")
    found = mistakes(build_lesson())
    shown = [m.value for m in at.markdown if m.value.startswith("*Numbers that do not follow")]
    setup = [m.value for m in at.markdown if m.value.startswith("*Mistakes of set-up")]
    assert len(shown) == 1 and len(setup) == 1
    first = next(m for m in found if m.arithmetic)
    assert shown[0].split("\n\n")[1].startswith(f"**{md(first.title)}.**")  # the list's first entry
    assert all(f"**{md(m.title)}.**" in (setup[0] if not m.arithmetic else shown[0]) for m in found)
    assert {m.key for m in found if not m.arithmetic} >= {"T_input", "PE"}
    q = question(at, "by_hand")
    assert "Mistakes of set-up" in q.label.replace("\\", "") and "do not count" in q.label.replace("\\", "")
    want = next(s.title for s in build_lesson().stages if s.key == first.key)
    q.set_value(want).run()
    check(at, "by_hand")
    (right,) = [t for t in at.success]
    assert right.value.startswith("Right") and ".." not in right.value, right.value


def test_a_changed_answer_is_judged_only_when_checked_again(tiny_model_dir, monkeypatch):
    at = open_chapter(tiny_model_dir, monkeypatch, "tokens")
    q = question(at, "tokens")
    right = q.options[[str(o) for o in q.options].index(str(len(decode_ids(tiny_model_dir)) + 1))]
    wrong = next(o for o in q.options if o != right)
    q.set_value(wrong).run()
    check(at, "tokens")
    assert [w.value.startswith("Not quite") for w in at.warning] == [True]
    question(at, "tokens").set_value(right).run()
    ok(at)
    assert not judged(at), judged(at)  # neither "Right" nor "Not quite" before Check
    assert not any(m.value.startswith("**What to notice.**") for m in at.markdown)
    assert any("press *Check*" in i.value for i in at.info)
    check(at, "tokens")
    assert at.success and at.success[0].value.startswith("Right") and not at.warning


def decode_ids(model_dir) -> list[int]:
    lm = load_model_dir(model_dir)
    eos = lm.cfg.eos_id
    return [
        i for i in decode(lm.model, lm.tokenizer.encode(TEXT) + [eos], DecodeOptions(max_len=MAX_LEN)).ids if i != eos
    ]


def test_the_start_page_shows_the_translation_as_plain_french_then_as_tokens(tiny_model_dir, monkeypatch):
    lm = load_model_dir(tiny_model_dir)
    eos = lm.cfg.eos_id
    ids = decode(lm.model, lm.tokenizer.encode(TEXT) + [eos], DecodeOptions(max_len=MAX_LEN)).ids
    plain = lm.tokenizer.decode([i for i in ids if i != eos])
    monkeypatch.setenv(ENV_MODEL, str(tiny_model_dir))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update(chapter="0", src=TEXT, max_len=str(MAX_LEN))
    at.run()
    ok(at)
    texts = [t.value for t in at.text]
    said = [m.value for m in at.markdown]
    i = said.index("**Its translation (the model's own, decoded greedily):**")
    assert plain and plain in texts, (plain, texts)
    assert texts[texts.index(plain) + 1].endswith("</s>")  # then its tokens, as the decoder writes them
    assert said[i + 1].startswith("**The same translation as the decoder writes it")


def test_beam_candidates_that_differ_by_a_final_full_stop_are_one_option():
    """Two finished candidates that differ only by a final full stop read as the same option twice: the best of the
    two is offered, and it is the answer when it is beam search's."""
    from types import SimpleNamespace

    from model.lesson.learn import decoding_chapter

    beam = [("Un chien court dans la neige.", -0.2), ("Un chien court dans la neige", -0.3), ("Un chien joue.", -0.5)]
    c = decoding_chapter(SimpleNamespace(beam=beam, beam_width=3, greedy=beam[1]))
    options = c.question.options
    assert len(options) == 2 and not any("neige”" in o or o.endswith("neige") for o in options), options
    assert "dans la neige." in options[c.question.answer]
