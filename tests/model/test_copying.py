"""Copy-teaching substitutions: seeded, consistent on both sides, and leaving everything else alone."""

from __future__ import annotations

import re

import pytest

from model.train.copying import (
    MONTHS_FR,
    NUMBER_WORDS,
    Substituter,
    identical_words,
    is_latin,
    name_pools,
    recurring_names,
    when,
)

PAIRS = [
    ("Tom is here.", "Tom est là."),
    ("Tom gave Mary a book.", "Tom a donné un livre à Mary."),
    ("I have three cats.", "J'ai trois chats."),
    ("The train leaves at 10:30.", "Le train part à 10 h 30."),
    ("It is cold.", "Il fait froid."),
    ("Ask Mary.", "Demande à Marie."),  # the name differs across sides: left alone
    ("Three or four?", "Trois ou quatre ?"),  # two number words: left alone
    ("Tom's dog", "Le chien de Tom"),
]


@pytest.fixture(scope="module")
def sub():
    return Substituter(PAIRS, rate=1.0, seed=3, names=("Tom", "Mary"))


def test_only_pairs_carrying_the_same_name_or_number_on_both_sides_are_eligible(sub):
    assert sorted(sub.slots) == [0, 1, 2, 3, 7]


def test_substitution_is_seeded_and_consistent_across_sides(sub):
    first, again = sub.epoch(0), sub.epoch(0)
    assert first == again and first != sub.epoch(1)
    assert set(first) == set(sub.slots)  # rate 1: every eligible pair changes
    en, fr = first[1]
    assert "Tom" not in en and "Mary" not in en
    new_first = en.split(" gave ")[0]
    assert fr.startswith(new_first + " a donné")  # the same name on both sides
    en, fr = first[2]
    n = re.search(r"\d+", en).group()
    assert en == f"I have {n} cats." and fr == f"J'ai {n} chats."
    en, fr = first[3]
    h, m = re.search(r"(\d+):(\d+)", en).groups()
    assert fr == f"Le train part à {h} h {m}."
    assert first[7][0].endswith("'s dog") and first[7][1].startswith("Le chien de ")


TIMED = [
    ("Wake me up at seven o'clock.", "Réveille-moi à sept heures."),
    ("I was born on June 4, 1974.", "Je suis né le 4 juin 1974."),
    ("I must leave on Monday.", "Je dois partir lundi."),
    ("Tom called at 2:30.", "Tom a appelé à 2 h 30."),
    ("I arrived at 4:00 p.m.", "Je suis arrivé à 16h00."),  # 16 h for "4:00 p.m.": left alone
    ("I go there on Monday morning.", "J'y vais lundi matin."),  # "on <date> morning" would not read well
    ("We met at 3:00 and left at 5:00.", "On s'est vus à 3 h et partis à 5 h."),  # two times: left alone
]


def test_a_time_date_or_weekday_given_alike_on_both_sides_is_found_and_cut_out():
    kinds = [w and w[0] for w in (when(*p) for p in TIMED)]
    assert kinds == ["time", "date", "day", "time", None, None, None]
    assert when(*TIMED[3]) == ("time", "Tom called at \ue000.", "Tom a appelé à \ue000.")
    assert when(*TIMED[2])[1:] == ("I must leave \ue000.", "Je dois partir \ue000.")


def test_times_and_dates_are_redrawn_in_digits_alike_and_repeated():
    sub = Substituter(TIMED, rate=1.0, seed=5, names=("Tom",), repeat=3)
    assert sorted(sub.slots) == [0, 1, 2, 3] and sub.timed == 4
    out = sub.epoch(0)
    en, fr = out[0]
    h, m = re.fullmatch(r"Wake me up at (\d+):(\d\d)\.", en).groups()
    assert fr == f"Réveille-moi à {h} h {m}." and 1 <= int(h) <= 12 and int(m) < 60
    en, fr = out[1]
    day, year = re.search(r"on \w+ (\d+)(?:, (\d{4}))?\.", en).groups()
    fr_day, fr_year = "1er" if day == "1" else day, f" {year}" if year else ""
    assert re.fullmatch(rf"Je suis né le {fr_day} ({'|'.join(MONTHS_FR)}){fr_year}\.", fr)
    en, fr = out[2]
    assert en.startswith("I must leave on ") and fr.startswith("Je dois partir le ") and "lundi" not in fr
    en, fr = out[3]  # the name and the time both change, each alike on both sides
    name, h, m = re.fullmatch(r"(.+) called at (\d+):(\d\d)\.", en).groups()
    assert name != "Tom" and fr == f"{name} a appelé à {h} h {m}."
    extra = sub.extra(0)
    assert len(extra) == 3 * 4 and extra == sub.extra(0) and extra != sub.extra(1)
    assert len(set(extra)) > 8  # each copy is drawn anew


def test_pairs_with_a_name_come_back_repeat_named_times_each_with_new_names(sub):
    named = Substituter(PAIRS, rate=1.0, seed=3, names=("Tom", "Mary"), repeat_named=3)
    assert named.named == 3 and named.timed == sub.timed == 1  # pairs 0, 1, 7 carry Tom or Mary
    extra = named.extra(0)
    assert len(extra) == 3 * 3 and sub.extra(0) == [] and extra == named.extra(0) and extra != named.extra(1)
    firsts = [en.split(" is here.")[0] for en, _ in extra if en.endswith(" is here.")]
    assert len(firsts) == 3 and "Tom" not in firsts and len(set(firsts)) > 1  # each copy is drawn anew
    assert all(fr == f"{n} est là." for n, (_, fr) in zip(firsts, [p for p in extra if p[0].endswith(" is here.")]))
    assert not any("three" in en or "10:30" in en or "cold" in en for en, _ in extra)  # only named pairs


