"""The Learn page, driven headlessly with AppTest on the tiny model: every chapter walked for two sentences, each
question answered with an answer recomputed here straight from a teacher-forced trace and the torch modules (never
through ``model.lesson.learn``), the two checks scored, the chapter and sentence in the URL, and the page a visitor
without
parameters lands on."""

from __future__ import annotations

import html
import re

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from harness import audit
from model.core import keys
from model.decode.decoding import DecodeOptions, decode
from model.decode.trace import teacher_forced_trace
from model.io.checkpoint import ENV_MODEL, load_model_dir
from model.lesson.learn import CHAPTER_KEYS, mistakes
from model.lesson.lesson import build_lesson
from tests.helpers import APP, ok, open_page, shown_page
from views.common import md, show_token

MAX_LEN = 8
SENTENCES = ("I like pizza.", "A man in a blue shirt is standing on a ladder.")
END = len(CHAPTER_KEYS) + 1


def open_learn(model_dir, monkeypatch, **query) -> AppTest:
    monkeypatch.setenv(ENV_MODEL, str(model_dir))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update(query)
    at.run()
    ok(at)
    return at


class Reference:
    """What the lesson's answers must be, recomputed independently from a trace of the greedy translation."""

    def __init__(self, lm, text: str):
        self.lm = lm
        src = lm.tokenizer.encode(text)
        eos = lm.cfg.eos_id
        greedy = decode(lm.model, src + [eos], DecodeOptions(max_len=MAX_LEN))
        self.greedy = greedy
        self.beam = decode(lm.model, src + [eos], DecodeOptions(strategy="beam", beam=5, max_len=MAX_LEN))
        self.tr = teacher_forced_trace(lm.model, lm.tokenizer, src, [i for i in greedy.ids if i != eos])
        self.a = self.tr.arrays
        self.T = len(self.tr.label_tokens)

    def text(self, ids) -> str:
        return self.lm.tokenizer.decode([i for i in ids if i != self.lm.cfg.eos_id])

    def cross_layer(self) -> int:
        L = self.lm.cfg.n_decoder_layers
        return max(range(L), key=lambda l: self.a[keys.dec(l, "cross", "weights")].mean(0).max(1).mean())

    def answer(self, key: str, prompt: str, options: list[str]) -> str:
        """The option that is right, found from the trace and the model's modules."""
        a, T = self.a, self.T
        m = re.search(r"row (\d+)", prompt)
        f = int(m.group(1)) if m else 0
        col = lambda j: next(o for o in options if o.endswith(f"(column {j})"))  # noqa: E731
        if key == "tokens":
            return str(T)
        if key == "embed":
            e, p = np.linalg.norm(a["dec.embed"][f]), np.linalg.norm(a["dec.pe"][f])
            return next(o for o in options if o.startswith("the token embedding" if e > p else "the positional"))
        if key == "qkv":
            return f"{T} × {self.lm.cfg.d_model // self.lm.cfg.n_heads}"
        if key == "scores":  # recomputed from Q and K
            Q, K = a["dec.0.self.Q"][0], a["dec.0.self.K"][0]
            return col(int(np.argmax(Q[f] @ K.T)))
        if key == "mask":
            return str(T - 1 - f)
        if key == "softmax":
            return col(int(np.argmax(a["dec.0.self.weights"][0][f])))
        if key == "output_proj":
            np.testing.assert_allclose(a["dec.0.self.context"][0][0], a["dec.0.self.V"][0][0], atol=1e-5)
            return "row 0 of V"
        if key == "addnorm":
            return next(o for o in options if o.startswith(f"row {int(np.argmax(a['dec.0.norm1.std']))} ("))
        if key == "cross":
            return col(int(np.argmax(a[keys.dec(self.cross_layer(), "cross", "weights")].mean(0)[f])))
        if key == "ffn":
            share = float((a["dec.0.ffn.hidden"][f] == 0).mean())
            return options[min(int(share * 4), 3)]
        if key == "output":
            second = int(np.argsort(-a["probs"][f])[1])
            return f"‘{show_token(self.lm.tokenizer.tokens([second])[0])}’"
        if key == "decoding":
            return f"“{self.text(self.beam.ids)}”"
        if key == "lens":  # each layer's output through the model's own output head, in torch
            label = int(a["label_ids"][f])
            for layer in range(self.lm.cfg.n_decoder_layers):
                h = torch.tensor(a[keys.dec(layer, "norm3", "out")][f])
                if int(self.lm.model.logits(h[None, None])[0, 0].argmax()) == label:
                    return f"after layer {layer}"
            return "at no layer"
        if key == "by_hand":
            return next(s.title for s in build_lesson().stages if s.matches is False)
        raise KeyError(key)

    def check_answer(self, i: int, prompt: str, options: list[str]) -> str:
        """The five checks' right answers, by their place (the same concept at both ends)."""
        a, T = self.a, self.T
        m = re.search(r"(?:row|position) (\d+)", prompt)
        r = int(m.group(1)) if m else 0
        if i == 1:
            tok = self.tr.dec_input_tokens[r] if "Which token does it read" in prompt else self.tr.label_tokens[r]
            return f"‘{show_token(tok)}’"
        if i == 2:
            if "How many" in prompt:
                return str(T * (T - 1) // 2)
            cells = [o for o in options if o.startswith("row ")]
            hits = [o for o in cells if (lambda r_, c_: c_ > r_)(*map(int, re.findall(r"\d+", o)))]
            return hits[0] if hits else "none of these"
        if i == 3:
            return "1"
        if i == 4:
            w = a[keys.dec(self.cross_layer(), "cross", "weights")].mean(0)[r]
            return next(o for o in options if o.endswith(f"(column {int(np.argmax(w))})"))
        g, b = self.greedy.n_best[0], self.beam.n_best[0]
        same = self.text(g.ids) == self.text(b.ids)
        if "same translation as greedy" in prompt:
            return "yes" if same else "no"
        return "they are the same translation" if same else "beam search's" if b.score >= g.score else "greedy's"


def radio(at: AppTest, prefix: str):
    return next(r for r in at.radio if r.key and r.key.startswith(prefix))


def button(at: AppTest, prefix: str):
    return next(b for b in at.button if b.key and b.key.startswith(prefix))


def walk(at: AppTest, ref: Reference) -> dict[str, str]:
    """Every chapter: answer with the recomputed answer, check it, read the feedback; returns the answers."""
    answers = {}
    for k, key in enumerate(CHAPTER_KEYS, 1):
        at.button(key="learn_next").click().run()
        ok(at)
        assert at.header[0].value.startswith(f"{k}. "), at.header[0].value
        assert at.query_params["chapter"] in (str(k), [str(k)])
        assert f"Chapter {k} of {len(CHAPTER_KEYS)}" in at.get("progress")[0].proto.text
        q = radio(at, f"learn_q_{key}_")
        want = ref.answer(key, q.label, list(q.options))
        assert want in q.options, (key, want, q.options)
        q.set_value(want).run()
        button(at, f"learn_check_{key}_").click().run()
        ok(at)
        assert at.success and at.success[0].value.startswith("Right"), (key, want, [w.value for w in at.warning])
        assert any(m.value.startswith("**What to notice.**") for m in at.markdown), key
        assert any("The figure in words" in c.value for c in at.caption), key
        assert audit.figures(at), key  # the chapter's figure, checked against Plotly's schema
        answers[key] = want
    return answers


@pytest.fixture(scope="module")
def lm(tiny_model_dir):
    return load_model_dir(tiny_model_dir)


def test_a_visitor_without_parameters_lands_on_learn_and_old_links_still_work(tiny_model_dir, monkeypatch):
    at = open_learn(tiny_model_dir, monkeypatch)
    assert shown_page(at) == "Learn"
    assert at.title[0].value.endswith("Learn: how a decoder writes a translation")
    assert re.search(r"about \*\*(\d+) minutes\*\*", at.markdown[0].value)
    assert int(re.search(r"about \*\*(\d+) minutes\*\*", at.markdown[0].value).group(1)) <= 15
    assert shown_page(open_learn(tiny_model_dir, monkeypatch, page="Lesson")) == "Learn"
    assert shown_page(open_learn(tiny_model_dir, monkeypatch, src="Hi.", step="2")) == "Explore"
    assert shown_page(open_learn(tiny_model_dir, monkeypatch, page="About")) == "About"
    # an older link opens its page with the rest of its query, which the page keeps; "page" leaves the URL
    at = open_learn(tiny_model_dir, monkeypatch, page="Compare", src="Hi.", srcb="Hello.")
    assert shown_page(at) == "Compare" and "page" not in at.query_params
    assert at.query_params["src"] == "Hi." and at.text_area(key="source_b").value == "Hello."
    # Explore's parameters open Explore only when the session opens: Learn stays Learn afterwards
    at = open_learn(tiny_model_dir, monkeypatch, src="Hi.", step="2")
    assert shown_page(open_page(at, "Learn")) == "Learn" and at.query_params["chapter"] == "0"
    assert shown_page(at.run()) == "Learn"
    assert shown_page(open_page(at, "Explore")) == "Explore" and at.text_area(key="source").value == "Hi."


@pytest.mark.parametrize("text", SENTENCES)
def test_every_chapter_for_a_sentence_with_answers_recomputed_from_the_trace(tiny_model_dir, monkeypatch, lm, text):
    at = open_learn(tiny_model_dir, monkeypatch, page="Learn", src=text, max_len=str(MAX_LEN))
    ref = Reference(lm, text)
    assert at.text_input(key="learn_src").value == text
    at.button[[b.proto.label for b in at.button].index("Check my answers")].click().run()
    ok(at)
    assert any(m.value == "**Score: 0 / 5**" for m in at.markdown)
    walk(at, ref)
    at.button(key="learn_next").click().run()
    ok(at)
    assert at.query_params["chapter"] in (str(END), [str(END)])
    for i in range(1, 6):
        q = radio(at, f"learn_post_{i}_")
        q.set_value(ref.check_answer(i, q.label, list(q.options)))
    at.button[[b.proto.label for b in at.button].index("Check my answers")].click().run()
    ok(at)
    assert any(m.value == "**Score: 5 / 5**" for m in at.markdown), [m.value for m in at.markdown]
    before, after = at.metric
    assert (before.value, after.value) == ("0 / 5", "5 / 5")


def test_the_first_check_s_answers_are_the_trace_s(tiny_model_dir, monkeypatch, lm):
    text = SENTENCES[1]
    at = open_learn(tiny_model_dir, monkeypatch, page="Learn", src=text, max_len=str(MAX_LEN))
    ref = Reference(lm, text)
    for i in range(1, 6):
        q = radio(at, f"learn_pre_{i}_")
        q.set_value(ref.check_answer(i, q.label, list(q.options)))
    at.button[[b.proto.label for b in at.button].index("Check my answers")].click().run()
    ok(at)
    assert any(m.value == "**Score: 5 / 5**" for m in at.markdown)


def test_changing_the_sentence_changes_the_answers(tiny_model_dir, monkeypatch, lm):
    at = open_learn(tiny_model_dir, monkeypatch, page="Learn", src=SENTENCES[0], max_len=str(MAX_LEN))
    first = walk(at, Reference(lm, SENTENCES[0]))
    at.text_input(key="learn_src").set_value(SENTENCES[1]).run()
    ok(at)
    assert at.query_params["src"] in (SENTENCES[1], [SENTENCES[1]])
    at.session_state["learn_chapter"] = 0  # back to the first check, then through the chapters again
    at.run()
    second = walk(at, Reference(lm, SENTENCES[1]))
    differ = [k for k in CHAPTER_KEYS if first[k] != second[k]]
    assert len(differ) >= 3, (first, second)
    assert "cross" in differ, differ


def test_without_a_model_the_hand_sized_example_still_works(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_MODEL, str(tmp_path / "nope"))
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception
    assert any("does not exist" in e.value for e in at.error)
    assert at.header[0].value.startswith(f"{len(CHAPTER_KEYS)}. Check it by hand")
    assert any(h.value == "Common mistakes to avoid" for h in at.subheader)
    shown = "\n".join(m.value for m in at.markdown)
    for m in mistakes(build_lesson()):  # every mistake, with the computation that reveals it
        assert f"**{md(m.title)}.** {md(m.computation)}" in shown, m.title


def built_lesson(lm, text: str):
    """``model.lesson.learn.build`` on ``text``'s greedy translation, as the Learn page calls it."""
    from model.interpret.explain import logit_lens
    from model.lesson.learn import Outcomes, build

    ref = Reference(lm, text)
    nc = teacher_forced_trace(
        lm.model,
        lm.tokenizer,
        lm.tokenizer.encode(text),
        [int(i) for i in ref.a["label_ids"][:-1]],
        causal=False,
    )
    labels = [int(i) for i in ref.a["label_ids"]]
    outcomes = Outcomes(
        beam=[(ref.text(h.ids), h.score) for h in ref.beam.n_best],
        beam_width=5,
        greedy=(ref.text(ref.greedy.ids), ref.greedy.n_best[0].score),
        lens_rank=logit_lens(lm.model, ref.a, labels).chosen_rank,
    )
    learn = build(ref.tr, nc, lm.cfg, outcomes, build_lesson())
    return learn, ref


def test_a_model_without_a_lens_gets_a_lens_chapter_that_claims_no_rank(lm):
    """A pre-norm configuration without a final norm has no lens (``explain.lens_problem``): the chapter asks why,
    its right option the reason, and states no rank it never read."""
    from dataclasses import asdict, dataclass

    from model.core.config import ModelConfig
    from model.interpret.explain import lens_problem
    from model.lesson.learn import Outcomes, build

    @dataclass(frozen=True)
    class PreNorm(ModelConfig):
        normalize_before: bool = True

    cfg = PreNorm(**asdict(lm.cfg))
    problem = lens_problem(cfg)
    assert problem is not None and "no final norm" in problem
    learn, ref = built_lesson(lm, SENTENCES[0])
    nc = teacher_forced_trace(
        lm.model,
        lm.tokenizer,
        lm.tokenizer.encode(SENTENCES[0]),
        [int(i) for i in ref.a["label_ids"][:-1]],
        causal=False,
    )
    outcomes = Outcomes(beam=[("x", -1.0)], beam_width=5, greedy=("x", -1.0), lens_rank=None)
    chapter = build(ref.tr, nc, cfg, outcomes, build_lesson()).chapter("lens")
    q = chapter.question
    assert "no lens" in q.prompt and q.options[q.answer] == problem[0].upper() + problem[1:], q
    assert "rank" not in chapter.notice and "no lens to draw" in chapter.notice, chapter.notice
    assert "first become the top prediction" in learn.chapter("lens").question.prompt  # the paper's model: ranks


def test_ten_to_fourteen_chapters_in_at_most_a_quarter_of_an_hour(lm):
    from model.lesson.learn import READ_S

    learn, _ = built_lesson(lm, SENTENCES[0])
    assert 10 <= len(learn.chapters) <= 14 and learn.minutes <= 15
    assert learn.minutes >= len(learn.chapters) * READ_S / 60
    for c in learn.chapters:  # 2–5 plain sentences each, one right answer among distinct options
        assert 2 <= len(re.findall(r"[.!?](?:\s|$)", c.text)) <= 5, (c.key, c.text)
        assert len(set(c.question.options)) == len(c.question.options) >= 2, c.key
    for q in learn.pre + learn.post:
        assert len(set(q.options)) == len(q.options) >= 2 and 0 <= q.answer < len(q.options), q.key
    assert [q.key.split("_")[1] for q in learn.pre] == [q.key.split("_")[1] for q in learn.post]
    assert all(a.prompt != b.prompt for a, b in zip(learn.pre, learn.post))
    q = learn.chapter("softmax").question  # only positions the row can see are offered
    f = int(re.search(r"row (\d+)", q.prompt).group(1))
    assert all(int(re.search(r"column (\d+)", o).group(1)) <= f for o in q.options), q.options


def test_or_go_to_moves_to_the_chapter_and_follows_the_buttons(tiny_model_dir, monkeypatch):
    at = open_learn(tiny_model_dir, monkeypatch, chapter="3")
    assert at.header[0].value.startswith("3. ") and at.selectbox(key="learn_goto").value == 3
    at.selectbox(key="learn_goto").set_value(7).run()
    ok(at)
    assert at.header[0].value.startswith("7. ") and at.query_params["chapter"] in ("7", ["7"])
    at.button(key="learn_next").click().run()
    ok(at)
    assert at.header[0].value.startswith("8. ") and at.selectbox(key="learn_goto").value == 8


def test_the_figure_in_words_is_folded_away_until_the_answer_is_checked(tiny_model_dir, monkeypatch):
    """It reads the answer off the figure ("largest σ … at row 3"), so before Check it sits in a closed expander
    that says so, and after Check it is a caption under the figure."""
    at = open_learn(tiny_model_dir, monkeypatch, chapter="8")
    folded = [e for e in at.expander if e.label == "The figure in words (it gives the answer)"]
    assert len(folded) == 1 and any(c.value.startswith("The figure in words") for c in folded[0].caption)
    outside = [c for c in at.main.caption if c.value.startswith("The figure in words")]
    assert len(outside) == 1  # the one inside the expander, no other
    button(at, "learn_check_").click().run()
    ok(at)
    assert not [e for e in at.expander if e.label.startswith("The figure in words")]
    assert any(c.value.startswith("The figure in words") for c in at.caption)


def test_the_next_chapter_s_figure_is_built_while_this_one_is_read(tiny_model_dir, monkeypatch):
    """Each chapter builds the next one's figure in the background: going on to it takes the figure from the cache,
    and what the cache sends is what building it sends."""
    import views.plot as plot

    cache = plot.FigureCache(max_bytes=2**26)
    monkeypatch.setattr(plot, "figure_cache", lambda: cache)
    at = open_learn(tiny_model_dir, monkeypatch, chapter="1")
    for k in range(2, len(CHAPTER_KEYS) + 1):
        plot._ahead().submit(lambda: None).result()  # the figure built ahead (one thread: in order) is ready
        misses = cache.misses
        at.button(key="learn_next").click().run()
        ok(at)
        assert at.header[0].value.startswith(f"{k}. ")
        assert cache.misses == misses, f"chapter {k}: its figure was built again"
    ahead = audit.figures(at)
    monkeypatch.setattr(plot.FigureCache, "get", lambda self, digest: None)  # every figure built in the run
    at.run()
    assert audit.figures(at) == ahead


def test_each_chapter_sends_the_next_one_s_figure_along_once_built(tiny_model_dir, monkeypatch):
    """The browser draws the next chapter's figure while the learner reads (``views/plot.js``): each chapter's
    element carries its figure's id and, once built, the next chapter's figure, which is what that chapter then
    shows under the id it was sent with."""
    import views.plot as plot

    cache = plot.FigureCache(max_bytes=2**26)
    monkeypatch.setattr(plot, "figure_cache", lambda: cache)

    def sent(at) -> dict:
        (data,) = [c.proto.bytes for c in at.get("bidi_component") if plot.payload(c.proto.bytes).get("figure")]
        return plot.payload(data)

    at = open_learn(tiny_model_dir, monkeypatch, chapter="1")
    assert "ahead" not in sent(at)  # the next chapter's figure is not built yet on the lesson's first run
    promised = None
    for k in range(2, len(CHAPTER_KEYS) + 1):
        plot._ahead().submit(lambda: None).result()  # what this chapter asked to build ahead is built
        at.button(key="learn_next").click().run()
        ok(at)
        now = sent(at)
        assert now["id"].endswith(f":learn_fig_{CHAPTER_KEYS[k - 1]}")
        if promised is not None:
            assert (now["id"], now["figure"], now.get("alt")) == promised, f"chapter {k}"
        if k < len(CHAPTER_KEYS):
            ahead = now["ahead"]
            assert ahead["id"].endswith(f":learn_fig_{CHAPTER_KEYS[k]}")
            assert ahead["config"]["toImageButtonOptions"]["filename"] == f"learn_fig_{CHAPTER_KEYS[k]}"
            promised = (ahead["id"], ahead["figure"], ahead.get("alt"))
        else:
            assert "ahead" not in now  # the last chapter has none after it


@pytest.mark.parametrize(
    "chapter, shown, said", [("99", "15", "between 0 and 15; showing 15"), ("x", "0", "'x' is not a number")]
)
def test_a_chapter_the_lesson_lacks_is_said_once_then_the_nearest_shown(
    tiny_model_dir, monkeypatch, chapter, shown, said
):
    at = open_learn(tiny_model_dir, monkeypatch, chapter=chapter)
    assert [w.value for w in at.warning if said in w.value.replace("\\", "")], [w.value for w in at.warning]
    assert at.query_params["chapter"] in (shown, [shown])
    at.run()
    assert not [w for w in at.warning if "Chapter" in w.value]  # said on the run that read the link


def test_the_lens_question_is_answered_from_its_figure(tiny_model_dir, monkeypatch):
    """The chapter asked after which layer a token first becomes the top prediction while its figure showed only
    its probability: the figure is now each layer's likeliest tokens at the chapter's row, the token outlined, and
    the answer read off it (the first row whose top cell is the token) is judged right."""
    k = CHAPTER_KEYS.index("lens") + 1
    at = open_learn(tiny_model_dir, monkeypatch, chapter=str(k))
    q = radio(at, "learn_q_lens_")
    token = re.search(r"‘(.+?)’", q.label.replace("\\", "")).group(1)
    fig = next(f for f in audit.figures(at) if f["layout"]["title"]["text"].startswith("What each layer would"))
    cells = next(t for t in fig["data"] if t.get("text") is not None)["text"]
    first = next((i for i, row in enumerate(cells) if html.unescape(row[0]) == token), None)
    q.set_value(q.options[-1] if first is None else f"after layer {first}").run()
    button(at, "learn_check_lens_").click().run()
    ok(at)
    assert at.success and at.success[0].value.startswith("Right"), [w.value for w in at.warning]


def test_the_embedding_question_is_answered_from_the_table_under_its_figure(tiny_model_dir, monkeypatch):
    """The chapter asks which part of X is longer at its row while its figure shows their sum: a table under it
    gives every row's two lengths, a row per figure row; the answer read off the asked row is judged right, and the
    feedback's lengths are that row's."""
    k = CHAPTER_KEYS.index("embed") + 1
    at = open_learn(tiny_model_dir, monkeypatch, chapter=str(k))
    table = next(m.value for m in at.markdown if m.value.startswith("**The lengths of X's two parts"))
    lines = [x for x in table.splitlines() if x.startswith("| ") and not x.startswith("| row")]
    fig = next(f for f in audit.figures(at) if f["data"] and f["data"][0].get("type") == "heatmap")
    z = fig["data"][0]["z"]
    assert len(lines) == (int(z["shape"].split(",")[0]) if isinstance(z, dict) else len(z))  # a row per figure row
    q = radio(at, "learn_q_embed_")
    f = int(re.search(r"(?:row|position) (\d+)", q.label).group(1))
    e, p = (float(v) for v in lines[f].rstrip(" |").split("|")[-2:])
    q.set_value(q.options[0 if e > 1.01 * p else 1 if p > 1.01 * e else 2]).run()
    button(at, "learn_check_embed_").click().run()
    ok(at)
    assert at.success and at.success[0].value.startswith("Right"), [w.value for w in at.warning]
    assert f"= {e:.2f}, ‖PE‖ = {p:.2f}" in at.success[0].value.replace("\\", "")


def test_the_value_rows_question_is_answered_from_its_figure(tiny_model_dir, monkeypatch):
    """The chapter asks what row 0 of α·V equals while its figure showed α·V alone, row 0 near white on the
    matrix's scale: the figure is now row 0 above the rows offered, and the offered row nearest it there is judged
    right."""
    import base64

    k = CHAPTER_KEYS.index("output_proj") + 1
    at = open_learn(tiny_model_dir, monkeypatch, chapter=str(k))
    fig = next(f for f in audit.figures(at) if f["layout"]["title"]["text"].startswith("Row 0 of α·V"))
    trace = fig["data"][0]
    z, labels = trace["z"], list(trace["y"])
    if isinstance(z, dict):  # plotly's binary form
        z = np.frombuffer(base64.b64decode(z["bdata"]), dtype=z["dtype"]).reshape(
            [int(n) for n in z["shape"].split(",")]
        )
    z = np.asarray(z, dtype=float)
    assert labels[0].endswith("row 0 of α·V") and len(labels) == 5
    nearest = 1 + int(np.argmin(np.abs(z[1:] - z[0]).max(axis=1)))
    q = radio(at, "learn_q_output_proj_")
    name = labels[nearest].split(":", 1)[-1].strip()
    assert name in q.options, (name, q.options)
    q.set_value(name).run()
    button(at, "learn_check_output_proj_").click().run()
    ok(at)
    assert at.success and at.success[0].value.startswith("Right"), [w.value for w in at.warning]
