"""Decoding speed: our KV-cached decoder (untraced and fully traced) against transformers' generate().

    python benchmarks/decode.py [--threads 1 2] [--runs 20] [--smoke]

A seeded random MarianMTModel (d_model 256, 3+3 layers, 4 heads, FFN 1024, vocab 8000) is saved
with save_pretrained and converted with ``model.io.marian.import_marian``, so both engines run the
same weights. Batch 1, a 15-token source (</s> included), exactly 30 generated tokens: </s> gets a
final_logits_bias of -1e4 in the saved model, so neither engine can stop early. Each engine runs
in its own process (this script with ``--worker``) per thread count; figures are medians of
``--runs`` timed runs after warm-up, then medians over ``--rounds`` alternating rounds.
Prints a table and one verdict line per target; asserts nothing.

Targets: ours untraced >= 1.5x faster than transformers; ours traced (record=True, every stage of
every step) no slower than transformers; KV-cached step time at step 40 / step 5 <= 1.3; full
teacher-forced trace / untraced forward <= 3x.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from model.core.jsonio import dumps

FULL = dict(d_model=256, layers=3, heads=4, ffn=1024, vocab=8000, runs=20, warmup=2)
SMOKE = dict(d_model=32, layers=1, heads=4, ffn=64, vocab=300, runs=2, warmup=1)
SRC_LEN, NEW_TOKENS, BEAM, STEP_EARLY, STEP_LATE = 15, 30, 5, 5, 40


# ------------------------------------------------------------------------------------------- set-up


def build_marian(hf_dir: Path, size: dict, seed: int = 0) -> None:
    """Save a seeded random MarianMTModel (with a word-level tokenizer.json) to ``hf_dir``."""
    import torch
    from tokenizers import Tokenizer, models
    from transformers import MarianMTModel

    from model.testing import marian_config

    V = size["vocab"]
    eos, unk, pad = 0, 1, V - 1  # Marian's layout
    cfg = marian_config(V, size, pad, eos, max_position_embeddings=128)
    torch.manual_seed(seed)
    model = MarianMTModel(cfg).eval()
    with torch.no_grad():
        bias = 0.5 * torch.randn_like(model.final_logits_bias)
        bias[0, eos] = -1.0e4  # never end: exactly NEW_TOKENS tokens in both engines
        model.final_logits_bias.copy_(bias)
    model.save_pretrained(hf_dir, safe_serialization=True)
    vocab = {"</s>": eos, "<unk>": unk, **{f"w{i}": i for i in range(2, V - 1)}, "<pad>": pad}
    Tokenizer(models.WordLevel(vocab, unk_token="<unk>")).save(str(hf_dir / "tokenizer.json"))


def source_ids(vocab: int, seed: int = 1) -> list[int]:
    import torch

    g = torch.Generator().manual_seed(seed)
    return [*torch.randint(2, vocab - 1, (SRC_LEN - 1,), generator=g).tolist(), 0]  # </s> = 0 last


def median_ms(fn, runs: int, warmup: int) -> tuple[float, object]:
    out = None
    for _ in range(warmup):
        out = fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return 1000 * statistics.median(times), out


# ------------------------------------------------------------------------------------------- workers


def hf_generation(c, beams: int, banned: list[int], max_new: int):
    """transformers' settings of a decode as ours runs it: ``beams`` wide (1: greedy), ``max_new`` tokens at most,
    the ``banned`` ids never chosen, no early stop and no length penalty (``c``: the Marian model's config)."""
    from transformers import GenerationConfig

    return GenerationConfig(
        decoder_start_token_id=c.decoder_start_token_id,
        pad_token_id=c.pad_token_id,
        eos_token_id=c.eos_token_id,
        forced_eos_token_id=None,
        bad_words_ids=[[i] for i in banned],
        num_beams=beams,
        do_sample=False,
        max_new_tokens=max_new,
        early_stopping=False,
        length_penalty=1.0,
    )


def worker_ours(model_dir: Path, threads: int, runs: int, warmup: int) -> dict:
    import torch

    from model.io.checkpoint import load_model_dir, use_threads

    use_threads(threads)
    from model.decode.decoding import DecodeOptions, decode
    from model.decode.lean import LeanDecoder
    from model.decode.trace import teacher_forced_trace

    loaded = load_model_dir(model_dir)
    model, tok, cfg = loaded.model, loaded.tokenizer, loaded.cfg
    lean = LeanDecoder(model, rows=BEAM)  # built once per model, as the CLI does
    src = source_ids(cfg.vocab_size)
    res = {}
    for name, opts in {
        "greedy": DecodeOptions(strategy="greedy", max_len=NEW_TOKENS),
        "beam": DecodeOptions(strategy="beam", beam=BEAM, max_len=NEW_TOKENS),
        "greedy_traced": DecodeOptions(strategy="greedy", max_len=NEW_TOKENS, record=True),
        "beam_traced": DecodeOptions(strategy="beam", beam=BEAM, max_len=NEW_TOKENS, record=True),
    }.items():
        use_threads(threads, single_row=name.startswith("greedy"))  # as the CLI: see use_threads
        ms, out = median_ms(lambda o=opts: decode(model, src, o, lean), runs, warmup)
        res[name], res[f"{name}_tokens"] = ms, len(out.ids)

    # one KV-cached decoder step as untraced decoding runs it (LeanDecoder.step, batch 1) with STEP_EARLY or
    # STEP_LATE positions cached
    use_threads(threads, single_row=True)
    with torch.inference_mode():
        memory, src_mask, _ = model.encode(torch.tensor([src]))
        cache, token, fed = lean.start(memory, src_mask), cfg.decoder_start_id, {}
        for t in range(STEP_LATE + 1):
            fed[t] = token
            logits, cache, _ = lean.step([token], cache)
            token = int(logits[0, 2:-1].argmax()) + 2

    def step_at(t: int):  # positions before t stay as decoded; position t is rewritten with the same token
        cache.t = t
        return lean.step([fed[t]], cache)

    for t in (STEP_EARLY, STEP_LATE):
        res[f"step{t}"], _ = median_ms(lambda t=t: step_at(t), max(runs, 50) * 5, 10)

    # full teacher-forced trace against the untraced forward pass on the same shapes
    use_threads(threads)
    target = source_ids(cfg.vocab_size, seed=2)[:-1] * 3  # 42 ids; the trace appends nothing to the target
    target = target[:NEW_TOKENS]
    s, y = torch.tensor([src]), torch.tensor([[cfg.decoder_start_id, *target]])
    with torch.inference_mode():
        res["forward"], _ = median_ms(lambda: model(s, y), runs, warmup)
    res["trace"], tr = median_ms(lambda: teacher_forced_trace(model, tok, src[:-1], target), runs, warmup)
    res["trace_arrays"] = len(tr.arrays)
    return res


def worker_hf(hf_dir: Path, threads: int, runs: int, warmup: int) -> dict:
    import torch

    torch.set_num_threads(threads)
    from transformers import MarianMTModel

    model = MarianMTModel.from_pretrained(hf_dir).eval()  # default attention implementation (sdpa)
    c = model.config
    src = torch.tensor([source_ids(c.vocab_size)])
    res = {}
    for name, beams in (("greedy", 1), ("beam", BEAM)):
        gen = hf_generation(c, beams, [c.pad_token_id], NEW_TOKENS)
        ms, out = median_ms(lambda g=gen: model.generate(src, generation_config=g), runs, warmup)
        res[name], res[f"{name}_tokens"] = ms, out.shape[1] - 1
    return res


# ----------------------------------------------------------------------------------------------- main


def run_worker(engine: str, path: Path, threads: list[int], size: dict, build: bool = False) -> dict[int, dict]:
    """One process for ``engine``, measuring each thread count in turn; {threads: figures}."""
    cmd = [
        sys.executable,
        __file__,
        "--worker",
        engine,
        "--path",
        str(path),
        "--threads",
        *map(str, threads),
        "--runs",
        str(size["runs"]),
        "--warmup",
        str(size["warmup"]),
    ]
    cmd += (["--build"] if build else []) + (["--smoke"] if size["smoke"] else [])
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode:
        sys.exit(f"{engine} worker failed:\n{out.stderr[-3000:]}")
    return {int(k): v for k, v in json.loads(out.stdout.strip().splitlines()[-1]).items()}


def report(results: dict[int, dict[str, dict]], size: dict) -> None:
    print(
        f"\nDecoding, batch 1, {SRC_LEN}-token source, {NEW_TOKENS} new tokens; random Marian model d_model="
        f"{size['d_model']}, {size['layers']}+{size['layers']} layers, {size['heads']} heads, FFN {size['ffn']}, "
        f"vocab {size['vocab']}; median of {size['runs']} runs (ms)\n"
    )
    head = f"{'threads':>7}  {'engine':<34}{'greedy':>9}{'beam 5':>9}{'tokens':>8}   {'speed-up vs transformers':<24}"
    print(head)
    print("-" * len(head))
    for n, r in results.items():
        hf, ours = r["hf"], r["ours"]
        rows = [
            ("transformers generate()", hf["greedy"], hf["beam"], hf["greedy_tokens"], hf["beam_tokens"]),
            ("ours, untraced", ours["greedy"], ours["beam"], ours["greedy_tokens"], ours["beam_tokens"]),
            (
                "ours, record=True (full trace)",
                ours["greedy_traced"],
                ours["beam_traced"],
                ours["greedy_traced_tokens"],
                ours["beam_traced_tokens"],
            ),
        ]
        for i, (name, g, b, gt, bt) in enumerate(rows):
            ratio = "" if i == 0 else f"{hf['greedy'] / g:.2f}x greedy, {hf['beam'] / b:.2f}x beam"
            print(f"{n:>7}  {name:<34}{g:>9.1f}{b:>9.1f}{f'{gt:.0f}/{bt:.0f}':>8}   {ratio}")
    print()
    head2 = f"{'threads':>7}  {'step 5':>8}{'step 40':>9}{'40/5':>7}   {'forward':>8}{'trace':>8}{'trace/fwd':>10}"
    print(head2 + "   (ms; one KV-cached decoder step; teacher-forced 15 -> 30 tokens)")
    print("-" * len(head2))
    for n, r in results.items():
        o = r["ours"]
        print(
            f"{n:>7}  {o['step5']:>8.3f}{o['step40']:>9.3f}{o['step40'] / o['step5']:>7.2f}   "
            f"{o['forward']:>8.2f}{o['trace']:>8.2f}{o['trace'] / o['forward']:>10.2f}"
        )
    print()
    for n, r in results.items():
        hf, o = r["hf"], r["ours"]
        fast = min(hf["greedy"] / o["greedy"], hf["beam"] / o["beam"])
        traced = min(hf["greedy"] / o["greedy_traced"], hf["beam"] / o["beam_traced"])
        verdicts = [
            (f"ours untraced >= 1.5x faster than transformers (worst of greedy/beam: {fast:.2f}x)", fast >= 1.5),
            (f"ours traced no slower than transformers (worst: {traced:.2f}x)", traced >= 1.0),
            (f"step 40 / step 5 <= 1.3 ({o['step40'] / o['step5']:.2f})", o["step40"] / o["step5"] <= 1.3),
            (f"trace / forward <= 3x ({o['trace'] / o['forward']:.2f}x)", o["trace"] / o["forward"] <= 3.0),
        ]
        for text, ok in verdicts:
            print(f"[threads {n}] {'PASS' if ok else 'FAIL'}  {text}")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="torch thread counts to measure")
    p.add_argument("--runs", type=int, default=None, help="timed runs per figure (default 20; --smoke: 2)")
    p.add_argument("--smoke", action="store_true", help="tiny model, 2 runs: checks the script end to end")
    p.add_argument(
        "--rounds", type=int, default=3, help="alternate the engines' processes this many times; medians over rounds"
    )
    p.add_argument("--worker", choices=["ours", "hf"], help=argparse.SUPPRESS)
    p.add_argument("--path", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--warmup", type=int, default=2, help=argparse.SUPPRESS)
    p.add_argument("--build", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    size = {**(SMOKE if a.smoke else FULL), "smoke": a.smoke}
    if a.worker:
        if a.build:
            build_marian(a.path, size)
        fn = worker_ours if a.worker == "ours" else worker_hf
        print(dumps({n: fn(a.path, n, a.runs, a.warmup) for n in a.threads}))
        return
    if a.runs:
        size["runs"] = a.runs
    from model.io.marian import import_marian  # no transformers import here: the hf worker builds the model

    t0, load = time.perf_counter(), os.getloadavg()[0]
    # --smoke: one process per engine for all thread counts; else one per engine and thread count
    groups = [a.threads] if a.smoke else [[n] for n in a.threads]
    rounds = 1 if a.smoke else max(a.rounds, 1)
    # a shared VM's speed drifts by 10-20 % over minutes: alternating the engines' processes and taking
    # the median over rounds keeps one slow minute from deciding a verdict
    per_round: dict[int, dict[str, list[dict]]] = {n: {"hf": [], "ours": []} for n in a.threads}
    with tempfile.TemporaryDirectory(prefix="decode-bench-") as tmp:
        hf_dir, ours_dir = Path(tmp) / "marian", Path(tmp) / "ours"
        for rnd in range(rounds):
            for i, group in enumerate(groups):
                for n, r in run_worker("hf", hf_dir, group, size, build=rnd == 0 and i == 0).items():
                    per_round[n]["hf"].append(r)
                if rnd == 0 and i == 0:
                    import_marian(hf_dir, ours_dir)
                for n, r in run_worker("ours", ours_dir, group, size).items():
                    per_round[n]["ours"].append(r)
    results = {
        n: {e: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for e, rs in eng.items()}
        for n, eng in per_round.items()
    }
    report(results, size)
    if rounds > 1:
        print(f"\n{rounds} rounds; untraced greedy ms per round, transformers / ours:")
        for n, eng in per_round.items():
            pairs = ", ".join(f"{h['greedy']:.0f}/{o['greedy']:.0f}" for h, o in zip(eng["hf"], eng["ours"]))
            print(f"  threads {n}: {pairs}")
    print(
        f"\n({time.perf_counter() - t0:.0f} s in all; load average {load:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end on {os.cpu_count()} CPUs)"
    )


if __name__ == "__main__":
    main()
