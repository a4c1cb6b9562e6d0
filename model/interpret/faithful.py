"""Whether a translation says what its source says, read from the model by erasure: which source words the
translation depends on, which translated words depend on the source at all, and which were copied untranslated.

Everything here is teacher-forced on the (source, translation) pair, with no gradient:

- **Support of a source word** k: the largest drop, over the translation's tokens, of log p(y_t | x, y_<t) when
  word k (every occurrence of it, all its pieces) is erased from the source. A word that the translation renders
  makes some token much less likely without it; a dropped word changes little. This is an alignment read from the
  model (erasure, as in leave-one-out attribution), not cross-attention mass.
- **Alignment of a source word**: the largest drop of an output content word (its pieces' sum, written sure or not)
  among those that word k's erasure lowers within ALIGN_MARGIN of the most any source word's does: the output word
  it renders as much as any other source word. Erasing any word shifts the context, so a dropped word can still
  lower some token by a nat; it is rarely the word that does so most.
- **Pair gain of a source word**: the source erased without the word and an adjacent content word together; the
  largest extra drop of an output content word over either erased alone. A compound rendered by one French word
  ("frying pan" → "poêle") has little support for either word, each carrying it without the other, and a large gain.
- **Each output word's drops** (``by_word``): each rendering output word's drop (its pieces' sum) when one source
  content word is erased, which the alignment and the pair gain read. Its largest, the output word's support, was
  measured as a bound for *wrong word* (an unsure word a source word chose) and left out: docs/cli.md.
- **Source sensitivity of an output word**: log p(word | x, y_<t) − log p(word | x′, y_<t) summed over its pieces,
  with x′ the empty source (only </s>): how much the source, rather than the French already written, chose it.
  Shown with each sentence, not flagged: the words it alone named below 0 were mostly non-words (docs/cli.md).
- **Lexical translation** (with the model directory's word translation table, ``model/interpret/lexicon.py``): a
  weak source word's best t(f | word) over the output's words and its best t(word | f), and an unsure output word's
  best t(word | e) over the source's words. What erasure cannot see: "rue" still written with "street" erased, as
  "a busy" calls for it; "pneu" for "tire" written unsure but right.
- **The reference** (where the set gives one): the reference's content words the translation does not match, one
  to one (``unmatched``), and how often each repeated output word's forms occur in it. A weak source word that the
  table translates as one of those missing words is dropped whatever its pair gain; a word the reference writes as
  often as the translation does is not invented.
- **Copied words**: output words that are source words (case-insensitive) and that French does not use: wordfreq's
  French frequency at least COPY_ZIPF_GAP below its English frequency ("man", "horse"), so that cognates and
  loanwords ("taxi", "jazz", "piano") and names are allowed (``names``: capitalised words side by side inside the
  sentence, "New York", and, with a word translation table, a lone one its training pairs never hold).

Shapes: K source content words, T output tokens.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from model.core.tokenizer import Tokenizer
from model.core.transformer import Transformer
from model.decode.decoding import length_batches, read_source
from model.interpret.lexicon import Lexicon
from model.interpret.lexicon import words as text_words

# Thresholds: the best F1 over a grid on a labelled set of the model's own translations (benchmarks/corpus_flags.py
# prints the choice and what the same rule reaches out of fold), but LEXICON_IMPLIED, WRONG_PROB and PAIR_NATS, set
# later on the held-out sets for the precision and fine-sentence targets (docs/cli.md).
CONFIDENT = 0.2  # a source word supports only output tokens the model wrote with at least this probability
DROPPED_NATS = 3.0  # a content word whose support is below this ...
ALIGNED_NATS = 1.0  # ... its alignment below this ...
PAIR_NATS = 6.0  # ... and its pair gain below this is dropped
DROPPED_READ = 3.0  # alignment and pair gain are read for the words whose support is below this ...
ALIGNED_READ = 1.0  # ... and their alignment below this (the tops of the thresholds' grids)
ALIGN_MARGIN = 1.0  # a source word renders an output word whose drop it causes within this of the largest
LEXICON_DROPPED = 0.02  # ... and none of the output's words its translation this likely (the lexicon's t(f | e))
LEXICON_IMPLIED = 0.02  # ... nor one whose training pairs hold it this likely (t(e | f): "palmiers", "trees")
WRONG_PROB = 0.05  # an output content word (not copied from the source) below this probability is a wrong word
LEXICON_WRONG = 0.2  # ... that is no source word's translation this likely (the lexicon's t(f | e))
NONWORD_ZIPF = 1.0  # ... or one that French writes less than this (wordfreq's Zipf scale) while the model hesitated
NONWORD_PROB = 0.5
WRONG_READ = 0.2  # the words below this probability are listed with their support (the top of WRONG_PROB's grid)
COPY_ZIPF_GAP = 1.0  # a copied source word is untranslated when English uses it this much more (Zipf) than French
STEM_LETTERS = 5  # two output words are forms of one word when they begin with this many letters alike ...
STEM_SHARE = 0.75  # ... and this share of the shorter
REPEAT_NATS = 4.0  # a copy of a word is written for the source word whose erasure lowers it by this much
ROWS_PER_PASS = 256  # (source variant, translation) rows teacher-forced together (fewer, larger products)
# output positions whose (V,) float32 logits are taken at once: 256 positions' (8 MB) stay in cache between the
# product, the cast and the softmax, 2.5 times as fast as 2,048's; and bound the memory
LOGIT_POSITIONS = 256

# Function words: never content. Numbers (digits or words) and names are content.
EN_FUNCTION = frozenset(
    """a an the of in on at to for from by with without into onto over under above below up down out off about
    across through toward towards near next beside behind between along around against during while as than then
    and or but nor so yet if because that which who whom whose what where when how this these those there here
    it its it's itself his her hers herself himself their theirs them themselves they he she him i me my mine
    myself we us our ourselves you your yourself is are was were be
    been being am has have had having do does did doing will would can could shall should may might must not no
    some any each every all both either neither one's someone something another other others very too also just
    only even still own same such more most much many few several lot lots kind sort front top side middle part
    s t re ve ll d m o""".split()
)
FR_FUNCTION = frozenset(
    """le la les l un une des du de d au aux à a en dans sur sous par pour avec sans chez vers entre devant
    derrière près loin contre pendant depuis après avant et ou mais ni donc car que qu qui quoi dont où quand
    comme si ce cet cette ces c ça celui celle ceux celles il elle ils elles on se s sa son ses leur leurs lui
    eux me m te t moi toi nous vous y ne n pas plus est sont était étaient être été a ont avait avaient avoir fait
    font faire en-dessous dessus dessous au-dessus côté autre autres tout tous toute toutes même quelque
    quelques chaque plusieurs certains certaines très trop aussi ainsi bien
    """.split()
)
FR_LIGHT = frozenset({"fait", "font", "faire"})  # light verbs: function words that render a verb ("rides" -> "fait du")
_ALNUM = re.compile(r"\w", re.UNICODE)
_DIGIT = re.compile(r"\d")


@dataclass(frozen=True)
class Word:
    text: str  # the word as written (pieces joined, ▁ dropped)
    pieces: tuple[int, ...]  # its token positions
    content: bool  # not a function word and not punctuation


def words_of(tokens: Sequence[str], function: frozenset[str]) -> list[Word]:
    """The words of a token sequence: a piece starting with ▁ starts a word; a piece continues the previous word
    when both hold a letter or digit, or when a hyphen joins them ("mid-air", "T-shirts": one word each), so that
    "l'" splits words and a hyphenated compound is erased whole; special tokens (<s>, </s>) are left out."""
    groups: list[list[int]] = []
    texts: list[str] = []
    for i, t in enumerate(tokens):
        if t.startswith("<") and t.endswith(">") and len(t) > 2:
            continue
        body = t.lstrip("▁")
        prev = texts[-1][-1:] if texts else ""
        hyphen = (body.startswith("-") and _ALNUM.search(prev)) or (prev == "-" and _ALNUM.search(body[:1]))
        joins = groups and not t.startswith("▁") and ((_ALNUM.search(body) and _ALNUM.search(prev)) or hyphen)
        if joins and groups[-1][-1] == i - 1:
            groups[-1].append(i)
            texts[-1] += body
        else:
            groups.append([i])
            texts.append(body)
    out: list[Word] = []
    for g, w in zip(groups, texts):
        low = _head(w)  # "d'un" is "un", "street." is "street"
        content = bool(_DIGIT.search(w)) or (sum(c.isalpha() for c in w) >= 2 and low not in function)
        if low == "train" and out and out[-1].text.lower() == "en":  # "en train de": the progressive, not a train
            content = False
        out.append(Word(w, tuple(g), content))
    return out


def label_logp(model: Transformer, y: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """log p(label) (N,) of each of N decoder states y (N, D) read by the output head (its final norm and linear
    layer), in float32, LOGIT_POSITIONS at a time: the (N, V) logits are never held at once."""
    return torch.cat(
        [
            model.logits(y[a : a + LOGIT_POSITIONS])
            .float()
            .log_softmax(-1)
            .gather(1, labels[a : a + LOGIT_POSITIONS, None])[:, 0]
            for a in range(0, len(labels), LOGIT_POSITIONS)
        ]
        or [torch.zeros(0)]
    )


def teacher_forced(
    model: Transformer,
    srcs: Sequence[Sequence[int]],
    outs: Sequence[Sequence[int]],
    positions: Sequence[Sequence[int] | None] | None = None,
) -> list[np.ndarray]:
    """log p(out[t] | src, out[:t]) (T,) of each (source ids with </s>, output ids) row, batched by length; with
    ``positions``, a row's other positions are NaN and skip the output layer (its (V, D) product is most of the
    cost)."""
    cfg = model.cfg
    # The decoder runs only as far as a row's last position read (causal: later positions change nothing before).
    reach = [len(o) if at is None else max(at, default=-1) + 1 for o, at in zip(outs, positions or [None] * len(outs))]
    result: list[np.ndarray] = [np.full(len(o), np.nan) for o in outs]
    todo = [i for i in range(len(srcs)) if reach[i] > 0]
    with torch.inference_mode():
        for part in length_batches([[0] * (len(srcs[i]) + reach[i]) for i in todo], ROWS_PER_PASS):
            chunk = [todo[j] for j in part]
            S, T = max(len(srcs[i]) for i in chunk), max(reach[i] for i in chunk)
            src = torch.full((len(chunk), S), cfg.pad_id, dtype=torch.long)
            dec_in = torch.full((len(chunk), T), cfg.pad_id, dtype=torch.long)
            want = torch.zeros((len(chunk), T), dtype=torch.bool)
            for b, i in enumerate(chunk):
                s, o = list(srcs[i]), list(outs[i])
                src[b, : len(s)] = torch.tensor(s)
                dec_in[b, : reach[i]] = torch.tensor([cfg.decoder_start_id, *o[: reach[i] - 1]])
                at = None if positions is None else positions[i]
                want[b, list(range(len(o)) if at is None else at)] = True
            memory, src_mask, _ = model.encode(src)
            y, _, _ = model.decode_states(dec_in, memory, src_mask)  # (B, T, D): the model as it is (T5's bias)
            rows, cols = want.nonzero(as_tuple=True)  # (N,)
            labels = torch.tensor([outs[chunk[int(r)]][int(c)] for r, c in zip(rows, cols)], dtype=torch.long)
            picked = label_logp(model, y[rows, cols], labels).cpu().numpy().astype(np.float64)  # (N,)
            for (r, c), v in zip(zip(rows.tolist(), cols.tolist()), picked):
                result[chunk[r]][c] = v
    return result


@dataclass(frozen=True)
class Faithfulness:
    """The erasure signals of one (source, translation) pair."""

    src_words: list[Word]  # the source's words (content and function)
    out_words: list[Word]  # the translation's words
    logp: np.ndarray  # (T,) log-probability of each output token given the source
    drops: np.ndarray  # (K, T) log p with the source − log p with word k erased (0 where p < CONFIDENT)
    aligned: np.ndarray  # (K,) each source content word's alignment, in nats
    pair: np.ndarray  # (K,) its pair gain (NaN where not read: support or alignment above the READ bounds)
    sensitivity: np.ndarray  # (T,) log p with the source − log p with the empty source, per token
    by_word: np.ndarray  # (K, J) each rendering output word's drop (pieces summed) when source word k is erased

    @property
    def content_src(self) -> list[Word]:
        return [w for w in self.src_words if w.content]


def renders(out_words: list[Word]) -> list[Word]:
    """The output words that render source words (the J columns of ``by_word``): content words and light verbs."""
    return [w for w in out_words if (w.content and bare(w.text)) or _head(w.text) in FR_LIGHT]


def _erased(src: Sequence[int], words: list[Word], texts: set[str]) -> list[int]:
    """The source ids without every occurrence (case-insensitive) of the content words ``texts``, all pieces."""
    gone = {p for w in words if w.text.lower() in texts for p in w.pieces}
    return [t for i, t in enumerate(src) if i not in gone]


def faithfulness(
    model: Transformer, tokenizer: Tokenizer, srcs: Sequence[Sequence[int]], outs: Sequence[Sequence[int]]
) -> list[Faithfulness]:
    """The signals of each (source ids with </s>, output ids) pair: the translation teacher-forced on the source and
    on the empty source, then on each source with one content word erased (read at the positions written with at
    least CONFIDENT probability, which support reads, and at the output content words, which alignment reads), then
    with a weakly supported word and an adjacent content word erased together (pair gain), all in batched passes."""
    cfg = model.cfg
    codes = {i for i in (cfg.source_prefix_id, cfg.forced_bos_id) if i >= 0}  # language codes (mBART-50, NLLB)

    def tokens(ids) -> list[str]:  # a language code is no word: special, as words_of reads <s> and </s>
        return ["<code>" if i in codes else t for i, t in zip(ids, tokenizer.tokens(list(ids)))]

    src_words = [words_of(tokens(s), EN_FUNCTION) for s in srcs]
    out_words = [words_of(tokens(o), FR_FUNCTION) for o in outs]
    empty_src = read_source([], cfg)[0]  # the empty source as the model reads one: its language code, then </s>
    base = teacher_forced(model, [*srcs, *[empty_src] * len(srcs)], [*outs, *outs])
    full, empty = base[: len(srcs)], base[len(srcs) :]
    content = [[w for w in ws if w.content] for ws in src_words]
    out_content = [[list(w.pieces) for w in renders(ws)] for ws in out_words]
    sure = [np.exp(lp) >= CONFIDENT for lp in full]
    at = [
        sorted({*np.flatnonzero(sure[i]).tolist(), *(p for w in out_content[i] for p in w)}) for i in range(len(srcs))
    ]
    # a word written twice is erased once (every occurrence)
    singles = [sorted({w.text.lower() for w in c}) for c in content]
    one = _erasures(model, srcs, outs, content, [[{t} for t in ts] for ts in singles], at)
    every = [  # (K, T) drops at every position read, each content word's row
        np.array(
            [np.nan_to_num(full[i] - one[i][singles[i].index(w.text.lower())], nan=0.0) for w in content[i]]
        ).reshape(len(content[i]), len(outs[i]))
        for i in range(len(srcs))
    ]
    by_word = [_word_drops(every[i], out_content[i]) for i in range(len(srcs))]  # (K, J)
    aligned = [_aligned(d) for d in by_word]
    drops = [np.where(sure[i], every[i], 0.0) for i in range(len(srcs))]
    supported = [d.max(1) if d.size else np.zeros(len(content[i])) for i, d in enumerate(drops)]
    weak = [
        np.flatnonzero((supported[i] < DROPPED_READ) & (aligned[i] < ALIGNED_READ)).tolist() for i in range(len(srcs))
    ]
    pairs = [[(k, j) for k in weak[i] for j in _neighbours(content[i], k)] for i in range(len(srcs))]
    two = _erasures(
        model,
        srcs,
        outs,
        content,
        [[{content[i][k].text.lower(), content[i][j].text.lower()} for k, j in pairs[i]] for i in range(len(srcs))],
        [sorted(p for w in out_content[i] for p in w) for i in range(len(srcs))],
    )
    out = []
    for i in range(len(srcs)):
        pair = np.full(len(content[i]), np.nan)
        pair[weak[i]] = 0.0  # a weak word without an adjacent content word gains nothing
        for (k, j), lp in zip(pairs[i], two[i]):
            both = _word_drops(np.nan_to_num(full[i] - lp, nan=0.0)[None], out_content[i])[0]  # (J,)
            if both.size:
                pair[k] = max(pair[k], float((both - np.maximum(by_word[i][k], by_word[i][j])).max()))
        out.append(
            Faithfulness(
                src_words[i], out_words[i], full[i], drops[i], aligned[i], pair, full[i] - empty[i], by_word[i]
            )
        )
    return out


def _erasures(model, srcs, outs, content, erase: list[list[set[str]]], at: list[list[int]]) -> list[list[np.ndarray]]:
    """Each sentence's output teacher-forced on its source without each set of words in ``erase[i]`` (every
    occurrence, case-insensitive), read at the positions ``at[i]``: log-probabilities (T,), NaN elsewhere."""
    empty = read_source([], model.cfg)[0]  # all erased: the empty source as the model reads one
    flat = [(i, gone) for i in range(len(srcs)) for gone in erase[i]]
    got = (
        teacher_forced(
            model,
            [_erased(srcs[i], content[i], gone) or empty for i, gone in flat],
            [list(outs[i]) for i, _ in flat],
            [at[i] for i, _ in flat],
        )
        if flat
        else []
    )
    out: list[list[np.ndarray]] = [[] for _ in srcs]
    for (i, _), lp in zip(flat, got):
        out[i].append(lp)
    return out


def _word_drops(drops: np.ndarray, words: list[list[int]]) -> np.ndarray:
    """(K, T) token drops -> (K, J) each output content word's drop (its pieces' sum)."""
    return np.stack([drops[:, w].sum(1) for w in words], 1) if words else np.zeros((len(drops), 0))


def _aligned(by_word: np.ndarray) -> np.ndarray:
    """(K, J) -> (K,) each source word's alignment: the largest drop it causes to an output word among those whose
    drop it causes within ALIGN_MARGIN of the largest (0 where none)."""
    if not by_word.size:
        return np.zeros(len(by_word))
    near = by_word >= by_word.max(0, keepdims=True) - ALIGN_MARGIN
    return np.where(near, by_word, 0.0).max(1).clip(min=0.0)


def _neighbours(content: list[Word], k: int) -> list[int]:
    """The content words next to content word k on either side (function words between skipped: "rides a bicycle"),
    their indices in ``content``; the same word aside."""
    return [j for j in (k - 1, k + 1) if 0 <= j < len(content) and content[j].text.lower() != content[k].text.lower()]


# ---------------------------------------------------------------------------
# From the signals to the words concerned.

# Never dropped: rendered inside another word ("one" as "un"), by the word beside them (light verbs: "gets ready" as
# "s'apprête", "has fallen asleep" as "s'est endormi") or by a preposition ("wearing a hat": "en chapeau")
EN_PARTICLES = frozenset(
    """one away like please get gets getting got gotten go goes going went gone make makes making made set sets
    setting take takes taking took taken come comes coming came fall falls falling fell fallen wear wears wearing
    dressed""".split()
)


def bare(word: str) -> str:
    """The word without surrounding punctuation."""
    return re.sub(r"^\W+|\W+$", "", word)


def _head(word: str) -> str:
    """The part after an elision, lowercased: "l'objectif" -> "objectif"."""
    return bare(word).split("'")[-1].split("’")[-1].lower()


def _zipf(word: str, lang: str) -> float:
    from wordfreq import zipf_frequency

    return zipf_frequency(word, lang)


def _quoted(source: str) -> set[str]:
    """The source's words inside quotation marks: meant to be carried over as written."""
    return {w.lower() for q in re.findall(r"[\"“«](.*?)[\"”»]", source) for w in re.findall(r"\w+", q)}


