"""Copy-teaching substitutions for training: names and numbers that must pass through translation unchanged.

The corpora say "Tom" and "Mary" thousands of times and write few numbers in digits, so a model trained on them
mangles any other name or number. Each epoch, a seeded share of the training pairs that carry a recurring first
name on both sides gets it replaced, on both sides alike, by a name from Faker's localized lists (many languages
and scripts); pairs that carry the same digit numbers on both sides, or one English number word and its French
twin ("three"/"trois"), get other numbers in digits. Pairs that give the same clock time, date or weekday on
both sides get a new time in digits ("at 7:45" / "à 7 h 45") or a new date ("on May 3, 1987" / "le 3 mai 1987");
the corpora write few of them, so those pairs also come back ``repeat`` more times per epoch, each with its own
draw; pairs that carry a recurring name may likewise come back ``repeat_named`` more times, so that the model sees
many more names than the corpora's few. Nothing else of the sentence changes.

Rare words that French writes as English does ("finance", "cricket") are copied only if the model learned to copy
them, and the corpora say most such words a handful of times. So, on a stream of its own, a seeded share
(``word_rate``) of the pairs that carry one of the corpora's identical words ("table" / "table", found in the
training pairs alone) get it replaced on both sides by another word of that list, drawn with equal odds for
every word, starting with a vowel where the old one did (so "l'"/"le" elision still fits) and ending in "s"
where it did (so plural agreement mostly does).

Names are split by a hash into a training share and a held-out share (one in ten), so the copy benchmark
(``benchmarks/copying.py``) tests names that training never substituted.
"""

from __future__ import annotations

import hashlib
import random
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

Pair = tuple[str, str]

LATIN_SHARE = 0.85  # of substituted names; the rest in other scripts, spelled by the byte-fallback vocabulary
FULL_NAME_SHARE = 0.3  # "first last" rather than a first name alone
HELD_OUT_MOD = 10  # names whose hash is 0 mod this are kept for the copy benchmark
MIN_PAIRS = 3  # a corpus first name recurring in fewer pairs is left alone
IDENTICAL_MIN_PAIRS = 2  # a word written alike on both sides of fewer pairs is not known to be French too
IDENTICAL_SHARE = 0.5  # of the pairs whose English says it; "pour" or "sale" (French words too) fall below
_FREE = r"(?<![\w'’-]){}(?![\w'’-])"  # a free-standing word: not "l'orange", where elision binds it
_LOWER_WORD = re.compile(_FREE.format("([a-z]{4,})"))
VOWELS = "aeiouh"
NUMBER_WORDS = {
    "two": "deux",
    "three": "trois",
    "four": "quatre",
    "five": "cinq",
    "six": "six",
    "seven": "sept",
    "eight": "huit",
    "nine": "neuf",
    "ten": "dix",
    "eleven": "onze",
    "twelve": "douze",
    "fifteen": "quinze",
    "twenty": "vingt",
    "thirty": "trente",
    "forty": "quarante",
    "fifty": "cinquante",
}
_DIGITS = re.compile(r"(?<![\w.,:])\d+(?![\w:])")  # a clock time's digits belong to the time
HOURS_EN = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")
HOURS_FR = ("une", "deux", "trois", "quatre", "cinq", "six", "sept", "huit", "neuf", "dix", "onze", "douze")
MONTHS_EN = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
MONTHS_FR = (
    "janvier",
    "février",
    "mars",
    "avril",
    "mai",
    "juin",
    "juillet",
    "août",
    "septembre",
    "octobre",
    "novembre",
    "décembre",
)
DAYS_EN = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
DAYS_FR = ("lundi", "mardi", "mercredi", "jeudi", "vendredi", "samedi", "dimanche")
_EN_TIME = re.compile(
    rf"(?<![\w:])(?:(\d{{1,2}}):(\d\d)|({'|'.join(HOURS_EN)}|\d{{1,2}}) o'clock)(?![\w:])", re.IGNORECASE
)
_FR_TIME = re.compile(
    rf"(?<![\w:])(?:(\d{{1,2}}) ?(?:h|heures?|:) ?(\d\d)?|({'|'.join(HOURS_FR)}) heures?"
    r"(?: et demie| et quart| moins le quart| trente| quinze| (?:\d\d))?)(?![\w:])",
    re.IGNORECASE,
)
_EN_DATE = re.compile(rf"\b({'|'.join(MONTHS_EN)}) (\d{{1,2}})(?:st|nd|rd|th)?(?:,? (\d{{4}}))?(?![\w:])")
_FR_DATE = re.compile(rf"(?<![\w-])(\d{{1,2}}|1er) ({'|'.join(MONTHS_FR)})(?: (\d{{4}}))?(?![\w-])")
_EN_DAY = re.compile(rf"\bon ({'|'.join(DAYS_EN)})(?!['\w]| (?:morning|afternoon|evening|night))")
_FR_DAY = re.compile(
    rf"(?<!\bce )(?<!\bdu )(?<!\bau )(?<!\bde )(?<![\w-])(?:le )?({'|'.join(DAYS_FR)})"
    r"(?![\w-]| (?:matin|soir|après-midi|prochain|dernier|suivant))"
)


