"""Integrated Gradients' completeness on each family's tiny random model, for log p (``attribution.attribute``) and
for "why X rather than Y" (``contrast.contrast_attribution``, Y the runner-up at each position).

    python benchmarks/completeness.py [--families bart t5 ...] [--threads 1] [--smoke]

The models are the parity tests' (``tests/model/family_models.py``: built by transformers from a tiny config, the
plain T5's weights scaled 3× so that its attention flips sharply), imported as ``python -m model import`` does. One
sentence ("I like the cat."), its greedy translation of 5 tokens, every position, each family's baseline. Per
position: the completeness error |sum of attributions − (f(x) − f(baseline))| / |f(x) − f(baseline)|, the
Gauss-Legendre steps or, where the trapezoid rule on refined path points took over, its path points (and for the
contrastive one what Gauss-Legendre alone missed by at 512 steps); per family the worst error of each and the CPU
seconds (the contrastive one's without that comparison); the verdict ``completeness ≤ 5 %`` over every position.
``--smoke``: BART, two positions. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SENTENCE = "I like the cat."
NEW_TOKENS = 5


def how(steps: int, refined: bool) -> str:
    return f"{steps} points (trapezoid)" if refined else f"{steps} steps"


def family_rows(family: str, tokenizer, positions: int | None) -> tuple[float, float, float, float]:
    """Print each position's errors; the family's worst IG and contrastive IG errors and their CPU seconds."""
    import torch

    from model.decode.decoding import DecodeOptions, decode
    from model.interpret.attribution import MAX_IG_STEPS, attribute
    from model.interpret.contrast import contrast_attribution
    from tests.model.family_models import EOS, hf_and_ours  # the parity tests' models, not a second copy

    _, ours = hf_and_ours(family, Path(tempfile.mkdtemp()), tokenizer)
    model, cfg = ours.model, ours.cfg
    src = [*tokenizer.encode(SENTENCE), EOS]
    out = list(decode(model, src, DecodeOptions(max_len=NEW_TOKENS)).ids)
    with torch.no_grad():
        z = model(torch.tensor([src]), torch.tensor([[cfg.decoder_start_id, *out[:-1]]]))[0]  # (T, V)
    t0 = time.process_time()
    plain = attribute(model, src, out)
    ig_s, cig_s, worst = time.process_time() - t0, 0.0, 0.0
    for t in range(len(out) if positions is None else min(positions, len(out))):
        y = int(z[t].topk(2).indices[1]) if int(z[t].argmax()) == out[t] else int(z[t].argmax())
        t0 = time.process_time()
        c = contrast_attribution(model, src, out, t, y)
        cig_s += time.process_time() - t0
        worst = max(worst, c.completeness)
        alone = ""
        if c.refined:  # what Gauss-Legendre alone gave there at its most steps
            gl = contrast_attribution(model, src, out, t, y, steps=MAX_IG_STEPS, tolerance=None)
            alone = f"; Gauss-Legendre alone at {MAX_IG_STEPS} steps {gl.completeness:.2%}"
        print(
            f"  {family} position {t}: IG {plain.completeness[t]:7.2%} "
            f"({how(int(plain.position_steps[t]), bool(plain.refined[t]))}); "
            f"contrastive IG against {tokenizer.id_to_token(y)!r} {c.completeness:7.2%} ({how(c.steps, c.refined)}"
            f"{alone})"
        )
    return float(plain.completeness.max()), ig_s, worst, cig_s


def main(argv: list[str] | None = None) -> int:
    from tests.model.family_models import FAMILIES, family_tokenizer

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--families", nargs="+", choices=FAMILIES, default=list(FAMILIES))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--smoke", action="store_true", help="BART, two positions: the script works")
    a = p.parse_args(argv)
    import torch

    warnings.filterwarnings("ignore")
    torch.set_num_threads(a.threads)
    tokenizer = family_tokenizer()
    families, positions = (["bart"], 2) if a.smoke else (a.families, None)
    print(f"{'family':<10}{'IG worst %':>12}{'IG CPU s':>10}{'contrastive worst %':>21}{'contrastive CPU s':>19}")
    rows = []
    for family in families:
        rows.append(family_rows(family, tokenizer, positions))
        ig, ig_s, cig, cig_s = rows[-1]
        print(f"{family:<10}{100 * ig:>12.3f}{ig_s:>10.1f}{100 * cig:>21.3f}{cig_s:>19.1f}")
    worst = max(max(r[0], r[2]) for r in rows)
    print(f"verdict completeness ≤ 5 %: {'PASS' if worst <= 0.05 else 'FAIL'} (worst {worst:.2%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
