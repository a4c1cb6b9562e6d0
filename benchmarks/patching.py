"""What Compare's activation-patching map costs at each position, on one model or several side by side.

    python benchmarks/patching.py [--model DIR ...] [--threads 1] [--runs 3] [--positions 1,5,10,19] [--smoke]

The first minimal pair of the Compare page, its sentence A corrupted with noise (as the page's benchmark steps it,
``benchmarks/app_latency.py``), teacher-forced on a fixed line of 20 tokens drawn from the vocabulary with a seed: a
map's cost follows its sites (every encoder output, every decoder residual up to the position, every head) and the
model, not which tokens the line holds, so every model is timed on a line of the same length. At each position,
``Patcher.map`` (every site restored alone, measured as p(X)) after one warm-up, the median of ``--runs``; torch on
``--threads`` threads (1, as the app). Prints a table per model; asserts nothing. ``--smoke`` times the tiny random
model of model.testing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

LINE = 20  # tokens of the teacher-forced line
SEED = 0


def map_ms(model, src: list[int], out: list[int], position: int, runs: int) -> tuple[float, int]:
    """The map's median milliseconds at ``position`` (after a warm-up) and its number of sites."""
    from benchmarks.explain import timed
    from model.interpret.patching import Patcher

    p = Patcher(model, src, out, None)
    ms, r = timed(lambda: p.map(position), runs)
    return ms, r.prob.enc.size + r.prob.dec.size + r.prob.heads.size


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, action="append", help="a model directory (repeatable; default: the bundled)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--positions", type=lambda s: [int(x) for x in s.split(",")], default=[1, 5, 10, 19])
    ap.add_argument("--smoke", action="store_true", help="the tiny random model, one run")
    a = ap.parse_args(argv)
    if any(not 0 <= t < LINE for t in a.positions):
        ap.error(f"--positions must lie in 0–{LINE - 1}")
    import torch

    from model.io.checkpoint import load_model_dir, use_threads
    from views.compare import PRESETS

    use_threads(a.threads)
    if a.smoke:
        from model.testing import make_model, make_tokenizer

        tok = make_tokenizer()
        models, runs = [("tiny random model (smoke)", make_model(tok.vocab_size), tok)], 1
    else:
        loaded = [load_model_dir(d) for d in (a.model or [None])]
        models, runs = [(str(lm.path), lm.model, lm.tokenizer) for lm in loaded], a.runs
    sentence = PRESETS[0][1]
    print(
        f"sentence A: {sentence!r}, corrupted with noise; a line of {LINE} tokens; {a.threads} thread(s), median of "
        f"{runs} run(s)"
    )
    for name, model, tok in models:
        cfg = model.cfg
        src = [*tok.encode(sentence), cfg.eos_id]
        gen = torch.Generator().manual_seed(SEED)
        out = [int(i) for i in torch.randint(cfg.eos_id + 1, cfg.vocab_size, (LINE,), generator=gen)]
        n = sum(p.numel() for p in model.parameters())
        print(
            f"\nmodel {name}: {n / 1e6:.1f}M parameters, {cfg.n_encoder_layers} + {cfg.n_decoder_layers} layers, "
            f"{cfg.n_heads} heads, d_model {cfg.d_model}; source {len(src)} tokens"
        )
        print(f"{'':22}{'sites':>8}{'ms':>10}")
        for t in a.positions:
            ms, sites = map_ms(model, src, out, t, runs)
            print(f"{'map at position ' + str(t):22}{sites:8d}{ms:10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