def support(f: Faithfulness) -> np.ndarray:
    """(K,) each source content word's support: the largest drop in log p, over the output tokens written with at
    least CONFIDENT probability (drops are 0 elsewhere), when the word is erased (0 when there is none)."""
    return f.drops.max(1) if f.drops.size else np.zeros(len(f.content_src))


def _same_word(word: str) -> str:
    """What two output words share when they are the same word: the head, a plural's final s or x aside ("piéton",
    "piétons")."""
    head = _head(word)
    return head[:-1] if len(head) > 3 and head[-1] in "sx" else head


def _related(a: str, b: str) -> bool:
    """Two forms of one word (``_same_word`` keys) by their shared beginning: at least STEM_LETTERS letters and
    STEM_SHARE of the shorter ("nuageuse", "nuageux"; "basketteurs", "basket"; "blanc", "blanche")."""
    k = len(os.path.commonprefix([a, b]))
    return k >= STEM_LETTERS and k >= STEM_SHARE * min(len(a), len(b))


# English plurals not made with -s ("-men" words: _singular's own rule)
EN_IRREGULAR = {
    "men": "man",
    "people": "person",
    "children": "child",
    "feet": "foot",
    "teeth": "tooth",
    "mice": "mouse",
}


def _singular(word: str) -> str:
    """An English word without a plural's ending ("cars", "buses", "boxes", "women", "firemen" -> "car", "bus",
    "box", "woman", "fireman"), so that "a woman ... two women" counts the word twice, as ``_same_word`` counts
    "femme ... femmes"."""
    w = word.lower()
    if w in EN_IRREGULAR:
        return EN_IRREGULAR[w]
    if len(w) > 4 and w.endswith("men"):
        return w[:-3] + "man"
    if len(w) > 4 and w.endswith("es") and w[:-2].endswith(("s", "x", "z", "ch", "sh")):
        return w[:-2]
    return w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w


