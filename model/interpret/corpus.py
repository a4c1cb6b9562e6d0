"""From one sentence to a set: every sentence of a corpus translated and scored, and what each attention head does
over the set, as returned values (rows, a head table), for the Corpus page and ``python -m model corpus`` alike.

Per sentence (``analyse``): the translation (batched greedy, or batched beam search), then one batched
teacher-forced pass over (source, translation) pairs that gives each chosen token's probability, the
cross-attention weights (coverage of each source token) and, by one backward pass, the Input × Gradient
attribution of the translation's log-probability (the sum over its tokens) to the source and decoder-input
token embeddings: the share from the source. By linearity of the gradient this is the sum over output tokens
of each token's own Input × Gradient, before taking magnitudes. sacrebleu scores each sentence against its
reference (chrF, and BLEU with effective order), as ``benchmarks/bleu.py`` scores a corpus.

Per head (``head_table``), over the first ``HEAD_SENTENCES`` sentences, teacher-forced on the references (or the
model's own outputs without them): for every encoder self-, decoder self- and cross-attention head, the attention
to the same position, the previous one, the first token and ``</s>``, the entropy, the agreement of the
cross-attention with a per-token Input × Gradient attribution (same top source token) and the mean loss
increase when that head alone is removed (its output zeroed before W_O). Shapes: B sentences, S source tokens,
T target positions, L layers, H heads.
"""

from __future__ import annotations

import csv
import io
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TextIO

import numpy as np
import torch

from model.core import keys
from model.core.constants import BATCH_SIZE, HEAD_SENTENCES
from model.core.tokenizer import Tokenizer
from model.core.transformer import HeadMask, LayerCache, Transformer, causal_mask, padding_mask
from model.decode.decoding import (
    BEAM_ROWS,
    DecodeOptions,
    batch_beams,
    beam_batch,
    decode,
    greedy_batch,
    length_batches,
    output_limit,
    read_source,
)
from model.decode.lean import LeanDecoder
from model.interpret import faithful
from model.interpret.lexicon import Lexicon

# ---------------------------------------------------------------------------
# Reading a set: one clear sentence for what cannot be read, the rest analysed, skipped lines counted by reason.

MAX_BYTES = 20 * 2**20  # a larger file is refused (the CLI; the page's uploader: .streamlit/config.toml, in MB)
MAX_CHARS = 1_000  # a longer line is skipped: no sentence is that long, and its decode would cut at max_len
MAX_SENTENCES = 5_000  # lines beyond are skipped
# sentences whose head removals run as one pass (H·B rows a layer): on 2 cores, 64 took about half the CPU time of 16,
# whose products are too small to keep both threads busy
HEAD_BATCH = 2 * BATCH_SIZE
ATTRIBUTION_BATCH = BATCH_SIZE // 2  # of those, sentences whose per-token attribution runs together (T cotangents)
ATTRIBUTION_SPAN = 5  # target positions explained by one backward pass (the decoder run up to the span's end)
# a head table over more sentences than FAST_ABOVE runs its removals in ``removal_dtype``: on the bundled model each
# head's mean loss increase then stays within REMOVAL_TOLERANCE of float32's (benchmarks/corpus.py --parts precision:
# 0.0009 at most over 201 Multi30k sentences, 0.0003 over 1,000); a smaller table runs in float32, where the rounding
# would show (0.0034 over 12) and its time is a few seconds
FAST_ABOVE = HEAD_SENTENCES
REMOVAL_TOLERANCE = 1e-3
FAITHFUL_CHUNK = 256  # sentences erased together between two progress reports
COLUMNS = ("english", "french")  # a CSV's columns (a header row names them)
DOMAIN = "domain"  # a CSV's column of each sentence's domain (a TSV's third column), for the slices
SEPARATOR = re.compile(r"\s*\|\|\|\s*")  # "english ||| french" on a line without a tab: the columns of a TSV

# The flags, each one line (the page and docs/cli.md show these definitions); thresholds in model.interpret.faithful,
# chosen on labelled sets of the model's own translations (benchmarks/corpus_flags.py; docs/cli.md says how).
FLAGS = {
    "dropped words": "a source content word (numbers and names included; function words, light verbs such as "
    '"gets" in "gets ready", and "wearing", which French writes "en", out) the translation does '
    f"not render, read by erasing it from the source: no token written with p ≥ {faithful.CONFIDENT} drops by "
    f"{faithful.DROPPED_NATS:g} nats, no French word whose drop it causes as much as any source word does (within "
    f"{faithful.ALIGN_MARGIN:g} nat) drops by {faithful.ALIGNED_NATS:g} nat, and erased with the content word beside "
    f"it no French word drops {faithful.PAIR_NATS:g} nats more than with either alone; and, where the model has a "
    "word translation table (t(f | e): how likely its training pairs write English word e as French word f), no "
    f"word of the translation is one the table translates it as with t ≥ {faithful.LEXICON_DROPPED:g}, nor one whose "
    f'training pairs hold it with t(e | f) ≥ {faithful.LEXICON_IMPLIED:g} ("palmiers" for "palm trees"); where the '
    "set gives references, a word whose translation the reference writes (one the table gives it with t ≥ "
    f"{faithful.LEXICON_DROPPED:g}) and the translation lacks is dropped whatever the content word beside it does",
    "invented content": "a content word written more often than the source word it depends on (by erasure) occurs, "
    'its other forms counted with it ("une eau nuageuse bleue nuageux" for "cloudy blue water"); copies each written '
    f"for a source word of their own (erasing it lowers the copy by {faithful.REPEAT_NATS:g} nats) count as many "
    '("se brosse les dents avec une brosse"), "face à face" or "appareil photo" is one expression, and a word the '
    "reference (where the set gives one) writes as often is not invented",
    "untranslated": "a source word copied (case-insensitive) that French does not use: wordfreq finds it at least "
    f"{10**faithful.COPY_ZIPF_GAP:.0f}× more often in English (names of capitalised words side by side, quoted "
    "words, numbers aside)",
    "wrong word": f"a content word written (not copied) with probability below {faithful.WRONG_PROB} that, where the "
    f"model has a word translation table, no source word is translated as with t(f | e) ≥ {faithful.LEXICON_WRONG:g}; "
    f"or one that is not French (wordfreq Zipf below {faithful.NONWORD_ZIPF}) written with probability below "
    f"{faithful.NONWORD_PROB}",
    "cut off": "the translation reached the maximum length without </s>",
}
# How far each flag holds on the bundled model's own translations: on the held-out sets labelled by reading after the
# first (benchmarks/corpus_flags.py --fresh; tests/model/test_corpus_flags.py measures them again), the sentences a
# flag is right on, those it is raised on, and those that carry what it names, read without the sets' references and
# with them (a set given with references is flagged the second way). Eleven sets were labelled after every rule read
# without references was fixed, three of them (from Tatoeba) after the rules that read a reference were too, and the
# last after the pair-gain bound was set on the others (benchmarks/corpus_flags.py: BLIND, TATOEBA_SETS,
# TATOEBA_THIRD; docs/cli.md gives each set's figures).
MEASURED = {
    "dropped words": (721, 896, 983),
    "invented content": (304, 380, 490),
    "untranslated": (65, 92, 95),
    "wrong word": (739, 822, 1498),
}
MEASURED_WITH_REFERENCES = {**MEASURED, "dropped words": (732, 913, 983), "invented content": (301, 365, 490)}
MEASURED_ON = "4,478 held-out sentences of the bundled model's translations, labelled by reading"
MEASURED_WHAT = {
    "dropped words": "that drop a word",
    "invented content": "with invented content",
    "untranslated": "with a word left in English",
    "wrong word": "with a wrong word",
}


