"""The About page, written for users: what Decoder Lens is and how to use it, the loaded model (what it is, how good
it is, what it cannot do: figures from its config, its model card's introduction and scores), data and licences, and
how to load another checkpoint. The card's other sections (its changelog, the training recipe) stay in the file for
whoever retrains the model; no path of the server is shown (the model directory is named by its name).

Text that comes from outside the app (a model directory's name, a load error) is shown with st.text / st.code,
never as markdown or HTML; the model card is rendered as markdown without HTML.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pandas as pd
import streamlit as st

from model.io.checkpoint import ENV_MODEL, LoadedModel, count_parameters
from model.lesson.learn import CHAPTER_KEYS

HOW_TO = f"""
- **Learn** (the first page): a guided lesson through the decoder in {len(CHAPTER_KEYS)} short chapters, in the
  order the data flows, on the live model and a sentence you choose: each chapter has a few plain sentences, the
  equation, one figure of the model's own numbers, what to notice in it, and a question to answer before the
  answer is shown.
  A five-question check before and after shows what changed; the last chapter recomputes a hand-sized worked
  example of masked self-attention, number by number, and the mistakes it contains. The page says how long it
  takes (at most a quarter of an hour).
- **Explore**: type an English sentence or click an example. The model translates it and
  the step view shows what the decoder computed at one position of the translation.
- **Stepping**: the step buttons (first, previous, next, last) or the position slider move through the
  translation one token at a time; each step is one pass of the decoder, reusing the keys and values of the
  earlier tokens (the KV cache).
- **Stage selector**: pick the decoder stage to draw — inputs and embeddings, Q · K · V, the scores and the
  causal mask, the masked self-attention weights, Add & Norm, cross-attention to the English source, the
  feed-forward network, or the output distribution with the beam candidates. "All stages" draws every
  figure at once and is slower to step through (a figure below the window is redrawn as you scroll to it).
  The sidebar picks the layer and the attention head.
- **Decoding**: greedy, **beam search** (follow any hypothesis of the beam and see which candidates were
  kept or dropped at each step) or sampling (temperature, top-k, top-p, seed), chosen in the sidebar.
- **Teacher forcing**: type a reference French translation to open the teacher-forcing view: the whole
  reference goes through the decoder in one parallel pass, with the loss of each token. A switch removes
  the causal mask to show the decoder "cheating" by looking at the tokens it should predict.
- **What if?**: in the panel below the step view, pick another next token (or type one) and re-decode: the decoder
  carries on from your choice, forced tokens are marked, and "Clear forced tokens" goes back to the
  model's own choices.
- **Compare**: two sentences A and B that differ by a word (or a preset minimal pair: singular/plural, a
  gendered noun, a tense) decoded side by side with the same settings: each position's chosen token and
  probability, the first position where they differ, and a stage of both on one colour scale with their
  difference. **Activation patching** restores one part of A's run at a time (an encoder layer's output at a
  source word, the decoder after a sublayer at a position, one head) into B's run, or into A's with noise on its
  words, and shows how much of A's token comes back. Type a **contrast** word to ask "why this token rather than
  that one?": the logit difference attributed to the words, read after each layer, and patched. From **What
  if?**, a link opens this for the alternative you picked.
- **Corpus**: a whole set of sentences (a file you give, or a sample of a bundled test set) translated and
  scored (corpus BLEU and chrF with their bootstrap interval), one row per sentence with flags for dropped words,
  invented content, untranslated words, wrong words and cut-off output (each with the words concerned), plots over
  the set, and what each attention head does across it; each sentence opens in Explore.
- **Class**: a teacher creates a class and shares its link; each student who joins takes the lesson with a
  nickname, and each answer is saved as it is given; the teacher's dashboard shows the class's answers, question by
  question.
- **Links**: the page address holds the sentence, the settings, the stage, the layer, the head and the
  step, so copying it gives a link that reopens the same view.
- **Figures**: hover for exact values, drag to zoom, double-click to zoom back out; the camera button in a
  figure's toolbar saves it as a PNG.