def _word(w: str) -> re.Pattern:
    return re.compile(rf"(?<![\w-]){re.escape(w)}(?![\w-])")


def is_latin(name: str) -> bool:
    return all(not c.isalpha() or "LATIN" in unicodedata.name(c, "") for c in name)


def _held_out(name: str) -> bool:
    return int(hashlib.sha256(name.encode()).hexdigest()[:8], 16) % HELD_OUT_MOD == 0


@dataclass(frozen=True)
class NamePools:
    """{locale: (first names, last names)}, Latin-script and other-script locales apart."""

    latin: dict[str, tuple[tuple[str, ...], tuple[str, ...]]]
    other: dict[str, tuple[tuple[str, ...], tuple[str, ...]]]


def _names(provider, *attrs: str) -> list[str]:
    out: list[str] = []
    for a in attrs:
        out += list(getattr(provider, a, None) or ())  # tuples, lists or weighted dicts (their keys)
    return out


PERSON = "faker.providers.person"


@lru_cache(maxsize=2)
def name_pools(held_out: bool = False) -> NamePools:
    """Every Faker locale's first and last names, deduplicated and sorted (so draws depend on the seed only);
    the training share, or with ``held_out`` the benchmark's share."""
    import warnings

    import faker
    from faker import Faker

    def keep(names: Iterable[str]) -> list[str]:
        ok = {n for n in names if 2 <= len(n) <= 20 and " " not in n and all(c.isalpha() or c in "-'" for c in n)}
        return sorted(n for n in ok if _held_out(n) == held_out)

    latin: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
    other: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
    for loc in sorted(faker.config.AVAILABLE_LOCALES):
        with warnings.catch_warnings():  # deprecated locale aliases say so; their lists are still good
            warnings.simplefilter("ignore")
            # the person provider alone: a whole Faker per locale would load its 25 other providers too
            person = Faker(loc, providers=[PERSON]).provider(PERSON)
        firsts = keep(_names(person, "first_names", "first_names_male", "first_names_female", "first_romanized_names"))
        lasts = keep(_names(person, "last_names", "last_romanized_names"))
        for script_latin in (True, False):
            f = [n for n in firsts if is_latin(n) == script_latin]
            ln = [n for n in lasts if is_latin(n) == script_latin]
            if len(f) >= 5:
                (latin if script_latin else other)[loc] = (tuple(f), tuple(ln or f))
    return NamePools(latin, other)


def draw_name(rng: random.Random, pools: NamePools) -> str:
    group = pools.latin if rng.random() < LATIN_SHARE or not pools.other else pools.other
    firsts, lasts = group[rng.choice(sorted(group))]
    name = rng.choice(firsts)
    return f"{name} {rng.choice(lasts)}" if rng.random() < FULL_NAME_SHARE else name