def measured(flag: str, references: bool = False) -> str:
    """What a flag's held-out figures say, in words: how often it is right when raised, how many it finds; read with
    the sets' references when ``references`` (the analysed set has them)."""
    right, raised, labelled = (MEASURED_WITH_REFERENCES if references else MEASURED)[flag]
    return (
        f"right on {right:,} of the {raised:,} sentences it is raised on ({right / raised:.1%}); "
        f"raised on {right:,} of the {labelled:,} {MEASURED_WHAT[flag]} ({right / labelled:.1%})"
    )


def lexicon_note(used: bool) -> str:
    """Whether the flags consulted a word translation table: one sentence for the page and the CLI."""
    if used:
        return (
            "The flags consulted this model's word translation table (lexicon.tsv.gz: t(f | e) and t(e | f), IBM "
            "Model 1 fit both ways on its training pairs)."
        )
    return (
        "This model has no word translation table (lexicon.tsv.gz): dropped words and wrong words are read from the "
        "model alone, which flags more of the words a French neighbour renders (python -m model.train.lexicon "
        "builds one)."
    )


@dataclass(frozen=True)
class Corpus:
    """Sentences read from a file, with references (None: none given), and what was left out and why."""

    sources: list[str]
    references: list[str] | None
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> lines
    notes: list[str] = field(default_factory=list)  # sentences about the file as a whole
    domains: list[str] | None = None  # each sentence's domain: a TSV's third column, a CSV's "domain" column

    def summary(self) -> str:
        """One line: what was read and what was left out."""
        refs = "with references" if self.references is not None else "without references"
        out = f"{sentences(len(self.sources))} {refs}"
        if self.skipped:
            out += "; skipped: " + ", ".join(skipped_text(n, why) for why, n in self.skipped.items())
        return out


SINGULAR = {"lines": "line", "rows": "row", "sentences": "sentence"}  # the nouns a reason for skipping counts


def skipped_text(n: int, why: str) -> str:
    """'3 blank lines', '1 blank line': a reason for skipping (its counted noun plural, as the JSON's keys) with its
    count."""
    if n == 1:
        words = why.split(" ")
        at = next((i for i, w in enumerate(words) if w in SINGULAR), None)
        if at is not None:
            why = " ".join([*words[:at], SINGULAR[words[at]], *words[at + 1 :]])
    return f"{n:,} {why}"


class CorpusError(ValueError):
    """Nothing in the input can be analysed: one sentence saying why."""


def _decode_lines(data: bytes, what: str) -> tuple[list[str], int]:
    """The lines of ``data``: UTF-8 (a BOM dropped), a line that is not read as Windows-1252 (mixed encodings).
    Returns the lines and how many were re-read."""
    if not data:
        raise CorpusError(f"the {what} is empty")
    if not data.strip():
        raise CorpusError(f"the {what} holds only blank lines")
    if len(data) > MAX_BYTES:
        raise CorpusError(f"the {what} is {len(data) / 2**20:.1f} MB; files up to {MAX_BYTES // 2**20} MB are read")
    if b"\x00" in data[:65536]:
        raise CorpusError(f"the {what} looks binary (it holds NUL bytes), not text with one sentence a line")
    lines, recoded = [], 0
    for raw in data.removeprefix(b"\xef\xbb\xbf").splitlines():
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            lines.append(raw.decode("cp1252", errors="replace"))
            recoded += 1
    if recoded > len(lines) / 2:
        raise CorpusError(f"the {what} is not UTF-8 text ({recoded:,} of {len(lines):,} lines are not)")
    return lines, recoded


def _is_csv(name: str, first: str) -> bool:
    return name.lower().endswith(".csv") or (
        "\t" not in first and [c.strip().lower() for c in first.split(",")][:2] == list(COLUMNS)
    )


def _pairs(lines: list[str], name: str, skip: Callable[[str], None], notes: list[str]):
    """(source, reference or None) pairs of a file's lines, as CSV, TSV (most lines hold a tab) or plain lines, and
    each pair's domain where the file gives one (pair index -> domain)."""
    first = next((ln for ln in lines if ln.strip()), "")
    is_csv = _is_csv(name, first)
    if not is_csv:  # "english ||| french": the separator a phone's keyboard can type, read as a tab
        lines = [ln if "\t" in ln else SEPARATOR.sub("\t", ln) for ln in lines]
    pairs: list[tuple[str, str | None]] = []
    domain: dict[int, str] = {}  # pair index -> its domain, when the file gives one
    if is_csv:
        rows = list(csv.reader(io.StringIO("\n".join(lines))))
        header = [c.strip().lower() for c in rows[0]] if rows else []
        if COLUMNS[0] not in header:
            raise CorpusError(
                f"the CSV has no 'english' column (its header is {', '.join(map(repr, header[:6])) or 'empty'})"
            )
        en, fr = header.index(COLUMNS[0]), header.index(COLUMNS[1]) if COLUMNS[1] in header else None
        if fr is None:
            notes.append("the CSV has no 'french' column: analysed without references")
        dom = header.index(DOMAIN) if DOMAIN in header else None
        for row in rows[1:]:
            if len(row) <= max(en, fr or 0):
                skip("rows with too few columns")
            else:
                if dom is not None and len(row) > dom:
                    domain[len(pairs)] = row[dom].strip()
                pairs.append((row[en], None if fr is None else row[fr]))
    elif 2 * (tabbed := sum("\t" in ln for ln in lines)) > sum(bool(ln.strip()) for ln in lines):
        for ln in lines:  # a TSV by most of its lines: a line without a tab has no reference
            cols = ln.split("\t")
            if not ln.strip():
                skip("blank lines")
            elif len(cols) < 2:
                skip("lines without a tab (no reference)")
            else:
                if len(cols) > 2:
                    domain[len(pairs)] = cols[2].strip()
                pairs.append((cols[0], cols[1]))
    else:
        pairs = [(ln.split("\t")[0], None) for ln in lines]
        if tabbed:
            notes.append(
                f"{tabbed:,} of {counted(sum(bool(ln.strip()) for ln in lines), 'line')} "
                f"{'holds' if tabbed == 1 else 'hold'} a tab, too few for a TSV: read as plain lines without "
                "references (the text after the tab left out)"
            )
    return pairs, domain


