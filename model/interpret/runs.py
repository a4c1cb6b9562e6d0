"""Two runs of one set side by side: the same sentences translated by two decodings (greedy against beam k) or two
model directories, compared per sentence (chrF) and over the corpus with sacrebleu's paired bootstrap test.

The paired bootstrap resamples the sentences BOOTSTRAP times, scores both runs on each resample, and gives the
p-value of the second run's difference from the first (sacrebleu.significance.PairedTest, ``test_type="bs"``): the
share of resamples where the difference is at least as far from the resamples' mean difference as the observed one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from model.interpret.corpus import BOOTSTRAP

CHANGED = 10  # the sentences that changed most, listed


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
