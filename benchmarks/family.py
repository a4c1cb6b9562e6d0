"""A 57M-parameter model of each family beside the bundled model: it loads, decodes a 20-token sentence, and its
step costs at most twice the bundled model's on the same machine.

    python benchmarks/family.py [--model DIR] [--params 57e6] [--runs 5] [--threads 1] [--work DIR] [--smoke]

Each family's model (BART, mBART, M2M100/NLLB, T5, gated T5 / Flan-T5) is built by transformers from a config at
Marian-base sizes (d_model 512, 8 heads, FFN 2048, 6 + 6 layers; T5: heads of 64), its vocabulary sized so the whole
model has ``--params`` parameters, seeded random weights (</s> never chosen, so that every decode takes 20
steps), saved with the bundled tokenizer, imported with
``model.io.family.import_model`` and loaded with ``load_model_dir`` as the app loads a model directory. Then the
first source sentence of 20 tokens is decoded greedily, 20 new tokens at most, as the app decodes it: untraced (the
CLI's step: ``step_decoder``, the numpy step of ``model.decode.family_step`` for these families) and recorded
(``record=True``: the step view's decode, every stage kept, through the modules). A step's time is the decode's median
time over ``--runs`` divided by its steps, wall-clock and CPU (the process's CPU seconds: less sensitive to other
processes on a shared machine). The bundled model is timed the same way, first and last (its median of both), and
each family's ratio to it printed with the verdict ``step <= 2x bundled``, beside the ratio of the step's
multiply-adds (the decoder's products and the output head's, one row): the ratio a step reaches when it costs only
its products; then the rate at which each untraced step reads its float32 weights (their bytes / its CPU time) beside
the rate one thread copies memory at (256 MiB, far beyond any cache). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

FAMILIES = ("bart", "mbart", "m2m_100", "t5", "t5_gated")
SIZES = dict(
    d_model=512, heads=8, ffn=2048, layers=6, max_len=256
)  # Marian-base's (opus-mt), the family's usual small size
SMOKE = dict(d_model=32, heads=4, ffn=64, layers=2, max_len=256)
SRC_TOKENS = 20
NEW_TOKENS = 20
BOUND = 2.0  # a family's step / the bundled model's step that passes
SENTENCE = "A man in a blue shirt is standing on a ladder cleaning the windows of a tall building ."


def build(family: str, params: float, sizes: dict, tokenizer, cfg, out: Path) -> tuple[Path, int]:
    """The family's random model of about ``params`` parameters, saved as a model hub directory, then imported."""
    import torch
    from transformers import AutoModelForSeq2SeqLM

    from model.io.family import import_model
    from model.testing import family_config

    if (cfg.pad_id, cfg.bos_id, cfg.eos_id) != (0, 1, 2):
        raise ValueError("the bundled tokenizer must put <pad>, <s>, </s> at 0, 1, 2, as the family configs do")
    probe = AutoModelForSeq2SeqLM.from_config(family_config(family, tokenizer.vocab_size, **sizes))
    tables = 1 if probe.config.tie_word_embeddings else 2  # the embedding, and an untied output projection
    fixed = sum(p.numel() for p in probe.parameters()) - tables * tokenizer.vocab_size * sizes["d_model"]
    vocab = max(tokenizer.vocab_size, round((params - fixed) / (tables * sizes["d_model"])))
    torch.manual_seed(0)
    model = AutoModelForSeq2SeqLM.from_config(family_config(family, vocab, **sizes)).eval()
    with torch.no_grad():  # </s> never chosen: every decode takes its NEW_TOKENS steps
        model.get_output_embeddings().weight[cfg.eos_id] = 0.0
        if (bias := getattr(model, "final_logits_bias", None)) is not None:
            bias[0, cfg.eos_id] = -1.0e4
    n = sum(p.numel() for p in model.parameters())
    hf_dir = out / family / "hf"
    model.save_pretrained(hf_dir, safe_serialization=True)
    tokenizer.save(hf_dir / "tokenizer.json")
    return import_model(hf_dir, out / family / "ours"), n


def step_macs(cfg) -> int:
    """Multiply-adds of one untraced step of one row through the products: each decoder layer's W_Q, W_K, W_V, W_O,
    cross W_Q and W_O, the FFN's W_1 (and W_3), W_2; the output head (attention over the positions left out)."""
    inner = cfg.n_heads * cfg.d_k
    ffn = cfg.d_model * cfg.d_ff * (3 if cfg.gated_ffn else 2)
    return cfg.n_decoder_layers * (6 * cfg.d_model * inner + ffn) + cfg.d_model * cfg.vocab_size


def step_ms(lm, src: list[int], runs: int, record: bool) -> tuple[float, float, int]:
    """The medians over ``runs`` of a greedy decode's wall-clock and CPU time per step (ms), and its steps."""
    from model.decode.decoding import DecodeOptions, decode, step_decoder

    step = None if record else step_decoder(lm.model)  # the app's shared decoder (the recorded decode steps alone)
    opts = DecodeOptions(strategy="greedy", max_len=NEW_TOKENS, record=record)
    res = decode(lm.model, src, opts, step)  # warm-up (and the numba step compiled)
    wall, cpu = [], []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        res = decode(lm.model, src, opts, step)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    n = len(res.ids)
    return 1000 * statistics.median(wall) / n, 1000 * statistics.median(cpu) / n, n