def read_corpus(data: bytes, name: str = "", refs: bytes | None = None) -> Corpus:
    """A set from a file's bytes: plain lines of English, TSV ``english<TAB>french[<TAB>domain]`` (further columns
    ignored), or CSV with the columns ``english``, ``french`` and optionally ``domain`` (a header row); ``refs``:
    a file of French references, one a line, for plain lines. Raises CorpusError when nothing can be analysed."""
    lines, recoded = _decode_lines(data, "file")
    skipped: dict[str, int] = {}
    notes = []
    if recoded:
        notes.append(f"{counted(recoded, 'line')} {'was' if recoded == 1 else 'were'} not UTF-8, read as Windows-1252")

    def skip(why: str, n: int = 1) -> None:
        skipped[why] = skipped.get(why, 0) + n

    pairs, domain = _pairs(lines, name, skip, notes)
    if refs is not None:
        if any(r is not None for _, r in pairs):
            raise CorpusError("the file already holds references (two columns): give no separate references")
        ref_lines, _ = _decode_lines(refs, "references file")
        if len(ref_lines) != len(pairs):
            notes.append(
                f"the references file has {counted(len(ref_lines), 'line')} for {sentences(len(pairs))}: analysed "
                "without references"
            )
        else:
            pairs = [(s, r) for (s, _), r in zip(pairs, ref_lines)]
    has_refs = any(r is not None for _, r in pairs)
    sources: list[str] = []
    references: list[str] = []
    domains: list[str] = []
    for i, (src, ref) in enumerate(pairs):
        src, ref = src.strip(), (ref or "").strip()
        if not src:
            skip("blank lines")
        elif len(src) > MAX_CHARS or len(ref) > MAX_CHARS:
            skip(f"lines longer than {MAX_CHARS:,} characters")
        elif has_refs and not ref:
            skip("sentences without a reference")
        elif len(sources) >= MAX_SENTENCES:
            skip(f"lines beyond the first {MAX_SENTENCES:,}")
        else:
            sources.append(src)
            references.append(ref)
            domains.append(domain.get(i, ""))
    if not sources:
        why = "; ".join(skipped_text(n, w) for w, n in skipped.items()) or "no line"
        raise CorpusError(f"no sentence to analyse in the file ({why})")
    return Corpus(sources, references if has_refs else None, skipped, notes, domains if domain else None)


# ---------------------------------------------------------------------------
# Per-sentence signals.

_WORD = re.compile(r"\w+", re.UNICODE)
_NUMBER = re.compile(r"\d")


def names_and_numbers(source: str) -> list[str]:
    """Words the translation should carry verbatim: those holding a digit, and capitalised words after the first
    (names; "I" aside)."""
    words = _WORD.findall(source)
    return [w for i, w in enumerate(words) if _NUMBER.search(w) or (i > 0 and w[:1].isupper() and w != "I")]


@dataclass(frozen=True)
class Pair:
    """The teacher-forced signals of one (source, translation) pair."""

    token_probs: np.ndarray  # (T,) probability of each chosen token (</s> included when it ended)
    source_share: float  # share of the attribution magnitude on the source tokens


def _embed(model: Transformer, ids: torch.Tensor) -> torch.Tensor:
    """Scaled token embeddings (B, n, D), a leaf that gradients reach (positional encoding added by ``_forward``)."""
    return (model.embed.weight.detach()[ids] * model.src_embed.scale).requires_grad_()


def _forward(model: Transformer, src: torch.Tensor, dec_in: torch.Tensor, src_tok, tgt_tok) -> torch.Tensor:
    """One teacher-forced pass from token embeddings: the last decoder layer's output (B, T, D)."""
    memory, src_mask, _ = model.encode(src, False, tok=src_tok)  # the model as it is (norms, T5's bias)
    return model.decode_states(dec_in, memory, src_mask, tok=tgt_tok)[0]  # (B, T, D)


