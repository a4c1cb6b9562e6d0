"""BLEU / chrF of a model directory on Multi30k test_2016_flickr, test_2017_flickr and the Tatoeba held-out test.

    python benchmarks/bleu.py [--model DIR] [--limit N] [--beams 1,5] [--data DIR] [--split test|val]
        [--length-penalty 1.0]

``--split val`` scores the validation sets instead (Multi30k ``val``, Tatoeba validation split): the
sets to choose between models or settings on, so that the test sets stay unseen by every choice.

Scores are sacrebleu corpus BLEU (13a tokenizer, cased, on detokenized output) and chrF, with
their signatures printed. The Tatoeba test is multi-reference: each held-out English sentence is
scored against all its French translations. sacrebleu needs a fixed number of reference streams,
so every sentence gets as many slots as the sentence with the most translations, and missing
slots are filled with copies of the sentence's first reference (duplicates change neither the
clipped n-gram counts nor the closest reference length, so the score equals true multi-ref BLEU).

Decoding uses ``model.decode.decoding.translate_corpus`` (batched greedy for beam 1, beam search otherwise), the
path that training validates with, with the app's and the CLI's default limits.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from model.core.constants import BATCH_SIZE
from model.core.jsonio import write
from model.decode.decoding import DecodeOptions, translate_corpus
from model.io.checkpoint import count_parameters, default_model_dir, load_model_dir, use_threads
from model.train.data import (
    MULTI30K_TESTS,
    SPLIT_SEED,
    TATOEBA_FILE,
    default_data_dir,
    group_by_source,
    load_multi30k_test,
    read_tatoeba,
    reference_streams,
    split_digest,
    split_tatoeba,
)
from views.state import EXAMPLES

SANITY = list(EXAMPLES)  # the app's example sentences


def load_eval_sets(data_dir: Path, limit: int | None, split: str = "test"):
    """{name: (sources, reference streams)}, the Tatoeba test split's digest and its number of English sentences.
    ``split`` "val": Multi30k val and the Tatoeba validation split instead of the test sets."""
    sets = {}
    for name in MULTI30K_TESTS if split == "test" else ("val",):
        pairs = load_multi30k_test(data_dir, name)[:limit]
        sets[f"multi30k/{name}"] = ([en for en, _ in pairs], [[fr for _, fr in pairs]])
    tatoeba = split_tatoeba(read_tatoeba(data_dir / TATOEBA_FILE), SPLIT_SEED)
    groups = group_by_source(tatoeba[split])[:limit]
    sets[f"tatoeba/{split}"] = ([en for en, _ in groups], reference_streams(groups))
    return sets, split_digest(tatoeba["test"]), len({en for en, _ in tatoeba[split]})


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", type=Path, default=None, help=f"model directory (default {default_model_dir()})")
    p.add_argument("--data", type=Path, default=None, help="corpus directory (default <repo>/../shared/data)")
    p.add_argument("--limit", type=int, default=None, help="first N sentences of each test set")
    p.add_argument("--beams", default="1,5", help="comma-separated beam sizes (1 = greedy)")
    p.add_argument(
        "--batch-size", type=int, default=BATCH_SIZE, help="greedy: sentences per batch (default %(default)s)"
    )
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json", type=Path, default=None, help="also write the results here")
    p.add_argument(
        "--split",
        choices=("test", "val"),
        default="test",
        help="val: the validation sets, to choose models and settings on (default: the test sets)",
    )
    p.add_argument(
        "--length-penalty",
        type=float,
        default=DecodeOptions.length_penalty,
        help="beam search: score = logprob / length ** this (default %(default)s)",
    )
    return p.parse_args(argv)


def print_table(rows: list[dict], signatures: dict[str, str]) -> None:
    """sacrebleu's signatures, then one Markdown row per test set and decode."""
    print("\nsignatures:")
    for k, v in signatures.items():
        print(f"  {k}: {v}")
    print(f"\n| {'set':<27} | {'decode':<7} | {'n':>5} | {'BLEU':>6} | {'chrF':>6} | {'sent/s':>7} |")
    print(f"|{'-' * 29}|{'-' * 9}|{'-' * 7}|{'-' * 8}|{'-' * 8}|{'-' * 9}|")
    for r in rows:
        print(
            f"| {r['set']:<27} | {r['decode']:<7} | {r['n']:>5} | {r['bleu']:>6.2f} | {r['chrf']:>6.2f} | "
            f"{r['sent_per_s']:>7.1f} |"
        )


def main(argv=None) -> dict:
    from sacrebleu.metrics import BLEU, CHRF

    args = parse_args(argv)
    use_threads(args.threads)

    loaded = load_model_dir(args.model)
    model, tokenizer = loaded.model, loaded.tokenizer
    how = "model.decode.decoding.translate_corpus"
    data_dir = args.data or default_data_dir()
    sets, digest, n_tat = load_eval_sets(data_dir, args.limit, args.split)
    print(
        f"model {loaded.path} ({count_parameters(model):,} parameters); decoder: {how}; "
        f"length penalty {args.length_penalty:g}"
    )
    print(
        f"tatoeba held-out {args.split}: {n_tat} English sentences (test split sha256 {digest}); refs streams: "
        f"{len(sets[f'tatoeba/{args.split}'][1])} (missing slots filled with the first reference)"
    )

    rows, signatures = [], {}
    beams = [int(b) for b in args.beams.split(",") if b.strip()]
    with torch.inference_mode():
        for beam in beams:
            for name, (srcs, refs) in sets.items():
                t0 = time.time()
                hyps = translate_corpus(model, tokenizer, srcs, beam, args.batch_size, args.length_penalty)
                dt = time.time() - t0
                bleu, chrf = BLEU(), CHRF()
                b, c = bleu.corpus_score(hyps, refs), chrf.corpus_score(hyps, refs)
                signatures["BLEU"], signatures["chrF"] = str(bleu.get_signature()), str(chrf.get_signature())
                decode = "greedy" if beam == 1 else f"beam {beam}"
                rows.append(
                    {
                        "set": name,
                        "decode": decode,
                        "n": len(srcs),
                        "bleu": round(b.score, 2),
                        "chrf": round(c.score, 2),
                        "sent_per_s": round(len(srcs) / dt, 1),
                    }
                )
                print(f"  {rows[-1]}", flush=True)

        print_table(rows, signatures)

        sanity = {}
        print("\nsanity sentences:")
        for beam in beams:
            outs = sanity[beam] = translate_corpus(model, tokenizer, SANITY, beam, args.batch_size, args.length_penalty)
            for en, fr in zip(SANITY, outs):
                print(f"  [{'greedy' if beam == 1 else f'beam {beam}'}] {en}  ->  {fr}")
    result = {
        "model": str(loaded.path),
        "decoder": how,
        "rows": rows,
        "signatures": signatures,
        "tatoeba_split_sha256": digest,
        "sanity": sanity,
        "split": args.split,
        "length_penalty": args.length_penalty,
    }
    if args.json:
        write(args.json, result)
    return result


if __name__ == "__main__":
    main()