"""

CREDITS = """
The bundled English→French model (`assets/models/en-fr`) is trained on:
- **Tatoeba** English–French sentence pairs from the Tatoeba Project, licence **CC-BY 2.0 (France)**;
  attribution: [www.manythings.org/anki](https://www.manythings.org/anki) and
  [tatoeba.org](https://tatoeba.org).
- **Multi30k** task 1 English–French (Elliott, Frank, Sima'an and Specia, 2016; the French from the WMT 2017
  multimodal task), image captions from Flickr30k, licence: **research use** (Flickr30k captions, WMT
  multimodal task data).
"""

README = Path(__file__).resolve().parents[1] / "README.md"
# the card's scores table, without what only a developer needs (its speed on the machine that measured it)
DEVELOPER_COLUMNS = ("sentences/s",)
SCORES_WORDS = (
    "**BLEU** (0 to 100, higher is better) counts how many words and runs of words of the model's translations "
    "are also in human translations of the same sentences; **chrF** does the same with characters. Each test set "
    "holds sentences the model never saw in training."
)
DEVELOPERS = (
    "How these scores were measured, how fast the model translates and how to measure it again are written for "
    "developers in the project's README and in the model card (MODEL_CARD.md in the model directory)."
)

LOAD_ANOTHER = (
    "python -m model import-marian HF_DIR assets/models/opus-mt-en-fr\n"
    "# every directory under assets/models/ appears in the sidebar's model selector, or:\n"
    f"{ENV_MODEL}=assets/models/opus-mt-en-fr streamlit run app.py"
)


def card_sections(card: str) -> tuple[str, dict[str, str]]:
    """A model card's introduction (the text before its first ``## `` heading, title line dropped) and its
    ``## `` sections by heading."""
    intro: list[str] = []
    sections: dict[str, list[str]] = {}
    current = intro
    for line in card.splitlines():
        if line.startswith("## "):
            current = sections.setdefault(line[3:].strip(), [])
        elif not (current is intro and line.startswith("# ")):
            current.append(line)
    return "\n".join(intro).strip(), {k: "\n".join(v).strip() for k, v in sections.items()}


def scores_table(section: str) -> pd.DataFrame | None:
    """The first markdown table of the card's scores section, as a table a student reads (bold marks dropped, the
    developers' columns left out); None when the section has no table."""
    rows = []
    for line in section.splitlines():
        if line.startswith("|"):
            rows.append([c.strip().replace("**", "") for c in line.strip().strip("|").split("|")])
        elif rows:
            break
    if len(rows) < 3:
        return None
    table = pd.DataFrame(rows[2:], columns=rows[0])  # rows[1] is the |---| line
    return table.drop(columns=[c for c in DEVELOPER_COLUMNS if c in table.columns])


def limits(max_tokens: int | None, byte_fallback: bool = True) -> str:
    cut = f"{max_tokens} tokens" if max_tokens else "the model's maximum length (127 tokens for the bundled model)"
    chars = (
        "- Characters outside its vocabulary (emoji, other scripts, rare symbols) are spelled out byte by byte, so\n"
        "  nothing is lost and a name in any script can be carried over; but the model knows no meaning for them,\n"
        "  and text made mostly of them is not translated (the page says so).\n"
        if byte_fallback
        else "- Characters it never saw in training (many emoji, other scripts) become the unknown token \\<unk\\>,\n"
        "  which shows in the tokens and is dropped from the translation.\n"
    )
    return f"""
- It is a small teaching model trained on short everyday sentences and image captions: long sentences and
  other kinds of text translate poorly.
- Names and rare words can be garbled or replaced: the model only knows the subwords of its training data. The
  model card above (under "The model") says how often it carries names and numbers over unchanged.
{chars}- Text is cut at {cut}, for the English source and for the translation; the app says so when it cuts.
"""


def model_section(lm: LoadedModel) -> None:
    cfg = lm.cfg
    st.markdown("Model directory (under the server's model folder, or the one it was started with):")
    st.code(lm.path.name, language=None)
    st.markdown(
        f"An encoder-decoder Transformer with **{count_parameters(lm.model):,} parameters** ({cfg.family}): "
        f"{cfg.n_encoder_layers} encoder and {cfg.n_decoder_layers} decoder layers, d_model {cfg.d_model}, "
        f"{cfg.n_heads} attention heads of {cfg.d_k} dimensions, feed-forward width {cfg.d_ff}, a vocabulary of "
        f"{cfg.vocab_size:,} subword tokens, at most {cfg.max_len - 1} tokens per sentence: the configuration's "
        f"max_len, {cfg.max_len}, is the number of positions the model has, and one of them holds the English's end "
        "mark </s> or the French's start mark <s>.".replace("<", "\\<")
    )
    intro, sections = card_sections(lm.card)
    if intro:
        st.markdown(intro)  # the model card: markdown of the model directory, rendered without HTML
    scores = scores_table(next((body for title, body in sections.items() if title.lower().startswith("scores")), ""))
    if scores is not None:
        with st.expander("Scores (from the model card)"):
            st.markdown(SCORES_WORDS)
            st.dataframe(scores, hide_index=True, key="scores_table")
            st.markdown(DEVELOPERS)
            if README.is_file():
                st.download_button("The README, for developers", README.read_bytes(), "README.md", "text/markdown")
    if not lm.card.strip():
        st.info("This model directory has no MODEL_CARD.md.")
    with st.expander("Configuration"):
        st.dataframe(pd.DataFrame({"value": {k: str(v) for k, v in asdict(cfg).items()}}), key="cfg_table")


def render(lm: LoadedModel | None, error: str | None) -> None:
    st.title("About Decoder Lens")
    st.markdown(
        "Decoder Lens shows every stage of a Transformer's **decoder** working on real numbers, on a small "
        "English→French translation model: embeddings and positional encoding, masked self-attention (Q, K, V, "
        "scores, mask, softmax, α·V), Add & Norm, cross-attention to the English source, the feed-forward "
        "network, the output distribution and beam search — one token at a time, or the whole reference "
        "translation at once with teacher forcing."
    )
    st.header("How to use it")
    st.markdown(HOW_TO)

    st.header("The model")
    if error:
        st.error("The model could not be loaded; the message below says why.")
        st.text(error)
    elif lm is not None:
        model_section(lm)
    else:
        st.info("No model is loaded.")

    st.header("Data and licences")
    st.markdown(CREDITS)

    st.header("Known limits")
    st.markdown(limits(lm.cfg.max_len - 1 if lm is not None else None, lm is None or lm.tokenizer.byte_fallback))

    st.header("Load another checkpoint")
    st.markdown(
        "Convert a Hugging Face `MarianMTModel` directory (for example a downloaded `Helsinki-NLP/opus-mt-en-fr`) "
        "into a Decoder Lens model directory, then open it in the app:"
    )
    st.code(LOAD_ANOTHER, language="bash")
