"""Two runs of one set side by side: the same sentences translated by two decodings (greedy against beam k) or two
model directories, compared per sentence (chrF) and over the corpus with sacrebleu's paired bootstrap test.

The paired bootstrap resamples the sentences BOOTSTRAP times, scores both runs on each resample, and gives the
p-value of the second run's difference from the first (sacrebleu.significance.PairedTest, ``test_type="bs"``): the
share of resamples where the difference is at least as far from the resamples' mean difference as the observed one.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import numpy as np

from model.core.tokenizer import Tokenizer
from model.core.transformer import Transformer
from model.decode.decoding import DecodeOptions
from model.interpret.corpus import BOOTSTRAP, Progress, translations

CHANGED = 10  # the sentences that changed most, listed


def decoding(beam: int) -> DecodeOptions:
    """The decoding of a run: greedy for beam width 1, beam search otherwise (the CLI's ``--beam`` and the page's)."""
    return DecodeOptions() if beam == 1 else DecodeOptions(strategy="beam", beam=beam)


def beam_of(opts: DecodeOptions) -> int:
    return opts.beam if opts.strategy == "beam" else 1


def run_name(opts: DecodeOptions, model: str) -> str:
    """'bundled greedy', 'bundled beam 5'."""
    return f"{model} {'greedy' if beam_of(opts) == 1 else f'beam {opts.beam}'}"


def run_names(first: tuple[DecodeOptions, str], second: tuple[DecodeOptions, str]) -> tuple[str, str]:
    """The two runs' names (decoding, model), told apart by (A) and (B) when they would read the same."""
    a, b = run_name(*first), run_name(*second)
    return (f"{a} (A)", f"{b} (B)") if a == b else (a, b)


def second_run(
    model: Transformer,
    tokenizer: Tokenizer,
    sources: Sequence[str],
    references: Sequence[str],
    first: Sequence[str],
    opts: DecodeOptions,
    names: tuple[str, str],
    progress: Progress | None = None,
) -> dict:
    """The set translated again by ``model`` with ``opts``, compared with its first run's translations ``first``
    (``compare_runs``), with the seconds the second run took."""
    t0 = time.perf_counter()
    second = translations(model, tokenizer, sources, opts, progress)
    out = compare_runs(sources, references, first, second, names)
    return {**out, "seconds": time.perf_counter() - t0}


def changed_rows(out: dict) -> list[dict]:
    """``compare_runs``' sentences that changed most with fixed keys (``first`` and ``second`` for the two runs'
    translations, ``chrf_first`` and ``chrf_second``), as the page's table shows them."""
    a, b = out["runs"]
    return [
        {
            "index": c["index"],
            "source": c["source"],
            "first": c[a],
            "second": c[b],
            "chrf_first": c["chrf"][0],
            "chrf_second": c["chrf"][1],
            "difference": c["difference"],
        }
        for c in out["changed_most"]
    ]


def compare_runs(
    sources: Sequence[str],
    references: Sequence[str],
    a: Sequence[str],
    b: Sequence[str],
    names: tuple[str, str],
    n_bootstrap: int = BOOTSTRAP,
    changed: int = CHANGED,
) -> dict:
    """Run ``b`` against run ``a`` (translations of ``sources``, scored against ``references``): each corpus score,
    its difference and p-value, each sentence's chrF difference, and the ``changed`` sentences whose chrF moved most
    (JSON-ready)."""
    from sacrebleu.metrics import BLEU, CHRF
    from sacrebleu.significance import PairedTest

    if not (len(sources) == len(references) == len(a) == len(b)) or not sources:
        raise ValueError("both runs must translate the same non-empty set, with references")
    refs = [list(references)]
    test = PairedTest(
        [(names[0], list(a)), (names[1], list(b))],
        {"bleu": BLEU(references=refs), "chrf": CHRF(references=refs)},
        references=None,
        test_type="bs",
        n_samples=n_bootstrap,
    )
    signatures, results = test()
    corpus = {}
    for key, name in zip(("bleu", "chrf"), [k for k in results if k != "System"]):  # keyed by sacrebleu's names
        first, second = (r for r in results[name] if not isinstance(r, str))
        corpus[key] = {
            names[0]: float(first.score),
            names[1]: float(second.score),
            "difference": float(second.score - first.score),
            "p_value": float(second.p_value if second.p_value is not None else math.nan),
            "signature": str(signatures[name]),
        }
    chrf = CHRF()
    sa = np.array([chrf.sentence_score(h, [r]).score for h, r in zip(a, references)])
    sb = np.array([chrf.sentence_score(h, [r]).score for h, r in zip(b, references)])
    delta = sb - sa
    order = np.argsort(-np.abs(delta), kind="stable")[:changed]
    return {
        "runs": list(names),
        "sentences": len(sources),
        "corpus": corpus,
        "bootstrap": n_bootstrap,
        "chrf_difference": [float(d) for d in delta],
        "better": int((delta > 0).sum()),
        "worse": int((delta < 0).sum()),
        "changed_most": [
            {
                "index": int(i),
                "source": sources[i],
                names[0]: a[i],
                names[1]: b[i],
                "chrf": [float(sa[i]), float(sb[i])],
                "difference": float(delta[i]),
            }
            for i in order
            if delta[i] != 0
        ],
    }