def draw_number(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.2:
        return str(rng.randint(2, 9))
    if r < 0.55:
        return str(rng.randint(10, 99))
    if r < 0.7:
        return str(rng.randint(100, 999))
    if r < 0.85:
        return str(rng.randint(1900, 2099))
    return str(rng.randint(1000, 99999))


def recurring_names(pairs: Sequence[Pair], min_pairs: int = MIN_PAIRS) -> tuple[str, ...]:
    """The corpus's recurring first names: capitalized words that Faker's en_US lists know as first names,
    written alike on both sides of at least ``min_pairs`` pairs, and lowercase in English text less than a
    tenth as often (so "Bill" and "Summer", also words, are left alone)."""
    from faker import Faker

    person = Faker("en_US", providers=[PERSON]).provider(PERSON)
    known = set(_names(person, "first_names", "first_names_male", "first_names_female"))
    counts: Counter[str] = Counter()
    lower: Counter[str] = Counter()
    for en, fr in pairs:
        for w in set(re.findall(r"\b[A-Z][a-z]+\b", en)):
            if w in known and len(_word(w).findall(en)) == len(_word(w).findall(fr)):
                counts[w] += 1
        for w in re.findall(r"\b[a-z]+\b", en):
            lower[w] += 1
    return tuple(sorted(w for w, n in counts.items() if n >= min_pairs and lower[w.lower()] * 10 < n))


def identical_words(
    pairs: Sequence[Pair], min_pairs: int = IDENTICAL_MIN_PAIRS, share: float = IDENTICAL_SHARE
) -> tuple[str, ...]:
    """Lowercase words of four letters or more that the French side writes alike, as often as the English says
    them, in at least ``min_pairs`` pairs and in at least ``share`` of the pairs whose English says them."""
    said: Counter[str] = Counter()
    alike: Counter[str] = Counter()
    for en, fr in pairs:
        fr_words = Counter(_LOWER_WORD.findall(fr))
        for w, k in Counter(_LOWER_WORD.findall(en)).items():
            said[w] += 1
            alike[w] += fr_words.get(w) == k
    return tuple(sorted(w for w, n in alike.items() if n >= min_pairs and n >= share * said[w]))


SLOT = "\ue000"  # stands for the time or date while names and numbers are substituted around it


def _hour(digits: str | None, word: str | None, words: Sequence[str]) -> int:
    if digits:
        return int(digits)
    if word is None:
        raise ValueError("an hour is written in digits or in a word")
    return int(word) if word.isdigit() else words.index(word.lower()) + 1


def _replaced(table: Mapping[str, str], group: int = 0) -> Callable[[re.Match[str]], str]:
    """For ``re.sub``: a match's ``group`` replaced by its entry in ``table`` (kept when it has none)."""
    return lambda m: table.get(m.group(group), m.group(group))


def when(en: str, fr: str) -> tuple[str, str, str] | None:
    """(kind, en, fr) with the one clock time, date or weekday that both sides give alike replaced by ``SLOT``
    (kind "time", "date" or "day"), or None: the pair says none, says it differently (16 h for "4:00 p.m.")
    or says more than one."""
    e_all, f_all = list(_EN_TIME.finditer(en)), list(_FR_TIME.finditer(fr))
    if len(e_all) == 1 == len(f_all):
        e, f = e_all[0], f_all[0]
        if _hour(e[1], e[3], HOURS_EN) == _hour(f[1], f[3], HOURS_FR):
            return "time", _cut(en, e), _cut(fr, f)
    e_all, f_all = list(_EN_DATE.finditer(en)), list(_FR_DATE.finditer(fr))
    if len(e_all) == 1 == len(f_all):
        e, f = e_all[0], f_all[0]
        if MONTHS_EN.index(e[1]) == MONTHS_FR.index(f[2]) and int(e[2]) == int(f[1].replace("1er", "1")):
            return "date", _cut(en, e), _cut(fr, f)
    e_all, f_all = list(_EN_DAY.finditer(en)), list(_FR_DAY.finditer(fr))
    if len(e_all) == 1 == len(f_all) and DAYS_EN.index(e_all[0][1]) == DAYS_FR.index(f_all[0][1]):
        return "day", _cut(en, e_all[0]), _cut(fr, f_all[0])
    return None


def _cut(text: str, m: re.Match) -> str:
    return text[: m.start()] + SLOT + text[m.end() :]


def draw_when(rng: random.Random, kind: str) -> tuple[str, str]:
    """A new clock time ("7:45" / "7 h 45") or date ("May 3, 1987" / "3 mai 1987"; "on …" / "le …" for a
    weekday), written in digits on both sides."""
    if kind == "time":
        h, m = rng.randint(1, 12), rng.choice((rng.randrange(0, 60, 5), rng.randint(0, 59)))
        return f"{h}:{m:02d}", f"{h} h {m:02d}"
    month, day = rng.randrange(12), rng.randint(1, 28)
    year = f" {rng.randint(1900, 2035)}" if rng.random() < 0.6 else ""
    en = f"{MONTHS_EN[month]} {day}{',' if year else ''}{year}"
    fr = f"{'1er' if day == 1 else day} {MONTHS_FR[month]}{year}"
    return (f"on {en}", f"le {fr}") if kind == "day" else (en, fr)


@dataclass(frozen=True)
class Slot:
    """What one pair carries to substitute: recurring names, one number word, digit numbers, a time or date."""

    names: tuple[str, ...]
    words: tuple[tuple[str, str], ...]
    digits: tuple[str, ...]
    when: tuple[str, str, str] | None  # (kind, en, fr) with the time or date cut out as SLOT
    identical: tuple[str, ...] = ()  # words of ``identical_words`` said once on each side

    @property
    def carries(self) -> bool:
        """A name, number, time or date to substitute."""
        return bool(self.names or self.words or self.digits or self.when)


class Substituter:
    """Seeded name, number, time, date and identical-word substitution over a fixed list of pairs; ``epoch(e)``
    gives that epoch's changed pairs (a pair changes when it carries something to substitute and its draw falls
    under ``rate``, or carries an identical word and its draw on the word stream falls under ``word_rate``) and
    ``extra(e)`` that epoch's additional copies of the pairs that carry a time or date (``repeat`` each) or a
    recurring name (``repeat_named`` each)."""

    def __init__(
        self,
        pairs: Sequence[Pair],
        rate: float,
        seed: int = 0,
        names: Sequence[str] | None = None,
        repeat: int = 0,
        repeat_named: int = 0,
        word_rate: float = 0.0,
    ):
        self.pairs, self.rate, self.seed, self.repeat, self.repeat_named = pairs, rate, seed, repeat, repeat_named
        self.word_rate = word_rate
        self.names = tuple(names) if names is not None else recurring_names(pairs)
        self.pools = name_pools()
        self.words = identical_words(pairs) if word_rate > 0 else ()
        self._word_res = {w: re.compile(_FREE.format(re.escape(w))) for w in self.words}
        self._word_pools = {k: tuple(w for w in self.words if _kind(w) == k) for k in {_kind(w) for w in self.words}}
        name_res = {n: _word(n) for n in self.names}
        num_res = {(e, f): (_word(e), _word(f)) for e, f in NUMBER_WORDS.items()}
        self.slots: dict[int, Slot] = {}
        for i, pair in enumerate(pairs):
            w = when(*pair)
            en, fr = w[1:] if w else pair
            names_here = [n for n, r in name_res.items() if (k := len(r.findall(en))) and k == len(r.findall(fr))]
            words = [
                ef
                for ef, (re_e, re_f) in num_res.items()
                if len(re_e.findall(en.lower())) == 1 and len(re_f.findall(fr.lower())) == 1
            ]
            words = words if len(words) == 1 else []  # one number word only, so it cannot be paired wrongly
            digits = _DIGITS.findall(en)
            digits = sorted(set(digits)) if digits and Counter(digits) == Counter(_DIGITS.findall(fr)) else []
            en_words, fr_words = (Counter(_LOWER_WORD.findall(t)) for t in pair)
            identical = sorted(v for v, k in en_words.items() if k == 1 == fr_words[v] and v in self._word_res)
            if names_here or words or digits or w or identical:
                self.slots[i] = Slot(tuple(names_here), tuple(words), tuple(digits), w, tuple(identical))

    @property
    def eligible(self) -> int:
        """Pairs that carry a name, number, time or date."""
        return sum(s.carries for s in self.slots.values())

    @property
    def with_identical(self) -> int:
        """Pairs that carry an identical word."""
        return sum(bool(s.identical) for s in self.slots.values())

    @property
    def timed(self) -> int:
        """Pairs that carry a time or date."""
        return sum(s.when is not None for s in self.slots.values())

    @property
    def named(self) -> int:
        """Pairs that carry a recurring name."""
        return sum(bool(s.names) for s in self.slots.values())

    def _apply(self, rng: random.Random, i: int) -> Pair:
        slot = self.slots[i]
        en, fr = slot.when[1:] if slot.when else self.pairs[i]
        if slot.names:  # one pass, so a drawn name that is also an old name is not replaced again
            new_names = {n: draw_name(rng, self.pools) for n in slot.names}
            pat = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, slot.names)) + r")(?![\w-])")
            en, fr = (pat.sub(_replaced(new_names, 1), t) for t in (en, fr))
        for e, f in slot.words:
            new = draw_number(rng)
            en, fr = _sub_ci(e, new, en), _sub_ci(f, new, fr)
        if slot.digits:
            new_digits = {d: draw_number(rng) for d in slot.digits}
            en, fr = (_DIGITS.sub(_replaced(new_digits), t) for t in (en, fr))
        if slot.when:
            new_en, new_fr = draw_when(rng, slot.when[0])
            en, fr = en.replace(SLOT, new_en), fr.replace(SLOT, new_fr)
        return en, fr

    def _swap_words(self, rng: random.Random, pair: Pair, old: Sequence[str]) -> Pair:
        en, fr = pair
        for w in old:
            if others := [v for v in self._word_pools[_kind(w)] if v != w]:  # none: the word stays
                new, pat = rng.choice(others), self._word_res[w]
                en, fr = pat.sub(new, en), pat.sub(new, fr)
        return en, fr

    def epoch(self, epoch: int) -> dict[int, Pair]:
        """{pair index: substituted pair} for this epoch; the other pairs are unchanged."""
        rng = random.Random(self.seed * 1_000_003 + epoch)
        out = {i: self._apply(rng, i) for i, s in self.slots.items() if s.carries and rng.random() < self.rate}
        if self.word_rate > 0:  # a stream of its own, so the name and number draws stay what they were without it
            wrng = random.Random(self.seed * 1_000_037 + epoch)
            for i, s in self.slots.items():
                if s.identical and wrng.random() < self.word_rate:
                    out[i] = self._swap_words(wrng, out.get(i, self.pairs[i]), s.identical)
        return out

    def extra(self, epoch: int) -> list[Pair]:
        """``repeat`` more substituted copies of each pair that carries a time or date and ``repeat_named`` more of
        each that carries a recurring name (one that carries both gets both), drawn for this epoch."""
        rng = random.Random(self.seed * 1_000_033 + epoch)
        timed = [i for i, s in self.slots.items() if s.when is not None]
        named = [i for i, s in self.slots.items() if s.names]
        return [self._apply(rng, i) for _ in range(self.repeat) for i in timed] + [
            self._apply(rng, i) for _ in range(self.repeat_named) for i in named
        ]


def _kind(word: str) -> tuple[bool, bool]:
    """(starts with a vowel, ends in s): a replacement of the same kind keeps elision and plural agreement."""
    return word[0] in VOWELS, word.endswith("s")


def _sub_ci(word: str, new: str, text: str) -> str:
    """Replace the one case-insensitive occurrence of ``word`` (a sentence-initial "Three")."""
    return re.compile(rf"(?<![\w-]){re.escape(word)}(?![\w-])", re.IGNORECASE).sub(new, text, count=1)