FR_COMPOUNDS = frozenset({("appareil", "photo")})  # two words French writes for one ("camera"), the second a noun
# "X à X" expressions, one word written twice for one meaning ("side by side"); "un cheval à cheval" is not one
FR_PAIRED = frozenset("face côte dos nez tête main bout coude corps pas peu petit porte goutte joue".split())


def _idioms(words: list[Word]) -> set[tuple[int, ...]]:
    """The second word of each "X à X" expression ("face à face", "côte à côte") and of each compound ("appareil
    photo"): one expression, not a word written twice ("prend une photo avec son appareil photo")."""
    return {
        c.pieces
        for a, b, c in zip(words, words[1:], words[2:])
        if _head(b.text) == "à" and _head(a.text) in FR_PAIRED and _same_word(a.text) == _same_word(c.text)
    } | {b.pieces for a, b in zip(words, words[1:]) if (_head(a.text), _same_word(b.text)) in FR_COMPOUNDS}


def _families(out: list[Word], idioms: set[tuple[int, ...]]) -> list[list[list[Word]]]:
    """The output content words grouped by ``_same_word`` (the second word of an ``idioms`` pair left out), and those
    groups joined into families of related forms."""
    groups: dict[str, list[Word]] = {}
    for w in out:
        if len(_head(w.text)) >= 3 and w.pieces not in idioms:
            groups.setdefault(_same_word(w.text), []).append(w)
    families: list[list[str]] = []
    for key in groups:
        joined = [fam for fam in families if any(_related(key, k) for k in fam)]
        families = [fam for fam in families if fam not in joined] + [[k for fam in joined for k in fam] + [key]]
    return [[groups[k] for k in fam] for fam in families]