def _weights(model: Transformer, trace: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Every attention block's weights (B, H, Tq, Tk) in a recorded pass's trace, by key (``enc.0.self``)."""
    r, weights = keys.Records(trace), {}
    for i in range(model.cfg.n_encoder_layers):
        weights[keys.enc(i, "self")] = r.enc_weights(i).detach()
    for i in range(model.cfg.n_decoder_layers):
        weights[keys.dec(i, "self")] = r.self_weights(i).detach()
        weights[keys.dec(i, "cross")] = r.cross_weights(i).detach()
    return weights


def _padded(seqs: Sequence[Sequence[int]], pad: int) -> torch.Tensor:
    out = torch.full((len(seqs), max(len(s) for s in seqs)), pad, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.as_tensor(list(s), dtype=torch.long)
    return out


def _batch(
    model: Transformer, srcs: Sequence[Sequence[int]], outs: Sequence[Sequence[int]]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Padded source (B, S), decoder input ``<s> y1 … y_{T-1}`` (B, T), labels ``y1 … yT`` (B, T), label mask."""
    cfg = model.cfg
    src = _padded(srcs, cfg.pad_id)
    dec_in = _padded([[cfg.decoder_start_id, *o[:-1]] for o in outs], cfg.pad_id)
    labels = _padded(outs, cfg.pad_id)
    valid = torch.zeros(labels.shape, dtype=torch.bool)
    for i, o in enumerate(outs):
        valid[i, : len(o)] = True
    return src, dec_in, labels, valid


@torch.inference_mode(False)
@torch.enable_grad()
def pair_signals(model: Transformer, srcs: Sequence[Sequence[int]], outs: Sequence[Sequence[int]]) -> list[Pair]:
    """Token probabilities and the share from the source of each (source ids with </s>, output ids) pair, in one
    batched teacher-forced pass and one backward pass (Input × Gradient of each pair's summed log-probability: rows
    do not interact, so the batch's sum has each row's own gradient)."""
    src, dec_in, labels, valid = _batch(model, srcs, outs)
    src_tok, tgt_tok = _embed(model, src), _embed(model, dec_in)
    y = _forward(model, src, dec_in, src_tok, tgt_tok)
    logp = model.logits(y).float().log_softmax(-1)  # (B, T, V)
    chosen = logp.gather(-1, labels[..., None])[..., 0] * valid  # (B, T)
    # Gradients of the embeddings alone: .backward() would also fill every parameter's .grad, left on the model.
    g_src, g_tgt = torch.autograd.grad(chosen.sum(), (src_tok, tgt_tok))
    raw_src = (src_tok * g_src).sum(-1).detach().abs()  # (B, S)
    raw_tgt = (tgt_tok * g_tgt).sum(-1).detach().abs() * valid  # (B, T)
    out = []
    for i, (s, o) in enumerate(zip(srcs, outs)):
        S, T = len(s), len(o)
        a_src, a_tgt = float(raw_src[i, :S].sum()), float(raw_tgt[i, :T].sum())
        share = a_src / (a_src + a_tgt) if a_src + a_tgt > 0 else float("nan")
        out.append(Pair(chosen[i, :T].detach().exp().numpy(), share))
    return out


COLUMN_HELP = {
    "chrf": "sentence chrF against the reference (sacrebleu, 0–100)",
    "bleu": "sentence BLEU against the reference (sacrebleu, effective order, 0–100)",
    "mean_prob": "mean probability of the chosen tokens",
    "min_prob": "lowest probability of a chosen token (the token in min_prob_token)",
    "source_share": "share of the translation's Input × Gradient attribution that comes from the source tokens",
    "min_support": "lowest support of a source content word: the largest drop in log p of a token written with "
    f"p ≥ {faithful.CONFIDENT} when the word is erased from the source, in nats (the word in min_support_word)",
    "min_word_prob": "lowest probability of a content word written (not copied), its pieces' product (the word in "
    "min_word_prob_word)",
    "min_sensitivity": "lowest source sensitivity of a content word written: log p(word | source) − log p(word | "
    "empty source), in nats (the word in min_sensitivity_word)",
    "length_ratio": "translation words ÷ source words",
    "names_numbers": "names and numbers in the source (digits, capitalised words after the first)",
    "names_numbers_copied": "of those, how many appear verbatim in the translation",
    "cut_off": "the translation reached the maximum length without </s>",
}
FLAG_WORDS_HELP = "each flag raised, with the words concerned"


def readable(token: str) -> str:
    """A token as a reader writes it: the word-start mark ▁ dropped (a lone ▁ is a space)."""
    return token.replace("▁", " ").strip() or ("␣" if token else "")


def row_of(
    i: int,
    source: str,
    translation: str,
    reference: str | None,
    pair: Pair,
    signals: dict,
    out_tokens: Sequence[str],
    ended: bool,
) -> dict:
    """One sentence's row: every column of ``COLUMN_HELP``, the faithfulness signals, and its flags with the words
    concerned (``flag_words``)."""
    from sacrebleu.metrics import BLEU, CHRF

    names = names_and_numbers(source)
    src_words, out_words = len(_WORD.findall(source)), len(_WORD.findall(translation))
    probs = pair.token_probs
    lowest = int(np.argmin(probs)) if probs.size else 0
    row = {
        "index": i,
        "source": source,
        "translation": translation,
        "reference": reference,
        "chrf": None if reference is None else CHRF().sentence_score(translation, [reference]).score,
        "bleu": None
        if reference is None
        else BLEU(effective_order=True).sentence_score(translation, [reference]).score,
        "mean_prob": float(probs.mean()) if probs.size else float("nan"),
        "min_prob": float(probs[lowest]) if probs.size else float("nan"),
        "min_prob_token": readable(out_tokens[lowest]) if probs.size else "",
        "source_share": pair.source_share,
        **signals,
        "length_ratio": out_words / src_words if src_words else float("nan"),
        "names_numbers": len(names),
        "names_numbers_copied": sum(bool(re.search(rf"(?<!\w){re.escape(w)}(?!\w)", translation)) for w in names),
        "cut_off": not ended,
    }
    row["flag_words"] = flag_words(row)
    row["flags"] = list(row["flag_words"])
    return row


def flag_words(row: dict) -> dict[str, list[str]]:
    """The flags (``FLAGS``) a row raises, in their order, each with the words concerned."""
    found = faithful.flagged_words(row)
    if row["cut_off"]:
        found["cut off"] = []
    return {f: found[f] for f in FLAGS if f in found}


def flags_text(row: dict) -> str:
    """The row's flags as one line: "dropped words (surfing), wrong word (humide)"."""
    return ", ".join(f"{f} ({', '.join(w)})" if w else f for f, w in row["flag_words"].items())


Progress = Callable[[int, int, str], None]  # (done, total, what is being done)


def translate_ids(
    model: Transformer, srcs: list[list[int]], opts: DecodeOptions, progress: Progress | None = None
) -> list[list[int]]:
    """Each source's output ids (</s> included when it ended): batched greedy (``BATCH_SIZE`` a batch, shortest
    first) for greedy decoding, batched beam search (``beam_batch``: ``BEAM_ROWS`` rows a batch, shortest first) for
    a plain beam search, one decode per sentence otherwise."""
    beam = opts.strategy == "beam" and opts.beam > 1
    lean = LeanDecoder(model, rows=opts.beam if beam else min(BATCH_SIZE, len(srcs)))
    outs: list[list[int]] = [[] for _ in srcs]
    done = 0
    batched = opts.strategy == "greedy" and not opts.prefix and opts.ablation is None
    if beam and batch_beams(opts, lean):
        lean = LeanDecoder(model, rows=BEAM_ROWS, compiled_steps=False)
    if batched or batch_beams(opts, lean):
        size = BATCH_SIZE if batched else max(1, BEAM_ROWS // opts.beam)
        for chunk in length_batches(srcs, size):
            found = (
                greedy_batch(model, [srcs[i] for i in chunk], opts.max_len, lean)
                if batched
                else [list(nb[0].ids) for nb in beam_batch(model, [srcs[i] for i in chunk], opts, lean)]
            )
            for i, ids in zip(chunk, found):
                outs[i] = ids
            done += len(chunk)
            if progress:
                progress(done, len(srcs), "translating")
    else:
        for i, s in enumerate(srcs):
            outs[i] = list(decode(model, s, opts, lean).ids)
            if progress and (i % 8 == 7 or i == len(srcs) - 1):
                progress(i + 1, len(srcs), "translating")
    return outs


def translations(
    model: Transformer,
    tokenizer: Tokenizer,
    sources: Sequence[str],
    opts: DecodeOptions,
    progress: Progress | None = None,
) -> list[str]:
    """Each source's translation as ``analyse`` decodes it (for a second run of a set, where only its text counts)."""
    cfg = model.cfg
    model.eval()
    srcs = [read_source(tokenizer.encode(s), cfg)[0] for s in sources]
    outs = translate_ids(model, srcs, opts, progress)
    return [tokenizer.decode([t for t in o if t != cfg.eos_id]) for o in outs]


@dataclass(frozen=True)
class Analysis:
    rows: list[dict]  # one per sentence, in input order (COLUMN_HELP, plus index, texts and flags)
    heads: dict | None  # head_table's value (None when not computed)
    seconds: dict[str, float]  # time spent per part
    max_len: int  # the most tokens a translation could have, </s> included (output_limit: the decodes' own bound)
    lexicon: bool = False  # whether the flags consulted the model's word translation table


def analyse(
    model: Transformer,
    tokenizer: Tokenizer,
    corpus: Corpus,
    opts: DecodeOptions = DecodeOptions(),
    heads: int = HEAD_SENTENCES,
    progress: Progress | None = None,
    outputs: Sequence[Sequence[int]] | None = None,
    lexicon: Lexicon | None = None,
) -> Analysis:
    """Every row of the set and the head table over its first ``heads`` sentences (0: no head table).
    ``outputs``: output ids to analyse instead of decoding (tests plant translations this way); ``lexicon``: the
    model's word translation table (``lexicon.of_model``), which the flags consult beside erasure."""
    cfg = model.cfg
    model.eval()
    clock = {}
    t0 = time.perf_counter()
    srcs = [read_source(tokenizer.encode(s), cfg)[0] for s in corpus.sources]
    outs = [list(o) for o in outputs] if outputs is not None else translate_ids(model, srcs, opts, progress)
    outs = [o if o else [cfg.eos_id] for o in outs]
    clock["translate"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    pairs: list[Pair | None] = [None] * len(srcs)
    done = 0
    for chunk in length_batches([s + o for s, o in zip(srcs, outs)], BATCH_SIZE):
        for i, p in zip(chunk, pair_signals(model, [srcs[i] for i in chunk], [outs[i] for i in chunk])):
            pairs[i] = p
        done += len(chunk)
        if progress:
            progress(done, len(srcs), "scoring")
    scored = [p for p in pairs if p is not None]
    if len(scored) != len(srcs):
        raise RuntimeError("a sentence was left unscored")
    sigs = []
    given: Sequence[str | None] = corpus.references if corpus.references is not None else [None] * len(srcs)
    if progress:  # the part named from its start (its first report comes a chunk later)
        progress(0, len(srcs), "erasing source words")
    for b in range(0, len(srcs), FAITHFUL_CHUNK):
        found = faithful.faithfulness(model, tokenizer, srcs[b : b + FAITHFUL_CHUNK], outs[b : b + FAITHFUL_CHUNK])
        part = zip(found, corpus.sources[b : b + FAITHFUL_CHUNK], given[b : b + FAITHFUL_CHUNK])
        sigs += [faithful.signals(f, src, lexicon, ref) for f, src, ref in part]
        if progress:
            progress(len(sigs), len(srcs), "erasing source words")
    rows = []
    for i, (o, p, sig) in enumerate(zip(outs, scored, sigs)):
        ended = o[-1] == cfg.eos_id
        text = tokenizer.decode([t for t in o if t != cfg.eos_id])
        rows.append(row_of(i, corpus.sources[i], text, given[i], p, sig, tokenizer.tokens(o), ended))
    clock["rows"] = time.perf_counter() - t0
    table = None
    if heads > 0:
        t0 = time.perf_counter()
        n = min(heads, len(srcs))
        if corpus.references is not None:
            refs = [tokenizer.encode(r)[: cfg.max_len - 1] + [cfg.eos_id] for r in corpus.references[:n]]
        else:
            refs = outs[:n]
        table = head_table(model, srcs[:n], refs, progress, on_references=corpus.references is not None)
        clock["heads"] = time.perf_counter() - t0
    return Analysis(rows, table, clock, output_limit(opts.max_len, cfg), lexicon is not None)


# ---------------------------------------------------------------------------
# What each head does over the set.

KINDS = {"enc": "encoder self-attention", "self": "decoder self-attention", "cross": "cross-attention"}
STATS = {
    "same": "attention to the same position (cross: the source token at the same index)",
    "previous": "attention to the previous position",
    "first": "attention to the first token",
    "eos": "attention to the source's </s> (none for decoder self-attention)",
    "entropy": "entropy of the attention row, in nats",
    "spread": "the row's entropy over the log of the keys it can see: 0 all weight on one key, 1 an even spread",
    "agreement": "cross-attention only: share of positions where the head's top source token is the "
    "attribution's top source token (Input × Gradient per token, </s> aside)",
    "agreement_lift": "cross-attention only: agreement minus chance (one over the source tokens, </s> aside)",
    "loss_increase": "mean cross-entropy increase when the head alone is removed (its output zeroed)",
}
# Roles from measured quantities; thresholds in the gaps of the bundled model's heads over 80 held-out sentences
# (Multi30k test 2017, teacher-forced on the references): cross-attention lifts 0.01–0.09 against 0.15–0.27, spreads
# 0.00–0.46 against 0.54–0.76.
ROLE_MIN = 0.4  # diagonal, previous token, sink: the head's share there reaches this
ALIGN_LIFT = 0.12  # alignment: the head's top source token is the attribution's this much more often than chance
SHARP_SPREAD = 0.5  # otherwise sharp when its spread is at most this, broad above
ROLE_TEXT = {  # each role in words, in the order role_of tries them: the page's and docs' definitions
    "alignment": f"a cross-attention head whose top source token is the attribution's at least {ALIGN_LIFT:g} more "
    "often than chance (agreement lift)",
    "diagonal": f"at least {ROLE_MIN:g} of its weight on the same position",
    "previous token": f"at least {ROLE_MIN:g} on the previous position",
    "sink": f"at least {ROLE_MIN:g} on the first token and the source's </s> together (of these three, the largest)",
    "sharp": f"none of these, and a spread of at most {SHARP_SPREAD:g}",
    "broad": f"none of these, and a spread above {SHARP_SPREAD:g}",
}
ROLES = {  # role -> the statistic that shows it (its sentences with the highest values are its examples)
    "alignment": "agreement_lift",
    "diagonal": "same",
    "previous token": "previous",
    "sink": ("first", "eos"),
    "sharp": "spread",  # the lowest spread
    "broad": "spread",
}


def role_of(stats: dict[str, float]) -> str:
    """The head's role: alignment (cross-attention whose top source token agrees with the attribution's ALIGN_LIFT
    above chance); else diagonal, previous token or sink (first token + </s>), the largest share when it reaches
    ROLE_MIN; else sharp (spread at most SHARP_SPREAD) or broad."""
    lift = stats.get("agreement_lift")
    if lift is not None and math.isfinite(lift) and lift >= ALIGN_LIFT:
        return "alignment"
    score = {}
    for role in ("diagonal", "previous token", "sink"):
        names = ROLES[role]
        found = [stats.get(k) for k in ((names,) if isinstance(names, str) else names)]
        vals = [v for v in found if v is not None and math.isfinite(v)]
        if vals:
            score[role] = sum(vals)
    best = max(score, key=score.__getitem__, default=None)
    if best is not None and score[best] >= ROLE_MIN:
        return best
    return "sharp" if stats.get("spread", math.inf) <= SHARP_SPREAD else "broad"


def _row_stats(w: torch.Tensor, q_lens: torch.Tensor, k_lens: torch.Tensor, eos: bool) -> dict[str, torch.Tensor]:
    """Per sentence and head (B, H) means over each sentence's q_lens[b] query rows of a padded batch's weights
    (B, H, Tq, Tk), its keys the first k_lens[b]; without ``eos`` (decoder self-attention) row q sees keys 0..q
    only. Padded rows and keys are masked out, so each sentence's values are those of its own weights."""
    w = w.double()
    B, H, Tq, Tk = w.shape
    q = torch.arange(Tq)  # (Tq,)
    ql, kl = q_lens[:, None, None], k_lens[:, None, None]  # (B, 1, 1)
    rows = q < ql  # (B, 1, Tq)
    w = torch.where(rows[..., None] & (torch.arange(Tk) < kl[..., None]), w, 0.0)  # (B, H, Tq, Tk)
    seen = kl.double().expand(B, 1, Tq) if eos else (q + 1).double().expand(B, 1, Tq)  # (B, 1, Tq) keys seen
    same = torch.where(q < kl, w[:, :, q, q.clamp(max=Tk - 1)], 0.0)  # (B, H, Tq)
    prev = torch.where((q >= 1) & (q - 1 < kl), w[:, :, q, (q - 1).clamp(0, Tk - 1)], 0.0)
    ent = -(w * torch.where(w > 0, w.log(), 0.0)).sum(-1)  # (B, H, Tq)
    n = q_lens.double()[:, None]  # (B, 1)
    last = w.gather(-1, (k_lens - 1).clamp(min=0)[:, None, None, None].expand(B, H, Tq, 1))[..., 0]  # (B, H, Tq)
    nan = torch.full((B, H), float("nan"), dtype=torch.float64)
    return {
        "same": same.sum(-1) / n,
        "previous": torch.where(n > 1, prev.sum(-1) / (n - 1).clamp(min=1), nan),
        "first": w[..., 0].sum(-1) / n,
        "eos": last.sum(-1) / n if eos else nan,
        "entropy": ent.sum(-1) / n,
        "spread": torch.where(rows & (seen > 1), ent / seen.clamp(min=2).log(), 0.0).sum(-1) / n,
    }


def _agreement(attr: torch.Tensor, w: torch.Tensor, q_lens: torch.Tensor, k_lens: torch.Tensor) -> torch.Tensor:
    """(B, H) share of each sentence's target positions whose top source token (</s> left out) is the same for the
    cross-attention weights w (B, H, T, S) as for the attribution (B, T, S); NaN for a source of </s> alone."""
    B, H, T, S = w.shape
    keys_ok = torch.arange(S) < (k_lens - 1)[:, None]  # (B, S): the source tokens before </s>
    top_attr = attr[:, :T, :S].masked_fill(~keys_ok[:, None], -math.inf).argmax(-1)  # (B, T)
    top_head = w.masked_fill(~keys_ok[:, None, None], -math.inf).argmax(-1)  # (B, H, T)
    rows = torch.arange(T) < q_lens[:, None]  # (B, T)
    agree = ((top_head == top_attr[:, None]) & rows[:, None]).double().sum(-1) / q_lens.double()[:, None]
    return torch.where((k_lens > 1)[:, None], agree, math.nan)


def _knock(H: int, B: int, d_k: int) -> HeadMask:
    """Rows h·B + b: sentence b with head h switched off (zeroed before W_O)."""
    keep = torch.ones(H * B, H, 1, 1)
    keep[torch.arange(H * B), torch.arange(H * B) // B] = 0.0
    return HeadMask(keep, torch.zeros(1, H, 1, d_k))


def _token_loss(model: Transformer, y: torch.Tensor, labels: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """(R,) mean cross-entropy over each row's labels; rows repeat the batch (labels (B, T)) R / B times."""
    reps = y.shape[0] // labels.shape[0]
    lab, ok = labels.repeat(reps, 1), valid.repeat(reps, 1)
    # the output product and softmax for the labelled positions only (a batch's padding is an eighth of its rows),
    # over rows of V logits as they lie in memory (the (R, V, T) view's strided softmax took as long as the product)
    loss = torch.zeros(lab.shape).masked_scatter_(ok, -faithful.label_logp(model, y[ok], lab[ok]))  # (R, T)
    return loss.sum(1) / ok.sum(1)


def removal_dtype(device: torch.device) -> torch.dtype:
    """The large head tables' removal precision: bfloat16 (float32 accumulation) where the device multiplies it
    natively (its products about three times as fast as float32's on an AVX-512 BF16 CPU); else float32."""
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float32
    # torch says so only privately (2.13): a torch without the check gets float32, never an error
    native = getattr(torch.cpu, "_is_avx512_bf16_supported", None)
    return torch.bfloat16 if device.type == "cpu" and callable(native) and native() else torch.float32


def table_dtype(device: torch.device, sentences: int) -> torch.dtype:
    """The precision a head table over ``sentences`` runs its removals in: ``removal_dtype`` over more than
    FAST_ABOVE sentences, else float32."""
    return removal_dtype(device) if sentences > FAST_ABOVE else torch.float32


def precision_of(dtype: torch.dtype) -> str:
    """A precision's name as the table, its JSON and ``precision_note`` say it: "float32", "bfloat16"."""
    return str(dtype).removeprefix("torch.")


def precision_note(precision: str) -> str:
    """What the head table's precision means for its loss increases, in one sentence; "" for float32."""
    if precision == "float32":
        return ""
    return (
        f"Loss increases measured in {precision} (float32 accumulation) for speed, as for every table over more than "
        f"{FAST_ABOVE} sentences: on the bundled model each head's stays within {REMOVAL_TOLERANCE:g} of float32's."
    )


def removal_losses(
    model: Transformer,
    src: torch.Tensor,
    dec_in: torch.Tensor,
    labels: torch.Tensor,
    valid: torch.Tensor,
    dtype: torch.dtype = torch.float32,
) -> dict[str, np.ndarray]:
    """Mean loss increase (B, L, H) of each sentence of a padded batch when one head alone is removed, per kind.
    A head of layer l changes nothing before layer l: its rows start from the unablated pass's input to layer l,
    and each layer's H heads run as H·B rows of one pass. The layers run as ``Transformer.encode`` and ``decode``
    run them: T5's relative bias passed to each, the pre-norm models' final encoder norm on the memory (the final
    decoder norm is ``logits``'). ``dtype``: the products' precision (``torch.autocast``), the unablated pass's as
    the removals', so that its rounding is not read as a loss increase."""
    with torch.autocast(model.device.type, dtype=dtype, enabled=dtype != torch.float32):
        return _removal_losses(model, src, dec_in, labels, valid)


@torch.inference_mode()
def _removal_losses(
    model: Transformer, src: torch.Tensor, dec_in: torch.Tensor, labels: torch.Tensor, valid: torch.Tensor
) -> dict[str, np.ndarray]:
    cfg = model.cfg
    H, B = cfg.n_heads, src.shape[0]
    knock = _knock(H, B, cfg.d_k)
    rep = lambda t: None if t is None else t.repeat(H, *([1] * (t.dim() - 1)))  # noqa: E731
    src_mask = padding_mask(src, cfg.pad_id)
    S, T = src.shape[1], dec_in.shape[1]
    mask = causal_mask(T)
    enc_bias = None if model.enc_bias is None else model.enc_bias(S, S)  # (1, H, S, S)
    dec_bias = None if model.dec_bias is None else model.dec_bias(T, T)  # (1, H, T, T)

    def memory_of(x: torch.Tensor) -> torch.Tensor:
        return x if model.enc_norm is None else model.enc_norm(x)

    x, _ = model.src_embed(src)
    enc_in = []
    for enc_layer in model.encoder_stack:
        enc_in.append(x)
        x, _ = enc_layer(x, src_mask, False, None, enc_bias)
    memory = memory_of(x)
    y, _ = model.tgt_embed(dec_in)
    dec_in_states = []
    for dec_layer in model.decoder_stack:
        dec_in_states.append(y)
        y, _, _ = dec_layer(y, memory, src_mask, mask, None, False, (None, None), dec_bias)
    base = _token_loss(model, y, labels, valid)  # (B,)

    def decoder_from(start: int, y, memory, masks: dict, caches: list[LayerCache] | None = None) -> torch.Tensor:
        for i in range(start, len(model.decoder_layers)):
            heads = masks.get(keys.dec(i, "self")), masks.get(keys.dec(i, "cross"))
            cache = None if caches is None else caches[i]
            y, _, _ = model.decoder_stack[i](y, memory, rep(src_mask), mask, cache, False, heads, dec_bias)
        return (_token_loss(model, y, labels, valid).view(H, B) - base).T  # (B, H)

    out = {k: np.zeros((B, n, H)) for k, n in (("enc", cfg.n_encoder_layers), ("self", cfg.n_decoder_layers))}
    out["cross"] = np.zeros((B, cfg.n_decoder_layers, H))
    for li in range(cfg.n_encoder_layers):
        x = rep(enc_in[li])
        for i in range(li, cfg.n_encoder_layers):
            x, _ = model.encoder_stack[i](x, rep(src_mask), False, knock if i == li else None, enc_bias)
        out["enc"][:, li] = decoder_from(0, rep(dec_in_states[0]), memory_of(x), {}).numpy()
    # a decoder head's removal leaves the memory as it is: each layer's cross-attention K, V projected once, on B
    # rows, and handed to the H·B rows as a cache that holds no self-attention keys yet
    empty = torch.zeros(H * B, H, 0, cfg.d_k)  # (H·B, H, 0, d_k)
    cross = []
    for layer in model.decoder_stack:
        K, V = layer.cross_attn.project_kv(memory)  # (B, H, S, d_k) each
        cross.append(LayerCache(empty, empty, K.repeat(H, 1, 1, 1), V.repeat(H, 1, 1, 1)))
    for li in range(cfg.n_decoder_layers):
        for kind in ("self", "cross"):
            # the memory is read from the caches only
            loss = decoder_from(li, rep(dec_in_states[li]), memory, {keys.dec(li, kind): knock}, cross)
            out[kind][:, li] = loss.numpy()
    return out


@torch.inference_mode(False)
@torch.enable_grad()
def _per_token_attribution(model: Transformer, src, dec_in, labels, valid):
    """Input × Gradient of each label's log-probability to the source tokens, as shares of its attribution
    (B, T, S), and the attention weights of every block (no gradient)."""
    src_tok, tgt_tok = _embed(model, src), _embed(model, dec_in)
    memory, src_mask, enc = model.encode(src, record=True, tok=src_tok)  # (B, S, D), kept for the backward passes
    with torch.no_grad():
        y, _, dec = model.decode_states(dec_in, memory, src_mask, record=True, tok=tgt_tok)  # (B, T, D)
    weights = _weights(model, {**enc, **dec})
    B, T = labels.shape
    # d log p(label) / d y = W_out[label] − softmax(logits) · W_out, written out: the backward passes below start at
    # y, not at the (B, T, V) logits, which T of them would each go through again
    with torch.no_grad():
        W = model.W_out.float()  # (V, D)
        g_y = (W[labels] - model.logits(y).float().softmax(-1) @ W) * valid[..., None]  # (B, T, D)
    # the positions' gradients by vectorised backward passes, ATTRIBUTION_SPAN cotangents (one per explained
    # position) each; the decoder is causal, so a span's pass runs it only up to the span's last position, not over
    # all T (the T × T cost of one pass over every position)
    a_src, a_tgt = torch.zeros(T, B, src.shape[1]), torch.zeros(T, B, T)
    for a in range(0, T, ATTRIBUTION_SPAN):
        e = min(a + ATTRIBUTION_SPAN, T)
        tgt_in = tgt_tok.detach()[:, :e].requires_grad_()
        y_e, _, _ = model.decode_states(dec_in[:, :e], memory, src_mask, tok=tgt_in)  # (B, e, D)
        cot = torch.eye(e)[a:e, None, :, None] * g_y[None, :, :e]  # (e − a, B, e, D): g_y at its position only
        g_src, g_tgt = torch.autograd.grad(
            y_e, (src_tok, tgt_in), cot.to(y_e.dtype), retain_graph=e < T, is_grads_batched=True
        )
        a_src[a:e] = (src_tok.detach() * g_src).sum(-1).abs()  # (e − a, B, S)
        a_tgt[a:e, :, :e] = (tgt_in.detach() * g_tgt).sum(-1).abs()  # (e − a, B, e)
    out = (a_src / (a_src.sum(-1, keepdim=True) + a_tgt.sum(-1, keepdim=True)).clamp_min(1e-30)).transpose(0, 1)
    return out, weights


def head_table(
    model: Transformer,
    srcs: Sequence[Sequence[int]],
    targets: Sequence[Sequence[int]],
    progress: Progress | None = None,
    on_references: bool = True,
    batch: int = HEAD_BATCH,
    dtype: torch.dtype | None = None,
) -> dict:
    """Every head's statistics (STATS) averaged over the pairs (source ids with </s>, target ids with </s>), its
    role (``role_of``) and its three example sentences (where its role's statistic (ROLES) is highest; for sharp
    heads, the spread lowest): ``{kind: {stat: (L, H), "role": (L, H) of str, "examples": (L, H, 3) of sentence
    index}}``, with ``"sentences"`` (how many), ``"target"`` (references or the model's outputs),
    ``"precision"`` (the removals', ``dtype``: by default float32, or ``removal_dtype`` over more than FAST_ABOVE
    sentences; the other statistics are float32's) and ``"per_sentence"`` (``{kind: {stat: (N, L, H)}}``: each
    sentence's own values, which the means and the examples are read from)."""
    cfg = model.cfg
    dtype = table_dtype(model.device, len(srcs)) if dtype is None else dtype
    n_layers = {"enc": cfg.n_encoder_layers, "self": cfg.n_decoder_layers, "cross": cfg.n_decoder_layers}
    per = {k: {s: np.full((len(srcs), n, cfg.n_heads), np.nan) for s in STATS} for k, n in n_layers.items()}
    done = 0
    if progress:
        progress(0, len(srcs), "measuring the heads")
    batches = list(length_batches([list(s) + list(t) for s, t in zip(srcs, targets)], batch))
    # shortest and longest batches in turn, so that the sentences done follow the clock (the page's progress bar)
    for chunk in [c for pair in zip(batches, reversed(batches)) for c in pair][: len(batches)]:
        batch_of = _batch(model, [srcs[i] for i in chunk], [targets[i] for i in chunk])
        losses = removal_losses(model, *batch_of, dtype=dtype)
        for kind in n_layers:
            per[kind]["loss_increase"][chunk] = losses[kind]
        for a in range(0, len(chunk), ATTRIBUTION_BATCH):
            part = chunk[a : a + ATTRIBUTION_BATCH]
            attr, weights = _per_token_attribution(
                model, *_batch(model, [srcs[i] for i in part], [targets[i] for i in part])
            )
            S = torch.tensor([len(srcs[i]) for i in part])  # (b,)
            T = torch.tensor([len(targets[i]) for i in part])
            for key, w in weights.items():
                name = keys.parse(key)
                if name.layer is None or name.block is None:
                    raise ValueError(f"{key} is not an attention block")
                li, kind = int(name.layer), "enc" if name.side == "enc" else name.block
                q, k = (S, S) if kind == "enc" else (T, T) if kind == "self" else (T, S)
                for stat, v in _row_stats(w, q, k, eos=kind != "self").items():
                    per[kind][stat][part, li] = v.numpy()
                if kind == "cross":
                    agree = _agreement(attr, w, T, S)  # (b, H)
                    per[kind]["agreement"][part, li] = agree.numpy()
                    per[kind]["agreement_lift"][part, li] = (agree - 1 / (S[:, None] - 1.0)).numpy()  # less chance
        done += len(chunk)
        if progress:
            progress(done, len(srcs), "measuring the heads")
    table: dict = {
        "sentences": len(srcs),
        "target": "references" if on_references else "the model's translations",
        "precision": precision_of(dtype),
        "per_sentence": per,
    }
    for kind, stats in per.items():
        with np.errstate(all="ignore"):
            means = {
                s: np.nanmean(v, 0) if np.isfinite(v).any() else np.full(v.shape[1:], np.nan) for s, v in stats.items()
            }
        L, H = means["same"].shape
        roles = np.array([[role_of({s: means[s][li, h] for s in STATS}) for h in range(H)] for li in range(L)])
        examples = np.zeros((L, H, 3), dtype=np.int64)
        for li in range(L):
            for h in range(H):
                key = ROLES[roles[li, h]]
                names = (key,) if isinstance(key, str) else key
                score = np.nansum([stats[k][:, li, h] for k in names], 0) * (-1 if roles[li, h] == "sharp" else 1)
                examples[li, h] = np.argsort(-score, kind="stable")[:3].tolist() + [0] * max(0, 3 - len(score))
        table[kind] = {**means, "role": roles, "examples": examples}
    return table


# ---------------------------------------------------------------------------
# As written: the CLI's JSON and CSV, the page's downloads (the same function, so the same numbers).

ATTRIBUTION = "input × gradient of the translation's log-probability (its tokens' sum) to the token embeddings"


def head_rows(table: dict) -> list[dict]:
    """The head table in long form: one dict per head (kind, layer, head, every STATS value, role, examples)."""
    rows = []
    for kind in KINDS:
        t = table[kind]
        L, H = t["role"].shape
        for li in range(L):
            for h in range(H):
                rows.append(
                    {
                        "kind": kind,
                        "layer": li,
                        "head": h,
                        **{s: float(t[s][li, h]) for s in STATS},
                        "role": str(t["role"][li, h]),
                        "examples": [int(i) for i in t["examples"][li, h]],
                    }
                )
    return rows


BOOTSTRAP = 1_000  # resamples of the corpus scores' bootstrap interval
SIGNALS = {  # the per-sentence signals whose rank correlation with chrF the page and the CLI show
    "mean_prob": "mean probability",
    "min_prob": "lowest token probability",
    "source_share": "share from the source",
    "min_support": "lowest source-word support",
    "min_word_prob": "lowest word probability",
    "min_sensitivity": "lowest source sensitivity",
    "length_ratio": "length ratio",
    "bleu": "sentence BLEU",
}


def corpus_scores(rows: list[dict], n_bootstrap: int = BOOTSTRAP) -> dict | None:
    """Corpus BLEU and chrF of the rows' translations against their references, as papers report them: sacrebleu's
    default settings, its signature, and its bootstrap over ``n_bootstrap`` resamples of the sentences: ``mean`` ±
    ``ci`` as sacrebleu reports it (the resamples' mean, and half the width of their 2.5th–97.5th percentiles), and
    ``low``–``high``, those percentiles themselves: the 95 % interval, within the score's range where mean ± ci of a
    skewed few sentences is not (65.5 ± 48.3 reads 17.2–113.8). None without references."""
    from sacrebleu.metrics import BLEU, CHRF
    from sacrebleu.significance import _bootstrap_resample  # sacrebleu's own resamples (its seed), for percentiles

    class FloatCHRF(CHRF):  # sacrebleu's own chrF, each score a float
        def _compute_f_score(self, statistics: list[int]) -> float:
            # a resample of empty translations scores a float 0 and the others numpy floats, which sacrebleu's mean
            # of the resamples cannot add up (TypeError: a set of three sentences, one translated as nothing)
            return float(super()._compute_f_score(statistics))

    if not rows or any(r["reference"] is None for r in rows):
        return None
    hyps, refs = [r["translation"] for r in rows], [[r["reference"] for r in rows]]
    out = {}
    for name, metric in (("bleu", BLEU()), ("chrf", FloatCHRF())):
        s = metric.corpus_score(hyps, refs, n_bootstrap=n_bootstrap)
        mean, ci = getattr(s, "_mean", s.score), getattr(s, "_ci", 0.0)
        low = high = s.score
        if n_bootstrap > 1:  # the same resamples again (sacrebleu keeps only their mean and ci), ranked as it does
            _, resampled = _bootstrap_resample(metric._extract_corpus_statistics(hyps, refs), metric, n_bootstrap)
            ranked = sorted(float(r.score) for r in resampled)
            k = len(ranked) // 40
            low, high = ranked[k], ranked[len(ranked) - k - 1]
        out[name] = {
            "score": s.score,
            "mean": mean,
            "ci": ci,
            "low": low,
            "high": high,
            "signature": str(metric.get_signature()),
        }
    return out


def flag_counts(rows: list[dict]) -> dict[str, int]:
    """Sentences raising each flag (every flag listed, in FLAGS' order)."""
    return {f: sum(f in r["flags"] for r in rows) for f in FLAGS}


def correlations(rows: list[dict]) -> dict[str, float]:
    """Spearman's ρ of each signal (SIGNALS) with sentence chrF; empty without references."""
    if not rows or rows[0]["chrf"] is None:
        return {}
    chrf = [r["chrf"] for r in rows]
    return {k: spearman([r[k] for r in rows], chrf) for k in SIGNALS}


LENGTHS = ((1, 8), (9, 15), (16, 25), (26, None))  # source words: the slices by length


def slices(rows: list[dict], domains: Sequence[str] | None = None) -> list[dict]:
    """The set cut three ways, each slice with its sentences, corpus BLEU and chrF (sacrebleu, without
    references: None) and the share flagged: by source length in words (LENGTHS), by flag (each flag, and none), and
    by domain when the file gives one."""
    from sacrebleu.metrics import BLEU, CHRF

    cuts: list[tuple[str, str, list[int]]] = []
    n_words = [len(_WORD.findall(r["source"])) for r in rows]
    for lo, hi in LENGTHS:
        name = f"{lo}–{hi} words" if hi else f"{lo}+ words"
        cuts.append(("length", name, [i for i, n in enumerate(n_words) if n >= lo and (hi is None or n <= hi)]))
    for f in FLAGS:
        cuts.append(("flag", f, [i for i, r in enumerate(rows) if f in r["flags"]]))
    cuts.append(("flag", "no flag", [i for i, r in enumerate(rows) if not r["flags"]]))
    for d in sorted(set(domains or [])):
        cuts.append(("domain", d or "(none)", [i for i, x in enumerate(domains or []) if x == d]))
    refs = bool(rows) and rows[0]["reference"] is not None
    out = []
    for by, name, idx in cuts:
        hyps, ref = [rows[i]["translation"] for i in idx], [[rows[i]["reference"] for i in idx]]
        score = refs and bool(idx)
        out.append(
            {
                "by": by,
                "slice": name,
                "sentences": len(idx),
                "bleu": BLEU().corpus_score(hyps, ref).score if score else None,
                "chrf": CHRF().corpus_score(hyps, ref).score if score else None,
                "flagged": sum(bool(rows[i]["flags"]) for i in idx) / len(idx) if idx else None,
            }
        )
    return out


def counted(n: int, noun: str) -> str:
    """'1 line', '2 lines', '1,000 sentences'."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def sentences(n: int) -> str:
    """'1 sentence', '2 sentences'."""
    return counted(n, "sentence")


def report(analysis: Analysis, corpus: Corpus, opts: DecodeOptions, model_name: str) -> dict:
    """Everything as JSON-ready values (write it with model.core.jsonio: NaN becomes null); docs/cli.md lists the
    keys."""
    decoding = {
        "strategy": opts.strategy,
        "beam": opts.beam if opts.strategy == "beam" else 1,
        "max_len": analysis.max_len,
    }
    out = {
        "model": model_name,
        "decoding": decoding,
        "sentences": len(corpus.sources),
        "references": corpus.references is not None,
        "skipped": dict(corpus.skipped),
        "notes": list(corpus.notes),
        "attribution": ATTRIBUTION,
        "flags": dict(FLAGS),
        "lexicon": analysis.lexicon,
        "columns": {**COLUMN_HELP, "flag_words": FLAG_WORDS_HELP},
        "corpus": corpus_scores(analysis.rows),
        "flag_counts": flag_counts(analysis.rows),
        "correlations": correlations(analysis.rows),
        "slices": slices(analysis.rows, corpus.domains),
        "rows": analysis.rows,
    }
    if analysis.heads is not None:
        out["heads"] = {
            "sentences": analysis.heads["sentences"],
            "target": analysis.heads["target"],
            "precision": analysis.heads["precision"],
            "stats": dict(STATS),
            "rows": head_rows(analysis.heads),
        }
    return out


def _cell(v) -> object:
    """A CSV cell: lists joined by "; ", a flag → words map as ``flags_text`` writes it, NaN and None empty."""
    if isinstance(v, dict):
        return flags_text({"flag_words": v})
    if isinstance(v, list):
        return "; ".join(map(str, v))
    return "" if v is None or (isinstance(v, float) and not math.isfinite(v)) else v


def write_csv(rows: list[dict], stream: TextIO) -> None:
    """Rows as CSV (see ``_cell``)."""
    w = csv.DictWriter(stream, fieldnames=list(rows[0]))
    w.writeheader()
    for r in rows:
        w.writerow({k: _cell(v) for k, v in r.items()})


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation of the pairs where both are finite (ties share their average rank); NaN with
    fewer than 3 such pairs or a constant side."""
    from model.interpret.attribution import average_ranks

    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 3:
        return float("nan")
    ra, rb = average_ranks(a[ok]), average_ranks(b[ok])
    ra, rb = ra - ra.mean(), rb - rb.mean()
    denom = math.sqrt(float((ra**2).sum() * (rb**2).sum()))
    return float((ra * rb).sum() / denom) if denom > 0 else float("nan")
