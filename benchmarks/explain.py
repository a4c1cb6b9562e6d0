"""What explaining a translation costs, against the plain recorded decode of the same sentence in the same run.

    python benchmarks/explain.py [--model DIR] [--threads 1] [--runs 10] [--smoke]

One sentence of 15 tokens and its greedy translation of 15 tokens (``</s>`` aside) on the bundled model. Timed:
the recorded greedy decode (what the app's step view runs); the logit lens of every decoder layer at every
position on that decode's records, as the step view computes it (``steps.stack_view`` of the layer outputs,
``steps.output_record`` of the output distribution the decode kept for the last layer, ``explain.logit_lens``
with the lean decoder's output head for the layers before it); the full
head-importance map (every decoder head removed alone, teacher-forced on the pair); attribution of every output
token with Integrated Gradients as ``attribution.attribute`` runs it by default (each position redone with twice
the steps until its completeness error is within 5 %), and with Input × Gradient. Medians of ``--runs``; torch
on ``--threads`` threads (1, as the app that shows these; the CLI takes 2), numpy's BLAS on one.
Prints a table and one verdict line per target; asserts nothing. ``--smoke`` runs the tiny random model of
model.testing in seconds.

The activation-patching map of the pair (SENTENCE, SENTENCE_B) teacher-forced on the first sentence's translation,
at the first position where the outputs differ, every site restored alone (encoder outputs, decoder residuals,
heads) and measured as p(X) and as logit X − logit Y, Y being B's token there (``Patcher`` and ``map`` together;
with the tiny model, whose tokenizer cuts the two sentences differently, B is A with its second token changed); and
"why X rather than Y" there by Integrated Gradients as ``contrast.contrast_attribution`` runs it (steps doubled until
within 5 %, then path points placed where the path is steep if still short).

Targets: the lens adds <= 10 % to the recorded decode; the importance map <= 3 s; IG attribution <= 3 s; the
patching map <= 3 s and contrastive IG <= 3 s (both on 2 threads: ``--threads 2``).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

SENTENCE = "A man in a blue shirt is standing on a ladder near the house."  # 15 tokens; its translation too
SENTENCE_B = "A woman in a blue shirt is standing on a ladder near the house."  # 15 tokens with the bundled model
COMPLETENESS = 0.05


def timed(fn, runs: int) -> tuple[float, object]:
    """Median milliseconds of ``runs`` calls after one warm-up, and the last result."""
    out = fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), out


def verdict(name: str, ok: bool, detail: str) -> None:
    print(f"verdict {name}: {'PASS' if ok else 'FAIL'} ({detail})")


# Long on purpose: one timed measure per explanation method, then its line and verdict; the measures feed each
# other (the decode's output is what every method explains), so the script reads as one run.
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=None)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (the app: 1, the CLI: 2)")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--smoke", action="store_true", help="tiny random model, 2 runs")
    a = ap.parse_args()

    import warnings

    import numpy as np

    from model.core import keys
    from model.core.constants import MAX_BEAM
    from model.decode.decoding import DecodeOptions, decode
    from model.decode.lean import LeanDecoder
    from model.decode.steps import output_record, stack_view
    from model.interpret.attribution import attribute
    from model.interpret.contrast import contrast_attribution
    from model.interpret.explain import head_importance, logit_lens
    from model.interpret.patching import Patcher
    from model.io.checkpoint import load_model_dir, use_threads

    use_threads(a.threads)
    warnings.filterwarnings("ignore", message="Input Tensor .* did not already require gradients")  # captum's
    if a.smoke:
        from model.testing import make_model, make_tokenizer

        tok = make_tokenizer()
        model, runs, name = make_model(tok.vocab_size), 2, "tiny random model (smoke)"
        opts = DecodeOptions(max_len=16, record=True)  # a random model rarely ends: 16 tokens, as the real run
    else:
        lm = load_model_dir(a.model)
        model, tok, runs, name = lm.model, lm.tokenizer, a.runs, str(lm.path)
        opts = DecodeOptions(record=True)
    cfg = model.cfg
    src = tok.encode(SENTENCE) + [cfg.eos_id]
    lean = LeanDecoder(model, rows=MAX_BEAM)  # as the app builds it (one row's steps run numpy all the same)

    decode_ms, res = timed(lambda: decode(model, src, opts, lean), runs)
    out = list(res.ids)
    T = len(res.steps)

    def lens():  # as the app's step view runs it
        arrays = stack_view(res.steps, [0] * T, T - 1, keep=keys.is_layer_output)
        record = output_record(res.steps, [0] * T, T - 1)
        return logit_lens(model, arrays, [int(s.chosen[0]) for s in res.steps], lean=lean, record=record)

    lens_ms, _ = timed(lens, max(runs, 2 * runs))
    importance_ms, _ = timed(lambda: head_importance(model, src, out), max(2, runs // 2))

    ig_ms, ig = timed(lambda: attribute(model, src, out, "ig"), max(2, runs // 3))
    met = bool((ig.completeness <= COMPLETENESS).all())
    ixg_ms, ixg = timed(lambda: attribute(model, src, out, "ixg"), max(2, runs // 3))

    src_b = tok.encode(SENTENCE_B) + [cfg.eos_id]
    if len(src_b) != len(src):  # the tiny tokenizer: a one-token change of A
        src_b = [src[0], (src[1] + 1) % cfg.vocab_size, *src[2:]]
    out_b = list(decode(model, src_b, DecodeOptions(max_len=opts.max_len)).ids)
    differ = [t for t in range(min(len(out), len(out_b))) if out[t] != out_b[t]]
    t = differ[0] if differ else 0
    y = out_b[t] if differ else (out[t] + 1) % cfg.vocab_size
    patch_ms, patch = timed(lambda: Patcher(model, src, out, src_b).map(t, y), max(2, runs // 2))
    n_sites = patch.prob.enc.size + patch.prob.dec.size + patch.prob.heads.size
    cig_ms, cig = timed(lambda: contrast_attribution(model, src, out, t, y, "ig"), max(2, runs // 3))

    print(
        f"model: {name}; {cfg.n_decoder_layers} decoder layers x {cfg.n_heads} heads, vocab {cfg.vocab_size}; "
        f"torch on {a.threads} threads"
    )
    print(
        f"source: {len(src) - 1} tokens + </s>; output: {len(out) - (out[-1] == cfg.eos_id)} tokens"
        f"{' + </s>' if out[-1] == cfg.eos_id else ''}; {T} decoder positions"
    )
    counts = np.unique(ig.position_steps, return_counts=True)
    print("IG steps per position: " + ", ".join(f"{n} x {s}" for s, n in zip(*counts)))
    print(f"{'measure':<54}{'median ms':>12}{'x decode':>10}")
    cig_unit = "path points" if cig.refined else "steps"  # the trapezoid rule's, where it took over
    rows = [
        ("recorded greedy decode", decode_ms),
        ("logit lens, every layer and position", lens_ms),
        (f"head importance, {2 * cfg.n_decoder_layers * cfg.n_heads} heads", importance_ms),
        (f"attribution IG, up to {ig.steps} steps, every output token", ig_ms),
        ("attribution ixg, every output token", ixg_ms),
        (f"patching map, {n_sites} sites, position {t}", patch_ms),
        (f"contrastive IG, {cig.steps} {cig_unit}, position {t}", cig_ms),
    ]
    for label, ms in rows:
        print(f"{label:<54}{ms:>12.1f}{ms / decode_ms:>10.4f}")
    print(
        f"completeness error: IG worst {float(ig.completeness.max()):.1%}, median "
        f"{float(np.median(ig.completeness)):.1%}; ixg worst {float(ixg.completeness.max()):.1%}, median "
        f"{float(np.median(ixg.completeness)):.1%} (ixg promises none)"
    )
    verdict(
        "lens ≤ 10% of the recorded decode",
        lens_ms <= 0.10 * decode_ms,
        f"{lens_ms:.1f} ms = {lens_ms / decode_ms:.1%} of {decode_ms:.1f} ms",
    )
    verdict(
        "head importance ≤ 3 s",
        importance_ms <= 3000,
        f"{importance_ms:.0f} ms = {importance_ms / decode_ms:.1f}x the decode",
    )
    verdict(
        "IG attribution ≤ 3 s",
        ig_ms <= 3000 and met,
        f"{ig_ms:.0f} ms = {ig_ms / decode_ms:.1f}x the decode, up to {ig.steps} steps"
        f"{'' if met else ', completeness not within 5 % everywhere'}",
    )
    print(f"ixg: {ixg_ms:.0f} ms = {ixg_ms / decode_ms:.1f}x the decode (no target)")
    x_tok, y_tok = tok.id_to_token(out[t]), tok.id_to_token(y)
    print(
        f"patching at position {t}: p({x_tok}) clean {patch.prob.clean:.3f}, corrupted {patch.prob.corrupted:.3f}; "
        f"logit {x_tok} − logit {y_tok}: clean {patch.diff.clean:+.3f}, corrupted {patch.diff.corrupted:+.3f}; "
        f"contrastive IG completeness error {cig.completeness:.1%}"
    )
    verdict(f"patching map ≤ 3 s on {a.threads} thread(s)", patch_ms <= 3000, f"{patch_ms:.0f} ms for {n_sites} sites")
    verdict(
        f"contrastive IG ≤ 3 s on {a.threads} thread(s)",
        cig_ms <= 3000 and cig.completeness <= COMPLETENESS,
        f"{cig_ms:.0f} ms, {cig.steps} {cig_unit}, completeness error {cig.completeness:.1%}",
    )


if __name__ == "__main__":
    main()