def _repeated(f: Faithfulness, out: list[Word]) -> list[str]:
    """Output content words written more often than the source words they depend on most (by erasure) occur. One
    word written again counts against the most frequent of those source words ("un chien et un chien" for two
    dogs); two forms of one word ("une eau nuageuse bleue nuageux") against all of them together ("un surfeur
    surfe": a surfer who surfs); and copies each written for a source word of its own (erasing that word lowers the
    copy by REPEAT_NATS or more) against all of those ("se brosse les dents avec une brosse" for brushing and a
    toothbrush: one word for two, not one written twice)."""
    src = [_singular(bare(w.text)) for w in f.src_words]

    def depends(w: Word) -> tuple[float, str] | None:  # the source word it depends on most, and by how much
        drop = f.drops[:, list(w.pieces)].sum(1)  # (K,)
        return (float(drop.max()), _singular(bare(f.content_src[int(drop.argmax())].text))) if drop.size else None

    found = []
    for family in _families(out, _idioms(f.out_words)):
        ws = [w for g in family for w in g]
        if len(ws) < 2:
            continue
        most = [d for d in map(depends, ws) if d is not None]
        counts = [src.count(a) for a in {a for _, a in most}] or [1]
        apart = sum(src.count(a) for a in {a for drop, a in most if drop >= REPEAT_NATS})
        times = max(max(counts) if len(family) == 1 else sum(counts), apart)
        if len(ws) > max(1, times):
            found.append(bare(ws[0].text) if len(family) == 1 else bare(max(ws, key=lambda w: w.pieces).text))
    return found