def copy_gbs(mib: int = 256, runs: int = 5) -> float:
    """This machine's memory bandwidth as one thread sees it: GB/s read and written by copying ``mib`` MiB (far larger
    than any cache) from one array into another, the best of ``runs``, in CPU time as the steps are read."""
    import numpy as np

    a = np.ones(mib * 2**20 // 4, np.float32)
    b = np.empty_like(a)
    best = float("inf")
    for _ in range(runs):
        t0 = time.process_time()
        np.copyto(b, a)
        best = min(best, time.process_time() - t0)
    return 2 * a.nbytes / best / 1e9


def report(rows, ref, bundled) -> None:
    """The table (wall-clock and CPU ms per step, their ratios to the bundled model's, the multiply-adds' ratio) and
    the verdicts, read on the CPU ratio."""
    n_bundled, macs_bundled, steps = bundled
    print(f"{'model':<10} {'params':>7} {'build+import':>12} {'load':>6}   untraced ms/step wall, CPU   ", end="")
    print("recorded ms/step wall, CPU   steps   ratio untraced wall, CPU / recorded CPU / multiply-adds")
    (uw, uc), (rw, rc) = ref
    blank = ""
    print(f"{'bundled':<10} {n_bundled / 1e6:6.1f}M {blank:>19} {uw:12.2f} {uc:7.2f} {rw:19.2f} {rc:7.2f} {steps:7d}")
    verdicts = []
    for family, n, build_s, load_s, macs, ((fw, fc, n_steps), (gw, gc, _)) in rows:
        ratios = (fw / uw, fc / uc, gc / rc, macs / macs_bundled)
        verdicts.append((family, ratios))
        print(
            f"{family:<10} {n / 1e6:6.1f}M {build_s:11.1f}s {load_s:5.2f}s {fw:12.2f} {fc:7.2f} {gw:19.2f} {gc:7.2f} "
            f"{n_steps:7d}   {ratios[0]:.2f}x, {ratios[1]:.2f}x / {ratios[2]:.2f}x / {ratios[3]:.2f}x"
        )
    print()
    for family, _, _, _, macs, ((_, fc, _), _) in rows:  # float32 weights, one row: each multiply-add reads 4 bytes
        print(
            f"{family}: the untraced step reads its {4 * macs / 1e6:.0f} MB of weights: {4 * macs / fc / 1e6:.1f} GB/s"
        )
    print(
        f"bundled: {4 * macs_bundled / 1e6:.0f} MB at {4 * macs_bundled / uc / 1e6:.1f} GB/s; copying memory: "
        f"{copy_gbs():.1f} GB/s read + written (one thread, 256 MiB)\n"
    )
    for family, (_, ru, rr, rm) in verdicts:
        for what, r in (("untraced", ru), ("recorded", rr)):
            print(
                f"{'PASS' if r <= BOUND else 'FAIL'}  {family} {what} step <= {BOUND:g}x bundled ({r:.2f}x CPU; "
                f"its products alone: {rm:.2f}x)"
            )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=Path, default=None, help="the bundled model directory (default: assets/models)")
    p.add_argument("--params", type=float, default=57e6)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--work", type=Path, default=None, help="where the models are written (default: a temporary)")
    p.add_argument("--smoke", action="store_true", help="tiny models, one run: the script works")
    a = p.parse_args(argv)
    import warnings

    from model.io.checkpoint import load_model_dir, use_threads

    warnings.filterwarnings("ignore")
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    use_threads(a.threads)
    sizes, runs, params = (SMOKE, 1, 2e5) if a.smoke else (SIZES, a.runs, a.params)
    bundled = load_model_dir(a.model)
    tok, cfg = bundled.tokenizer, bundled.cfg
    src = [*tok.encode(SENTENCE)[: SRC_TOKENS - 1], cfg.eos_id]
    print(f"source: {len(src)} tokens ({SRC_TOKENS - 1} and </s>); greedy, at most {NEW_TOKENS} new tokens; ")
    print(f"{a.threads} thread(s), median of {runs} runs; ms per step = a decode's time / its steps\n")
    n_bundled = sum(p.numel() for p in bundled.model.parameters())
    base = [step_ms(bundled, src, runs, rec) for rec in (False, True)]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = a.work or Path(tmp)
        for family in FAMILIES:
            t0 = time.perf_counter()
            path, n = build(family, params, sizes, tok, cfg, work)
            t1 = time.perf_counter()
            lm = load_model_dir(path)
            load_s = time.perf_counter() - t1
            timed = [step_ms(lm, src, runs, rec) for rec in (False, True)]
            rows.append((family, n, t1 - t0, load_s, step_macs(lm.cfg), timed))
            del lm
    again = [step_ms(bundled, src, runs, rec) for rec in (False, True)]
    # the bundled model's wall and CPU ms per step, untraced and recorded: the median of its first and last timing
    ref = [[statistics.median([b[k], g[k]]) for k in (0, 1)] for b, g in zip(base, again)]
    report(rows, ref, (n_bundled, step_macs(cfg), base[0][2]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
