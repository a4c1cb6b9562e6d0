"""Fit a model directory's word translation table (model/interpret/lexicon.py) on its training pairs, both ways:

python -m model.train.lexicon MODEL_DIR [--pairs TSV | --data DIR] [--iterations N]
"""

from __future__ import annotations

import argparse
import gzip
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

from model.interpret.lexicon import FILE, KEEP, keys

ITERATIONS = 5
NULL = ""  # the empty word, which French words no English word accounts for are drawn from


def fit(pairs: Iterable[tuple[str, str]], iterations: int = ITERATIONS) -> dict[tuple[str, str], float]:
    """IBM Model 1's t(f | e) over (english, french) sentence pairs, from uniform, every pair of keys that met.
    Written here because NLTK's IBMModel1 normalises a French word's alignments by its sentence's total for that
    word, so a word written twice in a sentence ("de", "la") counts once, and its table differs from the model's."""
    bitext = [([NULL, *keys(en)], keys(fr)) for en, fr in pairs]
    t: dict[tuple[str, str], float] = defaultdict(lambda: 1.0)  # uniform: only ratios within a sentence matter
    for _ in range(iterations):
        count: dict[tuple[str, str], float] = defaultdict(float)
        total: dict[str, float] = defaultdict(float)
        for en, fr in bitext:
            for f in fr:  # E-step: each French position's alignment to the sentence's English words
                ps = [t[(e, f)] for e in en]
                z = sum(ps)
                for e, p in zip(en, ps):
                    count[(e, f)] += p / z
                    total[e] += p / z
        t = defaultdict(float, {ef: c / total[ef[0]] for ef, c in count.items()})  # M-step
    return dict(t)


def save(
    forward: dict[tuple[str, str], float], backward: dict[tuple[str, str], float], path: str | Path, keep: float = KEEP
) -> int:
    """Write the (english, french) pairs at least ``keep`` likely either way, t(f | e) (``forward``, keyed (e, f))
    and t(e | f) (``backward``, keyed (f, e): the model fit with the languages swapped), the empty word's aside;
    returns how many."""
    back = {(e, f): p for (f, e), p in backward.items()}
    pairs = {ef for ef, p in forward.items() if p >= keep} | {ef for ef, p in back.items() if p >= keep}
    rows = sorted((e, f) for e, f in pairs if NULL not in (e, f))

    def kept(p: float) -> float:  # a direction under ``keep`` is not stored, as the pairs under it both ways
        return p if p >= keep else 0.0

    with gzip.open(path, "wt", encoding="utf-8", compresslevel=9) as out:
        out.writelines(
            f"{e}\t{f}\t{kept(forward.get((e, f), 0.0)):.4g}\t{kept(back.get((e, f), 0.0)):.4g}\n" for e, f in rows
        )
    return len(rows)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m model.train.lexicon", description="Build a model directory's word translation table."
    )
    ap.add_argument("model_dir", type=Path, help=f"where {FILE} is written")
    ap.add_argument("--pairs", type=Path, help="english<TAB>french lines to fit on (default: the training pairs)")
    ap.add_argument("--data", type=Path, help="the data directory the training pairs are read from")
    ap.add_argument("--iterations", type=int, default=ITERATIONS)
    a = ap.parse_args(argv)
    if not a.model_dir.is_dir():
        print(f"error: {a.model_dir} is not a directory", file=sys.stderr)
        return 2
    if a.pairs:
        try:
            lines = a.pairs.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as e:
            print(f"error: {a.pairs} cannot be read ({e})", file=sys.stderr)
            return 2
        pairs = [(p[0], p[1]) for p in (line.split("\t") for line in lines) if len(p) >= 2]
    else:
        from model.train.data import load_corpora

        try:
            pairs = load_corpora(a.data).train
        except (OSError, UnicodeDecodeError) as e:
            print(f"error: the training pairs cannot be read ({e})", file=sys.stderr)
            return 2
    if a.iterations < 1:
        print("error: --iterations must be at least 1", file=sys.stderr)
        return 2
    if not pairs:
        print("error: no english<TAB>french pair to fit on", file=sys.stderr)
        return 2
    n = save(fit(pairs, a.iterations), fit([(fr, en) for en, fr in pairs], a.iterations), a.model_dir / FILE)
    print(f"{a.model_dir / FILE}: {n:,} word pairs from {len(pairs):,} sentence pairs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