def french_content(text: str) -> list[str]:
    """A French text's content words as written, elisions split ("l'homme": "homme"), function words out."""
    return [w for w in text_words(text) if len(w) >= 2 and w.lower() not in FR_FUNCTION]


def _forms(a: str, b: str) -> bool:
    """Whether two written words are forms of one word ("piéton", "piétons"; "nuageuse", "nuageux")."""
    a, b = _same_word(a), _same_word(b)
    return a == b or _related(a, b)


def unmatched(words: Sequence[str], others: Sequence[str]) -> list[str]:
    """The ``words`` no word of ``others`` matches, one to one: the same word first, else another form of it."""
    left, out = list(others), []
    for w in words:
        j = next((k for k, o in enumerate(left) if o.lower() == w.lower()), None)
        if j is None:
            j = next((k for k, o in enumerate(left) if _forms(w, o)), None)
        if j is None:
            out.append(w)
        else:
            left.pop(j)
    return out


def capitalised(words: Sequence[str]) -> list[bool]:
    """Each word: capitalised (not all capitals) inside the sentence, its first word aside."""
    return [i > 0 and w[:1].isupper() and not w.isupper() for i, w in enumerate(words)]


def names(words: list[str], lexicon: Lexicon | None = None) -> set[str]:
    """The source's names, lowercased: capitalised words (not all capitals) inside the sentence, beside another
    ("New York", "Iowa State") or, with a word translation table, alone and unknown to its training pairs
    ("Grimshaw"). A lone capitalised word the pairs hold is read as any other, by how much more English uses it than
    French: "A Family" or "in Brazil" copied is untranslated, "Boston" or "Batman" is not."""
    caps = capitalised(words)
    return {
        bare(w).lower()
        for i, w in enumerate(words)
        if caps[i]
        and (
            (i > 0 and caps[i - 1])
            or (i + 1 < len(words) and caps[i + 1])
            or lexicon is None
            or not lexicon.knows(bare(w))
        )
    }


