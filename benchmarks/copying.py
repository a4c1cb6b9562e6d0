"""Does the model carry names and numbers through? The share of sentences whose names and numbers all appear
verbatim in the French output.

    python benchmarks/copying.py [--model DIR] [--beam 5] [--per-template 3] [--seed 7] [--json FILE]

The set: hand-written English templates (everyday situations, none taken from the corpora) filled with
person names from Faker's localized lists — the held-out share that training never substitutes
(``model.train.copying.name_pools(held_out=True)``), from many languages, some in non-Latin scripts — and with
numbers, years, dates and times. Each sentence lists what must appear in the output: every name as a word,
and every number as digits that no other digit touches (a time 7:45 needs "7" and "45", since French writes
"7 h 45" or "7h45"; a date needs its day and year). Prints every failure and the share that passes; the example
sentence ("My name is Vikas. …") is checked apart (its name and its rare words).
"""

from __future__ import annotations

import argparse
import random
import re
from pathlib import Path

from model.core.jsonio import write
from model.decode.decoding import DecodeOptions, translate_corpus
from model.io.checkpoint import default_model_dir, load_model_dir, use_threads
from model.train.copying import LATIN_SHARE, MONTHS_EN, name_pools

TARGET = 0.95
EXAMPLE_SENTENCE = ("My name is Vikas. I love cricket, finance, and AI.", ("Vikas", "cricket", "finance"))
TEMPLATES = (
    "My name is {name}.",
    "{name} is my best friend.",
    "I met {name} at the station.",
    "{name} lives in a small house near the river.",
    "Have you seen {name} today?",
    "{name} and {name2} are going to the cinema.",
    "Please call {name} tomorrow morning.",
    "{name} works in a hospital.",
    "This book was written by {name}.",
    "{name} is waiting for you outside.",
    "I gave the keys to {name}.",
    "Where does {name} work?",
    "{name} plays the guitar very well.",
    "Our new teacher is called {name}.",
    "{name} bought {num} apples at the market.",
    "{name} has {num} brothers and sisters.",
    "The meeting with {name} starts at {time}.",
    "{name} was born in {year}.",
    "I have {num} books on my desk.",
    "There are {num} people in the room.",
    "The train leaves at {time}.",
    "She was born on {date}.",
    "The shop closes at {time}.",
    "We arrived in {year}.",
    "The museum opened in {year}.",
    "He ran {num} kilometers yesterday.",
    "The room number is {num}.",
    "My grandmother is {age} years old.",
    "The ticket costs {num} euros.",
    "The concert is on {date}.",
    "{name} is {age} years old.",
    "{name} scored {num} points in the game.",
    "I will see {name} on {date}.",
    "{name} and I waited for {num} minutes.",
    "The bus number {num} goes to the beach.",
    "{name} moved to a new city in {year}.",
    "A man named {name} is standing on a ladder.",
    "A woman named {name} is reading a newspaper.",
    "{name} is eating lunch with {name2}.",
    "The letter from {name} arrived at {time}.",
)


def _name(rng: random.Random, pools) -> str:
    group = pools.latin if rng.random() < LATIN_SHARE else pools.other
    firsts, _ = group[rng.choice(sorted(group))]
    return rng.choice(firsts)


def build_set(per_template: int = 3, seed: int = 7) -> list[tuple[str, tuple[str, ...]]]:
    """[(english, strings that must appear in the French output)], the same for the same arguments."""
    rng = random.Random(seed)
    pools = name_pools(held_out=True)
    out: list[tuple[str, tuple[str, ...]]] = []
    for template in TEMPLATES:
        made = 0
        while made < per_template:  # a repeated sentence is drawn again
            need: list[str] = []
            fill = {}
            if "{name}" in template:
                fill["name"] = _name(rng, pools)
                need.append(fill["name"])
            if "{name2}" in template:
                fill["name2"] = _name(rng, pools)
                need.append(fill["name2"])
            if "{num}" in template:
                fill["num"] = str(rng.choice([rng.randint(2, 20), rng.randint(21, 99), rng.randint(100, 999)]))
                need.append(fill["num"])
            if "{age}" in template:
                fill["age"] = str(rng.randint(3, 99))
                need.append(fill["age"])
            if "{year}" in template:
                fill["year"] = str(rng.randint(1850, 2035))
                need.append(fill["year"])
            if "{time}" in template:
                h, m = rng.randint(1, 12), rng.choice([10, 15, 20, 25, 30, 35, 40, 45, 50])
                fill["time"] = f"{h}:{m:02d}"
                need += [str(h), f"{m:02d}"]
            if "{date}" in template:
                day, year = rng.randint(2, 28), rng.randint(1950, 2030)
                fill["date"] = f"{rng.choice(MONTHS_EN)} {day}, {year}"
                need += [str(day), str(year)]
            if all(en != template.format(**fill) for en, _ in out):
                out.append((template.format(**fill), tuple(need)))
                made += 1
    return out


def appears(word: str, text: str) -> bool:
    """``word`` in ``text``, not inside a longer word, or for a number not inside a longer number ("3" does not
    count inside "2023", but "7" and "50" do inside "7h50")."""
    edge = r"\d" if word.isdigit() else r"\w"
    return re.search(rf"(?<!{edge}){re.escape(word)}(?!{edge})", text) is not None


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", type=Path, default=None, help=f"model directory (default {default_model_dir()})")
    p.add_argument("--beam", type=int, default=DecodeOptions.beam, help="beam width (default: the app's, %(default)s)")
    p.add_argument("--per-template", type=int, default=3)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json", type=Path, default=None, help="also write the results here (strict JSON)")
    args = p.parse_args(argv)
    use_threads(args.threads)
    loaded = load_model_dir(args.model)
    cases = build_set(args.per_template, args.seed)
    texts = [en for en, _ in cases] + [EXAMPLE_SENTENCE[0]]
    outs = translate_corpus(loaded.model, loaded.tokenizer, texts, args.beam)
    failures = []
    for (en, need), fr in zip(cases, outs):
        missing = [w for w in need if not appears(w, fr)]
        if missing:
            failures.append({"english": en, "french": fr, "missing": missing})
    example_fr = outs[-1]
    example_missing = [w for w in EXAMPLE_SENTENCE[1] if not appears(w, example_fr)]
    share = 1 - len(failures) / len(cases)
    print(
        f"model {loaded.path}; beam {args.beam}; {len(cases)} sentences ({len(TEMPLATES)} templates x "
        f"{args.per_template}, seed {args.seed})"
    )
    print(f"\nfailures ({len(failures)}):")
    for f in failures:
        print(f"  missing {', '.join(f['missing'])}:  {f['english']}  ->  {f['french']}")
    verdict = "misses " + ", ".join(example_missing) if example_missing else "keeps " + ", ".join(EXAMPLE_SENTENCE[1])
    print(f"\nexample sentence: {EXAMPLE_SENTENCE[0]}  ->  {example_fr}  [{verdict}]")
    print(
        f"\ncopied verbatim: {len(cases) - len(failures)}/{len(cases)} = {share:.1%} "
        f"(target >= {TARGET:.0%}: {'PASS' if share >= TARGET else 'FAIL'})"
    )
    result = {
        "model": str(loaded.path),
        "beam": args.beam,
        "sentences": len(cases),
        "passed": len(cases) - len(failures),
        "share": round(share, 4),
        "failures": failures,
        "example_sentence": {"english": EXAMPLE_SENTENCE[0], "french": example_fr, "missing": example_missing},
    }
    if args.json:
        write(args.json, result)
    return result


if __name__ == "__main__":
    main()