def test_rate_zero_changes_nothing_and_rate_half_about_half():
    assert Substituter(PAIRS, rate=0.0, names=("Tom",)).epoch(0) == {}
    many = [("Tom runs.", "Tom court.")] * 2000
    changed = len(Substituter(many, rate=0.5, seed=1, names=("Tom",)).epoch(0))
    assert 900 < changed < 1100


def test_held_out_names_never_appear_in_training_draws():
    train, held = name_pools(), name_pools(held_out=True)
    train_names = {n for g in (train.latin, train.other) for f, ln in g.values() for n in f + ln}
    held_names = {n for g in (held.latin, held.other) for f, ln in g.values() for n in f + ln}
    assert len(held_names) > 1000 and len(train_names) > 10 * len(held_names) // 2
    assert not train_names & held_names
    assert len(train.latin) > 40 and len(train.other) > 10  # many languages and scripts
    assert all(is_latin(n) for f, _ in train.latin.values() for n in f)


def test_recurring_names_leave_words_that_are_also_common_nouns():
    pairs = [("Tom is here.", "Tom est là.")] * 5 + [("Bill left.", "Bill est parti.")] * 5
    pairs += [("Pay the bill.", "Paie la facture.")] * 5
    assert recurring_names(pairs) == ("Tom",)


ALIKE = [
    ("The table is red.", "La table est rouge."),
    ("Sit at the table.", "Assieds-toi à la table."),
    ("I play the piano.", "Je joue du piano."),
    ("Tom sold the piano.", "Tom a vendu le piano."),
    ("The orange is ripe.", "L'orange est mûre."),  # elided: "l'orange" is not a free-standing word
    ("I ate an orange.", "J'ai mangé l'orange."),
    ("Pour the milk.", "Verse le lait."),
    ("This is for you.", "C'est pour toi."),  # "pour" said twice in English, alike once: not French for it
    ("We bought two tables.", "Nous avons acheté deux tables."),
    ("Three tables were empty.", "Trois tables étaient vides."),
    ("An hotel in town.", "Un hotel en ville."),
    ("The hotel is full.", "L'hotel est plein."),  # elided again; the word is still alike in half its pairs
    ("It is cold.", "Il fait froid."),
]


def test_identical_words_are_the_words_french_writes_alike_in_most_of_their_pairs():
    assert identical_words(ALIKE) == ("piano", "table", "tables")
    assert identical_words(ALIKE, min_pairs=1) == ("hotel", "piano", "table", "tables")


def test_identical_words_are_swapped_alike_on_their_own_stream_keeping_kind_and_names():
    words = Substituter(ALIKE, rate=1.0, seed=2, names=("Tom",), word_rate=1.0)
    assert words.words == ("piano", "table", "tables") and words.with_identical == 6
    assert words.eligible == Substituter(ALIKE, rate=1.0, seed=2, names=("Tom",)).eligible == 3  # Tom, two, three
    out = words.epoch(0)
    assert out == words.epoch(0)
    en, fr = out[0]  # "table" can only become the other singular word of its kind
    assert (en, fr) == ("The piano is red.", "La piano est rouge.")
    en, fr = out[3]  # the name is drawn as without words, and "piano" becomes "table"
    plain = Substituter(ALIKE, rate=1.0, seed=2, names=("Tom",)).epoch(0)
    assert plain[3] == (en.replace("table", "piano"), fr.replace("table", "piano")) and "Tom" not in en
    en, fr = out[8]  # no other plural to draw: "tables" stays, while the number is redrawn
    assert re.fullmatch(r"We bought \d+ tables\.", en) and fr.endswith(" tables.") and "two" not in en
    assert 4 not in out and 12 not in out  # nothing alike or to substitute: unchanged
    assert Substituter(ALIKE, rate=0.0, seed=2, names=("Tom",), word_rate=0.0).epoch(0) == {}


def test_number_words_are_french_twins():
    assert NUMBER_WORDS["three"] == "trois" and len(set(NUMBER_WORDS.values())) == len(NUMBER_WORDS)


def test_copy_benchmark_runs_as_a_script_and_scores_what_it_prints(tiny_model_dir, tmp_path):
    """Run as ``python benchmarks/copying.py``."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "copy.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(root / "benchmarks" / "copying.py"),
            "--model",
            str(tiny_model_dir),
            "--per-template",
            "1",
            "--beam",
            "2",
            "--threads",
            "1",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(out.read_text(), parse_constant=lambda c: pytest.fail(f"non-strict JSON: {c}"))
    assert res["sentences"] == 40 and res["passed"] == 40 - len(res["failures"])
    assert f"copied verbatim: {res['passed']}/40" in proc.stdout
    assert all(f["missing"] and f["english"] in proc.stdout for f in res["failures"])


def test_copy_set_has_many_names_numbers_and_unseen_names():
    import importlib

    copy_bench = importlib.import_module("benchmarks.copying")
    cases = copy_bench.build_set()
    assert len(cases) >= 100 and len({en for en, _ in cases}) == len(cases)
    assert cases == copy_bench.build_set()  # seeded
    train = name_pools()
    train_names = {n for g in (train.latin, train.other) for f, ln in g.values() for n in f + ln}
    needed = [w for _, need in cases for w in need]
    names = [w for w in needed if not w.isdigit()]
    assert len(names) >= 60 and not set(names) & train_names
    assert sum(not is_latin(n) for n in names) >= 3  # some in other scripts
    assert sum(w.isdigit() for w in needed) >= 50
    assert copy_bench.appears("7", "à 7h50") and copy_bench.appears("50", "à 7h50")
    assert not copy_bench.appears("3", "en 2023") and not copy_bench.appears("Ana", "Anabel")