def signals(f: Faithfulness, source: str, lexicon: Lexicon | None = None, reference: str | None = None) -> dict:
    """One sentence's faithfulness signals and the words concerned (JSON-ready values); with a ``lexicon``, each
    weak source word's best lexical translation among the output's words and each unsure output word's among the
    source's, and each weak word's t(word | f) at its best over the output's words, how much a French word implies it
    (0 without one, which leaves the flags to erasure); with a ``reference`` too, each weak word's best t(f | word)
    over the reference's content words the translation does not match, and whether the reference writes each
    repeated word as often as the translation does."""
    src_low = {bare(w.text).lower() for w in f.src_words}
    sup = support(f)
    words = [(float(s), bare(w.text)) for w, s in zip(f.content_src, sup) if _head(w.text) not in EN_PARTICLES]
    weakest = min(words, default=(float("nan"), ""))
    weak: dict[str, tuple[float, float, float]] = {}  # the words whose alignment and pair gain were read
    for w, s, a, g in zip(f.content_src, sup, f.aligned, f.pair):
        if _head(w.text) not in EN_PARTICLES and np.isfinite(g):
            weak.setdefault(bare(w.text), (float(s), float(a), float(g)))
    out = [w for w in f.out_words if w.content and bare(w.text)]
    own = [w for w in out if bare(w.text).lower() not in src_low]  # written, not copied from the source
    probs = [(float(np.exp(f.logp[list(w.pieces)].sum())), bare(w.text)) for w in own]
    unsure = [(p, word) for p, word in probs if p < WRONG_READ]  # the own words written below WRONG_READ
    src_heads = [_head(w.text) for w in f.src_words if _head(w.text)]
    out_heads = [_head(w.text) for w in out]

    def over_output(read: Callable[[str, str], float], english: str) -> float:  # its largest over the output's words
        return max((read(_head(english), fr) for fr in out_heads), default=0.0)

    sens = [(float(f.sensitivity[list(w.pieces)].sum()), bare(w.text)) for w in own]
    repeated = _repeated(f, out)
    in_reference = french_content(reference) if reference is not None else []
    written = french_content(" ".join(w.text for w in f.out_words)) if in_reference else []  # only to match those
    missing = [_head(r) for r in unmatched(in_reference, written)]  # what the reference writes and the output lacks

    def as_often(word: str) -> bool:  # the reference writes the word's forms at least as often as the output does
        ours = sum(_forms(word, o) for o in written)
        return bool(in_reference) and sum(_forms(word, r) for r in in_reference) >= ours

    keep = _quoted(source) | names([w.text for w in f.src_words], lexicon)
    copied = [
        bare(w.text)
        for w in f.out_words
        if w.content
        and bare(w.text).lower() in src_low
        and bare(w.text).lower() not in keep
        and not _DIGIT.search(w.text)
        and _zipf(bare(w.text).lower(), "en") - _zipf(bare(w.text).lower(), "fr") >= COPY_ZIPF_GAP
    ]
    return {
        "min_support": weakest[0],
        "min_support_word": weakest[1],
        "weak_words": list(weak),
        "weak_support": [v[0] for v in weak.values()],
        "weak_aligned": [v[1] for v in weak.values()],
        "weak_pair": [v[2] for v in weak.values()],
        "weak_lexical": [over_output(lexicon.prob, w) if lexicon else 0.0 for w in weak],  # t(f | w)
        "weak_implied": [over_output(lexicon.implied, w) if lexicon else 0.0 for w in weak],  # t(w | f): "palmiers"
        "weak_reference": [  # t(f | w) at its best over the reference's words the output lacks
            max((lexicon.prob(_head(w), r) for r in missing), default=0.0) if lexicon else 0.0 for w in weak
        ],
        "repeated": repeated,
        "repeated_in_reference": [as_often(w) for w in repeated],
        "min_sensitivity": min(sens, default=(float("nan"), ""))[0],
        "min_sensitivity_word": min(sens, default=(float("nan"), ""))[1],
        "min_word_prob": min(probs, default=(float("nan"), ""))[0],
        "min_word_prob_word": min(probs, default=(float("nan"), ""))[1],
        "unsure_words": [u[1] for u in unsure],
        "unsure_prob": [u[0] for u in unsure],
        "unsure_lexical": [lexicon.best(src_heads, _head(u[1])) if lexicon else 0.0 for u in unsure],
        "non_words": [w for p, w in probs if p < NONWORD_PROB and _zipf(_head(w), "fr") < NONWORD_ZIPF],
        "untranslated_words": copied,
    }


FLAG_WORDS = ("dropped words", "invented content", "untranslated", "wrong word")


def flagged_words(sig: dict) -> dict[str, list[str]]:
    """The faithfulness flags a sentence raises, each with the words concerned (none raised: empty)."""
    found = {
        "dropped words": [
            w
            for w, s, a, g, lex, implied, ref in zip(
                sig["weak_words"],
                sig["weak_support"],
                sig["weak_aligned"],
                sig["weak_pair"],
                sig["weak_lexical"],
                sig["weak_implied"],
                sig["weak_reference"],
            )
            if s < DROPPED_NATS
            and a < ALIGNED_NATS
            and (g < PAIR_NATS or ref >= LEXICON_DROPPED)  # a reference missing its translation outweighs the pair
            and lex < LEXICON_DROPPED
            and implied < LEXICON_IMPLIED
        ],
        "invented content": [w for w, cleared in zip(sig["repeated"], sig["repeated_in_reference"]) if not cleared],
        "untranslated": sig["untranslated_words"],
        "wrong word": sig["non_words"]
        or [
            w
            for w, p, lex in zip(sig["unsure_words"], sig["unsure_prob"], sig["unsure_lexical"])
            if p < WRONG_PROB and lex < LEXICON_WRONG
        ],
    }
    return {k: v for k, v in found.items() if v}
